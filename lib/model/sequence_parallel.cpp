#include "model/sequence_parallel.hpp"

#include "model/tp_mappings.hpp"

namespace gpt::model {

namespace {
std::int64_t shard_elements(const PassContext& c) { return c.rows * c.dims->hidden; }
}  // namespace

const void* column_parallel_input(const PassContext& c, const void* x, void* full) {
    if (!c.sequence_parallel) return x;  // copy_to_tensor_model_parallel_region: identity
    gather_from_sequence_parallel_region_forward(*c.tp, x, full, shard_elements(c), c.opt->dtype);
    return full;
}

void* column_parallel_input_grad(const PassContext& c, void* dx_full, void* dx) {
    if (!c.sequence_parallel) {
        copy_to_tensor_model_parallel_region_backward(*c.tp, dx_full, c.tokens * c.dims->hidden,
                                                      c.opt->dtype);
        return dx_full;
    }
    gather_from_sequence_parallel_region_backward(*c.tp, dx_full, dx, shard_elements(c),
                                                  c.opt->dtype);
    return dx;
}

void* row_parallel_output(const PassContext& c, void* partial, void* y) {
    if (!c.sequence_parallel) {
        reduce_from_tensor_model_parallel_region_forward(*c.tp, partial, c.tokens * c.dims->hidden,
                                                         c.opt->dtype);
        return partial;
    }
    reduce_scatter_to_sequence_parallel_region_forward(*c.tp, partial, y, shard_elements(c),
                                                       c.opt->dtype);
    return y;
}

const void* row_parallel_output_grad(const PassContext& c, const void* dy, void* dy_full) {
    if (!c.sequence_parallel) return dy;  // reduce_from_tensor_model_parallel_region: identity
    reduce_scatter_to_sequence_parallel_region_backward(*c.tp, dy, dy_full, shard_elements(c),
                                                        c.opt->dtype);
    return dy_full;
}

}  // namespace gpt::model
