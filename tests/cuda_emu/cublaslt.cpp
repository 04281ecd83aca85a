// Emulated cuBLASLt (see include/cublasLt.h for what is covered): descriptors are plain host
// structs, the heuristic applies the documented algorithm-availability rule, and a matmul
// validates everything a GPU run depends on, then computes on the CPU with fp32
// accumulation and fp32 epilogue math, rounding once to each output's type.
#include <cublasLt.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/fp8.hpp"
#include "gpt_emu/matmul_log.hpp"
#include "gpt_emu/memory.hpp"
#include "runtime_internal.hpp"  // stream_before_work: a matmul is work on its stream

namespace gpt_emu::lt {

struct Context {
    int unused = 0;
};

struct MatmulDesc {
    cublasComputeType_t compute;
    cudaDataType_t scale;
    std::int32_t transa = CUBLAS_OP_N, transb = CUBLAS_OP_N;
    std::uint32_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
    const void* bias = nullptr;
    std::int64_t bias_stride = 0;
    std::int32_t bias_type = -1;  // -1: D's type, cuBLASLt's default
    void* aux = nullptr;
    std::int64_t aux_ld = 0, aux_stride = 0;
    std::int32_t aux_type = -1;  // -1: D's type
    const void* a_scale = nullptr;  // FP8: one fp32 in device memory; null means 1
    const void* b_scale = nullptr;
    std::int8_t fast_accum = 0;  // FP8: CUBLASLT_MATMUL_DESC_FAST_ACCUM
};

struct Layout {
    cudaDataType_t type;
    std::int64_t rows, cols, ld;
    std::int32_t batch = 1;
    std::int64_t stride = 0;
};

struct Preference {
    std::uint64_t max_workspace = 0;  // our algorithms need no workspace, so any value fits
    std::uint32_t align[4] = {256, 256, 256, 256};  // A, B, C, D: cuBLASLt's defaults
};

}  // namespace gpt_emu::lt

namespace {

using namespace gpt_emu::lt;

template <typename... P>
cublasStatus_t fail(cublasStatus_t st, const char* fn, const P&... parts) {
    std::ostringstream m;
    (m << ... << parts);
    std::fprintf(stderr, "cuBLASLt emulator: %s: %s (%s)\n", fn, m.str().c_str(), cublasLtGetStatusName(st));
    return st;
}

// Every live handle and descriptor, so a null, destroyed or foreign one is refused instead
// of dereferenced (the real library would crash or misbehave).
std::mutex g_mu;
std::unordered_set<const void*> g_live;

bool live(const void* p) {
    std::lock_guard lock(g_mu);
    return p && g_live.count(p);
}

template <typename T, typename... A>
cublasStatus_t create(T** out, const char* fn, A... init) {
    if (!out) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "null output pointer");
    T* p = new (std::nothrow) T{init...};
    if (!p) return fail(CUBLAS_STATUS_ALLOC_FAILED, fn, "out of host memory");
    {
        std::lock_guard lock(g_mu);
        g_live.insert(p);
    }
    *out = p;
    return CUBLAS_STATUS_SUCCESS;
}

template <typename T>
cublasStatus_t destroy(T* p, const char* fn) {
    if (!p) return CUBLAS_STATUS_SUCCESS;
    {
        std::lock_guard lock(g_mu);
        if (!g_live.erase(p))
            return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "not a live object (destroyed twice?)");
    }
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

// Attributes are copied byte for byte; the size must be the stored type's, as in cuBLASLt.
struct Field {
    void* p;
    std::size_t size;
};

cublasStatus_t set_field(Field f, const void* buf, std::size_t size, const char* fn, int attr) {
    if (!f.p) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute ", attr, " is not emulated");
    if (!buf || size != f.size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute ", attr, ": ", buf ? size : 0,
                    " bytes given, it holds ", f.size);
    std::memcpy(f.p, buf, size);
    return CUBLAS_STATUS_SUCCESS;
}

Field desc_field(MatmulDesc& d, cublasLtMatmulDescAttributes_t a) {
    switch (a) {
        case CUBLASLT_MATMUL_DESC_TRANSA: return {&d.transa, sizeof d.transa};
        case CUBLASLT_MATMUL_DESC_TRANSB: return {&d.transb, sizeof d.transb};
        case CUBLASLT_MATMUL_DESC_EPILOGUE: return {&d.epilogue, sizeof d.epilogue};
        case CUBLASLT_MATMUL_DESC_BIAS_POINTER: return {&d.bias, sizeof d.bias};
        case CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE: return {&d.bias_stride, sizeof d.bias_stride};
        case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE: return {&d.bias_type, sizeof d.bias_type};
        case CUBLASLT_MATMUL_DESC_A_SCALE_POINTER: return {&d.a_scale, sizeof d.a_scale};
        case CUBLASLT_MATMUL_DESC_B_SCALE_POINTER: return {&d.b_scale, sizeof d.b_scale};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: return {&d.aux, sizeof d.aux};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: return {&d.aux_ld, sizeof d.aux_ld};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE: return {&d.aux_stride, sizeof d.aux_stride};
        case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE: return {&d.aux_type, sizeof d.aux_type};
        case CUBLASLT_MATMUL_DESC_FAST_ACCUM: return {&d.fast_accum, sizeof d.fast_accum};
    }
    return {nullptr, 0};
}

