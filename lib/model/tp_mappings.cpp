#include "model/tp_mappings.hpp"

namespace gpt::model {

void copy_to_tensor_model_parallel_region_backward(dist::Communicator& tp, void* grad,
                                                   std::int64_t n, DType dtype) {
    if (tp.size() == 1) return;
    tp.all_reduce(grad, n, dist::comm_type(dtype), dist::ReduceOp::Sum);
}

void reduce_from_tensor_model_parallel_region_forward(dist::Communicator& tp, void* x,
                                                      std::int64_t n, DType dtype) {
    if (tp.size() == 1) return;
    tp.all_reduce(x, n, dist::comm_type(dtype), dist::ReduceOp::Sum);
}

void gather_from_sequence_parallel_region_forward(dist::Communicator& tp, const void* shard,
                                                  void* full, std::int64_t shard_n, DType dtype) {
    tp.all_gather(shard, full, shard_n, dist::comm_type(dtype));
}

void gather_from_sequence_parallel_region_backward(dist::Communicator& tp, const void* grad_full,
                                                   void* grad_shard, std::int64_t shard_n,
                                                   DType dtype) {
    tp.reduce_scatter(grad_full, grad_shard, shard_n, dist::comm_type(dtype), dist::ReduceOp::Sum);
}

void reduce_scatter_to_sequence_parallel_region_forward(dist::Communicator& tp, const void* full,
                                                        void* shard, std::int64_t shard_n,
                                                        DType dtype) {
    tp.reduce_scatter(full, shard, shard_n, dist::comm_type(dtype), dist::ReduceOp::Sum);
}

void reduce_scatter_to_sequence_parallel_region_backward(dist::Communicator& tp,
                                                         const void* grad_shard, void* grad_full,
                                                         std::int64_t shard_n, DType dtype) {
    tp.all_gather(grad_shard, grad_full, shard_n, dist::comm_type(dtype));
}

void scatter_to_sequence_parallel_region_backward(dist::Communicator& tp, const void* grad_shard,
                                                  void* grad_full, std::int64_t shard_n,
                                                  DType dtype) {
    tp.all_gather(grad_shard, grad_full, shard_n, dist::comm_type(dtype));
}

void vocab_parallel_cross_entropy_max(dist::Communicator& tp, float* row_max, std::int64_t rows) {
    if (tp.size() == 1) return;
    tp.all_reduce(row_max, rows, dist::CommType::F32, dist::ReduceOp::Max);
}

void vocab_parallel_cross_entropy_sum(dist::Communicator& tp, float* values, std::int64_t n) {
    if (tp.size() == 1) return;
    tp.all_reduce(values, n, dist::CommType::F32, dist::ReduceOp::Sum);
}

}  // namespace gpt::model
