#include "dist/communicator.hpp"

#include "core/errors.hpp"

namespace gpt::dist {

CommType comm_type(DType t) {
    switch (t) {
        case DType::F32: return CommType::F32;
        case DType::F16: return CommType::F16;
        case DType::BF16: return CommType::BF16;
    }
    GPT_THROW(InternalError, "unknown DType");
}

std::size_t comm_type_size(CommType t) {
    switch (t) {
        case CommType::F32:
        case CommType::I32: return 4;
        case CommType::F16:
        case CommType::BF16: return 2;
        case CommType::F64:
        case CommType::I64: return 8;
        case CommType::U8: return 1;
    }
    return 0;
}

const char* comm_op_name(CommOp op) {
    switch (op) {
        case CommOp::AllReduce: return "all-reduce";
        case CommOp::AllGather: return "all-gather";
        case CommOp::ReduceScatter: return "reduce-scatter";
        case CommOp::Broadcast: return "broadcast";
        case CommOp::Send: return "send";
        case CommOp::Recv: return "recv";
        case CommOp::Barrier: return "barrier";
        case CommOp::kCount: break;
    }
    return "?";
}

std::uint64_t CommStats::total_bytes() const {
    std::uint64_t t = 0;
    for (auto b : bytes) t += b;
    return t;
}

std::int64_t Communicator::count_pieces(CommOp op, const std::vector<std::int64_t>& counts,
                                        CommType t) {
    GPT_REQUIRE(static_cast<int>(counts.size()) == size(), InternalError, comm_op_name(op),
                " on '", name(), "' with ", counts.size(), " counts for ", size(), " ranks");
    std::int64_t total = 0;
    for (std::int64_t c : counts) total += c;
    count(op, static_cast<std::uint64_t>(total) * comm_type_size(t));
    return total;
}

}  // namespace gpt::dist
