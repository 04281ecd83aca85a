// Parameter counts against hand-computed GPT-2 / Megatron numbers.
#include <gtest/gtest.h>

#include "config/config.hpp"
#include "core/errors.hpp"
#include "plan/model_shape.hpp"
#include "plan/planner.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

TEST(ModelShape, Gpt2XlMatchesPublishedCount) {
    // GPT-2 1.5B (XL): 48 layers, h 1600, 25 heads, 1024 positions. Unpadded vocabulary
    // 50257 gives OpenAI/Hugging Face's 1,557,611,200 parameters:
    // 48 (12 h^2 + 13 h) + 50257 h + 1024 h + 2h.
    ModelShape m = gpt(48, 1600, 25, 1024, DType::F32);
    m.vocab_divisible_by = 1;
    EXPECT_EQ(total_params(m), 1557611200);
    // Megatron pads the vocabulary to 50304 (a multiple of 128): 47 more rows of h.
    m.vocab_divisible_by = 128;
    EXPECT_EQ(padded_vocab(m, 1), 50304);
    EXPECT_EQ(total_params(m), 1557611200 + 47 * 1600);
}

TEST(ModelShape, Gpt22bCount) {
    // 48 x (12 x 6144^2 + 13 x 6144) + 50304 x 6144 + 2048 x 6144 + 2 x 6144
    //   = 21,747,105,792 + 309,067,776 + 12,582,912 + 12,288 = 22,068,768,768.
    ModelShape m = gpt22b();
    EXPECT_EQ(total_params(m), 22068768768);
}

TEST(ModelShape, VocabPaddedPerTensorParallelSize) {
    ModelShape m = gpt22b();
    EXPECT_EQ(padded_vocab(m, 1), 50304);   // 393 x 128
    EXPECT_EQ(padded_vocab(m, 8), 51200);   // multiple of 1024
    EXPECT_EQ(padded_vocab(m, 3), 50304);   // multiple of 384: 131 x 384
}

TEST(ModelShape, LayerSplitAcrossTensorParallelRanks) {
    ModelShape m = gpt(2, 64, 4, 32);
    const std::int64_t h = 64, f = 256;
    // TP 1: the whole layer, 4h^2 + 2fh + 9h + f (= 12h^2 + 13h for f = 4h).
    EXPECT_EQ(layer_params_per_rank(m, 1), 12 * h * h + 13 * h);
    // TP 4: QKV and fc1 (weights and biases) and the dense/fc2 weights split; the two
    // LayerNorms and the dense/fc2 biases replicated.
    std::int64_t tp4 = (3 * h * h + 3 * h) / 4 + h * h / 4 + h + (f * h + f) / 4 + h * f / 4 + h + 4 * h;
    EXPECT_EQ(layer_params_per_rank(m, 4), tp4);
    // Sum over ranks exceeds the model by the replicated pieces: 3 x (4h + 2h).
    EXPECT_EQ(4 * layer_params_per_rank(m, 4) - layer_params_per_rank(m, 1), 3 * 6 * h);
}

TEST(ModelShape, StagesHoldEmbeddingsAndHead) {
    ModelShape m = gpt22b();
    const std::int64_t h = 6144, word8 = 51200 / 8 * h;
    StageParams first = stage_params(m, 8, 4, 0), mid = stage_params(m, 8, 4, 1), last = stage_params(m, 8, 4, 3);
    EXPECT_EQ(first.embedding, word8 + 2048 * h);
    EXPECT_EQ(first.lm_head, 0);
    EXPECT_EQ(mid.embedding + mid.final_norm + mid.lm_head, 0);
    EXPECT_EQ(mid.layers, 12 * layer_params_per_rank(m, 8));
    EXPECT_EQ(last.final_norm, 2 * h);
    EXPECT_EQ(last.lm_head, word8);  // tied copy of the word-embedding shard
    // One stage: one copy of everything, no separate head.
    StageParams only = stage_params(m, 1, 1, 0);
    EXPECT_EQ(only.lm_head, 0);
    EXPECT_EQ(only.total(), total_params(m));
}

// TinyLlama 1.1B (rope, RMSNorm, SwiGLU, 4 K/V groups, untied, no biases): per layer
// 2h + (a + 2g) hn h + h^2 + 2 f h + f h = 4096 + 5,242,880 + 4,194,304 + 23,068,672 +
// 11,534,336 = 44,044,288; x 22 + 2 x 32000 x 2048 + 2048 = 1,100,048,384, its published count.
// configs/llama-style-1b.ini is that shape; TinyLlama's 32000-token vocabulary is given as
// the file's own example command line gives it (--vocab-size 32000).
TEST(ModelShape, TinyLlamaMatchesPublishedCount) {
    Config c = shipped_config("llama-style-1b");
    c.model.vocab_size = 32000;
    const ModelShape m = model_shape_from_config(c);
    EXPECT_EQ(total_params(m), 1100048384);
    // Two stages at TP 2: the halves of every split tensor, the norms whole, the output
    // layer on the last stage.
    std::int64_t sum = 0;
    for (int s = 0; s < 2; ++s) sum += stage_params(m, 2, 2, s).total();
    EXPECT_EQ(sum, (1100048384 - 22 * 2 * 2048 - 2048) / 2 + 22 * 2 * 2048 + 2048);
}

// The planner models the Llama-style options (the memory model byte for byte against real
// runs: tests/train/test_memory_prediction's llama rows): each is planned, and the shape
// carries the widths the memory and time models read.
TEST(ModelShape, PlansTheDecoderOptions) {
    Config c;
    c.model.num_layers = 2;
    c.model.hidden_size = 64;
    c.model.num_attention_heads = 4;
    c.model.seq_length = 32;
    const SearchInputs gpt = search_inputs_from_config(c, 8, 8, true);
    EXPECT_EQ(qkv_rows(gpt.model), 3 * 64);
    EXPECT_EQ(fc1_rows(gpt.model), 4 * 64);
    EXPECT_FALSE(gpt.model.squared_relu);
    c.model.squared_relu = true;
    EXPECT_TRUE(search_inputs_from_config(c, 8, 8, true).model.squared_relu);
    c.model.squared_relu = false;
    c.model.qk_layernorm = true;
    EXPECT_TRUE(search_inputs_from_config(c, 8, 8, true).model.qk_layernorm);
    c.model.qk_layernorm = false;
    c.model.position_embedding_type = PositionEmbeddingType::Rope;
    c.model.normalization = Normalization::RMSNorm;
    c.model.swiglu = true;
    c.model.ffn_hidden_size = 160;
    c.model.group_query_attention = true;
    c.model.num_query_groups = 2;
    c.model.untie_embeddings_and_output_weights = true;
    c.model.disable_bias_linear = true;
    const SearchInputs llama = search_inputs_from_config(c, 8, 8, true);
    EXPECT_EQ(qkv_rows(llama.model), (4 + 2 * 2) * 16);
    EXPECT_EQ(fc1_rows(llama.model), 2 * 160);
    EXPECT_FALSE(llama.model.position_table);
    EXPECT_TRUE(llama.model.rmsnorm && llama.model.untied_output && !llama.model.linear_bias);
}

}  // namespace
}  // namespace gpt::plan::test
