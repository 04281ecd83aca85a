// Per-device performance presets for the planner's time and memory models, and the
// device-memory lookup (DEVICE_MEMORY_GB, a GPU hook, or /proc/meminfo for the CPU backend).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "plan/kernel_efficiencies.hpp"

namespace gpt::plan {

struct DevicePreset {
    std::string name;            // "a100-40gb", "a100-80gb", "h100-80gb", "h200", "cpu"
    bool is_gpu = true;
    double memory_gib = 0;       // nominal memory per device (per rank for "cpu": see device_memory_bytes)
    double peak_tflops_16bit = 0;  // dense fp16/bf16 matrix throughput per device
    double peak_tflops_fp32 = 0;   // dense fp32 matrix throughput (fp32 training)
    double hbm_gbps = 0;           // memory bandwidth, GB/s
    double intra_node_gbps = 0;    // collective bus bandwidth inside a node (NVLink), GB/s
    double inter_node_gbps = 0;    // collective bus bandwidth per device across nodes, GB/s
    double intra_node_latency_us = 0;
    double inter_node_latency_us = 0;
    double runtime_overhead_gib = 0;  // context, library handles, GEMM workspace
    double comm_buffer_gib_per_group = 0;  // collective library buffers per communicator
    double fragmentation_fraction = 0;     // allocator margin on activations + workspace
    // Dense FP8 matrix throughput (--fp8-format: the linear layers' GEMMs); 0: the device
    // has no FP8 tensor cores and the planner refuses to plan FP8 on it.
    double peak_tflops_fp8 = 0;
    // What the kernels reach of the peaks above (GEMMs, attention, element-wise).
    KernelEfficiencies kernels;
};

// The "cpu" preset's dense-GEMM peak of one rank: this host's cores shared by the ranks of
// a node, at kCpuCoreTflops each. Calibrated on bench/train_cpu (gpt-tiny, fp32, 2 threads
// on AVX-512 cores: 168 model GFLOP/s = 66% of 2 x 128 GFLOP/s; the preset's GEMM efficiency
// is 0.70). GPT_CPU_CORES overrides the core count (plan for another machine).
inline constexpr double kCpuCoreTflops = 0.128;  // 2 FMA x 16 fp32 lanes x 2 FLOP x 2 GHz
DevicePreset cpu_preset_for_host(const DevicePreset& cpu, int local_world_size);

// Every preset, in the order shown to users.
const std::vector<DevicePreset>& device_presets();
// Throws UsageError naming the valid names when `name` is unknown.
const DevicePreset& find_device_preset(std::string_view name);

// Where a device-memory figure came from, for the report.
struct DeviceMemory {
    std::uint64_t bytes = 0;
    std::string source;  // "DEVICE_MEMORY_GB", "detected GPU", "/proc/meminfo / 8 ranks", "preset"
};

// GPU memory comes from core/device_info (the CUDA runtime in a CUDA build: the first
// visible GPU's total memory). A probe set here replaces that (tests; other devices).
// Returns 0 when no GPU answers.
using GpuMemoryProbe = std::uint64_t (*)();
void set_gpu_memory_probe(GpuMemoryProbe probe);

// Memory one rank may use: DEVICE_MEMORY_GB (GiB, like nvidia-smi's MiB / 1024) when set;
// else the GPU hook for GPU presets, or MemTotal from /proc/meminfo divided by the ranks
// that share the node for the CPU preset; else the preset's nominal memory.
DeviceMemory device_memory(const DevicePreset& preset, int local_world_size);

// Parses /proc/meminfo text; returns MemTotal in bytes, 0 when absent. Exposed for tests.
std::uint64_t parse_meminfo_total(std::string_view meminfo_text);

}  // namespace gpt::plan
