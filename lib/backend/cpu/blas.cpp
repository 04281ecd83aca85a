#include "backend/cpu/blas.hpp"

#include <cblas.h>

#include <limits>

#include "core/errors.hpp"

namespace gpt::cpu {

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
           float beta, float* c, std::int64_t ldc) {
    constexpr std::int64_t kMax = std::numeric_limits<blasint>::max();
    GPT_ASSERT(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
               "GEMM dimension exceeds the BLAS integer range");
    if (m == 0 || n == 0) return;
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

BlasSerialRegion::BlasSerialRegion() {
    // openblas_get_parallel(): 0 sequential build, 1 pthreads, 2 OpenMP.
    if (openblas_get_parallel() == 1) {
        saved_threads_ = openblas_get_num_threads();
        if (saved_threads_ > 1) openblas_set_num_threads(1);
    }
}

BlasSerialRegion::~BlasSerialRegion() {
    if (saved_threads_ > 1) openblas_set_num_threads(saved_threads_);
}

}  // namespace gpt::cpu
