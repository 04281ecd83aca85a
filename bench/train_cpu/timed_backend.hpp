// A Backend decorator that forwards every call and accumulates wall time per operation, so
// bench_train_cpu --profile can show where an iteration goes (GEMMs by shape class,
// cross-entropy, layernorm, attention, Adam, ...).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "backend/backend.hpp"

namespace gpt::bench {

class TimedBackend final : public Backend {
public:
    explicit TimedBackend(Backend& inner) : b_(inner) {}

    void print(std::FILE* out) const {
        double total = 0;
        for (const auto& [k, v] : t_) total += v.first;
        std::vector<std::pair<std::string, std::pair<double, long>>> rows(t_.begin(), t_.end());
        std::sort(rows.begin(), rows.end(), [](auto& a, auto& b) { return a.second.first > b.second.first; });
        for (const auto& [k, v] : rows)
            std::fprintf(out, "  %-44s %9.1f ms %5.1f%% %7ld calls\n", k.c_str(), v.first * 1e3,
                         100 * v.first / total, v.second);
        std::fprintf(out, "  %-44s %9.1f ms\n", "total in backend", total * 1e3);
    }
    void reset() { t_.clear(); }

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
    void gemm(const GemmArgs& g) override {
        char key[96];
        std::snprintf(key, sizeof key, "gemm %c%c m=%lld n=%lld k=%lld", g.trans_a ? 'T' : 'N',
                      g.trans_b ? 'T' : 'N', (long long)g.m, (long long)g.n, (long long)g.k);
        T(key, [&] { b_.gemm(g); });
    }
    void layernorm_forward(const void* x, const void* g, const void* be, void* y, float* m, float* r,
                           std::int64_t rows, std::int64_t cols, float eps, DType t) override {
        T("layernorm_forward", [&] { b_.layernorm_forward(x, g, be, y, m, r, rows, cols, eps, t); });
    }
    void layernorm_backward(const void* dy, const void* x, const void* g, const float* m, const float* r,
                            void* dx, float* dg, float* db, std::int64_t rows, std::int64_t cols,
                            DType t) override {
        T("layernorm_backward", [&] { b_.layernorm_backward(dy, x, g, m, r, dx, dg, db, rows, cols, t); });
    }
    void gelu_forward(const void* x, void* y, std::int64_t n, bool ta, DType t) override {
        T("gelu_forward", [&] { b_.gelu_forward(x, y, n, ta, t); });
    }
    void gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, bool ta, DType t) override {
        T("gelu_backward", [&] { b_.gelu_backward(dy, x, dx, n, ta, t); });
    }
    void bias_add(void* x, const void* b, std::int64_t r, std::int64_t c, DType t) override {
        T("bias_add", [&] { b_.bias_add(x, b, r, c, t); });
    }
    void bias_grad(const void* dy, float* db, std::int64_t r, std::int64_t c, DType t) override {
        T("bias_grad", [&] { b_.bias_grad(dy, db, r, c, t); });
    }
    void bias_dropout_add(const void* x, const void* b, const void* res, void* out, std::int64_t r,
                          std::int64_t c, float p, std::uint64_t s, std::uint64_t o, DType t) override {
        T("bias_dropout_add", [&] { b_.bias_dropout_add(x, b, res, out, r, c, p, s, o, t); });
    }
    void bias_dropout_add_backward(const void* d, void* dx, float* db, std::int64_t r, std::int64_t c,
                                   float p, std::uint64_t s, std::uint64_t o, DType t) override {
        T("bias_dropout_add_backward", [&] { b_.bias_dropout_add_backward(d, dx, db, r, c, p, s, o, t); });
    }
    void dropout_forward(const void* x, void* y, std::int64_t n, float p, std::uint64_t s,
                         std::uint64_t o, DType t) override {
        T("dropout", [&] { b_.dropout_forward(x, y, n, p, s, o, t); });
    }
    void add(const void* a, const void* b, void* y, std::int64_t n, DType t) override {
        T("add", [&] { b_.add(a, b, y, n, t); });
    }
    void accumulate_f32(const void* x, float* y, std::int64_t n, DType t) override {
        T("accumulate_f32", [&] { b_.accumulate_f32(x, y, n, t); });
    }
    void scale(void* x, float a, std::int64_t n, DType t) override { T("scale", [&] { b_.scale(x, a, n, t); }); }
    void cast(const void* s, DType st, void* d, DType dt, std::int64_t n) override {
        T("cast", [&] { b_.cast(s, st, d, dt, n); });
    }
    std::size_t attention_saved_bytes(const AttentionArgs& a) const override { return b_.attention_saved_bytes(a); }
    void attention_forward(const AttentionArgs& a, const void* q, void* o, void* s) override {
        T("attention_forward", [&] { b_.attention_forward(a, q, o, s); });
    }
    void attention_backward(const AttentionArgs& a, const void* q, const void* o, const void* s,
                            const void* d, void* dq) override {
        T("attention_backward", [&] { b_.attention_backward(a, q, o, s, d, dq); });
    }
    void embedding_forward(const std::int32_t* tk, const void* tb, void* o, std::int64_t b, std::int64_t s,
                           std::int64_t h, std::int64_t v0, std::int64_t v1, DType t) override {
        T("embedding_forward", [&] { b_.embedding_forward(tk, tb, o, b, s, h, v0, v1, t); });
    }
    void embedding_backward(const std::int32_t* tk, const void* d, float* dt, std::int64_t b, std::int64_t s,
                            std::int64_t h, std::int64_t v0, std::int64_t v1, DType t) override {
        T("embedding_backward", [&] { b_.embedding_backward(tk, d, dt, b, s, h, v0, v1, t); });
    }
    void position_embedding_forward(const void* tb, void* o, std::int64_t b, std::int64_t s, std::int64_t h,
                                    std::int64_t p, DType t) override {
        T("position_embedding_forward", [&] { b_.position_embedding_forward(tb, o, b, s, h, p, t); });
    }
    void position_embedding_backward(const void* d, float* dt, std::int64_t b, std::int64_t s,
                                     std::int64_t h, std::int64_t p, DType t) override {
        T("position_embedding_backward", [&] { b_.position_embedding_backward(d, dt, b, s, h, p, t); });
    }
    void cross_entropy_max(const void* l, float* m, std::int64_t r, std::int64_t v, DType t) override {
        T("cross_entropy_max", [&] { b_.cross_entropy_max(l, m, r, v, t); });
    }
    void cross_entropy_sums(const void* l, const std::int32_t* tg, const float* m, float* se, float* tl,
                            std::int64_t r, std::int64_t v, std::int64_t v0, DType t) override {
        T("cross_entropy_sums", [&] { b_.cross_entropy_sums(l, tg, m, se, tl, r, v, v0, t); });
    }
    void cross_entropy_stats(const void* l, const std::int32_t* tg, float* m, float* se, float* tl,
                             std::int64_t r, std::int64_t v, std::int64_t v0, DType t) override {
        T("cross_entropy_stats", [&] { b_.cross_entropy_stats(l, tg, m, se, tl, r, v, v0, t); });
    }
    void cross_entropy_loss(const float* m, const float* se, const float* tl, float* loss,
                            std::int64_t r) override {
        T("cross_entropy_loss", [&] { b_.cross_entropy_loss(m, se, tl, loss, r); });
    }
    void cross_entropy_backward(const void* l, const std::int32_t* tg, const float* m, const float* se,
                                const float* dl, void* dlog, std::int64_t r, std::int64_t v,
                                std::int64_t v0, DType t) override {
        T("cross_entropy_backward", [&] { b_.cross_entropy_backward(l, tg, m, se, dl, dlog, r, v, v0, t); });
    }
    void adam_step(const AdamArgs& a) override { T("adam_step", [&] { b_.adam_step(a); }); }
    GradStats grad_stats(const float* g, std::int64_t n) override {
        GradStats r;
        T("grad_stats", [&] { r = b_.grad_stats(g, n); });
        return r;
    }
    double sum(const float* x, std::int64_t n) override {
        double r = 0;
        T("sum", [&] { r = b_.sum(x, n); });
        return r;
    }

private:
    template <typename F>
    void T(const std::string& key, F&& f) {
        auto t0 = std::chrono::steady_clock::now();
        f();
        auto& e = t_[key];
        e.first += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        e.second += 1;
    }
    Backend& b_;
    std::map<std::string, std::pair<double, long>> t_;
};

}  // namespace gpt::bench
