// Keeps ranks in step when one of them fails: a checkpoint step that throws on one rank
// must throw on every rank, or the others would wait forever in the next collective call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace gpt::ckpt {

// Completes a non-blocking collective without holding a core while it waits
// (dist::wait_request, yielding). MPI's blocking calls poll busily, and where ranks outnumber
// cores (bench/checkpoint runs 4 ranks on 2) the ranks that reach a collective early burn the
// time slices that the late ones need to get there: a 4-rank allreduce took 9 ms that way and
// 0.3 ms with a polite wait. Throws CommError.
void wait_politely(MPI_Request& req, const char* what);
// Collective. MPI_Allreduce completed with wait_politely.
void allreduce(const void* send, void* recv, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm);
// Collective. MPI_Bcast and MPI_Allgather completed with wait_politely.
void bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm);
void allgather(const void* send, void* recv, int count, MPI_Datatype type, MPI_Comm comm);
// Collective. MPI_Alltoall of `count` ints per rank pair, and MPI_Alltoallv of bytes (recv
// resized to what arrives; displacements packed in rank order), completed politely; `what`
// names the exchange for the watchdog and errors.
void alltoall_ints(const int* send, int* recv, int count, MPI_Comm comm, const char* what);
void alltoallv_bytes(const unsigned char* send, const std::vector<int>& send_counts, std::vector<unsigned char>& recv,
                     const std::vector<int>& recv_counts, MPI_Comm comm, const char* what);

// Collective. When any rank passes an error, every rank throws the error of the lowest
// failing rank, with its exception type (IoError, DataError, ...) and message.
void agree_on_error(MPI_Comm comm, std::exception_ptr local_error);

// Runs fn() on every rank, then agree_on_error. fn must not call collective operations
// after a point where it might throw on some ranks only.
template <typename Fn>
void collectively(MPI_Comm comm, Fn&& fn) {
    std::exception_ptr err;
    try {
        fn();
    } catch (...) {
        err = std::current_exception();
    }
    agree_on_error(comm, err);
}

// Element-wise sum of partial checksums over all ranks (modulo the checksum's prime).
std::vector<std::uint64_t> allreduce_checksums(MPI_Comm comm, const std::vector<std::uint64_t>& partial);

std::string broadcast_string(MPI_Comm comm, const std::string& s, int root);

// Throws InternalError on every rank when the ranks' `value`s differ (what names the value).
void require_same_on_all_ranks(MPI_Comm comm, std::uint64_t value, const std::string& what);

// Collective. Where this rank sits among the ranks of `comm` that share its host (same
// MPI_Get_processor_name, hence the same page cache). One all-gather of the names: on a
// shared node MPI_Comm_split_type cost 60-80 ms at 4 ranks on 2 cores, twice per save.
struct NodeLayout {
    int node_rank = 0;  // this rank's index among the ranks of its host, in comm's order
    // Auto mode's choice for tensors with strided pieces (collective): true when the ranks of
    // `comm` span several hosts, where two-phase aggregation turns many small strided accesses
    // into large ones on the parallel file system. On one node the page cache already merges
    // the ranks' pieces and collective buffering between ranks that share cores costs more than
    // it saves (bench/checkpoint, 4 ranks on 2 cores: 340 MB/s save collective, 636 independent).
    bool multi_node = false;
};
NodeLayout node_layout(MPI_Comm comm);

// FNV-1a, for fingerprints of tensor lists that ranks must agree on.
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull);

}  // namespace gpt::ckpt
