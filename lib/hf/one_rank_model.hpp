// Our GPT as one fp32 rank, for the converter: its configuration rebuilt from a checkpoint's
// saved run, and a one-rank trainer
// whose loader reshards any saved layout into it and whose saver writes our checkpoint.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "config/saved_run.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"
#include "train/trainer.hpp"

namespace gpt::hf {

// The model flags of a checkpoint's saved run whose word embeddings have `padded_rows` rows,
// dropout off. Throws DataError for a saved run without the model's shape or vocabulary.
// (The legacy reader refuses Megatron architecture rows our model lacks: squared ReLU,
// post-LN residual, QK layernorm, layernorm 1p, other kv-channels.)
ModelConfig model_config_from_saved_run(const SavedRun& saved, std::int64_t padded_rows);

// Which Hugging Face architecture expresses `m`: GPT-2 (all of GPT-2's options) or Llama
// (RMSNorm, full rope, SwiGLU, no linear biases; grouped-query attention and an untied output
// layer optional). Throws UsageError naming the first option that fits neither.
enum class HfArchitecture { Gpt2, Llama };
HfArchitecture hf_architecture(const ModelConfig& m, const std::string& file);

// One rank (MPI_COMM_SELF), TP 1, PP 1, fp32, micro-batch 1, with the flags of `model` and
// the tokenizer flags of `data`, loading and saving as `ck` says.
struct OneRankModel {
    OneRankModel(const ModelConfig& model, const DataConfig& data, const CheckpointConfig& ck = {});
    dist::ProcessGroups groups{MPI_COMM_SELF, 1, 1};
    std::unique_ptr<Backend> backend;
    std::unique_ptr<train::Trainer> trainer;
    Config config;  // as resolved
    model::GptModel& model() { return trainer->chunks().chunk(0); }
    std::vector<float> parameters();               // the flat fp32 buffer
    void set_parameters(const std::vector<float>& flat);
};

// Our checkpoint at --load DIR [--ckpt-step N], opened once to read its saved run and
// the embedding rows, then loaded into a OneRankModel. Throws UsageError when DIR holds no
// checkpoint.
struct LoadedCheckpoint {
    std::unique_ptr<OneRankModel> model;
    std::int64_t iteration = 0;
    std::string file;
    DataConfig data;  // the tokenizer flags it was trained with
};
LoadedCheckpoint load_checkpoint_one_rank(const std::string& dir, std::int64_t ckpt_step);

// An import's checkpoint at iteration 0 in `save` (staged, published only when whole): a
// fresh one-rank run of `model`, whose fp32 parameters fill(model, flat) replaces, so the
// fresh optimizer (zero moments, step 0) holds them as its main parameters. The Hugging Face
// folder's GPT-2 tokenizer files (vocab.json + merges.txt), when present, travel as its
// arguments (an export of it finds them there); returns the data flags recorded.
DataConfig save_imported_checkpoint(const std::string& load_hf, const std::string& save, const ModelConfig& model,
                                    const std::function<void(const model::GptModel&, float*)>& fill);

}  // namespace gpt::hf
