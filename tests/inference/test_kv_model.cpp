// The KV-cached inference forward: the same math as the training forward (GptModel's loss
// from our logits), cached steps equal to fresh passes (logits, and so the greedy tokens),
// top-k 1 = greedy, seeded sampling reproducible and independent of the batch, and TP2 =
// TP1 (np2); for every architecture of test::inference_config (GPT-2's layer and the
// Llama-style options: rope at the cached position, K/V cached per query group).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inference/generator.hpp"
#include "inference/kv_cache_layout.hpp"
#include "inference/sampling.hpp"
#include "inference_test_util.hpp"
#include "model/gpt_model.hpp"

namespace gpt::inference {
namespace {

struct Fixture {
    explicit Fixture(const std::string& arch = "gpt") : dims(test::inference_dims(1, 0, arch)) {}
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<dist::Communicator> tp = test::self_comm();
    model::ModelDims dims;
    model::ModelOptions opt;
    std::vector<float> params = test::inference_params(dims, 5);
    KvModel make() { return KvModel(dims, opt, *be, *tp, params); }
};

class Arch : public ::testing::TestWithParam<std::string> {};
INSTANTIATE_TEST_SUITE_P(KvModel, Arch, ::testing::Values("gpt", "llama", "llama_partial"),
                         [](const auto& info) { return info.param; });

GenerationRequest request(int max_new, SamplingOptions s = {}) {
    GenerationRequest rq;
    rq.prompts = {{3, 17, 42}, {9, 1, 1, 30, 2}, {44}, {12, 12}};
    rq.max_new_tokens = max_new;
    rq.sampling = s;
    rq.vocab = 50;
    rq.eod = 49;
    rq.batch_size = 3;  // two batches, the first with three prompt lengths
    return rq;
}

SamplingOptions greedy() {
    SamplingOptions s;
    s.greedy = true;
    return s;
}

// The prompt pass over a whole sequence gives the logits whose loss the training forward
// (GptModel, dropout off) computes: the inference forward is the training math.
TEST_P(Arch, PromptPassIsTheTrainingForward) {
    for (auto [flash, dtype] : {std::pair{false, DType::F32}, std::pair{true, DType::F32},
                                std::pair{false, DType::BF16}, std::pair{true, DType::F16}}) {
        Fixture f(GetParam());
        f.opt.flash_attention = flash;
        f.opt.dtype = dtype;
        const int b = 2, s = f.dims.seq;
        model::GptModel gm(f.dims, model::ChunkSpec{0, f.dims.num_layers, true, true}, f.opt, b, *f.be, *f.tp);
        gm.set_parameters(f.params.data());
        const auto tokens = test::random_tokens(b, s, 50, 3);
        gm.set_batch(0, tokens.data());
        const double train_loss = gm.forward(0, false, 0);

        KvModel m = f.make();
        m.start(b, s);
        std::vector<std::int32_t> in;
        for (int i = 0; i < b; ++i) in.insert(in.end(), tokens.begin() + i * (s + 1), tokens.begin() + i * (s + 1) + s);
        const std::vector<float> logits = m.forward(in.data(), s, true);  // (s, b, V)
        const std::int64_t V = f.dims.vocab_padded;
        double loss = 0.0;
        for (int t = 0; t < s; ++t)
            for (int i = 0; i < b; ++i) {
                const float* row = logits.data() + (static_cast<std::int64_t>(t) * b + i) * V;
                loss -= log_prob(row, V, tokens[static_cast<std::size_t>(i * (s + 1) + t + 1)]);
            }
        // The same ops on the same (half-precision) parameters give the same logits; the
        // training loss sums per-token fp32 losses (~4 each, rounding ~5e-7 relative each)
        // over 16 tokens, ours in double: 1e-5 relative is ~20x that.
        EXPECT_NEAR(loss, train_loss, 1e-5 * std::abs(train_loss)) << "flash " << flash << " " << dtype_name(dtype);
    }
}

// Each cached one-token step gives the logits a fresh pass over the whole prefix gives.
TEST_P(Arch, CachedStepsEqualFreshPasses) {
    Fixture f(GetParam());
    KvModel cached = f.make(), fresh = f.make();
    const int b = 2, len = 20;
    const auto tokens = test::random_tokens(b, len, 50, 9);  // (b, len + 1)
    auto prefix = [&](int n) {
        std::vector<std::int32_t> t;
        for (int i = 0; i < b; ++i) t.insert(t.end(), tokens.begin() + i * (len + 1), tokens.begin() + i * (len + 1) + n);
        return t;
    };
    cached.start(b, len);
    std::vector<float> got = cached.forward(prefix(4).data(), 4);
    for (int n = 4; n <= len; ++n) {
        if (n > 4) {
            std::vector<std::int32_t> step;
            for (int i = 0; i < b; ++i) step.push_back(tokens[static_cast<std::size_t>(i * (len + 1) + n - 1)]);
            got = cached.forward(step.data(), 1);
        }
        fresh.start(b, n);
        const std::vector<float> want = fresh.forward(prefix(n).data(), n);
        ASSERT_EQ(got.size(), want.size());
        // fp32 attention by GEMMs + softmax vs the attention op, over <= 20 keys of head
        // size 8, then two layers and the head on |logits| ~ 5: rounding ~1e-6; 1e-4 leaves
        // room for the order of the sums and catches any wrong key, position or scale.
        for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4) << "prefix " << n << " element " << i;
    }
}

TEST_P(Arch, GreedyWithCacheIsArgmaxOfFreshPasses) {
    Fixture f(GetParam());
    KvModel m = f.make();
    GenerationRequest rq = request(14, greedy());
    const auto with = generate(m, rq);
    rq.use_cache = false;
    const auto without = generate(m, rq);
    ASSERT_EQ(with.size(), 4u);
    for (std::size_t i = 0; i < with.size(); ++i) {
        EXPECT_EQ(with[i].tokens, without[i].tokens) << "prompt " << i;
        ASSERT_EQ(with[i].log_probs.size(), without[i].log_probs.size());
        for (std::size_t k = 0; k < with[i].log_probs.size(); ++k)
            EXPECT_NEAR(with[i].log_probs[k], without[i].log_probs[k], 1e-4);
        EXPECT_TRUE(with[i].eod || with[i].tokens.size() == 14u);
        EXPECT_LE(rq.prompts[i].size() + with[i].tokens.size(), 24u);  // the model's positions
    }
}

// The same in half precision, where the cached step (attention by GEMMs over the cache) and
// the fresh pass (the attention op) round differently: each greedy token chosen with the
// cache is the argmax of a fresh pass over the prefix in the same precision, except where
// that pass's top two logits lie within rounding (2 tol, test::rounding_tolerance) of each
// other; enough steps must be decided (bf16's margins are often within its rounding), or the
// check would be vacuous.
TEST_P(Arch, HalfPrecisionGreedyWithCacheIsArgmaxOfFreshPasses) {
    for (DType t : {DType::F16, DType::BF16}) {
        Fixture f(GetParam());
        f.opt.dtype = t;
        KvModel cached = f.make(), fresh = f.make();
        const GenerationRequest rq = request(14, greedy());
        const auto with = generate(cached, rq);
        const std::int64_t V = f.dims.vocab_padded;
        int decided = 0, ties = 0;
        for (std::size_t i = 0; i < with.size(); ++i) {
            std::vector<std::int32_t> seq = rq.prompts[i];
            for (std::size_t k = 0; k < with[i].tokens.size(); ++k) {
                const int n = static_cast<int>(seq.size());
                fresh.start(1, n);
                const std::vector<float> logits = fresh.forward(seq.data(), n);
                const double tol = test::rounding_tolerance(t, test::max_abs(logits), test::roundings_of(f.dims));
                const std::int32_t chosen = with[i].tokens[k];
                if (test::top2_margin(logits.data(), rq.vocab) > 2.0 * tol) {
                    ++decided;
                    EXPECT_EQ(chosen, test::argmax(logits.data(), rq.vocab))
                        << dtype_name(t) << " prompt " << i << " token " << k;
                } else {
                    ++ties;  // either of the near-equal tokens is a correct greedy choice
                    EXPECT_GE(logits[static_cast<std::size_t>(chosen)] + 2.0 * tol,
                              logits[static_cast<std::size_t>(test::argmax(logits.data(), rq.vocab))])
                        << dtype_name(t) << " prompt " << i << " token " << k;
                }
                EXPECT_NEAR(with[i].log_probs[k], log_prob(logits.data(), V, chosen), 2.0 * tol)
                    << dtype_name(t) << " prompt " << i << " token " << k;
                seq.push_back(chosen);
            }
        }
        EXPECT_GE(decided, 15) << dtype_name(t) << ": " << ties << " near ties, " << decided << " decided";
    }
}

TEST(Generate, TopK1IsGreedy) {
    Fixture f;
    KvModel m = f.make();
    SamplingOptions k1;
    k1.top_k = 1;
    k1.temperature = 0.7f;
    k1.seed = 99;
    const auto a = generate(m, request(10, greedy()));
    const auto b = generate(m, request(10, k1));
    for (std::size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].tokens, b[i].tokens) << "prompt " << i;
}