bool fp8_type(int t) { return t == CUDA_R_8F_E4M3 || t == CUDA_R_8F_E5M2; }
std::size_t type_size(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : fp8_type(t) ? 1 : 2; }

const char* type_name(int t) {
    switch (t) {
        case CUDA_R_32F: return "CUDA_R_32F";
        case CUDA_R_16F: return "CUDA_R_16F";
        case CUDA_R_16BF: return "CUDA_R_16BF";
        case CUDA_R_64F: return "CUDA_R_64F";
        case CUDA_R_8I: return "CUDA_R_8I";
        case CUDA_R_32I: return "CUDA_R_32I";
        case CUDA_R_8F_E4M3: return "CUDA_R_8F_E4M3";
        case CUDA_R_8F_E5M2: return "CUDA_R_8F_E5M2";
    }
    return "an unknown data type";
}

bool float_type(int t) { return t == CUDA_R_32F || t == CUDA_R_16F || t == CUDA_R_16BF; }

// Epilogue bits, as the real enum composes them.
constexpr std::uint32_t kRelu = 2, kBias = 4, kGelu = 32, kDGelu = 64, kAux = 128;

bool known_epilogue(std::uint32_t e) {
    switch (e) {
        case CUBLASLT_EPILOGUE_DEFAULT:
        case CUBLASLT_EPILOGUE_RELU:
        case CUBLASLT_EPILOGUE_BIAS:
        case CUBLASLT_EPILOGUE_RELU_BIAS:
        case CUBLASLT_EPILOGUE_GELU:
        case CUBLASLT_EPILOGUE_GELU_BIAS:
        case CUBLASLT_EPILOGUE_GELU_AUX:
        case CUBLASLT_EPILOGUE_GELU_AUX_BIAS:
        case CUBLASLT_EPILOGUE_DGELU:
        case CUBLASLT_EPILOGUE_DGELU_BGRAD:
        case CUBLASLT_EPILOGUE_BGRADA:
        case CUBLASLT_EPILOGUE_BGRADB: return true;
    }
    return false;
}
bool writes_bias(std::uint32_t e) {
    return e == CUBLASLT_EPILOGUE_DGELU_BGRAD || e == CUBLASLT_EPILOGUE_BGRADA ||
           e == CUBLASLT_EPILOGUE_BGRADB;
}
bool uses_vector(std::uint32_t e) { return (e & kBias) || writes_bias(e); }

// One validated problem, in cuBLASLt's column-major terms.
struct Problem {
    std::int64_t m, n, k, batch;
    bool ta, tb;
    cudaDataType_t ab, bb, cd, vec, aux;  // A's, B's, C/D's types; vec: the bias / bias-gradient vector's
    bool fp8;
    std::uint32_t epi;
    const MatmulDesc* op;
    const Layout *A, *B, *C, *D;
    std::int64_t vec_len() const { return epi == CUBLASLT_EPILOGUE_BGRADB ? n : m; }
};

// Whether the m x n column-major matrices of a strided batch (leading dimension ld, batch
// stride in elements) share no element: one after another, or interleaved inside each
// column (attention writes heads side by side this way). Other layouts are refused as
// possibly overlapping.
bool batches_disjoint(std::int64_t batch, std::int64_t m, std::int64_t n, std::int64_t ld,
                      std::int64_t stride) {
    if (batch <= 1) return true;
    if (stride >= (n - 1) * ld + m) return true;
    return stride >= m && (batch - 1) * stride + m <= ld;
}

