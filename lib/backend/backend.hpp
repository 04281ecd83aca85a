// The Backend interface: every numeric op the GPT model and optimizer need.
//
// Conventions (shared by every implementation; the CPU backend is the reference):
//  - Pointers are this backend's memory (host for cpu, device for cuda); alloc() gives it.
//  - Activations are row-major [s, b, h] (sequence-major, as Megatron): "rows" = s*b tokens.
//  - Linear weights are [out, in] as in Megatron (y = x W^T + b), so checkpoints map 1:1.
//  - `dtype` is the storage type of activations/weights (fp32, fp16, bf16); all arithmetic
//    accumulates in fp32. Parameter gradients are always fp32 and ops ACCUMULATE into them
//    (+=), which gives micro-batch accumulation for free (Megatron's main_grad).
//  - Dropout masks come from a counter-based RNG: element i of a call uses
//    philox(seed, offset + i), so backward regenerates the mask instead of storing it and
//    every result is reproducible for any layout or thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.hpp"
#include "core/fp8_format.hpp"
#include "core/stream.hpp"

namespace gpt {

enum class GemmEpilogue {
    None,      // C = alpha*op(A)op(B) + beta*C
    Bias,      // C = alpha*op(A)op(B) + bias[n]            (beta must be 0)
    BiasGelu,  // aux = alpha*op(A)op(B) + bias; C = gelu(aux)   (aux: pre-activation, dtype)
    // C = alpha*op(A)op(B) * gelu'(aux), aux the forward's pre-activation (the MLP's input
    // gradient through its GELU; no bias; needs ldc = n and batch 1)
    GeluGrad,
};

// C[m, n] = alpha * op(A)[m, k] * op(B)[k, n] + beta * C, row-major, fp32 accumulation.
// op(X) = X^T when trans_x. A and B have type `dtype`; C has type `c_dtype` (fp32 C with
// beta = 1 is how weight gradients accumulate). batch > 1 runs strided-batched GEMMs.
struct GemmArgs {
    bool trans_a = false;
    bool trans_b = false;
    std::int64_t m = 0, n = 0, k = 0;
    const void* a = nullptr;
    std::int64_t lda = 0;
    const void* b = nullptr;
    std::int64_t ldb = 0;
    void* c = nullptr;
    std::int64_t ldc = 0;
    float alpha = 1.0f;
    float beta = 0.0f;
    DType dtype = DType::F32;
    DType c_dtype = DType::F32;
    std::int64_t batch = 1;
    std::int64_t stride_a = 0, stride_b = 0, stride_c = 0;
    GemmEpilogue epilogue = GemmEpilogue::None;
    const void* bias = nullptr;  // [n], type dtype (Bias, BiasGelu)
    void* aux = nullptr;         // [m, ldc], type c_dtype: written by BiasGelu, read by GeluGrad
    bool tanh_gelu = false;      // BiasGelu, GeluGrad: the tanh approximation
    // When set: bias_grad[i] (fp32) += sum over k of op(A)[i, k]. The bias gradient of a
    // linear layer, fused into its weight-gradient GEMM dW = dY^T X (op(A) = dY^T, so A is
    // dY, [k, m] contiguous: trans_a, lda = m, batch 1); any epilogue and beta apply to C.
    float* bias_grad = nullptr;
    // FP8 operands (issue 34). When on, A and B hold FP8 codes (one byte each, of a_format /
    // b_format), each the quantisation fp8(x * scale) of a tensor x (Backend::cast_to_fp8);
    // the product of the codes' values, accumulated in fp32, is multiplied by a_scale_inv *
    // b_scale_inv (one fp32 each, in this backend's memory, read when the GEMM runs) before
    // alpha, beta and the epilogue. `dtype` then names the bias's type only; C has c_dtype.
    // Hopper's FP8 GEMMs take one layout: op(A) = A and op(B) = B^T (both operands contiguous
    // along k: trans_a false, trans_b true), m, n, k, lda, ldb multiples of 16, batch 1, not
    // both operands E5M2, no fused bias gradient. Every backend enforces the same rules.
    // fast_accum: the caller accepts the tensor cores' fast accumulation (partial sums not
    // promoted to fp32 along k), as Transformer Engine's recipes do for the forward GEMMs
    // only; the CUDA backend then asks cuBLASLt for it (unless GPT_CUDA_FP8_FAST_ACCUM=off),
    // the CPU backend accumulates in fp32 regardless.
    struct Fp8 {
        bool on = false;
        Fp8Format a_format = Fp8Format::E4M3;
        Fp8Format b_format = Fp8Format::E4M3;
        const float* a_scale_inv = nullptr;
        const float* b_scale_inv = nullptr;
        bool fast_accum = false;
    } fp8;
};

// Causal self-attention over Megatron's fused QKV activation.
//  qkv:  [s, b, ng, np/ng + 2, hn]: per query group its np/ng queries, then its key, then its
//        value (Megatron's grouped query_key_value; ng = np / heads_per_group). Query head h
//        reads the K/V of group h / heads_per_group in place, so grouped-query attention
//        never materialises a copy of K/V per head; heads_per_group = 1 is [s, b, np, 3, hn].
//        dqkv has the same layout: a group's dK/dV is the sum over its query heads (in head
//        order, without atomics: the same bits every run).
//  out:  [s, b, np, hn]     (the context layer, input of the output projection)
//  saved: what backward needs besides qkv/out: per-row softmax log-sum-exp (flash) or the
//         probabilities [b, np, s, s] (plain); size from attention_saved_bytes().
struct AttentionArgs {
    std::int64_t s = 0, b = 0, np = 0, hn = 0;
    std::int64_t heads_per_group = 1;  // np / ng: query heads sharing one K/V head
    DType dtype = DType::F32;
    bool flash = false;          // tiled online softmax: never materialises s x s
    float softmax_scale = 0.0f;  // 0: 1/sqrt(hn)
    float dropout = 0.0f;        // attention dropout probability (on the probabilities)
    std::uint64_t seed = 0;
    std::uint64_t offset = 0;
    // Document masking (Megatron's --reset-attention-mask): [b, s] int32 in device memory,
    // for query position i of sample bi the first key position it attends to: keys
    // [doc_start[bi * s + i], i]. Megatron's mask: a token after an end-of-document token at
    // e attends to no key <= e, so doc_start is the position after the last EOD before i
    // (0 when none); 0 <= doc_start[i] <= i, and it never decreases along a sample (kernels
    // rely on both to skip whole tiles). nullptr: plain causal (every doc_start 0).
    const std::int32_t* doc_start = nullptr;
};

// Megatron's grouped fused QKV, per token [ng, np/ng + 2, hn] (each query group: its np/ng
// queries, then its key, then its value; ng = np without grouped-query attention), turned
// into the attention's [np, 3, hn] with every head's key and value copied from its group,
// and rotary position embeddings applied to queries and keys. Rows are [s, b] order, so
// row r is at position r / b. Rope (Megatron's): dims [0, rotary_dim) rotate in pairs by
// angle pos * base^(-2i / rotary_dim); the pairs are (i, i + rotary_dim/2) ("rotate half"),
// or (2i, 2i + 1) when interleaved; the angles are fp32, as Megatron's.
struct QkvExpandArgs {
    std::int64_t s = 0, b = 0;
    std::int64_t groups = 0;           // query groups on this rank
    std::int64_t heads_per_group = 1;  // np / ng
    std::int64_t hn = 0;
    std::int64_t rotary_dim = 0;       // 0: no rope
    float rotary_base = 10000.0f;
    bool rotary_interleaved = false;
    DType dtype = DType::F32;
    // Rope positions (Megatron's position_ids, reset after each end-of-document token under
    // --reset-position-ids): [b, s] int32 in device memory, row r = (i, bi) rotated by the
    // angles of positions[bi * s + i]; nullptr: row r at position r / b.
    const std::int32_t* positions = nullptr;
    // true: no expansion; the output keeps the grouped layout [ng, np/ng + 2, hn] with rope
    // applied (the input of attention with heads_per_group = np/ng), and the backward only
    // rotates back (the attention backward already summed each group's dK/dV).
    bool keep_groups = false;
};

// The rows of its buffers a norm op reads and writes: op row r is buffer row
// (r / block) * stride + first + r % block of x, y, dy, dx and dresidual, each row `cols`
// wide; mean and rstd stay indexed by r. The default is every row in order. --qk-layernorm
// normalises the query rows (block np/ng, first 0) and the key rows (block 1, first np/ng)
// of the grouped QKV [T, ng, np/ng + 2, hn] (stride np/ng + 2) in place, V untouched.
struct NormRows {
    std::int64_t block = 1, stride = 1, first = 0;
    bool all() const { return block == 1 && stride == 1 && first == 0; }
    std::int64_t at(std::int64_t r) const { return (r / block) * stride + first + r % block; }
};

struct AdamArgs {
    float* main_param = nullptr;  // fp32 master weights [n]
    const float* grad = nullptr;  // fp32 gradients [n]
    float* exp_avg = nullptr;     // [n]
    float* exp_avg_sq = nullptr;  // [n]
    void* model_param = nullptr;  // half copy updated in the same pass (nullptr for fp32)
    DType model_dtype = DType::F32;
    std::int64_t n = 0;
    float lr = 0.0f;
    float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
    float weight_decay = 0.0f;    // decoupled (AdamW), 0 for biases and layernorm
    std::int64_t step = 1;        // 1-based, for bias correction
    float grad_scale = 1.0f;      // multiplies grad first: 1/loss_scale * clip coefficient
};

struct GradStats {
    double sum_squares = 0.0;
    bool finite = true;
    std::int64_t zeros = 0;  // elements equal to zero (Megatron's --log-num-zeros-in-grad)
};

// The ops below are checked once, here: each public op validates its arguments (shapes,
// sizes, probabilities, the pointers an op needs) and throws InternalError on misuse -- the
// model and optimizer compute every argument, so a bad one is a bug of ours, never a user's
// mistake -- then calls the device implementation, the protected do_* of the same name,
// which may assume valid arguments. Ops that are compositions of others (the backward of
// bias-dropout-add, dropout with p = 0, a cast to the same type) are composed here too,
// so every backend computes them alike. Implemented in backend/checked_ops.cpp.
class Backend {
public:
    virtual ~Backend() = default;
    virtual std::string name() const = 0;
    // The kernel variants that run-time switches chose (GPU backends: GPT_CUDA_FLASH,
    // GPT_CUDA_GEMM_EPILOGUE; README.md, "Kernel switches"), as "key=value" words for a benchmark's
    // header; empty where there is nothing to choose (the CPU backend).
    virtual std::string kernel_variants() const { return {}; }
    virtual bool host_memory() const = 0;  // pointers are host-addressable

