// CUDA causal attention (plain and flash) vs the CPU kernel of the same kind: outputs,
// saved statistics and gradients, with and without dropout (identical Philox masks),
// Megatron's head dims, grouped K/V heads (1, 2, 4 query heads per group), and document
// masking (AttentionArgs::doc_start).
#include "backend/cuda/attention_flash.hpp"
#include "attention_bounds.hpp"
#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

using cuda::FlashKernel;
using cuda::flash_backward_uses_sm90;
using cuda::flash_backward_sm90_variant;
using cuda::flash_forward_uses_sm90;
using cuda::flash_forward_uses_sm90_ws;
using cuda::flash_uses_tensor_cores;
using cuda::set_flash_kernel;

class CudaAttention : public CudaVsCpu {};

struct Shape {
    std::int64_t s, b, np, hn;
    std::int64_t qpg = 1;  // query heads per K/V group
};

AttentionArgs attention_args(const Shape& sh, DType t, bool flash) {
    AttentionArgs a;
    a.s = sh.s;
    a.b = sh.b;
    a.np = sh.np;
    a.hn = sh.hn;
    a.heads_per_group = sh.qpg;
    a.dtype = t;
    a.flash = flash;
    return a;
}

// doc: document masking's doc_start ([b, s], doc_starts below), empty for plain causal.
void run_attention(Backend& cpu, Backend& gpu, const Shape& sh, DType t, float p, bool flash,
                   const std::vector<std::int32_t>& doc = {}) {
    SCOPED_TRACE(detail::concat("s=", sh.s, " b=", sh.b, " np=", sh.np, " hn=", sh.hn, " heads/group=", sh.qpg,
                                " ", dname(t), " dropout=", p, flash ? " flash" : " plain",
                                doc.empty() ? "" : " doc_start"));
    AttentionArgs a = attention_args(sh, t, flash);
    a.dropout = p;
    a.seed = 77;
    a.offset = 5;  // not a multiple of 4: rows start mid Philox block
    const std::int64_t nqkv = attention_qkv_elems(a), nout = sh.s * sh.b * sh.np * sh.hn;
    ASSERT_EQ(gpu.attention_saved_bytes(a), cpu.attention_saved_bytes(a));
    const std::size_t nsaved = cpu.attention_saved_bytes(a) / 4;
    const auto qkv_v = rounded(t, random_vec(nqkv, 80, -2.0, 2.0));
    const auto dout_v = rounded(t, random_vec(nout, 81));
    const AttnExact x = attention_exact(a, qkv_v, dout_v, {}, doc);
    // The same arguments but for doc_start, in each backend's memory.
    Ints docs(cpu, gpu, doc);
    AttentionArgs ac = a, ag = a;
    if (!doc.empty()) {
        ac.doc_start = docs.c();
        ag.doc_start = docs.g();
    }
    Twin qkv(cpu, gpu, t, qkv_v);
    Twin out(cpu, gpu, t, nout);
    Twin saved(cpu, gpu, DType::F32, nsaved);
    cpu.attention_forward(ac, qkv.c(), out.c(), saved.c());
    gpu.attention_forward(ag, qkv.g(), out.g(), saved.g());
    // Both backends against the fp64 result within the bounds of attention_bounds.hpp.
    EXPECT_TRUE(within_bound(out.gpu_vals(), x.out, x.out_bound)) << "GPU out";
    EXPECT_TRUE(within_bound(out.cpu_vals(), x.out, x.out_bound)) << "CPU out";
    const auto& sv = flash ? x.lse : x.probs;
    const auto& sb = flash ? x.lse_bound : x.probs_bound;
    EXPECT_TRUE(within_bound(saved.gpu_vals(), sv, sb)) << (flash ? "GPU lse" : "GPU probabilities");
    EXPECT_TRUE(within_bound(saved.cpu_vals(), sv, sb)) << (flash ? "CPU lse" : "CPU probabilities");

    Twin dout(cpu, gpu, t, dout_v);
    Twin dqkv(cpu, gpu, t, nqkv);
    cpu.attention_backward(ac, qkv.c(), out.c(), saved.c(), dout.c(), dqkv.c());
    gpu.attention_backward(ag, qkv.g(), out.g(), saved.g(), dout.g(), dqkv.g());
    EXPECT_TRUE(within_bound(dqkv.gpu_vals(), x.dqkv, x.dqkv_bound)) << "GPU dqkv";
    EXPECT_TRUE(within_bound(dqkv.cpu_vals(), x.dqkv, x.dqkv_bound)) << "CPU dqkv";
}

// Document masking's doc_start ([b, s]) for b samples of length s: each sample's documents
// by their first positions (those below s), different per sample. Against the kernels'
// tiles (forward: 128-query blocks, 64-key tiles at head dims 64/80 and 32 at 96/128, the
// CUDA-core kernels' 64-row blocks and 32-key tiles; backward: 64-key blocks, 64- or
// 32-query tiles), with s = 200:
//  - sample 0: one-token document at 5, boundaries inside tiles (5, 6, 140) and at a 64-key
//    tile's (64); rows from 140 skip keys 0-127 (two 64-key tiles, four 32-key ones), so the
//    first warp of the forward's second block (rows 128-159, starting at 64) takes key tile
//    64-127, which its rows from 140 mask whole (the online softmax's -inf case), and the
//    backward's block of keys 64-127 ends its walk before query tile 192; its block of keys
//    0-63 stops after query tile 0-63;
//  - sample 1: boundaries inside tiles (37, 190) and at a 128-query block's and a 64-key
//    tile's (128), a one-token document at 128: the forward's second block starts at key
//    128 and skips two tiles.
std::vector<std::int32_t> doc_starts(std::int64_t s, std::int64_t b) {
    const std::vector<std::int32_t> starts[] = {{0, 5, 6, 64, 140}, {0, 37, 128, 129, 190}, {0, 20, 100}};
    std::vector<std::int32_t> doc;
    for (std::int64_t bi = 0; bi < b; ++bi) {
        const auto& st = starts[bi % 3];
        std::int32_t cur = 0;
        for (std::int64_t i = 0; i < s; ++i) {
            for (std::int32_t x : st)
                if (x <= i) cur = x;
            doc.push_back(cur);
        }
    }
    return doc;
}

