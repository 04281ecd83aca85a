// The Hopper presets' kernel efficiencies against the one H200 run of this project's CUDA
// backend (issue #33; README "Measured on a GPU": one H200, CUDA 13.0, driver 580, fp16, one
// GPU, model TFLOP/s by Megatron's formula). The efficiencies come from that run's profile and
// attention bench (KernelRatesAreTheProfilesFigures holds them to those figures); the
// measured step rows are then a check, not a fit (PredictsTheMeasuredSteps).
#include <gtest/gtest.h>

#include <cstdio>

#include "plan/device_presets.hpp"
#include "plan/time_model.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

// bench/train_gpu/bench_train_gpu.cpp's shapes: f = 4h, vocab 50304, flash attention,
// global batch = micro-batch on one GPU, no dropout.
struct Row {
    const char* config;
    int layers, hidden, heads, seq, micro_batch;
    double measured_tflops;  // bench/train_gpu/run.sh on the H200, issue #33's table
    bool attention_heavy;    // see PredictsTheMeasuredSteps
};
constexpr Row kRows[] = {
    {"gpt-1.3b", 24, 2048, 16, 2048, 8, 472.6, true},  // 314.5 ms per iteration
    {"gpt2-1.5b-s1024", 48, 1600, 25, 1024, 16, 451.1, true},
    {"gpt22b-shape-4layers", 4, 6144, 64, 2048, 4, 505.3, false},
};

ModelShape bench_shape(const Row& r) {
    ModelShape m = gpt(r.layers, r.hidden, r.heads, r.seq, DType::F16, 50304);
    m.flash_attention = true;
    return m;
}

Layout one_gpu(int micro_batch) {
    Layout l;
    l.micro_batch = micro_batch;
    l.global_batch = micro_batch;
    return l;
}

// What the preset's kernels give for the run's figures. Independent of the preset code's
// constants: a changed efficiency (or a broken conversion) shows here.
TEST(H200Calibration, KernelRatesAreTheProfilesFigures) {
    const KernelEfficiencies& k = find_device_preset("h200").kernels;
    const double peak = 989;
    // gpt-1.3b's fc1/fc2 GEMMs, 8 x 2048 tokens x 2048 x 8192: plain ones at 657-692 TFLOP/s
    // (midpoint 674.5), the GELU-epilogue ones at 436-462 (449), on the small-GEMM curve.
    const double w = 2.0 * 8 * 2048 * 2048 * 8192 / 1e9;
    const double plain = peak * k.gemm * w / (w + k.gemm_half_gflop);
    EXPECT_NEAR(plain, 674.5, 1e-9 * 674.5);
    EXPECT_NEAR(plain * k.gelu_epilogue, 449.0, 1e-9 * 449);
    // bench/attention_gpu (TFLOP/s of the causal half; forward+backward counts 3.5x the
    // forward): each head size's forward and forward + backward times come back.
    struct Attn {
        int b, np, s, hn;
        double fwd, fwd_bwd;
    };
    for (const Attn a : {Attn{8, 16, 2048, 128, 122.6, 116.8}, Attn{16, 25, 1024, 64, 101.7, 63.5},
                         Attn{4, 64, 2048, 96, 175.2, 113.8}}) {
        const double causal = 2.0 * a.b * a.np * double(a.s) * a.s * a.hn;  // bench's forward FLOPs
        const double planner = 2 * causal;                                  // 4 b s^2 h
        const FlashAttentionRate r = k.flash(a.hn);
        const double fwd_s = planner / (peak * 1e12 * r.forward);
        const double bwd_s = 2 * planner / (peak * 1e12 * r.backward);
        EXPECT_NEAR(causal / fwd_s / 1e12, a.fwd, 1e-9 * a.fwd) << "head dim " << a.hn;
        EXPECT_NEAR(3.5 * causal / (fwd_s + bwd_s) / 1e12, a.fwd_bwd, 1e-9 * a.fwd_bwd) << "head dim " << a.hn;
    }
    // Between measured head sizes the rates are linear; outside, the nearest one's.
    EXPECT_DOUBLE_EQ(k.flash(80).forward, (k.flash(64).forward + k.flash(96).forward) / 2);
    EXPECT_DOUBLE_EQ(k.flash(256).backward, k.flash(128).backward);
    EXPECT_DOUBLE_EQ(k.flash(32).forward, k.flash(64).forward);
}

