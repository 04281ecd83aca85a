// Sequence parallelism (Megatron's --sequence-parallel): on as many TP ranks as the test
// has processes it computes the 1-rank model's loss and gradients (hidden dropout masks
// included), moves the communication Megatron moves, and keeps 1/tp of the residual
// stream's activations. Registered as test_model.np2; the 1-process run checks the plan
// and the option validation only.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <random>

#include "core/errors.hpp"
#include "dist/comm_mpi.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

// The world as one TP group, the same ranks' 1-rank group, and the tiny model for both.
struct SpFixture {
    int world = 1, rank = 0;
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<dist::Communicator> self = test::self_comm("tp1");
    std::unique_ptr<dist::MpiCommunicator> tp;
    ModelConfig mc = test::tiny::model();
    ModelDims d1, dn;
    int mb = 2;

    SpFixture() {
        MPI_Comm_size(MPI_COMM_WORLD, &world);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank);
        MPI_Comm dup;
        MPI_Comm_dup(MPI_COMM_WORLD, &dup);
        tp = std::make_unique<dist::MpiCommunicator>(dup, "tp");
        mc.num_attention_heads = 4;
        d1 = make_model_dims(mc, 50, 1, 0);
        dn = make_model_dims(mc, 50, world, rank);
    }
    // Rows [first, first + rows) of the (T, h) residual stream on this TP rank.
    std::int64_t rows(const GptModel& m) const { return m.hidden_rows(); }
    std::int64_t first_row(const GptModel& m) const { return m.hidden_rows() * rank; }
};

std::vector<float> perturbed_params(const GptModel& m) {
    std::vector<float> p(static_cast<std::size_t>(m.layout().total_elements()));
    m.init_parameters_host(p.data());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.05f * std::sin(0.37f * float(i));
    return p;
}

struct Pass {
    double loss = 0;
    std::vector<float> grads;
};