// The bounds can fail: what a kernel with a missing scale, the causal mask off by one, the
// softmax backward's rowsum term dropped or the dropout mask ignored computes is far outside
// them, in every type (the same fp64 code with the fault, so only the fault differs).
TEST_F(CudaAttention, BoundsRejectWrongResults) {
    const Shape sh{37, 2, 3, 64};
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        AttentionArgs a;
        a.s = sh.s; a.b = sh.b; a.np = sh.np; a.hn = sh.hn;
        a.dtype = t;
        a.dropout = 0.1f;
        a.seed = 77;
        a.offset = 5;
        const std::int64_t nqkv = sh.s * sh.b * sh.np * 3 * sh.hn, nout = sh.s * sh.b * sh.np * sh.hn;
        const auto qkv_v = rounded(t, random_vec(nqkv, 80, -2.0, 2.0));
        const auto dout_v = rounded(t, random_vec(nout, 81));
        const AttnExact x = attention_exact(a, qkv_v, dout_v);
        Twin qkv(cpu(), gpu(), t, qkv_v), out(cpu(), gpu(), t, nout), dout(cpu(), gpu(), t, dout_v);
        Twin saved(cpu(), gpu(), DType::F32, gpu().attention_saved_bytes(a) / 4), dqkv(cpu(), gpu(), t, nqkv);
        gpu().attention_forward(a, qkv.g(), out.g(), saved.g());
        gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), dqkv.g());
        ASSERT_TRUE(within_bound(out.gpu_vals(), x.out, x.out_bound));
        ASSERT_TRUE(within_bound(dqkv.gpu_vals(), x.dqkv, x.dqkv_bound));
        AttnFault no_scale, skip_diag, no_rowsum, no_dropout;
        no_scale.no_scale = true;
        skip_diag.skip_diagonal = true;
        no_rowsum.no_rowsum = true;
        no_dropout.no_dropout = true;
        for (auto [fault, what] : {std::pair{no_scale, "missing scale"}, {skip_diag, "causal mask off by one"},
                                   {no_dropout, "dropout mask ignored"}}) {
            const AttnExact w = attention_exact(a, qkv_v, dout_v, fault);
            EXPECT_FALSE(within_bound(w.out, x.out, x.out_bound)) << what << " (out)";
            EXPECT_FALSE(within_bound(w.dqkv, x.dqkv, x.dqkv_bound)) << what << " (dqkv)";
        }
        const AttnExact w = attention_exact(a, qkv_v, dout_v, no_rowsum);
        EXPECT_FALSE(within_bound(w.dqkv, x.dqkv, x.dqkv_bound)) << "softmax backward without its rowsum";
    }
}

// With grouped K/V: a kernel that reads the K/V of group h % groups instead of h / ratio,
// or keeps only the first head's share of a group's dK/dV, is far outside the bounds.
TEST_F(CudaAttention, GroupedBoundsRejectWrongResults) {
    const Shape sh{37, 2, 4, 64, 2};
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        AttentionArgs a;
        a.s = sh.s; a.b = sh.b; a.np = sh.np; a.hn = sh.hn; a.heads_per_group = sh.qpg;
        a.dtype = t;
        a.dropout = 0.1f;
        a.seed = 77;
        a.offset = 5;
        const auto qkv_v = rounded(t, random_vec(attention_qkv_elems(a), 80, -2.0, 2.0));
        const auto dout_v = rounded(t, random_vec(sh.s * sh.b * sh.np * sh.hn, 81));
        const AttnExact x = attention_exact(a, qkv_v, dout_v);
        AttnFault by_head, first_head;
        by_head.kv_of_head = true;
        first_head.first_head_dkv = true;
        const AttnExact w = attention_exact(a, qkv_v, dout_v, by_head);
        EXPECT_FALSE(within_bound(w.out, x.out, x.out_bound)) << "K/V indexed by head (out)";
        EXPECT_FALSE(within_bound(w.dqkv, x.dqkv, x.dqkv_bound)) << "K/V indexed by head (dqkv)";
        const AttnExact f = attention_exact(a, qkv_v, dout_v, first_head);
        EXPECT_FALSE(within_bound(f.dqkv, x.dqkv, x.dqkv_bound)) << "dK/dV of the first head only";
    }
}

TEST_F(CudaAttention, PlainMatchesCpu) {
    const Shape shapes[] = {{1, 1, 1, 64}, {37, 2, 3, 64}, {128, 1, 2, 80}, {64, 2, 2, 96},
                            {33, 1, 2, 128}, {20, 3, 1, 16}, {37, 2, 4, 64, 2}, {20, 2, 4, 16, 4}};
    for (const Shape& sh : shapes)
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, false);
}

TEST_F(CudaAttention, FlashMatchesCpu) {
    // Partial blocks and tiles of every kernel: the tensor-core forward takes 128 queries
    // per block against 64-key tiles (head dims 64, 80) or 32-key tiles (96, 128); its
    // backward 64 keys per block against 64-query tiles (32 at head dim 128).
    const Shape shapes[] = {{1, 1, 1, 64}, {65, 2, 2, 64}, {130, 1, 2, 80}, {64, 2, 1, 96},
                            {150, 1, 1, 96}, {33, 1, 2, 128}, {20, 3, 1, 16},
                            {70, 2, 4, 64, 2}, {65, 1, 4, 128, 4}, {20, 2, 4, 16, 2}};
    for (const Shape& sh : shapes)
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, true);
}

