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

void vocab_parallel_cross_entropy_max(dist::Communicator& tp, float* row_max, std::int64_t rows) {
    if (tp.size() == 1) return;
    tp.all_reduce(row_max, rows, dist::CommType::F32, dist::ReduceOp::Max);
}

void vocab_parallel_cross_entropy_sum(dist::Communicator& tp, float* values, std::int64_t n) {
    if (tp.size() == 1) return;
    tp.all_reduce(values, n, dist::CommType::F32, dist::ReduceOp::Sum);
}

}  // namespace gpt::model
