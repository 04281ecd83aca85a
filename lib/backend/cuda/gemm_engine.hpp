// GemmEngine: the backend's GEMM on cuBLASLt (row-major mapping, fp32 compute, bias, tanh
// GELU, GELU-gradient and bias-gradient epilogues, strided batches, one algorithm per shape
// cached: the heuristic's first or autotuned, gemm_algo.hpp; one workspace). Whether the
// GELU and bias-gradient epilogues are fused into cuBLASLt or run as our element-wise
// kernels after it is chosen at run time (gemm_epilogue.hpp).
#pragma once

#include <cublasLt.h>

#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.hpp"

namespace gpt::cuda {

class CudaBackend;

class GemmEngine {
public:
    explicit GemmEngine(cudaStream_t stream);  // the backend's compute stream
    ~GemmEngine();
    GemmEngine(const GemmEngine&) = delete;
    GemmEngine& operator=(const GemmEngine&) = delete;

    void run(CudaBackend& be, const GemmArgs& g);

private:
    // What one cuBLASLt call fuses into its epilogue (in our row-major terms).
    struct Fused {
        const void* bias = nullptr;  // + bias[n] (C's type)
        void* gelu_aux = nullptr;    // with bias: aux = pre-activation, D = tanh-GELU(aux)
        float* bias_grad = nullptr;  // = sum over k of op(A)[i, k], fp32 (overwritten)
        const void* dgelu_aux = nullptr;  // D *= tanh-GELU'(aux), aux the pre-activation
    };
    // One cuBLASLt call: D[c] = alpha*op(A)op(B) + beta*C with the fused epilogue, everything
    // already in cuBLASLt's column-major terms of the row-major request. When the heuristic
    // has no algorithm: plain and bias GEMMs run the fallback kernel; a GELU or bias-gradient
    // epilogue returns false and the caller computes the pieces separately.
    bool matmul(const GemmArgs& g, void* d, const Fused& f);

    cudaStream_t stream_;
    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    // A shape being autotuned (gemm_algo.hpp): the heuristic's candidates and the events
    // around each of its calls so far (start and end, in call order).
    struct Tuning {
        std::vector<cublasLtMatmulAlgo_t> candidates;
        std::vector<cudaEvent_t> events;
    };
    std::unordered_map<std::string, cublasLtMatmulAlgo_t> algos_;
    std::unordered_map<std::string, Tuning> tuning_;
    std::unordered_set<std::string> no_algo_;  // shapes that take the fallback kernel
};

}  // namespace gpt::cuda
