// Emulated NCCL over MPI (what is emulated and the limits: include/nccl.h).
//
// Each communicator is an MPI communicator of its members, ordered by NCCL rank. Collectives
// reduce in rank order on host copies, so every rank gets the same bits whatever MPI's
// algorithms; point-to-point uses one tag, so MPI's non-overtaking rule gives NCCL's
// match-in-posting-order. Device memory is opened (DeviceAccess) while MPI touches it.
#include "nccl.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "gpt_emu/memory.hpp"

// What ncclComm_t points to.
struct ncclEmuComm {
    static constexpr std::uint64_t kMagic = 0x4d4d4f434c434e45ull;  // catches stale handles
    std::uint64_t magic = kMagic;
    MPI_Comm mpi = MPI_COMM_NULL;  // the members, ordered by NCCL rank
    int rank = 0, nranks = 1;
};

namespace {

constexpr std::uint64_t kIdMagic = 0x314c43434e555047ull;  // "GPUNCCL1"

thread_local std::string g_last_error;

ncclResult_t fail(ncclResult_t rc, std::string message) {
    g_last_error = std::move(message);
    return rc;
}

ncclResult_t mpi_fail(int rc, const char* what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
    return fail(ncclSystemError, std::string("MPI ") + what + " failed: " + std::string(text, len));
}

#define NCCL_EMU_MPI(call, what)                                 \
    do {                                                         \
        if (const int mpi_rc_ = (call); mpi_rc_ != MPI_SUCCESS) \
            return mpi_fail(mpi_rc_, what);                      \
    } while (0)

std::string ptr_text(const void* p) {
    char s[32];
    std::snprintf(s, sizeof s, "%p", p);
    return s;
}

bool mpi_usable() {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    return init && !fin;
}

// ---- unique ids and the bootstrap handshake ------------------------------------------

struct IdData {
    std::uint64_t magic;
    std::uint64_t counter;  // per creator: picks the handshake's tags
    std::uint64_t nonce;    // per creator process: tells stray messages apart
    std::int32_t creator;   // MPI_COMM_WORLD rank of the id's creator
};
static_assert(sizeof(IdData) <= NCCL_UNIQUE_ID_BYTES);

// Handshake tags on MPI_COMM_WORLD: the upper half of the tag range, clear of the small tags
// applications use there; a request/reply pair per id, distinct for the ids of one creator
// (the creator receives requests from any source) and, until the range wraps, across
// creators, so communicators initialised back to back or from overlapping groups never
// cross messages. MPI_Comm_create_group gets the request tag too.
struct Tags {
    int request, reply;
};
Tags tags_of(const IdData& id) {
    int ub = 32767;  // the MPI minimum
    void* attr = nullptr;
    int flag = 0;
    if (MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &attr, &flag) == MPI_SUCCESS && flag)
        ub = *static_cast<int*>(attr);
    int world = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    const int base = ub / 2 + 1;
    const auto slots = static_cast<std::uint64_t>((ub - base + 1) / 2);
    const auto slot = (id.counter * static_cast<std::uint64_t>(world) +
                       static_cast<std::uint64_t>(id.creator)) % slots;
    const int request = base + 2 * static_cast<int>(slot);
    return {request, request + 1};
}

// Member -> creator: who I am. Creator -> member: status, then the world rank of each rank.
enum Req { kNonce, kCounter, kNranks, kRank, kWorld, kReqLen };

ncclResult_t collect_members(const IdData& id, Tags tags, int nranks, int rank, int me,
                             std::vector<int>& world_of) {
    std::vector<std::int64_t> table(static_cast<std::size_t>(nranks) + 1, -1);
    std::vector<int> senders;
    table[1 + rank] = me;
    std::string problem;
    ncclResult_t status = ncclSuccess;
    for (int i = 1; i < nranks; ++i) {
        std::int64_t msg[kReqLen];
        MPI_Status st;
        NCCL_EMU_MPI(MPI_Recv(msg, kReqLen, MPI_INT64_T, MPI_ANY_SOURCE, tags.request,
                              MPI_COMM_WORLD, &st), "receive (communicator init)");
        senders.push_back(st.MPI_SOURCE);
        if (status != ncclSuccess) continue;
        const std::int64_t r = msg[kRank];
        if (msg[kNonce] != static_cast<std::int64_t>(id.nonce) ||
            msg[kCounter] != static_cast<std::int64_t>(id.counter)) {
            status = ncclInternalError;
            problem = "a handshake message for another unique id arrived from world rank " +
                      std::to_string(st.MPI_SOURCE);
        } else if (msg[kNranks] != nranks) {
            status = ncclInvalidArgument;
            problem = "world rank " + std::to_string(st.MPI_SOURCE) + " passed nranks " +
                      std::to_string(msg[kNranks]) + ", the id's creator " + std::to_string(nranks);
        } else if (r < 0 || r >= nranks || table[1 + r] != -1) {
            status = ncclInvalidArgument;
            problem = "world rank " + std::to_string(msg[kWorld]) + " claimed rank " +
                      std::to_string(r) + " of " + std::to_string(nranks) +
                      (r >= 0 && r < nranks ? ", already taken" : "");
        } else {
            table[1 + r] = msg[kWorld];
        }
    }
    table[0] = status;
    // On failure the members get the status alone: their nranks may not match ours.
    const int len = status == ncclSuccess ? nranks + 1 : 1;
    for (int dst : senders)
        NCCL_EMU_MPI(MPI_Send(table.data(), len, MPI_INT64_T, dst, tags.reply, MPI_COMM_WORLD),
                     "send (communicator init)");
    if (status != ncclSuccess) return fail(status, "ncclCommInitRank: " + problem);
    for (int r = 0; r < nranks; ++r) world_of[r] = static_cast<int>(table[1 + r]);
    return ncclSuccess;
}

