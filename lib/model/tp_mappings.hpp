// Megatron's tensor-parallel communication points as named conjugate pairs.
//
//   copy_to_tensor_model_parallel_region     ("f"): identity forward,  all-reduce backward
//   reduce_from_tensor_model_parallel_region ("g"): all-reduce forward, identity backward
//
// Only the halves that communicate are functions; the identity halves are marked at their
// call sites by a comment. Every function is a no-op for a 1-rank group, so the model has
// the same code path with and without tensor parallelism. Buffers are in backend memory
// (host for the CPU backend; the NCCL communicator takes device pointers).
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "dist/communicator.hpp"

namespace gpt::model {

// Backward of f: the input's gradient is the sum of every TP rank's partial gradient.
void copy_to_tensor_model_parallel_region_backward(dist::Communicator& tp, void* grad,
                                                   std::int64_t n, DType dtype);
// Forward of g: row-parallel outputs (and the vocab-parallel embedding) are partial sums.
void reduce_from_tensor_model_parallel_region_forward(dist::Communicator& tp, void* x,
                                                      std::int64_t n, DType dtype);
// Vocab-parallel cross-entropy: the global row max and the global sums of the per-shard
// pieces (exp-sum and target logit, which is 0 on shards without the target).
void vocab_parallel_cross_entropy_max(dist::Communicator& tp, float* row_max, std::int64_t rows);
void vocab_parallel_cross_entropy_sum(dist::Communicator& tp, float* values, std::int64_t n);

}  // namespace gpt::model
