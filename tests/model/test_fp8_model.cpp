// FP8 linear layers in the model (issue 34), delayed scaling: after a training step every
// weight operand's amax is its weight's largest magnitude and its scale fp8_max / amax; the
// activations' and gradients' amaxes were recorded; evaluation records nothing; layers kept
// 16-bit hold no FP8 state; and with 2 tensor-parallel ranks every scale is the same on both
// ranks (the amax reduction) and each weight's equals the 1-rank model's.
// Registered in test_model (1 rank) and test_model.np2.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <limits>
#include <memory>

#include "core/errors.hpp"
#include "core/fp8.hpp"
#include "dist/comm_mpi.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

constexpr int kPerLayer = Fp8Linears::kLinears * Fp8Linears::kOperands;

int world_size() {
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    return world;
}

ModelOptions fp8_options() {
    ModelOptions opt;
    opt.dtype = DType::BF16;
    opt.seed = 5;
    opt.fp8.on = true;
    opt.fp8.amax_history_len = 2;  // the step's amaxes land in the last row after the roll
    return opt;
}

// Runs one training step (forward, backward, the scaling update) on a fixed batch.
void train_step(GptModel& m, dist::Communicator& dp) {
    auto tokens = test::random_tokens(2, m.dims().seq, 50, 11);
    m.zero_grads();
    m.fp8_weights_changed();
    m.set_batch(0, tokens.data());
    m.forward(0, true, 3);
    m.backward(0, 1.0f / static_cast<float>(m.tokens()));
    m.fp8_end_step(dp);
}

// max |W| of a bf16 parameter entry, from the model's own (rounded) parameters.
float weight_amax(const GptModel& m, const std::vector<float>& p, const std::string& name) {
    const ParamEntry& e = m.layout().at(name);
    float a = 0.0f;
    for (std::int64_t i = 0; i < e.numel; ++i) a = std::max(a, std::abs(p[static_cast<std::size_t>(e.offset + i)]));
    return a;
}

const char* kWeights[Fp8Linears::kLinears] = {"self_attention/query_key_value/weight", "self_attention/dense/weight",
                                              "mlp/dense_h_to_4h/weight", "mlp/dense_4h_to_h/weight"};

TEST(GptModelFp8, DelayedScalingRecordsEachOperandsAmax) {
    if (world_size() != 1) GTEST_SKIP() << "one rank";
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp"), dp = test::self_comm("dp");
    ModelConfig mc = test::tiny::model();  // hidden 16, seq 8: every GEMM dimension a multiple of 16
    const ModelDims d = make_model_dims(mc, 50, 1, 0);
    GptModel m(d, ChunkSpec{0, 2, true, true}, fp8_options(), 2, *be, *tp);
    m.init_parameters();
    ASSERT_NE(m.fp8(), nullptr);
    std::vector<float> p(static_cast<std::size_t>(m.padded_elements()));
    m.get_parameters(p.data());

    // Evaluation casts but records nothing.
    auto tokens = test::random_tokens(2, d.seq, 50, 11);
    m.fp8_weights_changed();
    m.set_batch(0, tokens.data());
    const double eval_loss = m.forward(0, false, 0);
    EXPECT_TRUE(std::isfinite(eval_loss));
    m.fp8_end_step(*dp);
    const DelayedScaling& s = *m.fp8()->delayed();
    const auto n = static_cast<std::size_t>(s.tensors());
    ASSERT_EQ(n, static_cast<std::size_t>(2 * kPerLayer));
    for (std::size_t i = 0; i < n; ++i) {
        EXPECT_EQ(s.history()[n + i], 0.0f) << "operand " << i << " recorded by an evaluation pass";
        EXPECT_EQ(s.scale(static_cast<int>(i)), 1.0f);
    }

    train_step(m, *dp);
    for (int L = 0; L < 2; ++L)
        for (int j = 0; j < Fp8Linears::kLinears; ++j) {
            SCOPED_TRACE(detail::concat("layer ", L, " ", kWeights[j]));
            const std::size_t base = static_cast<std::size_t>((L * Fp8Linears::kLinears + j) * Fp8Linears::kOperands);
            const float w = weight_amax(m, p, ParamLayout::layer_prefix(L) + kWeights[j]);
            EXPECT_EQ(s.history()[n + base + 1], w);  // last row: this step's
            EXPECT_EQ(s.scale(static_cast<int>(base + 1)), 448.0f / w);
            for (int k : {0, 2}) {
                const float a = s.history()[n + base + static_cast<std::size_t>(k)];
                EXPECT_TRUE(std::isfinite(a) && a > 0.0f) << (k == 0 ? "input" : "output gradient") << " amax " << a;
                const float fmax = k == 0 ? 448.0f : 57344.0f;  // hybrid: E5M2 gradients
                EXPECT_EQ(s.scale(static_cast<int>(base + static_cast<std::size_t>(k))), fmax / a);
            }
            for (int k = 0; k < 3; ++k) EXPECT_EQ(s.history()[base + static_cast<std::size_t>(k)], 0.0f) << "row 0 cleared";
        }
}

