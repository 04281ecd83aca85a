// Issue #5's acceptance matrix: every (TP, PP, DP) layout of 2, 4 and 8 ranks, with and
// without sequence parallelism, the distributed optimizer, the interleaved schedule, both
// recompute granularities (full: uniform and block) and overlapped bucketed gradient
// reduction, trains exactly like one rank: lm loss and grad norm of each of 10 iterations,
// the evaluation loss and every parameter at the end to 1e-5 relative (CPU, fp32,
// dropout 0, same seed and data). Also TP 4 and PP 4 on 4 ranks, and (issue 18) dropout,
// fp16 and bf16 rows on 2 ranks and the Llama-style model, with bounds derived for them (the
// fp32 ones propagated from the measured gradients: rounding_bound.hpp).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "parallel_match.hpp"
#include "rounding_bound.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

struct Layout {
    int tp, pp;
};

struct Features {
    const char* name;
    bool sequence_parallel = false;
    bool distributed_optimizer = false;
    bool interleaved = false;
    bool overlap = false;
    const char* recompute = "";   // "", "selective", "uniform", "block"
    int recompute_layers = 1;
};

Config base_config() {
    return test::tiny::layers4(10);  // 2 stages x 2 virtual stages x 1 layer; 4 micro-batches
}

Config parallel_config(const Layout& l, const Features& f) {
    Config c = base_config();
    auto& p = c.parallel;
    p.tensor_model_parallel_size = l.tp;
    p.pipeline_model_parallel_size = l.pp;
    p.sequence_parallel = f.sequence_parallel;
    p.use_distributed_optimizer = f.distributed_optimizer;
    if (f.interleaved && l.pp > 1) p.num_layers_per_virtual_pipeline_stage = 1;
    p.overlap_grad_reduce = f.overlap;
    p.ddp_bucket_size = f.overlap ? 3000 : 0;  // several buckets on this tiny model
    const std::string r = f.recompute;
    if (r == "selective") {
        p.recompute_granularity = RecomputeGranularity::Selective;
    } else if (!r.empty()) {
        p.recompute_granularity = RecomputeGranularity::Full;
        p.recompute_method = parse_enum<RecomputeMethod>(r, "recompute-method");
        p.recompute_num_layers = f.recompute_layers;
    }
    return c;
}

// Each feature is on in some variants and off in others on every layout.
const std::vector<Features>& variants() {
    static const std::vector<Features> v = {
        {"plain"},
        {"distopt+overlap", false, true, false, true},
        {"sp+distopt+overlap+interleaved+selective", true, true, true, true, "selective"},
        {"sp+distopt+full-uniform", true, true, false, false, "uniform", 1},
        {"overlap+interleaved+full-block", false, false, true, true, "block", 1},
        {"sp+full-uniform-2+overlap", true, false, false, true, "uniform", 2},
    };
    return v;
}

// A numeric setting beside the parallel features: precision and dropout, and how closely the
// parallel run must follow the one-rank run of the same setting.
struct Numerics {
    const char* name = "fp32";
    bool fp16 = false, bf16 = false;
    double dropout = 0.0;  // hidden dropout; attention dropout too where TP is 1
    double rel = 1e-5;       // 0: the fp32 rounding bound of rounding_bound.hpp
    double param_rel = 0.0;  // rel when 0
    void (*model)(ModelConfig&) = nullptr;  // another architecture (the name says which)
    void (*loss)(Config&) = nullptr;        // other training flags (the name says which)
};

Config with_numerics(Config c, const Numerics& n, int tp) {
    c.training.fp16 = n.fp16;
    c.training.bf16 = n.bf16;
    if (n.fp16) c.training.initial_loss_scale = 4096;
    c.model.hidden_dropout = n.dropout;
    // Attention dropout is drawn per tensor-parallel rank by design (Megatron's model-parallel
    // RNG), so with TP > 1 it cannot follow one rank.
    c.model.attention_dropout = tp == 1 ? n.dropout : 0.0;
    if (n.model) n.model(c.model);
    if (n.loss) n.loss(c);
    return c;
}

const test::Run& reference(const Numerics& n, int tp) {
    static std::map<std::string, test::Run> runs;
    const std::string key = std::string(n.name) + (tp == 1 ? "" : " tp");
    auto it = runs.find(key);
    if (it == runs.end())
        it = runs.emplace(key, test::train_run(with_numerics(base_config(), n, tp), MPI_COMM_SELF, "cpu",
                                               /*keep_step_grads=*/true))
                 .first;
    return it->second;
}

