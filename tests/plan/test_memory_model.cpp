// Memory formulas against hand-computed numbers (Megatron bytes/param, Korthikanti 2022).
#include <gtest/gtest.h>

#include <array>
#include <cstdlib>
#include <vector>

#include "core/errors.hpp"
#include "plan/memory_model.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

TEST(MemoryModel, EighteenBytesPerParameterMixedPrecision) {
    EXPECT_DOUBLE_EQ(state_bytes_per_param(DType::F16, false, 8), 18.0);
    EXPECT_DOUBLE_EQ(state_bytes_per_param(DType::BF16, false, 64), 18.0);
    EXPECT_DOUBLE_EQ(state_bytes_per_param(DType::F32, false, 8), 16.0);
}

TEST(MemoryModel, DistributedOptimizerSixPlusTwelveOverD) {
    for (int d : {1, 2, 8, 64}) {
        EXPECT_DOUBLE_EQ(state_bytes_per_param(DType::BF16, true, d), 6.0 + 12.0 / d) << d;
        EXPECT_DOUBLE_EQ(state_bytes_per_param(DType::F32, true, d), 8.0 + 8.0 / d) << d;
    }
}

ActivationInputs gpt3_175b(int t, bool sp, Recompute rc) {
    // Korthikanti Table 3's 175B: s 2048, b 1, h 12288, a 96.
    return {2048, 1, 12288, 96, t, sp, rc, false, DType::F16};
}

TEST(MemoryModel, KorthikantiFormulaVariants) {
    const double sbh = 2048.0 * 12288.0, as_h = 96.0 * 2048.0 / 12288.0;  // 5as/h = 80
    auto k = korthikanti_activation_bytes_per_layer;
    // No parallelism: sbh (34 + 5as/h) = sbh x 114.
    EXPECT_DOUBLE_EQ(k(gpt3_175b(1, false, Recompute::None)), sbh * (34 + 5 * as_h));
    EXPECT_DOUBLE_EQ(34 + 5 * as_h, 114.0);
    // TP 8: sbh (10 + 24/8 + 5as/(8h)) = sbh x 23.
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, false, Recompute::None)), sbh * 23.0);
    // TP 8 + SP: sbh/8 (34 + 80) = sbh x 14.25.
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, true, Recompute::None)), sbh * 14.25);
    // Selective + TP 8 + SP: 34 sbh / 8; selective + TP 8 without SP: sbh (10 + 3).
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, true, Recompute::Selective)), sbh * 34.0 / 8);
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, false, Recompute::Selective)), sbh * 13.0);
    // Full recompute: 2sbh, 2sbh/t with SP.
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, false, Recompute::Full)), 2 * sbh);
    EXPECT_DOUBLE_EQ(k(gpt3_175b(8, true, Recompute::Full)), 2 * sbh / 8);
    // Flash attention never stores the scores: same as selective.
    ActivationInputs flash = gpt3_175b(8, true, Recompute::None);
    flash.flash_attention = true;
    EXPECT_DOUBLE_EQ(k(flash), sbh * 34.0 / 8);
    // fp32: 2-byte terms double, 1-byte masks do not: 66 sbh + 9 as^2 b at t = 1.
    ActivationInputs f32 = gpt3_175b(1, false, Recompute::None);
    f32.dtype = DType::F32;
    EXPECT_DOUBLE_EQ(k(f32), 66 * sbh + 9 * 96.0 * 2048 * 2048);
}

// What lib/model keeps: Korthikanti's sixteen 2-byte tensors per layer, no dropout masks
// (regenerated), fp32 LayerNorm statistics (16 bytes per residual row) and fp32 softmax
// probabilities (4as^2b/t) or, with flash attention, only their log-sum-exp (4asb/t).
TEST(MemoryModel, ActivationsAsTheModelStoresThem) {
    const double sb = 2048.0, sbh = sb * 12288.0, as2b = 96.0 * 2048 * 2048;
    // TP 8: residual side 4 x 2 sbh + stats 16 sb, split side (3h + h + 4h + 4h) x 2 / 8.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::None)),
                     8 * sbh + 16 * sb + 24 * sbh / 8 + 4 * as2b / 8);
    // Korthikanti's count less the masks (2sbh + as^2b/t) and the dropout output (2as^2b/t),
    // plus the fp32 statistics and the probabilities' extra 2 bytes.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::None)),
                     korthikanti_activation_bytes_per_layer(gpt3_175b(8, false, Recompute::None)) - 2 * sbh +
                         16 * sb - as2b / 8);
    // TP 8 + SP, selective: everything split, 32 sbh / 8 (Korthikanti 34 sbh / 8).
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, true, Recompute::Selective)), (32 * sbh + 16 * sb) / 8);
    // Full recompute keeps the layer output only: 2sbh, 2sbh/t with SP (as Korthikanti).
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::Full)), 2 * sbh);
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, true, Recompute::Full)), 2 * sbh / 8);
    // Flash attention: the fp32 log-sum-exp per row and head instead of the probabilities.
    ActivationInputs flash = gpt3_175b(8, true, Recompute::None);
    flash.flash_attention = true;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(flash), (32 * sbh + 16 * sb) / 8 + 4 * 96.0 * 2048 / 8);
    // fp32 doubles the tensors, not the (already fp32) statistics and probabilities.
    ActivationInputs f32 = gpt3_175b(1, false, Recompute::None);
    f32.dtype = DType::F32;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(f32), 64 * sbh + 16 * sb + 4 * as2b);
    // A non-4h FFN counts twice (fc1 output and GELU output).
    ActivationInputs wide = gpt3_175b(1, false, Recompute::Selective);
    wide.f = 8 * 12288;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(wide), (8 + 8 + 32) * sbh + 16 * sb);
}