TEST(GptModelFp8, FirstAndLastLayersCanStay16Bit) {
    if (world_size() != 1) GTEST_SKIP() << "one rank";
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp"), dp = test::self_comm("dp");
    ModelConfig mc = test::tiny::model(3);
    const ModelDims d = make_model_dims(mc, 50, 1, 0);
    ModelOptions opt = fp8_options();
    opt.fp8.bf16_layers_at_start = 1;
    opt.fp8.bf16_layers_at_end = 1;
    GptModel m(d, ChunkSpec{0, 3, true, true}, opt, 2, *be, *tp);
    m.init_parameters();
    EXPECT_FALSE(m.fp8()->in_fp8(0));
    EXPECT_TRUE(m.fp8()->in_fp8(1));
    EXPECT_FALSE(m.fp8()->in_fp8(2));
    train_step(m, *dp);
    const DelayedScaling& s = *m.fp8()->delayed();
    const auto n = static_cast<std::size_t>(s.tensors());
    for (int L = 0; L < 3; ++L)
        for (int k = 0; k < kPerLayer; ++k) {
            const float a = s.history()[n + static_cast<std::size_t>(L * kPerLayer + k)];
            if (L == 1) {
                EXPECT_GT(a, 0.0f) << "FP8 layer 1 operand " << k;
            } else {
                EXPECT_EQ(a, 0.0f) << "16-bit layer " << L << " operand " << k;
            }
        }
}

// The np2 tests' TP pair: this rank, the world as a TP group of 2, and a model whose TP
// slices are multiples of 16 (hidden 32, 4 heads: QKV 48, FC1 64, projection and FC2 inputs
// 16 and 64).
struct TpPair {
    int world = 1, rank = 0;
    ModelConfig mc = test::tiny::model();
    std::unique_ptr<dist::MpiCommunicator> tp;
    TpPair() {
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        mc.hidden_size = 32;
        mc.num_attention_heads = 4;
        if (world != 2) return;
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        tp = std::make_unique<dist::MpiCommunicator>(dup, "tp");
    }
};