// The time model runs the step on those rates: fc1's forward and fc2's data gradient at
// the GELU-epilogue rate with no GELU pass, attention forward and backward at the bench's.
TEST(H200Calibration, TheStepRunsOnTheKernelRates) {
    const DevicePreset& dev = find_device_preset("h200");
    const Row& r = kRows[0];  // gpt-1.3b: fc1 and fc2 are the profiled 549.8-GFLOP GEMMs
    const ModelShape m = bench_shape(r);
    const Layout l = one_gpu(r.micro_batch);
    const double fc = 2.0 * 8 * 2048 * 2048 * 8192;
    const LinearGemmSeconds lin = linear_gemm_seconds(m, l, dev, false);
    EXPECT_NEAR(lin.forward - lin.weight_grad, fc / 449e12 - fc / 674.5e12, 1e-12);
    EXPECT_NEAR(lin.data_grad - lin.weight_grad, fc / 449e12 - fc / 674.5e12, 1e-12);

    // Attention: the step's GEMM-class time with flash attention less the unfused core's
    // (three passes of 4bs^2h at attention_core) is the bench's forward + backward per layer
    // (gpt-1.3b's attention is bench/attention_gpu's gpt-1.3b shape: 3.5 x 2bs^2h at 116.8).
    ModelShape unfused = m;
    unfused.flash_attention = false;
    const Placement one = place(1, 1, 1, 1);
    const TimeBreakdown flash = iteration_time(m, l, dev, default_fabric(dev), one);
    const TimeBreakdown core = iteration_time(unfused, l, dev, default_fabric(dev), one);
    const double x = double(r.micro_batch) * r.seq * r.seq * r.hidden;  // b s^2 h
    const double core_s = 3 * 4 * x / (989e12 * dev.kernels.attention_core);
    EXPECT_NEAR((flash.gemm - core.gemm) / r.layers + core_s, 3.5 * 2 * x / 116.8e12, 1e-12);

    // No separate bias-GELU pass: a kernel set with one costs 16 e s b h bytes more per
    // layer forward (read and write the 4h-wide fc1 output; e = 1 for fp16), twice that backward.
    DevicePreset with_pass = dev;
    with_pass.kernels.gelu_epilogue = 0;
    const TimeBreakdown passes = iteration_time(m, l, with_pass, default_fabric(with_pass), one);
    const double pass_s = 16.0 * r.micro_batch * r.seq * r.hidden / (4800e9 * dev.kernels.memory);
    EXPECT_NEAR((passes.compute - passes.gemm) - (flash.compute - flash.gemm), 3 * r.layers * pass_s, 1e-12);

    // Squared ReLU has no cuBLASLt epilogue: fc1 and fc2 run at the plain GEMM rate and its
    // pass moves what a bias-GELU pass moves, so the step is that of the kernels without it.
    ModelShape relu2 = m;
    relu2.squared_relu = true;
    const TimeBreakdown sq = iteration_time(relu2, l, dev, default_fabric(dev), one);
    EXPECT_DOUBLE_EQ(sq.gemm, passes.gemm);
    EXPECT_DOUBLE_EQ(sq.compute, passes.compute);
    EXPECT_LT(sq.gemm, flash.gemm);

    // --qk-layernorm is element-wise work only: the projection's copy (3h each way) and the
    // norms over the query and key rows (2h each way), 10 e s b h bytes a layer forward (e = 1
    // for fp16, as above), twice that backward; no GEMM time.
    ModelShape qk = m;
    qk.qk_layernorm = true;
    const TimeBreakdown qkn = iteration_time(qk, l, dev, default_fabric(dev), one);
    const double qk_s = 10.0 * r.micro_batch * r.seq * r.hidden / (4800e9 * dev.kernels.memory);
    EXPECT_DOUBLE_EQ(qkn.gemm, flash.gemm);
    EXPECT_NEAR(qkn.compute - flash.compute, 3 * r.layers * qk_s, 1e-12);
}

