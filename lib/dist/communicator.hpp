// Collective and point-to-point communication on one process group.
// Implementations: MpiCommunicator (host buffers), StagedCommunicator (device buffers
// through host copies, dist/comm_staged.hpp) and, with the CUDA backend, NcclCommunicator. Every call counts the payload bytes it moves
// per operation so tests can check them against analytical formulas.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.hpp"

namespace gpt::dist {

// Element types a collective can carry: the tensor dtypes plus what bookkeeping needs.
enum class CommType { F32, F16, BF16, F64, I32, I64, U8 };
CommType comm_type(DType t);
std::size_t comm_type_size(CommType t);

enum class ReduceOp { Sum, Max, Min };

enum class CommOp { AllReduce, AllGather, ReduceScatter, Broadcast, Send, Recv, Barrier, kCount };
const char* comm_op_name(CommOp op);

struct CommStats {
    std::array<std::uint64_t, static_cast<int>(CommOp::kCount)> bytes{};
    std::array<std::uint64_t, static_cast<int>(CommOp::kCount)> calls{};
    std::uint64_t total_bytes() const;
    void reset() { *this = CommStats{}; }
};

// A non-blocking operation in flight; wait() (or the destructor) completes it. Its buffers
// must stay untouched until then. test() drives progress (MPI makes progress on
// non-blocking collectives only inside MPI calls) and says whether it is done.
class PendingOp {
public:
    virtual ~PendingOp() = default;
    virtual void wait() = 0;
    virtual bool test() = 0;
};

class Communicator {
public:
    virtual ~Communicator() = default;
    virtual const std::string& name() const = 0;  // "tp", "dp", "pp", "embedding", ...
    virtual int rank() const = 0;
    virtual int size() const = 0;

    // In place over `count` elements.
    virtual void all_reduce(void* buf, std::int64_t count, CommType t, ReduceOp op) = 0;
    // recv = concat over ranks of each rank's `count` elements (recv holds size()*count).
    virtual void all_gather(const void* send, void* recv, std::int64_t count, CommType t) = 0;
    // send holds size()*count elements; rank r receives the reduction of chunk r.
    virtual void reduce_scatter(const void* send, void* recv, std::int64_t count, CommType t,
                                ReduceOp op) = 0;
    virtual void broadcast(void* buf, std::int64_t count, CommType t, int root) = 0;
    // Point to point by group rank.
    virtual void send(const void* buf, std::int64_t count, CommType t, int peer, int tag) = 0;
    virtual void recv(void* buf, std::int64_t count, CommType t, int peer, int tag) = 0;
    // Non-blocking send: lets pipeline stages post their outputs and move on, so a valid
    // schedule never deadlocks on the order of blocking sends.
    virtual std::unique_ptr<PendingOp> isend(const void* buf, std::int64_t count, CommType t,
                                               int peer, int tag) = 0;
    virtual void barrier() = 0;
    // Non-blocking all-reduce in place, for gradient buckets reduced while backward runs.
    virtual std::unique_ptr<PendingOp> iall_reduce(void* buf, std::int64_t count, CommType t,
                                                   ReduceOp op) = 0;
    // Non-blocking reduce-scatter with per-rank counts: send holds sum(counts) elements,
    // rank r's piece at offset counts[0] + ... + counts[r-1]; this rank receives the
    // reduction of its piece (counts[rank()] elements) in recv, which may be its own piece
    // of send (in place: no scratch memory). The distributed optimizer's shards cut
    // gradient buckets unevenly, so pieces differ in size (some are empty).
    virtual std::unique_ptr<PendingOp> ireduce_scatter_v(const void* send, void* recv,
                                                         std::vector<std::int64_t> counts,
                                                         CommType t, ReduceOp op) = 0;

    const CommStats& stats() const { return stats_; }
    void reset_stats() { stats_.reset(); }

protected:
    void count(CommOp op, std::uint64_t bytes) {
        stats_.bytes[static_cast<int>(op)] += bytes;
        stats_.calls[static_cast<int>(op)] += 1;
    }
    // A v-collective's per-rank counts: checks there is one per rank, counts the bytes of
    // all pieces under `op`, returns the total element count.
    std::int64_t count_pieces(CommOp op, const std::vector<std::int64_t>& counts, CommType t);

private:
    CommStats stats_;
};

}  // namespace gpt::dist
