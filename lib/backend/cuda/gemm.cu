// GEMM through cuBLASLt. Row-major C[m,n] = op(A) op(B) is, read column-major, the product
// C^T[n,m] = op(B)^T op(A)^T: cuBLASLt's "A" is our B and its "B" is our A, with the same
// transpose flags and leading dimensions, and no data moves. Compute is fp32 for every
// dtype (CUBLAS_COMPUTE_32F: fp32 inputs stay true fp32, no TF32, so results match the CPU
// reference to fp32 rounding).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm_algo.hpp"
#include "backend/cuda/gemm_engine.hpp"
#include "backend/cuda/gemm_epilogue.hpp"
#include "backend/cuda/fp8_fast_accum.hpp"
#include "core/device_wait.hpp"
#include "core/environment.hpp"

namespace gpt::cuda {

namespace {

constexpr std::size_t kWorkspaceBytes = std::size_t{32} << 20;  // what Hopper kernels like

#define GPT_CUBLAS_CHECK(expr, op)                                                           \
    do {                                                                                     \
        cublasStatus_t gpt_st_ = (expr);                                                     \
        if (gpt_st_ != CUBLAS_STATUS_SUCCESS)                                                \
            GPT_THROW(DeviceError, __FILE__, ":", __LINE__, ": ", op, ": ", #expr,           \
                      " failed: cuBLAS status ", static_cast<int>(gpt_st_), " (",            \
                      cublasLtGetStatusName(gpt_st_), ")");                                  \
    } while (0)

cudaDataType_t fp8_type(Fp8Format f) { return f == Fp8Format::E4M3 ? CUDA_R_8F_E4M3 : CUDA_R_8F_E5M2; }

cudaDataType_t cuda_type(DType t) {
    switch (t) {
        case DType::F32: return CUDA_R_32F;
        case DType::F16: return CUDA_R_16F;
        case DType::BF16: return CUDA_R_16BF;
    }
    GPT_THROW(InternalError, "unknown dtype");
}

// Largest power of two (<= 256) dividing the pointer, the leading dimension and the batch
// stride in bytes: what every column and batch entry of the operand is aligned to. The
// heuristic must know it, since attention passes pointers into the middle of qkv.
std::uint32_t alignment(const void* p, std::int64_t ld, std::int64_t stride, std::size_t esz) {
    std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | (static_cast<std::uint64_t>(ld) * esz);
    if (stride) bits |= static_cast<std::uint64_t>(stride) * esz;
    std::uint32_t a = 256;
    while (a > 1 && (bits & (a - 1))) a >>= 1;
    return a;
}

// RAII for the cuBLASLt descriptors of one call.
struct Descs {
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    ~Descs() {
        if (pref) cublasLtMatmulPreferenceDestroy(pref);
        if (c) cublasLtMatrixLayoutDestroy(c);
        if (b) cublasLtMatrixLayoutDestroy(b);
        if (a) cublasLtMatrixLayoutDestroy(a);
        if (op) cublasLtMatmulDescDestroy(op);
    }
};

void set_batch(cublasLtMatrixLayout_t l, std::int64_t batch, std::int64_t stride) {
    if (batch <= 1) return;
    const std::int32_t count = static_cast<std::int32_t>(batch);
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT,
                                                      &count, sizeof(count)), "gemm");
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                      &stride, sizeof(stride)), "gemm");
}

// The device limits of cuBLASLt (arguments are checked by Backend::gemm).
void validate(const GemmArgs& g) {
    GPT_REQUIRE(g.batch <= INT32_MAX, UsageError, "gemm: batch ", g.batch, " too large");
}

template <typename T>
__global__ void gelu_2d_kernel(const T* __restrict__ pre, T* __restrict__ out, std::int64_t m,
                               std::int64_t n, std::int64_t ld, bool tanh_approx) {
    const std::int64_t total = m * n;
    for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
        const std::int64_t at = (i / n) * ld + i % n;
        stf(out + at, gelu_f(ldf(pre + at), tanh_approx));
    }
}

