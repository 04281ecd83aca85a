// The whole model on the GPU: 5 fp16/bf16 training iterations on the CUDA backend follow the
// CPU backend's losses within half-precision tolerance (plain and flash attention; the GPT-2
// and the Llama-style model), and 2-rank runs follow the 1-rank GPU run: sharing one GPU
// (--distributed-backend mpi, host-staged communication) and with a GPU each (nccl). Skips
// without a GPU.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "adam_bound.hpp"
#include "parallel_match.hpp"
#include "trainer_test_util.hpp"
#include "core/device_info.hpp"
#ifdef GPT_CUDA_EMU
#include <cublasLt.h>

#include "gpt_emu/matmul_log.hpp"
#endif

namespace gpt::train {
namespace {

// Head dim 64 (the flash kernels' smallest tile), fp16 by default.
Config gpu_config(bool flash, bool bf16 = false) {
    Config c = test::tiny::wide(500);
    c.training.micro_batch_size = 2;
    c.training.global_batch_size = 4;
    c.training.train_iters = 5;
    c.optimizer.lr_warmup_iters = 1;
    c.optimizer.lr = 1e-3;
    c.training.fp16 = !bf16;
    c.training.bf16 = bf16;
    c.training.initial_loss_scale = 4096;
    c.parallel.use_flash_attn = flash;
    c.parallel.distributed_backend = DistributedBackend::Mpi;
    return c;
}

// False (and the skip counted, see test_env.hpp) without a GPU.
bool have_gpu() {
    if (visible_gpu_count() > 0) return true;
    test::note_hardware_skip("no GPU visible");
    return false;
}

void expect_close(const test::Run& ref, const test::Run& got, double rel, const std::string& what) {
    ASSERT_EQ(got.records.size(), ref.records.size()) << what;
    for (std::size_t i = 0; i < ref.records.size(); ++i) {
        const auto &a = ref.records[i], &b = got.records[i];
        ASSERT_TRUE(std::isfinite(b.lm_loss)) << what << " iteration " << i + 1;
        EXPECT_NEAR(b.lm_loss, a.lm_loss, rel * a.lm_loss) << what << " iteration " << i + 1;
        EXPECT_EQ(b.skipped, a.skipped) << what << " iteration " << i + 1;
        if (!a.skipped) {
            EXPECT_NEAR(b.grad_norm, a.grad_norm, 5 * rel * a.grad_norm) << what << " iteration " << i + 1;
        }
    }
    EXPECT_NEAR(got.eval_loss, ref.eval_loss, rel * ref.eval_loss) << what;
}

// The final parameters of the two backends' runs, element by element. Derivation:
//  - AdamW's step is bounded: |u_t| <= C_t (adam_bound.hpp: adam_step_bound).
//  - If every gradient element of the two runs differs by at most delta relative, mh differs
//    by at most delta C_t sqrt(vh) and sqrt(vh) by delta sqrt(vh): u_t by 2 delta C_t.
//  - delta: both backends round the same activations and gradients to the 16-bit type (unit
//    roundoff u16) from fp32 values that differ in summation order and exp/log ulps, so each
//    rounding can land one ulp (2 u16) apart. Along a layer's gradient chain: 10 rounded
//    tensors forward (layernorm out, qkv, context, projection, residual, layernorm out,
//    fc1, gelu, fc2, residual) and their 10 gradients, plus the embedding and logits:
//    delta = 2 (20 L + 4) u16 (L = 4: 0.082 fp16, 0.66 bf16).
//    This relative model is the bound's one assumption, not a proof: an element whose gradient
//    is a sum that nearly cancels (over the batch's positions) carries the terms' rounding, not
//    delta of its own size. Seen on the emulator at L = 2 (tried for CI time): one fp16 flash
//    position-embedding element of 32768 at 1.43 of the bound. At L = 4 the worst element is
//    at 0.84 (CPU emulator) - a sound per-element bound needs the terms' magnitudes
//    (|du_t| <= (1 + C_t) e / (sqrt(vh) + eps) for an absolute gradient error e): issue #33.
//  - The parameters differ by the sum of lr_t |du_t| <= sum_t lr_t 2 delta C_t (weight
//    decay's lr wd |dp| is second order); the differences of the parameters feed back into
//    the gradients by far less than delta over 5 steps (|dp| / |p| below 1e-2 here).
//  - The key bias has an exactly zero gradient (softmax ignores a shift shared by all keys):
//    its steps are round-off divided by round-off, any sign, so there only |u_t| <= C_t holds:
//    the bound is sum_t lr_t 2 C_t.
//  - The parameters compared are the model's 16-bit copies: each backend rounds its fp32 main
//    parameter to the 16-bit type last, and two fp32 values closer than the bound above can
//    still round to neighbouring 16-bit values (a real H200 run: a bf16 layernorm weight at
//    1 vs 1.0078125, one bf16 ulp). Round to nearest moves each by at most half an ulp of
//    its value, so the two differ by at most the fp32 bound plus one ulp of the larger,
//    ulp(x) <= 2 u16 |x| for normal x (plus fp16's smallest subnormal step, 2^-24).
// A wrong optimizer (no bias correction: u_1 = 3.16 instead of 1; lr off by a factor) moves
// every parameter by O(sum lr_t), beyond this bound in fp16 (the ulp term is 2 u16 |p|, far
// below sum lr_t for the weights of init std 0.02).
void expect_parameters_within_adam_bound(const Config& cfg, const test::Run& cpu, const test::Run& gpu,
                                         double u16, const std::string& what) {
    const double b1 = cfg.optimizer.adam_beta1, b2 = cfg.optimizer.adam_beta2;
    const double delta = 2.0 * (20.0 * cfg.model.num_layers + 4.0) * u16;
    double sum_lr_c = 0.0;
    for (std::size_t t = 1; t <= gpu.records.size(); ++t) {
        if (gpu.records[t - 1].skipped) continue;
        sum_lr_c += gpu.records[t - 1].lr * test::adam_step_bound(static_cast<int>(t), b1, b2);
    }
    const int head_dim = cfg.model.hidden_size / cfg.model.num_attention_heads;
    ASSERT_EQ(gpu.params.size(), cpu.params.size()) << what;
    double worst = 0.0;
    std::string worst_name;
    for (const auto& [name, p] : gpu.params) {
        const auto& want = cpu.params.at(name).values;
        ASSERT_EQ(want.size(), p.values.size()) << what << " " << name;
        const bool qkv_bias = name.find("query_key_value/bias") != std::string::npos;
        int bad = 0;
        std::size_t first = 0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const std::int64_t row = p.slice_start + static_cast<std::int64_t>(i);
            const bool key = qkv_bias && row % (3 * head_dim) >= head_dim && row % (3 * head_dim) < 2 * head_dim;
            const double last_rounding =
                2.0 * u16 * std::max(std::abs(double(p.values[i])), std::abs(double(want[i]))) + std::ldexp(1.0, -24);
            const double bound = 2.0 * sum_lr_c * (key ? 1.0 : delta) + last_rounding;
            const double r = std::abs(double(p.values[i]) - want[i]) / bound;
            if (!(r <= 1.0) && bad++ == 0) first = i;
            if (!(r <= worst)) {
                worst = r;
                worst_name = name;
            }
        }
        EXPECT_EQ(bad, 0) << what << " " << name << ": " << bad << " of " << want.size()
                          << " elements beyond the AdamW bound; first " << first << ": "
                          << p.values[first] << " vs " << want[first];
    }
    std::printf("%s: parameters within %.3g of their AdamW bound (worst: %s)\n", what.c_str(), worst,
                worst_name.c_str());
}

TEST(CudaTraining, FiveIterationsFollowTheCpuBackend) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 1) GTEST_SKIP() << "one rank";
    for (bool flash : {false, true})
        for (bool bf16 : {false, true}) {
            const Config cfg = gpu_config(flash, bf16);
            const std::string what = std::string(bf16 ? "bf16" : "fp16") + (flash ? " flash" : " plain");
            const test::Run cpu = test::train_run(cfg, MPI_COMM_SELF, "cpu");
            const test::Run gpu = test::train_run(cfg, MPI_COMM_SELF, "cuda");
            expect_close(cpu, gpu, bf16 ? 2e-2 : 5e-3, what);
            EXPECT_LT(gpu.records.back().lm_loss, gpu.records.front().lm_loss) << what << ": the loss falls";
            expect_parameters_within_adam_bound(cfg, cpu, gpu, std::ldexp(1.0, bf16 ? -8 : -11), what);
        }
}