ncclResult_t join_members(const IdData& id, Tags tags, int nranks, int rank, int me,
                          std::vector<int>& world_of) {
    const std::int64_t msg[kReqLen] = {static_cast<std::int64_t>(id.nonce),
                                       static_cast<std::int64_t>(id.counter), nranks, rank, me};
    NCCL_EMU_MPI(MPI_Send(msg, kReqLen, MPI_INT64_T, id.creator, tags.request, MPI_COMM_WORLD),
                 "send (communicator init)");
    std::vector<std::int64_t> table(static_cast<std::size_t>(nranks) + 1);
    NCCL_EMU_MPI(MPI_Recv(table.data(), nranks + 1, MPI_INT64_T, id.creator, tags.reply,
                          MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive (communicator init)");
    if (table[0] != ncclSuccess)
        return fail(static_cast<ncclResult_t>(table[0]),
                    "ncclCommInitRank: the unique id's creator (world rank " +
                        std::to_string(id.creator) +
                        ") rejected the members' ranks or sizes (see its error)");
    for (int r = 0; r < nranks; ++r) world_of[r] = static_cast<int>(table[1 + r]);
    return ncclSuccess;
}

// ---- types and reductions ------------------------------------------------------------

std::size_t type_size(ncclDataType_t t) {
    switch (t) {
        case ncclInt8: case ncclUint8: return 1;
        case ncclFloat16: case ncclBfloat16: return 2;
        case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
        case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}

template <typename F>
void with_type(ncclDataType_t t, F&& f) {
    switch (t) {
        case ncclInt8: return f(std::int8_t{});
        case ncclUint8: return f(std::uint8_t{});
        case ncclInt32: return f(std::int32_t{});
        case ncclUint32: return f(std::uint32_t{});
        case ncclInt64: return f(std::int64_t{});
        case ncclUint64: return f(std::uint64_t{});
        case ncclFloat16: return f(__half{});
        case ncclBfloat16: return f(__nv_bfloat16{});
        case ncclFloat32: return f(float{});
        case ncclFloat64: return f(double{});
    }
}

// Arithmetic type of a storage type: 16-bit floats accumulate in fp32, rounded once at the end.
template <typename T>
struct Arith {
    using A = T;
    static A load(T v) { return v; }
    static T store(A a) { return a; }
};
template <>
struct Arith<__half> {
    using A = float;
    static A load(__half v) { return __half2float(v); }
    static __half store(A a) { return __float2half_rn(a); }
};
template <>
struct Arith<__nv_bfloat16> {
    using A = float;
    static A load(__nv_bfloat16 v) { return __bfloat162float(v); }
    static __nv_bfloat16 store(A a) { return __float2bfloat16_rn(a); }
};

template <typename A>
A combine(ncclRedOp_t op, A a, A b) {
    if constexpr (std::is_integral_v<A>) {
        // Integer sums and products wrap as on the GPU (in unsigned: no signed overflow UB).
        using U = std::make_unsigned_t<A>;
        const auto ua = static_cast<U>(a), ub = static_cast<U>(b);
        if (op == ncclSum || op == ncclAvg) return static_cast<A>(ua + ub);
        if (op == ncclProd) return static_cast<A>(ua * ub);
    } else {
        if (op == ncclSum || op == ncclAvg) return a + b;
        if (op == ncclProd) return a * b;
    }
    if (op == ncclMax) return b > a ? b : a;
    return b < a ? b : a;
}

// out[i] = op over rows r = 0..nrows-1 of rows[r][i], in rank order.
void reduce_rows(ncclDataType_t t, ncclRedOp_t op, const std::byte* rows, int nrows,
                 std::size_t count, void* out) {
    with_type(t, [&](auto tag) {
        using T = decltype(tag);
        using Ar = Arith<T>;
        using A = typename Ar::A;
        for (std::size_t i = 0; i < count; ++i) {
            T v;
            std::memcpy(&v, rows + i * sizeof(T), sizeof(T));
            A acc = Ar::load(v);
            for (int r = 1; r < nrows; ++r) {
                std::memcpy(&v, rows + (r * count + i) * sizeof(T), sizeof(T));
                acc = combine(op, acc, Ar::load(v));
            }
            if (op == ncclAvg) acc = static_cast<A>(acc / static_cast<A>(nrows));
            const T res = Ar::store(acc);
            std::memcpy(static_cast<std::byte*>(out) + i * sizeof(T), &res, sizeof(T));
        }
    });
}

// ---- collectives (run with device memory open) ---------------------------------------
//
// The MPI exchange runs when the collective is issued (so no rank ever blocks in a deferred
// one while its peers wait for it elsewhere), but the result lands in device memory only
// when the collective's stream completes: work that reads it without being ordered after
// that stream (an event, a stream wait, a synchronisation) sees the old bytes, as on a GPU
// where the collective is still running.

// Writes `bytes` (the result, on the host) to `dst` when `stream` completes.
void land_on_stream_completion(cudaStream_t stream, void* dst, std::vector<std::byte> bytes) {
    gpt_emu::stream_add_deferred(stream, [dst, data = std::move(bytes)] {
        gpt_emu::DeviceAccess open;
        std::memcpy(dst, data.data(), data.size());
    });
}

// FNV-1a over a byte range (device memory open).
std::uint64_t fingerprint(const void* p, std::size_t n) {
    std::uint64_t h = 1469598103934665603ull;
    const auto* b = static_cast<const unsigned char*>(p);
    for (std::size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

// On a GPU a collective reads its send buffer while it runs, until its stream passes it:
// work that overwrites the buffer before then, without waiting for that stream, races with
// it. The emulator reads the buffer at issue, so it checks instead that the bytes are still
// the same when the stream completes; a change is reported as the runtime's sticky error
// (the next CUDA call's check fails with it).
void watch_send(cudaStream_t stream, const char* what, const void* send, std::size_t bytes) {
    if (bytes == 0) return;
    const std::uint64_t before = fingerprint(send, bytes);
    gpt_emu::stream_add_deferred(stream, [=] {
        gpt_emu::DeviceAccess open;
        if (fingerprint(send, bytes) == before) return;
        const std::string m = std::string(what) + ": its send buffer (" + std::to_string(bytes) +
                              " bytes) was overwritten while the collective was pending (work " +
                              "not ordered after the NCCL stream wrote it)";
        std::fprintf(stderr, "nccl emulator: %s\n", m.c_str());
        gpt_emu::set_error(cudaErrorLaunchFailure, m.c_str());
    });
}

// All-reduce (root < 0) or reduce to root: each rank reduces one slice of the elements
// (alltoallv), then the slices are gathered: O(count) memory per rank, deterministic.
ncclResult_t reduce_impl(const void* send, void* recv, std::size_t count, ncclDataType_t t,
                         ncclRedOp_t op, int root, ncclEmuComm* c, cudaStream_t stream) {
    const std::size_t es = type_size(t);
    const int n = c->nranks;
    std::vector<int> bytes(n), displs(n);
    std::size_t off = 0;
    for (int r = 0; r < n; ++r) {
        const std::size_t k = count / n + (static_cast<std::size_t>(r) < count % n ? 1 : 0);
        bytes[r] = static_cast<int>(k * es);
        displs[r] = static_cast<int>(off * es);
        off += k;
    }
    const int mine = bytes[c->rank];
    std::vector<std::byte> rows(static_cast<std::size_t>(mine) * n), slice(mine);
    std::vector<int> row_bytes(n, mine), row_displs(n);
    for (int r = 0; r < n; ++r) row_displs[r] = r * mine;
    NCCL_EMU_MPI(MPI_Alltoallv(send, bytes.data(), displs.data(), MPI_BYTE, rows.data(),
                               row_bytes.data(), row_displs.data(), MPI_BYTE, c->mpi),
                 "alltoallv (reduction)");
    reduce_rows(t, op, rows.data(), n, mine / es, slice.data());
    const bool receives = root < 0 || c->rank == root;
    watch_send(stream, root < 0 ? "ncclAllReduce" : "ncclReduce", send, count * es);
    std::vector<std::byte> result(receives ? count * es : 0);
    if (root < 0)
        NCCL_EMU_MPI(MPI_Allgatherv(slice.data(), mine, MPI_BYTE, result.data(), bytes.data(),
                                    displs.data(), MPI_BYTE, c->mpi), "allgatherv (all-reduce)");
    else
        NCCL_EMU_MPI(MPI_Gatherv(slice.data(), mine, MPI_BYTE, result.data(), bytes.data(),
                                 displs.data(), MPI_BYTE, root, c->mpi), "gatherv (reduce)");
    if (receives) land_on_stream_completion(stream, recv, std::move(result));
    return ncclSuccess;
}

ncclResult_t reduce_scatter_impl(const void* send, void* recv, std::size_t recvcount,
                                 ncclDataType_t t, ncclRedOp_t op, ncclEmuComm* c,
                                 cudaStream_t stream) {
    const int bytes = static_cast<int>(recvcount * type_size(t));
    // Rows and result are on the host, so in place (recv inside send) needs no special case.
    std::vector<std::byte> rows(static_cast<std::size_t>(bytes) * c->nranks), result(bytes);
    NCCL_EMU_MPI(MPI_Alltoall(send, bytes, MPI_BYTE, rows.data(), bytes, MPI_BYTE, c->mpi),
                 "alltoall (reduce-scatter)");
    reduce_rows(t, op, rows.data(), c->nranks, recvcount, result.data());
    watch_send(stream, "ncclReduceScatter", send, rows.size());
    land_on_stream_completion(stream, recv, std::move(result));
    return ncclSuccess;
}

ncclResult_t all_gather_impl(const void* send, void* recv, std::size_t bytes, ncclEmuComm* c,
                             cudaStream_t stream) {
    // The result is gathered on the host, so a send inside recv (in place) is a plain send.
    std::vector<std::byte> result(bytes * c->nranks);
    NCCL_EMU_MPI(MPI_Allgather(send, static_cast<int>(bytes), MPI_BYTE, result.data(),
                               static_cast<int>(bytes), MPI_BYTE, c->mpi), "allgather");
    watch_send(stream, "ncclAllGather", send, bytes);
    land_on_stream_completion(stream, recv, std::move(result));
    return ncclSuccess;
}

ncclResult_t broadcast_impl(const void* send, void* recv, std::size_t bytes, int root,
                            ncclEmuComm* c, cudaStream_t stream) {
    std::vector<std::byte> result(bytes);
    if (c->rank == root) std::memcpy(result.data(), send, bytes);
    NCCL_EMU_MPI(MPI_Bcast(result.data(), static_cast<int>(bytes), MPI_BYTE, root, c->mpi), "bcast");
    if (c->rank == root) watch_send(stream, "ncclBroadcast", send, bytes);
    land_on_stream_completion(stream, recv, std::move(result));
    return ncclSuccess;
}

// ---- validation ----------------------------------------------------------------------

ncclResult_t check_comm(ncclComm_t c, const char* fn) {
    if (!c || c->magic != ncclEmuComm::kMagic)
        return fail(ncclInvalidArgument, std::string(fn) + ": invalid communicator");
    return ncclSuccess;
}

ncclResult_t check_type(ncclDataType_t t, const char* fn) {
    if (type_size(t) == 0)
        return fail(ncclInvalidArgument, std::string(fn) + ": unsupported data type " +
                                             std::to_string(static_cast<int>(t)));
    return ncclSuccess;
}

ncclResult_t check_op(ncclRedOp_t op, const char* fn) {
    if (op < ncclSum || op >= ncclNumOps)
        return fail(ncclInvalidArgument, std::string(fn) + ": unsupported reduction op " +
                                             std::to_string(static_cast<int>(op)));
    return ncclSuccess;
}

// The whole range must lie in one live device allocation, and fit MPI's int counts.
ncclResult_t check_buffer(const void* p, std::size_t bytes, const char* fn, const char* what) {
    if (bytes > static_cast<std::size_t>(INT32_MAX))
        return fail(ncclInvalidArgument, std::string(fn) + ": " + what + " of " +
                                             std::to_string(bytes) +
                                             " bytes exceeds the emulator's 2^31-1 byte limit");
    if (!gpt_emu::is_device(p, bytes))
        return fail(ncclInvalidArgument, std::string(fn) + ": " + what + " [" + ptr_text(p) +
                                             ", +" + std::to_string(bytes) +
                                             ") is not inside one device allocation");
    return ncclSuccess;
}

ncclResult_t check_root(int root, ncclEmuComm* c, const char* fn) {
    if (root < 0 || root >= c->nranks)
        return fail(ncclInvalidArgument, std::string(fn) + ": root " + std::to_string(root) +
                                             " outside 0.." + std::to_string(c->nranks - 1));
    return ncclSuccess;
}

#define NCCL_EMU_TRY(expr)                                                \
    do {                                                                  \
        if (const ncclResult_t try_rc_ = (expr); try_rc_ != ncclSuccess) \
            return try_rc_;                                               \
    } while (0)

// ---- issuing: immediately, or at the outermost ncclGroupEnd --------------------------

// A byte range an operation reads, or writes.
struct Range {
    const void* p;
    std::size_t bytes;
    bool write;
};

struct Op {
    enum Kind { Send, Recv, Collective } kind;
    ncclEmuComm* comm;
    cudaStream_t stream;
    std::vector<Range> ranges;          // p2p: the one buffer
    int peer = 0;                       // p2p
    std::function<ncclResult_t()> run;  // collectives
};

// A send or receive posted to MPI, completed by its stream's synchronisation, by a later
// operation that touches its buffer, or by destroying its communicator.
struct P2pRequest {
    MPI_Request req = MPI_REQUEST_NULL;
    bool recv = false;
    void* buf = nullptr;
    std::size_t bytes = 0;
    int peer = 0;
    ncclEmuComm* comm = nullptr;
};
// Posted, maybe not yet completed. Not thread-local: a request lives past the call that
// posted it (host code using NCCL runs on one thread anyway, as MPI has no thread support).
std::vector<std::shared_ptr<P2pRequest>> g_pending;

struct GroupState {
    int depth = 0;
    ncclResult_t error = ncclSuccess;  // first failed call inside the group
    std::vector<Op> ops;
};
thread_local GroupState g_group;

// Waits one posted send/receive.
void complete(P2pRequest& p) {
    if (p.req == MPI_REQUEST_NULL || !mpi_usable()) return;
    gpt_emu::DeviceAccess open;
    MPI_Status st;
    const int rc = MPI_Wait(&p.req, &st);
    int cancelled = 0, got = 0;
    if (rc == MPI_SUCCESS) MPI_Test_cancelled(&st, &cancelled);
    if (rc == MPI_SUCCESS && (cancelled || !p.recv)) return;
    if (rc == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, &got);
    if (rc == MPI_SUCCESS && static_cast<std::size_t>(got) == p.bytes) return;
    // The stream's completion cannot return an error: it becomes the runtime's sticky one.
    if (rc != MPI_SUCCESS) {
        p.req = MPI_REQUEST_NULL;  // given up on: MPI may keep a failed request
        mpi_fail(rc, p.recv ? "receive completion" : "send completion");
    } else {
        fail(ncclInvalidUsage, "ncclRecv from rank " + std::to_string(p.peer) + ": expected " +
                                   std::to_string(p.bytes) + " bytes, the send had " +
                                   std::to_string(got));
    }
    gpt_emu::set_error(cudaErrorLaunchFailure, g_last_error.c_str());
}

void prune_pending() {
    std::erase_if(g_pending, [](const auto& p) { return p->req == MPI_REQUEST_NULL; });
}

// Stream order says a new operation starts after earlier work on its stream (or on streams
// it waited for by event); all that can still be running is our posted sends/receives. Only
// those sharing bytes with the new operation, one side writing, must finish first: waiting
// for every earlier send would block the host where NCCL keeps queueing (two ranks each
// sending twice before receiving would deadlock on large messages).
void finish_conflicting(const std::vector<Op>& ops) {
    for (auto& p : g_pending) {
        if (p->req == MPI_REQUEST_NULL) continue;
        const auto* lo = static_cast<const std::byte*>(p->buf);
        for (const Op& op : ops)
            for (const Range& r : op.ranges) {
                const auto* rlo = static_cast<const std::byte*>(r.p);
                if ((p->recv || r.write) && rlo < lo + p->bytes && lo < rlo + r.bytes) complete(*p);
            }
    }
    prune_pending();
}

ncclResult_t run_ops(std::vector<Op>& ops) {
    finish_conflicting(ops);
    gpt_emu::DeviceAccess open;
    ncclResult_t result = ncclSuccess;
    // Every send and receive is posted before any collective blocks, so a peer waiting in a
    // collective on another communicator still gets our messages.
    std::vector<std::pair<cudaStream_t, std::shared_ptr<P2pRequest>>> posted;
    for (const Op& op : ops) {
        if (op.kind == Op::Collective) continue;
        // The buffer is read (or written) by MPI from now on: the work queued before it on its
        // stream, and on the streams that stream waits for, runs first (not earlier sends,
        // which NCCL would keep queueing: see finish_conflicting).
        gpt_emu::stream_complete_work(op.stream);
        auto p = std::make_shared<P2pRequest>();
        p->recv = op.kind == Op::Recv;
        p->buf = const_cast<void*>(op.ranges[0].p);
        p->bytes = op.ranges[0].bytes;
        p->peer = op.peer;
        p->comm = op.comm;
        const int n = static_cast<int>(p->bytes);
        const int rc = p->recv ? MPI_Irecv(p->buf, n, MPI_BYTE, p->peer, 0, op.comm->mpi, &p->req)
                               : MPI_Isend(p->buf, n, MPI_BYTE, p->peer, 0, op.comm->mpi, &p->req);
        if (rc != MPI_SUCCESS) {
            const ncclResult_t e = mpi_fail(rc, p->recv ? "irecv" : "isend");
            if (result == ncclSuccess) result = e;
            continue;
        }
        posted.emplace_back(op.stream, std::move(p));
    }
    // After a failed collective the ranks disagree on what comes next: stop there. Each
    // starts after earlier work on its stream (results of collectives before it landed).
    for (const Op& op : ops)
        if (op.kind == Op::Collective && result == ncclSuccess) {
            gpt_emu::stream_complete(op.stream);
            result = op.run();
        }
    for (auto& [stream, p] : posted) {
        g_pending.push_back(p);
        if (p->recv)
            gpt_emu::stream_add_pending(stream, [p = p] { complete(*p); });
        else
            gpt_emu::stream_add_pending_send(stream, [p = p] { complete(*p); });
    }
    return result;
}

ncclResult_t issue(Op op) {
    if (g_group.depth > 0) {
        g_group.ops.push_back(std::move(op));
        return ncclSuccess;
    }
    std::vector<Op> ops;
    ops.push_back(std::move(op));
    return run_ops(ops);
}

// A failed call inside a group also fails the group (as NCCL's ncclGroupEnd reports it).
ncclResult_t noted(ncclResult_t rc) {
    if (rc != ncclSuccess && g_group.depth > 0 && g_group.error == ncclSuccess) g_group.error = rc;
    return rc;
}

ncclResult_t issue_collective(ncclEmuComm* c, cudaStream_t stream, std::vector<Range> ranges,
                              std::function<ncclResult_t()> f) {
    return issue(Op{Op::Collective, c, stream, std::move(ranges), 0, std::move(f)});
}

ncclResult_t p2p(Op::Kind kind, void* buf, std::size_t count, ncclDataType_t t, int peer,
                 ncclComm_t c, cudaStream_t stream, const char* fn) {
    NCCL_EMU_TRY(check_comm(c, fn));
    NCCL_EMU_TRY(check_type(t, fn));
    if (peer < 0 || peer >= c->nranks)
        return fail(ncclInvalidArgument, std::string(fn) + ": peer " + std::to_string(peer) +
                                             " outside 0.." + std::to_string(c->nranks - 1));
    if (count == 0) return ncclSuccess;
    const std::size_t bytes = count * type_size(t);
    NCCL_EMU_TRY(check_buffer(buf, bytes, fn, kind == Op::Send ? "sendbuff" : "recvbuff"));
    return issue(Op{kind, c, stream, {Range{buf, bytes, kind == Op::Recv}}, peer, {}});
}

}  // namespace

// ---- API -----------------------------------------------------------------------------

const char* ncclGetErrorString(ncclResult_t result) {
    switch (result) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (see ncclGetLastError)";
        case ncclSystemError: return "unhandled system error (see ncclGetLastError)";
        case ncclInternalError: return "internal error (see ncclGetLastError)";
        case ncclInvalidArgument: return "invalid argument (see ncclGetLastError)";
        case ncclInvalidUsage: return "invalid usage (see ncclGetLastError)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        case ncclNumResults: break;
    }
    return "unknown result code";
}

const char* ncclGetLastError(ncclComm_t) { return g_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) {
    if (!uniqueId) return fail(ncclInvalidArgument, "ncclGetUniqueId: null uniqueId");
    if (!mpi_usable())
        return fail(ncclInvalidUsage, "ncclGetUniqueId: the emulated NCCL needs MPI initialised");
    static std::atomic<std::uint64_t> counter{0};
    static const std::uint64_t nonce = [] {
        std::random_device rd;
        return (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
    }();
    int me = 0;
    NCCL_EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &me), "comm rank");
    const IdData id{kIdMagic, counter++, nonce, me};
    std::memset(uniqueId->internal, 0, sizeof uniqueId->internal);
    std::memcpy(uniqueId->internal, &id, sizeof id);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
    if (!comm) return fail(ncclInvalidArgument, "ncclCommInitRank: null comm");
    *comm = nullptr;
    if (nranks < 1 || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) +
                                             " of nranks " + std::to_string(nranks));
    if (!mpi_usable())
        return fail(ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL needs MPI initialised");
    IdData id;
    std::memcpy(&id, commId.internal, sizeof id);
    int me = 0, world = 0;
    NCCL_EMU_MPI(MPI_Comm_rank(MPI_COMM_WORLD, &me), "comm rank");
    NCCL_EMU_MPI(MPI_Comm_size(MPI_COMM_WORLD, &world), "comm size");
    if (id.magic != kIdMagic || id.creator < 0 || id.creator >= world)
        return fail(ncclInvalidArgument, "ncclCommInitRank: the id is not from ncclGetUniqueId");
    const Tags tags = tags_of(id);

    std::vector<int> world_of(nranks);
    NCCL_EMU_TRY(me == id.creator ? collect_members(id, tags, nranks, rank, me, world_of)
                                  : join_members(id, tags, nranks, rank, me, world_of));

    // Collective over the members only (other processes may be forming other communicators).
    MPI_Group world_group, group;
    NCCL_EMU_MPI(MPI_Comm_group(MPI_COMM_WORLD, &world_group), "comm group");
    const int rc = MPI_Group_incl(world_group, nranks, world_of.data(), &group);
    MPI_Group_free(&world_group);
    if (rc != MPI_SUCCESS) return mpi_fail(rc, "group incl");
    MPI_Comm mpi = MPI_COMM_NULL;
    const int rc2 = MPI_Comm_create_group(MPI_COMM_WORLD, group, tags.request, &mpi);
    MPI_Group_free(&group);
    if (rc2 != MPI_SUCCESS) return mpi_fail(rc2, "comm create group");
    // Errors come back as ncclSystemError with MPI's text instead of aborting the job.
    MPI_Comm_set_errhandler(mpi, MPI_ERRORS_RETURN);
    auto* c = new ncclEmuComm;
    c->mpi = mpi;
    c->rank = rank;
    c->nranks = nranks;
    *comm = c;
    return ncclSuccess;
}

// NCCL's destroy flushes issued work: outstanding sends/receives complete first.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    NCCL_EMU_TRY(check_comm(comm, "ncclCommDestroy"));
    for (auto& p : g_pending)
        if (p->comm == comm) complete(*p);
    prune_pending();
    if (mpi_usable()) MPI_Comm_free(&comm->mpi);
    comm->magic = 0;
    delete comm;
    return ncclSuccess;
}

// Abort gives up on outstanding sends/receives (MPI cancels what it still can) and frees.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
    if (!comm) return ncclSuccess;
    NCCL_EMU_TRY(check_comm(comm, "ncclCommAbort"));
    if (mpi_usable())
        for (auto& p : g_pending)
            if (p->comm == comm && p->req != MPI_REQUEST_NULL) {
                gpt_emu::DeviceAccess open;
                MPI_Cancel(&p->req);
                MPI_Wait(&p->req, MPI_STATUS_IGNORE);
            }
    prune_pending();
    if (mpi_usable()) MPI_Comm_free(&comm->mpi);
    comm->magic = 0;
    delete comm;
    return ncclSuccess;
}

