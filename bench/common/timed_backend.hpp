// A Backend decorator that forwards every call and accumulates wall time per operation and
// per category (GEMM, attention, elementwise, optimizer), so the benchmarks' --profile can
// show where an iteration goes and how far the GEMMs are from the device's peak.
//
// GPU backends return from an op once it is queued, so a clock around the call measures the
// launch, not the kernel. With sync_each_op the decorator synchronizes the device before and
// after each timed op: the time is then the kernel's (plus one launch and two sync
// latencies, a few microseconds, which inflates tiny ops). It also serialises host and
// device, so profile separate iterations from the ones you time for throughput
// (set_enabled(false) turns the decorator into a plain forwarder).
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/backend.hpp"

namespace gpt::bench {

enum class OpCategory { Gemm, Attention, Elementwise, Optimizer, Communication };
inline constexpr std::array<OpCategory, 5> kOpCategories = {
    OpCategory::Gemm, OpCategory::Attention, OpCategory::Elementwise, OpCategory::Optimizer,
    OpCategory::Communication};

inline const char* op_category_name(OpCategory c) {
    switch (c) {
        case OpCategory::Gemm: return "GEMM";
        case OpCategory::Attention: return "attention";
        case OpCategory::Elementwise: return "elementwise";
        case OpCategory::Optimizer: return "optimizer";
        case OpCategory::Communication: return "communication";
    }
    return "?";
}

class TimedBackend final : public Backend {
public:
    struct OpTotals {
        double seconds = 0.0;
        long calls = 0;
        double flops = 0.0;  // GEMMs only: 2 m n k per matrix product
        OpCategory category = OpCategory::Elementwise;
    };

    explicit TimedBackend(Backend& inner, bool sync_each_op = false)
        : b_(inner), sync_(sync_each_op) {}

    void set_enabled(bool on) { enabled_ = on; }
    void reset() { t_.clear(); }
    const std::map<std::string, OpTotals>& totals() const { return t_; }

    double category_seconds(OpCategory c) const {
        double s = 0;
        for (const auto& [k, v] : t_)
            if (v.category == c) s += v.seconds;
        return s;
    }
    double gemm_flops() const {
        double f = 0;
        for (const auto& [k, v] : t_) f += v.flops;
        return f;
    }
    double total_seconds() const {
        double s = 0;
        for (const auto& [k, v] : t_) s += v.seconds;
        return s;
    }