// The Llama-style architecture (rope, RMSNorm, SwiGLU, 2 query groups of 2 heads, untied
// output, no biases) on the GPU: RMSNorm, SwiGLU and the rope/grouped-QKV expansion run as
// CUDA kernels, the bias-free linears and the untied output layer on the GEMMs the GPT
// model uses. Half the GPT run's depth and sequence (the emulator's time), bf16 with flash
// attention; the bound is the GPT bf16 run's above (same width, dtype and steps).
TEST(CudaTraining, LlamaStyleFollowsTheCpuBackend) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 1) GTEST_SKIP() << "one rank";
    Config cfg = gpu_config(/*flash=*/true, /*bf16=*/true);
    cfg.model.num_layers = 2;
    cfg.model.seq_length = 64;
    test::tiny::llama_style(cfg.model);
    cfg.model.ffn_hidden_size = 512;
    const test::Run cpu = test::train_run(cfg, MPI_COMM_SELF, "cpu");
    const test::Run gpu = test::train_run(cfg, MPI_COMM_SELF, "cuda");
    expect_close(cpu, gpu, 2e-2, "llama-style bf16 flash");
}

// FP8 training (issue 34) on the GPU: the casts, cuBLASLt's FP8 GEMMs with their scale
// pointers, the amax reduction and delayed scaling's update against the CPU backend's
// reference arithmetic, on the Llama test's size (the emulator's time). Both backends round
// to the same FP8 codes wherever their 16-bit inputs agree; where a 16-bit input differs by
// an ulp (the bf16 runs above agree to 2e-2) a code can land one FP8 step away, so the bound
// is the band in which an FP8 run follows its bf16 run at all (5%, test_real_text's
// Fp8LossFollowsBf16, where it is measured).
TEST(CudaTraining, Fp8FollowsTheCpuBackend) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 1) GTEST_SKIP() << "one rank";
    Config cfg = gpu_config(/*flash=*/true, /*bf16=*/true);
    cfg.model.num_layers = 2;
    cfg.model.seq_length = 64;
    cfg.fp8.fp8_format = Fp8Scheme::Hybrid;
    cfg.fp8.fp8_amax_history_len = 4;
    cfg.fp8.fp8_amax_compute_algo = AmaxAlgo::Max;
    const test::Run cpu = test::train_run(cfg, MPI_COMM_SELF, "cpu");
