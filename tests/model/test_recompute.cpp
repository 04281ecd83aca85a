// Activation recomputation (Megatron's --recompute-granularity selective / full with the
// uniform and block methods): the same loss and bit-identical gradients as keeping every
// activation, with dropout on and two micro-batches in flight as a pipeline keeps them, and
// per-slot saved memory that falls by exactly the buffers no longer kept.
#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "core/errors.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

using Recompute = ModelOptions::Recompute;

struct Spec {
    Recompute recompute;
    bool block;
    int layers;
    std::string name() const {
        if (recompute == Recompute::None) return "none";
        if (recompute == Recompute::Selective) return "selective";
        return std::string(block ? "full block " : "full uniform ") + std::to_string(layers);
    }
};

ModelOptions with(ModelOptions opt, const Spec& s) {
    opt.recompute = s.recompute;
    opt.recompute_block = s.block;
    opt.recompute_num_layers = s.layers;
    return opt;
}

struct Passes {
    double loss0 = 0, loss1 = 0;
    std::vector<float> grads;
};

// F0 F1 B0 B1 over two slots, as a pipeline's warm-up runs them.
Passes two_in_flight(GptModel& m, const std::vector<float>& params,
                  const std::vector<std::int32_t>& a, const std::vector<std::int32_t>& b) {
    Passes r;
    m.set_parameters(params.data());
    m.zero_grads();
    m.set_batch(0, a.data());
    m.set_batch(1, b.data());
    r.loss0 = m.forward(0, true, 1);
    r.loss1 = m.forward(1, true, 2);
    m.backward(0, 0.5f / static_cast<float>(m.tokens()));
    m.backward(1, 0.5f / static_cast<float>(m.tokens()));
    r.grads.resize(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_grads(r.grads.data());
    return r;
}

TEST(Recompute, GivesBitIdenticalLossAndGrads) {
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm();
    ModelConfig mc = test::tiny::model(4);
    const ModelDims d = make_model_dims(mc, 50, 1, 0);
    const int mb = 2;
    const auto a = test::random_tokens(mb, d.seq, 50, 71);
    const auto b = test::random_tokens(mb, d.seq, 50, 72);
    for (bool flash : {false, true}) {
        ModelOptions opt;
        opt.hidden_dropout = 0.1f;
        opt.attention_dropout = 0.1f;
        opt.flash_attention = flash;
        opt.seed = 13;
        const ChunkSpec all{0, 4, true, true};
        GptModel ref(d, all, opt, mb, *be, *tp, 2);
        std::vector<float> params(static_cast<std::size_t>(ref.layout().total_elements()));
        ref.init_parameters_host(params.data());
        for (std::size_t i = 0; i < params.size(); ++i)
            params[i] += 0.03f * std::cos(0.11f * float(i));
        const Passes base = two_in_flight(ref, params, a, b);
        for (const Spec& s : {Spec{Recompute::Selective, false, 0}, Spec{Recompute::Full, false, 1},
                              Spec{Recompute::Full, false, 2}, Spec{Recompute::Full, false, 3},
                              Spec{Recompute::Full, true, 1}, Spec{Recompute::Full, true, 3},
                              Spec{Recompute::Full, false, 9}}) {
            SCOPED_TRACE(s.name() + (flash ? " flash" : " plain"));
            GptModel m(d, all, with(opt, s), mb, *be, *tp, 2);
            const Passes r = two_in_flight(m, params, a, b);
            EXPECT_EQ(r.loss0, base.loss0);
            EXPECT_EQ(r.loss1, base.loss1);
            EXPECT_EQ(0, std::memcmp(r.grads.data(), base.grads.data(), r.grads.size() * 4));
        }
    }
}

// A later pipeline stage: the first group's input is the received hidden state, and the
// chunk output (the last group's kept x_out) must survive recomputation.
TEST(Recompute, InnerChunkKeepsItsBoundaries) {
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm();
    ModelConfig mc = test::tiny::model(4);
    const ModelDims d = make_model_dims(mc, 50, 1, 0);
    ModelOptions opt;
    opt.hidden_dropout = 0.1f;
    const ChunkSpec inner{1, 3, false, false};
    const int mb = 2;
    std::vector<float> x(static_cast<std::size_t>(d.seq * mb * d.hidden)), dy(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        x[i] = std::sin(0.3f * float(i));
        dy[i] = 0.01f * std::cos(0.7f * float(i));
    }
    auto run = [&](const Spec& s, std::vector<float>& out, std::vector<float>& din) {
        GptModel m(d, inner, with(opt, s), mb, *be, *tp);
        m.init_parameters();
        m.zero_grads();
        std::memcpy(m.input_hidden(0), x.data(), x.size() * 4);
        m.forward(0, true, 3);
        out.assign(static_cast<const float*>(m.output_hidden(0)),
                   static_cast<const float*>(m.output_hidden(0)) + x.size());
        std::memcpy(m.output_grad(), dy.data(), dy.size() * 4);
        m.backward(0, 0.0f);
        EXPECT_EQ(0, std::memcmp(m.output_hidden(0), out.data(), out.size() * 4));
        din.assign(static_cast<const float*>(m.input_grad()),
                   static_cast<const float*>(m.input_grad()) + x.size());
        std::vector<float> g(static_cast<std::size_t>(m.layout().total_elements()));
        m.get_grads(g.data());
        return g;
    };
    std::vector<float> out0, din0, out1, din1;
    const auto g0 = run(Spec{Recompute::None, false, 0}, out0, din0);
    for (const Spec& s : {Spec{Recompute::Full, false, 2}, Spec{Recompute::Full, true, 2}}) {
        SCOPED_TRACE(s.name());
        const auto g1 = run(s, out1, din1);
        EXPECT_EQ(out0, out1);
        EXPECT_EQ(din0, din1);
        EXPECT_EQ(g0, g1);
    }
}

// One layer keeps, in bytes (e per element, T tokens, ffn = 4h, A the attention buffer):
//   layer = e (4 T h + 12 T h) + 16 T + A
// (LN1/LN2 outputs, x_mid, x_out; qkv, ctx, fc1 pre- and post-GELU; fp32 LN statistics).
// Per slot, besides the chunk's ends:
//   none               L layer
//   selective          L (layer - A)               (one shared A in the workspace)
//   full uniform n     ceil(L / n) e T h           (each group's input; n layers shared)
//   full block n       n e T h + (L - n) layer     (one layer shared)
// The shared set of n layers costs n layer - e T h once: its last x_out is per slot.
TEST(Recompute, SavedBytesPerSlotFallAsExpected) {
    auto be = make_backend("cpu", 0);
    ModelConfig mc = test::tiny::model(4);
    mc.seq_length = 32;  // every buffer a multiple of the plan's 256-byte alignment
    const ModelDims d = make_model_dims(mc, 50, 1, 0);
    const int mb = 2;
    ModelOptions opt;
    const std::size_t A = be->attention_saved_bytes(attention_args(d, opt, mb));
    const std::size_t e = 4, T = static_cast<std::size_t>(d.seq) * mb, h = d.hidden, L = 4;
    ASSERT_EQ(static_cast<std::size_t>(d.ffn), 4 * h);
    const std::size_t layer = e * 16 * T * h + 16 * T + A, x = e * T * h;
    const std::size_t ends = x + 4 * T + 4 * T + x + 8 * T;  // input, tokens, targets, final LN
    const ChunkSpec all{0, 4, true, true};
    const ActivationPlan none(d, all, opt, mb, A);
    ASSERT_EQ(none.saved_bytes_per_slot(), ends + L * layer);
    struct Expect {
        Spec spec;
        std::size_t per_slot, extra_workspace;
    };
    for (const Expect& c : {Expect{{Recompute::Selective, false, 0}, ends + L * (layer - A), A},
                            Expect{{Recompute::Full, false, 1}, ends + 4 * x, layer - x},
                            Expect{{Recompute::Full, false, 2}, ends + 2 * x, 2 * layer - x},
                            Expect{{Recompute::Full, false, 3}, ends + 2 * x, 3 * layer - x},
                            Expect{{Recompute::Full, true, 1}, ends + x + 3 * layer, layer - x},
                            Expect{{Recompute::Full, true, 3}, ends + 3 * x + layer, layer - x},
                            Expect{{Recompute::Full, false, 9}, ends + x, 4 * layer - x}}) {
        SCOPED_TRACE(c.spec.name());
        const ActivationPlan p(d, all, with(opt, c.spec), mb, A, 3);
        EXPECT_EQ(p.saved_bytes_per_slot(), c.per_slot);
        EXPECT_EQ(p.workspace_bytes(), none.workspace_bytes() + c.extra_workspace);
        EXPECT_EQ(p.total_bytes(), p.workspace_bytes() + 3 * c.per_slot);
    }
}

TEST(Recompute, FullNeedsALayerCount) {
    ModelOptions opt;
    opt.recompute = Recompute::Full;
    const ModelDims d = make_model_dims(test::tiny::model(), 50, 1, 0);
    EXPECT_THROW(validate_model_options(opt, d), UsageError);
    opt.recompute_num_layers = 1;
    EXPECT_NO_THROW(validate_model_options(opt, d));
}

}  // namespace
}  // namespace gpt::model
