#include "plan/device_presets.hpp"
#include "plan/memory_limit.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/device_info.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"

namespace gpt::plan {

namespace {

// Sources of the numbers (see docs/planner.md, "Device presets"):
// - Peak matrix throughput and HBM bandwidth: NVIDIA A100 datasheet (312 TFLOP/s fp16/bf16
//   dense, 19.5 fp32 / 156 TF32; 1,555 GB/s for 40 GB, 2,039 GB/s for 80 GB SXM), H100 SXM
//   datasheet (989 TFLOP/s bf16 dense, 67 fp32; 3.35 TB/s), H200 datasheet (989 TFLOP/s,
//   4.8 TB/s, 141 GB).
// - FP8: the H100 SXM and H200 datasheets' dense FP8 tensor throughput, 1,979 TFLOP/s (twice
//   the bf16 rate; the datasheets' 3,958 is with sparsity). A100 has no FP8 tensor cores (0:
//   FP8 is not planned on it). The FP8 GEMMs take the 16-bit GEMMs' efficiency curve. The CPU
//   backend quantises to FP8 and multiplies in fp32: its FP8 rate is its fp32 rate.
// - Kernel efficiencies (KernelEfficiencies): on Hopper this project's own kernels, measured
//   (hopper_kernels below). On A100 Megatron-LM's: large cuBLAS GEMMs reach ~80% of peak
//   (Narayanan et al. 2021, Sec. 5.8 measured per-layer GEMM throughput; NVIDIA "Matrix
//   Multiplication Background" guide). Both A100 efficiencies are calibrated on Korthikanti et al. 2022 only (Narayanan et al. 2021 is
//   kept for out-of-sample validation, tests/plan/test_published_runs.cpp): the batched
//   attention GEMMs of the unfused attention core (QK^T and AV at head dim 64-128 move an
//   s x s score matrix per head for 2d FLOPs a score, below A100's ~150 FLOP/byte balance)
//   run at 0.32 of peak, so that the core's recomputation costs Table 4's 1.3 ms per 22B
//   layer (selective 13.2 ms backward against 11.9 ms, micro-batch 4); then the large-GEMM
//   efficiency 0.77 makes the 175B run's MFU the measured 51.4%.
// - gemm_half_gflop: efficiency falls for GEMMs below a few GFLOP (the tile wave
//   quantisation in the same NVIDIA guide); larger machines need larger GEMMs.
// - Bus bandwidths: NCCL all-reduce bus bandwidth measured by nccl-tests on DGX A100
//   (~230 GB/s over NVLink3, ~23 GB/s per GPU over 8x HDR 200 Gb/s) and DGX H100 (~360 GB/s
//   NVLink4, ~45 GB/s per GPU over 8x NDR 400 Gb/s). Override with --plan-intra-node-gbps /
//   --plan-inter-node-gbps for other fabrics.
// - runtime_overhead_gib: CUDA context plus cuBLAS/cuBLASLt workspace, ~0.5-0.8 GiB as
//   reported by nvidia-smi for an idle process with the libraries loaded.
// - comm_buffer_gib_per_group: NCCL's default 4 MiB buffers x channels x peers, ~64-128 MiB
//   per communicator.
// - fragmentation_fraction: a 10% margin on the activation arenas and workspace for the
//   CUDA caching allocator (2 MiB size classes) and the cuBLASLt/NCCL allocations outside
//   it. CPU: 0. The backend's malloc'd blocks are allocated once, at start-up, and its peak
//   counts exactly the bytes asked for, which the model predicts (tests/train/
//   test_memory_prediction.cpp); the runtime overhead is 0 for the same reason.
// - CPU: AVX-512 cores (64 fp32 FLOP/cycle/core at 2 GHz, OpenBLAS SGEMM at ~70%; the
//   peak below is for 16 cores, and the planner scales it to this host's cores per rank,
//   cpu_preset_for_host), shared-memory MPI inside a node and 100 Gb/s Ethernet/InfiniBand
//   between nodes. The CPU backend computes in fp32,
//   so its 16-bit peak equals its fp32 peak.

// This project's kernels on Hopper, from the one H200 run so far (issue #33: CUDA 13.0,
// driver 580, fp16, `bench_train_gpu --config gpt-1.3b --profile` and bench/attention_gpu
// in the same run). Compute-bound figures are fractions of the 989 TFLOP/s peak.
// - Plain GEMMs: the profile's GEMMs of fc1/fc2's size (8 x 2048 tokens, 2048 x 8192:
//   549.8 GFLOP) without an epilogue ran at 657-692 TFLOP/s: the midpoint, 674.5, through the
//   small-GEMM curve, is a large-GEMM efficiency of 0.687 (the 0.68 that published
//   Megatron-Core H100 runs gave before).
// - The GEMMs with the GELU epilogue (fc1 forward, fc2's data gradient: the same size) ran
//   at 436-462 TFLOP/s: the midpoints' ratio, 449 / 674.5 = 0.666 of a plain GEMM.
// - Flash attention (bench/attention_gpu, TFLOP/s of the causal half, forward / forward +
//   backward): head dim 64 (gpt2-1.5b-s1024) 101.7 / 63.5, 96 (gpt22b-shape) 175.2 / 113.8,
//   128 (gpt-1.3b) 122.6 / 116.8.
// - Element-wise kernels: 75% of HBM bandwidth as before (the profile gives no figure
//   against it); GELU is no separate pass (it is in the GEMM epilogue above).
constexpr double kHopperPeakTflops = 989;
constexpr double kHopperHalfGflop = 4.0;
constexpr double kProfiledFcGflop = 2.0 * 8 * 2048 * 2048 * 8192 / 1e9;
constexpr double kPlainGemmTflops = (657 + 692) / 2.0;
constexpr double kGeluEpilogueGemmTflops = (436 + 462) / 2.0;

KernelEfficiencies hopper_kernels() {
    KernelEfficiencies k;
    k.gemm = gemm_efficiency_from_rate(kPlainGemmTflops, kProfiledFcGflop, kHopperPeakTflops, kHopperHalfGflop);
    k.gemm_half_gflop = kHopperHalfGflop;
    k.gelu_epilogue = kGeluEpilogueGemmTflops / kPlainGemmTflops;
    k.attention_core = 0.40;  // unfused core: not measured (no published H100 run without flash)
    k.flash_by_head_dim = {flash_rate_from_bench(64, 101.7, 63.5, kHopperPeakTflops),
                           flash_rate_from_bench(96, 175.2, 113.8, kHopperPeakTflops),
                           flash_rate_from_bench(128, 122.6, 116.8, kHopperPeakTflops)};
    k.memory = 0.75;
    return k;
}

std::vector<DevicePreset> make_presets() {
    std::vector<DevicePreset> p;
    // A100: Megatron-LM's kernels of the published runs the presets are calibrated on
    // (above), not this project's (no A100 has run it): bias-GELU its own pass.
    const KernelEfficiencies megatron_a100{.gemm = 0.77, .gemm_half_gflop = 1.0, .gelu_epilogue = 0,
                                           .attention_core = 0.32, .flash_attention = 0.65,
                                           .flash_by_head_dim = {}, .memory = 0.75};
    DevicePreset a100_40{"a100-40gb", true, 40, 312, 19.5, 1555, 230, 23, 5, 10, 0.75, 0.125, 0.10, 0, megatron_a100};
    DevicePreset a100_80 = a100_40;
    a100_80.name = "a100-80gb";
    a100_80.memory_gib = 80;
    a100_80.hbm_gbps = 2039;
    // H100 SXM runs the H200's kernels (the same GH100 chip, 132 SMs and 989 TFLOP/s at the
    // same 700 W): the same fractions of the same peak; what is memory-bound follows its own
    // 3.35 TB/s. Not measured on an H100.
    DevicePreset h100{"h100-80gb", true, 80, 989, 67, 3350, 360, 45, 5, 10, 0.75, 0.125, 0.10, 1979, hopper_kernels()};
    DevicePreset h200 = h100;
    h200.name = "h200";
    h200.memory_gib = 141.0 * 1e9 / (1ull << 30);  // 141 GB = 131 GiB
    h200.hbm_gbps = 4800;
    const KernelEfficiencies cpu_kernels{.gemm = 0.70, .gemm_half_gflop = 0.05, .gelu_epilogue = 0,
                                         .attention_core = 0.50, .flash_attention = 0.50,
                                         .flash_by_head_dim = {}, .memory = 0.60};
    // FP8 at the fp32 rate (see above).
    DevicePreset cpu{"cpu", false, 0, 2.0, 2.0, 100, 10, 10, 2, 15, 0.0, 0.0, 0.0, 2.0, cpu_kernels};
    p.push_back(a100_40);
    p.push_back(a100_80);
    p.push_back(h100);
    p.push_back(h200);
    p.push_back(cpu);
    return p;
}

std::atomic<GpuMemoryProbe> g_gpu_probe{nullptr};

}  // namespace

const std::vector<DevicePreset>& device_presets() {
    static const std::vector<DevicePreset> presets = make_presets();
    return presets;
}

const DevicePreset& find_device_preset(std::string_view name) {
    std::string names;
    for (const auto& p : device_presets()) {
        if (p.name == name) return p;
        names += (names.empty() ? "" : ", ") + p.name;
    }
    GPT_THROW(UsageError, "unknown planner device '", name, "' (expected one of: ", names, ")");
}

DevicePreset cpu_preset_for_host(const DevicePreset& cpu, int local_world_size) {
    int cores = static_cast<int>(std::thread::hardware_concurrency());
    if (const auto forced = env::cpu_cores()) cores = *forced;
    const double per_rank = std::max(1.0, double(std::max(cores, 1)) / std::max(local_world_size, 1));
    DevicePreset p = cpu;
    p.peak_tflops_fp32 = p.peak_tflops_16bit = p.peak_tflops_fp8 = per_rank * kCpuCoreTflops;
    return p;
}

void set_gpu_memory_probe(GpuMemoryProbe probe) { g_gpu_probe.store(probe); }

std::uint64_t parse_meminfo_total(std::string_view text) {
    std::istringstream in{std::string(text)};
    std::string key, unit;
    std::uint64_t value = 0;
    while (in >> key >> value) {
        std::getline(in, unit);
        if (key == "MemTotal:") return value * 1024;  // /proc/meminfo reports kB = KiB
    }
    return 0;
}

DeviceMemory device_memory(const DevicePreset& preset, int local_world_size) {
    constexpr double gib = double(1ull << 30);
    if (const auto forced = env::device_memory_gb())
        return {static_cast<std::uint64_t>(*forced * gib), "DEVICE_MEMORY_GB"};
    if (preset.is_gpu) {
        if (auto probe = g_gpu_probe.load()) {
            if (std::uint64_t b = probe()) return {b, "detected GPU"};
        } else if (visible_gpu_count() > 0) {
            // This process's first visible GPU (each rank sees the one it will use first
            // when CUDA_VISIBLE_DEVICES is set per rank; otherwise the node's GPUs are alike).
            const GpuInfo g = gpu_info(0);
            if (g.total_memory > 0) return {g.total_memory, "detected " + g.name};
        }
        return {static_cast<std::uint64_t>(preset.memory_gib * gib), "preset " + preset.name};
    }
    // The job's real limit: cgroups (Slurm --mem, containers) and Slurm's variables can be
    // far below MemTotal.
    const NodeMemory node = node_memory_limit();
    GPT_REQUIRE(node.bytes > 0, IoError,
                "cannot read MemTotal from /proc/meminfo. HINT: set DEVICE_MEMORY_GB to the GiB one rank may use");
    int ranks = local_world_size > 0 ? local_world_size : 1;
    return {node.bytes / static_cast<std::uint64_t>(ranks),
            node.source + " / " + std::to_string(ranks) + " ranks per node"};
}

}  // namespace gpt::plan
