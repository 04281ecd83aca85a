// The Llama-style options of the GPT model (rope, RMSNorm, SwiGLU, grouped-query attention,
// untied output layer, no linear biases), squared ReLU and zero-centred norms (Nemotron's),
// query-key norms (Qwen3's, OLMo-2's): the whole model's gradient against finite
// differences, alone and together, and loss and every gradient against an independent
// PyTorch implementation of the same architecture (torch_decoder_reference.py, fp64) run on
// the same weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
#include <string>

#include "core/errors.hpp"
#include "model/param_init.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

struct Variant {
    const char* name;
    void (*apply)(ModelConfig&);
};

// Every option alone on top of GPT-2 (so a bug in one is not masked by another), the
// full Llama-style set, and the remaining rope forms with biases back on.
const Variant kVariants[] = {
    {"llama", [](ModelConfig&) {}},
    {"rope_only", [](ModelConfig& m) { m = test::tiny::model(); m.num_attention_heads = 4;
                                       m.position_embedding_type = PositionEmbeddingType::Rope; m.rotary_base = 100.0; }},
    {"rmsnorm_only", [](ModelConfig& m) { m = test::tiny::model(); m.normalization = Normalization::RMSNorm; }},
    {"swiglu_only", [](ModelConfig& m) { m = test::tiny::model(); m.swiglu = true; m.ffn_hidden_size = 24; }},
    {"gqa_only", [](ModelConfig& m) { m = test::tiny::model(); m.num_attention_heads = 4;
                                      m.group_query_attention = true; m.num_query_groups = 1; }},
    {"untied_only", [](ModelConfig& m) { m = test::tiny::model(); m.untie_embeddings_and_output_weights = true; }},
    {"no_bias_only", [](ModelConfig& m) { m = test::tiny::model(); m.disable_bias_linear = true; }},
    {"partial_interleaved_rope_biases", [](ModelConfig& m) {
         m.disable_bias_linear = false; m.rotary_percent = 0.5; m.rotary_interleaved = true; }},
    {"squared_relu_only", [](ModelConfig& m) { m = test::tiny::model(); m.squared_relu = true; }},
    // Nemotron's layer: LayerNorm with zero-centred gamma (--apply-layernorm-1p), squared
    // ReLU, partial rope, untied, no biases (here with grouped-query attention too).
    {"nemotron", [](ModelConfig& m) {
         m.swiglu = false; m.squared_relu = true; m.rotary_percent = 0.5;
         m.normalization = Normalization::LayerNorm; m.apply_layernorm_1p = true; }},
    {"layernorm_1p_rmsnorm", [](ModelConfig& m) { m.apply_layernorm_1p = true; }},
    // --qk-layernorm: alone on GPT-2 (LayerNorm with biases, four heads), and in the layer of
    // Qwen3 / OLMo-2 (RMSNorm on the query and key heads of grouped-query attention, before rope).
    {"qk_layernorm_only", [](ModelConfig& m) { m = test::tiny::model(); m.num_attention_heads = 4;
                                               m.qk_layernorm = true; }},
    {"qk_rmsnorm_gqa_rope", [](ModelConfig& m) { m.qk_layernorm = true; }},
};

struct Model {
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<dist::Communicator> tp = test::self_comm();
    ModelDims dims;
    ModelOptions opt;
    std::unique_ptr<GptModel> m;
    std::vector<float> p;

    Model(const ModelConfig& cfg, float dropout, int mb = 2, std::int32_t eod_mask = -1) {
        dims = make_model_dims(cfg, 50, 1, 0);  // vocab 50 -> 64
        opt.loss_mask_token = eod_mask;
        opt.hidden_dropout = dropout;
        opt.attention_dropout = dropout;
        opt.seed = 11;
        m = std::make_unique<GptModel>(dims, ChunkSpec{0, dims.num_layers, true, true}, opt, mb, *be, *tp);
        // Init plus noise on every element: norms, biases and the gate are off their
        // trivial values, so every parameter's gradient is exercised.
        p.resize(static_cast<std::size_t>(m->layout().total_elements()));
        m->init_parameters_host(p.data());
        std::mt19937 rng(5);
        std::normal_distribution<float> n(0.0f, 0.1f);
        for (const auto& e : m->layout().entries())
            for (std::int64_t i = 0; i < e.numel; ++i) p[static_cast<std::size_t>(e.offset + i)] += n(rng);
        m->set_parameters(p.data());
    }
    // Megatron's loss_func for one micro-batch: the mean over the tokens the loss counts.
    double loss(const std::vector<std::int32_t>& tokens, bool training) {
        m->set_batch(0, tokens.data());
        return m->forward(0, training, 3) / static_cast<double>(m->loss_tokens(0));
    }
    std::vector<float> grads(const std::vector<std::int32_t>& tokens, double* loss_out = nullptr) {
        m->set_parameters(p.data());
        m->zero_grads();
        const double l = loss(tokens, true);
        if (loss_out) *loss_out = l;
        m->backward(0, 1.0f / static_cast<float>(m->loss_tokens(0)));  // objective: the mean loss
        std::vector<float> g(p.size());
        m->get_grads(g.data());
        return g;
    }
};

