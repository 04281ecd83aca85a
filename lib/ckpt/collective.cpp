#include "ckpt/collective.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ckpt/checksum.hpp"
#include "core/errors.hpp"
#include "core/watchdog.hpp"
#include "dist/comm_mpi.hpp"

namespace gpt::ckpt {

void wait_politely(MPI_Request& req, const char* what) {
    // Always yielding: a checkpoint's few collectives do not notice the latency, and this
    // needs no (collective) detection of an oversubscribed node.
    if (dist::wait_request(req, what) != MPI_SUCCESS) throw CommError(std::string(what) + " failed");
}

namespace {
// The watchdog's record of a checkpoint collective: which one, over how many ranks, how many
// bytes this rank contributes (core/watchdog.hpp).
watchdog::Op checkpoint_op(const char* name, MPI_Comm comm, int count, MPI_Datatype type) {
    watchdog::Op op;
    op.name = name;
    MPI_Comm_size(comm, &op.nranks);
    int size = 0;
    MPI_Type_size(type, &size);
    op.bytes = static_cast<std::int64_t>(count) * size;
    return op;
}
}  // namespace

void allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
    watchdog::OpScope scope(checkpoint_op("checkpoint all-reduce", comm, count, type));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Iallreduce(send, recv, count, type, op, comm, &req) != MPI_SUCCESS)
        throw CommError("MPI_Iallreduce failed");
    wait_politely(req, "MPI_Iallreduce");
}

void bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm) {
    watchdog::OpScope scope(checkpoint_op("checkpoint broadcast", comm, count, type));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Ibcast(buf, count, type, root, comm, &req) != MPI_SUCCESS) throw CommError("MPI_Ibcast failed");
    wait_politely(req, "MPI_Ibcast");
}

void allgather(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm) {
    watchdog::OpScope scope(checkpoint_op("checkpoint all-gather", comm, count, type));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Iallgather(send, count, type, recv, count, type, comm, &req) != MPI_SUCCESS)
        throw CommError("MPI_Iallgather failed");
    wait_politely(req, "MPI_Iallgather");
}

void alltoall_ints(const int* send, int* recv, int count, MPI_Comm comm, const char* what) {
    watchdog::OpScope scope(checkpoint_op(what, comm, count, MPI_INT));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Ialltoall(send, count, MPI_INT, recv, count, MPI_INT, comm, &req) != MPI_SUCCESS)
        throw CommError(std::string("MPI_Ialltoall failed: ") + what);
    wait_politely(req, what);
}

void alltoallv_bytes(const unsigned char* send, const std::vector<int>& send_counts, std::vector<unsigned char>& recv,
                     const std::vector<int>& recv_counts, MPI_Comm comm, const char* what) {
    const int n = static_cast<int>(send_counts.size());
    std::vector<int> sdispl(n, 0), rdispl(n, 0);
    std::int64_t sent = send_counts.empty() ? 0 : send_counts[0];
    for (int i = 1; i < n; ++i) {
        sdispl[i] = sdispl[i - 1] + send_counts[i - 1];
        rdispl[i] = rdispl[i - 1] + recv_counts[i - 1];
        sent += send_counts[i];
    }
    recv.resize(n == 0 ? 0 : static_cast<std::size_t>(rdispl[n - 1]) + static_cast<std::size_t>(recv_counts[n - 1]));
    watchdog::OpScope scope(checkpoint_op(what, comm, static_cast<int>(std::min<std::int64_t>(sent, INT32_MAX)), MPI_BYTE));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Ialltoallv(send, send_counts.data(), sdispl.data(), MPI_BYTE, recv.data(), recv_counts.data(),
                       rdispl.data(), MPI_BYTE, comm, &req) != MPI_SUCCESS)
        throw CommError(std::string("MPI_Ialltoallv failed: ") + what);
    wait_politely(req, what);
}

namespace {
enum ErrorKind : int { kNone = 0, kIo, kData, kUsage, kInternal, kComm, kOther };

ErrorKind classify(std::exception_ptr e, std::string& message) {
    try {
        std::rethrow_exception(e);
    } catch (const IoError& x) {
        message = x.what();
        return kIo;
    } catch (const DataError& x) {
        message = x.what();
        return kData;
    } catch (const UsageError& x) {
        message = x.what();
        return kUsage;
    } catch (const InternalError& x) {
        message = x.what();
        return kInternal;
    } catch (const CommError& x) {
        message = x.what();
        return kComm;
    } catch (const std::exception& x) {
        message = x.what();
        return kOther;
    } catch (...) {
        message = "unknown exception";
        return kOther;
    }
}
}  // namespace

