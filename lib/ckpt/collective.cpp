#include "ckpt/collective.hpp"

#include "ckpt/checksum.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

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
    if (MPI_Allreduce(&mine, &first, 1, MPI_INT, MPI_MIN, comm) != MPI_SUCCESS)
        throw CommError("MPI_Allreduce failed while ranks agreed on a checkpoint error");
    if (first == size) return;
    int k = kind;
    MPI_Bcast(&k, 1, MPI_INT, first, comm);
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
    const int rc = MPI_Allreduce(partial.data(), out.data(), static_cast<int>(partial.size()), MPI_UINT64_T, op, comm);
    MPI_Op_free(&op);
    if (rc != MPI_SUCCESS) throw CommError("MPI_Allreduce of checkpoint checksums failed");
    return out;
}

std::string broadcast_string(MPI_Comm comm, const std::string& s, int root) {
    std::uint64_t n = s.size();
    MPI_Bcast(&n, 1, MPI_UINT64_T, root, comm);
    std::string out(n, '\0');
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    if (rank == root) out = s;
    // Large manifests exceed INT_MAX only in theory; send in pieces to be safe.
    for (std::uint64_t off = 0; off < n; off += (1u << 30)) {
        const int len = static_cast<int>(std::min<std::uint64_t>(n - off, 1u << 30));
        MPI_Bcast(out.data() + off, len, MPI_CHAR, root, comm);
    }
    return out;
}

void require_same_on_all_ranks(MPI_Comm comm, std::uint64_t value, const std::string& what) {
    std::uint64_t lo = 0, hi = 0;
    MPI_Allreduce(&value, &lo, 1, MPI_UINT64_T, MPI_MIN, comm);
    MPI_Allreduce(&value, &hi, 1, MPI_UINT64_T, MPI_MAX, comm);
    GPT_REQUIRE(lo == hi, InternalError, "ranks passed different ", what,
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

bool multi_node(MPI_Comm comm) {
    MPI_Comm node = MPI_COMM_NULL;
    int size = 1, local = 1;
    MPI_Comm_size(comm, &size);
    MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    int spans = local < size ? 1 : 0;  // any rank whose node lacks some ranks
    MPI_Allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, comm);
    return spans != 0;
}

}  // namespace gpt::ckpt
