#include "train/run/eod_token.hpp"

#include <string>
#include <utility>

#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"

namespace gpt::train {

data::TikTokenizerOptions tiktoken_options(const Config& cfg) {
    return {cfg.data.tokenizer_model, cfg.data.tiktoken_pattern, cfg.data.tiktoken_num_special_tokens,
            cfg.data.tiktoken_special_tokens, cfg.model.vocab_size};
}

namespace {
// The flags of the run that read the EOD, for its messages.
std::string eod_flags(const Config& cfg) {
    std::string f;
    for (const auto& [on, name] : {std::pair{cfg.data.eod_mask_loss, "--eod-mask-loss"},
                                   std::pair{cfg.data.reset_position_ids, "--reset-position-ids"},
                                   std::pair{cfg.data.reset_attention_mask, "--reset-attention-mask"}})
        if (on) f += (f.empty() ? "" : ", ") + std::string(name);
    return f.empty() ? "--eod-mask-loss" : f;
}
}  // namespace

std::int32_t end_of_document_token(const Config& cfg) {
    std::int32_t eod = -1;
    if (cfg.data.tokenizer_type == TokenizerType::TikTokenizer) {
        eod = data::TikTokenizer::load(tiktoken_options(cfg)).eod();
    } else if (!cfg.data.vocab_file.empty()) {
        eod = data::Gpt2Tokenizer::load(cfg.data.vocab_file, cfg.data.merge_file).eod();
    } else if (cfg.data.use_mock()) {
        eod = cfg.model.vocab_size - 1;  // MockGptDataset ends its synthetic documents with it
    } else {
        GPT_THROW(UsageError, eod_flags(cfg), " needs the end-of-document token, which comes from the tokenizer: "
                              "give --vocab-file and --merge-file (GPT2BPETokenizer) or --tokenizer-model (TikTokenizer)");
    }
    GPT_REQUIRE(eod >= 0 && eod < cfg.model.vocab_size, UsageError, eod_flags(cfg),
                ": the tokenizer's end-of-document token ",
                eod, " lies outside the vocabulary of ", cfg.model.vocab_size, " tokens (--vocab-size)");
    return eod;
}

}  // namespace gpt::train
