// The time model against the Megatron-LM papers' published A100 runs (docs/planner.md has
// the tables; `build/tests/plan/test_plan --gtest_filter='PublishedRuns.*'` prints them).
//
// Calibration and validation use different papers. The A100 preset's two fitted constants
// come from Korthikanti et al. 2022 only: the unfused attention core's efficiency from its
// Table 4 (the per-layer cost of selective recomputation), then the large-GEMM efficiency
// from its 175B run's MFU. Narayanan et al. 2021 (SC'21) Table 1 is the out-of-sample
// check, every row run as Megatron-LM's examples/sc21/run_table_1.sh ran it: its
// micro-batch sizes, its interleaving, its DDP implementation (torch DDP overlaps the
// gradient all-reduce with backward; "local" DDP reduces after it) and the 2021 code's
// separate fp32 gradient-accumulation pass.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <iterator>
#include <string_view>

#include "plan/search.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

SearchInputs a100_inputs(int layers, int hidden, int heads, int gpus) {
    SearchInputs in = inputs(gpt(layers, hidden, heads, 2048, DType::F16, 51200), "a100-80gb", gpus, 8, 80);
    // The papers' vocabulary (51,200) is already a multiple of 128 x 8.
    in.model.vocab_divisible_by = 128;
    return in;
}

// Narayanan et al. 2021, Table 1 (Selene: DGX A100 80 GB, 8x HDR InfiniBand per node), with
// the per-row settings of run_table_1.sh. Full recomputation everywhere; the reported
// per-GPU throughput counts the recomputed forward (96 B s l h^2 (1 + s/6h + V/16lh)).
struct SC21Row {
    const char* name;
    int layers, hidden, heads, tp, pp, gpus, global_batch;
    int micro_batch;
    int layers_per_virtual_stage;  // --num-layers-per-virtual-pipeline-stage; 0: no interleaving
    bool torch_ddp;                // DDP=torch (overlapped all-reduce) or local (after backward)
    double tflops;                 // published TFLOP/s per GPU
};

