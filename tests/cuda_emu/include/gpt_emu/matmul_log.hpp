// What the emulator's cublasLtMatmul ran (tests only): one log per process, in call order, so
// a test can see which of a layer's GEMMs asked for what (e.g. FP8 fast accumulation only in
// the forward GEMMs, which epilogue) and which algorithm each call ran
// (GPT_CUDA_GEMM_ALGO=autotune).
#pragma once

#include <cstdint>
#include <vector>

namespace gpt_emu {

struct MatmulCall {
    std::int64_t m, n, k;  // cuBLASLt's: D is m x n column-major (our C transposed)
    bool fp8;              // A and B FP8 codes
    bool fast_accum;       // CUBLASLT_MATMUL_DESC_FAST_ACCUM set
    int algo;              // which of the heuristic's answers (0: its first)
    std::uint32_t epilogue;  // CUBLASLT_MATMUL_DESC_EPILOGUE (a cublasLtEpilogue_t)
};

std::vector<MatmulCall> matmul_calls();
void clear_matmul_calls();

// The emulator's heuristic offers kMatmulAlgos algorithms (when asked for that many), all the
// same arithmetic. A test can give algorithm i costs: its j-th call from then on waits
// cost[i][j] ms (the last entry for later calls) on the calling thread before it returns,
// which CUDA events recorded around the call measure (the emulator's events take the host
// clock when recorded). Empty: no cost.
constexpr int kMatmulAlgos = 3;
void set_matmul_algo_costs_ms(std::vector<std::vector<double>> cost);

}  // namespace gpt_emu
