#include "dist/mpi_reduce_ops.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <mutex>

#include "core/errors.hpp"
#include "core/half.hpp"

namespace gpt::dist {

namespace {

template <float (*ToF)(std::uint16_t), std::uint16_t (*FromF)(float), int Kind>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
    auto* a = static_cast<const std::uint16_t*>(in);
    auto* b = static_cast<std::uint16_t*>(inout);
    for (int i = 0; i < *len; ++i) {
        float x = ToF(a[i]), y = ToF(b[i]);
        float r = Kind == 0 ? x + y : (Kind == 1 ? std::fmax(x, y) : std::fmin(x, y));
        b[i] = FromF(r);
    }
}

float f16_to_f(std::uint16_t h) { return half_bits_to_float(h); }
std::uint16_t f_to_f16(float f) { return float_to_half_bits(f); }
float bf16_to_f(std::uint16_t h) { return bf16_bits_to_float(h); }
std::uint16_t f_to_bf16(float f) { return float_to_bf16_bits(f); }

MPI_Op half_ops[2][3];
std::once_flag half_ops_once;

void create_half_ops() {
    MPI_Op_create(&half_op<f16_to_f, f_to_f16, 0>, 1, &half_ops[0][0]);
    MPI_Op_create(&half_op<f16_to_f, f_to_f16, 1>, 1, &half_ops[0][1]);
    MPI_Op_create(&half_op<f16_to_f, f_to_f16, 2>, 1, &half_ops[0][2]);
    MPI_Op_create(&half_op<bf16_to_f, f_to_bf16, 0>, 1, &half_ops[1][0]);
    MPI_Op_create(&half_op<bf16_to_f, f_to_bf16, 1>, 1, &half_ops[1][1]);
    MPI_Op_create(&half_op<bf16_to_f, f_to_bf16, 2>, 1, &half_ops[1][2]);
}

}  // namespace

MPI_Datatype mpi_datatype(CommType t) {
    switch (t) {
        case CommType::F32: return MPI_FLOAT;
        case CommType::F64: return MPI_DOUBLE;
        case CommType::F16:
        case CommType::BF16: return MPI_UINT16_T;
        case CommType::I32: return MPI_INT32_T;
        case CommType::I64: return MPI_INT64_T;
        case CommType::U8: return MPI_UINT8_T;
    }
    GPT_THROW(InternalError, "unknown CommType");
}

MPI_Op mpi_op(CommType t, ReduceOp op) {
    const int k = op == ReduceOp::Sum ? 0 : (op == ReduceOp::Max ? 1 : 2);
    if (t == CommType::F16 || t == CommType::BF16) {
        std::call_once(half_ops_once, create_half_ops);
        return half_ops[t == CommType::F16 ? 0 : 1][k];
    }
    return k == 0 ? MPI_SUM : (k == 1 ? MPI_MAX : MPI_MIN);
}

}  // namespace gpt::dist