void agree_on_error(MPI_Comm comm, std::exception_ptr local_error) {
    int rank = 0, size = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    std::string message;
    const int kind = local_error ? classify(local_error, message) : kNone;
    // Lowest failing rank: MPI_MIN over (rank if failed else size).
    int mine = kind != kNone ? rank : size, first = size;
    allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm);
    if (first == size) return;
    int k = kind;
    bcast(&k, 1, MPI_INT, first, comm);
    message = broadcast_string(comm, message, first);
    if (first != rank && size > 1) message = "rank " + std::to_string(first) + ": " + message;
    switch (k) {
        case kIo: throw IoError(message);
        case kData: throw DataError(message);
        case kUsage: throw UsageError(message);
        case kInternal: throw InternalError(message);
        case kComm: throw CommError(message);
        default: throw Error(message);
    }
}

namespace {
void checksum_sum(void* in, void* inout, int* len, MPI_Datatype*) {
    const auto* a = static_cast<const std::uint64_t*>(in);
    auto* b = static_cast<std::uint64_t*>(inout);
    for (int i = 0; i < *len; ++i) b[i] = checksum_add(a[i], b[i]);
}
}  // namespace

std::vector<std::uint64_t> allreduce_checksums(MPI_Comm comm, const std::vector<std::uint64_t>& partial) {
    std::vector<std::uint64_t> out(partial.size(), 0);
    if (partial.empty()) return out;
    MPI_Op op = MPI_OP_NULL;
    MPI_Op_create(checksum_sum, /*commute=*/1, &op);
    struct FreeOp {
        MPI_Op& op;
        ~FreeOp() { MPI_Op_free(&op); }
    } free_op{op};
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Iallreduce(partial.data(), out.data(), static_cast<int>(partial.size()), MPI_UINT64_T, op, comm, &req) !=
        MPI_SUCCESS)
        throw CommError("MPI_Iallreduce of checkpoint checksums failed");
    wait_politely(req, "MPI_Iallreduce of checkpoint checksums");
    return out;
}

std::string broadcast_string(MPI_Comm comm, const std::string& s, int root) {
    std::uint64_t n = s.size();
    bcast(&n, 1, MPI_UINT64_T, root, comm);
    std::string out(n, '\0');
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == root) out = s;
    // Large manifests exceed INT_MAX only in theory; send in pieces to be safe.
    for (std::uint64_t off = 0; off < n; off += (1u << 30)) {
        const int len = static_cast<int>(std::min<std::uint64_t>(n - off, 1u << 30));
        bcast(out.data() + off, len, MPI_CHAR, root, comm);
    }
    return out;
}

void require_same_on_all_ranks(MPI_Comm comm, std::uint64_t value, const std::string& what) {
    // max(v) and max(~v) = ~min(v), in one allreduce
    std::uint64_t mine[2] = {value, ~value}, most[2] = {0, 0};
    allreduce(mine, most, 2, MPI_UINT64_T, MPI_MAX, comm);
    GPT_REQUIRE(most[0] == ~most[1], InternalError, "ranks passed different ", what,
                " (every rank must list the same tensors in the same order, with empty selections"
                " for tensors it does not hold)");
}

std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        h ^= p[i];
        h *= 1099511628211ull;
    }
    return h;
}

NodeLayout node_layout(MPI_Comm comm) {
    int rank = 0, size = 1, len = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char mine[MPI_MAX_PROCESSOR_NAME] = {};
    MPI_Get_processor_name(mine, &len);
    std::vector<char> all(static_cast<std::size_t>(size) * MPI_MAX_PROCESSOR_NAME);
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Iallgather(mine, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, all.data(), MPI_MAX_PROCESSOR_NAME, MPI_CHAR, comm,
                       &req) != MPI_SUCCESS)
        throw CommError("MPI_Iallgather of host names failed");
    wait_politely(req, "MPI_Iallgather of host names");
    NodeLayout out;
    for (int r = 0; r < size; ++r) {
        const bool same = std::strncmp(all.data() + static_cast<std::size_t>(r) * MPI_MAX_PROCESSOR_NAME, mine,
                                       MPI_MAX_PROCESSOR_NAME) == 0;
        if (same && r < rank) ++out.node_rank;
        if (!same) out.multi_node = true;
    }
    return out;
}

}  // namespace gpt::ckpt
