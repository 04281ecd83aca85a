#include "plan/search.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <utility>

#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt::plan {

namespace {

constexpr double kGiB = double(1ull << 30);

std::vector<int> divisors(int n) {
    std::vector<int> d;
    for (int i = 1; i <= n; ++i)
        if (n % i == 0) d.push_back(i);
    return d;
}

std::string gib(double bytes) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f GiB", bytes / kGiB);
    return buf;
}

// Why the model cannot be split TP x PP ways at all; "" when it can.
std::string shape_reason(const SearchInputs& in, int tp, int pp, const Placement& place) {
    const ModelShape& m = in.model;
    if (m.heads % tp) return "attention heads " + std::to_string(m.heads) + " not divisible by TP " + std::to_string(tp);
    if (m.ffn % tp) return "ffn hidden size " + std::to_string(m.ffn) + " not divisible by TP " + std::to_string(tp);
    if (!in.split.any() && m.num_layers % pp)
        return std::to_string(m.num_layers) + " layers not divisible by PP " + std::to_string(pp);
    // A layout string fixes the virtual stages (in.vp, from its stage count); others split per stage first.
    const int vp = in.split.layout.empty() ? 1 : std::max(in.vp, 1);
    if (std::string why = pipeline_split_problem(m.num_layers, pp, vp, in.split); !why.empty()) return why;
    if (m.fp8.enabled()) {
        // FP8's rules that depend on TP and PP (config/validate_fp8.cpp's, as training checks them).
        if (std::string why = fp8_gemm_dims_problem(m.hidden, m.ffn, qkv_rows(m), m.seq, tp, 0); !why.empty())
            return "FP8: " + why;
        if (std::string why = fp8_bf16_layers_problem(m.fp8, m.num_layers, pp); !why.empty()) return "FP8: " + why;
    }
    if (place.tp_crosses_nodes && in.tp == 0)
        return "TP " + std::to_string(tp) + " spans nodes (" + std::to_string(in.local_world_size) +
               " ranks per node): its per-layer all-reduces would cross the inter-node fabric";
    return "";
}

}  // namespace

Candidate evaluate_layout(const SearchInputs& in, const Layout& l) {
    return evaluate_placed_layout(in, l, place(in.world_size, in.local_world_size, l.tp, l.pp));
}

Candidate evaluate_placed_layout(const SearchInputs& in, const Layout& l, const Placement& placement) {
    Candidate c;
    c.layout = l;
    c.placement = placement;
    c.memory = peak_memory(in.model, l, in.device);
    c.time = iteration_time(in.model, l, in.device, in.fabric, c.placement);
    const double t = c.time.total();
    c.tokens_per_second = double(l.global_batch) * in.model.seq / t;
    c.model_tflops_per_gpu = model_flops_per_iteration(in.model, l.global_batch, l.tp) / t / l.world() / 1e12;
    c.hardware_tflops_per_gpu = hardware_flops_per_iteration(in.model, l) / t / l.world() / 1e12;
    const double peak = in.model.dtype == DType::F32 ? in.device.peak_tflops_fp32 : in.device.peak_tflops_16bit;
    c.mfu = c.model_tflops_per_gpu / peak;
    return c;
}

