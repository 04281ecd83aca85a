#include "plan/report.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/errors.hpp"

namespace gpt::plan {

namespace {

constexpr double kGiB = double(1ull << 30);

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// JSON has no NaN or infinity; a non-finite prediction is a bug in the models.
std::string num(double v) {
    GPT_ASSERT(std::isfinite(v), "non-finite value in the plan report");
    return fmt("%.6g", v);
}

// Byte counts as whole numbers, so tools need not round.
std::string bytes(double v) {
    GPT_ASSERT(std::isfinite(v) && v >= 0, "invalid byte count in the plan report");
    return fmt("%.0f", v);
}

std::string model_line(const SearchInputs& in) {
    const ModelShape& m = in.model;
    std::ostringstream os;
    os << "GPT " << m.num_layers << " layers, hidden " << m.hidden << ", " << m.heads << " heads, ffn " << m.ffn
       << ", seq " << m.seq << ", vocab " << m.vocab << " (padded " << padded_vocab(m, 1) << " at TP 1), "
       << dtype_name(m.dtype) << (m.flash_attention ? ", flash attention" : "") << ": "
       << fmt("%.2f", double(total_params(m)) / 1e9) << " B parameters";
    return os.str();
}

// "FP8 hybrid (E4M3 forward, E5M2 gradients), recipe delayed (...): ...": what runs in FP8
// and at which peak; "" without FP8.
std::string fp8_line(const SearchInputs& in) {
    const Fp8Config& f = in.model.fp8;
    if (!f.enabled()) return "";
    std::ostringstream os;
    os << "FP8 " << f.fp8_format
       << (f.fp8_format == Fp8Scheme::Hybrid ? " (E4M3 forward, E5M2 gradients)" : " (E4M3 throughout)")
       << ", recipe " << f.fp8_recipe;
    if (f.fp8_recipe == Fp8Recipe::Delayed)
        os << " (amax history " << f.fp8_amax_history_len << ", " << f.fp8_amax_compute_algo << ", margin "
           << f.fp8_margin << ")";
    os << ": the linear layers' forward, data-gradient" << (f.fp8_wgrad ? " and weight-gradient" : "")
       << " GEMMs at " << fmt("%.4g", in.device.peak_tflops_fp8) << " TFLOP/s peak"
       << (f.fp8_wgrad ? "" : " (weight gradients 16-bit: --no-fp8-wgrad)");
    const int start = f.bf16_layers_at_start(), end = f.bf16_layers_at_end(), n = in.model.num_layers;
    auto range = [](int first, int last) {
        return first == last ? std::to_string(first) : std::to_string(first) + "-" + std::to_string(last);
    };
    if (start + end > 0) {
        os << "; 16-bit layer" << (start + end > 1 ? "s " : " ") << (start > 0 ? range(1, start) : "")
           << (start > 0 && end > 0 ? " and " : "") << (end > 0 ? range(n - end + 1, n) : "")
           << " (--first-last-layers-bf16)";
    }
    os << "; attention, embedding and output layer 16-bit. FP8 weight copies and scaling state are in the "
          "weights column";
    return os.str();
}

// "FP8 GEMMs: 61.3% of the GEMM time (0.812 of 1.325 s)".
std::string fp8_share(const TimeBreakdown& t) {
    return "FP8 GEMMs: " + fmt("%.1f", t.gemm > 0 ? 100 * t.gemm_fp8 / t.gemm : 0.0) + "% of the GEMM time (" +
           fmt("%.3f", t.gemm_fp8) + " of " + fmt("%.3f", t.gemm) + " s)";
}

std::string batch_line(const SearchInputs& in, const SearchResult& r) {
    if (in.global_batch) return "global batch " + std::to_string(in.global_batch) + " (given)";
    if (in.max_global_batch)
        return "global batch <= " + std::to_string(in.max_global_batch) + ", divisible by micro-batch x DP";
    (void)r;
    return "no global batch given: each layout assumes 4 x PP micro-batches per replica";
}

}  // namespace

std::string json_quote(const std::string& s) {
    std::string o = "\"";
    for (unsigned char c : s) {
        switch (c) {
            case '"': o += "\\\""; break;
            case '\\': o += "\\\\"; break;
            case '\n': o += "\\n"; break;
            case '\t': o += "\\t"; break;
            case '\r': o += "\\r"; break;
            default:
                if (c < 0x20) {
                    char buf[8];
                    std::snprintf(buf, sizeof buf, "\\u%04x", unsigned(c));
                    o += buf;
                } else {
                    o += char(c);
                }
        }
    }
    return o + "\"";
}

void write_plan_table(const SearchInputs& in, const SearchResult& r, std::ostream& out, ReportLimits lim) {
    out << "Plan for " << model_line(in) << "\n";
    out << in.world_size << " ranks, " << in.local_world_size << " per node (" << in.world_size / in.local_world_size
        << " nodes); device " << in.device.name << ": " << fmt("%.1f", in.device_memory_bytes / kGiB)
        << " GiB per rank (" << in.device_memory_source << "), "
        << fmt("%.3g", in.model.dtype == DType::F32 ? in.device.peak_tflops_fp32 : in.device.peak_tflops_16bit)
        << " TFLOP/s peak; intra-node " << fmt("%.0f", in.fabric.intra_node_gbps) << " GB/s, inter-node "
        << fmt("%.0f", in.fabric.inter_node_gbps) << " GB/s\n";
    if (const std::string f = fp8_line(in); !f.empty()) out << f << "\n";
    out << batch_line(in, r) << "\n";
    // Every layout keeps the user's split; the table's PP column says how many stages.
    if (in.split.any()) out << "pipeline split (given):" << describe_split(in.split) << "\n";
    out << "\n";
    const int shown = std::min<int>(lim.max_rows, int(r.feasible.size()));
    out << "Feasible layouts: " << r.feasible.size() << " (showing " << shown
        << ", fastest first). Memory in GiB per GPU on the fullest pipeline stage.\n";
    char line[512];
    std::snprintf(line, sizeof line, "%3s %3s %3s %4s %3s %4s %5s %4s %-9s %2s %2s | %7s %6s %6s %6s %7s %6s | %7s %7s %5s %9s\n",
                  "#", "TP", "PP", "DP", "VP", "mbs", "gbs", "m", "recompute", "SP", "DO", "weights", "grads", "optim",
                  "activ", "buffers", "total", "s/iter", "TFLOP/s", "MFU", "tokens/s");
    out << line;
    for (int i = 0; i < shown; ++i) {
        const Candidate& c = r.feasible[i];
        const Layout& l = c.layout;
        const MemoryBreakdown& mb = c.memory;
        std::snprintf(line, sizeof line,
                      "%3d %3d %3d %4d %3d %4d %5d %4d %-9s %2s %2s | %7.1f %6.1f %6.1f %6.1f %7.1f %6.1f | %7.3f %7.1f %4.1f%% %9.0f\n",
                      i + 1, l.tp, l.pp, l.dp, l.vp, l.micro_batch, l.global_batch, l.micro_batches(),
                      std::string(recompute_name(l.recompute)).c_str(), l.sequence_parallel ? "y" : "n",
                      l.distributed_optimizer ? "y" : "n", (mb.weights + mb.fp8) / kGiB, mb.gradients / kGiB, mb.optimizer / kGiB,
                      mb.activations / kGiB, (mb.buffers + mb.fragmentation) / kGiB, mb.total() / kGiB, c.time.total(),
                      c.model_tflops_per_gpu, 100 * c.mfu, c.tokens_per_second);
        out << line;
    }
    if (!r.feasible.empty()) {
        const Candidate& b = r.feasible.front();
        out << "Best layout's time per iteration: compute " << fmt("%.3f", b.time.compute) << " s, TP comm "
            << fmt("%.3f", b.time.tp_comm) << " s, pipeline bubble " << fmt("%.3f", b.time.pp_bubble) << " s, p2p "
            << fmt("%.3f", b.time.pp_p2p) << " s, DP exposed " << fmt("%.3f", b.time.dp_exposed) << " s, optimizer "
            << fmt("%.3f", b.time.optimizer) << " s";
        if (in.model.fp8.enabled()) out << "; " << fp8_share(b.time);
        out << "\n";
    } else {
        out << "No layout fits. HINT: add nodes, lower --max-global-batch-size or --micro-batch-size, or use bf16/fp16.\n";
    }
    const int rej = std::min<int>(lim.max_rejected, int(r.rejected.size()));
    out << "\nRejected: " << r.rejected_total << " of " << r.evaluated << " layouts. ";
    out << "For each TP x PP with no feasible layout, the closest attempt (showing " << rej << " of "
        << r.rejected.size() << "):\n";
    for (int i = 0; i < rej; ++i)
        out << "  " << r.rejected[i].layout.describe() << ": " << r.rejected[i].reason << "\n";
}

void write_plan_json(const SearchInputs& in, const SearchResult& r, std::ostream& out, ReportLimits lim) {
    const ModelShape& m = in.model;
    out << "{\n  \"model\": {\"num_layers\": " << m.num_layers << ", \"hidden_size\": " << m.hidden
        << ", \"num_attention_heads\": " << m.heads << ", \"ffn_hidden_size\": " << m.ffn << ", \"seq_length\": " << m.seq
        << ", \"vocab_size\": " << m.vocab << ", \"dtype\": " << json_quote(std::string(dtype_name(m.dtype)))
        << ", \"parameters\": " << total_params(m) << "},\n";
    out << "  \"cluster\": {\"world_size\": " << in.world_size << ", \"local_world_size\": " << in.local_world_size
        << ", \"device\": " << json_quote(in.device.name) << ", \"device_memory_bytes\": " << in.device_memory_bytes
        << ", \"device_memory_source\": " << json_quote(in.device_memory_source)
        << ", \"intra_node_gbps\": " << num(in.fabric.intra_node_gbps)
        << ", \"inter_node_gbps\": " << num(in.fabric.inter_node_gbps) << "},\n";
    const Fp8Config& f8 = m.fp8;
    out << "  \"fp8\": {\"enabled\": " << (f8.enabled() ? "true" : "false");
    if (f8.enabled())
        out << ", \"format\": " << json_quote(std::string(to_string(f8.fp8_format)))
            << ", \"recipe\": " << json_quote(std::string(to_string(f8.fp8_recipe)))
            << ", \"margin\": " << f8.fp8_margin << ", \"amax_history_len\": " << f8.fp8_amax_history_len
            << ", \"amax_compute_algo\": " << json_quote(std::string(to_string(f8.fp8_amax_compute_algo)))
            << ", \"wgrad\": " << (f8.fp8_wgrad ? "true" : "false")
            << ", \"bf16_layers_at_start\": " << f8.bf16_layers_at_start()
            << ", \"bf16_layers_at_end\": " << f8.bf16_layers_at_end()
            << ", \"peak_tflops\": " << num(in.device.peak_tflops_fp8);
    out << "},\n";
    out << "  \"batch\": {\"global_batch_size\": " << in.global_batch << ", \"max_global_batch_size\": "
        << in.max_global_batch << ", \"assumed\": " << (r.batch_assumed ? "true" : "false") << "},\n";
    out << "  \"feasible_total\": " << r.feasible.size() << ",\n  \"feasible\": [";
    const int shown = std::min<int>(lim.max_rows, int(r.feasible.size()));
    for (int i = 0; i < shown; ++i) {
        const Candidate& c = r.feasible[i];
        const Layout& l = c.layout;
        const MemoryBreakdown& mb = c.memory;
        const TimeBreakdown& t = c.time;
        out << (i ? "," : "") << "\n    {\"rank\": " << i + 1 << ", \"tp\": " << l.tp << ", \"pp\": " << l.pp
            << ", \"dp\": " << l.dp << ", \"vp\": " << l.vp << ", \"micro_batch_size\": " << l.micro_batch
            << ", \"global_batch_size\": " << l.global_batch << ", \"micro_batches\": " << l.micro_batches()
            << ", \"recompute\": " << json_quote(std::string(recompute_name(l.recompute)))
            << ", \"sequence_parallel\": " << (l.sequence_parallel ? "true" : "false")
            << ", \"distributed_optimizer\": " << (l.distributed_optimizer ? "true" : "false")
            << ",\n     \"memory_bytes\": {\"stage\": " << mb.stage << ", \"weights\": " << bytes(mb.weights)
            << ", \"gradients\": " << bytes(mb.gradients) << ", \"optimizer\": " << bytes(mb.optimizer)
            << ", \"activations\": " << bytes(mb.activations) << ", \"buffers\": " << bytes(mb.buffers)
            << ", \"fragmentation\": " << bytes(mb.fragmentation) << ", \"fp8\": " << bytes(mb.fp8)
            << ", \"total\": " << bytes(mb.total()) << "}"
            << ",\n     \"time_seconds\": {\"compute\": " << num(t.compute) << ", \"tp_comm\": " << num(t.tp_comm)
            << ", \"pp_p2p\": " << num(t.pp_p2p) << ", \"pp_bubble\": " << num(t.pp_bubble)
            << ", \"dp_exposed\": " << num(t.dp_exposed) << ", \"optimizer\": " << num(t.optimizer)
            << ", \"total\": " << num(t.total()) << "}"
            << ",\n     \"gemm_seconds\": {\"total\": " << num(t.gemm) << ", \"fp8\": " << num(t.gemm_fp8) << "}"
            << ",\n     \"model_tflops_per_gpu\": " << num(c.model_tflops_per_gpu)
            << ", \"hardware_tflops_per_gpu\": " << num(c.hardware_tflops_per_gpu) << ", \"mfu\": " << num(c.mfu)
            << ", \"tokens_per_second\": " << num(c.tokens_per_second) << "}";
    }
    out << "\n  ],\n  \"rejected_total\": " << r.rejected_total << ",\n  \"evaluated\": " << r.evaluated
        << ",\n  \"rejected\": [";
    const int rej = std::min<int>(lim.max_rejected, int(r.rejected.size()));
    for (int i = 0; i < rej; ++i) {
        const Layout& l = r.rejected[i].layout;
        out << (i ? "," : "") << "\n    {\"tp\": " << l.tp << ", \"pp\": " << l.pp << ", \"dp\": " << l.dp
            << ", \"layout\": " << json_quote(l.describe()) << ", \"reason\": " << json_quote(r.rejected[i].reason) << "}";
    }
    out << "\n  ]\n}\n";
}

std::string describe_choice(const SearchInputs& in, const SearchResult& r) {
    GPT_ASSERT(!r.feasible.empty());
    const Candidate& b = r.feasible.front();
    std::ostringstream os;
    os << "planner chose " << b.layout.describe() << " for " << in.world_size << " ranks (" << in.local_world_size
       << " per node): predicted " << fmt("%.1f", b.memory.total() / kGiB) << " of "
       << fmt("%.1f", in.device_memory_bytes / kGiB) << " GiB per rank, " << fmt("%.3f", b.time.total())
       << " s/iteration, " << fmt("%.1f", b.model_tflops_per_gpu) << " TFLOP/s per rank, "
       << fmt("%.0f", b.tokens_per_second) << " tokens/s (fastest of " << r.feasible.size() << " feasible layouts)";
    if (in.model.fp8.enabled()) os << ", " << fp8_share(b.time);
    if (const Candidate* ru = runner_up(r)) {
        os << "; runner-up " << ru->layout.describe() << ": " << fmt("%.3f", ru->time.total()) << " s/iteration, "
           << fmt("%.1f", ru->memory.total() / kGiB) << " GiB, "
           << fmt("%.1f", 100 * (1 - ru->tokens_per_second / b.tokens_per_second)) << "% fewer tokens/s";
    } else {
        os << "; no structurally different layout fits";
    }
    return os.str();
}

}  // namespace gpt::plan
