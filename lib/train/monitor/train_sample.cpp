#include "train/monitor/train_sample.hpp"

#include <algorithm>

#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "inference/generator.hpp"
#include "inference/text.hpp"
#include "log/log.hpp"

namespace gpt::train {

TrainingSampler::TrainingSampler(const Config& cfg, dist::ProcessGroups& groups, dist::Communicator& tp,
                                 Backend& backend, const model::GptModel& chunk)
    : cfg_(cfg.sample), groups_(groups), tp_(tp), be_(backend) {
    const auto tok = data::Gpt2Tokenizer::load(cfg.data.vocab_file, cfg.data.merge_file);
    eod_ = tok.eod();
    vocab_ = std::min<std::int64_t>(tok.vocab_size(), chunk.dims().vocab_padded);
    // "<|endoftext|>" alone means no prompt: start from EOD, as GPT-2's unconditional samples.
    if (cfg_.sample_prompt != "<|endoftext|>") prompt_ = tok.encode(cfg_.sample_prompt);
    if (prompt_.empty()) prompt_.push_back(eod_);
    GPT_REQUIRE(static_cast<int>(prompt_.size()) < chunk.dims().max_positions, UsageError, "--sample-prompt has ",
                prompt_.size(), " tokens; the model has ", chunk.dims().max_positions, " positions");
    for (std::int32_t i = 0; i < tok.vocab_size(); ++i) token_text_.push_back(tok.token_bytes(i));
}

void TrainingSampler::after_iteration(std::int64_t iteration, const model::GptModel& chunk) {
    if (cfg_.sample_interval <= 0 || iteration % cfg_.sample_interval != 0) return;
    if (groups_.coords().dp != 0) return;  // one TP group samples; the replicas hold the same model
    std::vector<float> params(static_cast<std::size_t>(chunk.layout().total_elements()));
    chunk.get_parameters(params.data());
    inference::KvModel model(chunk.dims(), chunk.options(), be_, tp_, params);
    inference::GenerationRequest rq;
    rq.prompts = {prompt_};
    rq.max_new_tokens = std::min(cfg_.sample_tokens, chunk.dims().max_positions - static_cast<int>(prompt_.size()));
    rq.sampling.greedy = cfg_.sample_seed < 0;
    rq.sampling.top_k = 40;
    rq.sampling.seed = static_cast<std::uint64_t>(std::max<std::int64_t>(cfg_.sample_seed, 0));
    rq.vocab = vocab_;
    rq.eod = eod_;
    rq.batch_size = 1;
    const inference::Generation g = inference::generate(model, rq).front();
    if (groups_.rank() != 0) return;
    std::string bytes;
    for (std::int32_t id : g.tokens)
        if (id != eod_) bytes += token_text_[static_cast<std::size_t>(id)];
    GPT_LOG(info) << "sample at iteration " << iteration << " (" << (rq.sampling.greedy ? "greedy" : "top-k 40")
                  << ", " << g.tokens.size() << " tokens):\n---\n"
                  << (cfg_.sample_prompt == "<|endoftext|>" ? std::string() : cfg_.sample_prompt)
                  << inference::utf8_replace_invalid(bytes) << "\n---";
}

}  // namespace gpt::train
