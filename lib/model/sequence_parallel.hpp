// The two boundaries of a tensor-parallel block (column-parallel linear in, row-parallel
// linear out), with or without sequence parallelism, so the layer, the embedding and the
// head are written once. The residual stream holds c.rows rows (the rank's sequence shard
// under sequence parallelism, else all T); the linears always see all T rows.
//
//                      without SP                          with SP
//   column input    f: identity     / all-reduce grad      all-gather / reduce-scatter grad
//   row output      g: all-reduce   / identity grad        reduce-scatter / all-gather grad
#pragma once

#include "model/pass_context.hpp"

namespace gpt::model {

// (T, h) input of a column-parallel linear from the (rows, h) residual-side tensor x: x
// itself, or x's shards all-gathered into `full`.
const void* column_parallel_input(const PassContext& c, const void* x, void* full);
// dx_full (T, h): this rank's partial gradient w.r.t. the column-parallel input. Returns the
// summed (rows, h) gradient w.r.t. x: dx_full all-reduced in place, or reduce-scattered
// into `dx`.
void* column_parallel_input_grad(const PassContext& c, void* dx_full, void* dx);
// partial (T, h): this rank's row-parallel partial sums. Returns the summed (rows, h)
// output: partial all-reduced in place, or reduce-scattered into `y`.
void* row_parallel_output(const PassContext& c, void* partial, void* y);
// dy (rows, h): gradient of that output. Returns the (T, h) gradient the row-parallel
// linear's backward needs: dy itself, or the shards all-gathered into `dy_full`.
const void* row_parallel_output_grad(const PassContext& c, const void* dy, void* dy_full);

}  // namespace gpt::model