// The checks shared by the heuristic and the matmul: types, shapes, batches, epilogue setup.
cublasStatus_t check(const char* fn, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                     cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                     Problem& p) {
    constexpr auto kInvalid = CUBLAS_STATUS_INVALID_VALUE;
    constexpr auto kNotSupported = CUBLAS_STATUS_NOT_SUPPORTED;
    if (!live(op)) return fail(kInvalid, fn, "matmul descriptor is null or destroyed");
    if (!live(a) || !live(b) || !live(c) || !live(d))
        return fail(kInvalid, fn, "a matrix layout is null or destroyed");
    switch (op->compute) {
        case CUBLAS_COMPUTE_32F:
        case CUBLAS_COMPUTE_32F_PEDANTIC:
        case CUBLAS_COMPUTE_32F_FAST_16F:
        case CUBLAS_COMPUTE_32F_FAST_16BF:
        case CUBLAS_COMPUTE_32F_FAST_TF32: break;
        default:
            return fail(kNotSupported, fn, "compute type ", static_cast<int>(op->compute),
                        ": only the CUBLAS_COMPUTE_32F family is emulated");
    }
    if (op->scale != CUDA_R_32F)
        return fail(kNotSupported, fn, "scale type ", type_name(op->scale), " with 32F compute");
    for (std::int32_t t : {op->transa, op->transb})
        if (t != CUBLAS_OP_N && t != CUBLAS_OP_T)
            return fail(kInvalid, fn, "transpose ", t, " is not N or T");
    if (!known_epilogue(op->epilogue))
        return fail(kNotSupported, fn, "epilogue ", op->epilogue, " is not emulated");

    const bool fp8 = fp8_type(a->type) || fp8_type(b->type);
    if (fp8) {
        // cuBLAS guide, cublasLtMatmul, FP8 requirements on Hopper: both operands FP8, not
        // both E5M2, A transposed and B not ("TN"), fp32/fp16/bf16 C and D (fp8 D with C/D
        // scales and amax outputs is not emulated).
        if (!fp8_type(a->type) || !fp8_type(b->type))
            return fail(kNotSupported, fn, "A is ", type_name(a->type), " but B is ", type_name(b->type));
        if (a->type == CUDA_R_8F_E5M2 && b->type == CUDA_R_8F_E5M2)
            return fail(kNotSupported, fn, "FP8 A and B both CUDA_R_8F_E5M2");
        if (op->transa != CUBLAS_OP_T || op->transb != CUBLAS_OP_N)
            return fail(kNotSupported, fn, "FP8 needs A transposed and B not (the TN layout)");
        if (!float_type(d->type))
            return fail(kNotSupported, fn, "FP8 A/B with ", type_name(d->type), " D");
    } else {
        if (a->type != b->type)
            return fail(kNotSupported, fn, "A is ", type_name(a->type), " but B is ", type_name(b->type));
        if (!float_type(a->type)) return fail(kNotSupported, fn, "A/B of type ", type_name(a->type));
        if (d->type != a->type && d->type != CUDA_R_32F)
            return fail(kNotSupported, fn, type_name(a->type), " A/B with ", type_name(d->type),
                        " C/D (needs the same type or fp32)");
    }
    if (c->type != d->type)
        return fail(kNotSupported, fn, "C is ", type_name(c->type), " but D is ", type_name(d->type));

    p = Problem{};
    p.ta = op->transa == CUBLAS_OP_T;
    p.tb = op->transb == CUBLAS_OP_T;
    p.m = p.ta ? a->cols : a->rows;
    p.k = p.ta ? a->rows : a->cols;
    const std::int64_t kb = p.tb ? b->cols : b->rows;
    p.n = p.tb ? b->rows : b->cols;
    if (p.k != kb || c->rows != p.m || c->cols != p.n || d->rows != p.m || d->cols != p.n)
        return fail(kInvalid, fn, "shapes disagree: op(A) is ", p.m, "x", p.k, ", op(B) ", kb, "x", p.n,
                    ", C ", c->rows, "x", c->cols, ", D ", d->rows, "x", d->cols);
    if (p.m == 0 || p.n == 0 || p.k == 0)
        return fail(kInvalid, fn, "empty product m=", p.m, " n=", p.n, " k=", p.k);
    if (a->batch != b->batch || a->batch != c->batch || a->batch != d->batch)
        return fail(kInvalid, fn, "batch counts disagree: A ", a->batch, ", B ", b->batch, ", C ", c->batch,
                    ", D ", d->batch);
    p.batch = a->batch;
    for (const Layout* l : {a, b, c, d})
        if (p.batch > 1 && l->stride < 0) return fail(kNotSupported, fn, "negative batch stride ", l->stride);
    if (!batches_disjoint(p.batch, p.m, p.n, d->ld, d->stride))
        return fail(kInvalid, fn, "D's batches (stride ", d->stride, ", ld ", d->ld, ", ", p.m, "x", p.n,
                    ") would overwrite each other");

    if (fp8 && (p.m % 16 || p.n % 16 || p.k % 16 || a->ld % 16 || b->ld % 16))
        return fail(kNotSupported, fn, "FP8 needs m, n, k and the leading dimensions of A and B in "
                    "multiples of 16 (m=", p.m, " n=", p.n, " k=", p.k, " lda=", a->ld, " ldb=", b->ld, ")");
    p.epi = op->epilogue;
    p.fp8 = fp8;
    p.ab = a->type;
    p.bb = b->type;
    p.cd = d->type;
    p.vec = p.aux = p.cd;
    if (uses_vector(p.epi)) {
        if (op->bias_type != -1) p.vec = static_cast<cudaDataType_t>(op->bias_type);
        if (p.vec != p.cd && !(p.cd == CUDA_R_32F && p.vec == p.ab) &&
            !(p.fp8 && p.cd == CUDA_R_32F && p.vec == CUDA_R_16BF))
            return fail(kNotSupported, fn, "bias of type ", type_name(p.vec), " with ", type_name(p.ab),
                        " A/B and ", type_name(p.cd), " D");
        if (op->bias_stride < 0) return fail(kNotSupported, fn, "negative bias batch stride");
        if (writes_bias(p.epi) && p.batch > 1 && op->bias_stride < p.vec_len())
            return fail(kInvalid, fn, "the batches' bias gradients would overlap (BIAS_BATCH_STRIDE ",
                        op->bias_stride, " < ", p.vec_len(), ")");
    }
    if (p.epi & kAux) {
        // Documented in cublasLt.h (EPILOGUE_AUX_LD / _BATCH_STRIDE): divisible by 8, ld >= rows.
        if (op->aux_type != -1 && op->aux_type != p.cd)
            return fail(kInvalid, fn, "aux of type ", type_name(op->aux_type), " with D of type ",
                        type_name(p.cd));
        if (op->aux_ld < p.m || op->aux_ld % 8 != 0)
            return fail(kInvalid, fn, "EPILOGUE_AUX_LD ", op->aux_ld,
                        " must be divisible by 8 and at least the ", p.m, " rows of D");
        if (p.batch > 1 && (op->aux_stride < 0 || op->aux_stride % 8 != 0))
            return fail(kInvalid, fn, "EPILOGUE_AUX_BATCH_STRIDE ", op->aux_stride,
                        " must be a non-negative multiple of 8");
        if ((p.epi & kGelu) && !batches_disjoint(p.batch, p.m, p.n, op->aux_ld, op->aux_stride))
            return fail(kInvalid, fn, "the batches' aux outputs would overlap (EPILOGUE_AUX_BATCH_STRIDE ",
                        op->aux_stride, ")");
    }
    p.op = op;
    p.A = a;
    p.B = b;
    p.C = c;
    p.D = d;
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the heuristic and what an algorithm records ------------------------------------------
//
// Which problems have an algorithm. cuBLASLt has had kernels for fp32/fp16/bf16 operands at
// every alignment down to the element size since cuBLAS 11.0:
//  - the cuBLAS guide, "Tensor Core Usage" (docs.nvidia.com/cuda/cublas, 2.1.11 in 12.x/13):
//    since 11.0 there are no restrictions on dimensions or memory alignment for tensor cores;
//    16-byte multiples only make them faster;
//  - cublasLt.h (CUDA 13.1, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_*_BYTES): a smaller promised
//    alignment *excludes the algorithms* that need more, it does not fail the query;
//  - PyTorch's test_cublas_addmm_alignment (test/test_matmul_cuda.py) runs fp16 addmm with a
//    bias through cuBLASLt with A, the input or the bias offset by 1 or 2 elements (2- and
//    4-byte alignment, passed as these preferences since pytorch#98975), and PyTorch treats
//    an empty heuristic result as an error: the query succeeds on its A100/H100 CI.
// So the query fails (NOT_SUPPORTED, found = 0) only for an operand promised less alignment
// than its element size, which no kernel can load; fp8's hard 16-byte rules are not emulated.
// Consequence: gemm.cu's fallback kernel is not reached on a GPU for its operands.
// GPT_EMU_CUBLASLT_ALIGN=<power of two> emulates a stricter library, where an operand whose pointer
// promise, leading dimension or batch stride in bytes is not a multiple of <bytes> has no
// algorithm, so tests can still exercise that fallback.
//
// An algorithm records the alignments it was chosen for, plus the types and epilogue, and
// the matmul refuses pointers that break them: on a GPU that is undefined behaviour.

constexpr std::uint64_t kMagic = 0x6770745f656d4c74ull;  // "gpt_emLt"
constexpr std::uint32_t kVectorAlign = 16;  // the most a kernel's vector loads need

std::uint64_t pointer_align(const void* p) {
    const auto v = reinterpret_cast<std::uintptr_t>(p);
    return v ? (v & (~v + 1)) : 256;
}

std::uint64_t signature(const Problem& p) {
    return std::uint64_t{static_cast<std::uint32_t>(p.ab)} |
           std::uint64_t{static_cast<std::uint32_t>(p.cd)} << 8 | std::uint64_t{p.epi} << 16 |
           std::uint64_t{static_cast<std::uint32_t>(p.bb)} << 48;
}

std::uint64_t stricter_library_align() {
    const char* s = std::getenv("GPT_EMU_CUBLASLT_ALIGN");
    return s ? std::strtoull(s, nullptr, 10) : 0;
}

cublasStatus_t find_algo(const Problem& p, const Preference& pref, cublasLtMatmulAlgo_t& algo) {
    const std::uint64_t strict = stricter_library_align();
    const Layout* ls[4] = {p.A, p.B, p.C, p.D};
    for (int i = 0; i < 4; ++i) {
        const std::uint64_t esz = type_size(ls[i]->type), promised = pref.align[i];
        if (promised == 0 || promised % esz != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
        // FP8 kernels need every matrix 16-byte aligned (cuBLAS guide, FP8 requirements).
        if (p.fp8 && promised < 16) return CUBLAS_STATUS_NOT_SUPPORTED;
        if (strict) {
            std::uint64_t bits = promised | static_cast<std::uint64_t>(ls[i]->ld) * esz;
            if (p.batch > 1) bits |= static_cast<std::uint64_t>(ls[i]->stride) * esz;
            if (bits % strict != 0) return CUBLAS_STATUS_NOT_SUPPORTED;
        }
    }
    // Bias and aux have no preference: cuBLASLt reads their pointers (possibly not set yet)
    // from the descriptor to infer an alignment.
    const std::uint64_t bias_align = std::min<std::uint64_t>(pointer_align(p.op->bias), kVectorAlign);
    const std::uint64_t aux_align = std::min<std::uint64_t>(pointer_align(p.op->aux), kVectorAlign);
    algo = cublasLtMatmulAlgo_t{};
    algo.data[0] = kMagic;
    algo.data[1] = pref.align[0] | std::uint64_t{pref.align[1]} << 32;
    algo.data[2] = pref.align[2] | std::uint64_t{pref.align[3]} << 32;
    algo.data[3] = bias_align | aux_align << 32;
    algo.data[4] = signature(p);
    return CUBLAS_STATUS_SUCCESS;
}

// ---- the computation ------------------------------------------------------------------------

float load(const void* base, cudaDataType_t t, std::int64_t i) {
    switch (t) {
        case CUDA_R_8F_E4M3:
            return gpt::fp8_to_float(static_cast<const std::uint8_t*>(base)[i], gpt::Fp8Format::E4M3);
        case CUDA_R_8F_E5M2:
            return gpt::fp8_to_float(static_cast<const std::uint8_t*>(base)[i], gpt::Fp8Format::E5M2);
        case CUDA_R_16F: return __half2float(static_cast<const __half*>(base)[i]);
        case CUDA_R_16BF: return __bfloat162float(static_cast<const __nv_bfloat16*>(base)[i]);
        default: return static_cast<const float*>(base)[i];
    }
}

// load() of `count` elements base[i0], base[i0 + step], ...: the type's switch once per run
// instead of once per element (the operands' conversion was a tenth of a GEMM's time).
template <typename Convert>
void load_run(float* out, std::int64_t count, Convert convert) {
    for (std::int64_t e = 0; e < count; ++e) out[e] = convert(e);
}
void load_strided(float* out, const void* base, cudaDataType_t t, std::int64_t i0, std::int64_t step,
                  std::int64_t count) {
    switch (t) {
        case CUDA_R_8F_E4M3:
        case CUDA_R_8F_E5M2: {
            const auto* p = static_cast<const std::uint8_t*>(base) + i0;
            const auto f = t == CUDA_R_8F_E4M3 ? gpt::Fp8Format::E4M3 : gpt::Fp8Format::E5M2;
            load_run(out, count, [&](std::int64_t e) { return gpt::fp8_to_float(p[e * step], f); });
            break;
        }
        case CUDA_R_16F: {
            const auto* p = static_cast<const __half*>(base) + i0;
            load_run(out, count, [&](std::int64_t e) { return __half2float(p[e * step]); });
            break;
        }
        case CUDA_R_16BF: {
            const auto* p = static_cast<const __nv_bfloat16*>(base) + i0;
            load_run(out, count, [&](std::int64_t e) { return __bfloat162float(p[e * step]); });
            break;
        }
        default: {
            const auto* p = static_cast<const float*>(base) + i0;
            load_run(out, count, [&](std::int64_t e) { return p[e * step]; });
            break;
        }
    }
}

void store(void* base, cudaDataType_t t, std::int64_t i, float v) {
    switch (t) {
        case CUDA_R_16F: static_cast<__half*>(base)[i] = __float2half_rn(v); break;
        case CUDA_R_16BF: static_cast<__nv_bfloat16*>(base)[i] = __float2bfloat16_rn(v); break;
        default: static_cast<float*>(base)[i] = v; break;
    }
}

// cuBLASLt's GELU is the tanh approximation.
constexpr float kSqrt2OverPi = 0.7978845608028654f, kGeluC = 0.044715f;
float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x))); }
float gelu_grad(float x) {
    const float t = std::tanh(kSqrt2OverPi * (x + kGeluC * x * x * x));
    return 0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * kSqrt2OverPi * (1.0f + 3.0f * kGeluC * x * x);
}