#ifdef GPT_CUDA_EMU
    gpt_emu::clear_matmul_calls();
#endif
    const test::Run gpu = test::train_run(cfg, MPI_COMM_SELF, "cuda");
    expect_close(cpu, gpu, 5e-2, "fp8 hybrid delayed");
    EXPECT_LT(gpu.records.back().lm_loss, gpu.records.front().lm_loss) << "the loss falls";
#ifdef GPT_CUDA_EMU
    // Fast accumulation (GPT_CUDA_FP8_FAST_ACCUM=forward, the default) in the forward GEMMs
    // only, as Transformer Engine's recipe: per linear and training micro-batch one forward
    // GEMM and two precise ones (data and weight gradient; no recomputation here), plus the
    // forward GEMMs of the evaluation at the end of training (eval_iters batches).
    int fast = 0, precise = 0;
    for (const gpt_emu::MatmulCall& m : gpt_emu::matmul_calls())
        if (m.fp8) ++(m.fast_accum ? fast : precise);
    const int micro = cfg.training.global_batch_size / cfg.training.micro_batch_size;
    const int linears = cfg.model.num_layers * 4;
    ASSERT_LT(cfg.training.train_iters, cfg.training.eval_interval) << "one evaluation, at the end";
    const int train_fwd = static_cast<int>(cfg.training.train_iters) * micro * linears;
    EXPECT_EQ(fast, train_fwd + cfg.training.eval_iters * micro * linears) << "fast-accumulating FP8 GEMMs";
    EXPECT_EQ(precise, 2 * train_fwd) << "fp32-accumulating FP8 GEMMs";
    // GPT_FP8_GELU=pass (the default): fc1's FP8 GEMM adds only its bias, as QKV's does, and
    // no FP8 GEMM carries the GELU epilogue (the GELU pass writes fc2's input and codes) or
    // its gradient (fc1's output-gradient cast applies it); no FP8 GEMM sums a bias gradient
    // either (the output gradient's cast does, GPT_FP8_BIAS_GRAD).
    int bias = 0, gelu = 0, bgrad = 0;
    for (const gpt_emu::MatmulCall& m : gpt_emu::matmul_calls()) {
        if (!m.fp8) continue;
        bias += m.epilogue == CUBLASLT_EPILOGUE_BIAS;
        gelu += m.epilogue == CUBLASLT_EPILOGUE_GELU_AUX_BIAS || m.epilogue == CUBLASLT_EPILOGUE_DGELU;
        bgrad += m.epilogue == CUBLASLT_EPILOGUE_BGRADB;
    }
    EXPECT_EQ(bias, 2 * cfg.model.num_layers * (static_cast<int>(cfg.training.train_iters) + cfg.training.eval_iters) * micro)
        << "FP8 GEMMs with the bias epilogue (QKV and fc1 of each layer, each forward)";
    EXPECT_EQ(gelu, 0) << "FP8 GEMMs with the GELU or GELU-gradient epilogue";
    EXPECT_EQ(bgrad, 0) << "FP8 GEMMs with the bias-gradient epilogue";