    // ---- memory -------------------------------------------------------------------
    virtual void* alloc(std::size_t bytes) = 0;
    virtual void free(void* p) = 0;
    virtual void copy_to_device(void* dst, const void* host_src, std::size_t bytes) = 0;
    virtual void copy_to_host(void* host_dst, const void* src, std::size_t bytes) = 0;
    virtual void copy(void* dst, const void* src, std::size_t bytes) = 0;
    virtual void zero(void* p, std::size_t bytes) = 0;
    virtual void synchronize() = 0;
    // Bytes currently allocated and the high-water mark (for memory accounting).
    virtual std::size_t bytes_in_use() const = 0;
    virtual std::size_t peak_bytes() const = 0;
    // The stream every op of this backend is queued on, in call order (the host for host
    // memory). Communicators of this backend's buffers are given it (dist/data_groups.hpp).
    virtual Stream stream() const = 0;

    // ---- host memory for device-to-host copies (checkpoint saves) -------------------
    // Host memory the device copies into at full speed: page-locked (pinned) on the CUDA
    // backend, ordinary memory elsewhere. Aligned to kHostAlign bytes on every backend, so
    // that a checkpoint's O_DIRECT writes (ckpt/direct_writes.hpp) go from it in place.
    // Unlike alloc(), not counted in bytes_in_use(): that is the device's memory. The
    // defaults (backend/host_memory.cpp) are the host backend's: aligned_alloc / free, a
    // synchronous copy_to_host and an event that is complete at once.
    static constexpr std::size_t kHostAlign = 4096;
    virtual void* alloc_host(std::size_t bytes);
    virtual void free_host(void* p);
    virtual bool host_pinned() const { return false; }  // alloc_host memory is page-locked
    // Queues a copy of `bytes` from this backend's `src` into alloc_host memory on stream():
    // in stream order, it reads the values every op issued before it produced, and every op
    // issued after it (the next optimizer step, which overwrites `src`) runs after it has
    // read them. host_dst holds the bytes once an event recorded later has completed.
    virtual void copy_to_host_async(void* host_dst, const void* src, std::size_t bytes);
    // An event after every copy_to_host_async issued so far: its wait() may be called from
    // any thread (a checkpoint's background writer).
    class HostCopyEvent {
    public:
        virtual ~HostCopyEvent() = default;
        // Returns once the copies have landed; DeviceError on a device error. Bounded by the
        // hang watchdog (core/wait.hpp) on a device.
        virtual void wait() = 0;
    };
    virtual std::shared_ptr<HostCopyEvent> record_host_copies();

