// Memory formulas against hand-computed numbers (Megatron bytes/param, Korthikanti 2022).
#include <gtest/gtest.h>

#include <cstdlib>

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

TEST(MemoryModel, ActivationFormulaVariants) {
    const double sbh = 2048.0 * 12288.0, as_h = 96.0 * 2048.0 / 12288.0;  // 5as/h = 80
    // No parallelism: sbh (34 + 5as/h) = sbh x 114.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(1, false, Recompute::None)), sbh * (34 + 5 * as_h));
    EXPECT_DOUBLE_EQ(34 + 5 * as_h, 114.0);
    // TP 8: sbh (10 + 24/8 + 5as/(8h)) = sbh x 23.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::None)), sbh * 23.0);
    // TP 8 + SP: sbh/8 (34 + 80) = sbh x 14.25.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, true, Recompute::None)), sbh * 14.25);
    // Selective + TP 8 + SP: 34 sbh / 8; selective + TP 8 without SP: sbh (10 + 3).
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, true, Recompute::Selective)), sbh * 34.0 / 8);
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::Selective)), sbh * 13.0);
    // Full recompute: 2sbh, 2sbh/t with SP.
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, false, Recompute::Full)), 2 * sbh);
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(gpt3_175b(8, true, Recompute::Full)), 2 * sbh / 8);
    // Flash attention never stores the scores: same as selective.
    ActivationInputs flash = gpt3_175b(8, true, Recompute::None);
    flash.flash_attention = true;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(flash), sbh * 34.0 / 8);
    // fp32: 2-byte terms double, 1-byte masks do not: 66 sbh + 9 as^2 b at t = 1.
    ActivationInputs f32 = gpt3_175b(1, false, Recompute::None);
    f32.dtype = DType::F32;
    EXPECT_DOUBLE_EQ(activation_bytes_per_layer(f32), 66 * sbh + 9 * 96.0 * 2048 * 2048);
}

TEST(MemoryModel, MicroBatchesInFlight) {
    // 1F1B: the first stage holds p micro-batches of L/p layers = L layers.
    EXPECT_DOUBLE_EQ(layers_in_flight(96, 8, 1, 64, 0), 96.0);
    EXPECT_DOUBLE_EQ(layers_in_flight(96, 8, 1, 64, 7), 12.0);  // last stage: one
    EXPECT_DOUBLE_EQ(layers_in_flight(96, 8, 1, 3, 0), 36.0);   // only 3 micro-batches exist
    // Interleaved: L (1 + (p - 1)/(p v)) at the first stage (Korthikanti Sec. 4.2.3).
    EXPECT_DOUBLE_EQ(layers_in_flight(96, 8, 2, 64, 0), 96.0 * (1 + 7.0 / 16));
    EXPECT_DOUBLE_EQ(layers_in_flight(96, 8, 4, 64, 0), 96.0 * (1 + 7.0 / 32));
    EXPECT_DOUBLE_EQ(layers_in_flight(48, 1, 1, 16, 0), 48.0);  // no pipeline
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
    // 2 micro-batches of 24 layers in flight + embedding dropout masks of the 2.
    const double sbh = 2048.0 * 6144;
    EXPECT_DOUBLE_EQ(first.activations, 48 * 34 * sbh / 8 + 2 * sbh / 8);
    EXPECT_GT(first.buffers, dev.runtime_overhead_gib * double(1ull << 30));
    EXPECT_DOUBLE_EQ(first.total(), first.weights + first.gradients + first.optimizer + first.activations +
                                        first.buffers + first.fragmentation);
    // The last stage keeps the logits instead: (2 + 4) bytes x s x V/t on top of its one micro-batch.
    MemoryBreakdown last = stage_memory(m, l, dev, 1);
    EXPECT_DOUBLE_EQ(last.activations, 24 * 34 * sbh / 8 + 4 * sbh / 8 + 6.0 * 2048 * 51200 / 8);
    // Distributed optimizer over 2 replicas halves only the optimizer part.
    l.dp = 2;
    l.global_batch = 32;
    l.distributed_optimizer = true;
    EXPECT_DOUBLE_EQ(stage_memory(m, l, dev, 0).optimizer, 6 * p0);
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