// The default kernels' two ways of drawing the dropout mask (GPT_CUDA_DROPOUT_DRAWS): words of
// keep bits (word, the default) and one Philox block per element or pair of elements
// (element, the kernels before) give O, lse, dQ, dK and dV equal to the bit: the same mask
// into the same arithmetic (FlashMatchesCpu holds the default to the CPU's mask). Both of the
// backward's word widths (head dims 64, 80, 96: 64-query tiles, a word a thread; 128: 32-query
// tiles, a half word), the forward's tiles of 64 keys (64, 80: two words a row) and 32 (96;
// 128 keeps pairs), partial tiles and blocks, several key blocks, grouped K/V, a Philox offset
// that is not a multiple of 4 (words straddle blocks).
TEST_F(CudaAttention, FlashDropoutWordDrawsEqualElementDraws) {
    const Shape shapes[] = {{130, 1, 2, 64}, {70, 1, 1, 80}, {100, 1, 2, 96}, {90, 1, 2, 128}, {70, 1, 4, 64, 2}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16}) {
            SCOPED_TRACE(detail::concat("s=", sh.s, " np=", sh.np, " hn=", sh.hn, " ", dname(t)));
            AttentionArgs a = attention_args(sh, t, true);
            a.dropout = 0.1f;
            a.seed = 81;
            a.offset = 3;
            const std::int64_t nqkv = attention_qkv_elems(a), nout = sh.s * sh.b * sh.np * sh.hn;
            Twin qkv(cpu(), gpu(), t, rounded(t, random_vec(nqkv, 86, -2.0, 2.0))), out(cpu(), gpu(), t, nout);
            Twin dout(cpu(), gpu(), t, rounded(t, random_vec(nout, 87)));
            Twin saved(cpu(), gpu(), DType::F32, gpu().attention_saved_bytes(a) / 4);
            Twin out_e(cpu(), gpu(), t, nout), saved_e(cpu(), gpu(), DType::F32, gpu().attention_saved_bytes(a) / 4);
            Twin by_word(cpu(), gpu(), t, nqkv), by_element(cpu(), gpu(), t, nqkv);
            ASSERT_TRUE(flash_uses_tensor_cores(a, {qkv.g(), out.g(), dout.g(), by_word.g()}));
            auto same = [](const std::vector<double>& x, const std::vector<double>& y, const char* what) {
                std::int64_t differ = 0, first = -1;
                for (std::size_t i = 0; i < x.size(); ++i)
                    if (x[i] != y[i] && differ++ == 0) first = static_cast<std::int64_t>(i);
                EXPECT_EQ(differ, 0) << what << " by word and by element differ in " << differ
                                     << " elements; first at " << first;
            };
            gpu().attention_forward(a, qkv.g(), out.g(), saved.g());
            cuda::set_flash_dropout_draws_per_element(true);
            gpu().attention_forward(a, qkv.g(), out_e.g(), saved_e.g());
            same(out.gpu_vals(), out_e.gpu_vals(), "O");
            same(saved.gpu_vals(), saved_e.gpu_vals(), "lse");
            EXPECT_NE(gpu().kernel_variants().find("dropout_draws=element"), std::string::npos) << gpu().kernel_variants();
            gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), by_element.g());
            cuda::set_flash_dropout_draws_per_element(false);
            EXPECT_NE(gpu().kernel_variants().find("dropout_draws=word"), std::string::npos) << gpu().kernel_variants();
            gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), by_word.g());
            same(by_word.gpu_vals(), by_element.gpu_vals(), "dqkv");
        }
}

// The same shapes on the CUDA-core kernels (the tensor-core ones' fallback), plus a
// sequence of several 64-key blocks with a partial last one at head dim 128.
TEST_F(CudaAttention, FlashSimpleKernelsMatchCpu) {
    set_flash_kernel(FlashKernel::Simple);
    const Shape shapes[] = {{65, 2, 2, 64}, {130, 1, 2, 80}, {33, 1, 2, 128}, {70, 2, 4, 64, 2},
                            {65, 1, 4, 80, 4}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16})
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, true);
    set_flash_kernel(FlashKernel::Auto);
}

TEST_F(CudaAttention, FlashTensorCoresSeveralKeyBlocks) {
    for (DType t : {DType::F16, DType::BF16})
        for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), Shape{200, 2, 2, 128}, t, p, true);
}

// Document masking's cases can fail: plain causal attention (a kernel that ignores
// doc_start) and a mask off by one key either way (a row that also sees the key before its
// document, or misses its document's first key) are far outside the bounds of the masked
// result, forward and backward, in every type.
TEST_F(CudaAttention, DocMaskBoundsRejectWrongMasks) {
    const Shape sh{200, 2, 1, 64};
    const std::vector<std::int32_t> doc = doc_starts(sh.s, sh.b);
    std::vector<std::int32_t> before = doc, after = doc;
    for (std::size_t e = 0; e < doc.size(); ++e) {
        if (doc[e] > 0) before[e] = doc[e] - 1;
        if (doc[e] < static_cast<std::int32_t>(e % sh.s)) after[e] = doc[e] + 1;
    }
    for (DType t : kAllTypes) {
        SCOPED_TRACE(dname(t));
        AttentionArgs a = attention_args(sh, t, true);
        a.dropout = 0.1f;
        a.seed = 77;
        a.offset = 5;
        const auto qkv_v = rounded(t, random_vec(attention_qkv_elems(a), 80, -2.0, 2.0));
        const auto dout_v = rounded(t, random_vec(sh.s * sh.b * sh.np * sh.hn, 81));
        const AttnExact x = attention_exact(a, qkv_v, dout_v, {}, doc);
        for (const auto& [wrong, what] : {std::pair{std::vector<std::int32_t>{}, "causal only"},
                                          std::pair{before, "one key before the document"},
                                          std::pair{after, "the document's first key missed"}}) {
            const AttnExact w = attention_exact(a, qkv_v, dout_v, {}, wrong);
            EXPECT_FALSE(within_bound(w.out, x.out, x.out_bound)) << what << " (out)";
            EXPECT_FALSE(within_bound(w.lse, x.lse, x.lse_bound)) << what << " (lse)";
            EXPECT_FALSE(within_bound(w.dqkv, x.dqkv, x.dqkv_bound)) << what << " (dqkv)";
        }
    }
}

// Document masking on the plain path (the softmax kernels mask, the GEMMs run whole):
// probabilities exactly 0 outside each row's document, several documents per sample,
// dropout's mask unchanged, grouped K/V.
TEST_F(CudaAttention, DocMaskPlainMatchesCpu) {
    for (const Shape& sh : {Shape{70, 2, 2, 64}, Shape{70, 2, 4, 16, 2}})
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, false, doc_starts(sh.s, sh.b));
}

// Document masking on the flash kernels: fp16/bf16 on tensor cores (the sm80 forward's
// 64-key tiles at head dim 64, 32-key tiles and the backward's 32-query tiles at 128, with
// grouped K/V), fp32 on the CUDA-core ones; with and without dropout (the same Philox mask
// as the CPU's: masking only zeroes probabilities). s not a multiple of any tile.
TEST_F(CudaAttention, DocMaskFlashMatchesCpu) {
    const Shape sh{200, 2, 2, 64};
    for (DType t : kAllTypes)
        for (float p : {0.0f, 0.1f}) run_attention(cpu(), gpu(), sh, t, p, true, doc_starts(sh.s, sh.b));
    const Shape grouped{150, 2, 2, 128, 2};
    run_attention(cpu(), gpu(), grouped, DType::F16, 0.1f, true, doc_starts(grouped.s, grouped.b));
    run_attention(cpu(), gpu(), grouped, DType::BF16, 0.0f, true, doc_starts(grouped.s, grouped.b));
}