    // ---- dense math ---------------------------------------------------------------
    void gemm(const GemmArgs& g);

    // y = LN(x) * gamma + beta over the last dim; mean/rstd [rows] fp32 saved for backward.
    // zero_centered_gamma (Megatron's --apply-layernorm-1p, Transformer Engine's
    // zero_centered_gamma): the norms here and below scale by 1 + gamma, added in fp32 to
    // gamma as stored; the gradients' formulas are the same (d(1 + gamma)/dgamma = 1).
    void layernorm_forward(const void* x, const void* gamma, const void* beta, void* y,
                           float* mean, float* rstd, std::int64_t rows, std::int64_t cols,
                           float eps, DType dtype, bool zero_centered_gamma = false,
                           const NormRows& at = {});
    // dx = dLN + dresidual (overwritten; dresidual nullable, dx may alias dy or dresidual);
    // dgamma, dbeta fp32 += (accumulated). dresidual is the gradient the residual path
    // brings to the same x: adding it here saves the separate add pass over [rows, cols].
    void layernorm_backward(const void* dy, const void* x, const void* gamma, const float* mean,
                            const float* rstd, const void* dresidual, void* dx, float* dgamma,
                            float* dbeta, std::int64_t rows, std::int64_t cols, DType dtype,
                            bool zero_centered_gamma = false, const NormRows& at = {});

