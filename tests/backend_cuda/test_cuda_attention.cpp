// CUDA causal attention (plain and flash) vs the CPU kernel of the same kind: outputs,
// saved statistics and gradients, with and without dropout (identical Philox masks),
// Megatron's head dims.
#include "backend/cuda/attention_flash.hpp"
#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

using cuda::FlashKernel;
using cuda::flash_uses_tensor_cores;
using cuda::set_flash_kernel;

class CudaAttention : public CudaVsCpu {};

struct Shape {
    std::int64_t s, b, np, hn;
};

void run_attention(Backend& cpu, Backend& gpu, const Shape& sh, DType t, float p, bool flash) {
    SCOPED_TRACE(detail::concat("s=", sh.s, " b=", sh.b, " np=", sh.np, " hn=", sh.hn, " ",
                                dname(t), " dropout=", p, flash ? " flash" : " plain"));
    AttentionArgs a;
    a.s = sh.s;
    a.b = sh.b;
    a.np = sh.np;
    a.hn = sh.hn;
    a.dtype = t;
    a.dropout = p;
    a.flash = flash;
    a.seed = 77;
    a.offset = 5;  // not a multiple of 4: rows start mid Philox block
    const std::int64_t nqkv = sh.s * sh.b * sh.np * 3 * sh.hn, nout = sh.s * sh.b * sh.np * sh.hn;
    ASSERT_EQ(gpu.attention_saved_bytes(a), cpu.attention_saved_bytes(a));
    const std::size_t nsaved = cpu.attention_saved_bytes(a) / 4;
    Twin qkv(cpu, gpu, t, random_vec(nqkv, 80, -2.0, 2.0));
    Twin out(cpu, gpu, t, nout);
    Twin saved(cpu, gpu, DType::F32, nsaved);
    cpu.attention_forward(a, qkv.c(), out.c(), saved.c());
    gpu.attention_forward(a, qkv.g(), out.g(), saved.g());
    // The plain GPU kernel rounds the probabilities to the activation type before the
    // context GEMM; saved data (probabilities or log-sum-exp) is fp32 from exact products.
    EXPECT_TRUE(out.close(tol_for(t, 2.0)));
    EXPECT_TRUE(saved.close(tol_for(t == DType::F32 ? DType::F32 : DType::F16, 2.0)));

    Twin dout(cpu, gpu, t, random_vec(nout, 81));
    Twin dqkv(cpu, gpu, t, nqkv);
    cpu.attention_backward(a, qkv.c(), out.c(), saved.c(), dout.c(), dqkv.c());
    gpu.attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), dqkv.g());
    EXPECT_TRUE(dqkv.close(tol_for(t, 4.0 * std::max(1.0, std::sqrt(sh.s / 16.0)))));
}

TEST_F(CudaAttention, PlainMatchesCpu) {
    const Shape shapes[] = {{1, 1, 1, 64}, {37, 2, 3, 64}, {128, 1, 2, 80}, {64, 2, 2, 96},
                            {33, 1, 2, 128}, {20, 3, 1, 16}};
    for (const Shape& sh : shapes)
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, false);
}

TEST_F(CudaAttention, FlashMatchesCpu) {
    // Partial blocks and tiles of every kernel: the tensor-core forward takes 128 queries
    // per block against 64-key tiles (head dims 64, 80) or 32-key tiles (96, 128); its
    // backward 64 keys per block against 64-query tiles (32 at head dim 128).
    const Shape shapes[] = {{1, 1, 1, 64}, {65, 2, 2, 64}, {130, 1, 2, 80}, {64, 2, 1, 96},
                            {150, 1, 1, 96}, {33, 1, 2, 128}, {20, 3, 1, 16}};
    for (const Shape& sh : shapes)
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, true);
}

// The same shapes on the CUDA-core kernels (the tensor-core ones' fallback), plus a
// sequence of several 64-key blocks with a partial last one at head dim 128.
TEST_F(CudaAttention, FlashSimpleKernelsMatchCpu) {
    set_flash_kernel(FlashKernel::Simple);
    const Shape shapes[] = {{65, 2, 2, 64}, {130, 1, 2, 80}, {33, 1, 2, 128}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16})
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, true);
    set_flash_kernel(FlashKernel::Auto);
}

TEST_F(CudaAttention, FlashTensorCoresSeveralKeyBlocks) {
    for (DType t : {DType::F16, DType::BF16})
        for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), Shape{200, 2, 2, 128}, t, p, true);
}

// Which calls take the tensor-core kernels: fp16/bf16, head dims 64/80/96/128, 16-byte
// aligned tensors (host logic: runs without a GPU).
TEST(CudaFlashSelection, TensorCoresWhereTheyApply) {
    alignas(16) static unsigned char buf[64];
    AttentionArgs a;
    a.s = 128;
    a.b = 1;
    a.np = 2;
    a.flash = true;
    for (std::int64_t hn : {64, 80, 96, 128})
        for (DType t : {DType::F16, DType::BF16}) {
            a.hn = hn;
            a.dtype = t;
            EXPECT_TRUE(flash_uses_tensor_cores(a, {buf, buf + 16})) << hn;
            EXPECT_FALSE(flash_uses_tensor_cores(a, {buf, buf + 2})) << "misaligned, " << hn;
        }
    a.dtype = DType::F16;
    a.hn = 112;
    EXPECT_FALSE(flash_uses_tensor_cores(a, {buf}));
    a.hn = 64;
    a.dtype = DType::F32;
    EXPECT_FALSE(flash_uses_tensor_cores(a, {buf}));
    a.dtype = DType::F16;
    set_flash_kernel(FlashKernel::Simple);
    EXPECT_FALSE(flash_uses_tensor_cores(a, {buf}));
    set_flash_kernel(FlashKernel::Auto);
    EXPECT_TRUE(flash_uses_tensor_cores(a, {buf}));
}

TEST_F(CudaAttention, LongSequence) {
    for (DType t : {DType::F16, DType::BF16})
        for (bool flash : {false, true}) run_attention(cpu(), gpu(), Shape{512, 1, 2, 64}, t, 0.1f, flash);
}

TEST_F(CudaAttention, FlashBeyondItsHeadDimIsRefused) {
    AttentionArgs a;
    a.s = 16;
    a.b = 1;
    a.np = 1;
    a.hn = 256;
    a.flash = true;
    EXPECT_THROW(gpu().attention_saved_bytes(a), DeviceError);
    Twin qkv(cpu(), gpu(), DType::F32, 16 * 3 * 256), out(cpu(), gpu(), DType::F32, 16 * 256);
    Twin saved(cpu(), gpu(), DType::F32, 16);
    EXPECT_THROW(gpu().attention_forward(a, qkv.g(), out.g(), saved.g()), DeviceError);
    EXPECT_THROW(gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), out.g(), qkv.g()), DeviceError);
}

}  // namespace
}  // namespace gpt::test
