// Which GEMM epilogues cuBLASLt fuses (gemm.cu), chosen at run time so one build measures
// both and a slow fused epilogue can be switched off without a rebuild
// (GPT_CUDA_GEMM_EPILOGUE=fused|unfused, README.md, "Kernel switches").
#pragma once

namespace gpt::cuda {

// Fused: the tanh GELU with the bias (writing the pre-activation), its derivative (DGELU)
// and the bias gradient (BGRADB) in cuBLASLt's epilogues, where the library has an algorithm.
// Unfused: cuBLASLt with at most its bias epilogue, then our element-wise gelu_forward,
// gelu_backward and bias_grad kernels. The same math with a different rounding point: the
// unfused GELU reads the pre-activation rounded to C's type, the fused one its fp32 value
// (test_cuda_gemm.cpp's FusedAndUnfusedEpiloguesAgree bounds the difference).
enum class GemmEpilogueMode { Fused, Unfused };

// The first call reads GPT_CUDA_GEMM_EPILOGUE (UsageError on a value other than fused or
// unfused); set_gemm_epilogue_mode overrides it for the process (tests).
GemmEpilogueMode gemm_epilogue_mode();
void set_gemm_epilogue_mode(GemmEpilogueMode m);
const char* gemm_epilogue_mode_name(GemmEpilogueMode m);

}  // namespace gpt::cuda