TEST(GptModelFp8, TensorParallelRanksShareEveryScale) {
    TpPair pair;
    if (pair.world != 2) GTEST_SKIP() << "needs 2 ranks (test_model.np2)";
    auto be = make_backend("cpu", 0);
    const ModelConfig& mc = pair.mc;
    const int rank = pair.rank;
    dist::MpiCommunicator& tp2 = *pair.tp;
    auto self = test::self_comm("tp1"), dp = test::self_comm("dp");
    const ModelDims d1 = make_model_dims(mc, 50, 1, 0), d2 = make_model_dims(mc, 50, 2, rank);
    const ChunkSpec all{0, 2, true, true};
    GptModel full(d1, all, fp8_options(), 2, *be, *self);
    GptModel part(d2, all, fp8_options(), 2, *be, tp2);
    std::vector<float> p(static_cast<std::size_t>(full.layout().total_elements()));
    full.init_parameters_host(p.data());
    full.set_parameters(p.data());
    const auto mine = test::take_slices(full.layout(), p, part.layout());
    part.set_parameters(mine.data());
    train_step(full, *dp);
    train_step(part, *dp);
    const DelayedScaling& s1 = *full.fp8()->delayed();
    const DelayedScaling& s2 = *part.fp8()->delayed();
    std::vector<float> other(s2.scales().size());
    MPI_Allreduce(s2.scales().data(), other.data(), static_cast<int>(other.size()), MPI_FLOAT, MPI_MAX, MPI_COMM_WORLD);
    for (std::size_t i = 0; i < other.size(); ++i) {
        EXPECT_EQ(s2.scales()[i], other[i]) << "operand " << i << ": the TP ranks' scales differ";
        if (i % Fp8Linears::kOperands == 1) {
            EXPECT_EQ(s2.scales()[i], s1.scales()[i]) << "weight operand " << i;
        }
    }
}

// Two training steps (the first with unit scales, the second with the scales the first's
// amaxes gave): the last loss, every gradient and the amax history, for comparisons.
struct Steps {
    double loss = 0;
    std::vector<float> grads, history;
};
Steps two_steps(GptModel& m, dist::Communicator& dp) {
    Steps r;
    for (int step = 0; step < 2; ++step) {
        auto tokens = test::random_tokens(2, m.dims().seq, 50, 11 + step);
        m.zero_grads();
        m.fp8_weights_changed();
        m.set_batch(0, tokens.data());
        r.loss = m.forward(0, true, 3);
        m.backward(0, 1.0f / static_cast<float>(m.tokens()));
        m.fp8_end_step(dp);
    }
    r.grads.resize(static_cast<std::size_t>(m.padded_elements()));
    m.get_grads(r.grads.data());
    r.history = m.fp8()->delayed()->history();
    return r;
}

// How many of two runs' gradients differ (bit for bit).
std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
}

// The fused input casts against the separate casts, bit for bit: the same codes give the
// same loss, gradients and amaxes (the producing kernels' amaxes included).
void expect_fused_equals_separate(const ModelDims& d, ModelOptions opt, Backend& be, dist::Communicator& tp,
                                  dist::Communicator& dp, const std::vector<float>& params) {
    opt.fp8.fused_input_cast = true;
    GptModel fused(d, ChunkSpec{0, d.num_layers, true, true}, opt, 2, be, tp);
    opt.fp8.fused_input_cast = false;
    GptModel separate(d, ChunkSpec{0, d.num_layers, true, true}, opt, 2, be, tp);
    ASSERT_TRUE(fused.fp8()->fuses_input_cast(0));
    ASSERT_FALSE(separate.fp8()->fuses_input_cast(0));
    fused.set_parameters(params.data());
    separate.set_parameters(params.data());
    const Steps a = two_steps(fused, dp), b = two_steps(separate, dp);
    EXPECT_EQ(a.loss, b.loss);
    ASSERT_EQ(a.grads.size(), b.grads.size());
    EXPECT_EQ(differing(a.grads, b.grads), 0u) << "gradients differ between the fused and the separate input casts";
    EXPECT_EQ(a.history, b.history);
}