// The CUDA-core flash kernels (GPT_CUDA_FLASH=simple) in fp16/bf16 with grouped K/V: their
// dK/dV kernel walks a group's heads and ends each walk at the first query tile that starts
// past the block's keys; and the tensor-core forward's other way of drawing the dropout mask
// (GPT_CUDA_DROPOUT_DRAWS=element: a Philox block a pair of keys; the backward draws words
// under the mask either way) at head dims 64 and 96 (32-key forward tiles).
TEST_F(CudaAttention, DocMaskFlashSimpleKernelsAndElementDraws) {
    const Shape grouped{200, 2, 4, 64, 2};
    const std::vector<std::int32_t> doc = doc_starts(grouped.s, grouped.b);
    set_flash_kernel(FlashKernel::Simple);
    run_attention(cpu(), gpu(), grouped, DType::F16, 0.1f, true, doc);
    run_attention(cpu(), gpu(), grouped, DType::BF16, 0.0f, true, doc);
    set_flash_kernel(FlashKernel::Auto);
    cuda::set_flash_dropout_draws_per_element(true);
    EXPECT_NE(gpu().kernel_variants().find("dropout_draws=element"), std::string::npos) << gpu().kernel_variants();
    run_attention(cpu(), gpu(), Shape{200, 2, 1, 64}, DType::F16, 0.1f, true, doc_starts(200, 2));
    run_attention(cpu(), gpu(), Shape{150, 2, 1, 96}, DType::BF16, 0.1f, true, doc_starts(150, 2));
    cuda::set_flash_dropout_draws_per_element(false);
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

// The sm_90 wgmma kernels for the span of a test: FlashKernel::Sm90Basic (the basic forward,
// attention_flash_sm90.cu, GPT_CUDA_FLASH=sm90-basic), Sm90Fwd (the warp-specialised forward,
// attention_flash_sm90_ws.cu, GPT_CUDA_FLASH=sm90-fwd) or Sm90 (that forward and the wgmma
// backward, attention_flash_sm90_bwd.cu, two warpgroups, GPT_CUDA_FLASH=sm90), Sm90Bwd1wg (the
// same with the backward's one-warpgroup variant, GPT_CUDA_FLASH=sm90-bwd-1wg) or
// Sm90BwdPlain (its unpipelined variant, GPT_CUDA_FLASH=sm90-bwd-plain); the other
// calls' backward is sm80's. On the emulator (which reports sm_80) through the library's test hook, on a GPU only
// where the device is sm_90 (elsewhere the test skips: the kernels would trap).
class Sm90Forward {
public:
    explicit Sm90Forward(FlashKernel k) : kernel_(k) {
#if defined(GPT_CUDA_EMU)
        cuda::flash_assume_sm90_device_for_tests(true);
        ok_ = true;
#else
        ok_ = cuda::flash_device_is_sm90();
#endif
        set_flash_kernel(k);
    }
    ~Sm90Forward() {
        set_flash_kernel(FlashKernel::Auto);
        cuda::flash_assume_sm90_device_for_tests(false);
    }
    Sm90Forward(const Sm90Forward&) = delete;
    Sm90Forward& operator=(const Sm90Forward&) = delete;
    bool ok() const { return ok_; }
    FlashKernel kernel() const { return kernel_; }

private:
    FlashKernel kernel_;
    bool ok_ = false;
};

// The five sm90 backward choices: their kernel_variants names and variants.
const char* sm90_bwd_name(FlashKernel k) {
    return k == FlashKernel::Sm90           ? "sm90"
           : k == FlashKernel::Sm90DqAtomic ? "sm90-dq-atomic"
           : k == FlashKernel::Sm90BwdWs    ? "sm90-bwd-ws"
           : k == FlashKernel::Sm90Bwd1wg   ? "sm90-bwd-1wg"
                                            : "sm90-bwd-plain";
}
cuda::Sm90Bwd sm90_bwd_variant(FlashKernel k) {
    return k == FlashKernel::Sm90           ? cuda::Sm90Bwd::TwoWarpgroups
           : k == FlashKernel::Sm90DqAtomic ? cuda::Sm90Bwd::TwoWarpgroupsAtomicDq
           : k == FlashKernel::Sm90BwdWs    ? cuda::Sm90Bwd::WarpSpecialized
           : k == FlashKernel::Sm90Bwd1wg   ? cuda::Sm90Bwd::OneWarpgroup
                                            : cuda::Sm90Bwd::Plain;
}

// O and lse of an sm90 forward against the sm80 forward's on the same inputs (with dropout p:
// the same Philox mask): each is within its bound of the fp64 result, so they differ by at
// most twice that.
void sm90_matches_sm80(Backend& cpu, Backend& gpu, const Sm90Forward& on, const Shape& sh, DType t, float p = 0.0f) {
    SCOPED_TRACE(detail::concat("s=", sh.s, " np=", sh.np, " hn=", sh.hn, " ", dname(t), " dropout=", p));
    AttentionArgs a = attention_args(sh, t, true);
    a.dropout = p;
    a.seed = 78;
    a.offset = 7;
    const std::int64_t nqkv = attention_qkv_elems(a), nout = sh.s * sh.b * sh.np * sh.hn;
    const auto qkv_v = rounded(t, random_vec(nqkv, 82, -2.0, 2.0));
    const AttnExact x = attention_exact(a, qkv_v, rounded(t, random_vec(nout, 83)));
    Twin qkv(cpu, gpu, t, qkv_v), o80(cpu, gpu, t, nout), o90(cpu, gpu, t, nout);
    const std::size_t nsaved = gpu.attention_saved_bytes(a) / 4;
    Twin l80(cpu, gpu, DType::F32, nsaved), l90(cpu, gpu, DType::F32, nsaved);
    set_flash_kernel(FlashKernel::Auto);
    gpu.attention_forward(a, qkv.g(), o80.g(), l80.g());
    set_flash_kernel(on.kernel());
    Twin probe(cpu, gpu, t, 8);
    EXPECT_TRUE(flash_forward_uses_sm90(a, {probe.g()}));
    gpu.attention_forward(a, qkv.g(), o90.g(), l90.g());
    auto twice = [](std::vector<double> b) {
        for (double& e : b) e *= 2;
        return b;
    };
    EXPECT_TRUE(within_bound(o90.gpu_vals(), o80.gpu_vals(), twice(x.out_bound))) << "out";
    EXPECT_TRUE(within_bound(l90.gpu_vals(), l80.gpu_vals(), twice(x.lse_bound))) << "lse";
}

// The basic forward: 64 query rows per block against 64-key tiles: s below one block,
// exactly one, partial last blocks, several blocks, batch*heads > 1, grouped K/V; forward and
// the sm80 backward from the sm90 forward's lse, all against the fp64 bounds (the same
// arithmetic class as the sm80 kernel: fp32 accumulation, 16-bit P; its 64-key tiles
// rescale less often than the bound's 32-key count).
TEST_F(CudaAttention, FlashSm90ForwardMatchesCpu) {
    Sm90Forward on(FlashKernel::Sm90Basic);
    if (!on.ok()) GTEST_SKIP() << "the sm90 forward needs an sm_90 GPU (or the emulator)";
    EXPECT_NE(gpu().kernel_variants().find("attention=flash-sm90basic-fwd"), std::string::npos)
        << gpu().kernel_variants();
    const Shape shapes[] = {{1, 1, 1, 64}, {64, 1, 2, 128}, {70, 2, 4, 64, 2}, {130, 1, 2, 64}, {33, 1, 2, 128}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16}) {
            Twin probe(cpu(), gpu(), t, 8);
            ASSERT_TRUE(flash_forward_uses_sm90(attention_args(sh, t, true), {probe.g()})) << "hn " << sh.hn;
            ASSERT_FALSE(flash_forward_uses_sm90_ws(attention_args(sh, t, true), {probe.g()})) << "hn " << sh.hn;
            run_attention(cpu(), gpu(), sh, t, 0.0f, true);
        }
}

