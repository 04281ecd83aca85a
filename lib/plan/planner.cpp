#include "plan/planner.hpp"

#include <algorithm>
#include <sstream>

#include "config/batch_rampup.hpp"
#include "core/errors.hpp"
#include "plan/report.hpp"

namespace gpt::plan {

namespace {

std::string default_device(const Config& cfg, bool plan_only) {
    if (cfg.plan.plan_device != PlanDevice::Auto) return std::string(to_string(cfg.plan.plan_device));
    if (cfg.parallel.device == DeviceKind::Cpu) return "cpu";
    // Plan-only usually runs on a login node for a GPU cluster; auto mode plans for the
    // backend this binary runs on.
    if (plan_only || cfg.parallel.device == DeviceKind::Cuda) return "h100-80gb";
    return GPT_HAVE_CUDA ? "h100-80gb" : "cpu";
}

}  // namespace

SearchInputs search_inputs_from_config(const Config& cfg, int world_size, int local_world_size, bool plan_only) {
    SearchInputs in;
    in.model = model_shape_from_config(cfg);
    in.device = find_device_preset(default_device(cfg, plan_only));
    require_fp8_device(in.model, in.device);
    in.fabric = default_fabric(in.device);
    if (double v = cfg.plan.plan_intra_node_gbps; v > 0) in.fabric.intra_node_gbps = v;
    if (double v = cfg.plan.plan_inter_node_gbps; v > 0) in.fabric.inter_node_gbps = v;
    in.world_size = world_size;
    in.local_world_size = local_world_size > 0 ? local_world_size : world_size;
    if (!in.device.is_gpu) in.device = cpu_preset_for_host(in.device, in.local_world_size);
    DeviceMemory mem = device_memory(in.device, in.local_world_size);
    in.device_memory_bytes = mem.bytes;
    in.device_memory_source = mem.source;

    const ParallelConfig& p = cfg.parallel;
    if (p.tp_given) in.tp = p.tensor_model_parallel_size;
    if (p.pp_given) in.pp = p.pipeline_model_parallel_size;
    if (p.data_parallel_size > 0) in.dp = p.data_parallel_size;
    if (cfg.training.global_batch_size > 0) {
        in.global_batch = cfg.training.global_batch_size;
        for (const std::int64_t b : BatchRampup(cfg).batch_sizes())
            if (b < in.global_batch) in.scheduled_batches.push_back(b);
    }
    if (cfg.training.max_global_batch_size > 0) in.max_global_batch = cfg.training.max_global_batch_size;
    if (p.mbs_given) in.micro_batch = cfg.training.micro_batch_size;
    in.layers_per_virtual_stage = p.num_layers_per_virtual_pipeline_stage;
    in.vp = p.num_virtual_stages_per_pipeline_rank;
    in.split = p.split();
    // A layout's stages are PP x VP: the planner keeps both.
    if (!in.split.layout.empty()) {
        GPT_REQUIRE(p.pp_given, UsageError,
                    "--pipeline-model-parallel-layout needs --pipeline-model-parallel-size (its stages are PP x the "
                    "virtual stages)");
        in.vp = p.virtual_stages(cfg.model.num_layers);
    }
    // Switches have no "given" flag: a switch the user turned on is kept on; one left off
    // is the planner's to choose.
    if (p.recompute() != Recompute::None) in.recompute = p.recompute();
    in.require_sequence_parallel = p.sequence_parallel;
    in.require_distributed_optimizer = p.use_distributed_optimizer;
    return in;
}

void apply_layout(const Layout& l, int num_layers, Config& cfg) {
    ParallelConfig& p = cfg.parallel;
    p.tensor_model_parallel_size = l.tp;
    p.pipeline_model_parallel_size = l.pp;
    p.data_parallel_size = l.dp;
    // Uneven stages take their chunks as a count (Megatron's rule); a count the user gave stays one.
    if (!l.split.layout.empty()) {
        // The layout string gives the virtual stages; the two counts stay unset.
    } else if (l.split.uneven() || p.num_virtual_stages_per_pipeline_rank > 0) {
        p.num_virtual_stages_per_pipeline_rank = l.vp > 1 ? l.vp : 0;
        p.num_layers_per_virtual_pipeline_stage = 0;
    } else {
        p.num_layers_per_virtual_pipeline_stage = l.vp > 1 ? l.split.split_layers(num_layers) / (l.pp * l.vp) : 0;
    }
    p.sequence_parallel = l.sequence_parallel;
    p.use_distributed_optimizer = l.distributed_optimizer;
    switch (l.recompute) {
        case Recompute::None:
            p.recompute_activations = false;
            p.recompute_granularity = RecomputeGranularity::None;
            p.recompute_method = RecomputeMethod::None;
            p.recompute_num_layers = 0;
            break;
        case Recompute::Selective:
            p.recompute_activations = true;
            p.recompute_granularity = RecomputeGranularity::Selective;
            p.recompute_method = RecomputeMethod::None;
            p.recompute_num_layers = 0;
            break;
        case Recompute::Full:
            // The search's choice is every layer's input checkpointed on its own (uniform,
            // one layer per group): 2sbh per layer.
            p.recompute_activations = false;
            p.recompute_granularity = RecomputeGranularity::Full;
            p.recompute_method = l.recompute_block ? RecomputeMethod::Block : RecomputeMethod::Uniform;
            p.recompute_num_layers = l.recompute_layers;
            break;
    }
    cfg.training.micro_batch_size = l.micro_batch;
    cfg.training.global_batch_size = l.global_batch;
}

void print_plan(const Config& cfg, std::ostream& out) {
    GPT_REQUIRE(cfg.plan.world_size > 0, UsageError,
                "--plan-only needs --world-size (the number of ranks to plan for), e.g. --world-size 16 --local-world-size 8");
    SearchInputs in = search_inputs_from_config(cfg, cfg.plan.world_size, cfg.plan.local_world_size, true);
    SearchResult r = search_layouts(in);
    if (cfg.plan.plan_format == PlanFormat::Json) write_plan_json(in, r, out);
    else write_plan_table(in, r, out);
}

std::string choose_layout(Config& cfg, int world_size, int local_world_size) {
    SearchInputs in = search_inputs_from_config(cfg, world_size, local_world_size, false);
    GPT_REQUIRE(in.global_batch > 0 || in.max_global_batch > 0, UsageError,
                "automatic parallel layout needs --global-batch-size or --max-global-batch-size. HINT: or give "
                "--tensor-model-parallel-size and --pipeline-model-parallel-size yourself");
    SearchResult r = search_layouts(in);
    if (r.feasible.empty()) {
        std::ostringstream os;
        os << "no parallel layout of " << world_size << " ranks (" << in.local_world_size
           << " per node) fits this model and batch. Closest attempts:";
        for (std::size_t i = 0; i < r.rejected.size() && i < 6; ++i)
            os << "\n  " << r.rejected[i].layout.describe() << ": " << r.rejected[i].reason;
        os << "\nHINT: run with --plan-only to see every layout, add nodes, or lower the batch size";
        throw UsageError(os.str());
    }
    apply_layout(r.feasible.front().layout, in.model.num_layers, cfg);
    return describe_choice(in, r);
}

}  // namespace gpt::plan

