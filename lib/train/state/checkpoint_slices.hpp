// Which piece of each saved tensor one rank writes or reads: the slice lists of the model
// weights and the optimizer state, built from ParamLayouts (Megatron names, global shapes,
// this rank's tensor-parallel slice) over host staging buffers.
//
// Every rank lists every tensor of the whole model in one canonical order (the writer and
// reader need the same list everywhere) and selects only what it holds, so resharding is
// nothing but different selections: a tensor-parallel rank's box, a pipeline stage's own
// layers (its model chunks hold only them; other tensors select none), and later a
// distributed-optimizer shard (a flat_in_box selection of the same box). Data-parallel
// replicas write nothing and read the same slices. The last pipeline stage's copy of the
// tied word embeddings is not stored: it equals the first stage's, and loads from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "ckpt/tensor_slice.hpp"
#include "core/dtype.hpp"
#include "model/param_layout.hpp"

namespace gpt::train {

// The names of the optimizer state of parameter `name` (docs/checkpoint-format.md).
std::string main_param_name(const std::string& name);   // optimizer/main_param/<name>
std::string exp_avg_name(const std::string& name);      // optimizer/exp_avg/<name>
std::string exp_avg_sq_name(const std::string& name);   // optimizer/exp_avg_sq/<name>

// The box of the global tensor this rank holds (its tensor-parallel slice, or all of it).
ckpt::Selection local_box(const model::ParamEntry& e);

// One model chunk of this rank in host memory: params is a flat buffer shaped like `layout`
// (element offsets are the entries' offsets), of the model dtype. The optimizer state
// covers flat elements [opt_begin, opt_begin + main.size()): all of them, or with the
// distributed optimizer this data-parallel rank's shard. Views: the memory belongs to a
// host copy (train/state/host_copy.hpp) or, on a host-memory backend, to the model and optimizer.
struct ChunkHost {
    const model::ParamLayout* layout = nullptr;
    std::span<std::byte> params;
    std::span<float> main, exp_avg, exp_avg_sq;
    std::int64_t opt_begin = 0;
    bool sharded = false;  // every DP rank writes its own optimizer shard
};

// One global tensor and where this rank holds it (chunk -1: not here).
struct TensorBinding {
    const model::ParamEntry* global = nullptr;  // from the whole-model layout
    int chunk = -1;
    const model::ParamEntry* local = nullptr;   // in chunk's layout
    bool tp_writer = false;                      // this TP rank writes the tensor's slice
    bool writes = false;                         // ... and is data-parallel rank 0
};

// full: the layout of the whole model (ChunkSpec{0, L, true, true}) for this TP rank; its
// entry order is the canonical tensor order. Each tensor is written exactly once: by
// data-parallel rank 0, and for tensors every TP rank holds in full by TP rank 0 only.
// Throws InternalError when a chunk holds a tensor the whole model lacks.
std::vector<TensorBinding> bind_tensors(const model::ParamLayout& full,
                                        const std::vector<const model::ParamLayout*>& chunks,
                                        int tp_rank, int dp_rank);

enum class StateKind { Param, MainParam, ExpAvg, ExpAvgSq };

// For CheckpointWriter::write: every tensor of `kind`, selecting this rank's slice where it
// writes. Param tensors are of `param_dtype`, optimizer state fp32.
std::vector<ckpt::TensorSlice> save_slices(const std::vector<TensorBinding>& tensors,
                                           const std::vector<ChunkHost>& host, StateKind kind,
                                           DType param_dtype);
// For CheckpointReader::read: every tensor of `kind`, selecting this rank's slice wherever
// it holds the tensor (replicas read the same slice).
std::vector<ckpt::TensorSliceOut> load_slices(const std::vector<TensorBinding>& tensors,
                                              std::vector<ChunkHost>& host, StateKind kind,
                                              DType param_dtype);

}  // namespace gpt::train
