// The whole model on the CPU backend: forward against a plain fp64 reference, backward
// against finite differences, flash vs plain attention, pipeline-style chunking,
// determinism, and half precision tracking fp32.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "model_test_util.hpp"

namespace gpt::model {
namespace {

struct Fixture {
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<dist::Communicator> tp = test::self_comm();
    ModelDims dims;
    ModelOptions opt;
    int mb = 2;

    explicit Fixture(DType dtype = DType::F32, float dropout = 0.0f, bool flash = false) {
        dims = make_model_dims(test::tiny::model(), 50, 1, 0);  // vocab 50 -> 64
        opt.dtype = dtype;
        opt.hidden_dropout = dropout;
        opt.attention_dropout = dropout;
        opt.flash_attention = flash;
        opt.seed = 11;
    }
    std::unique_ptr<GptModel> make(ChunkSpec c = {0, 2, true, true}) {
        return std::make_unique<GptModel>(dims, c, opt, mb, *be, *tp);
    }
};

// Init plus noise on every element, so biases and layernorm are not at their trivial
// values and every parameter's gradient is exercised.
std::vector<float> noisy_params(const GptModel& m, unsigned seed, float noise = 0.1f) {
    std::vector<float> p(static_cast<std::size_t>(m.layout().total_elements()));
    m.init_parameters_host(p.data());
    std::mt19937 rng(seed);
    std::normal_distribution<float> n(0.0f, noise);
    for (const auto& e : m.layout().entries())
        for (std::int64_t i = 0; i < e.numel; ++i) p[static_cast<std::size_t>(e.offset + i)] += n(rng);
    return p;
}

double loss_of(GptModel& m, const std::vector<std::int32_t>& tokens, bool training,
               std::uint64_t stream = 3) {
    m.set_batch(0, tokens.data());
    return m.forward(0, training, stream) / static_cast<double>(m.tokens());
}

TEST(GptModel, ForwardMatchesFp64Reference) {
    for (bool flash : {false, true}) {
        for (bool tanh_gelu : {false, true}) {
            Fixture f(DType::F32, 0.0f, flash);
            f.opt.tanh_gelu = tanh_gelu;
            auto m = f.make();
            auto p = noisy_params(*m, 1);
            m->set_parameters(p.data());
            auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 2);
            const double ours = loss_of(*m, tokens, false);
            const double ref = test::reference_loss(*m, p, tokens, tanh_gelu);
            EXPECT_NEAR(ours, ref, 2e-5 * std::abs(ref)) << "flash " << flash << " tanh " << tanh_gelu;
        }
    }
    // At Megatron's init the loss is close to log(vocab): the head starts near uniform.
    Fixture f;
    auto m = f.make();
    m->init_parameters();
    auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 4);
    EXPECT_NEAR(loss_of(*m, tokens, false), std::log(64.0), 0.05);
}

// Directional derivatives, per parameter tensor and over all parameters at once, with
// dropout on (the mask is a pure function of the stream, so the loss is deterministic) and
// off (the backward then skips the dropout pass and sums the row-parallel bias gradients in
// the weight-gradient GEMMs).
class GptModelGradient : public ::testing::TestWithParam<float> {};

TEST_P(GptModelGradient, MatchesFiniteDifferences) {
    Fixture f(DType::F32, GetParam());
    auto m = f.make();
    auto p = noisy_params(*m, 5);
    m->set_parameters(p.data());
    auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 6);
    m->zero_grads();
    loss_of(*m, tokens, true);
    m->backward(0, 1.0f / static_cast<float>(m->tokens()));  // objective: the mean loss
    std::vector<float> g(p.size());
    m->get_grads(g.data());

    std::mt19937 rng(9);
    std::normal_distribution<double> n01(0.0, 1.0);
    auto check = [&](std::int64_t begin, std::int64_t end, const std::string& what) {
        // Direction: the analytic gradient plus an equally large random part, unit norm, so
        // the derivative is well above the finite-difference noise yet not only along g.
        std::vector<double> v(static_cast<std::size_t>(end - begin));
        double gn = 0, vn = 0;
        for (std::int64_t i = begin; i < end; ++i) gn += double(g[i]) * g[i];
        gn = std::sqrt(gn) + 1e-30;
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = g[begin + static_cast<std::int64_t>(i)] / gn + n01(rng) / std::sqrt(double(v.size()));
        for (double x : v) vn += x * x;
        vn = std::sqrt(vn);
        double analytic = 0;
        for (std::size_t i = 0; i < v.size(); ++i) {
            v[i] /= vn;
            analytic += v[i] * g[begin + static_cast<std::int64_t>(i)];
        }
        auto at = [&](double step) {
            std::vector<float> q = p;
            for (std::size_t i = 0; i < v.size(); ++i)
                q[begin + static_cast<std::int64_t>(i)] += static_cast<float>(step * v[i]);
            m->set_parameters(q.data());
            return loss_of(*m, tokens, true);
        };
        // Central differences at eps and eps/2, Richardson-extrapolated: the eps^2 error
        // term cancels, which along all parameters at once exceeds the tolerance otherwise.
        const double eps = 1e-2;
        const double d1 = (at(eps) - at(-eps)) / (2 * eps);
        const double d2 = (at(eps / 2) - at(-eps / 2)) / eps;
        const double fd = (4 * d2 - d1) / 3;
        EXPECT_NEAR(analytic, fd, 1e-3 * std::abs(fd) + 1e-5) << what;
        return std::abs(analytic - fd);
    };
    for (const auto& e : m->layout().entries()) check(e.offset, e.offset + e.numel, e.name);
    for (int i = 0; i < 4; ++i) check(0, m->layout().total_elements(), "all parameters");
}