ncclResult_t ncclCommCount(const ncclComm_t comm, int* count) {
    NCCL_EMU_TRY(check_comm(comm, "ncclCommCount"));
    if (!count) return fail(ncclInvalidArgument, "ncclCommCount: null count");
    *count = comm->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t comm, int* rank) {
    NCCL_EMU_TRY(check_comm(comm, "ncclCommUserRank"));
    if (!rank) return fail(ncclInvalidArgument, "ncclCommUserRank: null rank");
    *rank = comm->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
    const char* fn = "ncclAllReduce";
    return noted([&]() -> ncclResult_t {
        NCCL_EMU_TRY(check_comm(comm, fn));
        NCCL_EMU_TRY(check_type(datatype, fn));
        NCCL_EMU_TRY(check_op(op, fn));
        if (count == 0) return ncclSuccess;
        const std::size_t bytes = count * type_size(datatype);
        NCCL_EMU_TRY(check_buffer(sendbuff, bytes, fn, "sendbuff"));
        NCCL_EMU_TRY(check_buffer(recvbuff, bytes, fn, "recvbuff"));
        const std::vector<Range> ranges{{sendbuff, bytes, false}, {recvbuff, bytes, true}};
        return issue_collective(comm, stream, ranges, [=] {
            return reduce_impl(sendbuff, recvbuff, count, datatype, op, -1, comm, stream);
        });
    }());
}

