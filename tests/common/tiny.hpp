// The tiny configurations of the tests, one family: each variant is named for what it is, and
// a test changes on top of one only what it is about (its own lines say so).
//   model(layers)   the model tests' GPT-2 layer stack (hidden 16, 2 heads, seq 8)
//   llama_model()   model() with the Llama-style options
//   train()         a training run (hidden 32, 4 heads, seq 16, 40 iterations)
//   short_train()   train() for checkpoint tests (8 iterations, quiet)
//   layers4(iters)  train() on 4 layers, micro-batch 1, global batch 4: the parallel layouts
//   wide(vocab)     train() with head dim 64 (hidden 256, seq 128), the GPU kernels' tiles
//   llama_style(m)  the Llama-style options on train()'s shape
//   cli()           the small valid command line of the flag and validation tests
#pragma once

#include <string>
#include <vector>

#include "config/config.hpp"

namespace gpt::test::tiny {

// `layers` GPT-2 layers of hidden 16, 2 heads, sequence 8, vocabulary padded to 16.
inline ModelConfig model(int layers = 2) {
    ModelConfig m;
    m.num_layers = layers;
    m.hidden_size = 16;
    m.num_attention_heads = 2;
    m.seq_length = 8;
    m.make_vocab_size_divisible_by = 16;
    m.init_method_std = 0.02;
    return m;
}

// model() with the Llama-style options: 2 layers, hidden 16, 4 heads of 4 dims, 2 query groups,
// SwiGLU ffn 24, rope, RMSNorm, an untied output layer, no linear biases.
inline ModelConfig llama_model() {
    ModelConfig m = model();
    m.num_attention_heads = 4;
    m.ffn_hidden_size = 24;
    m.position_embedding_type = PositionEmbeddingType::Rope;
    m.rotary_base = 100.0;  // every rotary pair turns noticeably within 8 positions
    m.normalization = Normalization::RMSNorm;
    m.swiglu = true;
    m.group_query_attention = true;
    m.num_query_groups = 2;
    m.untie_embeddings_and_output_weights = true;
    m.disable_bias_linear = true;
    return m;
}

// A tiny training configuration (for the trainer tests' synthetic data, WalkSource).
inline Config train() {
    Config c;
    c.model.num_layers = 2;
    c.model.hidden_size = 32;
    c.model.num_attention_heads = 4;
    c.model.seq_length = 16;
    c.model.vocab_size = 61;
    c.model.make_vocab_size_divisible_by = 16;
    c.model.hidden_dropout = 0.0;
    c.model.attention_dropout = 0.0;
    c.training.micro_batch_size = 2;
    c.training.global_batch_size = 4;
    c.training.train_iters = 40;
    c.training.eval_interval = 20;
    c.training.eval_iters = 2;
    c.optimizer.lr = 1e-2;
    c.optimizer.min_lr = 1e-3;
    c.optimizer.lr_decay_style = LrDecayStyle::Cosine;
    c.optimizer.lr_warmup_iters = 4;
    c.logging.log_interval = 10;
    return c;
}

// train() for checkpoint tests: 8 iterations, no evaluation, a short warm-up, quiet logs
// (runs save and load a few iterations apart).
inline Config short_train() {
    Config c = train();
    c.training.train_iters = 8;
    c.training.eval_iters = 0;
    c.optimizer.lr_warmup_iters = 2;
    c.logging.log_interval = 1000;
    return c;
}

// train() on 4 layers (2 stages x 2 virtual stages x 1 layer) with micro-batch 1 and global
// batch 4 (4 micro-batches on one replica, 2 with DP 2), for `iters` iterations.
inline Config layers4(int iters) {
    Config c = train();
    c.model.num_layers = 4;
    c.training.micro_batch_size = 1;
    c.training.global_batch_size = 4;
    c.training.train_iters = iters;
    return c;
}

// train() with head dim 64 (the flash kernels' smallest tile): 4 layers, hidden 256, 4 heads,
// sequence 128, a vocabulary of `vocab`.
inline Config wide(int vocab) {
    Config c = train();
    c.model.num_layers = 4;
    c.model.hidden_size = 256;
    c.model.num_attention_heads = 4;
    c.model.seq_length = 128;
    c.model.vocab_size = vocab;
    return c;
}

// The Llama-style options on train()'s shape (hidden 32, 4 heads): rope, RMSNorm, SwiGLU,
// two K/V groups (one per rank at TP 2), an untied output layer, no linear biases.
inline void llama_style(ModelConfig& m) {
    m.position_embedding_type = PositionEmbeddingType::Rope;
    m.normalization = Normalization::RMSNorm;
    m.swiglu = true;
    m.ffn_hidden_size = 48;
    m.group_query_attention = true;
    m.num_query_groups = 2;
    m.untie_embeddings_and_output_weights = true;
    m.disable_bias_linear = true;
}

// The small valid command line (4 layers, hidden 64, 4 heads, sequence 32, vocabulary 100,
// 10 iterations) the flag and validation tests change one flag of at a time.
inline std::vector<std::string> cli() {
    return {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "32", "--vocab-size", "100", "--train-iters", "10"};
}

}  // namespace gpt::test::tiny
