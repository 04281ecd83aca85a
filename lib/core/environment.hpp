// The environment variables that change what a run does, each read and checked here (and
// nowhere else), so that app/gpt_pretrain can print their values under the arguments.
// Read on every call: tests and tools may set them while a process runs.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace gpt::env {

// DEVICE_MEMORY_GB: the device memory per rank the planner assumes, in GiB (UsageError
// unless a positive number).
std::optional<double> device_memory_gb();
// GPT_CPU_CORES: the cores of a node the planner's CPU preset shares among its ranks
// (UsageError unless a positive integer).
std::optional<int> cpu_cores();
// GPT_CUDA_FLASH=simple: the CUDA backend's flash attention uses its CUDA-core kernels.
bool cuda_flash_simple();
// GPT_CUDA_FLASH=sm90: its forward and backward run on the sm_90 (wgmma) kernels where the
// device and the call allow it (the forward on the warp-specialised kernel, else the basic
// one); GPT_CUDA_FLASH=sm90-fwd: the same forward only (the backward on the default kernels);
// GPT_CUDA_FLASH=sm90-basic: the basic (one-warpgroup, unpipelined) sm_90 forward only;
// GPT_CUDA_FLASH=sm90-bwd-1wg: as sm90, but the backward's one-warpgroup variant (64 keys a
// block; sm90's has two warpgroups on 128), for comparison; GPT_CUDA_FLASH=sm90-bwd-plain:
// as sm90, but the backward the unpipelined sm_90 kernel (the one before double buffering);
// GPT_CUDA_FLASH=sm90-dq-atomic: as sm90, but the backward's dQ partials by float2 atomics
// instead of bulk reductions (the two-warpgroup kernel before them); GPT_CUDA_FLASH=sm90-bwd-ws:
// as sm90, but the backward warp-specialised (a producer warpgroup loading by TMA).
// (Any other value of GPT_CUDA_FLASH is a UsageError; unset, empty or sm80: the default.)
bool cuda_flash_sm90();
bool cuda_flash_sm90_fwd();
bool cuda_flash_sm90_basic();
bool cuda_flash_sm90_bwd_1wg();
bool cuda_flash_sm90_bwd_plain();
bool cuda_flash_sm90_dq_atomic();
bool cuda_flash_sm90_bwd_ws();
// GPT_CUDA_GEMM_EPILOGUE=fused|unfused: whether the CUDA backend's GEMMs fuse the tanh GELU,
// its derivative and the bias gradient into cuBLASLt's epilogues (fused, the default) or run
// the GEMM with at most a bias epilogue and then our element-wise kernels (unfused). True
// for unfused; UsageError for any other value.
bool cuda_gemm_epilogue_unfused();
// GPT_CUDA_FP8_FAST_ACCUM=forward|off: whether the forward FP8 GEMMs (the linears' y = x W^T)
// ask cuBLASLt for fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM: no periodic promotion
// of the tensor cores' partial sums to fp32), as Transformer Engine's recipes do for fprop
// (use_split_accumulator=False; dgrad and wgrad keep it True). forward, the default: true;
// off: false; UsageError for any other value.
bool cuda_fp8_fast_accum_forward();
// GPT_CUDA_FP8_CAST=vec|tile: the CUDA backend's FP8 cast kernel. vec, the default: 64 x 64
// tiles with 16-byte loads and 4- and 8-byte code stores (where the tensor's width is a
// multiple of 16 bytes and it is 16-byte aligned); tile: the element-wise 32 x 32 tile kernel
// it replaced. The same codes, amax and (fp32-order aside) bias gradients. True for tile;
// UsageError for any other value.
bool cuda_fp8_cast_tile();
// GPT_CUDA_DROPOUT_DRAWS=word|element: how the default (sm80) flash backward draws its
// attention-dropout mask: word (the default) a 32-bit word of keep bits a thread from whole
// Philox blocks, element one Philox block per score (the kernel before). The same mask. True
// for element; UsageError for any other value.
bool cuda_dropout_draws_per_element();
// GPT_CUDA_GEMM_ALGO=heuristic|autotune: which cuBLASLt algorithm a GEMM shape runs. heuristic,
// the default: the heuristic's first answer, the same every run; autotune: the fastest of the
// heuristic's first answers, timed on the shape's first real calls (results then depend on
// which algorithm won, so a resumed run is no longer bit-identical to an uninterrupted one).
// True for autotune; UsageError for any other value.
bool cuda_gemm_autotune();
// GPT_FP8_INPUT_CAST=fused|separate: where the FP8 codes of the inputs of QKV and FC1 are made
// under delayed scaling. fused, the default: by the layernorm / RMSNorm kernel that produces
// them (and, with sequence parallelism, all-gathered as codes: one byte an element instead
// of two); separate: a cast pass over the norm's (all-gathered) output. Both give the same
// codes bit for bit. True for separate; UsageError for any other value.
bool fp8_input_cast_separate();
// GPT_FP8_GELU=pass|epilogue: where an FP8 layer's bias-GELU MLP (GPT's) computes GELU. pass,
// the default (Transformer Engine's layout): fc1's FP8 GEMM adds only the bias, and one
// element-wise pass writes GELU's output and, with the fused input cast, fc2's FP8 codes;
// epilogue: cuBLASLt's GELU_AUX_BIAS epilogue on fc1's GEMM, then a cast pass for fc2's
// input. The same bytes move either way; the bf16 profile (issue 33) had GEMMs with the
// GELU epilogue at 436-462 TFLOP/s where plain ones of the size ran at 657-692. True for
// epilogue; UsageError for any other value.
bool fp8_gelu_epilogue();
// GPT_FP8_BIAS_GRAD=fused|separate: where an FP8 linear's bias gradient is summed when its
// weight gradient runs in FP8 (the 16-bit GEMM's BGRADB epilogue is not used on FP8 operands:
// it would sum the quantised gradient). fused, the default: by the pass that casts the output
// gradient to FP8 (Backend::cast_to_fp8_bias_grad), which reads it anyway; separate: a
// bias_grad pass of its own, reading the output gradient again. True for separate;
// UsageError for any other value.
bool fp8_bias_grad_separate();

// GPT_DISTRIBUTED_TIMEOUT_SECONDS: the hang watchdog's limit in seconds, overriding
// --distributed-timeout-minutes (whose unit, as in Megatron, is a whole minute); for tests
// and for jobs that want a limit under a minute (UsageError unless a positive number).
std::optional<double> distributed_timeout_seconds();
// GPT_TEST_STALL_BEFORE_SAVE=R: world rank R stops making progress (sleeps without waiting
// on anyone) when it reaches a checkpoint save, so tests can check that the other ranks'
// watchdog ends the job (UsageError unless a non-negative integer).
std::optional<int> test_stall_before_save();
// GPT_TEST_STALL_IN_SAVE=R: the same, inside the save: rank R of the writer's communicator
// (the world) stops after the ranks agreed on the save's folder, before HDF5 sets up the
// file. The other ranks then block inside HDF5's collective set-up (its MPI_Comm_dup, the
// file's MPI-IO open), where only the watchdog's deadline monitor sees them.
std::optional<int> test_stall_in_save();

// Every variable above as (name, value or "None"), for the printed arguments.
std::vector<std::pair<std::string, std::string>> rows();

}  // namespace gpt::env