TEST_F(CudaAttention, FlashSm90ForwardMatchesSm80) {
    Sm90Forward on(FlashKernel::Sm90Basic);
    if (!on.ok()) GTEST_SKIP() << "the sm90 forward needs an sm_90 GPU (or the emulator)";
    for (const Shape& sh : {Shape{65, 2, 2, 64}, Shape{100, 1, 2, 128}})
        for (DType t : {DType::F16, DType::BF16}) sm90_matches_sm80(cpu(), gpu(), on, sh, t);
}

// The warp-specialised forward: 128 query rows per block (two consumer warpgroups of 64)
// against 128-key tiles through the two-stage TMA ring. Shapes: below one block, one block
// with a partial tile (the second consumer's rows past s, its Q box wholly outside the
// tensor), several blocks with a partial last one (more tiles than stages, so every stage is
// refilled after its empty barrier), batch*heads > 1, grouped K/V; head dims 64, 96 (64-byte
// swizzle), 128. Forward and the sm80 backward from its lse against the fp64 bounds (the
// same arithmetic class as the sm80 kernel; 128-key tiles rescale less often than the
// bound's 32-key count).
TEST_F(CudaAttention, FlashSm90WsForwardMatchesCpu) {
    Sm90Forward on(FlashKernel::Sm90Fwd);
    if (!on.ok()) GTEST_SKIP() << "the sm90 forward needs an sm_90 GPU (or the emulator)";
    EXPECT_NE(gpu().kernel_variants().find("attention=flash-sm90-fwd "), std::string::npos)
        << gpu().kernel_variants();
    const Shape shapes[] = {{1, 1, 1, 64}, {60, 1, 2, 96}, {300, 1, 1, 64}, {200, 1, 2, 96},
                            {70, 2, 4, 64, 2}, {270, 1, 1, 128}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16}) {
            Twin probe(cpu(), gpu(), t, 8);
            ASSERT_TRUE(flash_forward_uses_sm90_ws(attention_args(sh, t, true), {probe.g()})) << "hn " << sh.hn;
            run_attention(cpu(), gpu(), sh, t, 0.0f, true);
        }
}

TEST_F(CudaAttention, FlashSm90WsForwardMatchesSm80) {
    Sm90Forward on(FlashKernel::Sm90Fwd);
    if (!on.ok()) GTEST_SKIP() << "the sm90 forward needs an sm_90 GPU (or the emulator)";
    for (const Shape& sh : {Shape{65, 2, 2, 64}, Shape{150, 1, 2, 96}, Shape{260, 1, 1, 128}})
        for (DType t : {DType::F16, DType::BF16}) sm90_matches_sm80(cpu(), gpu(), on, sh, t);
}

// The sm_90 wgmma backward after the sm90 forward: 128 (two warpgroups) or 64 keys per block
// against 64-query tiles from the diagonal on, so partial last blocks and tiles (s 100, 150,
// 190), one tile (s 33), whole tiles only (s 128), several key blocks, a block whose second
// warpgroup's keys all lie past s (s 33, 130, 190), grouped K/V (query heads of a group
// summed into one dK/dV); dQ, dK, dV against the fp64 bounds (the sm80 backward's arithmetic
// class: fp32 accumulation, P and dS rounded to 16 bits). The two-warpgroup variant
// (GPT_CUDA_FLASH=sm90) on every shape: more steps than its two buffers (three query tiles at
// s 150 and 190, head dims 128 and 64; several query heads of a group), the partial last tile
// zero-filled by cp.async, dQ by bulk reductions into the tiled scratch (s 33, 70, 100, 130,
// 150, 190: a partial last tile, several tiles and query heads); the one-warpgroup
// (sm90-bwd-1wg) and unpipelined (sm90-bwd-plain) ones on the marked shapes (three tiles at
// head dim 128, grouped K/V at 64; emulator time: FlashSm90BackwardMatchesSm80 runs them and
// the atomic-dQ twin, sm90-dq-atomic, on every case, head dim 96 and dropout included).
TEST_F(CudaAttention, FlashSm90BackwardMatchesCpu) {
    Sm90Forward on(FlashKernel::Sm90);
    if (!on.ok()) GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU (or the emulator)";
    EXPECT_NE(gpu().kernel_variants().find("attention=flash-sm90 "), std::string::npos) << gpu().kernel_variants();
    const std::pair<Shape, bool> shapes[] = {{{100, 1, 2, 64}, false},   {{150, 2, 1, 128}, true},
                                             {{190, 1, 2, 64}, false},   {{33, 1, 2, 128}, false},
                                             {{128, 2, 1, 64}, false},   {{130, 1, 4, 64, 2}, true},
                                             {{100, 1, 2, 96}, false},   {{70, 1, 4, 96, 2}, false}};
    for (const auto& [sh, others_too] : shapes)
        for (FlashKernel k : {FlashKernel::Sm90, FlashKernel::Sm90Bwd1wg, FlashKernel::Sm90BwdPlain}) {
            if (k != FlashKernel::Sm90 && !others_too) continue;
            SCOPED_TRACE(sm90_bwd_name(k));
            set_flash_kernel(k);
            EXPECT_EQ(flash_backward_sm90_variant(), sm90_bwd_variant(k));
            EXPECT_NE(gpu().kernel_variants().find(std::string("attention=flash-") + sm90_bwd_name(k) + " "),
                      std::string::npos)
                << gpu().kernel_variants();
            for (DType t : {DType::F16, DType::BF16}) {
                Twin probe(cpu(), gpu(), t, 8);
                ASSERT_TRUE(flash_backward_uses_sm90(attention_args(sh, t, true), {probe.g()})) << "hn " << sh.hn;
                run_attention(cpu(), gpu(), sh, t, 0.0f, true);
            }
        }
}

