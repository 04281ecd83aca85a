// Which kernel casts a tensor to FP8 (fp8.cu), chosen at run time so one build measures both
// (GPT_CUDA_FP8_CAST=vec|tile, README.md, "Kernel switches"): the vectorised 64 x 64 tile
// kernel (16-byte loads, 4- and 8-byte code stores) where the tensor allows it, or the
// element-wise 32 x 32 tile kernel it replaced.
#pragma once

namespace gpt::cuda {

// The first call reads GPT_CUDA_FP8_CAST (UsageError on a value other than vec or tile);
// set_fp8_cast_tile_kernel overrides it for the process (tests). True: always the
// element-wise tile kernel.
bool fp8_cast_tile_kernel();
void set_fp8_cast_tile_kernel(bool on);

}  // namespace gpt::cuda
