#include "inference/sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/errors.hpp"
#include "core/philox.hpp"

namespace gpt::inference {

void validate(const SamplingOptions& o) {
    GPT_REQUIRE(std::isfinite(o.temperature) && o.temperature > 0.0f, UsageError, "--temperature ", o.temperature,
                " must be positive (use --greedy for argmax decoding)");
    GPT_REQUIRE(o.top_k >= 0, UsageError, "--top-k ", o.top_k, " must be >= 0 (0: off)");
    GPT_REQUIRE(o.top_p >= 0.0f && o.top_p <= 1.0f, UsageError, "--top-p ", o.top_p, " must be in [0, 1] (0: off)");
}

double sampling_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t position) {
    // A counter of its own ("samp" in the third word) apart from the dropout streams.
    const Philox4x32 r = philox4x32_10(static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(stream),
                                       static_cast<std::uint32_t>(stream >> 32), 0x73616d70u, seed);
    const std::uint64_t bits = (std::uint64_t{r.v[0]} << 32 | r.v[1]) >> 11;
    return static_cast<double>(bits) * 0x1.0p-53;
}

double log_prob(const float* logits, std::int64_t n, std::int32_t id) {
    const float mx = *std::max_element(logits, logits + n);
    double s = 0.0;
    for (std::int64_t i = 0; i < n; ++i) s += std::exp(static_cast<double>(logits[i]) - mx);
    return static_cast<double>(logits[id]) - mx - std::log(s);
}

std::int32_t pick_token(const float* logits, std::int64_t vocab, const SamplingOptions& o,
                        std::uint64_t stream, std::uint64_t position) {
    if (o.greedy) return static_cast<std::int32_t>(std::max_element(logits, logits + vocab) - logits);
    // Candidates by decreasing logit, ties by id: the order top-k and top-p cut in and
    // the draw walks.
    std::vector<std::int32_t> ids(static_cast<std::size_t>(vocab));
    std::iota(ids.begin(), ids.end(), 0);
    auto before = [&](std::int32_t a, std::int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
    std::size_t keep = ids.size();
    if (o.top_k > 0 && static_cast<std::size_t>(o.top_k) < keep) {
        keep = static_cast<std::size_t>(o.top_k);
        std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(keep), ids.end(), before);
    } else {
        std::sort(ids.begin(), ids.end(), before);
    }
    // softmax(logits / T) over the kept candidates, in double.
    const double t = o.temperature, top = logits[ids[0]];
    std::vector<double> p(keep);
    double sum = 0.0;
    for (std::size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[ids[i]] - top) / t);
    if (o.top_p > 0.0f && o.top_p < 1.0f) {
        // Nucleus: the fewest most likely tokens whose mass reaches top_p (the token that
        // crosses it stays, as in HF and Megatron); at least one.
        double mass = 0.0;
        std::size_t n = 0;
        while (n < keep && mass < o.top_p * sum) mass += p[n++];
        keep = std::max<std::size_t>(n, 1);
        sum = std::accumulate(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
    }
    const double u = sampling_uniform(o.seed, stream, position) * sum;
    double c = 0.0;
    for (std::size_t i = 0; i < keep; ++i) {
        c += p[i];
        if (u < c) return ids[i];
    }
    return ids[keep - 1];  // u within rounding of the total
}

}  // namespace gpt::inference