// dQ, dK, dV of the five sm90 backwards (two warpgroups with bulk or atomic dQ, the same
// warp-specialised, one, unpipelined) against the sm80 backward's on the same qkv, O, lse and
// dO: each is within its bound of the fp64 result, so they differ by at most twice that. And
// dK, dV of the two-warpgroup variant equal the atomic-dQ twin's and the one-warpgroup
// variant's to the bit: each warpgroup runs the same products in the same order on its 64
// keys (only dQ's fp32 partials are grouped or added differently), so a warpgroup reading
// the other's K or V tile, or a key offset, shows here even where it stays within the
// bounds. The warp-specialised variant equals it in dQ too (the same partials, reduced in
// the same order): only its loads and barriers differ, so a tile in the wrong layout or
// buffer, a statistic of the wrong step or a buffer refilled too early shows to the bit.
TEST_F(CudaAttention, FlashSm90BackwardMatchesSm80) {
    Sm90Forward on(FlashKernel::Sm90);
    if (!on.ok()) GTEST_SKIP() << "the sm90 backward needs an sm_90 GPU (or the emulator)";
    // With dropout on the same mask too.
    const std::pair<Shape, float> cases[] = {{{130, 1, 2, 64}, 0.0f}, {{100, 1, 2, 128}, 0.0f}, {{150, 1, 2, 96}, 0.0f},
                                             {{150, 1, 2, 64}, 0.1f}, {{70, 1, 2, 96}, 0.1f}, {{70, 1, 1, 128}, 0.1f}};
    for (const auto& [sh, p] : cases)
        for (DType t : {DType::F16, DType::BF16}) {
            SCOPED_TRACE(detail::concat("s=", sh.s, " hn=", sh.hn, " ", dname(t), " dropout=", p));
            AttentionArgs a = attention_args(sh, t, true);
            a.dropout = p;
            a.seed = 79;
            a.offset = 3;
            const std::int64_t nqkv = attention_qkv_elems(a), nout = sh.s * sh.b * sh.np * sh.hn;
            const auto qkv_v = rounded(t, random_vec(nqkv, 84, -2.0, 2.0));
            const auto dout_v = rounded(t, random_vec(nout, 85));
            const AttnExact x = attention_exact(a, qkv_v, dout_v);
            Twin qkv(cpu(), gpu(), t, qkv_v), out(cpu(), gpu(), t, nout), dout(cpu(), gpu(), t, dout_v);
            Twin saved(cpu(), gpu(), DType::F32, gpu().attention_saved_bytes(a) / 4);
            Twin d80(cpu(), gpu(), t, nqkv), d90(cpu(), gpu(), t, nqkv);
            gpu().attention_forward(a, qkv.g(), out.g(), saved.g());
            set_flash_kernel(FlashKernel::Sm90Fwd);
            ASSERT_FALSE(flash_backward_uses_sm90(a, {qkv.g()}));
            gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), d80.g());
            auto twice = [](std::vector<double> b) {
                for (double& e : b) e *= 2;
                return b;
            };
            std::vector<double> two_wg;
            for (FlashKernel k : {FlashKernel::Sm90, FlashKernel::Sm90DqAtomic, FlashKernel::Sm90BwdWs,
                                  FlashKernel::Sm90Bwd1wg, FlashKernel::Sm90BwdPlain}) {
                set_flash_kernel(k);
                ASSERT_TRUE(flash_backward_uses_sm90(a, {qkv.g()}));
                ASSERT_EQ(flash_backward_sm90_variant(), sm90_bwd_variant(k));
                gpu().attention_backward(a, qkv.g(), out.g(), saved.g(), dout.g(), d90.g());
                const std::vector<double> got = d90.gpu_vals();
                EXPECT_TRUE(within_bound(got, d80.gpu_vals(), twice(x.dqkv_bound))) << "dqkv, " << sm90_bwd_name(k);
                if (k == FlashKernel::Sm90) two_wg = got;
                if (k == FlashKernel::Sm90BwdWs) {
                    std::int64_t differ = 0, first = -1;
                    for (std::int64_t e = 0; e < nqkv; ++e)
                        if (got[e] != two_wg[e] && differ++ == 0) first = e;
                    EXPECT_EQ(differ, 0) << "dqkv of sm90-bwd-ws and sm90 differ in " << differ
                                         << " elements; first at " << first;
                }
                if (k == FlashKernel::Sm90 || k == FlashKernel::Sm90BwdPlain || k == FlashKernel::Sm90BwdWs) continue;
                // dqkv's rows: per K/V group, qpg query heads, then K, then V, hn each.
                const std::int64_t chunk = (sh.qpg + 2) * sh.hn;
                std::int64_t differ = 0, first = -1;
                for (std::int64_t e = 0; e < nqkv; ++e)
                    if (e % chunk >= sh.qpg * sh.hn && got[e] != two_wg[e] && differ++ == 0) first = e;
                EXPECT_EQ(differ, 0) << "dK, dV of " << sm90_bwd_name(k) << " and sm90 differ in " << differ
                                     << " elements; first at " << first;
            }
        }
}