// fp32 accumulation, as the tensor cores' CUBLAS_COMPUTE_32F: sixteen partial sums break
// the chain of dependent adds so the compiler can vectorise the loop. Cloned for AVX2 (two
// 8-wide registers for the 16 sums; picked at run time where the CPU has it): the same
// lane-wise IEEE multiplies and adds in the same order, so the same bits. Not "fma" or
// "avx512f" (which implies FMA): a contracted multiply-add would round differently.
__attribute__((target_clones("avx2", "default")))
double dot(const float* x, const float* y, std::int64_t k) {
    float s[16] = {};
    std::int64_t q = 0;
    for (; q + 16 <= k; q += 16)
        for (int l = 0; l < 16; ++l) s[l] += x[q + l] * y[q + l];
    for (; q < k; ++q) s[0] += x[q] * y[q];
    float t = 0.0f;
    for (float v : s) t += v;
    return t;
}

// FP8 fast accumulation (CUBLASLT_MATMUL_DESC_FAST_ACCUM), our model of it: the tensor
// cores sum each 32-deep k step of an FP8 wgmma (products exact, fp32 sum), but the running
// accumulator keeps only about 14 significant bits (DeepSeek-V3's report, sec. 3.3.2, for
// FP8 GEMMs on Hopper without promotion), modelled as truncation toward zero to 14 bits
// after every k step. The split accumulator cuBLASLt uses without the flag is fp32 (dot).
// A model, not the hardware's exact rounding: test bounds derived from it (ceil(k/32)
// truncations of at most 2^-13 relative each) are confirmed only on a GPU.
constexpr int kFastAccumBits = 14, kFastAccumStep = 32;
float keep_significant_bits(float v, int bits) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    u &= ~((1u << (24 - bits)) - 1u);  // clear the low 24 - bits of the 24-bit significand
    std::memcpy(&v, &u, 4);
    return v;
}
double dot_fast(const float* x, const float* y, std::int64_t k) {
    float acc = 0.0f;
    for (std::int64_t q0 = 0; q0 < k; q0 += kFastAccumStep) {
        float step = 0.0f;
        for (std::int64_t q = q0; q < std::min(k, q0 + kFastAccumStep); ++q) step += x[q] * y[q];
        acc = keep_significant_bits(acc + step, kFastAccumBits);
    }
    return acc;
}