    // One row per op (GEMMs by shape), slowest first; GEMM rows show their throughput.
    void print(std::FILE* out) const {
        const double total = total_seconds();
        std::vector<std::pair<std::string, OpTotals>> rows(t_.begin(), t_.end());
        std::sort(rows.begin(), rows.end(),
                  [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
        for (const auto& [k, v] : rows) {
            std::fprintf(out, "  %-52s %9.1f ms %5.1f%% %7ld calls", k.c_str(), v.seconds * 1e3,
                         100 * v.seconds / total, v.calls);
            if (v.flops > 0 && v.seconds > 0) {
                const double rate = v.flops / v.seconds;
                if (rate >= 1e12) std::fprintf(out, " %7.1f TFLOP/s", rate / 1e12);
                else std::fprintf(out, " %7.1f GFLOP/s", rate / 1e9);
            }
            std::fprintf(out, "\n");
        }
        std::fprintf(out, "  %-52s %9.1f ms\n", "total in backend", total * 1e3);
    }

    std::string name() const override { return b_.name(); }
    bool host_memory() const override { return b_.host_memory(); }
    void* alloc(std::size_t n) override { return b_.alloc(n); }
    void free(void* p) override { b_.free(p); }
    void copy_to_device(void* d, const void* s, std::size_t n) override { T("copy", [&] { b_.copy_to_device(d, s, n); }); }
    void copy_to_host(void* d, const void* s, std::size_t n) override { T("copy", [&] { b_.copy_to_host(d, s, n); }); }
    void copy(void* d, const void* s, std::size_t n) override { T("copy", [&] { b_.copy(d, s, n); }); }
    void zero(void* p, std::size_t n) override { T("zero", [&] { b_.zero(p, n); }); }
    void synchronize() override { b_.synchronize(); }
    std::size_t bytes_in_use() const override { return b_.bytes_in_use(); }
    std::size_t peak_bytes() const override { return b_.peak_bytes(); }
    Stream stream() const override { return b_.stream(); }
protected:
    void do_gemm(const GemmArgs& g) override {
        if (!enabled_) return b_.gemm(g);
        const char* epi = g.epilogue == GemmEpilogue::Bias       ? " +bias"
                          : g.epilogue == GemmEpilogue::BiasGelu ? " +bias+gelu"
                          : g.epilogue == GemmEpilogue::GeluGrad ? " *gelu'"
                                                                 : "";
        char key[128];
        if (g.batch > 1)
            std::snprintf(key, sizeof key, "gemm %c%c %lldx m=%lld n=%lld k=%lld%s", g.trans_a ? 'T' : 'N',
                          g.trans_b ? 'T' : 'N', (long long)g.batch, (long long)g.m, (long long)g.n,
                          (long long)g.k, epi);
        else
            std::snprintf(key, sizeof key, "gemm %c%c m=%lld n=%lld k=%lld%s", g.trans_a ? 'T' : 'N',
                          g.trans_b ? 'T' : 'N', (long long)g.m, (long long)g.n, (long long)g.k, epi);
        T(key, [&] { b_.gemm(g); }, OpCategory::Gemm, 2.0 * g.m * g.n * g.k * g.batch);
    }
    void do_layernorm_forward(const void* x, const void* g, const void* be, void* y, float* m, float* r,
                              std::int64_t rows, std::int64_t cols, float eps, DType t, bool zc,
                              const NormRows& at) override {
        T("layernorm_forward", [&] { b_.layernorm_forward(x, g, be, y, m, r, rows, cols, eps, t, zc, at); });
    }
    void do_layernorm_backward(const void* dy, const void* x, const void* g, const float* m, const float* r,
                               const void* dres, void* dx, float* dg, float* db, std::int64_t rows,
                               std::int64_t cols, DType t, bool zc, const NormRows& at) override {
        T("layernorm_backward",
          [&] { b_.layernorm_backward(dy, x, g, m, r, dres, dx, dg, db, rows, cols, t, zc, at); });
    }
    void do_gelu_forward(const void* x, void* y, std::int64_t n, bool ta, DType t) override {
        T("gelu_forward", [&] { b_.gelu_forward(x, y, n, ta, t); });
    }
    void do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, bool ta, DType t) override {
        T("gelu_backward", [&] { b_.gelu_backward(dy, x, dx, n, ta, t); });
    }
    void do_bias_add(void* x, const void* b, std::int64_t r, std::int64_t c, DType t) override {
        T("bias_add", [&] { b_.bias_add(x, b, r, c, t); });
    }
    void do_bias_grad(const void* dy, float* db, std::int64_t r, std::int64_t c, DType t) override {
        T("bias_grad", [&] { b_.bias_grad(dy, db, r, c, t); });
    }
    void do_bias_dropout_add(const void* x, const void* b, const void* res, void* out, std::int64_t r,
                             std::int64_t c, float p, std::uint64_t s, std::uint64_t o, DType t) override {
        T("bias_dropout_add", [&] { b_.bias_dropout_add(x, b, res, out, r, c, p, s, o, t); });
    }
    void do_dropout_forward(const void* x, void* y, std::int64_t n, float p, std::uint64_t s,
                            std::uint64_t o, DType t) override {
        T("dropout", [&] { b_.dropout_forward(x, y, n, p, s, o, t); });
    }
    void do_add(const void* a, const void* b, void* y, std::int64_t n, DType t) override {
        T("add", [&] { b_.add(a, b, y, n, t); });
    }
    void do_accumulate_f32(const void* x, float* y, std::int64_t n, DType t) override {
        T("accumulate_f32", [&] { b_.accumulate_f32(x, y, n, t); });
    }
    void do_scale(void* x, float a, std::int64_t n, DType t) override { T("scale", [&] { b_.scale(x, a, n, t); }); }
    void do_cast(const void* s, DType st, void* d, DType dt, std::int64_t n) override {
        T("cast", [&] { b_.cast(s, st, d, dt, n); });
    }
    void do_cast_to_fp8(const void* x, DType t, std::int64_t r, std::int64_t c, Fp8Format f,
                        const float* s, std::uint8_t* q, std::uint8_t* qt, float* amax) override {
        T("cast_to_fp8", [&] { b_.cast_to_fp8(x, t, r, c, f, s, q, qt, amax); });
    }
    void do_cast_to_fp8_bias_grad(const void* x, DType t, std::int64_t r, std::int64_t c, Fp8Format f,
                                  const float* s, std::uint8_t* q, std::uint8_t* qt, float* amax,
                                  float* dbias) override {
        T("cast_to_fp8_bias_grad", [&] { b_.cast_to_fp8_bias_grad(x, t, r, c, f, s, q, qt, amax, dbias); });
    }
    void do_cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType t, std::int64_t r, std::int64_t c,
                              Fp8Format f, const float* s, std::uint8_t* q, std::uint8_t* qt, float* amax,
                              float* dbias) override {
        T("cast_to_fp8_dgelu", [&] { b_.cast_to_fp8_dgelu(dy, pre, tanh_approx, t, r, c, f, s, q, qt, amax, dbias); });
    }
    void do_norm_forward_fp8(bool rms, const void* x, const void* g, const void* be, void* y, float* m, float* r,
                             std::int64_t rows, std::int64_t cols, float eps, DType t, const Fp8Codes& codes,
                             bool zc) override {
        T(rms ? "rmsnorm_forward_fp8" : "layernorm_forward_fp8",
          [&] { b_.norm_forward_fp8(rms, x, g, be, y, m, r, rows, cols, eps, t, codes, zc); });
    }
    void do_swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType t,
                               const Fp8Codes& codes) override {
        T("swiglu_forward_fp8", [&] { b_.swiglu_forward_fp8(x, y, rows, cols, t, codes); });
    }
    void do_gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType t,
                             const Fp8Codes& codes) override {
        T("gelu_forward_fp8", [&] { b_.gelu_forward_fp8(x, y, n, tanh_approx, t, codes); });
    }
    void do_amax(const void* x, DType t, std::int64_t n, float* amax) override {
        T("amax", [&] { b_.amax(x, t, n, amax); });
    }
    void do_fp8_current_scales(const float* amax, float* s, float* si, std::int64_t n, Fp8Format f,
                               float if_overflow) override {
        T("fp8_current_scales", [&] { b_.fp8_current_scales(amax, s, si, n, f, if_overflow); });
    }
    void do_attention_forward(const AttentionArgs& a, const void* q, void* o, void* s) override {
        T("attention_forward", [&] { b_.attention_forward(a, q, o, s); }, OpCategory::Attention);
    }
    void do_attention_backward(const AttentionArgs& a, const void* q, const void* o, const void* s,
                               const void* d, void* dq) override {
        T("attention_backward", [&] { b_.attention_backward(a, q, o, s, d, dq); }, OpCategory::Attention);
    }
    void do_embedding_forward(const std::int32_t* tk, const void* tb, void* o, std::int64_t b, std::int64_t s,
                              std::int64_t h, std::int64_t v0, std::int64_t v1, DType t) override {
        T("embedding_forward", [&] { b_.embedding_forward(tk, tb, o, b, s, h, v0, v1, t); });
    }
    void do_embedding_backward(const std::int32_t* tk, const void* d, float* dt, std::int64_t b, std::int64_t s,
                               std::int64_t h, std::int64_t v0, std::int64_t v1, DType t) override {
        T("embedding_backward", [&] { b_.embedding_backward(tk, d, dt, b, s, h, v0, v1, t); });
    }
    void do_position_embedding_forward(const void* tb, void* o, std::int64_t b, std::int64_t s, std::int64_t h,
                                       std::int64_t p, DType t) override {
        T("position_embedding_forward", [&] { b_.position_embedding_forward(tb, o, b, s, h, p, t); });
    }
    void do_position_embedding_backward(const void* d, float* dt, std::int64_t b, std::int64_t s,
                                        std::int64_t h, std::int64_t p, DType t) override {
        T("position_embedding_backward", [&] { b_.position_embedding_backward(d, dt, b, s, h, p, t); });
    }
    void do_cross_entropy_max(const void* l, float* m, std::int64_t r, std::int64_t v, DType t) override {
        T("cross_entropy_max", [&] { b_.cross_entropy_max(l, m, r, v, t); });
    }
    void do_cross_entropy_sums(const void* l, const std::int32_t* tg, const float* m, float* se, float* tl,
                               std::int64_t r, std::int64_t v, std::int64_t v0, DType t) override {
        T("cross_entropy_sums", [&] { b_.cross_entropy_sums(l, tg, m, se, tl, r, v, v0, t); });
    }
    void do_cross_entropy_stats(const void* l, const std::int32_t* tg, float* m, float* se, float* tl,
                                std::int64_t r, std::int64_t v, std::int64_t v0, DType t) override {
        T("cross_entropy_stats", [&] { b_.cross_entropy_stats(l, tg, m, se, tl, r, v, v0, t); });
    }
    void do_cross_entropy_loss(const float* m, const float* se, const float* tl, float* loss,
                               std::int64_t r) override {
        T("cross_entropy_loss", [&] { b_.cross_entropy_loss(m, se, tl, loss, r); });
    }
    void do_cross_entropy_backward(const void* l, const std::int32_t* tg, const float* m, const float* se,
                                   const float* dl, void* dlog, std::int64_t r, std::int64_t v,
                                   std::int64_t v0, DType t) override {
        T("cross_entropy_backward", [&] { b_.cross_entropy_backward(l, tg, m, se, dl, dlog, r, v, v0, t); });
    }
    void do_adam_step(const AdamArgs& a) override {
        T("adam_step", [&] { b_.adam_step(a); }, OpCategory::Optimizer);
    }
    GradStats do_grad_stats(const float* g, std::int64_t n) override {
        GradStats r;
        T("grad_stats", [&] { r = b_.grad_stats(g, n); }, OpCategory::Optimizer);
        return r;
    }
    double do_sum(const float* x, std::int64_t n) override {
        double r = 0;
        T("sum", [&] { r = b_.sum(x, n); }, OpCategory::Optimizer);
        return r;
    }

private:
    template <typename F>
    void T(const char* key, F&& f, OpCategory cat = OpCategory::Elementwise, double flops = 0.0) {
        if (!enabled_) return f();
        // The leading sync keeps earlier queued work (ours or a communicator's) out of this op.
        if (sync_) b_.synchronize();
        const auto t0 = std::chrono::steady_clock::now();
        f();
        if (sync_) b_.synchronize();
        auto& e = t_[key];
        e.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        e.calls += 1;
        e.flops += flops;
        e.category = cat;
    }
    Backend& b_;
    bool sync_ = false;
    bool enabled_ = true;
    std::map<std::string, OpTotals> t_;
};

}  // namespace gpt::bench
