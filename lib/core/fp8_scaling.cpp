#include "core/fp8_scaling.hpp"

#include <cmath>

#include "core/errors.hpp"

namespace gpt {

float current_scale(float amax, Fp8Format format, float if_overflow) {
    if (!(amax > 0.0f) || std::isinf(amax)) return 1.0f;  // 0, NaN, infinity
    const float scale = fp8_max(format) / amax;
    return std::isinf(scale) ? if_overflow : scale;
}

float amax_of(const float* x, std::int64_t n) {
    float m = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
        const float a = std::fabs(x[i]);
        if (std::isnan(a)) return a;
        m = a > m ? a : m;
    }
    return m;
}

DelayedScaling::DelayedScaling(std::vector<Fp8Format> formats, int length, AmaxAlgo algo, int margin)
    : formats_(std::move(formats)), length_(length), algo_(algo), margin_(margin) {
    GPT_REQUIRE(length_ >= 1, UsageError, "--fp8-amax-history-len must be at least 1, not ", length_);
    history_.assign(static_cast<std::size_t>(length_) * formats_.size(), 0.0f);
    scales_.assign(formats_.size(), 1.0f);
}

void DelayedScaling::record(int tensor, float amax) {
    GPT_ASSERT(tensor >= 0 && tensor < tensors(), "FP8 tensor ", tensor, " of ", tensors());
    float& slot = history_[static_cast<std::size_t>(tensor)];
    // NaN stays (it keeps the previous scale at the update, as an infinity does).
    if (std::isnan(amax) || amax > slot) slot = amax;
}

void DelayedScaling::update() {
    const auto n = static_cast<std::size_t>(tensors());
    const auto rows = static_cast<std::size_t>(length_);
    for (std::size_t t = 0; t < n; ++t) {
        float amax = history_[t];
        if (algo_ == AmaxAlgo::Max)
            for (std::size_t r = 1; r < rows; ++r) amax = std::fmax(amax, history_[r * n + t]);
        // The margin as a power of two applied to the format's maximum, then one division.
        const float scaled_max = fp8_max(formats_[t]) * std::ldexp(1.0f, -margin_);
        if (std::isfinite(amax) && amax > 0.0f) scales_[t] = scaled_max / amax;
        // The roll: row 0 goes to the end (the newest of the past), the rest up by one (the
        // oldest, row 1, leaves), and row 0 is cleared for the next step's amaxes.
        const float newest = history_[t];
        for (std::size_t r = 1; r + 1 < rows; ++r) history_[r * n + t] = history_[(r + 1) * n + t];
        if (rows > 1) history_[(rows - 1) * n + t] = newest;
        history_[t] = 0.0f;
    }
}

void DelayedScaling::restore(const std::vector<float>& history, const std::vector<float>& scales) {
    GPT_REQUIRE(history.size() == history_.size() && scales.size() == scales_.size(), InternalError,
                "FP8 scaling state of ", history.size(), " history and ", scales.size(), " scale values for ",
                tensors(), " tensors x ", length_, " steps");
    history_ = history;
    scales_ = scales;
}

}  // namespace gpt
