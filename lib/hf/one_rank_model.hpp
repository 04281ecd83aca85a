// Our GPT as one fp32 rank, for the converter: its configuration rebuilt from a checkpoint's
// saved run, the checkpoint's model read by the shared loader (train/state/load_model_state.hpp:
// any saved layout resharded into one TP rank) and an import written by the shared saver
// (train/state/save_model_state.hpp) with the optimizer state a fresh run has; no trainer.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/saved_run.hpp"
#include "model/model_spec.hpp"
#include "model/param_layout.hpp"
#include "train/run/run_config.hpp"

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

// The run of one rank (MPI_COMM_SELF), TP 1, PP 1, fp32, micro-batch 1, with the flags of
// `model` and the tokenizer flags of `data`, saving as `ck` says; resolved (train/run_config).
train::RunConfig one_rank_run(const ModelConfig& model, const DataConfig& data, const CheckpointConfig& ck = {});

// Our checkpoint at --load DIR [--ckpt-step N], opened once: its saved run, and its fp32 main
// parameters as one fp32 rank holds them.
struct LoadedCheckpoint {
    train::RunConfig run;       // one_rank_run of the saved model
    model::ModelDims dims;      // of run (vocab_padded: the stored embedding's rows)
    std::vector<float> params;  // flat, shaped like layout()
    std::int64_t iteration = 0;
    std::string file;
    DataConfig data;  // the tokenizer flags it was trained with
    const ModelConfig& model() const { return run.cfg.model; }
    model::ParamLayout layout() const;  // the whole model's, as the one-rank GptModel's
};
// Throws UsageError when DIR holds no checkpoint, DataError when its saved run is missing or
// lacks the model's shape.
LoadedCheckpoint load_checkpoint_one_rank(const std::string& dir, std::int64_t ckpt_step);

// An import's checkpoint at iteration 0 in `save` (staged, published only when whole): what a
// fresh one-rank fp32 run of `model` saves (train/state/save_model_state.hpp; no trainer),
// its initialised parameters replaced by fill(dims, layout, flat), which are also the main
// parameters of the fresh optimizer (zero moments, step 0). The Hugging Face folder's GPT-2
// tokenizer files (vocab.json + merges.txt), when present, travel as its arguments (an export
// of it finds them there); returns the data flags recorded.
using ImportFill = std::function<void(const model::ModelDims&, const model::ParamLayout&, float*)>;
DataConfig save_imported_checkpoint(const std::string& load_hf, const std::string& save, const ModelConfig& model,
                                    const ImportFill& fill);

}  // namespace gpt::hf