INSTANTIATE_TEST_SUITE_P(Dropout, GptModelGradient, ::testing::Values(0.0f, 0.1f),
                         [](const auto& info) { return info.param > 0 ? "on" : "off"; });

TEST(GptModel, FlashAndPlainAttentionGiveTheSameLossAndGrads) {
    std::vector<float> grads[2];
    double loss[2];
    for (int flash = 0; flash < 2; ++flash) {
        Fixture f(DType::F32, 0.0f, flash == 1);
        auto m = f.make();
        auto p = noisy_params(*m, 21);
        m->set_parameters(p.data());
        auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 22);
        m->zero_grads();
        loss[flash] = loss_of(*m, tokens, true);
        m->backward(0, 1.0f / static_cast<float>(m->tokens()));
        grads[flash].resize(p.size());
        m->get_grads(grads[flash].data());
    }
    EXPECT_NEAR(loss[0], loss[1], 1e-5 * loss[0]);
    double num = 0, den = 0;
    for (std::size_t i = 0; i < grads[0].size(); ++i) {
        num += std::pow(double(grads[0][i]) - grads[1][i], 2);
        den += std::pow(double(grads[0][i]), 2);
    }
    EXPECT_LT(std::sqrt(num / den), 1e-4);
}

// Two chunks (as two pipeline stages would run them) reproduce the one-chunk model: same
// loss, same grads, and the tied embedding's two grads sum to the single-chunk grad.
TEST(GptModel, ChunksComposeToTheWholeModel) {
    Fixture f(DType::F32, 0.1f);
    auto whole = f.make();
    auto first = f.make(ChunkSpec{0, 1, true, false});
    auto last = f.make(ChunkSpec{1, 1, false, true});
    whole->init_parameters();
    first->init_parameters();
    last->init_parameters();
    auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 31);
    const float dl = 1.0f / static_cast<float>(whole->tokens());
    whole->zero_grads();
    const double l_whole = loss_of(*whole, tokens, true, 8);
    whole->backward(0, dl);

    first->zero_grads();
    last->zero_grads();
    first->set_batch(0, tokens.data());
    last->set_batch(0, tokens.data());
    first->forward(0, true, 8);
    const std::size_t act = static_cast<std::size_t>(whole->tokens() * f.dims.hidden) * 4;
    std::memcpy(last->input_hidden(0), first->output_hidden(0), act);
    const double l_split = last->forward(0, true, 8) / static_cast<double>(last->tokens());
    last->backward(0, dl);
    std::memcpy(first->output_grad(), last->input_grad(), act);
    first->backward(0, 0.0f);
    EXPECT_EQ(l_whole, l_split);

    std::vector<float> gw(static_cast<std::size_t>(whole->layout().total_elements()));
    std::vector<float> g1(static_cast<std::size_t>(first->layout().total_elements()));
    std::vector<float> g2(static_cast<std::size_t>(last->layout().total_elements()));
    whole->get_grads(gw.data());
    first->get_grads(g1.data());
    last->get_grads(g2.data());
    for (const auto& e : whole->layout().entries()) {
        const ParamEntry* a = first->layout().find(e.name);
        const ParamEntry* b = last->layout().find(e.name);
        const ParamEntry* head = e.name == ParamLayout::word_embeddings()
                                     ? &last->layout().at(ParamLayout::word_embeddings_for_head())
                                     : nullptr;
        for (std::int64_t i = 0; i < e.numel; ++i) {
            double v = 0;
            if (a) v += g1[static_cast<std::size_t>(a->offset + i)];
            if (b) v += g2[static_cast<std::size_t>(b->offset + i)];
            if (head) v += g2[static_cast<std::size_t>(head->offset + i)];
            ASSERT_NEAR(v, gw[static_cast<std::size_t>(e.offset + i)], 1e-6) << e.name << " " << i;
        }
    }
}