// Fallback for operands the heuristic finds no algorithm for (CUBLAS_STATUS_NOT_SUPPORTED).
// cuBLAS documents algorithms down to element alignment, so our operands should never need
// it; it is there so that an unusual operand (plain attention's probabilities for odd s
// are 2-byte aligned) degrades to slow instead of failing: 16x16 shared-memory tiles, fp32
// accumulation, row-major in our own terms, exact to fp32 rounding. The emulator's
// GPT_EMU_CUBLASLT_ALIGN=16 test (tests/backend_cuda) runs it.
constexpr int kFb = 16;

template <typename T, typename TC>
__global__ void fallback_gemm_kernel(GemmArgs g, const TC* bias) {
    __shared__ float as[kFb][kFb + 1];
    __shared__ float bs[kFb][kFb + 1];
    const std::int64_t t = blockIdx.z;
    const T* A = static_cast<const T*>(g.a) + t * g.stride_a;
    const T* B = static_cast<const T*>(g.b) + t * g.stride_b;
    TC* C = static_cast<TC*>(g.c) + t * g.stride_c;
    const std::int64_t row = static_cast<std::int64_t>(blockIdx.y) * kFb + threadIdx.y;
    const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kFb + threadIdx.x;
    float acc = 0.0f;
    for (std::int64_t k0 = 0; k0 < g.k; k0 += kFb) {
        // as[y][x] = op(A)[row, k0 + x]; bs[y][x] = op(B)[k0 + y, col]
        const std::int64_t ka = k0 + threadIdx.x, kb = k0 + threadIdx.y;
        as[threadIdx.y][threadIdx.x] =
            (row < g.m && ka < g.k) ? ldf(g.trans_a ? A + ka * g.lda + row : A + row * g.lda + ka) : 0.0f;
        bs[threadIdx.y][threadIdx.x] =
            (kb < g.k && col < g.n) ? ldf(g.trans_b ? B + col * g.ldb + kb : B + kb * g.ldb + col) : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < kFb; ++kk) acc += as[threadIdx.y][kk] * bs[kk][threadIdx.x];
        __syncthreads();
    }
    if (row >= g.m || col >= g.n) return;
    TC* c = C + row * g.ldc + col;
    float v = g.alpha * acc;
    if (g.beta != 0.0f) v += g.beta * ldf(c);
    if (bias) v += ldf(bias + col);
    stf(c, v);
}

template <typename T, typename TC>
void launch_fallback(const GemmArgs& g, void* d, const void* bias, cudaStream_t stream) {
    GemmArgs x = g;
    x.c = d;
    const dim3 grid(static_cast<unsigned>((g.n + kFb - 1) / kFb), static_cast<unsigned>((g.m + kFb - 1) / kFb),
                    static_cast<unsigned>(g.batch));
    fallback_gemm_kernel<T, TC><<<grid, dim3(kFb, kFb), 0, stream>>>(x, static_cast<const TC*>(bias));
    GPT_CUDA_LAUNCH_CHECK("gemm (fallback kernel)");
}

void fallback_gemm(const GemmArgs& g, void* d, const void* bias, cudaStream_t stream) {
    // FP8 GEMMs exist only in cuBLASLt, on GPUs with FP8 tensor cores (sm_89 and later).
    GPT_REQUIRE(!g.fp8.on, DeviceError, "gemm: cuBLASLt has no FP8 algorithm for m=", g.m, " n=", g.n,
                " k=", g.k, " on this GPU (FP8 GEMMs need compute capability 8.9 or later, "
                "e.g. an H100/H200); run without --fp8-format");
    GPT_REQUIRE(g.m <= 65535L * kFb && g.batch <= 65535, DeviceError,
                "gemm: no cuBLASLt algorithm and the shape exceeds the fallback kernel's grid (m=",
                g.m, " batch=", g.batch, ")");
    dispatch(g.dtype, [&](auto tag) {
        using T = decltype(tag);
        if (g.c_dtype == DType::F32)
            launch_fallback<T, float>(g, d, bias, stream);
        else if (g.c_dtype == g.dtype)
            launch_fallback<T, T>(g, d, bias, stream);
        else
            GPT_THROW(UsageError, "gemm: output type ", dtype_name(g.c_dtype), " with operands ",
                      dtype_name(g.dtype), " (expected the same type or fp32)");
    });
}

