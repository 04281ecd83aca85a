// A tiny training configuration and a learnable synthetic data source for trainer tests.
#pragma once

#include <cstdint>
#include <vector>

#include "config/config.hpp"
#include "train/step/batch_source.hpp"

namespace gpt::test {

inline Config tiny_train_config() {
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

// tiny_train_config for checkpoint tests: 8 iterations, no evaluation, a short warm-up,
// quiet logs (runs save and load a few iterations apart).
inline Config short_train_config() {
    Config c = tiny_train_config();
    c.training.train_iters = 8;
    c.training.eval_iters = 0;
    c.optimizer.lr_warmup_iters = 2;
    c.logging.log_interval = 1000;
    return c;
}

// The Llama-style options on tiny_train_config's shape (hidden 32, 4 heads): rope, RMSNorm,
// SwiGLU, two K/V groups (one per rank at TP 2), an untied output layer, no linear biases.
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

// Sample i is a walk t -> (5 t + 3) mod V from a start that depends on i: the next token is
// a function of the current one, so a working model drives the loss towards 0. Samples are
// handed out like Megatron's sampler: each micro-step covers mbs x dp consecutive samples,
// data-parallel rank r taking [r mbs, (r+1) mbs).
class WalkSource final : public train::MicroBatchSource {
public:
    WalkSource(int vocab, int seq, int mbs, int dp_rank = 0, int dp_size = 1,
               std::int64_t first_sample = 0)
        : vocab_(vocab), seq_(seq), mbs_(mbs), dp_rank_(dp_rank), dp_size_(dp_size),
          consumed_(first_sample) {}
    void next(std::int32_t* tokens) override {
        for (int j = 0; j < mbs_; ++j) {
            const std::int64_t sample = consumed_ + dp_rank_ * mbs_ + j;
            std::int64_t t = (sample * 7919 + 13) % vocab_;
            for (int k = 0; k <= seq_; ++k) {
                tokens[j * (seq_ + 1) + k] = static_cast<std::int32_t>(t);
                t = (5 * t + 3) % vocab_;
            }
        }
        consumed_ += static_cast<std::int64_t>(mbs_) * dp_size_;
    }

private:
    int vocab_, seq_, mbs_, dp_rank_, dp_size_;
    std::int64_t consumed_;
};

}  // namespace gpt::test