TEST(GptModelFp8, FusedInputCastEqualsTheSeparateCasts) {
    if (world_size() != 1) GTEST_SKIP() << "one rank";
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp"), dp = test::self_comm("dp");
    // GPT: the norms' casts fused, and fc1's bias-only GEMM followed by the GELU pass that
    // writes fc2's codes (GPT_FP8_GELU=pass); GPT with GELU in fc1's GEMM epilogue (epilogue:
    // fc2's input is cast separately either way); without linear biases GELU is a pass that
    // writes fc2's codes too; the Llama-style layers: RMSNorm, and SwiGLU writing fc2's codes;
    // squared ReLU's pass writing them, after norms that scale by 1 + weight.
    ModelConfig no_bias = test::tiny::model();
    no_bias.disable_bias_linear = true;
    ModelConfig llama = test::tiny::llama_model();
    llama.ffn_hidden_size = 32;  // FP8 GEMMs take dimensions that are multiples of 16
    ModelConfig nemotron = test::tiny::model();
    nemotron.squared_relu = true;
    nemotron.apply_layernorm_1p = true;
    struct Case {
        const char* name;
        ModelConfig mc;
        bool gelu_in_epilogue;
    };
    const Case cases[] = {{"GPT", test::tiny::model(), false},
                          {"GPT, GELU in fc1's epilogue", test::tiny::model(), true},
                          {"GPT without biases", no_bias, false},
                          {"Llama-style", llama, false},
                          {"GPT with squared ReLU and zero-centred norms", nemotron, false}};
    for (const auto& [name, mc, gelu_in_epilogue] : cases) {
        SCOPED_TRACE(name);
        const ModelDims d = make_model_dims(mc, 50, 1, 0);
        GptModel init(d, ChunkSpec{0, 2, true, true}, ModelOptions{}, 2, *be, *tp);
        std::vector<float> p(static_cast<std::size_t>(init.layout().total_elements()));
        init.init_parameters_host(p.data());
        ModelOptions opt = fp8_options();
        opt.fp8.gelu_in_epilogue = gelu_in_epilogue;
        expect_fused_equals_separate(d, opt, *be, *tp, *dp, p);
    }
}

TEST(GptModelFp8, GeluPassEqualsTheEpilogueInFp32) {
    // GPT_FP8_GELU=pass against epilogue: fc1's bias-only GEMM then the GELU pass, against
    // GELU in the GEMM's epilogue. In bf16 they round differently (the pass takes GELU of the
    // pre-activation as stored, the epilogue of the fp32 accumulator); with fp32 activations
    // both take GELU of the same fp32 value, so loss, gradients and amaxes agree bit for bit.
    // fc1's biases are set far from zero: a route that dropped or doubled them would differ.
    if (world_size() != 1) GTEST_SKIP() << "one rank";
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm("tp"), dp = test::self_comm("dp");
    const ModelDims d = make_model_dims(test::tiny::model(), 50, 1, 0);
    ModelOptions opt = fp8_options();
    opt.dtype = DType::F32;
    GptModel init(d, ChunkSpec{0, 2, true, true}, opt, 2, *be, *tp);
    std::vector<float> p(static_cast<std::size_t>(init.layout().total_elements()));
    init.init_parameters_host(p.data());
    for (int layer = 0; layer < 2; ++layer) {
        const ParamEntry& b = init.layout().at(detail::concat("language_model/encoder/layers.", layer, "/mlp/dense_h_to_4h/bias"));
        for (std::int64_t i = 0; i < b.numel; ++i)
            p[static_cast<std::size_t>(b.offset + i)] = 0.25f * static_cast<float>(i % 7) - 0.75f;
    }
    // Backward, the pass's route puts GELU's backward in fc1's output-gradient cast (delayed
    // scaling) or in a pass before it (tensorwise: the cast needs the gradient's amax first).
    Steps r[2];
    for (bool delayed : {true, false}) {
        SCOPED_TRACE(delayed ? "delayed" : "tensorwise");
        opt.fp8.delayed = delayed;
        for (bool epilogue : {false, true}) {
            opt.fp8.gelu_in_epilogue = epilogue;
            GptModel m(d, ChunkSpec{0, 2, true, true}, opt, 2, *be, *tp);
            ASSERT_EQ(m.fp8()->gelu_pass(0), !epilogue);
            m.set_parameters(p.data());
            if (delayed) {
                r[epilogue] = two_steps(m, *dp);
                continue;
            }
            auto tokens = test::random_tokens(2, m.dims().seq, 50, 11);
            m.zero_grads();
            m.fp8_weights_changed();
            m.set_batch(0, tokens.data());
            r[epilogue].loss = m.forward(0, true, 3);
            m.backward(0, 1.0f / static_cast<float>(m.tokens()));
            r[epilogue].grads.resize(static_cast<std::size_t>(m.padded_elements()));
            m.get_grads(r[epilogue].grads.data());
        }
        EXPECT_EQ(r[0].loss, r[1].loss);
        ASSERT_EQ(r[0].grads.size(), r[1].grads.size());
        EXPECT_EQ(differing(r[0].grads, r[1].grads), 0u) << "gradients differ between the GELU pass and the GELU epilogue";
        if (delayed) {
            EXPECT_EQ(r[0].history, r[1].history);
        }
    }
    opt.fp8.delayed = true;

    // In bf16 the two routes round differently, so the switch shows: some gradient differs.
    opt.dtype = DType::BF16;
    for (bool epilogue : {false, true}) {
        opt.fp8.gelu_in_epilogue = epilogue;
        GptModel m(d, ChunkSpec{0, 2, true, true}, opt, 2, *be, *tp);
        m.set_parameters(p.data());
        r[epilogue] = two_steps(m, *dp);
    }
    EXPECT_GT(differing(r[0].grads, r[1].grads), 0u) << "bf16: the GELU pass and the GELU epilogue gave the same gradients";
}

