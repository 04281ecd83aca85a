// The one saver of a model to a checkpoint, beside its loader (load_model_state.hpp): this
// rank's slices of the model weights, fp32 main parameters and Adam moments, the FP8 scaling
// state, the progress record (TrainingState::save), the layout it was saved in and the saved
// run (saved_run_attributes.hpp), into a CheckpointWriter. The trainer's save writes its
// chunks (or their host copy) through it; the Hugging Face import writes the fresh one-rank
// state a new run would have saved, without a trainer.
#pragma once

#include <vector>

#include "ckpt/checkpoint_writer.hpp"
#include "ckpt/tensor_slice.hpp"
#include "config/config.hpp"
#include "core/dtype.hpp"
#include "train/state/checkpoint_slices.hpp"
#include "train/state/saved_progress.hpp"

namespace gpt::train {

// The parallel layout a checkpoint records (its *_parallel_size attributes).
struct SavedLayout {
    int tp = 1, pp = 1, dp = 1;
};

// Everything of one rank's checkpoint but the commit: `tensors` bound over `host` (views the
// writer reads until the commit), the model weights as `param_dtype` (recorded as
// params_dtype), the optimizer state fp32; `fp8`: FP8 delayed scaling's slices (empty
// without it); `progress`: this rank's TrainingState::save; `cfg`: the run's flags.
void save_model_state(ckpt::CheckpointWriter& w, const std::vector<TensorBinding>& tensors,
                      const std::vector<ChunkHost>& host, DType param_dtype,
                      const std::vector<ckpt::TensorSlice>& fp8, const SavedProgress& progress,
                      const SavedLayout& layout, const Config& cfg);

}  // namespace gpt::train