    void gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype);
    // dx = dy * gelu'(x)  (dx may alias dy)
    void gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                       bool tanh_approx, DType dtype);

    // x[rows, cols] += bias[cols]
    void bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols, DType dtype);
    // dbias[cols] (fp32) += sum over rows of dy[rows, cols]
    void bias_grad(const void* dy, float* dbias, std::int64_t rows, std::int64_t cols,
                   DType dtype);

    // out = residual + dropout(x + bias)  (bias may be nullptr; p = 0 disables dropout).
    // out may alias residual. Elements use philox(seed, offset + i).
    void bias_dropout_add(const void* x, const void* bias, const void* residual, void* out,
                          std::int64_t rows, std::int64_t cols, float p, std::uint64_t seed,
                          std::uint64_t offset, DType dtype);
    // dx = dropout_mask(dout) / (1-p) with the same seed/offset; dbias (fp32, nullable) +=.
    // A composition: dropout_forward, then bias_grad of dx as stored.
    void bias_dropout_add_backward(const void* dout, void* dx, float* dbias, std::int64_t rows,
                                   std::int64_t cols, float p, std::uint64_t seed,
                                   std::uint64_t offset, DType dtype);
    // y = dropout(x) (y may alias x) / backward.
    void dropout_forward(const void* x, void* y, std::int64_t n, float p, std::uint64_t seed,
                         std::uint64_t offset, DType dtype);

    // y = a + b elementwise (y may alias a or b)
    void add(const void* a, const void* b, void* y, std::int64_t n, DType dtype);
    // y += x  (x of type dtype, y fp32) -- accumulate a half activation grad into fp32
    void accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype);
    void scale(void* x, float alpha, std::int64_t n, DType dtype);
    void cast(const void* src, DType src_type, void* dst, DType dst_type, std::int64_t n);

    // ---- FP8 (issue 34): the casts in front of an FP8 GEMM --------------------------
    // q[r, c] = fp8(x[r, c] * scale[0]) of x [rows, cols] (type dtype), rounded to nearest
    // even and saturated to the format's largest finite value (NaN gives 0x7F), as Hopper's
    // cvt.rn.satfinite. q_t (nullable) receives the transpose [cols, rows] (the k-contiguous
    // copy an FP8 GEMM needs of a data- or weight-gradient operand); q is nullable too, not
    // both. amax (nullable): amax[0] = max(amax[0], max |x|), NaN once any x is NaN (a
    // scaling recipe's per-tensor statistic). scale and amax are this backend's memory.
    void cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                     Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                     float* amax);
    // cast_to_fp8 of an output gradient dy [rows, cols] and its linear's bias gradient in the
    // same pass (issue 34): exactly cast_to_fp8(dy, ...), and dbias[c] (fp32) += sum over rows
    // of dy[r, c] as bias_grad (the values as stored; the order of the fp32 sum is the
    // backend's). Backends without a fused kernel run the two (the CPU backend).
    void cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                               Fp8Format format, const float* scale, std::uint8_t* q, std::uint8_t* q_t,
                               float* amax, float* dbias);
    // GELU's backward, then the cast (issue 34: an FP8 layer's GELU pass, backward): the
    // gradient g = dy * GELU'(pre) as gelu_backward computes it, rounded to dtype, then
    // exactly cast_to_fp8_bias_grad(g, ...) (dbias nullable: cast_to_fp8). dy [rows, cols] is
    // clobbered (backends without a fused kernel store g into it and cast that).
    void cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                           std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                           std::uint8_t* q_t, float* amax, float* dbias);
    // amax[0] = max(amax[0], max |x|) over n values of x (NaN-sticky): current scaling's
    // first pass, before the scale exists.
    void amax(const void* x, DType dtype, std::int64_t n, float* amax);
    // For i < n: scale[i] = current_scale(amax[i], format, if_overflow) (core/fp8_scaling.hpp)
    // and scale_inv[i] = 1 / scale[i], on the device, so current scaling needs no host sync.
    void fp8_current_scales(const float* amax, float* scale, float* scale_inv, std::int64_t n,
                            Fp8Format format, float if_overflow);

    // A norm's output and its FP8 codes in one pass (issue 34: the cast fused into the
    // kernel that produces an FP8 linear's input, saving the cast's read of y). y, mean and
    // rstd as layernorm_forward (rmsnorm false) or rmsnorm_forward (true: beta and mean
    // unused); then codes.q [rows, cols] and codes.amax (nullable) exactly as
    // cast_to_fp8(y, dtype, rows, cols, codes.format, codes.scale, codes.q, nullptr,
    // codes.amax) after it: the codes of y as stored (rounded to dtype). Backends without a
    // fused kernel run the two (the CPU backend, the reference).
    struct Fp8Codes {
        Fp8Format format = Fp8Format::E4M3;
        const float* scale = nullptr;  // this backend's memory, as cast_to_fp8's
        std::uint8_t* q = nullptr;
        float* amax = nullptr;
    };
    void norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta, void* y,
                          float* mean, float* rstd, std::int64_t rows, std::int64_t cols, float eps,
                          DType dtype, const Fp8Codes& codes, bool zero_centered_gamma = false);
    // The same for the MLP's activation, whose output is fc2's input: swiglu_forward (codes.q
    // [rows, cols]) or gelu_forward (codes.q [n]), with the codes of y as stored.
    void swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                            const Fp8Codes& codes);
    void gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                          const Fp8Codes& codes);

    // ---- modern decoder ops (RMSNorm, SwiGLU, rope / grouped QKV) -------------------
    // Backends that do not implement them say so here; the model refuses the options that
    // need them at start-up (one clear line), so the do_* defaults are never reached there.
    virtual bool has_decoder_ops() const { return false; }
    // y = x / sqrt(mean(x^2) + eps) * gamma over the last dim; rstd [rows] fp32 saved.
    void rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                         std::int64_t rows, std::int64_t cols, float eps, DType dtype,
                         bool zero_centered_gamma = false, const NormRows& at = {});
    // As layernorm_backward: dx = dRMSNorm + dresidual (nullable, dx may alias dy or
    // dresidual), dgamma fp32 +=.
    void rmsnorm_backward(const void* dy, const void* x, const void* gamma, const float* rstd,
                          const void* dresidual, void* dx, float* dgamma, std::int64_t rows,
                          std::int64_t cols, DType dtype, bool zero_centered_gamma = false,
                          const NormRows& at = {});
    // x [rows, 2 cols] = [gate, up] per row (Megatron's linear_fc1 output);
    // y [rows, cols] = silu(gate) * up.
    void swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                        DType dtype);
    // dx [rows, 2 cols] (overwritten; no aliasing) from dy [rows, cols] and x.
    void swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                         std::int64_t cols, DType dtype);
    // Megatron's --squared-relu: y = relu(x)^2 over n elements, in fp32 and rounded once;
    // dx = dy * 2 relu(x) (dx may alias dy).
    void squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype);
    void squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n, DType dtype);
    // squared_relu_forward and the codes of y as stored, as gelu_forward_fp8.
    void squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype, const Fp8Codes& codes);
    // qkv [s, b, np, 3, hn] from qkv_grouped (see QkvExpandArgs).
    void qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped, void* qkv);
    // dqkv_grouped (overwritten) from dqkv: the inverse rotation, K/V grads summed per group.
    void qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv, void* dqkv_grouped);

    // ---- attention ----------------------------------------------------------------
    std::size_t attention_saved_bytes(const AttentionArgs& a) const;
    void attention_forward(const AttentionArgs& a, const void* qkv, void* out, void* saved);
    // dqkv is overwritten.
    void attention_backward(const AttentionArgs& a, const void* qkv, const void* out,
                            const void* saved, const void* dout, void* dqkv);

    // ---- embeddings (vocab-parallel: this rank holds rows [vocab_start, vocab_end)) ----
    // tokens [b, s] int32; out [s, b, h] = table[token - vocab_start], or 0 outside the shard.
    void embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                           std::int64_t b, std::int64_t s, std::int64_t h,
                           std::int64_t vocab_start, std::int64_t vocab_end, DType dtype);
    // dtable (fp32) += scatter of dout [s, b, h] by token (rows outside the shard skipped).
    void embedding_backward(const std::int32_t* tokens, const void* dout, float* dtable,
                            std::int64_t b, std::int64_t s, std::int64_t h,
                            std::int64_t vocab_start, std::int64_t vocab_end, DType dtype);
    // out[s, b, h] += table[first_position + s_index]
    void position_embedding_forward(const void* table, void* out, std::int64_t b,
                                    std::int64_t s, std::int64_t h, std::int64_t first_position,
                                    DType dtype);
    // dtable[pos] (fp32) += sum over b of dout[s, b, :]
    void position_embedding_backward(const void* dout, float* dtable, std::int64_t b,
                                     std::int64_t s, std::int64_t h,
                                     std::int64_t first_position, DType dtype);

    // ---- cross-entropy from per-shard pieces (vocab-parallel = same calls + reductions) ---
    // logits [rows, v] over vocab ids [vocab_start, vocab_start+v); targets [rows] int32.
    // 1) row_max[rows] = max over the shard
    void cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                           std::int64_t v, DType dtype);
    // 2) given the global max: sum_exp[rows] = sum exp(l - max), target_logit[rows] = the
    //    target's logit if it is in this shard, else 0.
    void cross_entropy_sums(const void* logits, const std::int32_t* targets,
                            const float* row_max, float* sum_exp, float* target_logit,
                            std::int64_t rows, std::int64_t v, std::int64_t vocab_start,
                            DType dtype);
    // 1+2 in one pass (online softmax): local_max[rows] = max over the shard, sum_exp[rows] =
    //    sum exp(l - local_max), target_logit as in 2). Vocab-parallel callers all-reduce the
    //    max, rescale sum_exp by exp(local_max - max), then sum-reduce sum_exp and
    //    target_logit; with one shard local_max is the max and no rescaling is needed.
    void cross_entropy_stats(const void* logits, const std::int32_t* targets, float* local_max,
                             float* sum_exp, float* target_logit, std::int64_t rows,
                             std::int64_t v, std::int64_t vocab_start, DType dtype);
    // 3) loss[rows] = log(sum_exp) + max - target_logit (after the reductions), on host-side
    //    arrays of this backend's memory.
    void cross_entropy_loss(const float* row_max, const float* sum_exp,
                            const float* target_logit, float* loss, std::int64_t rows);
    // 4) dlogits = (softmax - onehot(target)) * dloss[row]; dlogits may alias logits.
    void cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                const float* row_max, const float* sum_exp, const float* dloss,
                                void* dlogits, std::int64_t rows, std::int64_t v,
                                std::int64_t vocab_start, DType dtype);

    // ---- optimizer ----------------------------------------------------------------
    void adam_step(const AdamArgs& a);
    // Sum of squares of an fp32 gradient range, whether every element is finite, and how
    // many are zero.
    GradStats grad_stats(const float* g, std::int64_t n);
    // Sum of x[i] over an fp32 array (losses)
    double sum(const float* x, std::int64_t n);

