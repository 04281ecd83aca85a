// Which cuBLASLt algorithm each GEMM shape runs (gemm.cu), chosen at run time so one build
// measures both and the tuning can be switched off without a rebuild
// (GPT_CUDA_GEMM_ALGO=heuristic|autotune, README.md, "Kernel switches").
#pragma once

namespace gpt::cuda {

// Heuristic (the default): the first answer of cuBLASLt's heuristic for the shape, as
// Transformer Engine and PyTorch's default path take it; the same algorithm every run.
// Autotune: the heuristic's first kGemmTuneCandidates answers each run kGemmTuneRounds of the
// shape's first real calls, round-robin, timed with CUDA events on the compute stream; from
// then on the one with the least time of its rounds (the earlier answer on a tie). Each of
// those calls computes the call's own product, so tuning needs no scratch output and no
// extra GEMM: it costs only the slower candidates' extra time on a shape's first calls (the
// first round also carries each kernel's first-launch cost, which the least-of-rounds drops).
// Which candidate wins depends on the timings, so an autotuned run is not bit-reproducible
// from run to run (nor a resumed one against an uninterrupted one).
constexpr int kGemmTuneCandidates = 8;
constexpr int kGemmTuneRounds = 3;

// The first call reads GPT_CUDA_GEMM_ALGO (UsageError on a value other than heuristic or
// autotune); set_gemm_autotune overrides it for the process (tests).
bool gemm_autotune();
void set_gemm_autotune(bool on);

}  // namespace gpt::cuda
