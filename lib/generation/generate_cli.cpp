#include "generation/generate_cli.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include "backend/backend.hpp"
#include "config/options.hpp"
#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "dist/process_groups.hpp"
#include "train/run/device_backend.hpp"
#include "train/run/run_config.hpp"
#include "train/trainer.hpp"
#include "inference/generator.hpp"
#include "inference/kv_model.hpp"
#include "generation/load_model.hpp"
#include "inference/text.hpp"

namespace gpt::generation {
using inference::Generation;
using inference::GenerationRequest;
using inference::KvModel;



namespace {

std::vector<std::string> read_prompt_file(const std::string& path) {
    std::ifstream in(path);
    GPT_REQUIRE(in, UsageError, "--prompt-file ", path, ": cannot open it");
    std::vector<std::string> out;
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        out.push_back(line);
    }
    return out;
}

void write_text(std::ostream& out, const std::string& prompt, const std::string& completion, bool last) {
    out << prompt << completion << "\n";
    if (!last) out << "----\n";
}

void write_jsonl(std::ostream& out, const std::string& prompt, const std::string& completion,
                 const std::vector<std::int32_t>& prompt_ids, const Generation& g) {
    auto ints = [](const std::vector<std::int32_t>& v) {
        std::string s = "[";
        for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
        return s + "]";
    };
    std::ostringstream lp;
    lp.precision(9);
    lp << "[";
    for (std::size_t i = 0; i < g.log_probs.size(); ++i) lp << (i ? "," : "") << g.log_probs[i];
    lp << "]";
    out << "{\"prompt\":" << inference::json_string(prompt) << ",\"completion\":" << inference::json_string(completion)
        << ",\"prompt_tokens\":" << ints(prompt_ids) << ",\"tokens\":" << ints(g.tokens)
        << ",\"log_probs\":" << lp.str() << ",\"finish_reason\":\"" << (g.eod ? "eod" : "length") << "\"}\n";
}

}  // namespace

int run_generate(const GenerateOptions& o, MPI_Comm comm, std::ostream& out, std::ostream& err) {
    int rank = 0, world = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &world);
    // The layout asked for, before the checkpoint is read (the user's flags alone).
    const Config asked = parse_args(o.other).config;
    const int tp = asked.parallel.tensor_model_parallel_size;
    GPT_REQUIRE(asked.parallel.pipeline_model_parallel_size == 1, UsageError,
                "gpt_generate runs tensor parallelism only: --pipeline-model-parallel-size ",
                asked.parallel.pipeline_model_parallel_size, " is not supported (any checkpoint layout loads "
                "into TP ranks; use --tensor-model-parallel-size)");
    GPT_REQUIRE(world == tp, UsageError, "gpt_generate runs tensor parallelism only: the ", world,
                " ranks must equal --tensor-model-parallel-size ", tp, " (no data parallelism)");
    dist::ProcessGroups groups(comm, tp, 1);
    const LoadedModel lm = load_model(comm, o.load, o.ckpt_step, o.other, groups.tp().rank(), tp);
    const Config& cfg = lm.cfg;
    if (rank == 0) err << "gpt_generate: loaded " << lm.file << " (iteration " << lm.iteration << ")\n";
    GPT_REQUIRE(!cfg.data.vocab_file.empty() && !cfg.data.merge_file.empty(), UsageError,
                "the checkpoint names no GPT-2 tokenizer files: give --vocab-file and --merge-file");
    const data::Gpt2Tokenizer tok = data::Gpt2Tokenizer::load(cfg.data.vocab_file, cfg.data.merge_file);
    GPT_REQUIRE(tok.vocab_size() <= lm.dims.vocab_padded, UsageError, "the tokenizer's ", tok.vocab_size(),
                " tokens do not fit the checkpoint's vocabulary of ", lm.dims.vocab_padded);

    std::vector<std::string> texts = o.prompt_file.empty() ? o.prompts : read_prompt_file(o.prompt_file);
    GPT_REQUIRE(!texts.empty(), UsageError, "--prompt-file ", o.prompt_file, " holds no prompt");
    GenerationRequest rq;
    for (const std::string& t : texts) {
        rq.prompts.push_back(tok.encode(t));
        // An empty prompt starts from <|endoftext|>, as GPT-2's unconditional samples do.
        if (rq.prompts.back().empty()) rq.prompts.back().push_back(tok.eod());
    }
    rq.max_new_tokens = o.max_new_tokens;
    rq.sampling = o.sampling;
    rq.vocab = tok.vocab_size();
    rq.eod = tok.eod();
    rq.batch_size = o.batch_size;

    // Resolved as training's run is (the device, the dtype), with generation's model options.
    const train::RunConfig run =
        train::generation_run(cfg, groups.grid(), groups.local_size(), lm.dims.vocab_padded);
    if (!run.device.auto_fallback.empty() && rank == 0)
        err << "gpt_generate: --device auto: no usable GPU (" << run.device.auto_fallback << "); using the CPU\n";
    const std::unique_ptr<Backend> be = train::make_run_backend(run.device, groups.local_rank());
    // The TP communicator for backend memory (NCCL or host-staged on a GPU), as training's.
    const std::unique_ptr<dist::DataGroups> data = train::make_data_groups(run.cfg, groups, *be);
    KvModel model(lm.dims, run.model_options, *be, data->tp(), lm.params);
    inference::GenerationStats stats;
    const std::vector<Generation> gens = inference::generate(model, rq, &stats);
    if (rank != 0) return 0;
    err << "gpt_generate: prefill " << stats.prefill_tokens << " tokens in " << stats.prefill_s << " s ("
        << stats.prefill_tokens / std::max(stats.prefill_s, 1e-9) << " tokens/s), decode " << stats.decode_tokens
        << " tokens in " << stats.decode_s << " s (" << stats.decode_tokens / std::max(stats.decode_s, 1e-9)
        << " tokens/s)\n";
    for (std::size_t i = 0; i < gens.size(); ++i) {
        const Generation& g = gens[i];
        std::vector<std::int32_t> shown = g.tokens;
        if (g.eod && !shown.empty()) shown.pop_back();  // the EOD ends the text, it is not part of it
        const std::string completion = inference::utf8_replace_invalid(tok.decode(shown));
        if (o.output_format == OutputFormat::Jsonl)
            write_jsonl(out, texts[i], completion, rq.prompts[i], g);
        else
            write_text(out, texts[i], completion, i + 1 == gens.size());
    }
    out.flush();
    return 0;
}

}  // namespace gpt::generation