// One training micro-batch through a whole model, then the once-per-iteration SP reduction.
Pass train_step(GptModel& m, const std::vector<std::int32_t>& tokens, std::uint64_t stream) {
    Pass r;
    m.zero_grads();
    m.set_batch(0, tokens.data());
    r.loss = m.forward(0, true, stream);
    m.backward(0, 1.0f / static_cast<float>(m.tokens()));
    m.reduce_tp_partial_grads();
    r.grads.resize(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_grads(r.grads.data());
    return r;
}

// Every entry of `got` against `want` (both in got's layout): elementwise, and as a
// relative error of the entry's norm below rel.
void expect_grads_near(const ParamLayout& layout, const std::vector<float>& got,
                       const std::vector<float>& want, double rel) {
    for (const auto& e : layout.entries()) {
        double num = 0, den = 0;
        for (std::int64_t i = 0; i < e.numel; ++i) {
            const std::size_t k = static_cast<std::size_t>(e.offset + i);
            ASSERT_NEAR(got[k], want[k], 1e-6 + 1e-4 * std::abs(want[k])) << e.name << " " << i;
            num += std::pow(double(got[k]) - want[k], 2);
            den += double(want[k]) * want[k];
        }
        EXPECT_LE(std::sqrt(num), rel * std::sqrt(den) + 1e-9) << e.name;
    }
}

std::uint64_t calls(const dist::Communicator& c, dist::CommOp op) {
    return c.stats().calls[static_cast<int>(op)];
}

// Hidden dropout on: the shards must draw exactly the 1-rank masks. (Attention dropout is
// per TP rank by design, so it stays off here; see SequenceParallelOnEqualsOff.)
TEST(SequenceParallel, MatchesOneRankLossAndGrads) {
    SpFixture f;
    if (f.world < 2) GTEST_SKIP() << "needs >= 2 ranks (registered as test_model.np2)";
    ModelOptions opt;
    opt.hidden_dropout = 0.1f;
    opt.seed = 3;
    ModelOptions sp = opt;
    sp.sequence_parallel = true;
    const ChunkSpec all{0, 2, true, true};
    GptModel full(f.d1, all, opt, f.mb, *f.be, *f.self);
    GptModel part(f.dn, all, sp, f.mb, *f.be, *f.tp);
    EXPECT_EQ(part.hidden_rows() * f.world, part.tokens());
    const auto p = perturbed_params(full);
    full.set_parameters(p.data());
    const auto mine = test::take_slices(full.layout(), p, part.layout());
    part.set_parameters(mine.data());

    const auto tokens = test::random_tokens(f.mb, f.d1.seq, 50, 7);
    const Pass one = train_step(full, tokens, 5);
    f.tp->reset_stats();
    const Pass spr = train_step(part, tokens, 5);
    EXPECT_NEAR(one.loss, spr.loss, 1e-5 * std::abs(one.loss));
    EXPECT_GT(one.loss, 1.0);
    // Megatron's pattern with L = 2 layers. All-gathers: forward 2 per layer + the head's
    // input; backward per layer 2 for the row-parallel output grads + 2 re-gathers of the
    // saved layernorm shards, the head's re-gather and the embedding split's backward.
    // Reduce-scatters: forward 2 per layer; backward 2 per layer + the head's input grad.
    // All-reduces: only the embedding and the 3 cross-entropy reductions in the passes;
    // the rest are reduce_tp_partial_grads'.
    using dist::CommOp;
    EXPECT_EQ(calls(*f.tp, CommOp::AllGather), 2u * 2 + 1 + 4u * 2 + 1 + 1);
    EXPECT_EQ(calls(*f.tp, CommOp::ReduceScatter), 2u * 2 + 2u * 2 + 1);
    EXPECT_GT(calls(*f.tp, CommOp::AllReduce), 1u + 3);
    const auto want = test::take_slices(full.layout(), one.grads, part.layout());
    expect_grads_near(part.layout(), spr.grads, want, 1e-5);
}

// A chunk between pipeline stages: the boundary tensors are this rank's sequence shard,
// the output is the 1-rank output's rows, and so is the input gradient.
TEST(SequenceParallel, InnerChunkBoundariesAreSequenceShards) {
    SpFixture f;
    if (f.world < 2) GTEST_SKIP() << "needs >= 2 ranks (registered as test_model.np2)";
    ModelOptions opt;
    opt.hidden_dropout = 0.1f;
    opt.seed = 4;
    ModelOptions sp = opt;
    sp.sequence_parallel = true;
    const ChunkSpec inner{0, 2, false, false};
    GptModel full(f.d1, inner, opt, f.mb, *f.be, *f.self);
    GptModel part(f.dn, inner, sp, f.mb, *f.be, *f.tp);
    const auto p = perturbed_params(full);
    full.set_parameters(p.data());
    const auto mine = test::take_slices(full.layout(), p, part.layout());
    part.set_parameters(mine.data());

    const std::int64_t T = full.tokens(), h = f.d1.hidden, R = f.rows(part), r0 = f.first_row(part);
    std::mt19937 rng(12);
    std::normal_distribution<float> n01(0.0f, 1.0f);
    std::vector<float> x(static_cast<std::size_t>(T * h)), dy(x.size());
    for (auto& v : x) v = n01(rng);
    for (auto& v : dy) v = 0.01f * n01(rng);
    auto shard = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin() + r0 * h, v.begin() + (r0 + R) * h);
    };
    auto as_vec = [](const void* p, std::int64_t n) {
        const float* f32 = static_cast<const float*>(p);
        return std::vector<float>(f32, f32 + n);
    };
    std::vector<float> out[2], din[2], grads[2];
    GptModel* models[2] = {&full, &part};
    for (int k = 0; k < 2; ++k) {
        GptModel& m = *models[k];
        const std::vector<float> xin = k == 0 ? x : shard(x), g = k == 0 ? dy : shard(dy);
        ASSERT_EQ(static_cast<std::int64_t>(xin.size()), m.hidden_rows() * h);
        m.zero_grads();
        std::copy(xin.begin(), xin.end(), static_cast<float*>(m.input_hidden(0)));
        m.forward(0, true, 9);
        out[k] = as_vec(m.output_hidden(0), m.hidden_rows() * h);
        std::copy(g.begin(), g.end(), static_cast<float*>(m.output_grad()));
        m.backward(0, 0.0f);
        m.reduce_tp_partial_grads();
        din[k] = as_vec(m.input_grad(), m.hidden_rows() * h);
        grads[k].resize(static_cast<std::size_t>(m.layout().total_elements()));
        m.get_grads(grads[k].data());
    }
    const auto out_rows = shard(out[0]), din_rows = shard(din[0]);
    for (std::size_t i = 0; i < out_rows.size(); ++i) {
        ASSERT_NEAR(out[1][i], out_rows[i], 1e-5 + 1e-5 * std::abs(out_rows[i])) << i;
        ASSERT_NEAR(din[1][i], din_rows[i], 1e-6 + 1e-4 * std::abs(din_rows[i])) << i;
    }
    const auto want = test::take_slices(full.layout(), grads[0], part.layout());
    expect_grads_near(part.layout(), grads[1], want, 1e-5);
}

