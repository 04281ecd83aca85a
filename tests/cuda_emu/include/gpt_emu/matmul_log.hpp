// What the emulator's cublasLtMatmul ran (tests only): one log per process, in call order, so
// a test can see which of a layer's GEMMs asked for what (e.g. FP8 fast accumulation only in
// the forward GEMMs).
#pragma once

#include <cstdint>
#include <vector>

namespace gpt_emu {

struct MatmulCall {
    std::int64_t m, n, k;  // cuBLASLt's: D is m x n column-major (our C transposed)
    bool fp8;              // A and B FP8 codes
    bool fast_accum;       // CUBLASLT_MATMUL_DESC_FAST_ACCUM set
};

std::vector<MatmulCall> matmul_calls();
void clear_matmul_calls();

}  // namespace gpt_emu
