// FP8 delayed scaling's state in a checkpoint (issue 34), so a resumed FP8 run continues with
// the scales and amax history it stopped with. Per FP8 transformer layer L, two fp32 tensors
// named beside its parameters (Megatron keeps Transformer Engine's in each module's
// _extra_state):
//   language_model/encoder/layers.L/fp8_amax_history  [history, 12]
//   language_model/encoder/layers.L/fp8_scale         [12]
// the 12 operands being QKV, projection, FC1, FC2, each with its input, weight and output
// gradient. The amaxes are reduced over TP and DP every step, so every replica holds the
// same values: the stage holding layer L writes them from its first TP and DP rank, and any
// layout reads them back (layout-free, like the parameters). A checkpoint without them (a
// 16-bit or tensorwise run's) starts delayed scaling afresh, as Transformer Engine does; a
// 16-bit or tensorwise run ignores them.
#pragma once

#include <optional>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/tensor_slice.hpp"
#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "train/step/model_chunks.hpp"

namespace gpt::train {

// The slices this rank writes (every FP8 layer of the model is named on every rank, as the
// writer needs; the data stay valid while `chunks` is not stepped).
std::vector<ckpt::TensorSlice> fp8_state_slices(const Config& cfg, ModelChunks& chunks,
                                                const dist::ProcessGroups& groups,
                                                std::vector<std::vector<float>>& storage);

// What a checkpoint holds of it for this rank: per FP8 layer of the model, its amax history
// [history x 12] and scales [12] (empty for the layers this rank does not hold).
struct SavedFp8Scaling {
    std::vector<int> layers;
    std::vector<std::vector<float>> history, scales;
};

// Collective: the state stored in r, when it holds it and this run uses delayed scaling.
std::optional<SavedFp8Scaling> read_fp8_state(ckpt::CheckpointReader& r, const Config& cfg,
                                              ModelChunks& chunks);
// Into every chunk's FP8 linears (the restore step of a load).
void restore_fp8_state(const SavedFp8Scaling& saved, const Config& cfg, ModelChunks& chunks);

}  // namespace gpt::train