SearchResult search_layouts(const SearchInputs& in) {
    GPT_REQUIRE(in.world_size > 0 && in.local_world_size > 0, UsageError,
                "the planner needs --world-size and --local-world-size (got ", in.world_size, " and ",
                in.local_world_size, ")");
    GPT_REQUIRE(in.global_batch == 0 || in.max_global_batch == 0 || in.global_batch <= in.max_global_batch,
                UsageError, "--global-batch-size ", in.global_batch, " exceeds --max-global-batch-size ",
                in.max_global_batch);
    require_fp8_device(in.model, in.device);
    SearchResult r;
    r.batch_assumed = in.global_batch == 0 && in.max_global_batch == 0;
    const double capacity = double(in.device_memory_bytes);

    // Per (TP, PP): the rejection closest to feasible, reported only when nothing fits there.
    std::map<std::pair<int, int>, std::pair<double, Rejection>> closest;
    std::map<std::pair<int, int>, bool> any_fit;
    auto reject = [&](const Layout& l, std::string why, double badness) {
        ++r.rejected_total;
        auto key = std::make_pair(l.tp, l.pp);
        auto it = closest.find(key);
        if (it == closest.end() || badness < it->second.first) closest[key] = {badness, Rejection{l, std::move(why)}};
    };

    for (int tp : divisors(in.world_size)) {
        if (in.tp && tp != in.tp) continue;
        for (int pp : divisors(in.world_size / tp)) {
            if (in.pp && pp != in.pp) continue;
            const int dp = in.world_size / (tp * pp);
            if (in.dp && dp != in.dp) continue;
            Layout base;
            base.tp = tp;
            base.pp = pp;
            base.dp = dp;
            base.split = in.split;
            Placement pl = place(in.world_size, in.local_world_size, tp, pp);
            if (std::string why = shape_reason(in, tp, pp, pl); !why.empty()) {
                ++r.evaluated;
                base.global_batch = 0;
                reject(base, why, 1e30);
                continue;
            }
            std::vector<int> mbs_list;
            if (in.micro_batch) mbs_list = {in.micro_batch};
            else
                for (int b = 1; b <= in.max_micro_batch; b *= 2) mbs_list.push_back(b);
            for (int mbs : mbs_list) {
                Layout l = base;
                l.micro_batch = mbs;
                const int unit = mbs * dp;
                if (in.model.fp8.enabled()) {
                    // The tokens of a micro-batch are a dimension of every FP8 GEMM.
                    const ModelShape& m = in.model;
                    if (std::string why = fp8_gemm_dims_problem(m.hidden, m.ffn, qkv_rows(m), m.seq, tp, mbs);
                        !why.empty()) {
                        ++r.evaluated;
                        l.global_batch = 0;
                        reject(l, "FP8: " + why, 1e29);
                        continue;
                    }
                }
                if (in.global_batch) {
                    l.global_batch = in.global_batch;
                    if (in.global_batch % unit) {
                        ++r.evaluated;
                        reject(l, "global batch " + std::to_string(in.global_batch) + " not divisible by micro-batch x DP = " +
                                      std::to_string(mbs) + " x " + std::to_string(dp),
                               1e29);
                        continue;
                    }
                } else if (in.max_global_batch) {
                    l.global_batch = in.max_global_batch / unit * unit;
                    if (l.global_batch == 0) {
                        ++r.evaluated;
                        reject(l, "max global batch " + std::to_string(in.max_global_batch) +
                                      " is smaller than micro-batch x DP = " + std::to_string(mbs) + " x " +
                                      std::to_string(dp),
                               1e29);
                        continue;
                    }
                } else {
                    l.global_batch = unit * 4 * pp;
                }
                const int m = l.micro_batches();
                std::vector<int> vps;
                const int split_layers = in.split.split_layers(in.model.num_layers);
                if (in.layers_per_virtual_stage) {
                    const int per_stage = split_layers / pp;
                    if (per_stage % in.layers_per_virtual_stage || pp <= 2 || m % pp) {
                        ++r.evaluated;
                        reject(l, "interleaving with " + std::to_string(in.layers_per_virtual_stage) +
                                      " layers per virtual stage needs PP > 2, " + std::to_string(per_stage) +
                                      " layers per stage divisible by it and micro-batches " + std::to_string(m) +
                                      " divisible by PP",
                               1e29);
                        continue;
                    }
                    vps.push_back(per_stage / in.layers_per_virtual_stage);
                } else if (in.vp > 1) {  // --num-virtual-stages-per-pipeline-rank
                    std::string why = pipeline_split_problem(in.model.num_layers, pp, in.vp, in.split);
                    if (why.empty() && m % pp)
                        why = "interleaving needs micro-batches " + std::to_string(m) + " divisible by PP";
                    if (!why.empty()) {
                        ++r.evaluated;
                        reject(l, why, 1e29);
                        continue;
                    }
                    vps.push_back(in.vp);
                } else {
                    vps.push_back(1);
                    // Megatron's interleaved schedule needs PP > 2 and m divisible by PP.
                    if (pp > 2 && m % pp == 0)
                        for (int v : divisors(split_layers / pp))
                            if (v > 1 && pipeline_split_problem(in.model.num_layers, pp, v, in.split).empty())
                                vps.push_back(v);
                }
                for (int vp : vps) {
                    if (in.vp && vp != in.vp) continue;
                    // A schedule's smaller batches split over this layout too (the run refuses
                    // one that does not), and their micro-batch counts size the slots.
                    std::vector<std::int64_t> ramp;
                    std::string unsplit;
                    for (const std::int64_t b : in.scheduled_batches) {
                        const std::string what = "the scheduled global batch " + std::to_string(b) + " does not split into ";
                        if (b % unit) {
                            unsplit = what + "micro-batch x DP = " + std::to_string(mbs) + " x " + std::to_string(dp);
                            break;
                        }
                        if (vp > 1 && (b / unit) % pp) {
                            unsplit = what + "a multiple of PP " + std::to_string(pp) + " micro-batches (interleaved)";
                            break;
                        }
                        ramp.push_back(b / unit);
                    }
                    if (!unsplit.empty()) {
                        ++r.evaluated;
                        Layout c = l;
                        c.vp = vp;
                        reject(c, unsplit, 1e29);
                        continue;
                    }
                    for (Recompute rc : {Recompute::None, Recompute::Selective, Recompute::Full}) {
                        if (in.recompute && rc != *in.recompute) continue;
                        // Flash attention never stores the scores, so selective recompute
                        // would save nothing and only cost time: not a candidate unless asked for.
                        if (!in.recompute && rc == Recompute::Selective && in.model.flash_attention) continue;
                        for (int sp = 0; sp <= 1; ++sp) {
                            if (sp && tp == 1) continue;
                            if (!sp && in.require_sequence_parallel && tp > 1) continue;
                            for (int dopt = 0; dopt <= 1; ++dopt) {
                                if (dopt && dp == 1 && !in.require_distributed_optimizer) continue;
                                if (!dopt && in.require_distributed_optimizer) continue;
                                Layout c = l;
                                c.vp = vp;
                                c.recompute = rc;
                                c.sequence_parallel = sp;
                                c.distributed_optimizer = dopt;
                                c.ramp_micro_batches = ramp;
                                ++r.evaluated;
                                Candidate cand = evaluate_placed_layout(in, c, pl);
                                const double need = cand.memory.total();
                                if (need > capacity) {
                                    reject(c, "out of memory by " + gib(need - capacity) + " (needs " + gib(need) +
                                                  " on stage " + std::to_string(cand.memory.stage) + " of " +
                                                  gib(capacity) + ")",
                                           need - capacity);
                                    continue;
                                }
                                any_fit[{tp, pp}] = true;
                                r.feasible.push_back(std::move(cand));
                            }
                        }
                    }
                }
            }
        }
    }
    std::stable_sort(r.feasible.begin(), r.feasible.end(), [](const Candidate& a, const Candidate& b) {
        if (a.tokens_per_second != b.tokens_per_second) return a.tokens_per_second > b.tokens_per_second;
        return a.memory.total() < b.memory.total();
    });
    for (auto& [key, entry] : closest)
        if (!any_fit.count(key)) r.rejected.push_back(entry.second);
    return r;
}

const Candidate* runner_up(const SearchResult& r) {
    if (r.feasible.empty()) return nullptr;
    const Layout& b = r.feasible.front().layout;
    for (std::size_t i = 1; i < r.feasible.size(); ++i) {
        const Layout& l = r.feasible[i].layout;
        if (l.tp != b.tp || l.pp != b.pp || l.dp != b.dp || l.micro_batch != b.micro_batch) return &r.feasible[i];
    }
    return nullptr;
}

}  // namespace gpt::plan
