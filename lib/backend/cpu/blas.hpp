// Thin row-major sgemm wrapper over OpenBLAS and the rule for calling it from threads.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::cpu {

// C[m,n] = alpha * op(A) op(B) + beta * C, row-major, leading dimensions in elements.
void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
           float beta, float* c, std::int64_t ldc);

// Makes OpenBLAS use vector kernels that fit this CPU. DYNAMIC_ARCH builds pick kernels by
// CPU model, and releases older than the CPU (e.g. 0.3.21 on Emerald Rapids, model 0xCF)
// fall back to the SSE3 "Prescott" kernels: 6-8x slower sgemm. When OPENBLAS_CORETYPE is
// not set and such a fallback is active on a CPU with AVX-512 (or AVX2+FMA), re-runs
// OpenBLAS's own kernel selection with the matching core type. Idempotent; returns the
// core name in use.
std::string ensure_blas_kernels();

// While alive, OpenBLAS runs single-threaded so that sgemm can be called from inside our
// own OpenMP regions (many small GEMMs in parallel) without oversubscribing the cores.
// The pthread build of OpenBLAS would otherwise start its own threads from every caller;
// the OpenMP build already stays serial inside a parallel region.
class BlasSerialRegion {
public:
    BlasSerialRegion();
    ~BlasSerialRegion();
    BlasSerialRegion(const BlasSerialRegion&) = delete;
    BlasSerialRegion& operator=(const BlasSerialRegion&) = delete;
};

}  // namespace gpt::cpu
