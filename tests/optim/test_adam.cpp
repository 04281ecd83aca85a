// The mixed-precision Adam step against a plain reference: decoupled weight decay only on
// matrices, unscaling, clipping by the global norm, skipping on overflow.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "model_test_util.hpp"
#include "optim/adam.hpp"

namespace gpt::optim {
namespace {

struct TinyModel {
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<dist::Communicator> tp = test::self_comm("tp");
    std::unique_ptr<dist::Communicator> mp = test::self_comm("mp");
    std::unique_ptr<model::GptModel> m;
    explicit TinyModel(DType dtype, const ModelConfig& cfg = test::tiny::model()) {
        model::ModelOptions opt;
        opt.dtype = dtype;
        m = std::make_unique<model::GptModel>(model::make_model_dims(cfg, 50, 1, 0),
                                              model::ChunkSpec{0, 2, true, true}, opt, 1, *be, *tp);
        m->init_parameters();
    }
    std::vector<float> set_random_grads(unsigned seed, float stddev) {
        std::vector<float> g(static_cast<std::size_t>(m->layout().total_elements()), 0.0f);
        std::mt19937 rng(seed);
        std::normal_distribution<float> n(0.0f, stddev);
        for (const auto& e : m->layout().entries())
            for (std::int64_t i = 0; i < e.numel; ++i) g[static_cast<std::size_t>(e.offset + i)] = n(rng);
        be->copy_to_device(m->grads(), g.data(), g.size() * 4);
        return g;
    }
};

TEST(AdamOptimizer, MatchesReferenceWithClippingAndUnscaling) {
    TinyModel s(DType::F32);
    OptimizerConfig cfg;
    cfg.weight_decay = 0.1;
    cfg.clip_grad = 1.0;
    AdamOptimizer opt(cfg, *s.m, *s.mp);
    const std::size_t n = static_cast<std::size_t>(s.m->layout().total_elements());
    std::vector<double> p(n), m1(n, 0.0), m2(n, 0.0);
    {
        std::vector<float> p0(n);
        s.m->get_parameters(p0.data());
        for (std::size_t i = 0; i < n; ++i) p[i] = p0[i];
    }
    const double scale = 256.0, lr = 1e-2;
    for (int step = 1; step <= 3; ++step) {
        auto g = s.set_random_grads(step, 0.5f * static_cast<float>(scale));  // scaled grads
        double sq = 0;
        for (float x : g) sq += double(x) * x;
        const double norm = std::sqrt(sq) / scale;
        StepResult r = opt.step(lr, scale);
        ASSERT_FALSE(r.skipped);
        EXPECT_NEAR(r.grad.norm, norm, 1e-4 * norm);
        const double clip = std::min(1.0, 1.0 / (norm + 1e-6));
        ASSERT_LT(clip, 1.0);  // the case exercises clipping
        for (const auto& e : s.m->layout().entries()) {
            const double wd = e.weight_decay ? 0.1 : 0.0;
            for (std::int64_t k = 0; k < e.numel; ++k) {
                const std::size_t i = static_cast<std::size_t>(e.offset + k);
                const double gi = g[i] / scale * clip;
                m1[i] = 0.9 * m1[i] + 0.1 * gi;
                m2[i] = 0.999 * m2[i] + 0.001 * gi * gi;
                const double mh = m1[i] / (1 - std::pow(0.9, step));
                const double vh = m2[i] / (1 - std::pow(0.999, step));
                p[i] -= lr * (mh / (std::sqrt(vh) + 1e-8) + wd * p[i]);
            }
        }
    }
    std::vector<float> got(n);
    s.m->get_parameters(got.data());
    double maxerr = 0;
    for (std::size_t i = 0; i < n; ++i) maxerr = std::max(maxerr, std::abs(got[i] - p[i]));
    EXPECT_LT(maxerr, 2e-5);
    EXPECT_EQ(opt.steps(), 3);
}

TEST(AdamOptimizer, OverflowSkipsTheStepAndLeavesParametersAlone) {
    for (DType t : {DType::F32, DType::F16}) {
        TinyModel s(t);
        AdamOptimizer opt(OptimizerConfig{}, *s.m, *s.mp);
        const std::size_t n = static_cast<std::size_t>(s.m->layout().total_elements());
        std::vector<float> before(n), after(n);
        s.m->get_parameters(before.data());
        auto g = s.set_random_grads(3, 1.0f);
        g[static_cast<std::size_t>(s.m->layout().entries()[3].offset + 1)] =
            std::numeric_limits<float>::infinity();
        s.be->copy_to_device(s.m->grads(), g.data(), n * 4);
        StepResult r = opt.step(1e-3, 1.0);
        EXPECT_TRUE(r.skipped);
        EXPECT_FALSE(r.grad.finite);
        EXPECT_EQ(opt.steps(), 0);
        s.m->get_parameters(after.data());
        EXPECT_EQ(before, after);
        // A finite step moves the half model params to the rounded main params.
        s.set_random_grads(4, 1.0f);
        EXPECT_FALSE(opt.step(1e-3, 1.0).skipped);
        s.m->get_parameters(after.data());
        EXPECT_NE(before, after);
        if (t == DType::F16) {
            std::vector<float> main(n);
            s.be->copy_to_host(main.data(), opt.main_params(), n * 4);
            for (std::size_t i = 0; i < n; i += 97)
                EXPECT_NEAR(after[i], main[i], std::abs(main[i]) * 1e-3 + 1e-7);
        }
    }
}

// --apply-wd-to-qk-layernorm: the query and key norms (weights at 1, biases at 0.5 here) decay
// with it, p -= lr wd p on a step with zero gradients (Adam's own update is 0 there), and keep
// their values without it; the block's other norm weights never decay, its matrices always do.
TEST(AdamOptimizer, QkNormsDecayOnlyWithApplyWdToQkLayernorm) {
    for (const bool apply : {false, true}) {
        SCOPED_TRACE(apply ? "--apply-wd-to-qk-layernorm" : "without it");
        ModelConfig mc = test::tiny::model();
        mc.qk_layernorm = true;
        TinyModel s(DType::F32, mc);
        const std::size_t n = static_cast<std::size_t>(s.m->layout().total_elements());
        std::vector<float> before(n), after(n);
        s.m->get_parameters(before.data());
        for (const auto& e : s.m->layout().entries())
            if (e.name.ends_with("_layernorm/bias"))
                for (std::int64_t k = 0; k < e.numel; ++k) before[static_cast<std::size_t>(e.offset + k)] = 0.5f;
        s.m->set_parameters(before.data());
        OptimizerConfig cfg;
        cfg.weight_decay = 0.1;
        cfg.apply_wd_to_qk_layernorm = apply;
        AdamOptimizer opt(cfg, *s.m, *s.mp);
        s.m->zero_grads();
        ASSERT_FALSE(opt.step(1e-2, 1.0).skipped);
        s.m->get_parameters(after.data());
        int qk = 0;
        for (const auto& e : s.m->layout().entries()) {
            const bool decays = e.weight_decay || (apply && model::is_qk_norm(e));
            qk += model::is_qk_norm(e);
            for (std::int64_t k = 0; k < e.numel; ++k) {
                const auto i = static_cast<std::size_t>(e.offset + k);
                EXPECT_FLOAT_EQ(after[i], decays ? before[i] * (1.0f - 1e-3f) : before[i]) << e.name;
            }
        }
        EXPECT_EQ(qk, 2 * 2 * 2);  // q and k, weight and bias, two layers
    }
}

// --decoupled-lr: the word embeddings and the output layer step at their own learning rate,
// every other parameter at lr. One step from zero moments moves each parameter by
// lr' g / (|g| + eps) (bias-corrected, no weight decay): lr' to within eps / |g| <= 1e-5
// relative where |g| >= 1e-3, plus the rounding of parameters up to 1 in fp32 (two halves of
// an ulp, 1.2e-7), so each entry's step size names its learning rate (1e-3 or 3e-3). Tied
// (the embeddings serve as the head) and untied (the output layer is the second such tensor).
TEST(AdamOptimizer, DecoupledLrStepsTheEmbeddingsAndTheOutputLayer) {
    for (const bool untied : {false, true}) {
        SCOPED_TRACE(untied ? "untied" : "tied");
        ModelConfig mc = test::tiny::model();
        mc.untie_embeddings_and_output_weights = untied;
        TinyModel s(DType::F32, mc);
        OptimizerConfig cfg;
        cfg.weight_decay = 0.0;
        cfg.clip_grad = 0.0;
        cfg.decoupled_lr = 3e-3;
        AdamOptimizer opt(cfg, *s.m, *s.mp);
        opt.set_decoupled_lr(3e-3);
        const std::size_t n = static_cast<std::size_t>(s.m->layout().total_elements());
        std::vector<float> before(n), after(n);
        s.m->get_parameters(before.data());
        const auto g = s.set_random_grads(7, 1.0f);
        ASSERT_FALSE(opt.step(1e-3, 1.0).skipped);
        s.m->get_parameters(after.data());
        int decoupled = 0;
        for (const auto& e : s.m->layout().entries()) {
            const bool embedding_or_output = e.name == model::ParamLayout::word_embeddings() ||
                                             e.name == model::ParamLayout::output_layer();
            decoupled += embedding_or_output;
            const double lr = embedding_or_output ? 3e-3 : 1e-3;
            for (std::int64_t k = 0; k < e.numel; ++k) {
                const auto i = static_cast<std::size_t>(e.offset + k);
                if (std::abs(g[i]) < 1e-3) continue;  // eps matters there
                ASSERT_NEAR(before[i] - after[i], lr * (g[i] > 0 ? 1.0 : -1.0), 1e-5 * lr + 1.2e-7) << e.name;
            }
        }
        EXPECT_EQ(decoupled, untied ? 2 : 1);
    }
}

}  // namespace
}  // namespace gpt::optim