TEST(Generate, SeededSamplingIsReproducibleAndBatchIndependent) {
    Fixture f;
    KvModel m = f.make();
    SamplingOptions s;
    s.temperature = 1.5f;
    s.top_p = 0.95f;
    s.seed = 7;
    const auto a = generate(m, request(12, s));
    const auto b = generate(m, request(12, s));
    GenerationRequest one = request(12, s);
    one.batch_size = 1;
    const auto c = generate(m, one);
    s.seed = 8;
    const auto d = generate(m, request(12, s));
    bool differs = false;
    for (std::size_t i = 0; i < a.size(); ++i) {
        EXPECT_EQ(a[i].tokens, b[i].tokens) << "prompt " << i;
        EXPECT_EQ(a[i].tokens, c[i].tokens) << "prompt " << i << " alone";
        differs = differs || a[i].tokens != d[i].tokens;
    }
    EXPECT_TRUE(differs) << "seeds 7 and 8 drew the same 4 completions";
}

// np2: the model split over two TP ranks (heads or K/V groups, FFN and vocabulary)
// generates the tokens one rank does, greedy and sampled; the Llama-style model with one of
// its two K/V groups on each rank.
TEST(Generate, TensorParallel2EqualsOneRank) {
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (world != 2) GTEST_SKIP() << "needs 2 ranks (registered as test_inference.np2)";
    for (const std::string arch : {"gpt", "llama"}) {
        Fixture f(arch);
        SamplingOptions s;
        s.top_k = 20;
        s.seed = 3;
        KvModel one = f.make();
        const auto g1 = generate(one, request(12, greedy()));
        const auto s1 = generate(one, request(12, s));
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        dist::MpiCommunicator tp2(dup, "tp");
        const model::ModelDims d2 = test::inference_dims(2, rank, arch);
        ASSERT_EQ(d2.vocab_padded, f.dims.vocab_padded);  // 64 either way: the same logits
        const model::ParamLayout full(f.dims, model::ChunkSpec{0, f.dims.num_layers, true, true});
        const model::ParamLayout part(d2, model::ChunkSpec{0, d2.num_layers, true, true});
        KvModel two(d2, f.opt, *f.be, tp2, test::take_slices(full, f.params, part));
        const auto g2 = generate(two, request(12, greedy()));
        const auto s2 = generate(two, request(12, s));
        for (std::size_t i = 0; i < g1.size(); ++i) {
            EXPECT_EQ(g1[i].tokens, g2[i].tokens) << arch << " greedy, prompt " << i;
            EXPECT_EQ(s1[i].tokens, s2[i].tokens) << arch << " top-k, prompt " << i;
            for (std::size_t k = 0; k < g1[i].log_probs.size() && k < g2[i].log_probs.size(); ++k)
                EXPECT_NEAR(g1[i].log_probs[k], g2[i].log_probs[k], 1e-4) << arch;
        }
    }
}