constexpr SC21Row kSC21[] = {
    {"1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 0, true, 137},
    {"3.6B", 30, 3072, 32, 2, 1, 64, 512, 16, 0, true, 138},
    {"7.5B", 36, 4096, 32, 4, 1, 128, 512, 16, 0, true, 142},
    {"18.4B", 40, 6144, 48, 8, 1, 256, 1024, 8, 0, true, 135},
    {"39.1B", 48, 8192, 64, 8, 2, 512, 1536, 4, 0, false, 138},
    {"76.1B", 60, 10240, 80, 8, 4, 1024, 1792, 2, 5, false, 140},
    {"145.6B", 80, 12288, 96, 8, 8, 1536, 2304, 2, 5, false, 148},
    {"310.1B", 96, 16384, 128, 8, 16, 1920, 2160, 1, 3, false, 155},
    {"529.6B", 105, 20480, 128, 8, 35, 2520, 2520, 1, 1, false, 163},
    {"1008.0B", 128, 25600, 160, 8, 64, 3072, 3072, 1, 0, false, 163},
};

Candidate predict_sc21(const SC21Row& r, bool model_2021_software = true) {
    SearchInputs in = a100_inputs(r.layers, r.hidden, r.heads, r.gpus);
    in.fabric.overlap_grad_reduce = r.torch_ddp;
    in.fabric.fused_grad_accumulation = !model_2021_software;
    Layout l;
    l.tp = r.tp;
    l.pp = r.pp;
    l.dp = r.gpus / (r.tp * r.pp);
    l.vp = r.layers_per_virtual_stage ? r.layers / r.pp / r.layers_per_virtual_stage : 1;
    l.micro_batch = r.micro_batch;
    l.global_batch = r.global_batch;
    l.recompute = Recompute::Full;
    return evaluate_layout(in, l);
}

// Out of sample. Bounds from the error budget, not from this table: the model's error on
// its own calibration paper reaches 4.9% (Korthikanti 22B, below), and the attention
// efficiency is known only to +-0.03 (Table 4's 1.3 ms is a difference of two figures
// rounded to 0.1 ms), which moves the small-head rows by up to 1.5%: 6.5% per row. A
// systematic bias shows in the mean, where the row errors that are not bias partly cancel:
// within 3% (the model before this calibration and the 2021 gradient-accumulation pass was
// 6.1% high on average with the same settings, and up to 9.5% on a row).
TEST(PublishedRuns, NarayananTable1OutOfSample) {
    std::printf("Narayanan et al. 2021 Table 1, paper's settings (examples/sc21/run_table_1.sh), A100 80 GB:\n");
    std::printf("  %-8s %3s %3s %5s %5s %4s %4s %-5s | %9s %9s %7s | %s\n", "model", "TP", "PP", "GPUs", "batch",
                "mbs", "VP", "DDP", "published", "predicted", "error", "predicted with fused grad accumulation");
    double sum = 0;
    for (const auto& r : kSC21) {
        const Candidate c = predict_sc21(r);
        const Candidate fused = predict_sc21(r, false);
        const double err = c.hardware_tflops_per_gpu / r.tflops - 1.0;
        sum += err;
        std::printf("  %-8s %3d %3d %5d %5d %4d %4d %-5s | %9.0f %9.1f %+6.1f%% | %.1f (%+.1f%%)\n", r.name, r.tp, r.pp,
                    r.gpus, r.global_batch, r.micro_batch, c.layout.vp, r.torch_ddp ? "torch" : "local", r.tflops,
                    c.hardware_tflops_per_gpu, 100 * err, fused.hardware_tflops_per_gpu,
                    100 * (fused.hardware_tflops_per_gpu / r.tflops - 1.0));
        EXPECT_LT(std::abs(err), 0.065) << r.name;
    }
    const double mean = sum / std::size(kSC21);
    std::printf("  mean error %+.1f%%\n", 100 * mean);
    EXPECT_LT(std::abs(mean), 0.03);
}

// The planner's own choice for the SC'21 GPU counts and batches, as this project would run
// them (fused gradient accumulation, overlapped DP reduction): TP inside a DGX node, and
// never slower than the paper's layout run by the same software.
TEST(PublishedRuns, PlannerChoiceForNarayananRuns) {
    for (const auto& r : kSC21) {
        SearchInputs in = a100_inputs(r.layers, r.hidden, r.heads, r.gpus);
        in.global_batch = r.global_batch;
        SearchResult res = search_layouts(in);
        ASSERT_FALSE(res.feasible.empty()) << r.name;
        const Candidate& best = res.feasible.front();
        Layout paper;
        paper.tp = r.tp;
        paper.pp = r.pp;
        paper.dp = r.gpus / (r.tp * r.pp);
        paper.vp = r.layers_per_virtual_stage ? r.layers / r.pp / r.layers_per_virtual_stage : 1;
        paper.micro_batch = r.micro_batch;
        paper.global_batch = r.global_batch;
        paper.recompute = Recompute::Full;
        const Candidate ours = evaluate_layout(in, paper);
        std::printf("  %-8s planner: %s, %.0f TFLOP/s model (MFU %.1f%%); paper's layout with this software %.0f "
                    "(MFU %.1f%%)\n",
                    r.name, best.layout.describe().c_str(), best.model_tflops_per_gpu, 100 * best.mfu,
                    ours.model_tflops_per_gpu, 100 * ours.mfu);
        EXPECT_LE(best.layout.tp, 8) << r.name;
        EXPECT_GE(best.tokens_per_second, ours.tokens_per_second) << r.name;
    }
}

// Korthikanti et al. 2022, Table 3 configurations (data-parallel size 1): sequence
// parallelism + selective recomputation (MFU as in the Megatron-LM README and Table 5), and
// Table 5's iteration times with full recomputation (the baseline). The 22B run's batch of 4
// is one micro-batch: Table 4's 20.3 ms per layer (SP + selective) times 48 layers is most
// of its 1.10 s iteration, which four micro-batches of 1 could not be. The pipelined runs
// use micro-batch 1: with larger ones their batches would give too few micro-batches per
// pipeline (175B: 32 for 8 stages at micro-batch 2) for the measured MFU.
struct KorthikantiRow {
    const char* name;
    int layers, hidden, heads, tp, pp, gpus, global_batch, micro_batch;
    double mfu, seconds_selective, seconds_full;
};

constexpr KorthikantiRow kKorthikanti[] = {
    {"22B", 48, 6144, 64, 8, 1, 8, 4, 4, 0.415, 1.10, 1.42},
    {"175B", 96, 12288, 96, 8, 8, 64, 64, 1, 0.514, 13.75, 18.13},
    {"530B", 105, 20480, 128, 8, 35, 280, 280, 1, 0.560, 37.83, 49.05},
    {"1T", 128, 25600, 160, 8, 64, 512, 512, 1, 0.563, 71.49, 94.42},
};

Candidate predict_korthikanti(const KorthikantiRow& r, Recompute rc, bool sp) {
    SearchInputs in = a100_inputs(r.layers, r.hidden, r.heads, r.gpus);
    Layout l;
    l.tp = r.tp;
    l.pp = r.pp;
    l.dp = r.gpus / (r.tp * r.pp);
    l.micro_batch = r.micro_batch;
    l.global_batch = r.global_batch;
    l.recompute = rc;
    l.sequence_parallel = sp;
    return evaluate_layout(in, l);
}

// The calibration paper: the 175B MFU is the fit (0.77 rounded to two digits); the other
// three runs check the model's shape in sample (the 4.9% the budget above starts from). Table 5's
// full-recompute baselines are printed, not asserted: the model is 2-7% slower than they
// measured, for a reason not identified (it is within 4% of the 2021 full-recompute runs).
TEST(PublishedRuns, KorthikantiCalibration) {
    std::printf("Korthikanti et al. 2022 (calibration), A100 80 GB, TP8:\n");
    std::printf("  %-5s %3s %5s %3s | %-22s | %-26s | %s\n", "model", "PP", "GPUs", "mbs", "MFU published/predicted",
                "s/iter SP+selective", "s/iter full recompute");
    for (const auto& r : kKorthikanti) {
        const Candidate sel = predict_korthikanti(r, Recompute::Selective, true);
        const Candidate full = predict_korthikanti(r, Recompute::Full, false);
        std::printf("  %-5s %3d %5d %3d | %5.1f%% %5.1f%% (%+5.1f%%) | %6.2f %6.2f (%+5.1f%%) | %6.2f %6.2f (%+5.1f%%)\n",
                    r.name, r.pp, r.gpus, r.micro_batch, 100 * r.mfu, 100 * sel.mfu, 100 * (sel.mfu / r.mfu - 1),
                    r.seconds_selective, sel.time.total(), 100 * (sel.time.total() / r.seconds_selective - 1),
                    r.seconds_full, full.time.total(), 100 * (full.time.total() / r.seconds_full - 1));
        const double bound = std::string_view(r.name) == "175B" ? 0.01 : 0.06;
        EXPECT_NEAR(sel.mfu, r.mfu, bound * r.mfu) << r.name;
    }
}

// Korthikanti Table 4 (22B, TP 8, micro-batch 4, no SP): selective recomputation adds
// 13.2 - 11.9 = 1.3 ms to a layer's backward, the re-run attention core. The A100 preset's
// attention efficiency is fitted to it; this holds the fit (the figures are rounded to
// 0.1 ms, so +-0.1 ms).
TEST(PublishedRuns, KorthikantiTable4AttentionCore) {
    SearchInputs in = a100_inputs(48, 6144, 64, 8);
    Layout l;
    l.tp = 8;
    l.micro_batch = 4;
    l.global_batch = 4;
    l.recompute = Recompute::None;
    const double none = evaluate_layout(in, l).time.total();
    l.recompute = Recompute::Selective;
    const double selective = evaluate_layout(in, l).time.total();
    const double per_layer_ms = (selective - none) / 48 * 1e3;
    std::printf("22B attention core re-run per layer: predicted %.2f ms, Korthikanti Table 4: 1.3 ms\n", per_layer_ms);
    EXPECT_NEAR(per_layer_ms, 1.3, 0.1);
}

// Given only the paper's GPU count and batch, the planner's own choice for Korthikanti's
// runs keeps TP inside a DGX node, uses sequence parallelism and selective (or no)
// recomputation as the paper recommends, and predicts a throughput no lower than the
// paper's layout and within 20% of the paper's measured MFU.
TEST(PublishedRuns, PlannerChoiceForKorthikantiRuns) {
    for (const auto& p : kKorthikanti) {
        SearchInputs in = a100_inputs(p.layers, p.hidden, p.heads, p.gpus);
        in.global_batch = p.global_batch;
        SearchResult r = search_layouts(in);
        ASSERT_FALSE(r.feasible.empty()) << p.name;
        const Candidate& best = r.feasible.front();
        std::printf("  %-5s planner: %s, MFU %.1f%% (paper %.1f%%)\n", p.name, best.layout.describe().c_str(),
                    100 * best.mfu, 100 * p.mfu);
        EXPECT_LE(best.layout.tp, 8) << p.name;
        EXPECT_TRUE(best.layout.sequence_parallel) << p.name;
        EXPECT_NE(best.layout.recompute, Recompute::Full) << p.name;
        EXPECT_NEAR(best.mfu, p.mfu, 0.20 * p.mfu) << p.name;
        const Candidate paper = predict_korthikanti(p, Recompute::Selective, true);
        EXPECT_LE(paper.memory.total(), double(in.device_memory_bytes)) << p.name << ": the paper's layout must fit";
        EXPECT_GE(best.tokens_per_second, paper.tokens_per_second) << p.name;
    }
}

}  // namespace
}  // namespace gpt::plan::test