GemmEpilogueMode& epilogue_choice() {
    static GemmEpilogueMode m = env::cuda_gemm_epilogue_unfused() ? GemmEpilogueMode::Unfused
                                                                   : GemmEpilogueMode::Fused;
    return m;
}

}  // namespace

GemmEpilogueMode gemm_epilogue_mode() { return epilogue_choice(); }
void set_gemm_epilogue_mode(GemmEpilogueMode m) { epilogue_choice() = m; }
const char* gemm_epilogue_mode_name(GemmEpilogueMode m) {
    return m == GemmEpilogueMode::Fused ? "fused" : "unfused";
}
bool fp8_fast_accum_forward() { return kernel_switch<env::cuda_fp8_fast_accum_forward>(); }
void set_fp8_fast_accum_forward(bool on) { kernel_switch<env::cuda_fp8_fast_accum_forward>() = on; }
bool gemm_autotune() { return kernel_switch<env::cuda_gemm_autotune>(); }
void set_gemm_autotune(bool on) { kernel_switch<env::cuda_gemm_autotune>() = on; }

GemmEngine::GemmEngine(cudaStream_t stream) : stream_(stream) {
    GPT_CUBLAS_CHECK(cublasLtCreate(&handle_), "GemmEngine");
    GPT_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspaceBytes), "GemmEngine workspace");
}

GemmEngine::~GemmEngine() {
    for (auto& [key, t] : tuning_)
        for (cudaEvent_t e : t.events) cudaEventDestroy(e);
    cudaFree(workspace_);
    if (handle_) cublasLtDestroy(handle_);
}