ncclResult_t ncclReduce(const void* sendbuff, void* recvbuff, std::size_t count,
                        ncclDataType_t datatype, ncclRedOp_t op, int root, ncclComm_t comm,
                        cudaStream_t stream) {
    const char* fn = "ncclReduce";
    return noted([&]() -> ncclResult_t {
        NCCL_EMU_TRY(check_comm(comm, fn));
        NCCL_EMU_TRY(check_type(datatype, fn));
        NCCL_EMU_TRY(check_op(op, fn));
        NCCL_EMU_TRY(check_root(root, comm, fn));
        if (count == 0) return ncclSuccess;
        const std::size_t bytes = count * type_size(datatype);
        NCCL_EMU_TRY(check_buffer(sendbuff, bytes, fn, "sendbuff"));
        if (comm->rank == root) NCCL_EMU_TRY(check_buffer(recvbuff, bytes, fn, "recvbuff"));
        std::vector<Range> ranges{{sendbuff, bytes, false}};
        if (comm->rank == root) ranges.push_back({recvbuff, bytes, true});
        return issue_collective(comm, stream, std::move(ranges), [=] {
            return reduce_impl(sendbuff, recvbuff, count, datatype, op, root, comm, stream);
        });
    }());
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, std::size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
    const char* fn = "ncclReduceScatter";
    return noted([&]() -> ncclResult_t {
        NCCL_EMU_TRY(check_comm(comm, fn));
        NCCL_EMU_TRY(check_type(datatype, fn));
        NCCL_EMU_TRY(check_op(op, fn));
        if (recvcount == 0) return ncclSuccess;
        const std::size_t bytes = recvcount * type_size(datatype);
        NCCL_EMU_TRY(check_buffer(sendbuff, bytes * comm->nranks, fn, "sendbuff"));
        NCCL_EMU_TRY(check_buffer(recvbuff, bytes, fn, "recvbuff"));
        const std::vector<Range> ranges{{sendbuff, bytes * comm->nranks, false},
                                        {recvbuff, bytes, true}};
        return issue_collective(comm, stream, ranges, [=] {
            return reduce_scatter_impl(sendbuff, recvbuff, recvcount, datatype, op, comm, stream);
        });
    }());
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, std::size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
    const char* fn = "ncclAllGather";
    return noted([&]() -> ncclResult_t {
        NCCL_EMU_TRY(check_comm(comm, fn));
        NCCL_EMU_TRY(check_type(datatype, fn));
        if (sendcount == 0) return ncclSuccess;
        const std::size_t bytes = sendcount * type_size(datatype);
        NCCL_EMU_TRY(check_buffer(sendbuff, bytes, fn, "sendbuff"));
        NCCL_EMU_TRY(check_buffer(recvbuff, bytes * comm->nranks, fn, "recvbuff"));
        const std::vector<Range> ranges{{sendbuff, bytes, false},
                                        {recvbuff, bytes * comm->nranks, true}};
        return issue_collective(comm, stream, ranges,
                                [=] { return all_gather_impl(sendbuff, recvbuff, bytes, comm, stream); });
    }());
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, std::size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
    const char* fn = "ncclBroadcast";
    return noted([&]() -> ncclResult_t {
        NCCL_EMU_TRY(check_comm(comm, fn));
        NCCL_EMU_TRY(check_type(datatype, fn));
        NCCL_EMU_TRY(check_root(root, comm, fn));
        if (count == 0) return ncclSuccess;
        const std::size_t bytes = count * type_size(datatype);
        if (comm->rank == root) NCCL_EMU_TRY(check_buffer(sendbuff, bytes, fn, "sendbuff"));
        NCCL_EMU_TRY(check_buffer(recvbuff, bytes, fn, "recvbuff"));
        std::vector<Range> ranges{{recvbuff, bytes, true}};
        if (comm->rank == root) ranges.push_back({sendbuff, bytes, false});
        return issue_collective(comm, stream, std::move(ranges), [=] {
            return broadcast_impl(sendbuff, recvbuff, bytes, root, comm, stream);
        });
    }());
}

ncclResult_t ncclSend(const void* sendbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return noted(p2p(Op::Send, const_cast<void*>(sendbuff), count, datatype, peer, comm, stream,
                     "ncclSend"));
}

ncclResult_t ncclRecv(void* recvbuff, std::size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
    return noted(p2p(Op::Recv, recvbuff, count, datatype, peer, comm, stream, "ncclRecv"));
}

ncclResult_t ncclGroupStart() {
    ++g_group.depth;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
    if (g_group.depth == 0)
        return fail(ncclInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart");
    if (--g_group.depth > 0) return ncclSuccess;
    std::vector<Op> ops = std::move(g_group.ops);
    const ncclResult_t error = g_group.error;
    g_group = GroupState{};
    // A group with a failed call issues nothing (its error message is already recorded).
    if (error != ncclSuccess) return error;
    return run_ops(ops);
}