class DecoderArchGradient : public ::testing::TestWithParam<std::tuple<Variant, float>> {};

// Directional derivatives per parameter tensor and over all parameters, as GptModelGradient.
TEST_P(DecoderArchGradient, MatchesFiniteDifferences) {
    ModelConfig cfg = test::tiny::llama_model();
    std::get<0>(GetParam()).apply(cfg);
    Model M(cfg, std::get<1>(GetParam()));
    const auto tokens = test::random_tokens(2, M.dims.seq, 50, 6);
    const std::vector<float> g = M.grads(tokens);
    std::mt19937 rng(9);
    std::normal_distribution<double> n01(0.0, 1.0);
    auto check = [&](std::int64_t begin, std::int64_t end, const std::string& what) {
        // Direction: the analytic gradient plus an equally large random part, unit norm.
        std::vector<double> v(static_cast<std::size_t>(end - begin));
        double gn = 0, vn = 0, analytic = 0;
        for (std::int64_t i = begin; i < end; ++i) gn += double(g[i]) * g[i];
        gn = std::sqrt(gn) + 1e-30;
        for (std::size_t i = 0; i < v.size(); ++i)
            v[i] = g[begin + static_cast<std::int64_t>(i)] / gn + n01(rng) / std::sqrt(double(v.size()));
        for (double x : v) vn += x * x;
        vn = std::sqrt(vn);
        for (std::size_t i = 0; i < v.size(); ++i) analytic += (v[i] /= vn) * g[begin + static_cast<std::int64_t>(i)];
        auto at = [&](double step) {
            std::vector<float> q = M.p;
            for (std::size_t i = 0; i < v.size(); ++i)
                q[begin + static_cast<std::int64_t>(i)] += static_cast<float>(step * v[i]);
            M.m->set_parameters(q.data());
            return M.loss(tokens, true);
        };
        // Richardson-extrapolated central differences (the eps^2 term cancels). The floor is
        // the fp32 loss's rounding: sigma ~ u |loss| = 6e-8 x 4.2 = 2.5e-7 per evaluation,
        // which (4 d2 - d1) / 3 carries as about 2.1 sigma / eps = 5e-5; 1e-4 is twice that
        // (a wrong gradient in any tensor is off by far more: see the planted bugs).
        const double eps = 1e-2;
        const double d1 = (at(eps) - at(-eps)) / (2 * eps);
        const double d2 = (at(eps / 2) - at(-eps / 2)) / eps;
        const double fd = (4 * d2 - d1) / 3;
        EXPECT_NEAR(analytic, fd, 1e-3 * std::abs(fd) + 1e-4) << what;
    };
    for (const auto& e : M.m->layout().entries()) check(e.offset, e.offset + e.numel, e.name);
    for (int i = 0; i < 2; ++i) check(0, M.m->layout().total_elements(), "all parameters");
}

INSTANTIATE_TEST_SUITE_P(
    Options, DecoderArchGradient,
    ::testing::Combine(::testing::ValuesIn(kVariants), ::testing::Values(0.0f, 0.1f)),
    [](const auto& info) {
        return std::string(std::get<0>(info.param).name) + (std::get<1>(info.param) > 0 ? "_dropout" : "");
    });

TEST(DecoderArch, LayoutHasMegatronsParametersAndNoOthers) {
    Model M(test::tiny::llama_model(), 0.0f);
    const ParamLayout& L = M.m->layout();
    EXPECT_EQ(L.find(ParamLayout::position_embeddings()), nullptr);  // rope: no table
    EXPECT_EQ(L.find(ParamLayout::final_ln_bias()), nullptr);        // RMSNorm: no bias
    EXPECT_NE(L.find(ParamLayout::output_layer()), nullptr);         // untied head
    for (const auto& e : L.entries()) EXPECT_EQ(e.name.find("bias"), std::string::npos) << e.name;
    // QKV [ng, np/ng + 2, hn] rows: 4 query heads + 2 keys + 2 values of 4 dims.
    EXPECT_EQ(L.at(ParamLayout::layer_prefix(0) + "self_attention/query_key_value/weight").global_shape,
              (std::vector<std::int64_t>{32, 16}));
    EXPECT_EQ(L.at(ParamLayout::layer_prefix(0) + "mlp/dense_h_to_4h/weight").global_shape,
              (std::vector<std::int64_t>{2, 24, 16}));
}