bool GemmEngine::matmul(const GemmArgs& g, void* d, const Fused& f) {
    const void* bias = f.bias;
    // Our A's and B's element types (FP8 codes under g.fp8), C's.
    const cudaDataType_t ta = g.fp8.on ? fp8_type(g.fp8.a_format) : cuda_type(g.dtype);
    const cudaDataType_t tb = g.fp8.on ? fp8_type(g.fp8.b_format) : cuda_type(g.dtype);
    const cudaDataType_t ct = cuda_type(g.c_dtype);
    const std::size_t esz = g.fp8.on ? 1 : dtype_size(g.dtype), csz = dtype_size(g.c_dtype);
    const bool fast_accum = g.fp8.on && g.fp8.fast_accum && fp8_fast_accum_forward();
    const bool autotune = gemm_autotune();
    Descs ds;
    GPT_CUBLAS_CHECK(cublasLtMatmulDescCreate(&ds.op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "gemm");
    if (g.fp8.on) {
        // cuBLASLt multiplies the product by its A's and B's scales: our B's and A's
        // dequantisation factors.
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &g.fp8.b_scale_inv, sizeof(g.fp8.b_scale_inv)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &g.fp8.a_scale_inv, sizeof(g.fp8.a_scale_inv)), "gemm");
        // Without FAST_ACCUM cuBLASLt promotes the tensor cores' partial sums to fp32 every
        // few k steps (the split accumulator), which costs FP8 throughput; the forward GEMMs
        // may skip it (GemmArgs::Fp8::fast_accum), the gradients' keep it.
        if (fast_accum) {
            const std::int8_t on = 1;
            GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &on, sizeof(on)), "gemm");
        }
    }
    // cuBLASLt's A is our B (and vice versa), see the file comment.
    const cublasOperation_t op_a = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "gemm");
    GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "gemm");
    // The epilogue's vector: the bias (converted by the caller to C's type), or the bias
    // gradient, which BGRADB writes as the column sums of cuBLASLt's B, i.e. our op(A) rows.
    cublasLtEpilogue_t epi = CUBLASLT_EPILOGUE_DEFAULT;
    const void* vec = nullptr;
    cudaDataType_t vec_type = ct;
    if (f.bias_grad) {
        epi = CUBLASLT_EPILOGUE_BGRADB;
        vec = f.bias_grad;
        vec_type = CUDA_R_32F;
    } else if (bias) {
        epi = f.gelu_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_BIAS;
        vec = bias;
    } else if (f.dgelu_aux) {
        epi = CUBLASLT_EPILOGUE_DGELU;
    }
    const void* aux = f.gelu_aux ? f.gelu_aux : f.dgelu_aux;
    const bool fused = f.bias_grad || aux;
    if (epi != CUBLASLT_EPILOGUE_DEFAULT)
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)), "gemm");
    if (vec) {
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vec, sizeof(vec)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &vec_type, sizeof(vec_type)), "gemm");
    }
    if (aux) {
        // The pre-activation has D's layout: column-major n x m with D's leading dimension.
        const std::int64_t aux_ld = g.ldc;
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof(aux)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(ds.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld, sizeof(aux_ld)), "gemm");
    }
    // Stored shapes, column-major: our B is [k,n] row-major = (n x k) col-major, etc.
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.a, tb, g.trans_b ? g.k : g.n, g.trans_b ? g.n : g.k, g.ldb), "gemm");
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.b, ta, g.trans_a ? g.m : g.k, g.trans_a ? g.k : g.m, g.lda), "gemm");
    GPT_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&ds.c, ct, g.n, g.m, g.ldc), "gemm");
    set_batch(ds.a, g.batch, g.stride_b);
    set_batch(ds.b, g.batch, g.stride_a);
    set_batch(ds.c, g.batch, g.stride_c);

    const std::uint32_t al_a = alignment(g.b, g.ldb, g.batch > 1 ? g.stride_b : 0, esz);
    const std::uint32_t al_b = alignment(g.a, g.lda, g.batch > 1 ? g.stride_a : 0, esz);
    const std::uint32_t al_c = alignment(d, g.ldc, g.batch > 1 ? g.stride_c : 0, csz);
    const std::string key = detail::concat(
        g.trans_a, g.trans_b, ',', g.m, ',', g.n, ',', g.k, ',', g.lda, ',', g.ldb, ',', g.ldc,
        ',', static_cast<int>(ta), ',', static_cast<int>(tb), ',', static_cast<int>(g.dtype),
        static_cast<int>(g.c_dtype), ',', g.batch, ',',
        g.stride_a, ',', g.stride_b, ',', g.stride_c, ',', bias != nullptr, ',', al_a, ',',
        al_b, ',', al_c, ',', reinterpret_cast<std::uintptr_t>(vec) % 256, ',', g.beta != 0.0f, ',',
        static_cast<int>(epi), ',', reinterpret_cast<std::uintptr_t>(aux) % 256, ',', fast_accum, ',',
        autotune);
    if (no_algo_.count(key)) {
        if (fused) return false;
        fallback_gemm(g, d, bias, stream_);
        return true;
    }
    auto launch = [&](const cublasLtMatmulAlgo_t& algo) {
        GPT_CUBLAS_CHECK(cublasLtMatmul(handle_, ds.op, &g.alpha, g.b, ds.a, g.a, ds.b, &g.beta, d, ds.c, d,
                                        ds.c, &algo, workspace_, kWorkspaceBytes, stream_), "gemm");
    };
    auto it = algos_.find(key);
    // (A settled shape, every call after its first ones, needs no second lookup.)
    auto tuning = it == algos_.end() ? tuning_.find(key) : tuning_.end();
    if (it == algos_.end() && tuning == tuning_.end()) {
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&ds.pref), "gemm");
        const std::uint64_t ws = kWorkspaceBytes;
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)), "gemm");
        GPT_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(ds.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof(al_c)), "gemm");
        cublasLtMatmulHeuristicResult_t results[kGemmTuneCandidates]{};
        int found = 0;
        const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
            handle_, ds.op, ds.a, ds.b, ds.c, ds.c, ds.pref, autotune ? kGemmTuneCandidates : 1, results, &found);
        // NOT_SUPPORTED means "no algorithm for these operands": the fallback kernel runs.
        if (st != CUBLAS_STATUS_NOT_SUPPORTED) GPT_CUBLAS_CHECK(st, "gemm heuristic");
        std::vector<cublasLtMatmulAlgo_t> usable;
        for (int i = 0; st == CUBLAS_STATUS_SUCCESS && i < found; ++i)
            if (results[i].state == CUBLAS_STATUS_SUCCESS && results[i].workspaceSize <= kWorkspaceBytes)
                usable.push_back(results[i].algo);
        if (usable.empty()) {
            no_algo_.insert(key);
            if (fused) return false;
            fallback_gemm(g, d, bias, stream_);
            return true;
        }
        if (usable.size() == 1)
            it = algos_.emplace(key, usable.front()).first;
        else
            tuning = tuning_.emplace(key, Tuning{std::move(usable), {}}).first;
    }
    if (it != algos_.end()) {
        launch(it->second);
        return true;
    }
    // Autotuning (gemm_algo.hpp): this call runs the next candidate, round-robin, between two
    // events; the last of the rounds settles the shape's algorithm.
    Tuning& t = tuning->second;
    const std::size_t call = t.events.size() / 2, n = t.candidates.size();
    cudaEvent_t ev[2];
    for (cudaEvent_t& e : ev) GPT_CUDA_CHECK(cudaEventCreate(&e), "gemm autotune");
    t.events.insert(t.events.end(), {ev[0], ev[1]});
    GPT_CUDA_CHECK(cudaEventRecord(ev[0], stream_), "gemm autotune");
    launch(t.candidates[call % n]);
    GPT_CUDA_CHECK(cudaEventRecord(ev[1], stream_), "gemm autotune");
    if (call + 1 == n * kGemmTuneRounds) {
        // Polled (core/device_wait.hpp), so that the hang watchdog bounds it.
        wait_for_cuda_event(ev[1], "the GEMM autotuning's timed calls");
        std::vector<float> least(n, std::numeric_limits<float>::infinity());
        for (std::size_t c = 0; c <= call; ++c) {
            float ms = 0.0f;
            GPT_CUDA_CHECK(cudaEventElapsedTime(&ms, t.events[2 * c], t.events[2 * c + 1]), "gemm autotune");
            least[c % n] = std::min(least[c % n], ms);
        }
        const std::size_t best = static_cast<std::size_t>(std::min_element(least.begin(), least.end()) - least.begin());
        algos_.emplace(key, t.candidates[best]);
        for (cudaEvent_t e : t.events) cudaEventDestroy(e);
        tuning_.erase(tuning);
    }
    return true;
}

