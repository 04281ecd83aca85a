// Megatron's build_blending_indices (helpers.cpp), sample for sample. Sample i goes to the
// dataset whose error fl(weight * max(i, 1)) - count is largest, the first such dataset on a
// tie. Every step reads every dataset's error (all of them move with i), and the plain loop's
// compare-and-branch per dataset mispredicts often, so a blend of hundreds of datasets spent
// most of its start-up here; with AVX2 (every x86-64 CPU this project's GPUs sit beside) the
// errors are computed four at a time, their maximum taken without branches, and the first
// dataset holding it found by a compare mask. The roundings are the plain loop's: a multiply
// and then a subtract (lib/data is built with -ffp-contract=off, and intrinsics are never
// contracted), so the order is exactly the plain loop's and Megatron's.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "core/errors.hpp"
#include "data/gpt_indices.hpp"

namespace gpt::data {
namespace {

#if defined(__AVX2__)
constexpr std::size_t kLanes = 4;

// counts: the datasets' sample counts as doubles (exact below 2^53), padded to whole vectors
// with weight 0 and a count no real error falls below (never the maximum).
void blend_vectorised(const std::vector<double>& weights, std::int64_t size, std::int16_t* which,
                      std::int64_t* sample) {
    const std::size_t n = weights.size(), blocks = (n + kLanes - 1) / kLanes, padded = blocks * kLanes;
    std::vector<double> w(padded, 0.0), count(padded, std::numeric_limits<double>::max()), err(padded);
    std::copy(weights.begin(), weights.end(), w.begin());
    std::fill(count.begin(), count.begin() + static_cast<std::ptrdiff_t>(n), 0.0);
    for (std::int64_t i = 0; i < size; ++i) {
        const __m256d x = _mm256_set1_pd(std::max(static_cast<double>(i), 1.0));
        __m256d best = _mm256_set1_pd(-std::numeric_limits<double>::infinity());
        for (std::size_t b = 0; b < padded; b += kLanes) {
            // Rounded twice, as Megatron's helper does: the product, then the difference.
            const __m256d e = _mm256_sub_pd(_mm256_mul_pd(_mm256_loadu_pd(&w[b]), x), _mm256_loadu_pd(&count[b]));
            _mm256_storeu_pd(&err[b], e);
            best = _mm256_max_pd(best, e);
        }
        // The largest error in every lane, then the first dataset holding it.
        best = _mm256_max_pd(best, _mm256_permute2f128_pd(best, best, 1));
        best = _mm256_max_pd(best, _mm256_permute_pd(best, 0b0101));
        std::size_t pick = 0;
        for (std::size_t b = 0; b < padded; b += kLanes) {
            const int hit = _mm256_movemask_pd(_mm256_cmp_pd(_mm256_loadu_pd(&err[b]), best, _CMP_EQ_OQ));
            if (hit != 0) {
                pick = b + static_cast<std::size_t>(__builtin_ctz(static_cast<unsigned>(hit)));
                break;
            }
        }
        which[i] = static_cast<std::int16_t>(pick);
        sample[i] = static_cast<std::int64_t>(count[pick]);
        count[pick] += 1.0;
    }
}
#endif

}  // namespace

void build_blending_indices_plain(const std::vector<double>& weights, std::int64_t size,
                                  std::vector<std::int16_t>& dataset_index,
                                  std::vector<std::int64_t>& dataset_sample_index) {
    GPT_ASSERT(!weights.empty() && weights.size() < 32768, "blend of ", weights.size(), " datasets");
    dataset_index.assign(static_cast<std::size_t>(size), 0);
    dataset_sample_index.assign(static_cast<std::size_t>(size), 0);
    std::int16_t* which = dataset_index.data();
    std::int64_t* sample = dataset_sample_index.data();
    std::vector<std::int64_t> current(weights.size(), 0);
    for (std::int64_t i = 0; i < size; ++i) {
        const double x = std::max(static_cast<double>(i), 1.0);
        std::size_t best = 0;
        double best_err = weights[0] * x - static_cast<double>(current[0]);
        for (std::size_t d = 1; d < weights.size(); ++d) {
            // Rounded twice, as Megatron's helper does: lib/data is built without contraction.
            const double err = weights[d] * x - static_cast<double>(current[d]);
            if (err > best_err) {
                best_err = err;
                best = d;
            }
        }
        which[i] = static_cast<std::int16_t>(best);
        sample[i] = current[best]++;
    }
}

void build_blending_indices(const std::vector<double>& weights, std::int64_t size,
                            std::vector<std::int16_t>& dataset_index, std::vector<std::int64_t>& dataset_sample_index) {
#if defined(__AVX2__)
    GPT_ASSERT(!weights.empty() && weights.size() < 32768, "blend of ", weights.size(), " datasets");
    dataset_index.assign(static_cast<std::size_t>(size), 0);
    dataset_sample_index.assign(static_cast<std::size_t>(size), 0);
    blend_vectorised(weights, size, dataset_index.data(), dataset_sample_index.data());
#else
    build_blending_indices_plain(weights, size, dataset_index, dataset_sample_index);
#endif
}

}  // namespace gpt::data