// Attention dropout (0.1, Megatron's GPT configs) on the sm90 kernels (GPT_CUDA_FLASH=sm90):
// the warp-specialised forward and the sm90 backward at head dims 64, 96, 128 against the
// fp64 bounds with the CPU's Philox mask, so a wrong mask index, l summing the dropped values
// or a missing 1 / (1 - p) is far outside them. Shapes: partial tiles and blocks, several of each, grouped K/V.
TEST_F(CudaAttention, FlashSm90DropoutMatchesCpu) {
    Sm90Forward on(FlashKernel::Sm90);
    if (!on.ok()) GTEST_SKIP() << "the sm90 kernels need an sm_90 GPU (or the emulator)";
    const Shape shapes[] = {{150, 1, 2, 64}, {100, 1, 2, 96}, {70, 1, 4, 64, 2}, {140, 1, 1, 128}};
    for (const Shape& sh : shapes)
        for (DType t : {DType::F16, DType::BF16}) {
            Twin probe(cpu(), gpu(), t, 8);
            AttentionArgs a = attention_args(sh, t, true);
            a.dropout = 0.1f;
            ASSERT_TRUE(flash_forward_uses_sm90_ws(a, {probe.g()})) << "hn " << sh.hn;
            ASSERT_TRUE(flash_backward_uses_sm90(a, {probe.g()})) << "hn " << sh.hn;
            run_attention(cpu(), gpu(), sh, t, 0.1f, true);
        }
}

// The warp-specialised forward with dropout against sm80's forward on the same inputs and mask.
TEST_F(CudaAttention, FlashSm90WsDropoutMatchesSm80) {
    Sm90Forward on(FlashKernel::Sm90Fwd);
    if (!on.ok()) GTEST_SKIP() << "the sm90 forward needs an sm_90 GPU (or the emulator)";
    for (const Shape& sh : {Shape{130, 1, 2, 64}, Shape{100, 1, 2, 96}, Shape{140, 1, 1, 128}})
        for (DType t : {DType::F16, DType::BF16}) sm90_matches_sm80(cpu(), gpu(), on, sh, t, 0.1f);
}

// Which backwards take the sm90 kernel (host logic): only with FlashKernel::Sm90 (its
// two-warpgroup variant), Sm90Bwd1wg or Sm90BwdPlain (not Sm90Fwd or Sm90Basic,
// whose forward alone is sm90's) on an sm_90 device, head dims 64, 96 and 128, dropout too,
// fp16/bf16, aligned; grouped K/V included.
TEST(CudaFlashSelection, Sm90BackwardWhereItApplies) {
    alignas(16) static unsigned char buf[64];
    AttentionArgs a = attention_args(Shape{128, 1, 2, 64}, DType::F16, true);
    cuda::flash_assume_sm90_device_for_tests(true);
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << "Auto";
    set_flash_kernel(FlashKernel::Sm90Fwd);
    EXPECT_TRUE(flash_forward_uses_sm90(a, {buf})) << "Sm90Fwd";
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << "Sm90Fwd";
    set_flash_kernel(FlashKernel::Sm90Basic);
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << "Sm90Basic";
    set_flash_kernel(FlashKernel::Simple);
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << "Simple";
    // sm90-dq-atomic, sm90-bwd-ws, sm90-bwd-1wg and sm90-bwd-plain: the warp-specialised
    // forward and the backward's atomic-dQ, warp-specialised, one-warpgroup and unpipelined
    // variants.
    for (FlashKernel k :
         {FlashKernel::Sm90DqAtomic, FlashKernel::Sm90BwdWs, FlashKernel::Sm90Bwd1wg, FlashKernel::Sm90BwdPlain}) {
        SCOPED_TRACE(sm90_bwd_name(k));
        set_flash_kernel(k);
        EXPECT_TRUE(flash_forward_uses_sm90_ws(a, {buf}));
        EXPECT_TRUE(flash_backward_uses_sm90(a, {buf}));
        EXPECT_EQ(flash_backward_sm90_variant(), sm90_bwd_variant(k));
        EXPECT_FALSE(flash_backward_uses_sm90(a, {buf, buf + 2})) << "misaligned";
    }
    set_flash_kernel(FlashKernel::Sm90);
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf}));
    EXPECT_EQ(flash_backward_sm90_variant(), cuda::Sm90Bwd::TwoWarpgroups);
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf, buf + 2})) << "misaligned";
    a.dropout = 0.1f;
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf})) << "dropout, hn 64";
    a.hn = 96;
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf})) << "dropout, hn 96";
    a.hn = 128;
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf})) << "dropout, hn 128";
    a.hn = 64;
    a.dropout = 0.0f;
    a.hn = 80;
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << 80;
    a.hn = 96;
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf})) << 96;
    a.hn = 128;
    a.dtype = DType::BF16;
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf}));
    a = attention_args(Shape{128, 1, 4, 64, 2}, DType::F16, true);
    EXPECT_TRUE(flash_backward_uses_sm90(a, {buf})) << "grouped K/V";
    a.dtype = DType::F32;
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf}));
    cuda::flash_assume_sm90_device_for_tests(false);
    a.dtype = DType::F16;
#if defined(GPT_CUDA_EMU)  // the emulated device is sm_80
    EXPECT_FALSE(flash_backward_uses_sm90(a, {buf})) << "not an sm_90 device";
#endif
    set_flash_kernel(FlashKernel::Auto);
}