TEST(GptModel, SameSeedGivesBitIdenticalResults) {
    std::vector<float> grads[2];
    double loss[2];
    for (int run = 0; run < 2; ++run) {
        Fixture f(DType::F32, 0.1f);
        auto m = f.make();
        m->init_parameters();
        auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 41);
        m->zero_grads();
        loss[run] = loss_of(*m, tokens, true, 17);
        m->backward(0, 1.0f);
        grads[run].resize(static_cast<std::size_t>(m->layout().total_elements()));
        m->get_grads(grads[run].data());
    }
    EXPECT_EQ(loss[0], loss[1]);
    EXPECT_EQ(0, std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * 4));
    // A different dropout stream changes the result (dropout is really on).
    Fixture f(DType::F32, 0.1f);
    auto m = f.make();
    m->init_parameters();
    auto tokens = test::random_tokens(f.mb, f.dims.seq, 50, 41);
    EXPECT_NE(loss_of(*m, tokens, true, 18), loss[0]);
    EXPECT_NE(loss_of(*m, tokens, false), loss[0]);
}

TEST(GptModel, HalfPrecisionTracksFp32) {
    Fixture f32(DType::F32);
    auto m32 = f32.make();
    auto p = noisy_params(*m32, 51, 0.05f);
    auto tokens = test::random_tokens(f32.mb, f32.dims.seq, 50, 52);
    m32->set_parameters(p.data());
    m32->zero_grads();
    const double l32 = loss_of(*m32, tokens, false);
    m32->backward(0, 1.0f / static_cast<float>(m32->tokens()));
    std::vector<float> g32(p.size());
    m32->get_grads(g32.data());
    for (DType t : {DType::F16, DType::BF16}) {
        Fixture fh(t);
        auto mh = fh.make();
        mh->set_parameters(p.data());
        mh->zero_grads();
        const double lh = loss_of(*mh, tokens, false);
        // fp16 gradients need a loss scale to stay out of the subnormals; 1024 is plenty here.
        mh->backward(0, 1024.0f / static_cast<float>(mh->tokens()));
        std::vector<float> gh(p.size());
        mh->get_grads(gh.data());
        EXPECT_NEAR(lh, l32, (t == DType::F16 ? 5e-3 : 3e-2) * l32) << dtype_name(t);
        double dot = 0, n1 = 0, n2 = 0;
        for (std::size_t i = 0; i < gh.size(); ++i) {
            dot += double(gh[i]) / 1024.0 * g32[i];
            n1 += double(gh[i]) / 1024.0 * gh[i] / 1024.0;
            n2 += double(g32[i]) * g32[i];
        }
        EXPECT_GT(dot / std::sqrt(n1 * n2), 0.99) << dtype_name(t);
        EXPECT_NEAR(std::sqrt(n1 / n2), 1.0, 0.05) << dtype_name(t);
    }
}

// Pipeline schedules keep several micro-batches in flight (F0 F1 B0 B1 on the interleaved
// warm-up of the last stage): each slot's backward must see its own activations, even the
// head's logits, which live in the shared workspace. Same grads as F0 B0 F1 B1.
TEST(GptModel, MicroBatchSlotsGiveTheSameGradsInAnyOrder) {
    Fixture f(DType::F32, 0.1f);
    auto one = f.make();
    auto two = std::make_unique<GptModel>(f.dims, ChunkSpec{0, 2, true, true}, f.opt, f.mb, *f.be,
                                          *f.tp, 2);
    const std::vector<float> params = noisy_params(*one, 5);
    one->set_parameters(params.data());
    two->set_parameters(params.data());
    const auto a = test::random_tokens(f.mb, f.dims.seq, 50, 61);
    const auto b = test::random_tokens(f.mb, f.dims.seq, 50, 62);
    one->set_batch(0, a.data());
    const double la = one->forward(0, true, 1);
    one->backward(0, 0.5f);
    one->set_batch(0, b.data());
    const double lb = one->forward(0, true, 2);
    one->backward(0, 0.5f);
    two->set_batch(0, a.data());
    two->set_batch(1, b.data());
    EXPECT_EQ(two->forward(0, true, 1), la);
    EXPECT_EQ(two->forward(1, true, 2), lb);
    two->backward(0, 0.5f);
    two->backward(1, 0.5f);
    std::vector<float> g1(static_cast<std::size_t>(one->layout().total_elements())), g2(g1.size());
    one->get_grads(g1.data());
    two->get_grads(g2.data());
    EXPECT_EQ(0, std::memcmp(g1.data(), g2.data(), g1.size() * 4));
}

}  // namespace
}  // namespace gpt::model