void GemmEngine::run(CudaBackend& be, const GemmArgs& g) {
    using Scratch = CudaBackend::Scratch;
    validate(g);
    if (g.m == 0 || g.n == 0) {
        if (g.bias_grad && g.m > 0 && g.k > 0) be.bias_grad(g.a, g.bias_grad, g.k, g.m, g.dtype);
        return;
    }
    // k = 0 is the empty sum: C = beta*C (+ bias). Not something the model issues, and
    // cuBLASLt rejects it, so say so instead of guessing.
    GPT_REQUIRE(g.k > 0, UsageError, "gemm on CUDA: k = 0 is not supported (m=", g.m, " n=", g.n, ")");
    // GPT_CUDA_GEMM_EPILOGUE (gemm_epilogue.hpp): unfused runs cuBLASLt with at most its
    // bias epilogue and the rest as our element-wise kernels, the paths below that also
    // serve shapes the library has no fused algorithm for.
    const bool fuse = gemm_epilogue_mode() == GemmEpilogueMode::Fused;
    if (g.bias_grad) {
        // The weight-gradient GEMM with dY's column sums from its epilogue (BGRADB), into a
        // scratch since cuBLASLt overwrites the vector and ours accumulates.
        if (fuse && g.epilogue == GemmEpilogue::None) {
            Scratch sums(be, static_cast<std::size_t>(g.m) * sizeof(float));
            if (matmul(g, g.c, Fused{nullptr, nullptr, sums.as<float>(), nullptr})) {
                be.accumulate_f32(sums.get(), g.bias_grad, g.m, DType::F32);
                return;
            }
        }
        be.bias_grad(g.a, g.bias_grad, g.k, g.m, g.dtype);
    }
    if (g.epilogue == GemmEpilogue::None) {
        matmul(g, g.c, Fused{});
        return;
    }
    if (g.epilogue == GemmEpilogue::GeluGrad) {
        // cuBLASLt's DGELU is the tanh GELU's derivative: one call where the library has an
        // algorithm (aux leading dimension a multiple of 8); else the product, then GELU's
        // backward over it (as the erf GELU always does).
        if (fuse && g.tanh_gelu && g.ldc % 8 == 0 && matmul(g, g.c, Fused{nullptr, nullptr, nullptr, g.aux}))
            return;
        matmul(g, g.c, Fused{});
        be.gelu_backward(g.c, g.aux, g.c, g.m * g.n, g.tanh_gelu, g.c_dtype);
        return;
    }
    // The bias epilogue reads a bias of C's type; ours has the operands' type.
    const void* bias = g.bias;
    std::unique_ptr<Scratch> bias_c;
    if (g.c_dtype != g.dtype) {
        bias_c = std::make_unique<Scratch>(be, g.n * dtype_size(g.c_dtype));
        be.cast(g.bias, g.dtype, bias_c->get(), g.c_dtype, g.n);
        bias = bias_c->get();
    }
    if (g.epilogue == GemmEpilogue::Bias) {
        matmul(g, g.c, Fused{bias, nullptr, nullptr, nullptr});
        return;
    }
    // BiasGelu. cuBLASLt's GELU epilogue is the tanh approximation (our default, as Megatron's
    // fused bias-GELU): one call writes the pre-activation (aux, which backward needs) and the activation, where
    // the library has an algorithm for it (its aux leading dimension must be a multiple of 8).
    if (fuse && g.tanh_gelu && g.batch == 1 && g.ldc % 8 == 0 &&
        matmul(g, g.c, Fused{bias, g.aux, nullptr, nullptr}))
        return;
    // Unfused, and the exact erf GELU (--no-bias-gelu-fusion): the GEMM with its bias
    // epilogue writes the pre-activation into aux and one pass computes C = gelu(aux): the
    // backend's vectorised gelu_forward where C's batches are one contiguous block (the
    // model's MLP), else a strided pass per batch.
    matmul(g, g.aux, Fused{bias, nullptr, nullptr, nullptr});
    if (g.ldc == g.n && (g.batch == 1 || g.stride_c == g.m * g.n)) {
        be.gelu_forward(g.aux, g.c, g.batch * g.m * g.n, g.tanh_gelu, g.c_dtype);
        return;
    }
    const std::size_t csz = dtype_size(g.c_dtype);
    for (std::int64_t t = 0; t < g.batch; ++t) {
        const char* pre = static_cast<const char*>(g.aux) + t * g.stride_c * csz;
        char* out = static_cast<char*>(g.c) + t * g.stride_c * csz;
        dispatch(g.c_dtype, [&](auto tag) {
            using T = decltype(tag);
            gelu_2d_kernel<T><<<grid_for(g.m * g.n), kThreads, 0, stream_>>>(
                reinterpret_cast<const T*>(pre), reinterpret_cast<T*>(out), g.m, g.n, g.ldc,
                g.tanh_gelu);
        });
        GPT_CUDA_LAUNCH_CHECK("gemm (gelu epilogue)");
    }
}

}  // namespace gpt::cuda