// With attention dropout too (drawn per TP rank, so only TP = n runs can be compared) and
// with activation recomputation: sequence parallelism changes nothing but the rounding.
TEST(SequenceParallel, SequenceParallelOnEqualsOffWithDropoutAndRecompute) {
    SpFixture f;
    if (f.world < 2) GTEST_SKIP() << "needs >= 2 ranks (registered as test_model.np2)";
    ModelOptions opt;
    opt.hidden_dropout = 0.1f;
    opt.attention_dropout = 0.1f;
    opt.seed = 8;
    const ChunkSpec all{0, 2, true, true};
    GptModel off(f.dn, all, opt, f.mb, *f.be, *f.tp);
    const auto p = perturbed_params(off);
    off.set_parameters(p.data());
    const auto tokens = test::random_tokens(f.mb, f.d1.seq, 50, 17);
    const Pass base = train_step(off, tokens, 6);

    using R = ModelOptions::Recompute;
    struct Case {
        R recompute;
        bool block;
        int layers;
    };
    for (const Case& c : {Case{R::None, false, 0}, Case{R::Selective, false, 0},
                          Case{R::Full, false, 2}, Case{R::Full, true, 1}}) {
        ModelOptions sp = opt;
        sp.sequence_parallel = true;
        sp.recompute = c.recompute;
        sp.recompute_block = c.block;
        sp.recompute_num_layers = c.layers;
        GptModel on(f.dn, all, sp, f.mb, *f.be, *f.tp);
        on.set_parameters(p.data());
        const Pass r = train_step(on, tokens, 6);
        SCOPED_TRACE(static_cast<int>(c.recompute) * 10 + c.layers);
        EXPECT_NEAR(r.loss, base.loss, 1e-5 * std::abs(base.loss));
        expect_grads_near(on.layout(), r.grads, base.grads, 1e-5);
    }
}

// Per layer the residual-stream buffers shrink by 1/tp; the TP-split ones already had.
// With e bytes per element, R = T/tp rows and the attention buffer A (already per local
// head), one layer keeps
//   e (4 R h + 3 T h/tp + T h/tp + 2 T ffn/tp) + 4 * 4 R + A
// (LN1 and LN2 outputs, x_mid, x_out; qkv, ctx, fc1 pre- and post-GELU; fp32 LN means and
// rstds). With ffn = 4h and SP that is e 16 T h/tp + 16 T/tp + A: Korthikanti et al.'s
// sbh(34 + 5as/h)/t for fp16 less the 2 sbh of dropout masks, which Philox regenerates
// (the attention term is A: fp32 probabilities, the mask and dropped values regenerated).
TEST(SequenceParallel, ShrinksTheResidualStreamActivations) {
    ModelConfig mc = test::tiny::model();
    mc.num_attention_heads = 4;
    mc.seq_length = 32;  // every buffer a multiple of the plan's 256-byte alignment
    const int mb = 4, tp = 2;
    const ModelDims d = make_model_dims(mc, 50, tp, 0);
    auto be = make_backend("cpu", 0);
    ModelOptions opt;
    ModelOptions sp = opt;
    sp.sequence_parallel = true;
    const std::size_t A = be->attention_saved_bytes(attention_args(d, opt, mb));
    const ChunkSpec all{0, 2, true, true};
    const ActivationPlan plain(d, all, opt, mb, A), sharded(d, all, sp, mb, A);
    const std::size_t e = 4, T = static_cast<std::size_t>(d.seq) * mb, h = d.hidden, L = 2,
                      t = tp;
    ASSERT_EQ(static_cast<std::size_t>(d.ffn), 4 * h);
    auto per_slot = [&](std::size_t R) {
        const std::size_t layer = e * (4 * R * h + 12 * T * h / t) + 16 * R + A;
        // chunk input, tokens, targets, layers, final LN output and statistics
        return e * R * h + 4 * T + 4 * T + L * layer + e * R * h + 8 * R;
    };
    EXPECT_EQ(plain.saved_bytes_per_slot(), per_slot(T));
    EXPECT_EQ(sharded.saved_bytes_per_slot(), per_slot(T / t));
    EXPECT_EQ(plain.saved_bytes_per_slot() - sharded.saved_bytes_per_slot(),
              (L * (4 * e * T * h + 16 * T) + 2 * e * T * h + 8 * T) * (t - 1) / t);
    EXPECT_EQ(sharded.hidden_rows(), static_cast<std::int64_t>(T / t));
    // One rank: Megatron turns sequence parallelism off.
    const ModelDims d1 = make_model_dims(mc, 50, 1, 0);
    EXPECT_EQ(ActivationPlan(d1, all, sp, mb, A).hidden_rows(), static_cast<std::int64_t>(T));
}

TEST(SequenceParallel, RejectsASequenceThatDoesNotSplit) {
    ModelConfig mc = test::tiny::model();
    mc.num_attention_heads = 4;
    mc.seq_length = 6;
    ModelOptions sp;
    sp.sequence_parallel = true;
    const ModelDims d = make_model_dims(mc, 50, 4, 0);
    try {
        validate_model_options(sp, d);
        FAIL() << "seq 6 over 4 TP ranks was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--seq-length"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("--tensor-model-parallel-size"), std::string::npos);
    }
    ModelOptions off;
    EXPECT_NO_THROW(validate_model_options(off, d));
    EXPECT_NO_THROW(validate_model_options(sp, make_model_dims(mc, 50, 2, 0)));
}

}  // namespace
}  // namespace gpt::model
