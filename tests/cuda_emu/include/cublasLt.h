// Emulated cuBLASLt (tests/cuda_emu): the subset of the real API our CUDA backend calls,
// computed on the CPU over the emulator's device arena, so lib/backend/cuda/gemm.cu
// runs unchanged and can be checked against the CPU backend.
//
// What it emulates: D = epilogue(alpha * op(A) op(B) + beta * C [+ bias]) on column-major
// matrices with strided batches, fp32 compute (CUBLAS_COMPUTE_32F and its _PEDANTIC/_FAST_*
// variants: the FAST ones are allowed, not required, to round inputs, and are computed
// exactly), fp32/fp16/bf16 A and B, C and D of A's type or fp32; FP8 (E4M3/E5M2) A and B
// with their scale pointers under cuBLASLt's Hopper rules (TN layout, 16-byte multiples, not
// both E5M2) and fp32/fp16/bf16 C and D; the BIAS/RELU/GELU/DGELU/
// BGRAD epilogues below, and a heuristic that finds an algorithm exactly where real cuBLASLt
// documents one (see cublasLtMatmulAlgoGetHeuristic in cublaslt.cpp for the rule and sources).
// Like the real library it returns statuses (never throws) and, unlike it, it also says on
// stderr why it refused, and it checks what a GPU would silently get wrong: operands outside
// device memory, pointers less aligned than the heuristic was promised.
//
// C is read only when beta != 0 (so it may then be null or hold NaN), as in BLAS.
//
// Limits: host pointer mode only (alpha/beta are host floats); column order only; no
// RELU_AUX/DRELU bit masks, fp8 C/D, C/D scales or amax outputs, int8, complex, 16F/64F/32I compute, matrix transforms or
// algorithm enumeration. The work runs to completion when issued, in stream order.
//
// Names are declared with C++ linkage, and the handle/descriptor types are our own structs,
// so a binary that also links the real libcublasLt (extern "C") sees no clashing symbols.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda_runtime.h"

// cudaDataType lives in library_types.h in real CUDA; every emulated header that needs it
// defines it under this guard, so it is defined once. Values are the real ones.
#ifndef GPT_EMU_CUDA_DATA_TYPE_DEFINED
#define GPT_EMU_CUDA_DATA_TYPE_DEFINED
enum cudaDataType_t {
    CUDA_R_32F = 0,
    CUDA_R_64F = 1,
    CUDA_R_16F = 2,
    CUDA_R_8I = 3,
    CUDA_R_32I = 10,
    CUDA_R_16BF = 14,
    CUDA_R_8F_E4M3 = 28,
    CUDA_R_8F_E5M2 = 29,
};
typedef cudaDataType_t cudaDataType;
#endif

enum cublasStatus_t {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
    CUBLAS_STATUS_LICENSE_ERROR = 16,
};

enum cublasComputeType_t {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_16F_PEDANTIC = 65,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_32F_PEDANTIC = 69,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_64F_PEDANTIC = 71,
    CUBLAS_COMPUTE_32I = 72,
    CUBLAS_COMPUTE_32I_PEDANTIC = 73,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
};

enum cublasOperation_t {
    CUBLAS_OP_N = 0,
    CUBLAS_OP_T = 1,
};

namespace gpt_emu::lt {
struct Context;
struct MatmulDesc;
struct Layout;
struct Preference;
}  // namespace gpt_emu::lt

typedef gpt_emu::lt::Context* cublasLtHandle_t;
typedef gpt_emu::lt::MatmulDesc* cublasLtMatmulDesc_t;
typedef gpt_emu::lt::Layout* cublasLtMatrixLayout_t;
typedef gpt_emu::lt::Preference* cublasLtMatmulPreference_t;

// Same size as the real one; filled only by cublasLtMatmulAlgoGetHeuristic.
struct cublasLtMatmulAlgo_t {
    std::uint64_t data[8];
};

struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    std::size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

// Attribute storage types follow the real header: int32_t for TRANSA/B and the data types,
// uint32_t for EPILOGUE, pointers, int64_t for leading dimensions and batch strides.
enum cublasLtMatmulDescAttributes_t {
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_BATCH_STRIDE = 10,
    // const void* to one fp32 in device memory: the factor of A's (B's) values in FP8 GEMMs;
    // unset (null) means 1.
    CUBLASLT_MATMUL_DESC_A_SCALE_POINTER = 17,
    CUBLASLT_MATMUL_DESC_B_SCALE_POINTER = 18,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER = 11,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD = 12,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_BATCH_STRIDE = 13,
    CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE = 22,
    // int8_t, FP8 GEMMs only: 1 lets the tensor cores accumulate along k without promoting
    // their partial sums to fp32 (the emulator's model of it: cublaslt.cpp, dot_fast).
    CUBLASLT_MATMUL_DESC_FAST_ACCUM = 25,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
};

// Values are bit sets in the real library: BIAS = 4, GELU = 32, AUX = 128, BGRAD = 16.
enum cublasLtEpilogue_t {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_RELU = 2,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_RELU_BIAS = 6,
    CUBLASLT_EPILOGUE_GELU = 32,
    CUBLASLT_EPILOGUE_GELU_BIAS = 36,
    CUBLASLT_EPILOGUE_GELU_AUX = 160,
    CUBLASLT_EPILOGUE_GELU_AUX_BIAS = 164,
    CUBLASLT_EPILOGUE_DGELU = 192,
    CUBLASLT_EPILOGUE_DGELU_BGRAD = 208,
    CUBLASLT_EPILOGUE_BGRADA = 256,
    CUBLASLT_EPILOGUE_BGRADB = 512,
};

enum cublasLtOrder_t {
    CUBLASLT_ORDER_COL = 0,
    CUBLASLT_ORDER_ROW = 1,  // declared so it can be refused (CUBLAS_STATUS_NOT_SUPPORTED)
};

enum cublasLtMatrixLayoutAttribute_t {
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,  // int32_t
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,  // int32_t
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,  // int64_t, in elements
};

enum cublasLtMatmulPreferenceAttributes_t {
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,  // uint64_t
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,  // uint32_t, default 256 as in cuBLASLt
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
};

const char* cublasLtGetStatusName(cublasStatus_t status);

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t compute,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              const void* buf, std::size_t size);
// size == 0: *written gets the size needed; otherwise size must be the attribute's.
cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                              void* buf, std::size_t size, std::size_t* written);

// A column-major matrix as stored: rows x cols, ld >= rows elements between columns.
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          std::uint64_t rows, std::uint64_t cols, std::int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                std::size_t size);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, std::size_t size);

// CUBLAS_STATUS_NOT_SUPPORTED with *found = 0 where cuBLASLt has no algorithm.
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t results[], int* found);

// algo == nullptr runs the heuristic with default preferences (256-byte alignment), as the
// real library does.
cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t a_desc, const void* B,
                              cublasLtMatrixLayout_t b_desc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t c_desc, void* D, cublasLtMatrixLayout_t d_desc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace, std::size_t workspace_bytes,
                              cudaStream_t stream);