// --apply-layernorm-1p: a norm scales by 1 + weight, so its weights start at 0 (Megatron's
// reset_parameters), for LayerNorm and RMSNorm; without it they start at 1.
TEST(DecoderArch, ZeroCenteredNormWeightsStartAtZero) {
    for (const bool rms : {false, true})
        for (const bool one_p : {false, true}) {
            ModelConfig cfg = rms ? test::tiny::llama_model() : test::tiny::model();
            cfg.apply_layernorm_1p = one_p;
            const ModelDims d = make_model_dims(cfg, 50, 1, 0);
            const ParamLayout layout(d, ChunkSpec{0, d.num_layers, true, true});
            std::vector<float> p(static_cast<std::size_t>(layout.total_elements()));
            init_parameters(layout, d, 0.02, 1, p.data());
            int norms = 0;
            for (const auto& e : layout.entries()) {
                if (e.name.find("layernorm/weight") == std::string::npos) continue;
                ++norms;
                for (std::int64_t i = 0; i < e.numel; ++i)
                    ASSERT_EQ(p[static_cast<std::size_t>(e.offset + i)], one_p ? 0.0f : 1.0f) << e.name;
            }
            EXPECT_EQ(norms, 2 * d.num_layers + 1);
        }
}

TEST(DecoderArch, CpuRefusesBadCombinationsNamingTheFlags) {
    auto expect_usage = [](ModelConfig m, int tp, const std::string& what) {
        try {
            make_model_dims(m, 50, tp, 0);
            ADD_FAILURE() << "accepted: " << what;
        } catch (const UsageError& e) {
            EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
        }
    };
    ModelConfig m = test::tiny::llama_model();
    m.num_query_groups = 3;
    expect_usage(m, 1, "--num-query-groups");
    m = test::tiny::llama_model();
    expect_usage(m, 4, "--num-query-groups 2 is not divisible by --tensor-model-parallel-size 4");
    m = test::tiny::llama_model();
    m.rotary_percent = 0.25;  // 1 of 4 dims: odd
    expect_usage(m, 1, "--rotary-percent");
    m.rotary_percent = 1.5;
    expect_usage(m, 1, "--rotary-percent");
}

// ---- the PyTorch reference -------------------------------------------------------------

void write_tensor(std::ofstream& f, const std::string& name, const std::vector<std::int64_t>& shape,
                  const float* data) {
    std::int64_t n = 1;
    for (auto s : shape) n *= s;
    f << name << " " << shape.size();
    for (auto s : shape) f << " " << s;
    f << "\n";
    f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(n * sizeof(float)));
    f << "\n";
}

// One variant's side of a PyTorch comparison: the model, its loss and gradients, and the
// files torch_decoder_reference.py reads and writes for it.
struct TorchCase {
    const Variant* v = nullptr;
    std::unique_ptr<Model> model;
    double loss = 0;
    std::vector<float> g;
    std::string in, out;
};

