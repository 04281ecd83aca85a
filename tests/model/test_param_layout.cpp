// The parameter layout and Megatron's initialisation, independent of the backend.
#include <gtest/gtest.h>

#include <cmath>

#include "core/errors.hpp"
#include "model/param_init.hpp"
#include "model/param_layout.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

ModelDims dims(int tp_size, int tp_rank) {
    ModelConfig m = test::tiny::model(3);
    m.hidden_size = 32;
    m.num_attention_heads = 4;
    return make_model_dims(m, 120, tp_size, tp_rank);  // 128 for TP 1 and 2
}

TEST(ParamLayout, CountsMegatronParametersAndAlignsEntries) {
    const ModelDims d = dims(1, 0);
    EXPECT_EQ(d.vocab_padded, 128);  // 120 padded to a multiple of 16
    ParamLayout layout(d, ChunkSpec{0, 3, true, true});
    const std::int64_t h = 32, V = 128, L = 3, P = 8;
    std::int64_t expect = V * h + P * h + L * (12 * h * h + 13 * h) + 2 * h;
    std::int64_t sum = 0, end = 0;
    for (const auto& e : layout.entries()) {
        sum += e.numel;
        EXPECT_EQ(e.offset % ParamLayout::kAlign, 0) << e.name;
        EXPECT_GE(e.offset, end) << e.name;
        end = e.offset + e.numel;
        EXPECT_EQ(e.weight_decay, e.global_shape.size() == 2) << e.name;
    }
    EXPECT_EQ(sum, expect);
    EXPECT_LE(end, layout.total_elements());
    EXPECT_EQ(layout.at("language_model/encoder/layers.2/self_attention/query_key_value/weight")
                  .global_shape,
              (std::vector<std::int64_t>{3 * h, h}));
    EXPECT_EQ(layout.entry_index(layout.at(ParamLayout::final_ln_bias()).offset),
              layout.entries().size() - 1);
}

TEST(ParamLayout, ChunksHoldTheirLayersAndTheHeadCopy) {
    const ModelDims d = dims(1, 0);
    ParamLayout first(d, ChunkSpec{0, 1, true, false});
    ParamLayout last(d, ChunkSpec{1, 2, false, true});
    EXPECT_NE(first.find(ParamLayout::word_embeddings()), nullptr);
    EXPECT_EQ(first.find(ParamLayout::final_ln_weight()), nullptr);
    EXPECT_EQ(first.find(ParamLayout::layer_prefix(1) + "input_layernorm/weight"), nullptr);
    EXPECT_EQ(last.find(ParamLayout::word_embeddings()), nullptr);
    EXPECT_NE(last.find(ParamLayout::word_embeddings_for_head()), nullptr);
    EXPECT_NE(last.find(ParamLayout::layer_prefix(2) + "mlp/dense_4h_to_h/bias"), nullptr);
}

TEST(ParamInit, TensorParallelSlicesEqualTheGlobalTensor) {
    const ModelDims d1 = dims(1, 0);
    ParamLayout full(d1, ChunkSpec{0, 3, true, true});
    std::vector<float> ref(static_cast<std::size_t>(full.total_elements()));
    init_parameters(full, d1, 0.02, 77, ref.data());
    for (int r = 0; r < 2; ++r) {
        const ModelDims d2 = dims(2, r);
        ParamLayout part(d2, ChunkSpec{0, 3, true, true});
        std::vector<float> mine(static_cast<std::size_t>(part.total_elements()));
        init_parameters(part, d2, 0.02, 77, mine.data());
        for (const auto& e : part.entries()) {
            const ParamEntry& g = full.at(e.name);
            const std::int64_t cols = e.local_shape.size() == 2 ? e.local_shape[1] : 1;
            const std::int64_t gcols = g.local_shape.size() == 2 ? g.local_shape[1] : 1;
            for (std::int64_t i = 0; i < e.numel; ++i) {
                std::int64_t row = i / cols, col = i % cols;
                if (e.split_dim == 0) row += e.slice_start;
                if (e.split_dim == 1) col += e.slice_start;
                ASSERT_EQ(mine[static_cast<std::size_t>(e.offset + i)],
                          ref[static_cast<std::size_t>(g.offset + row * gcols + col)])
                    << e.name << " rank " << r << " element " << i;
            }
        }
    }
}

TEST(ParamInit, FollowsMegatronsScheme) {
    const ModelDims d = dims(1, 0);
    ParamLayout layout(d, ChunkSpec{0, 3, true, true});
    std::vector<float> p(static_cast<std::size_t>(layout.total_elements()));
    init_parameters(layout, d, 0.02, 5, p.data());
    auto stats = [&](const std::string& name) {
        const auto& e = layout.at(name);
        double s = 0, s2 = 0;
        for (std::int64_t i = 0; i < e.numel; ++i) {
            double v = p[static_cast<std::size_t>(e.offset + i)];
            s += v;
            s2 += v * v;
        }
        return std::pair<double, double>{s / e.numel, std::sqrt(s2 / e.numel)};
    };
    auto [m0, s0] = stats(ParamLayout::word_embeddings());
    EXPECT_NEAR(m0, 0.0, 1e-3);
    EXPECT_NEAR(s0, 0.02, 0.001);
    auto [m1, s1] = stats(ParamLayout::layer_prefix(1) + "mlp/dense_4h_to_h/weight");
    EXPECT_NEAR(s1, 0.02 / std::sqrt(6.0), 0.0005);
    auto [m2, s2] = stats(ParamLayout::layer_prefix(0) + "input_layernorm/weight");
    EXPECT_EQ(m2, 1.0);
    EXPECT_EQ(s2, 1.0);
    auto [m3, s3] = stats(ParamLayout::layer_prefix(0) + "self_attention/query_key_value/bias");
    EXPECT_EQ(s3, 0.0);
    // Different parameters get different streams; a different seed changes them.
    const auto& a = layout.at(ParamLayout::layer_prefix(0) + "self_attention/dense/weight");
    const auto& b = layout.at(ParamLayout::layer_prefix(1) + "self_attention/dense/weight");
    EXPECT_NE(p[static_cast<std::size_t>(a.offset)], p[static_cast<std::size_t>(b.offset)]);
    EXPECT_NE(parameter_seed(5, a.name), parameter_seed(6, a.name));
}

TEST(ModelDims, RejectsBadShapesWithTheFlagName) {
    ModelConfig m = test::tiny::model();
    m.num_attention_heads = 3;
    try {
        make_model_dims(m, 100, 1, 0);
        FAIL() << "expected UsageError";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--num-attention-heads"), std::string::npos);
    }
    m = test::tiny::model();
    m.max_position_embeddings = 4;
    EXPECT_THROW(make_model_dims(m, 100, 1, 0), UsageError);
    EXPECT_EQ(pad_vocab_size(50257, 128, 1), 50304);
    EXPECT_EQ(pad_vocab_size(50257, 128, 2), 50432);
}

}  // namespace
}  // namespace gpt::model
