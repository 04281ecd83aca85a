// MPI datatypes for CommType, and reduction ops for the 16-bit float types MPI lacks.
#pragma once

#include <mpi.h>

#include "dist/communicator.hpp"

namespace gpt::dist {

MPI_Datatype mpi_datatype(CommType t);
// Built-in op for native types; a user-defined op (created once, per process) for fp16/bf16,
// which sums in fp32 and rounds once per pairwise reduction, as NCCL does.
MPI_Op mpi_op(CommType t, ReduceOp op);

}  // namespace gpt::dist