// A cached step rotates its queries and keys by rope_matrix(position) (a GEMM): the
// rotation the expand op (the training forward's rope) applies at that position, for full
// and partial rotary dims, both pair conventions.
TEST(KvCacheLayout, RopeMatrixIsTheExpandOpsRotation) {
    const std::unique_ptr<Backend> be = make_backend("cpu", 0);
    const std::int64_t hn = 8, s = 23;
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const std::int64_t dim : {std::int64_t{8}, std::int64_t{4}})
        for (const bool interleaved : {false, true}) {
            QkvExpandArgs a;
            a.s = s, a.b = 1, a.groups = 1, a.heads_per_group = 1, a.hn = hn;
            a.rotary_dim = dim, a.rotary_base = 100.0f, a.rotary_interleaved = interleaved;
            std::vector<float> in(static_cast<std::size_t>(s * 3 * hn)), out(in.size());
            for (float& v : in) v = nd(rng);
            void* din = be->alloc(in.size() * 4);
            void* dout = be->alloc(out.size() * 4);
            be->copy_to_device(din, in.data(), in.size() * 4);
            be->qkv_expand_forward(a, din, dout);
            be->copy_to_host(out.data(), dout, out.size() * 4);
            be->free(din);
            be->free(dout);
            for (std::int64_t p = 0; p < s; ++p) {
                const std::vector<float> m = rope_matrix(hn, dim, 100.0f, interleaved, p);
                for (std::int64_t r = 0; r < 2; ++r)  // query and key
                    for (std::int64_t j = 0; j < hn; ++j) {
                        double y = 0.0;
                        for (std::int64_t k = 0; k < hn; ++k)
                            y += static_cast<double>(in[static_cast<std::size_t>((p * 3 + r) * hn + k)]) *
                                 m[static_cast<std::size_t>(k * hn + j)];
                        // Two fp32 products and a sum, |x| <~ 4: a few ulp of 4 is ~1e-6.
                        EXPECT_NEAR(out[static_cast<std::size_t>((p * 3 + r) * hn + j)], y, 4e-6)
                            << "dim " << dim << " interleaved " << interleaved << " position " << p;
                    }
            }
        }
}

}  // namespace
}  // namespace gpt::inference