TEST(MemoryModel, MicroBatchSlotsPerChunk) {
    // 1F1B: the first stage keeps p micro-batches, the last one; never more than exist.
    EXPECT_EQ(chunk_slots(8, 1, 64, 0), std::vector<int>{8});
    EXPECT_EQ(chunk_slots(8, 1, 64, 7), std::vector<int>{1});
    EXPECT_EQ(chunk_slots(8, 1, 3, 0), std::vector<int>{3});
    EXPECT_EQ(chunk_slots(1, 1, 16, 0), std::vector<int>{1});  // no pipeline: one at a time
    // Interleaved: each chunk's own peak. They peak at different times, so the sum is at
    // least Korthikanti's simultaneous 2(p - 1) + (v - 1)p + 1 chunks at stage 0.
    for (auto [p, v, m] : {std::array{4, 2, 8}, std::array{8, 2, 64}, std::array{8, 4, 64}, std::array{2, 2, 4}}) {
        std::vector<int> s = chunk_slots(p, v, m, 0);
        ASSERT_EQ(int(s.size()), v);
        int sum = 0;
        for (int n : s) sum += n;
        EXPECT_GE(sum, std::min(2 * (p - 1) + (v - 1) * p + 1, m * v)) << p << " " << v << " " << m;
        EXPECT_LE(sum, m * v);
        EXPECT_GE(s.front(), s.back());  // chunk 0 runs ahead
    }
    // m == p: every forward runs before the first backward, so each chunk keeps all m.
    EXPECT_EQ(chunk_slots(2, 2, 2, 0), (std::vector<int>{2, 2}));
    // A shared pool needs only the simultaneous count: Korthikanti's 2(p - 1) + (v - 1)p + 1
    // at stage 0 (11 against 12 per-chunk slots at p 4 v 2 m 8; 39 against 48 at p 8 v 4 m 64).
    EXPECT_EQ(pooled_slots(4, 2, 8, 0), 11);
    EXPECT_EQ(pooled_slots(8, 4, 64, 0), 39);
    EXPECT_EQ(pooled_slots(8, 4, 64, 7), 2 * 0 + 3 * 8 + 1);
    EXPECT_EQ(pooled_slots(1, 1, 16, 0), 1);
}

