// Keeps ranks in step when one of them fails: a checkpoint step that throws on one rank
// must throw on every rank, or the others would wait forever in the next collective call.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <exception>
#include <string>
#include <vector>

namespace gpt::ckpt {

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

// Auto mode's choice for tensors with strided pieces (collective): true when the ranks of
// `comm` span several nodes, where two-phase aggregation turns many small strided accesses
// into large ones on the parallel file system. On one node the page cache already merges
// the ranks' pieces and collective buffering between ranks that share cores costs more than
// it saves (bench/checkpoint, 4 ranks on 2 cores: 340 MB/s save collective, 636 independent).
bool multi_node(MPI_Comm comm);

// FNV-1a, for fingerprints of tensor lists that ranks must agree on.
std::uint64_t fnv1a(const void* data, std::size_t n, std::uint64_t h = 1469598103934665603ull);

}  // namespace gpt::ckpt
