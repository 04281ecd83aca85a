// Megatron's tensor-parallel communication points as named conjugate pairs.
//
//   copy_to_tensor_model_parallel_region     ("f"): identity forward,  all-reduce backward
//   reduce_from_tensor_model_parallel_region ("g"): all-reduce forward, identity backward
// and, with sequence parallelism (rows = this rank's 1/tp of the [s, b] rows, rank order):
//   gather_from_sequence_parallel_region       : all-gather forward,     reduce-scatter backward
//   reduce_scatter_to_sequence_parallel_region : reduce-scatter forward, all-gather backward
//   scatter_to_sequence_parallel_region        : split forward (a local row range, no
//                                                communication),        all-gather backward
//
// Only the halves that communicate are functions; the identity and split halves are marked
// at their call sites by a comment. The all-reduce functions are no-ops for a 1-rank group,
// so the model has the same code path with and without tensor parallelism; the sequence
// parallel ones copy between their two buffers there (the model never calls them with one
// rank: sequence parallelism is off then). Counts `shard_n` are the elements of one rank's
// shard; full buffers hold tp.size() * shard_n. Buffers are in backend memory (host for the
// CPU backend; the NCCL communicator takes device pointers) and never alias.
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
// Forward of gather: full = concat over TP ranks of their shards.
void gather_from_sequence_parallel_region_forward(dist::Communicator& tp, const void* shard,
                                                  void* full, std::int64_t shard_n, DType dtype);
// Backward of gather: every rank used the whole gathered tensor, so the shard's gradient is
// the sum over ranks of their gradients' rows of this shard.
void gather_from_sequence_parallel_region_backward(dist::Communicator& tp, const void* grad_full,
                                                   void* grad_shard, std::int64_t shard_n,
                                                   DType dtype);
// Forward of reduce-scatter: row-parallel partial sums (full) reduced, this rank's rows kept.
void reduce_scatter_to_sequence_parallel_region_forward(dist::Communicator& tp, const void* full,
                                                        void* shard, std::int64_t shard_n,
                                                        DType dtype);
// Backward of reduce-scatter: each rank's partial sum feeds every row, so its gradient is
// the whole gathered gradient.
void reduce_scatter_to_sequence_parallel_region_backward(dist::Communicator& tp,
                                                         const void* grad_shard, void* grad_full,
                                                         std::int64_t shard_n, DType dtype);
// Backward of scatter (the embedding's split): the gathered gradient of every row.
void scatter_to_sequence_parallel_region_backward(dist::Communicator& tp, const void* grad_shard,
                                                  void* grad_full, std::int64_t shard_n,
                                                  DType dtype);

// Vocab-parallel cross-entropy: the global row max and the global sums of the per-shard
// pieces (exp-sum and target logit, which is 0 on shards without the target).
void vocab_parallel_cross_entropy_max(dist::Communicator& tp, float* row_max, std::int64_t rows);
void vocab_parallel_cross_entropy_sum(dist::Communicator& tp, float* values, std::int64_t n);

}  // namespace gpt::model
