// One rank's piece of one global tensor, as handed to the checkpoint writer or reader.
// Tensors are stored in their global, unsharded shape; a rank names the part it holds.
#pragma once

#include <string>

#include "ckpt/selection.hpp"
#include "core/dtype.hpp"

namespace gpt::ckpt {

// How tensor data moves between ranks and the file.
//   Auto: per tensor, independent I/O when every rank's piece is one contiguous run (each
//         rank streams its own block, no communication); for tensors with strided pieces
//         (column slices of row-parallel weights, distributed-optimizer runs inside them)
//         collective two-phase I/O when the ranks span several nodes, where aggregating
//         many small pieces into large file accesses pays off, and independent I/O on one
//         node, where the page cache merges them (see NodeLayout in collective.hpp).
enum class IoMode { Auto, Collective, Independent };

// For CheckpointWriter::write: `data` holds the selected elements, packed in the order of
// Selection::boxes (row-major over `count` for a box, flat order for a flat range), of type
// `dtype`, which is also the element type in the file (model dtype for weights, fp32 for
// main parameters and Adam moments).
struct TensorSlice {
    std::string name;    // "language_model/encoder/layers.3/self_attention/query_key_value/weight"
    Shape global_shape;  // the full unsharded shape
    DType dtype = DType::F32;
    Selection selection = Selection::none();
    const void* data = nullptr;
};

// For CheckpointReader::read: the same description, with `dtype` the type wanted in
// memory. A stored fp32/fp16/bf16 tensor converts to any of the three (round to nearest
// even), so a checkpoint saved in fp16 loads into a bf16 run and the other way round.
struct TensorSliceOut {
    std::string name;
    Shape global_shape;  // must equal the stored shape
    DType dtype = DType::F32;
    Selection selection = Selection::none();
    void* data = nullptr;
};

}  // namespace gpt::ckpt