std::mutex calls_mutex;
std::vector<gpt_emu::MatmulCall>& calls_log() {
    static std::vector<gpt_emu::MatmulCall> log;
    return log;
}
struct AlgoCosts {  // guarded by calls_mutex
    std::vector<std::vector<double>> ms;
    std::vector<std::size_t> calls;  // per algorithm, since the costs were set
};
AlgoCosts& algo_costs() {
    static AlgoCosts c;
    return c;
}

void compute(const Problem& p, float alpha, float beta, const void* A, const void* B, const void* C,
             void* D) {
    const MatmulDesc& op = *p.op;
    const std::int64_t m = p.m, n = p.n, k = p.k;
    // op(A) by rows and op(B) by columns, both contiguous in k, converted once per batch.
    std::vector<float> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(n * k));
    std::vector<double> row_sum;
    // FP8: D = alpha * scaleA * scaleB * op(A)op(B) + beta * C (+ epilogue).
    if (op.a_scale) alpha *= *static_cast<const float*>(op.a_scale);
    if (op.b_scale) alpha *= *static_cast<const float*>(op.b_scale);
    // The flag means nothing for 16-bit GEMMs (they accumulate in fp32 either way).
    const bool fast = p.fp8 && op.fast_accum != 0;
    for (std::int64_t t = 0; t < p.batch; ++t) {
        const std::int64_t a0 = t * p.A->stride, b0 = t * p.B->stride;
        for (std::int64_t i = 0; i < m; ++i)
            load_strided(&a[i * k], A, p.ab, a0 + (p.ta ? i * p.A->ld : i), p.ta ? 1 : p.A->ld, k);
        for (std::int64_t j = 0; j < n; ++j)
            load_strided(&b[j * k], B, p.bb, b0 + (p.tb ? j : j * p.B->ld), p.tb ? p.B->ld : 1, k);
        void* grad = writes_bias(p.epi) ? const_cast<void*>(op.bias) : nullptr;
        const std::int64_t v0 = t * op.bias_stride, x0 = t * op.aux_stride;
        if (p.epi == CUBLASLT_EPILOGUE_BGRADA || p.epi == CUBLASLT_EPILOGUE_BGRADB) {
            // The bias gradient of A (rows of op(A)) or B (columns of op(B)), summed over k.
            const std::vector<float>& src = p.epi == CUBLASLT_EPILOGUE_BGRADA ? a : b;
            for (std::int64_t r = 0; r < p.vec_len(); ++r) {
                double s = 0;
                for (std::int64_t q = 0; q < k; ++q) s += src[r * k + q];
                store(grad, p.vec, v0 + r, static_cast<float>(s));
            }
        }
        row_sum.assign(static_cast<std::size_t>(m), 0.0);
        for (std::int64_t j = 0; j < n; ++j)
            for (std::int64_t i = 0; i < m; ++i) {
                float v = alpha * static_cast<float>(fast ? dot_fast(&a[i * k], &b[j * k], k)
                                                          : dot(&a[i * k], &b[j * k], k));
                // beta == 0: C is not read (it may hold NaN), as in BLAS.
                if (beta != 0.0f) v += beta * load(C, p.cd, t * p.C->stride + j * p.C->ld + i);
                if (p.epi & kBias) v += load(op.bias, p.vec, v0 + i);
                if (p.epi & kGelu) {
                    if (p.epi & kAux) store(op.aux, p.aux, x0 + j * op.aux_ld + i, v);
                    v = gelu(v);
                }
                if (p.epi & kRelu) v = std::fmax(v, 0.0f);
                if (p.epi & kDGelu) v *= gelu_grad(load(op.aux, p.aux, x0 + j * op.aux_ld + i));
                row_sum[static_cast<std::size_t>(i)] += v;
                store(D, p.cd, t * p.D->stride + j * p.D->ld + i, v);
            }
        if (p.epi == CUBLASLT_EPILOGUE_DGELU_BGRAD)
            for (std::int64_t i = 0; i < m; ++i)
                store(grad, p.vec, v0 + i, static_cast<float>(row_sum[static_cast<std::size_t>(i)]));
    }
}

