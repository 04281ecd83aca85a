#include "emulated_device.hpp"

#include <cstdint>

#include "backend/cpu/cpu_backend.hpp"

namespace gpt::test {

namespace {

// Bit 62 set: outside the canonical address range, so a host dereference faults.
constexpr std::uintptr_t kShift = std::uintptr_t{1} << 62;

template <class T>
T* host(T* p) {
    if (p == nullptr) return nullptr;
    const auto v = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<T*>(v - kShift);
}

class EmulatedDevice final : public Backend {
public:
    std::string name() const override { return "emulated-device"; }
    bool host_memory() const override { return false; }

    void* alloc(std::size_t bytes) override {
        void* p = cpu_.alloc(bytes);
        return p ? reinterpret_cast<void*>(reinterpret_cast<std::uintptr_t>(p) + kShift) : nullptr;
    }
    void free(void* p) override { cpu_.free(host(p)); }
    void copy_to_device(void* dst, const void* src, std::size_t n) override {
        cpu_.copy_to_device(host(dst), src, n);
    }
    void copy_to_host(void* dst, const void* src, std::size_t n) override {
        cpu_.copy_to_host(dst, host(src), n);
    }
    void copy(void* dst, const void* src, std::size_t n) override { cpu_.copy(host(dst), host(src), n); }
    void zero(void* p, std::size_t n) override { cpu_.zero(host(p), n); }
    void synchronize() override { cpu_.synchronize(); }
    std::size_t bytes_in_use() const override { return cpu_.bytes_in_use(); }
    std::size_t peak_bytes() const override { return cpu_.peak_bytes(); }
    Stream stream() const override { return cpu_.stream(); }

protected:
    void do_gemm(const GemmArgs& g) override {
        GemmArgs h = g;
        h.a = host(g.a);
        h.b = host(g.b);
        h.c = host(g.c);
        h.bias = host(g.bias);
        h.aux = host(g.aux);
        h.bias_grad = host(g.bias_grad);
        h.fp8.a_scale_inv = host(g.fp8.a_scale_inv);
        h.fp8.b_scale_inv = host(g.fp8.b_scale_inv);
        cpu_.gemm(h);
    }
    void do_layernorm_forward(const void* x, const void* gamma, const void* beta, void* y, float* mean,
                              float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                              DType dtype, bool zero_centered_gamma, const NormRows& at) override {
        cpu_.layernorm_forward(host(x), host(gamma), host(beta), host(y), host(mean), host(rstd), rows,
                               cols, eps, dtype, zero_centered_gamma, at);
    }
    void do_layernorm_backward(const void* dy, const void* x, const void* gamma, const float* mean,
                               const float* rstd, const void* dres, void* dx, float* dgamma, float* dbeta,
                               std::int64_t rows, std::int64_t cols, DType dtype, bool zero_centered_gamma,
                               const NormRows& at) override {
        cpu_.layernorm_backward(host(dy), host(x), host(gamma), host(mean), host(rstd), host(dres), host(dx),
                                host(dgamma), host(dbeta), rows, cols, dtype, zero_centered_gamma, at);
    }
    void do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype) override {
        cpu_.gelu_forward(host(x), host(y), n, tanh_approx, dtype);
    }
    void do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n, bool tanh_approx,
                          DType dtype) override {
        cpu_.gelu_backward(host(dy), host(x), host(dx), n, tanh_approx, dtype);
    }
    void do_bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols, DType dtype) override {
        cpu_.bias_add(host(x), host(bias), rows, cols, dtype);
    }
    void do_bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                      DType dtype) override {
        cpu_.bias_grad(host(dy), host(dbias), rows, cols, dtype);
    }
    void do_bias_dropout_add(const void* x, const void* bias, const void* residual, void* out,
                             std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                             std::uint64_t offset, DType dtype) override {
        cpu_.bias_dropout_add(host(x), host(bias), host(residual), host(out), rows, cols, p, seed,
                              offset, dtype);
    }
    void do_dropout_forward(const void* x, void* y, std::int64_t n, float p, std::uint64_t seed,
                            std::uint64_t offset, DType dtype) override {
        cpu_.dropout_forward(host(x), host(y), n, p, seed, offset, dtype);
    }
    void do_add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) override {
        cpu_.add(host(a), host(b), host(y), n, dtype);
    }
    void do_accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) override {
        cpu_.accumulate_f32(host(x), host(y), n, dtype);
    }
    void do_scale(void* x, float alpha, std::int64_t n, DType dtype) override {
        cpu_.scale(host(x), alpha, n, dtype);
    }
    void do_cast(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n) override {
        cpu_.cast(host(src), src_type, host(dst), dst_type, n);
    }
    void do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols, Fp8Format format,
                        const float* scale, std::uint8_t* q, std::uint8_t* q_t, float* amax) override {
        cpu_.cast_to_fp8(host(x), dtype, rows, cols, format, host(scale), host(q), host(q_t), host(amax));
    }
    void do_amax(const void* x, DType dtype, std::int64_t n, float* amax) override {
        cpu_.amax(host(x), dtype, n, host(amax));
    }
    void do_fp8_current_scales(const float* amax, float* scale, float* scale_inv, std::int64_t n,
                               Fp8Format format, float if_overflow) override {
        cpu_.fp8_current_scales(host(amax), host(scale), host(scale_inv), n, format, if_overflow);
    }
    void do_attention_forward(const AttentionArgs& a, const void* qkv, void* out, void* saved) override {
        cpu_.attention_forward(a, host(qkv), host(out), host(saved));
    }
    void do_attention_backward(const AttentionArgs& a, const void* qkv, const void* out, const void* saved,
                               const void* dout, void* dqkv) override {
        cpu_.attention_backward(a, host(qkv), host(out), host(saved), host(dout), host(dqkv));
    }
    void do_embedding_forward(const std::int32_t* tokens, const void* table, void* out, std::int64_t b,
                              std::int64_t s, std::int64_t h, std::int64_t vocab_start,
                              std::int64_t vocab_end, DType dtype) override {
        cpu_.embedding_forward(host(tokens), host(table), host(out), b, s, h, vocab_start, vocab_end,
                               dtype);
    }
    void do_embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable, std::int64_t b,
                               std::int64_t s, std::int64_t h, std::int64_t vocab_start,
                               std::int64_t vocab_end, DType dtype) override {
        cpu_.embedding_backward(host(tokens), host(dout), host(dtable), b, s, h, vocab_start, vocab_end,
                                dtype);
    }
    void do_position_embedding_forward(const void* table, void* out, std::int64_t b, std::int64_t s,
                                       std::int64_t h, std::int64_t first_position, DType dtype) override {
        cpu_.position_embedding_forward(host(table), host(out), b, s, h, first_position, dtype);
    }
    void do_position_embedding_backward(const void* dout, float* dtable, std::int64_t b, std::int64_t s,
                                        std::int64_t h, std::int64_t first_position, DType dtype) override {
        cpu_.position_embedding_backward(host(dout), host(dtable), b, s, h, first_position, dtype);
    }
    void do_cross_entropy_max(const void* logits, float* row_max, std::int64_t rows, std::int64_t v,
                              DType dtype) override {
        cpu_.cross_entropy_max(host(logits), host(row_max), rows, v, dtype);
    }
    void do_cross_entropy_sums(const void* logits, const std::int32_t* targets, const float* row_max,
                               float* sum_exp, float* target_logit, std::int64_t rows, std::int64_t v,
                               std::int64_t vocab_start, DType dtype) override {
        cpu_.cross_entropy_sums(host(logits), host(targets), host(row_max), host(sum_exp),
                                host(target_logit), rows, v, vocab_start, dtype);
    }
    void do_cross_entropy_stats(const void* logits, const std::int32_t* targets, float* local_max,
                                float* sum_exp, float* target_logit, std::int64_t rows, std::int64_t v,
                                std::int64_t vocab_start, DType dtype) override {
        cpu_.cross_entropy_stats(host(logits), host(targets), host(local_max), host(sum_exp),
                                 host(target_logit), rows, v, vocab_start, dtype);
    }
    void do_cross_entropy_loss(const float* row_max, const float* sum_exp, const float* target_logit,
                               float* loss, std::int64_t rows) override {
        cpu_.cross_entropy_loss(host(row_max), host(sum_exp), host(target_logit), host(loss), rows);
    }
    void do_cross_entropy_backward(const void* logits, const std::int32_t* targets, const float* row_max,
                                   const float* sum_exp, const float* dloss, void* dlogits,
                                   std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                                   DType dtype) override {
        cpu_.cross_entropy_backward(host(logits), host(targets), host(row_max), host(sum_exp),
                                    host(dloss), host(dlogits), rows, v, vocab_start, dtype);
    }
    void do_adam_step(const AdamArgs& a) override {
        AdamArgs h = a;
        h.main_param = host(a.main_param);
        h.grad = host(a.grad);
        h.exp_avg = host(a.exp_avg);
        h.exp_avg_sq = host(a.exp_avg_sq);
        h.model_param = host(a.model_param);
        cpu_.adam_step(h);
    }
    GradStats do_grad_stats(const float* g, std::int64_t n) override { return cpu_.grad_stats(host(g), n); }
    double do_sum(const float* x, std::int64_t n) override { return cpu_.sum(host(x), n); }

private:
    cpu::CpuBackend cpu_;
};

}  // namespace

std::unique_ptr<Backend> make_emulated_device_backend() { return std::make_unique<EmulatedDevice>(); }

}  // namespace gpt::test
