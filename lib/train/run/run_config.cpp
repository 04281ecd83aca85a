#include "train/run/run_config.hpp"

#include <sstream>

#include "config/params_dtype.hpp"
#include "config/validate.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "text/tiktoken_tokenizer.hpp"
#include "dist/rank_grid.hpp"
#include "log/log.hpp"
#include "plan/model_shape.hpp"
#include "plan/planner.hpp"
#include "train/run/eod_token.hpp"
#include "train/run/model_options.hpp"
#include "train/run/run_config_steps.hpp"

namespace gpt::train {

void resolve_vocab(Config& cfg) {
    if (cfg.data.tokenizer_type == TokenizerType::TikTokenizer) {
        // Megatron's TikTokenizer: --vocab-size (all ids, special tokens included; the rank
        // file is cut to it) or, unlike Megatron's 2^17 fallback, the file's ranks + special
        // tokens. Loading checks the flags and the file on every rank before training starts.
        cfg.model.vocab_size = data::TikTokenizer::load(tiktoken_options(cfg)).vocab_size();
        return;
    }
    if (cfg.model.vocab_size > 0) return;
    if (!cfg.data.vocab_file.empty()) {
        cfg.model.vocab_size =
            data::Gpt2Tokenizer::load(cfg.data.vocab_file, cfg.data.merge_file).vocab_size();
        return;
    }
    GPT_THROW(UsageError, "the vocab size is unknown: give --vocab-file and --merge-file (GPT-2 BPE) or --vocab-size");
}

ResolvedFlags resolve_flags(Config cfg, int world_size, int local_world_size) {
    validate_model_and_training(cfg);
    validate_training_length(cfg.training);
    // Megatron's --fp8-interval is deprecated and ignored (Transformer Engine 1.8 and later
    // update the FP8 scaling factors every step): accepted and ignored here too, said once.
    if (cfg.fp8.fp8_interval != 1)
        GPT_LOG(warning) << "--fp8-interval " << cfg.fp8.fp8_interval
                         << " is ignored: deprecated in Megatron-LM, the FP8 scaling factors are updated every step";
    const bool auto_layout = !cfg.parallel.tp_given && !cfg.parallel.pp_given &&
                             (cfg.training.max_global_batch_size > 0 || !cfg.parallel.mbs_given);
    std::string plan_summary;
    if (auto_layout && cfg.training.max_global_batch_size > 0) {
        resolve_vocab(cfg);  // the planner sizes the embeddings
        plan_summary = plan::choose_layout(cfg, world_size, local_world_size);
    }
    if (cfg.training.micro_batch_size == 0)
        GPT_THROW(UsageError, "--micro-batch-size auto needs the planner and --max-global-batch-size");
    resolve_layout(cfg, world_size);
    const dist::RankGrid grid(world_size, cfg.parallel.tensor_model_parallel_size,
                              cfg.parallel.pipeline_model_parallel_size);
    return {std::move(cfg), grid, std::move(plan_summary)};
}

namespace {

// What every run derives alike, training's or generation's. A tool that trains nothing
// (prepare_cache) probes no GPU: it runs on login nodes, and the device stays RunDevice's
// default, which nothing there reads.
RunConfig common_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size, bool probe_device = true) {
    RunConfig run;
    run.cfg = cfg;
    run.world_size = grid.world_size();
    run.local_world_size = local_world_size;
    run.dtype = params_dtype(cfg.training);
    if (probe_device) run.device = resolve_device(cfg.parallel.device);
    return run;
}

}  // namespace

RunConfig derive_common(const Config& cfg, const dist::RankGrid& grid, int local_world_size, bool probe_device) {
    RunConfig run = common_run(cfg, grid, local_world_size, probe_device);
    run.padded_vocab_size = cfg.padded_vocab_size();
    run.num_micro_batches = micro_batches_per_iteration(cfg.training, grid.dp_size());
    run.model_options = model_options_of(cfg, run.dtype);
    return run;
}

RunConfig resolve_data_run(Config cfg, int world_size, int local_world_size) {
    ResolvedFlags r = resolve_flags(std::move(cfg), world_size, local_world_size);
    RunConfig run = derive_common(r.cfg, r.grid, local_world_size, false);
    run.plan_summary = std::move(r.plan_summary);
    return run;
}

RunConfig generation_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size,
                         std::int64_t stored_vocab_rows) {
    RunConfig run = common_run(cfg, grid, local_world_size);
    run.padded_vocab_size = static_cast<int>(stored_vocab_rows);
    run.model_options = generation_model_options(cfg);
    return run;
}

std::string describe_layout(const RunConfig& run) {
    const Config& cfg = run.cfg;
    const dist::RankGrid g(run.world_size, cfg.parallel.tensor_model_parallel_size,
                           cfg.parallel.pipeline_model_parallel_size);
    std::ostringstream os;
    os << "> parallel layout: world " << g.world_size() << " = TP " << g.tp_size() << " x PP "
       << g.pp_size() << " x DP " << g.dp_size() << "; micro-batch " << cfg.training.micro_batch_size
       << ", global batch " << cfg.training.global_batch_size << " (" << run.num_micro_batches
       << " micro-batches per iteration)\n";
    os << "> rank layout (global rank: tp dp pp):";
    for (int r = 0; r < g.world_size(); ++r) {
        auto c = g.coords(r);
        os << (r % 8 == 0 ? "\n   " : "  ") << r << ": " << c.tp << " " << c.dp << " " << c.pp;
    }
    return os.str();
}

std::string check_run_memory(const RunConfig& run) {
    Config planned = run.cfg;
    // The run's device; --device cuda without a visible GPU (refused when the backend is
    // built, after this line) is measured on the CPU too, as there is no GPU to measure.
    if (planned.plan.plan_device == PlanDevice::Auto &&
        (run.device.kind == DeviceKind::Cpu || visible_gpu_count() == 0))
        planned.plan.plan_device = PlanDevice::Cpu;
    return plan::check_memory(planned, run.world_size, run.local_world_size);
}

}  // namespace gpt::train