TEST(MemoryModel, StageBreakdownAddsUp) {
    ModelShape m = gpt22b();
    Layout l;
    l.tp = 8;
    l.pp = 2;
    l.dp = 1;
    l.global_batch = 16;
    l.recompute = Recompute::Selective;
    l.sequence_parallel = true;
    const DevicePreset& dev = find_device_preset("h100-80gb");
    MemoryBreakdown first = stage_memory(m, l, dev, 0);
    const double p0 = double(stage_params(m, 8, 2, 0).total());
    EXPECT_DOUBLE_EQ(first.weights, 2 * p0);
    EXPECT_DOUBLE_EQ(first.gradients, 4 * p0);
    EXPECT_DOUBLE_EQ(first.optimizer, 12 * p0);
    // 2 micro-batches of 24 layers in flight, each with its (T/t, h) input and its tokens.
    const double T = 2048, h = 6144, sbh = T * h;
    const double layer = (32 * sbh + 16 * T) / 8;
    EXPECT_DOUBLE_EQ(first.activations, 2 * (24 * layer + 2 * sbh / 8 + 4 * T));
    // Workspace: residual grad, two (T, h) transients, the (T, 4h/t) wide one, the SP
    // gather, the refilled attention probabilities (fp32, 64/8 heads).
    const double workspace = 2 * sbh / 8 + 4 * sbh + 2 * T * 4 * h / 8 + 2 * sbh + 4.0 * 8 * T * T;
    const double comm = 3 * dev.comm_buffer_gib_per_group * double(1ull << 30);  // TP, PP p2p, embedding
    EXPECT_DOUBLE_EQ(first.buffers, dev.runtime_overhead_gib * double(1ull << 30) + comm + workspace);
    EXPECT_DOUBLE_EQ(first.fragmentation, 0.10 * (first.activations + workspace));
    EXPECT_DOUBLE_EQ(first.total(), first.weights + first.gradients + first.optimizer + first.activations +
                                        first.buffers + first.fragmentation);
    // The last stage keeps one micro-batch, its targets and final LayerNorm; its workspace
    // holds the 16-bit logits, s x V/t, and five fp32 loss statistics per token.
    MemoryBreakdown last = stage_memory(m, l, dev, 1);
    EXPECT_DOUBLE_EQ(last.activations, 24 * layer + 2 * sbh / 8 + 4 * T + 8 * T / 8 + 2 * sbh / 8);
    EXPECT_DOUBLE_EQ(last.buffers - first.buffers, 2.0 * T * 51200 / 8 + 20 * T);
    // Distributed optimizer over 2 replicas halves only the optimizer part (the gradients
    // are reduce-scattered in place, no scratch); DP adds a communicator.
    l.dp = 2;
    l.global_batch = 32;
    l.distributed_optimizer = true;
    MemoryBreakdown sharded = stage_memory(m, l, dev, 0);
    EXPECT_DOUBLE_EQ(sharded.optimizer, 6 * p0);
    EXPECT_DOUBLE_EQ(sharded.buffers - first.buffers, dev.comm_buffer_gib_per_group * double(1ull << 30));
    // The CPU backend's peak has no runtime, communicator or fragmentation overhead.
    MemoryBreakdown cpu = stage_memory(m, l, find_device_preset("cpu"), 0);
    EXPECT_DOUBLE_EQ(cpu.fragmentation, 0.0);
    EXPECT_DOUBLE_EQ(cpu.buffers, workspace);
}

TEST(MemoryModel, ComparesAgainstMeasuredRun) {
    // The training code reports its allocator's numbers per component; the comparison is
    // what its integration test will assert on.
    MemoryBreakdown p;
    p.weights = 100;
    p.gradients = 200;
    p.optimizer = 600;
    p.activations = 110;
    MeasuredMemory m;
    m.weights = 100;
    m.gradients = 200;
    m.activations = 100;
    MemoryDeviation d = compare_memory(p, m);
    EXPECT_DOUBLE_EQ(d.weights, 0.0);
    EXPECT_NEAR(d.activations, 0.10, 1e-12);
    EXPECT_DOUBLE_EQ(d.optimizer, 0.0);  // not measured, not compared
    EXPECT_NEAR(d.worst(), 0.10, 1e-12);
}

TEST(MemoryModel, DeviceMemoryFromEnvironmentAndMeminfo) {
    EXPECT_EQ(parse_meminfo_total("MemTotal:       16384 kB\nMemFree:  100 kB\n"), 16384ull * 1024);
    EXPECT_EQ(parse_meminfo_total("MemFree: 1 kB\n"), 0u);
    setenv("DEVICE_MEMORY_GB", "80", 1);
    DeviceMemory d = device_memory(find_device_preset("cpu"), 4);
    EXPECT_EQ(d.bytes, 80ull << 30);
    EXPECT_EQ(d.source, "DEVICE_MEMORY_GB");
    setenv("DEVICE_MEMORY_GB", "eighty", 1);
    EXPECT_THROW(device_memory(find_device_preset("cpu"), 4), UsageError);
    unsetenv("DEVICE_MEMORY_GB");
    // CPU: the node's RAM shared by its ranks.
    DeviceMemory cpu1 = device_memory(find_device_preset("cpu"), 1);
    DeviceMemory cpu4 = device_memory(find_device_preset("cpu"), 4);
    EXPECT_GT(cpu1.bytes, 0u);
    EXPECT_EQ(cpu4.bytes, cpu1.bytes / 4);
    // GPU without a probe: the preset; with one: what it reports.
    EXPECT_EQ(device_memory(find_device_preset("a100-40gb"), 8).bytes, 40ull << 30);
    set_gpu_memory_probe([]() -> std::uint64_t { return 12345; });
    EXPECT_EQ(device_memory(find_device_preset("a100-40gb"), 8).bytes, 12345u);
    set_gpu_memory_probe(nullptr);
}

}  // namespace
}  // namespace gpt::plan::test
