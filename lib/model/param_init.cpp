#include "model/param_init.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "core/philox.hpp"

namespace gpt::model {

std::uint64_t parameter_seed(std::uint64_t seed, const std::string& name) {
    // FNV-1a over the name, then a splitmix64 finaliser mixed with the seed.
    std::uint64_t h = 1469598103934665603ull;
    for (unsigned char c : name) {
        h ^= c;
        h *= 1099511628211ull;
    }
    std::uint64_t z = h ^ (seed + 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

namespace {

// Box-Muller on two independent Philox draws of this element: one normal per index, so
// any subset of indices can be generated alone.
inline float normal_at(std::uint64_t key, std::uint64_t index, double stddev) {
    const double two32 = 4294967296.0;
    double u1 = (static_cast<double>(philox_bits(key, 2 * index)) + 0.5) / two32;
    double u2 = (static_cast<double>(philox_bits(key, 2 * index + 1)) + 0.5) / two32;
    double r = std::sqrt(-2.0 * std::log(u1));
    return static_cast<float>(stddev * r * std::cos(6.283185307179586 * u2));
}

}  // namespace

void init_parameter(const ParamEntry& e, const ModelDims& dims, double init_std,
                    std::uint64_t seed, float* out) {
    if (e.init == ParamInit::Zero || e.init == ParamInit::One) {
        std::fill(out, out + e.numel, e.init == ParamInit::One ? 1.0f : 0.0f);
        return;
    }
    const double stddev = e.init == ParamInit::ScaledNormal
                              ? init_std / std::sqrt(2.0 * dims.num_layers)
                              : init_std;
    // The head's copy of the tied embedding must equal the embedding itself.
    const std::string& key_name = e.name == ParamLayout::word_embeddings_for_head()
                                      ? std::string(ParamLayout::word_embeddings())
                                      : e.name;
    const std::uint64_t key = parameter_seed(seed, key_name);
    GPT_ASSERT(e.global_shape.size() >= 2, "normal init expects a matrix: ", e.name);
    // Element i of the local slice draws the number of its global (row-major) index, so
    // the values do not depend on the TP layout. Matrices, and SwiGLU's [2, ffn, h] fc1.
    const std::size_t nd = e.global_shape.size();
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < e.numel; ++i) {
        std::int64_t rest = i, global = 0, stride = 1;
        for (std::size_t k = nd; k-- > 0;) {
            std::int64_t idx = rest % e.local_shape[k];
            rest /= e.local_shape[k];
            if (static_cast<int>(k) == e.split_dim) idx += e.slice_start;
            global += idx * stride;
            stride *= e.global_shape[k];
        }
        out[i] = normal_at(key, static_cast<std::uint64_t>(global), stddev);
    }
}

void init_parameters(const ParamLayout& layout, const ModelDims& dims, double init_std,
                     std::uint64_t seed, float* out) {
    std::fill(out, out + layout.total_elements(), 0.0f);
    for (const auto& e : layout.entries()) init_parameter(e, dims, init_std, seed, out + e.offset);
}

}  // namespace gpt::model