void run_layouts(const std::vector<Layout>& layouts, const std::vector<Features>& features,
                 const Numerics& numerics = {}) {
    for (const Layout& l : layouts)
        for (const Features& f : features) {
            const Config cfg = with_numerics(parallel_config(l, f), numerics, l.tp);
            const std::string what = "TP " + std::to_string(l.tp) + " PP " + std::to_string(l.pp) +
                                     " DP " + std::to_string(test::world_size() / (l.tp * l.pp)) +
                                     " [" + f.name + ", " + numerics.name + "] rank " +
                                     std::to_string(test::world_rank());
            // Every variant runs, so one failure shows the whole picture. A rank that throws
            // fails collectively: the others would hang in its collectives.
            test::Run got;
            std::string error;
            try {
                got = test::train_run(cfg, MPI_COMM_WORLD);
            } catch (const std::exception& e) {
                error = e.what();
            }
            int failed = error.empty() ? 0 : 1;
            MPI_Allreduce(MPI_IN_PLACE, &failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
            if (failed) {
                ADD_FAILURE() << what << ": " << (error.empty() ? "another rank threw" : error);
                continue;
            }
            if (numerics.rel == 0.0)
                test::expect_within_rounding_bound(reference(numerics, l.tp), got, cfg, what);
            else
                test::expect_matches(reference(numerics, l.tp), got, cfg, what, numerics.rel, numerics.param_rel);
            // Overlap means buckets start while backward runs: all but the tied-embedding
            // ones, which wait for the embedding-group sum.
            const int dp = test::world_size() / (l.tp * l.pp);
            if (f.overlap && dp > 1) {
                EXPECT_GT(got.buckets, 2) << what;
                EXPECT_GT(got.buckets_launched_early, 0) << what;
            } else {
                EXPECT_EQ(got.buckets_launched_early, 0) << what;
            }
        }
}

// Megatron's distributed-optimizer memory: fp16 params (2 bytes) and fp32 grads (4) stay
// whole, the fp32 main params and Adam moments (12) are split over the d DP ranks.
TEST(ParallelMatrix, DistributedOptimizerMemoryIsSixPlusTwelveOverD) {
    auto bytes_per_param = [](MPI_Comm comm) {
        Config cfg = base_config();
        cfg.training.fp16 = true;
        cfg.model.hidden_size = 128;  // large enough that alignment padding is noise
        cfg.training.global_batch_size = 8;
        cfg.training.train_iters = 1;
        cfg.optimizer.lr_warmup_iters = 0;
        cfg.parallel.use_distributed_optimizer = true;
        const test::Run run = test::train_run(cfg, comm);
        std::int64_t params = 0;
        for (const auto& [name, p] : run.params) params += static_cast<std::int64_t>(p.values.size());
        const auto& m = run.memory;
        return double(m.params + m.grads + m.optimizer) / double(params);
    };
    const double one = bytes_per_param(MPI_COMM_SELF);
    const double d = test::world_size();
    const double many = bytes_per_param(MPI_COMM_WORLD);
    // The flat buffers carry a little alignment padding (entries start at multiples of 64
    // elements, shards at multiples of 64 d): allow 0.5%.
    EXPECT_NEAR(one, 18.0, 0.005 * 18.0);
    EXPECT_NEAR(many, 6.0 + 12.0 / d, 0.005 * (6.0 + 12.0 / d));
    if (test::world_rank() == 0)
        std::printf("distributed optimizer, fp16: %.2f bytes/parameter at d=1 (Megatron: 18), "
                    "%.2f at d=%.0f (Megatron: 6 + 12/d = %.2f)\n", one, many, d, 6.0 + 12.0 / d);
}

TEST(ParallelMatrix, TwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    run_layouts({{2, 1}, {1, 2}, {1, 1}}, variants());
}

TEST(ParallelMatrix, FourRanks) {
    if (test::world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    run_layouts({{2, 2}, {2, 1}, {1, 2}}, variants());
}

// 4-way tensor parallelism (one head per rank) and 4 pipeline stages (one layer each): the
// variants without the interleaved schedule, which needs two layers per stage here. Losses,
// grad norms and parameters within the fp32 rounding bound (rounding_bound.hpp).
TEST(ParallelMatrix, FourWayTensorOrPipeline) {
    if (test::world_size() != 4) GTEST_SKIP() << "needs 4 ranks (registered as .np4)";
    const auto& v = variants();
    run_layouts({{4, 1}, {1, 4}}, {v[0], v[1], v[3]}, Numerics{"fp32", false, false, 0.0, 0.0});
}

// Dropout (fp32): the masks follow the global micro-batch and position, not the layout, so
// both runs drop the same elements and the fp32 rounding bound applies unchanged (the
// dropout multiply rounds identical inputs identically).
//
// fp16 and bf16: parameters stay fp32 (main params) but activations and gradients are
// rounded to the 16-bit type (unit roundoff u: 2^-11, 2^-8), and a layout changes where:
// a row-parallel layer rounds each rank's partial sum before the all-reduce, where one rank
// rounds the whole sum once; the pipeline rounds nothing new (its rows match to 1e-5 in
// practice). That is a relative difference of at most 2u (the partial sum's rounding and
// the reduction's) on each row-parallel output and each reduced gradient: 2 per layer
// forward (attention and MLP outputs) and 2 backward, plus the word-embedding/LM-head
// pair, for L = 4 layers: d = 2 (4 L + 2) u = 36 u on the loss and the gradient norm.
// Parameters: Adam's step m / sqrt(v) takes d from m and d from sqrt(v) (v's 2d halved),
// so each update differs by up to 2 d = 72 u relative, and the parameters, the sum of
// the updates, by the same relative amount. Bounds: 36 u = 1.8e-2 (fp16), 0.14 (bf16) on
// the losses; 72 u = 3.5e-2, 0.28 on the parameters. A wrong layout (a missing all-reduce,
// a shard in the wrong place) changes the loss by O(1).
TEST(ParallelMatrix, HalfPrecisionAndDropout) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    const double u16 = std::ldexp(1.0, -11), ubf16 = std::ldexp(1.0, -8);
    const Numerics rows[] = {{"dropout 0.1", false, false, 0.1, 0.0},
                             {"fp16", true, false, 0.0, 36 * u16, 72 * u16},
                             {"bf16", false, true, 0.0, 36 * ubf16, 72 * ubf16}};
    for (const Numerics& n : rows) run_layouts({{2, 1}, {1, 2}}, {v[0], v[3]}, n);
}

// The Llama-style architecture (rope, RMSNorm, SwiGLU, grouped-query attention with one
// K/V group per TP rank, an untied output layer, no linear biases) on every 2-rank layout,
// with sequence parallelism (RMSNorm weight grads summed over TP), the distributed
// optimizer, interleaving and both recompute granularities.
TEST(ParallelMatrix, LlamaStyleTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    // The fp32 rounding bound, with this model's reductions (SwiGLU's fc1 twice as wide,
    // the grouped QKV narrower).
    Numerics n{"llama-style fp32", false, false, 0.0, 0.0};
    n.model = test::tiny::llama_style;
    run_layouts({{2, 1}, {1, 2}, {1, 1}}, {v[0], v[2], v[3]}, n);
}

// Nemotron's layer options, --squared-relu (the activation pass over each TP rank's ffn
// columns, its backward and its replay under full recompute) and --apply-layernorm-1p (the
// norms' 1 + weight; their weight gradients summed over TP under sequence parallelism), with
// the distributed optimizer: the fp32 rounding bound, as the Llama-style row.
TEST(ParallelMatrix, NemotronStyleTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    Numerics n{"nemotron-style fp32", false, false, 0.0, 0.0};
    n.model = [](ModelConfig& m) {
        m.squared_relu = true;
        m.apply_layernorm_1p = true;
    };
    run_layouts({{2, 1}}, {variants()[3]}, n);
}

// --qk-layernorm: the query and key norms' weights are replicated while each TP rank
// normalises only its heads, so their gradients are partial sums over TP with or without
// sequence parallelism (Megatron's finalize_model_grads sums them). RMSNorm on the Llama-style
// layer (one K/V group per rank) without sequence parallelism, LayerNorm with biases on GPT's
// with it, the distributed optimizer and full recompute: the fp32 rounding bound. GPT's row
// has rope: without it the key norm's bias only adds q.beta to every score of a softmax row,
// its gradient is zero but for rounding, and Adam turns that rounding into steps of lr size.
TEST(ParallelMatrix, QkLayernormTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    Numerics rms{"qk-layernorm llama-style fp32", false, false, 0.0, 0.0};
    rms.model = [](ModelConfig& m) {
        test::tiny::llama_style(m);
        m.qk_layernorm = true;
    };
    run_layouts({{2, 1}}, {v[0]}, rms);
    Numerics ln{"qk-layernorm gpt fp32", false, false, 0.0, 0.0};
    ln.model = [](ModelConfig& m) {
        m.qk_layernorm = true;
        m.position_embedding_type = PositionEmbeddingType::Rope;
    };
    run_layouts({{2, 1}}, {v[3]}, ln);
}

// --eod-mask-loss (WalkSource's token 60, the mock data's EOD, is an input of about one
// micro-batch in four, so micro-batches count 16 or 15 tokens) with Megatron's per
// micro-batch normalisation and with --calculate-per-token-loss, whose divisor, the global
// batch's counted tokens, every stage and data-parallel rank must learn: fp32 bound.
TEST(ParallelMatrix, EodMaskLossTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    Numerics mean{"eod-mask-loss fp32", false, false, 0.0, 0.0};
    mean.loss = [](Config& c) {
        c.data.mock_data = true;
        c.data.eod_mask_loss = true;
    };
    run_layouts({{1, 2}, {1, 1}}, {v[0]}, mean);
    Numerics per_token{"eod-mask-loss per-token fp32", false, false, 0.0, 0.0};
    per_token.loss = [](Config& c) {
        c.data.mock_data = true;
        c.data.eod_mask_loss = true;
        c.training.calculate_per_token_loss = true;
    };
    run_layouts({{2, 1}, {1, 2}, {1, 1}}, {v[0], v[2]}, per_token);
}

// --reset-position-ids and --reset-attention-mask over the mock data's EOD (WalkSource's
// token 60, an input of about one sample in three, at any position): every chunk reads the
// micro-batch's document arrays, the interleaved stages' middle chunks (neither embedding nor
// head) included; the learned position table's gradient goes to each token's own row; GPT
// and the Llama-style model (rope at the reset positions, grouped K/V read under the mask)
// with sequence parallelism, the distributed optimizer, selective and full recompute.
TEST(ParallelMatrix, ResetDocumentsTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    Numerics gpt{"reset documents gpt fp32", false, false, 0.0, 0.0};
    gpt.loss = [](Config& c) {
        c.data.mock_data = true;
        c.data.reset_position_ids = true;
        c.data.reset_attention_mask = true;
    };
    run_layouts({{1, 2}, {2, 1}}, {v[2]}, gpt);
    Numerics llama = gpt;
    llama.name = "reset documents llama-style fp32";
    llama.model = test::tiny::llama_style;
    run_layouts({{2, 1}}, {v[3]}, llama);
}

// --rampup-batch-size 2 2 6 to the global batch of 4 over 34 samples (Megatron: 10
// iterations of 2, 2, 2, then 4): data-parallel ranks take 1 micro-batch, then 2; the
// pipeline's schedules (1F1B and interleaved) run 2 micro-batches, then 4. Sample-based
// training, as the ramp needs.
TEST(ParallelMatrix, RampupBatchSizeTwoRanks) {
    if (test::world_size() != 2) GTEST_SKIP() << "needs 2 ranks (registered as .np2)";
    const auto& v = variants();
    Numerics n{"rampup-batch-size fp32", false, false, 0.0, 0.0};
    n.loss = [](Config& c) {
        c.training.rampup_batch_size = {2, 2, 6};
        c.training.train_iters = 0;
        c.training.train_samples = 34;
        c.optimizer.lr_warmup_iters = 0;
        c.optimizer.lr_warmup_samples = 8;
    };
    run_layouts({{2, 1}, {1, 2}, {1, 1}}, {v[0], v[2]}, n);
}

TEST(ParallelMatrix, EightRanks) {
    if (test::world_size() != 8) GTEST_SKIP() << "needs 8 ranks (registered as .np8)";
    run_layouts({{2, 2}}, variants());
}

}  // namespace
}  // namespace gpt::train