// eod >= 0: --eod-mask-loss with that token, which `tokens` holds at some inputs. Every
// variant's files go to one Python process: importing torch costs about 2 s a run.
void expect_pytorch_match(const std::vector<const Variant*>& variants, const std::vector<std::int32_t>& tokens,
                          std::int32_t eod) {
    const char* src = std::getenv("GPT_TEST_SOURCE_DIR");
    ASSERT_NE(src, nullptr) << "GPT_TEST_SOURCE_DIR is set by ctest";
    std::vector<TorchCase> cases(variants.size());
    std::string cmd = "/usr/bin/python3 " + std::string(src) + "/tests/model/torch_decoder_reference.py";
    for (std::size_t k = 0; k < variants.size(); ++k) {
        TorchCase& c = cases[k];
        c.v = variants[k];
        ModelConfig cfg = test::tiny::llama_model();
        c.v->apply(cfg);
        c.model = std::make_unique<Model>(cfg, 0.0f, 2, eod);
        Model& M = *c.model;
        c.g = M.grads(tokens, &c.loss);
        const std::string dir = ::testing::TempDir() + "decoder_arch_" + std::to_string(k);
        c.in = dir + "_in.bin";
        c.out = dir + "_out.bin";
        {
            std::ofstream f(c.in, std::ios::binary);
            const ModelDims& d = M.dims;
            f << "config layers " << d.num_layers << " hidden " << d.hidden << " heads " << d.heads
              << " groups " << d.groups() << " ffn " << d.ffn << " vocab " << d.vocab_padded
              << " seq " << d.seq << " batch 2 rope " << d.rope << " rotary_dim " << d.rotary_dim
              << " rotary_base " << d.rotary_base << " interleaved " << d.rotary_interleaved
              << " rmsnorm " << d.rmsnorm << " layernorm_1p " << d.layernorm_1p << " swiglu " << d.swiglu
              << " squared_relu " << d.squared_relu << " qk_layernorm " << d.qk_layernorm
              << " untied " << d.untied_output
              << " eps " << M.opt.layernorm_eps << " tanh_gelu " << M.opt.tanh_gelu << " eod " << eod << "\n";
            f << "tokens";
            for (auto t : tokens) f << " " << t;
            f << "\n";
            for (const auto& e : M.m->layout().entries())
                write_tensor(f, e.name, e.global_shape, M.p.data() + e.offset);
        }
        cmd += " " + c.in + " " + c.out;
    }
    ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
    for (TorchCase& c : cases) {
        SCOPED_TRACE(c.v->name);
        Model& M = *c.model;
        const double loss = c.loss;
        const std::vector<float>& g = c.g;
        std::ifstream f(c.out, std::ios::binary);
        std::string word;
        double ref_loss = 0;
        f >> word >> ref_loss;
        ASSERT_EQ(word, "loss");
        // fp32 model against fp64 PyTorch: a few hundred roundings of O(1) values along the
        // longest chain (2 layers, softmax over 64 logits) stay below 1e-5 relative.
        EXPECT_NEAR(loss, ref_loss, 1e-5 * std::abs(ref_loss));
        int seen = 0;
        std::string name;
        std::size_t ndim = 0;
        std::map<std::string, double> weight_scale;  // by the tensor's prefix
        while (f >> name >> ndim) {
            std::int64_t n = 1;
            for (std::size_t k = 0; k < ndim; ++k) {
                std::int64_t s = 0;
                f >> s;
                n *= s;
            }
            f.get();
            std::vector<float> ref(static_cast<std::size_t>(n));
            f.read(reinterpret_cast<char*>(ref.data()), static_cast<std::streamsize>(n * sizeof(float)));
            const ParamEntry& e = M.m->layout().at(name);
            ASSERT_EQ(e.numel, n) << name;
            // Each gradient element against the tensor's scale: the same fp32 error analysis,
            // relative to the largest element (elements near zero carry absolute error). A
            // bias's gradient sums the same output gradients dy as its weight's (sum dy against
            // sum dy x, x of unit size after a norm), so it carries the same absolute rounding
            // error: its scale is at least the weight's. That matters where it is zero in exact
            // arithmetic: the key norm's bias without rope adds q.beta to every score of a
            // softmax row, which the softmax ignores, so fp64 gives 1e-18 and fp32 the rounding
            // of that sum, 1e-9 against the weight gradient's 3e-2.
            double scale = 0;
            for (float r : ref) scale = std::max(scale, double(std::abs(r)));
            if (name.ends_with("/bias")) {
                const auto w = weight_scale.find(name.substr(0, name.size() - 5));
                if (w != weight_scale.end()) scale = std::max(scale, w->second);
            }
            if (name.ends_with("/weight")) weight_scale[name.substr(0, name.size() - 7)] = scale;
            int bad = 0;
            for (std::int64_t i = 0; i < n; ++i)
                if (!(std::abs(g[e.offset + i] - ref[i]) <= 1e-4 * scale + 1e-9)) ++bad;
            EXPECT_EQ(bad, 0) << name << ": " << bad << " of " << n << " elements differ from PyTorch";
            ++seen;
        }
        EXPECT_EQ(seen, static_cast<int>(M.m->layout().entries().size()));
    }
}

const int kSeq = test::tiny::llama_model().seq_length;

TEST(DecoderArch, LossAndGradientsMatchPyTorch) {
    expect_pytorch_match({&kVariants[0], &kVariants[7], &kVariants[9], &kVariants[11], &kVariants[12]},
                         test::random_tokens(2, kSeq, 50, 8), -1);
}

// --eod-mask-loss against PyTorch's Megatron loss_func (loss_mask = inputs != eod, the mean
// over the counted tokens): the EOD at inputs of both samples, unequally (sample 0 at 2, 3
// and its last input 7; sample 1 at 5), and as sample 0's last token (a target only, never
// an input: that prediction counts).
TEST(DecoderArch, EodMaskedLossAndGradientsMatchPyTorch) {
    std::vector<std::int32_t> tokens = test::random_tokens(2, kSeq, 50, 8);
    const std::int32_t eod = 49;
    for (auto& t : tokens) t = t == eod ? 0 : t;
    for (int at : {2, 3, 7, 8, kSeq + 1 + 5}) tokens.at(static_cast<std::size_t>(at)) = eod;
    expect_pytorch_match({&kVariants[0]}, tokens, eod);
}

}  // namespace
}  // namespace gpt::model
