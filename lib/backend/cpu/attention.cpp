// Attention entry points: fp32 staging of 16-bit tensors, kernel choice.
#include <cmath>

#include "backend/cpu/attention.hpp"
#include "backend/cpu/common.hpp"
#include "backend/cpu/cpu_backend.hpp"

namespace gpt::cpu {

AttnShape::AttnShape(const AttentionArgs& a)
    : s(a.s), b(a.b), np(a.np), hn(a.hn), qpg(a.heads_per_group),
      scale(a.softmax_scale != 0.0f ? a.softmax_scale
                                    : 1.0f / std::sqrt(static_cast<float>(a.hn))),
      dropout(a.dropout), seed(a.seed), offset(a.offset), doc_start(a.doc_start) {}

namespace {
std::size_t f32_elems(const AttentionArgs& a, bool qkv) {
    const std::int64_t width = qkv ? (a.np + 2 * a.np / a.heads_per_group) : a.np;
    return static_cast<std::size_t>(a.s * a.b * width * a.hn);
}

void to_f32(const void* src, DType t, float* dst, std::size_t n) {
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        for_chunks(static_cast<std::int64_t>(n), [&](std::int64_t i0, std::int64_t len) {
            convert(static_cast<const T*>(src) + i0, dst + i0, static_cast<std::size_t>(len));
        });
    });
}

void from_f32(const float* src, DType t, void* dst, std::size_t n) {
    dispatch(t, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (!std::is_same_v<T, float>) {
            for_chunks(static_cast<std::int64_t>(n), [&](std::int64_t i0, std::int64_t len) {
                convert(src + i0, static_cast<T*>(dst) + i0, static_cast<std::size_t>(len));
            });
        }
    });
}
}  // namespace

void CpuBackend::do_attention_forward(const AttentionArgs& a, const void* qkv, void* out,
                                      void* saved) {
    const AttnShape sh(a);
    const bool f32 = a.dtype == DType::F32;
    const float* q32 = static_cast<const float*>(qkv);
    float* o32 = static_cast<float*>(out);
    if (!f32) {
        float* q = scratch(5, f32_elems(a, true));
        to_f32(qkv, a.dtype, q, f32_elems(a, true));
        q32 = q;
        o32 = scratch(6, f32_elems(a, false));
    }
    if (a.flash)
        attention_flash_forward(sh, q32, o32, static_cast<float*>(saved));
    else
        attention_plain_forward(sh, q32, o32, static_cast<float*>(saved));
    if (!f32) from_f32(o32, a.dtype, out, f32_elems(a, false));
}

void CpuBackend::do_attention_backward(const AttentionArgs& a, const void* qkv, const void* out,
                                       const void* saved, const void* dout, void* dqkv) {
    const AttnShape sh(a);
    const bool f32 = a.dtype == DType::F32;
    const float* q32 = static_cast<const float*>(qkv);
    const float* o32 = static_cast<const float*>(out);
    const float* do32 = static_cast<const float*>(dout);
    float* dq32 = static_cast<float*>(dqkv);
    if (!f32) {
        float* q = scratch(5, f32_elems(a, true));
        to_f32(qkv, a.dtype, q, f32_elems(a, true));
        q32 = q;
        float* d = scratch(7, f32_elems(a, false));
        to_f32(dout, a.dtype, d, f32_elems(a, false));
        do32 = d;
        if (a.flash) {
            float* o = scratch(6, f32_elems(a, false));
            to_f32(out, a.dtype, o, f32_elems(a, false));
            o32 = o;
        }
        dq32 = scratch(4, f32_elems(a, true));
    }
    if (a.flash)
        attention_flash_backward(sh, q32, o32, static_cast<const float*>(saved), do32, dq32);
    else
        attention_plain_backward(sh, q32, static_cast<const float*>(saved), do32, dq32);
    if (!f32) from_f32(dq32, a.dtype, dqkv, f32_elems(a, true));
}

}  // namespace gpt::cpu