namespace gpt::plan {

Layout layout_from_config(const Config& cfg) {
    const ParallelConfig& p = cfg.parallel;
    Layout l;
    l.tp = p.tensor_model_parallel_size;
    l.pp = p.pipeline_model_parallel_size;
    l.dp = p.data_parallel_size;
    l.vp = p.virtual_stages(cfg.model.num_layers);
    l.split = p.split();
    l.micro_batch = cfg.training.micro_batch_size;
    l.global_batch = cfg.training.global_batch_size;
    l.recompute = p.recompute();
    if (l.recompute == Recompute::Full) {
        l.recompute_layers = std::max(p.recompute_num_layers, 1);
        l.recompute_block = p.recompute_method == RecomputeMethod::Block;
    }
    l.sequence_parallel = p.sequence_parallel && p.tensor_model_parallel_size > 1;
    l.distributed_optimizer = p.use_distributed_optimizer;
    if (l.global_batch > 0 && l.micro_batch > 0 && l.dp > 0)
        l.ramp_micro_batches = ramp_micro_batch_counts(cfg, l.micro_batches(), l.dp, l.vp > 1 ? l.pp : 1);
    return l;
}

std::string check_memory(const Config& cfg, int world_size, int local_world_size) {
    const SearchInputs in = search_inputs_from_config(cfg, world_size, local_world_size, false);
    const Layout l = layout_from_config(cfg);
    const MemoryBreakdown m = peak_memory(in.model, l, in.device);
    constexpr double GiB = 1024.0 * 1024.0 * 1024.0;
    const double have = static_cast<double>(in.device_memory_bytes);
    std::ostringstream os;
    os.setf(std::ios::fixed);
    os.precision(2);
    os << l.describe() << " needs " << m.total() / GiB << " GiB per rank on pipeline stage "
       << m.stage << " (weights " << m.weights / GiB;
    if (m.fp8 > 0) os << ", FP8 weight copies and scaling state " << m.fp8 / GiB;
    os << ", gradients " << m.gradients / GiB
       << ", optimizer " << m.optimizer / GiB << ", activations " << m.activations / GiB
       << ", buffers " << (m.buffers + m.fragmentation) / GiB << ") of " << have / GiB
       << " GiB on " << in.device.name << " (" << in.device_memory_source << ")";
    std::ostringstream shortfall;
    shortfall.setf(std::ios::fixed);
    shortfall.precision(2);
    shortfall << (m.total() - have) / GiB;
    GPT_REQUIRE(m.total() <= have, UsageError, "predicted out of memory by ", shortfall.str(),
                " GiB: ", os.str(),
                ". HINT: use more ranks or larger TP/PP, --use-distributed-optimizer, "
                "--recompute-activations, a smaller --micro-batch-size, or leave out TP/PP "
                "and give --max-global-batch-size so the planner chooses; "
                "gpt_pretrain --plan-only lists what fits");
    return "> predicted memory: " + os.str();
}

}  // namespace gpt::plan