// Bytes from a matrix's first element to past its last, over every batch.
std::size_t span(const Layout& l, std::int64_t batch) {
    const std::int64_t elems = (batch - 1) * l.stride + (l.cols - 1) * l.ld + l.rows;
    return static_cast<std::size_t>(elems) * type_size(l.type);
}

}  // namespace

// ---- API ----------------------------------------------------------------------------------------

const char* cublasLtGetStatusName(cublasStatus_t status) {
    switch (status) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) { return create(handle, "cublasLtCreate"); }

cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
    if (!live(handle))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", "handle is null or destroyed");
    return destroy(handle, "cublasLtDestroy");
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type) {
    return create(desc, "cublasLtMatmulDescCreate", compute, scale_type);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
    return destroy(desc, "cublasLtMatmulDescDestroy");
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t size) {
    const char* fn = "cublasLtMatmulDescSetAttribute";
    if (!live(desc)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "descriptor is null or destroyed");
    return set_field(desc_field(*desc, attr), buf, size, fn, attr);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, std::size_t size, std::size_t* written) {
    const char* fn = "cublasLtMatmulDescGetAttribute";
    if (!live(desc)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "descriptor is null or destroyed");
    const Field f = desc_field(*desc, attr);
    if (!f.p) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute ", attr, " is not emulated");
    if (size == 0) {
        if (!written) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "size 0 without sizeWritten");
        *written = f.size;
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!buf || size != f.size)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute ", attr, ": buffer of ", size,
                    " bytes, it holds ", f.size);
    std::memcpy(buf, f.p, f.size);
    if (written) *written = f.size;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          std::uint64_t rows, std::uint64_t cols, std::int64_t ld) {
    const char* fn = "cublasLtMatrixLayoutCreate";
    if (rows > INT32_MAX || cols > INT32_MAX)
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, rows, "x", cols,
                    ": only int32 dimensions are supported");
    if (ld < 0 || static_cast<std::uint64_t>(ld) < rows)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "leading dimension ", ld, " < ", rows, " rows");
    return create(layout, fn, type, static_cast<std::int64_t>(rows), static_cast<std::int64_t>(cols), ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
    return destroy(layout, "cublasLtMatrixLayoutDestroy");
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                std::size_t size) {
    const char* fn = "cublasLtMatrixLayoutSetAttribute";
    if (!live(layout)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "layout is null or destroyed");
    switch (attr) {
        case CUBLASLT_MATRIX_LAYOUT_ORDER: {
            std::int32_t order = 0;
            if (cublasStatus_t st = set_field({&order, sizeof order}, buf, size, fn, attr)) return st;
            if (order != CUBLASLT_ORDER_COL)
                return fail(CUBLAS_STATUS_NOT_SUPPORTED, fn, "order ", order,
                            ": only CUBLASLT_ORDER_COL is emulated");
            return CUBLAS_STATUS_SUCCESS;
        }
        case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT: {
            std::int32_t count = 0;
            if (cublasStatus_t st = set_field({&count, sizeof count}, buf, size, fn, attr)) return st;
            if (count < 1) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "batch count ", count);
            layout->batch = count;
            return CUBLAS_STATUS_SUCCESS;
        }
        case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
            return set_field({&layout->stride, sizeof layout->stride}, buf, size, fn, attr);
    }
    return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "attribute ", attr, " is not emulated");
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    return create(pref, "cublasLtMatmulPreferenceCreate");
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    return destroy(pref, "cublasLtMatmulPreferenceDestroy");
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, std::size_t size) {
    const char* fn = "cublasLtMatmulPreferenceSetAttribute";
    if (!live(pref)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "preference is null or destroyed");
    Field f{nullptr, 0};
    switch (attr) {
        case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES:
            f = {&pref->max_workspace, sizeof pref->max_workspace};
            break;
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES: f = {&pref->align[0], sizeof pref->align[0]}; break;
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES: f = {&pref->align[1], sizeof pref->align[1]}; break;
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES: f = {&pref->align[2], sizeof pref->align[2]}; break;
        case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES: f = {&pref->align[3], sizeof pref->align[3]}; break;
    }
    return set_field(f, buf, size, fn, attr);
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found) {
    const char* fn = "cublasLtMatmulAlgoGetHeuristic";
    if (found) *found = 0;
    if (!live(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is null or destroyed");
    if (requested <= 0 || !results || !found)
        return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "requestedAlgoCount ", requested,
                    " or a null result pointer");
    if (!live(pref)) return fail(CUBLAS_STATUS_INVALID_VALUE, fn, "preference is null or destroyed");
    Problem p;
    if (cublasStatus_t st = check(fn, desc, a, b, c, d, p)) return st;
    cublasLtMatmulAlgo_t algo;
    // No algorithm is an expected answer (the caller falls back): no message.
    if (cublasStatus_t st = find_algo(p, *pref, algo)) return st;
    // kMatmulAlgos answers when asked for as many, told apart by data[5] (their index).
    const int n = std::min(requested, gpt_emu::kMatmulAlgos);
    for (int i = 0; i < n; ++i) {
        results[i] = cublasLtMatmulHeuristicResult_t{};
        results[i].algo = algo;
        results[i].algo.data[5] = static_cast<std::uint64_t>(i);
        results[i].workspaceSize = 0;
        results[i].state = CUBLAS_STATUS_SUCCESS;
        results[i].wavesCount = 1.0f;
    }
    *found = n;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a_desc, const void* B,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t stream) {
    const char* fn = "cublasLtMatmul";
    constexpr auto kInvalid = CUBLAS_STATUS_INVALID_VALUE;
    if (!live(handle)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, fn, "handle is null or destroyed");
    Problem p;
    if (cublasStatus_t st = check(fn, desc, a_desc, b_desc, c_desc, d_desc, p)) return st;
    if (!alpha || !beta) return fail(kInvalid, fn, "null alpha or beta");
    // Host pointer mode: read before the arena opens, so a device pointer faults as on a GPU.
    const float al = *static_cast<const float*>(alpha), be = *static_cast<const float*>(beta);

    cublasLtMatmulAlgo_t implicit;
    if (!algo) {  // cuBLASLt then runs the heuristic with default preferences
        if (cublasStatus_t st = find_algo(p, Preference{}, implicit))
            return fail(st, fn, "no algorithm for the default 256-byte alignment preferences");
        algo = &implicit;
    }
    if (algo->data[0] != kMagic)
        return fail(kInvalid, fn, "algo was not filled by cublasLtMatmulAlgoGetHeuristic");
    if (algo->data[4] != signature(p))
        return fail(kInvalid, fn, "algo was found for other data types or another epilogue");
    if (algo->data[5] >= static_cast<std::uint64_t>(gpt_emu::kMatmulAlgos))
        return fail(kInvalid, fn, "algo index ", algo->data[5], " was never offered by the heuristic");
    const int algo_index = static_cast<int>(algo->data[5]);

    const MatmulDesc& op = *desc;
    if (!A || !B || !D || (be != 0.0f && !C)) return fail(kInvalid, fn, "null A, B, C or D");
    if (uses_vector(p.epi) && !op.bias)
        return fail(kInvalid, fn, "epilogue ", p.epi, " needs CUBLASLT_MATMUL_DESC_BIAS_POINTER");
    if ((p.epi & kAux) && !op.aux)
        return fail(kInvalid, fn, "epilogue ", p.epi, " needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER");
    if (C == D && (p.C->ld != p.D->ld || (p.batch > 1 && p.C->stride != p.D->stride)))
        return fail(kInvalid, fn, "in-place C == D with different layouts (ld ", p.C->ld, " vs ", p.D->ld,
                    ")");

    // Alignment the algorithm was chosen for (see find_algo).
    const char* names[4] = {"A", "B", "C", "D"};
    const void* ptrs[4] = {A, B, be != 0.0f ? C : nullptr, D};
    for (int i = 0; i < 4; ++i) {
        const std::uint64_t want = (algo->data[1 + i / 2] >> (32 * (i % 2))) & 0xffffffffu;
        if (ptrs[i] && reinterpret_cast<std::uintptr_t>(ptrs[i]) % want != 0)
            return fail(kInvalid, fn, names[i], " at ", ptrs[i], " is not aligned to the ", want,
                        " bytes promised in CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_", names[i],
                        "_BYTES when the algorithm was chosen (a GPU kernel would misread it)");
    }
    const std::uint64_t bias_want = algo->data[3] & 0xffffffffu, aux_want = algo->data[3] >> 32;
    if (uses_vector(p.epi) && pointer_align(op.bias) < bias_want)
        return fail(kInvalid, fn, "bias at ", op.bias,
                    " is less aligned than the bias pointer the algorithm was chosen for (", bias_want,
                    " bytes)");
    if ((p.epi & kAux) && pointer_align(op.aux) < aux_want)
        return fail(kInvalid, fn, "aux at ", op.aux,
                    " is less aligned than the aux pointer the algorithm was chosen for (", aux_want,
                    " bytes)");

    // Every operand must lie in device memory, as a kernel would read it.
    auto device = [&](const char* what, const void* ptr, std::size_t bytes) {
        if (gpt_emu::is_device(ptr, bytes)) return true;
        fail(kInvalid, fn, what, " (", ptr, ", ", bytes, " bytes) is not inside one device allocation");
        return false;
    };
    if (!device("A", A, span(*p.A, p.batch)) || !device("B", B, span(*p.B, p.batch)) ||
        (be != 0.0f && !device("C", C, span(*p.C, p.batch))) || !device("D", D, span(*p.D, p.batch)))
        return kInvalid;
    if (uses_vector(p.epi) &&
        !device("bias", op.bias,
                static_cast<std::size_t>((p.batch - 1) * op.bias_stride + p.vec_len()) * type_size(p.vec)))
        return kInvalid;
    if ((p.epi & kAux) &&
        !device("aux", op.aux,
                static_cast<std::size_t>((p.batch - 1) * op.aux_stride + (p.n - 1) * op.aux_ld + p.m) *
                    type_size(p.aux)))
        return kInvalid;
    if (workspace_bytes > 0 && !device("workspace", workspace, workspace_bytes)) return kInvalid;
    if ((op.a_scale && !device("A scale", op.a_scale, sizeof(float))) ||
        (op.b_scale && !device("B scale", op.b_scale, sizeof(float))))
        return kInvalid;

    // The product is stream work (deferred, runtime.cpp): it keeps copies of the descriptors,
    // which the caller may change or destroy once the call returns.
    struct Copies {
        MatmulDesc op;
        Layout a, b, c, d;
    };
    double cost_ms = 0.0;
    {
        std::lock_guard lock(calls_mutex);
        calls_log().push_back({p.m, p.n, p.k, p.fp8, p.fp8 && op.fast_accum != 0, algo_index, p.epi});
        AlgoCosts& c = algo_costs();
        const auto i = static_cast<std::size_t>(algo_index);
        if (i < c.ms.size() && !c.ms[i].empty()) cost_ms = c.ms[i][std::min(c.calls[i]++, c.ms[i].size() - 1)];
    }
    if (cost_ms > 0) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(cost_ms));
    auto copies = std::make_shared<Copies>(Copies{*p.op, *p.A, *p.B, *p.C, *p.D});
    Problem q = p;
    q.op = &copies->op;
    q.A = &copies->a;
    q.B = &copies->b;
    q.C = &copies->c;
    q.D = &copies->d;
    if (!gpt_emu::stream_enqueue(stream, [q, copies, al, be, A, B, C, D] {
            gpt_emu::DeviceAccess access;
            compute(q, al, be, A, B, C, D);
        }))
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, fn, "stream ", static_cast<const void*>(stream),
                    " does not exist");
    return CUBLAS_STATUS_SUCCESS;
}

namespace gpt_emu {

std::vector<MatmulCall> matmul_calls() {
    std::lock_guard lock(calls_mutex);
    return calls_log();
}

void clear_matmul_calls() {
    std::lock_guard lock(calls_mutex);
    calls_log().clear();
}

void set_matmul_algo_costs_ms(std::vector<std::vector<double>> cost) {
    std::lock_guard lock(calls_mutex);
    algo_costs().calls.assign(cost.size(), 0);
    algo_costs().ms = std::move(cost);
}

}  // namespace gpt_emu
