// GemmEngine: the backend's GEMM on cuBLASLt (row-major mapping, fp32 compute, bias
// epilogue, strided batches, heuristic results cached per shape, one workspace).
#pragma once

#include <cublasLt.h>

#include <string>
#include <unordered_map>
#include <unordered_set>

#include "backend/backend.hpp"

namespace gpt::cuda {

class CudaBackend;

class GemmEngine {
public:
    GemmEngine();
    ~GemmEngine();
    GemmEngine(const GemmEngine&) = delete;
    GemmEngine& operator=(const GemmEngine&) = delete;

    void run(CudaBackend& be, const GemmArgs& g);

private:
    // One cuBLASLt call: D[c] = alpha*op(A)op(B) + beta*C (+ bias when bias != nullptr),
    // everything already in cuBLASLt's column-major terms of the row-major request.
    void matmul(const GemmArgs& g, void* d, const void* bias);

    cublasLtHandle_t handle_ = nullptr;
    void* workspace_ = nullptr;
    std::unordered_map<std::string, cublasLtMatmulAlgo_t> algos_;
    std::unordered_set<std::string> no_algo_;  // shapes that take the fallback kernel
};

}  // namespace gpt::cuda
