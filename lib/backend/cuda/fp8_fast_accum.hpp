// Whether forward FP8 GEMMs take cuBLASLt's fast accumulation (gemm.cu), chosen at run time
// so one build measures both (GPT_CUDA_FP8_FAST_ACCUM=forward|off, README.md, "Kernel
// switches").
#pragma once

namespace gpt::cuda {

// The first call reads GPT_CUDA_FP8_FAST_ACCUM (UsageError on a value other than forward or
// off); set_fp8_fast_accum_forward overrides it for the process (tests). When true, an FP8
// GEMM whose GemmArgs::Fp8::fast_accum is set runs with CUBLASLT_MATMUL_DESC_FAST_ACCUM.
bool fp8_fast_accum_forward();
void set_fp8_fast_accum_forward(bool on);

}  // namespace gpt::cuda