#endif
}

struct Layout {
    const char* name;
    int tp, pp;
    bool sp, distopt;
};
constexpr Layout kTwoRankLayouts[] = {{"TP2 SP", 2, 1, true, false},
                                      {"DP2 distopt overlap", 1, 1, false, true},
                                      {"PP2", 1, 2, false, false}};

// The 2-rank tests' model: fp16 flash at half the depth (the emulator's time; PP 2 keeps a
// layer per stage). They compare losses and gradient norms with the 1-rank GPU run, not the
// parameters against the AdamW bound, whose depth term the 4-layer runs above are sized for.
Config two_rank_config() {
    Config c = gpu_config(/*flash=*/true);
    c.model.num_layers = 2;
    return c;
}

// The 1-rank GPU run both 2-rank tests compare with (computed once per process).
const test::Run& one_rank_reference() {
    static const test::Run ref = test::train_run(two_rank_config(), MPI_COMM_SELF, "cuda");
    return ref;
}

void expect_layouts_follow_one_rank(const std::string& backend) {
    for (const Layout& l : kTwoRankLayouts) {
        Config cfg = two_rank_config();
        cfg.parallel.distributed_backend = parse_enum<DistributedBackend>(backend, "distributed-backend");
        cfg.parallel.tensor_model_parallel_size = l.tp;
        cfg.parallel.pipeline_model_parallel_size = l.pp;
        cfg.parallel.sequence_parallel = l.sp;
        cfg.parallel.use_distributed_optimizer = l.distopt;
        cfg.parallel.overlap_grad_reduce = l.distopt;
        expect_close(one_rank_reference(), test::train_run(cfg, MPI_COMM_WORLD, "cuda"), 5e-3,
                     std::string(l.name) + " over " + backend);
    }
}

int ranks_on_this_node() {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int n = 1;
    MPI_Comm_size(node, &n);
    MPI_Comm_free(&node);
    return n;
}

// --distributed-backend mpi: activations and gradients staged through host memory, the
// configuration for ranks that share a GPU.
TEST(CudaTraining, TwoRanksOnOneGpuFollowOneRank) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    expect_layouts_follow_one_rank("mpi");
}

// --distributed-backend nccl: NCCL communicators on device buffers (TP all-gathers and
// reduce-scatters, DP buckets overlapping backward, pipeline sends), one GPU per rank.
TEST(CudaTraining, NcclWithAGpuPerRankFollowsOneRank) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const int ranks = ranks_on_this_node();
    if (visible_gpu_count() < ranks) {
        test::note_hardware_skip("NCCL needs a GPU per rank");
        GTEST_SKIP() << "NCCL needs a GPU per rank: " << ranks << " ranks on this node, "
                     << visible_gpu_count() << " GPU(s) visible";
    }
    expect_layouts_follow_one_rank("nccl");
}

}  // namespace
}  // namespace gpt::train