TEST(GptModelFp8, FusedInputCastUnderSequenceParallelismGathersTheCodes) {
    // Each TP rank's norm sees its half of the sequence: the codes are all-gathered as bytes
    // and each rank's amax covers its shard until end_step's reduction.
    TpPair pair;
    if (pair.world != 2) GTEST_SKIP() << "needs 2 ranks (test_model.np2)";
    auto be = make_backend("cpu", 0);
    auto self = test::self_comm("tp1"), dp = test::self_comm("dp");
    const ModelDims d1 = make_model_dims(pair.mc, 50, 1, 0), d2 = make_model_dims(pair.mc, 50, 2, pair.rank);
    GptModel full(d1, ChunkSpec{0, 2, true, true}, ModelOptions{}, 2, *be, *self);
    std::vector<float> p(static_cast<std::size_t>(full.layout().total_elements()));
    full.init_parameters_host(p.data());
    ModelOptions opt = fp8_options();
    opt.sequence_parallel = true;
    GptModel part(d2, ChunkSpec{0, 2, true, true}, opt, 2, *be, *pair.tp);
    expect_fused_equals_separate(d2, opt, *be, *pair.tp, *dp, test::take_slices(full.layout(), p, part.layout()));
}

TEST(GptModelFp8, AmaxReductionKeepsOneRanksNaN) {
    // Under the fused input cast with sequence parallelism a NaN may lie in one rank's shard
    // only: end_step's reduction over TP must keep it, on either rank (a float maximum keeps
    // or drops it depending on the operands' order).
    TpPair pair;
    if (pair.world != 2) GTEST_SKIP() << "needs 2 ranks (test_model.np2)";
    auto be = make_backend("cpu", 0);
    auto dp = test::self_comm("dp");
    const ModelDims d = make_model_dims(pair.mc, 50, 2, pair.rank);
    for (int nan_rank : {0, 1}) {
        SCOPED_TRACE(detail::concat("NaN on rank ", nan_rank));
        Fp8Linears f(*be, fp8_options().fp8, d, 0, 2, 2, 16, DType::BF16);
        const Backend::Fp8Codes c = f.input_codes(0, Linear::Qkv, true, true);
        const float v = pair.rank == nan_rank ? std::numeric_limits<float>::quiet_NaN() : 3.0f;
        be->copy_to_device(c.amax, &v, sizeof v);
        f.end_step(*pair.tp, *dp);
        const auto n = static_cast<std::size_t>(f.delayed()->tensors());
        EXPECT_TRUE(std::isnan(f.delayed()->history()[n])) << "layer 0 QKV input amax " << f.delayed()->history()[n];
    }
}

}  // namespace
}  // namespace gpt::model
