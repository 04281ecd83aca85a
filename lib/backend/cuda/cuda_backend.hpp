// The CUDA backend: cuBLASLt GEMMs, hand-written kernels with fp32 accumulation, a caching
// device allocator. Checked op by op against the CPU backend (tests/backend_cuda).
// Included by .cu files: C++17, no CUDA headers here (the GEMM engine is behind a pointer).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "backend/backend.hpp"

namespace gpt::cuda {

class GemmEngine;  // gemm.cu

class CudaBackend final : public Backend {
public:
    explicit CudaBackend(int device);
    ~CudaBackend() override;

    std::string name() const override { return "cuda"; }
    // "attention=flash-sm80|flash-simple|flash-sm90|flash-sm90-fwd gemm_epilogue=fused|unfused".
    std::string kernel_variants() const override;
    bool host_memory() const override { return false; }
    int device() const { return device_; }

    void* alloc(std::size_t bytes) override;
    void free(void* p) override;
    void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
    void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
    void copy(void* dst, const void* src, std::size_t bytes) override;
    void zero(void* p, std::size_t bytes) override;
    void synchronize() override;
    std::size_t bytes_in_use() const override;
    std::size_t peak_bytes() const override;
    Stream stream() const override { return Stream(stream_); }
    // Pinned host memory (cudaHostAlloc) and device-to-host copies queued on stream().
    void* alloc_host(std::size_t bytes) override;
    void free_host(void* p) override;
    bool host_pinned() const override { return true; }
    void copy_to_host_async(void* host_dst, const void* src, std::size_t bytes) override;
    std::shared_ptr<HostCopyEvent> record_host_copies() override;
    // RMSNorm, SwiGLU (decoder_ops.cu), grouped QKV with rope (qkv_expand.cu).
    bool has_decoder_ops() const override { return true; }

    // Device scratch from the caching allocator, released when the guard dies. Kernels are
    // stream-ordered on one stream (stream()), so a block freed after its last launch can be handed
    // out again at once.
    class Scratch {
    public:
        Scratch(CudaBackend& be, std::size_t bytes) : be_(be), p_(be.alloc(bytes)) {}
        ~Scratch() { be_.free(p_); }
        Scratch(const Scratch&) = delete;
        Scratch& operator=(const Scratch&) = delete;
        void* get() const { return p_; }
        template <typename T>
        T* as() const { return static_cast<T*>(p_); }

    private:
        CudaBackend& be_;
        void* p_;
    };

protected:
    // The ops, called by Backend's public ops with checked arguments (backend.hpp).
    void do_gemm(const GemmArgs& g) override;
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
    void do_cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                              std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                              std::uint8_t* q_t, float* amax, float* dbias) override;
    void do_cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                                  Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                                  float* amax, float* dbias) override;
    // The norm kernels with the FP8 codes of y (layernorm.cu, decoder_ops.cu).
    void do_norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta, void* y,
                             float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                             DType dtype, const Fp8Codes& codes, bool zero_centered_gamma) override;
    void do_swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                               const Fp8Codes& codes) override;
    void do_gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                             const Fp8Codes& codes) override;
    void do_squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype,
                                     const Fp8Codes& codes) override;
    void do_fp8_current_scales(const float* amax, float* scale, float* scale_inv, std::int64_t n,
                               Fp8Format format, float if_overflow) override;

    void check_attention_limits(const AttentionArgs& a) const override;
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
    void do_qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped,
                               void* qkv) override;
    void do_qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv,
                                void* dqkv_grouped) override;

private:
    // RMSNorm's forward, with the FP8 codes of y where codes is not nullptr.
    void launch_rms_forward(const void* x, const void* gamma, void* y, float* rstd, std::int64_t rows,
                     std::int64_t cols, float eps, DType dtype, const Fp8Codes* codes, bool zero_centered_gamma,
                            const NormRows& at = {});
    // SwiGLU's, GELU's and squared ReLU's forward, likewise (not named after the public ops:
    // that would hide them).
    void launch_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                               const Fp8Codes* codes);
    void launch_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                             const Fp8Codes* codes);
    void launch_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype, const Fp8Codes* codes);
    // cast_to_fp8, and with dbias (nullable) the column sums added into it; with pre
    // (nullable) of x * GELU'(pre) instead of x, only in the vectorised kernel: false, and
    // nothing launched, where that does not apply (fp8.cu).
    bool launch_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols, Fp8Format format,
                            const float* scale, std::uint8_t* q, std::uint8_t* q_t, float* amax, float* dbias,
                            const void* pre = nullptr, bool tanh_approx = false);
    // Column sums of a rows x cols matrix (fp32 partials per row chunk, then an in-order
    // sum), so bias and layernorm parameter gradients are deterministic.
    void column_sums(const void* m, float* out, std::int64_t rows, std::int64_t cols,
                     DType dtype);
    // out[c] += sum over chunks of partial[chunk, c], in chunk order (deterministic).
    void add_chunk_sums(const float* partial, float* out, std::int64_t chunks, std::int64_t cols);
    // Host sums of per-block partials written by the reduction kernels (double, flag).
    void* reduce_partials_ = nullptr;

    int device_;
    // The compute stream (a cudaStream_t), created here: every kernel, copy and cuBLASLt
    // call of this backend is queued on it, and the NCCL communicators order against it.
    void* stream_ = nullptr;
    std::unique_ptr<GemmEngine> gemm_;

    // Caching allocator: freed blocks wait in cache_ (keyed by rounded size) for the next
    // alloc of that size class, so steady-state iterations never call cudaMalloc/cudaFree.
    mutable std::mutex mem_mutex_;
    struct Block {
        std::size_t rounded;
        std::size_t requested;
    };
    std::unordered_map<void*, Block> live_;
    std::multimap<std::size_t, void*> cache_;
    std::size_t in_use_ = 0;
    std::size_t peak_ = 0;
    void release_cache();
    // alloc_host's pointers (kHostAlign-aligned) and the cudaHostAlloc blocks they lie in.
    std::unordered_map<void*, void*> host_blocks_;
};

}  // namespace gpt::cuda