protected:
    // The device implementations of the public ops above, called with checked arguments.
    // do_dropout_forward is called with p > 0 only, do_cast with two different types.
    virtual void do_gemm(const GemmArgs& g) = 0;
    virtual void do_layernorm_forward(const void* x, const void* gamma, const void* beta,
                                      void* y, float* mean, float* rstd, std::int64_t rows,
                                      std::int64_t cols, float eps, DType dtype,
                                      bool zero_centered_gamma, const NormRows& at) = 0;
    virtual void do_layernorm_backward(const void* dy, const void* x, const void* gamma,
                                       const float* mean, const float* rstd,
                                       const void* dresidual, void* dx, float* dgamma,
                                       float* dbeta, std::int64_t rows, std::int64_t cols,
                                       DType dtype, bool zero_centered_gamma, const NormRows& at) = 0;
    virtual void do_gelu_forward(const void* x, void* y, std::int64_t n, bool tanh_approx,
                                 DType dtype) = 0;
    virtual void do_gelu_backward(const void* dy, const void* x, void* dx, std::int64_t n,
                                  bool tanh_approx, DType dtype) = 0;
    virtual void do_bias_add(void* x, const void* bias, std::int64_t rows, std::int64_t cols,
                             DType dtype) = 0;
    virtual void do_bias_grad(const void* dy, float* dbias, std::int64_t rows,
                              std::int64_t cols, DType dtype) = 0;
    virtual void do_bias_dropout_add(const void* x, const void* bias, const void* residual,
                                     void* out, std::int64_t rows, std::int64_t cols, float p,
                                     std::uint64_t seed, std::uint64_t offset,
                                     DType dtype) = 0;
    virtual void do_dropout_forward(const void* x, void* y, std::int64_t n, float p,
                                    std::uint64_t seed, std::uint64_t offset, DType dtype) = 0;
    virtual void do_add(const void* a, const void* b, void* y, std::int64_t n, DType dtype) = 0;
    virtual void do_accumulate_f32(const void* x, float* y, std::int64_t n, DType dtype) = 0;
    virtual void do_scale(void* x, float alpha, std::int64_t n, DType dtype) = 0;
    virtual void do_cast(const void* src, DType src_type, void* dst, DType dst_type,
                         std::int64_t n) = 0;
    virtual void do_cast_to_fp8(const void* x, DType dtype, std::int64_t rows, std::int64_t cols,
                                Fp8Format format, const float* scale, std::uint8_t* q,
                                std::uint8_t* q_t, float* amax) = 0;
    virtual void do_amax(const void* x, DType dtype, std::int64_t n, float* amax) = 0;
    // Default: do_gelu_backward into dy, then its cast (checked_ops.cpp).
    virtual void do_cast_to_fp8_dgelu(void* dy, const void* pre, bool tanh_approx, DType dtype, std::int64_t rows,
                                      std::int64_t cols, Fp8Format format, const float* scale, std::uint8_t* q,
                                      std::uint8_t* q_t, float* amax, float* dbias);
    // Default: do_cast_to_fp8, then do_bias_grad (checked_ops.cpp).
    virtual void do_cast_to_fp8_bias_grad(const void* dy, DType dtype, std::int64_t rows, std::int64_t cols,
                                          Fp8Format format, const float* scale, std::uint8_t* q,
                                          std::uint8_t* q_t, float* amax, float* dbias);
    // Default: the norm, then do_cast_to_fp8 of its output (checked_ops.cpp).
    virtual void do_norm_forward_fp8(bool rmsnorm, const void* x, const void* gamma, const void* beta,
                                     void* y, float* mean, float* rstd, std::int64_t rows,
                                     std::int64_t cols, float eps, DType dtype, const Fp8Codes& codes,
                                     bool zero_centered_gamma);
    virtual void do_swiglu_forward_fp8(const void* x, void* y, std::int64_t rows, std::int64_t cols, DType dtype,
                                       const Fp8Codes& codes);
    virtual void do_gelu_forward_fp8(const void* x, void* y, std::int64_t n, bool tanh_approx, DType dtype,
                                     const Fp8Codes& codes);
    virtual void do_fp8_current_scales(const float* amax, float* scale, float* scale_inv,
                                       std::int64_t n, Fp8Format format, float if_overflow) = 0;
    // Decoder ops: the defaults (decoder_ops_default.cpp) name the backend that lacks them.
    virtual void do_rmsnorm_forward(const void* x, const void* gamma, void* y, float* rstd,
                                    std::int64_t rows, std::int64_t cols, float eps,
                                    DType dtype, bool zero_centered_gamma, const NormRows& at);
    virtual void do_rmsnorm_backward(const void* dy, const void* x, const void* gamma,
                                     const float* rstd, const void* dresidual, void* dx,
                                     float* dgamma, std::int64_t rows, std::int64_t cols,
                                     DType dtype, bool zero_centered_gamma, const NormRows& at);
    virtual void do_swiglu_forward(const void* x, void* y, std::int64_t rows, std::int64_t cols,
                                   DType dtype);
    virtual void do_swiglu_backward(const void* dy, const void* x, void* dx, std::int64_t rows,
                                    std::int64_t cols, DType dtype);
    virtual void do_squared_relu_forward(const void* x, void* y, std::int64_t n, DType dtype);
    virtual void do_squared_relu_backward(const void* dy, const void* x, void* dx, std::int64_t n, DType dtype);
    // Default: do_squared_relu_forward, then do_cast_to_fp8 of its output (checked_ops.cpp).
    virtual void do_squared_relu_forward_fp8(const void* x, void* y, std::int64_t n, DType dtype,
                                             const Fp8Codes& codes);
    virtual void do_qkv_expand_forward(const QkvExpandArgs& a, const void* qkv_grouped,
                                       void* qkv);
    virtual void do_qkv_expand_backward(const QkvExpandArgs& a, const void* dqkv,
                                        void* dqkv_grouped);
    // Limits of a device's attention kernels beyond the checks every backend shares (a
    // device error naming what to change); called before saved_bytes, forward, backward.
    virtual void check_attention_limits(const AttentionArgs&) const {}
    virtual void do_attention_forward(const AttentionArgs& a, const void* qkv, void* out,
                                      void* saved) = 0;
    virtual void do_attention_backward(const AttentionArgs& a, const void* qkv,
                                       const void* out, const void* saved, const void* dout,
                                       void* dqkv) = 0;
    virtual void do_embedding_forward(const std::int32_t* tokens, const void* table, void* out,
                                      std::int64_t b, std::int64_t s, std::int64_t h,
                                      std::int64_t vocab_start, std::int64_t vocab_end,
                                      DType dtype) = 0;
    virtual void do_embedding_backward(const std::int32_t* tokens, const void* dout,
                                       float* dtable, std::int64_t b, std::int64_t s,
                                       std::int64_t h, std::int64_t vocab_start,
                                       std::int64_t vocab_end, DType dtype) = 0;
    virtual void do_position_embedding_forward(const void* table, void* out, std::int64_t b,
                                               std::int64_t s, std::int64_t h,
                                               std::int64_t first_position, DType dtype) = 0;
    virtual void do_position_embedding_backward(const void* dout, float* dtable,
                                                std::int64_t b, std::int64_t s, std::int64_t h,
                                                std::int64_t first_position, DType dtype) = 0;
    virtual void do_cross_entropy_max(const void* logits, float* row_max, std::int64_t rows,
                                      std::int64_t v, DType dtype) = 0;
    virtual void do_cross_entropy_sums(const void* logits, const std::int32_t* targets,
                                       const float* row_max, float* sum_exp,
                                       float* target_logit, std::int64_t rows, std::int64_t v,
                                       std::int64_t vocab_start, DType dtype) = 0;
    virtual void do_cross_entropy_stats(const void* logits, const std::int32_t* targets,
                                        float* local_max, float* sum_exp, float* target_logit,
                                        std::int64_t rows, std::int64_t v,
                                        std::int64_t vocab_start, DType dtype) = 0;
    virtual void do_cross_entropy_loss(const float* row_max, const float* sum_exp,
                                       const float* target_logit, float* loss,
                                       std::int64_t rows) = 0;
    virtual void do_cross_entropy_backward(const void* logits, const std::int32_t* targets,
                                           const float* row_max, const float* sum_exp,
                                           const float* dloss, void* dlogits, std::int64_t rows,
                                           std::int64_t v, std::int64_t vocab_start,
                                           DType dtype) = 0;
    virtual void do_adam_step(const AdamArgs& a) = 0;
    virtual GradStats do_grad_stats(const float* g, std::int64_t n) = 0;
    virtual double do_sum(const float* x, std::int64_t n) = 0;
};

// Factory: "cpu" always; "cuda" when built with CUDA and a GPU is visible.
std::unique_ptr<Backend> make_backend(const std::string& device, int local_rank);

// Why make_backend("cuda", ...) would refuse (its UsageError's text), "" when it would not:
// lets a run decide its device (--device auto) before it builds the backend.
std::string cuda_unusable_reason();

}  // namespace gpt