// Which forwards take an sm90 kernel (host logic): only with FlashKernel::Sm90, Sm90Fwd or Sm90BwdPlain (the
// warp-specialised one: head dims 64, 96, 128, dropout too) or Sm90Basic (the basic one: 64,
// 128, no dropout) on an sm_90 device, fp16/bf16, aligned.
TEST(CudaFlashSelection, Sm90ForwardWhereItApplies) {
    alignas(16) static unsigned char buf[64];
    AttentionArgs a = attention_args(Shape{128, 1, 2, 64}, DType::F16, true);
    cuda::flash_assume_sm90_device_for_tests(true);
    EXPECT_FALSE(flash_forward_uses_sm90(a, {buf})) << "Auto";
    EXPECT_FALSE(flash_forward_uses_sm90_ws(a, {buf})) << "Auto";
    for (FlashKernel k : {FlashKernel::Sm90, FlashKernel::Sm90Fwd, FlashKernel::Sm90Basic, FlashKernel::Sm90Bwd1wg,
                          FlashKernel::Sm90BwdPlain, FlashKernel::Sm90DqAtomic, FlashKernel::Sm90BwdWs}) {
        const bool ws = k != FlashKernel::Sm90Basic;
        SCOPED_TRACE(k == FlashKernel::Sm90           ? "sm90"
                     : k == FlashKernel::Sm90DqAtomic ? "sm90-dq-atomic"
                     : k == FlashKernel::Sm90BwdWs    ? "sm90-bwd-ws"
                     : k == FlashKernel::Sm90Bwd1wg   ? "sm90-bwd-1wg"
                     : k == FlashKernel::Sm90BwdPlain ? "sm90-bwd-plain"
                     : ws                             ? "sm90-fwd"
                                                      : "sm90-basic");
        set_flash_kernel(k);
        a.hn = 64;
        a.dtype = DType::F16;
        EXPECT_TRUE(flash_forward_uses_sm90(a, {buf}));
        EXPECT_EQ(flash_forward_uses_sm90_ws(a, {buf}), ws);
        EXPECT_FALSE(flash_forward_uses_sm90(a, {buf + 2})) << "misaligned";
        EXPECT_FALSE(flash_forward_uses_sm90_ws(a, {buf + 2})) << "misaligned";
        a.dropout = 0.1f;  // the warp-specialised forward has dropout, the basic one not
        EXPECT_EQ(flash_forward_uses_sm90(a, {buf}), ws) << "dropout";
        EXPECT_EQ(flash_forward_uses_sm90_ws(a, {buf}), ws) << "dropout";
        a.dropout = 0.0f;
        a.hn = 80;
        EXPECT_FALSE(flash_forward_uses_sm90(a, {buf})) << 80;
        a.hn = 96;
        EXPECT_EQ(flash_forward_uses_sm90(a, {buf}), ws) << 96;
        EXPECT_EQ(flash_forward_uses_sm90_ws(a, {buf}), ws) << 96;
        a.hn = 128;
        a.dtype = DType::BF16;
        EXPECT_TRUE(flash_forward_uses_sm90(a, {buf}));
        EXPECT_EQ(flash_forward_uses_sm90_ws(a, {buf}), ws);
        a.dtype = DType::F32;
        EXPECT_FALSE(flash_forward_uses_sm90(a, {buf}));
        EXPECT_FALSE(flash_forward_uses_sm90_ws(a, {buf}));
    }
    set_flash_kernel(FlashKernel::Sm90);
    a.dtype = DType::F16;
    a.hn = 64;
    cuda::flash_assume_sm90_device_for_tests(false);
#if defined(GPT_CUDA_EMU)
    // The emulator reports sm_80: without the hook neither sm90 kernel is chosen.
    EXPECT_FALSE(flash_forward_uses_sm90(a, {buf})) << "not an sm_90 device";
    EXPECT_FALSE(flash_forward_uses_sm90_ws(a, {buf})) << "not an sm_90 device";
#endif
    set_flash_kernel(FlashKernel::Auto);
}

// The sm_90 kernels have no document masking: under every GPT_CUDA_FLASH=sm90* choice, on an
// sm_90 device (the test hook), a call with doc_start selects none of them and runs sm80's
// forward and backward, which match the CPU's (a call that reached an sm_90 kernel would
// be refused by its launcher; one that ignored the mask would be outside the bounds).
TEST_F(CudaAttention, DocMaskRunsSm80UnderSm90) {
    Sm90Forward on(FlashKernel::Sm90);
    if (!on.ok()) GTEST_SKIP() << "the sm90 kernels need an sm_90 GPU (or the emulator)";
    const Shape sh{130, 2, 2, 64};
    const std::vector<std::int32_t> doc = doc_starts(sh.s, sh.b);
    Twin probe(cpu(), gpu(), DType::F16, 8);
    AttentionArgs a = attention_args(sh, DType::F16, true);
    ASSERT_TRUE(flash_forward_uses_sm90_ws(a, {probe.g()}));
    ASSERT_TRUE(flash_backward_uses_sm90(a, {probe.g()}));
    a.doc_start = static_cast<const std::int32_t*>(probe.g());
    ASSERT_FALSE(flash_forward_uses_sm90(a, {probe.g()}));
    ASSERT_FALSE(flash_forward_uses_sm90_ws(a, {probe.g()}));
    ASSERT_FALSE(flash_backward_uses_sm90(a, {probe.g()}));
    run_attention(cpu(), gpu(), sh, DType::F16, 0.0f, true, doc);
}

// Which calls take an sm_90 kernel with document masking (host logic): none, under every
// sm90 choice (GPT_CUDA_FLASH=sm90, sm90-fwd, sm90-basic and the backward variants), with
// and without dropout, on an sm_90 device; the same calls without doc_start take them.
TEST(CudaFlashSelection, DocMaskNeverSelectsSm90) {
    alignas(16) static unsigned char buf[64];
    cuda::flash_assume_sm90_device_for_tests(true);
    for (FlashKernel k : {FlashKernel::Sm90, FlashKernel::Sm90Fwd, FlashKernel::Sm90Basic, FlashKernel::Sm90Bwd1wg,
                          FlashKernel::Sm90BwdPlain, FlashKernel::Sm90DqAtomic, FlashKernel::Sm90BwdWs})
        for (float p : {0.0f, 0.1f}) {
            set_flash_kernel(k);
            const bool sm90_bwd = k != FlashKernel::Sm90Fwd && k != FlashKernel::Sm90Basic;
            const bool sm90_fwd = k != FlashKernel::Sm90Basic || p == 0.0f;
            SCOPED_TRACE(detail::concat("kernel ", static_cast<int>(k), " dropout ", p));
            AttentionArgs a = attention_args(Shape{128, 2, 2, 64}, DType::F16, true);
            a.dropout = p;
            EXPECT_EQ(flash_forward_uses_sm90(a, {buf}), sm90_fwd);
            EXPECT_EQ(flash_backward_uses_sm90(a, {buf}), sm90_bwd);
            a.doc_start = reinterpret_cast<const std::int32_t*>(buf);
            EXPECT_FALSE(flash_forward_uses_sm90(a, {buf}));
            EXPECT_FALSE(flash_forward_uses_sm90_ws(a, {buf}));
            EXPECT_FALSE(flash_backward_uses_sm90(a, {buf}));
            EXPECT_TRUE(flash_uses_tensor_cores(a, {buf})) << "the sm80 kernels run it";
        }
    set_flash_kernel(FlashKernel::Auto);
    cuda::flash_assume_sm90_device_for_tests(false);
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