// The planner's prediction for the measured steps. gpt22b-shape-4layers spends 77% of the
// predicted step in GEMMs and 12% in attention: it checks the GEMM figures, within 5%. The
// other two rows spend 29% and 33% in attention, and there the figures do not add up: the
// isolated attention bench gives attention more time than the measured step leaves it
// (gpt2-1.5b-s1024: its 142 ms of head-dim-64 attention, every GEMM at cuBLAS's 762 TFLOP/s
// and Adam and the LayerNorms at the full 4.8 TB/s need 381 ms; it measured 373). Those two
// rows are held to what the figures allow: the prediction is slower than the measurement, by
// less than the attention time. Issue #33's "within 5%" is not met on them.
// docs/planner.md ("Hopper presets") has the arithmetic and what would settle it.
TEST(H200Calibration, PredictsTheMeasuredSteps) {
    const DevicePreset& dev = find_device_preset("h200");
    for (const Row& r : kRows) {
        const ModelShape m = bench_shape(r);
        const Layout l = one_gpu(r.micro_batch);
        const TimeBreakdown t = iteration_time(m, l, dev, default_fabric(dev), place(1, 1, 1, 1));
        const double flops = model_flops_per_iteration(m, l.global_batch, 1);
        const double predicted = flops / t.total() / 1e12;
        const double measured_s = flops / (r.measured_tflops * 1e12);
        // The flash attention time of the step: 4bs^2h forward and twice that backward.
        const FlashAttentionRate a = dev.kernels.flash(r.hidden / r.heads);
        const double attn_flops = 4.0 * r.micro_batch * double(r.seq) * r.seq * r.hidden * r.layers;
        const double attention = attn_flops / (989e12 * a.forward) + 2 * attn_flops / (989e12 * a.backward);
        std::printf("%-22s measured %6.1f TFLOP/s, predicted %6.1f (%+.1f%%); attention %4.1f%% of the prediction\n",
                    r.config, r.measured_tflops, predicted, 100 * (predicted / r.measured_tflops - 1),
                    100 * attention / t.total());
        if (!r.attention_heavy) {
            EXPECT_LT(attention, 0.15 * t.total()) << r.config;
            EXPECT_NEAR(predicted, r.measured_tflops, 0.05 * r.measured_tflops) << r.config;
        } else {
            EXPECT_LT(predicted, r.measured_tflops) << r.config;
            EXPECT_GT(measured_s, t.total() - attention) << r.config;
        }
    }
}

// H100 SXM runs the same kernels on the same chip at the same peak: the compute-bound
// fractions are the H200's, the memory-bound parts follow its 3.35 TB/s (not measured on an
// H100).
TEST(H200Calibration, H100TakesTheSameKernelsAtItsOwnBandwidth) {
    const DevicePreset& h100 = find_device_preset("h100-80gb");
    const DevicePreset& h200 = find_device_preset("h200");
    EXPECT_EQ(h100.peak_tflops_16bit, h200.peak_tflops_16bit);
    EXPECT_EQ(h100.kernels.gemm, h200.kernels.gemm);
    EXPECT_EQ(h100.kernels.gelu_epilogue, h200.kernels.gelu_epilogue);
    EXPECT_EQ(h100.kernels.memory, h200.kernels.memory);
    for (int d : {64, 96, 128}) {
        EXPECT_EQ(h100.kernels.flash(d).forward, h200.kernels.flash(d).forward);
        EXPECT_EQ(h100.kernels.flash(d).backward, h200.kernels.flash(d).backward);
    }
    const Row& r = kRows[0];
    const ModelShape m = bench_shape(r);
    const Layout l = one_gpu(r.micro_batch);
    const TimeBreakdown a = iteration_time(m, l, h100, default_fabric(h100), place(1, 1, 1, 1));
    const TimeBreakdown b = iteration_time(m, l, h200, default_fabric(h200), place(1, 1, 1, 1));
    EXPECT_NEAR(a.optimizer / b.optimizer, 4800.0 / 3350.0, 1e-12);  // Adam: HBM-bound
    EXPECT_DOUBLE_EQ(a.gemm, b.gemm);                                 // GEMMs and attention: not
    EXPECT_GT(a.compute, b.compute);                                  // element-wise: HBM-bound
}

}  // namespace
}  // namespace gpt::plan::test
