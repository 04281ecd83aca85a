#include "backend/cpu/blas.hpp"

#include <cblas.h>

#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>

#include "core/errors.hpp"

// Exported by DYNAMIC_ARCH builds of OpenBLAS only, hence weak: null elsewhere.
extern "C" void gotoblas_dynamic_init(void) __attribute__((weak));
extern "C" void gotoblas_dynamic_quit(void) __attribute__((weak));

namespace gpt::cpu {

std::string ensure_blas_kernels() {
    static std::once_flag once;
    std::call_once(once, [] {
        if (std::getenv("OPENBLAS_CORETYPE") || !gotoblas_dynamic_init || !gotoblas_dynamic_quit)
            return;
        const char* core = openblas_get_corename();
        // The generic x86-64 kernels OpenBLAS falls back to for CPUs it does not know.
        const bool fallback = core && (!std::strcmp(core, "Prescott") ||
                                       !std::strcmp(core, "Core2") ||
                                       !std::strcmp(core, "Nehalem") ||
                                       !std::strcmp(core, "Sandybridge"));
        if (!fallback) return;
        const char* want = nullptr;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_cpu_init();
        if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
            __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
            want = "SkylakeX";
        else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
            want = "Haswell";
#endif
        if (!want) return;
        // gotoblas_dynamic_init() reads OPENBLAS_CORETYPE only while no kernel table is
        // set, which is what gotoblas_dynamic_quit() does.
        // The variable is removed again so the environment the user sees is unchanged.
        setenv("OPENBLAS_CORETYPE", want, 0);
        gotoblas_dynamic_quit();
        gotoblas_dynamic_init();
        unsetenv("OPENBLAS_CORETYPE");
    });
    const char* core = openblas_get_corename();
    return core ? core : "unknown";
}

void sgemm(bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
           float alpha, const float* a, std::int64_t lda, const float* b, std::int64_t ldb,
           float beta, float* c, std::int64_t ldc) {
    constexpr std::int64_t kMax = std::numeric_limits<blasint>::max();
    GPT_ASSERT(m <= kMax && n <= kMax && k <= kMax && lda <= kMax && ldb <= kMax && ldc <= kMax,
               "GEMM dimension exceeds the BLAS integer range");
    if (m == 0 || n == 0) return;
    if (k == 0) {
        // Empty product: C = beta*C. BLAS would reject the leading dimensions of 0-wide A/B.
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[i * ldc + j];
        return;
    }
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, static_cast<blasint>(m),
                static_cast<blasint>(n), static_cast<blasint>(k), alpha, a,
                static_cast<blasint>(lda), b, static_cast<blasint>(ldb), beta, c,
                static_cast<blasint>(ldc));
}

namespace {
// OpenBLAS's thread count is process-wide, so nested or concurrent regions (several
// backends on several threads) share one depth count: the first sets 1, the last restores.
std::mutex g_serial_mutex;
int g_serial_depth = 0;
int g_saved_threads = 0;
}  // namespace

BlasSerialRegion::BlasSerialRegion() {
    std::lock_guard lock(g_serial_mutex);
    // openblas_get_parallel(): 0 sequential build, 1 pthreads, 2 OpenMP (serial inside our
    // parallel regions by itself).
    if (g_serial_depth++ == 0 && openblas_get_parallel() == 1) {
        g_saved_threads = openblas_get_num_threads();
        if (g_saved_threads > 1) openblas_set_num_threads(1);
    }
}

BlasSerialRegion::~BlasSerialRegion() {
    std::lock_guard lock(g_serial_mutex);
    if (--g_serial_depth == 0 && g_saved_threads > 1) {
        openblas_set_num_threads(g_saved_threads);
        g_saved_threads = 0;
    }
}

}  // namespace gpt::cpu
