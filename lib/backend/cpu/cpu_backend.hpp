// The CPU backend: OpenBLAS GEMMs, OpenMP-threaded vectorised loops, fp32 accumulation.
// The reference implementation every other backend is checked against.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"

namespace gpt::cpu {

class CpuBackend final : public Backend {
public:
    CpuBackend();
    ~CpuBackend() override;

    std::string name() const override { return "cpu"; }
    bool host_memory() const override { return true; }

    void* alloc(std::size_t bytes) override;
    void free(void* p) override;
    void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
    void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void zero(void* p, std::size_t bytes) override;
    void synchronize() override {}
    std::size_t bytes_in_use() const override;
    std::size_t peak_bytes() const override;
    Stream stream() const override { return Stream(); }  // ops run in call order
    bool has_decoder_ops() const override { return true; }

protected:
    // The ops, called by Backend's public ops with checked arguments (backend.hpp).
    void do_gemm(const GemmArgs& g) override;

    void do_rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                            std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                            bool zero_centered_gamma, const NormRows& at) override;
    void do_rmsnorm_backward(const void* dy, const void* x, const void* gamma, const float* rstd,
                             const void* dresidual, void* dx, float* dgamma, std::int64_t rows,
                             std::int64_t cols, DType dtype, bool zero_centered_gamma, const NormRows& at) override;
    void do_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                           DType dtype) override;
    void do_swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                            std::int64_t cols, DType dtype) override;
    void do_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype) override;
    void do_squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n, DType dtype) override;
    void do_qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped, void* qkv) override;
    void do_qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv, void* dqkv_grouped) override;

    void do_layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                              float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                              float eps, DType dtype, bool zero_centered_gamma, const NormRows& at) override;
    void do_layernorm_backward(const void* dy, const void* x, const void* gamma, const float* mean,
                               const float* rstd, const void* dresidual, void* dx, float* dgamma,
                               float* dbeta, std::int64_t rows, std::int64_t cols,
                               DType dtype, bool zero_centered_gamma, const NormRows& at) override;

    void do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                         DType dtype) override;
    void do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                          bool tanh_approx, DType dtype) override;

    void do_bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                     DType dtype) override;
    void do_bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                      DType dtype) override;

    void do_bias_dropout_add(const void* x, const void* bias, const void* residual, void* out,
                             std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                             std::uint64_t offset, DType dtype) override;
    void do_dropout_forward(const void* x, void* y, std::int64_t n, float p, std::uint64_t seed,
                            std::uint64_t offset, DType dtype) override;

    void do_add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) override;
    void do_accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) override;
    void do_scale(void* x, float alpha, std::int64_t n, DType dtype) override;
    void do_cast(const void* src, DType src_type, void* dst, DType dst_type,
                 std::int64_t n) override;
    void do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                        Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                        float* amax) override;
    void do_amax(const void* x, DType dtype, std::int64_t n, float* amax) override;
    void do_fp8_current_scales(const float* amax, float* scale, float* scale_inv, std::int64_t n,
                               Fp8Format format, float if_overflow) override;

    void do_attention_forward(const AttentionArgs& a, const void* qkv, void* out,
                              void* saved) override;
    void do_attention_backward(const AttentionArgs& a, const void* qkv, const void* out,
                               const void* saved, const void* dout, void* dqkv) override;

    void do_embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                              std::int64_t b, std::int64_t s, std::int64_t h,
                              std::int64_t vocab_start, std::int64_t vocab_end,
                              DType dtype) override;
    void do_embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                               std::int64_t b, std::int64_t s, std::int64_t h,
                               std::int64_t vocab_start, std::int64_t vocab_end,
                               DType dtype) override;
    void do_position_embedding_forward(const void* table, void* out, std::int64_t b,
                                       std::int64_t s, std::int64_t h, std::int64_t first_position,
                                       DType dtype) override;
    void do_position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                        std::int64_t s, std::int64_t h,
                                        std::int64_t first_position, DType dtype) override;

    void do_cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                              std::int64_t v, DType dtype) override;
    void do_cross_entropy_sums(const void* logits, const std::int32_t* targets,
                               const float* row_max, float* sum_exp, float* target_logit,
                               std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                               DType dtype) override;
    void do_cross_entropy_stats(const void* logits, const std::int32_t* targets, float* local_max,
                                float* sum_exp, float* target_logit, std::int64_t rows,
                                std::int64_t v, std::int64_t vocab_start, DType dtype) override;
    void do_cross_entropy_loss(const float* row_max, const float* sum_exp,
                               const float* target_logit, float* loss,
                               std::int64_t rows) override;
    void do_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                   const float* row_max, const float* sum_exp, const float* dloss,
                                   void* dlogits, std::int64_t rows, std::int64_t v,
                                   std::int64_t vocab_start, DType dtype) override;

    void do_adam_step(const AdamArgs& a) override;
    GradStats do_grad_stats(const float* g, std::int64_t n) override;
    double do_sum(const float* x, std::int64_t n) override;

private:
    // fp32 scratch that grows on demand and is reused across calls (GEMM staging of 16-bit
    // operands, attention staging). Not thread-safe: one backend per rank thread.
    float* scratch(int slot, std::size_t floats);

    mutable std::mutex mem_mutex_;
    std::unordered_map<void*, std::size_t> sizes_;
    std::size_t in_use_ = 0;
    std::size_t peak_ = 0;
    std::vector<std::vector<float>> scratch_;
};

}  // namespace gpt::cpu
