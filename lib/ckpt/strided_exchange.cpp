#include "ckpt/strided_exchange.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "ckpt/collective.hpp"
#include "ckpt/direct_writes.hpp"
#include "core/errors.hpp"
#include "core/watchdog.hpp"

namespace gpt::ckpt {

Domains split_domains(std::uint64_t base, std::uint64_t total, int nranks, std::size_t rotate,
                      std::uint64_t min_domain, std::uint64_t page) {
    Domains d;
    const auto n = static_cast<std::uint64_t>(std::clamp<std::uint64_t>(total / std::max<std::uint64_t>(min_domain, 1), 1,
                                                                       static_cast<std::uint64_t>(nranks)));
    d.rotate = static_cast<int>(rotate % static_cast<std::size_t>(nranks));
    d.bounds.push_back(0);
    for (std::uint64_t k = 1; k < n; ++k) {
        // The file offset of the even split, rounded up to a page: every inner bound is a
        // page boundary, so only the dataset's own first and last pages are partial.
        const std::uint64_t at = (base + total * k / n + page - 1) / page * page - base;
        if (at > d.bounds.back() && at < total) d.bounds.push_back(at);
    }
    d.bounds.push_back(total);
    return d;
}

namespace {

// Domain memory, kept for the process once touched (a fresh page costs a host fault on our
// VMs, more than writing it), reused by every later save.
std::mutex pool_mutex;
std::vector<std::pair<unsigned char*, std::size_t>>& pool() {
    static auto* p = new std::vector<std::pair<unsigned char*, std::size_t>>;  // never freed: outlives static teardown
    return *p;
}

std::pair<unsigned char*, std::size_t> take(std::size_t bytes) {
    {
        std::lock_guard lock(pool_mutex);
        auto& p = pool();
        auto best = p.end();
        for (auto it = p.begin(); it != p.end(); ++it)
            if (it->second >= bytes && (best == p.end() || it->second < best->second)) best = it;
        if (best != p.end()) {
            const auto got = *best;
            p.erase(best);
            return got;
        }
    }
    constexpr std::size_t kPage = 4096;
    const std::size_t size = (bytes + kPage - 1) / kPage * kPage;
    void* m = std::aligned_alloc(kPage, size);
    if (!m) throw std::bad_alloc();
    return {static_cast<unsigned char*>(m), size};
}

void alltoallv(const std::vector<unsigned char>& send, const std::vector<int>& scounts, std::vector<unsigned char>& recv,
               const std::vector<int>& rcounts, MPI_Comm comm, const char* what) {
    const int n = static_cast<int>(scounts.size());
    std::vector<int> sdispl(n, 0), rdispl(n, 0);
    for (int i = 1; i < n; ++i) {
        sdispl[i] = sdispl[i - 1] + scounts[i - 1];
        rdispl[i] = rdispl[i - 1] + rcounts[i - 1];
    }
    recv.resize(static_cast<std::size_t>(rdispl[n - 1] + rcounts[n - 1]));
    MPI_Request req = MPI_REQUEST_NULL;
    if (MPI_Ialltoallv(send.data(), scounts.data(), sdispl.data(), MPI_BYTE, recv.data(), rcounts.data(),
                       rdispl.data(), MPI_BYTE, comm, &req) != MPI_SUCCESS)
        throw CommError(std::string("MPI_Ialltoallv failed: ") + what);
    wait_politely(req, what);
}

}  // namespace

struct StridedExchange::Buffers {
    std::vector<std::pair<unsigned char*, std::size_t>> held;
    ~Buffers() {
        std::lock_guard lock(pool_mutex);
        for (const auto& b : held) pool().push_back(b);
    }
};

StridedExchange::StridedExchange(MPI_Comm comm) : comm_(comm), buffers_(std::make_shared<Buffers>()) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
}

StridedExchange::~StridedExchange() = default;

std::shared_ptr<void> StridedExchange::buffers() { return buffers_; }

void StridedExchange::exchange(std::size_t entry, const std::string& name, std::uint64_t base, std::uint64_t total,
                               const std::vector<Run>& runs, DirectWrites& direct) {
    // Pieces of at least a direct write's minimum per domain; pages of the file.
    constexpr std::uint64_t kMinDomain = std::uint64_t{256} << 10, kPage = 4096;
    const Domains d = split_domains(base, total, size_, entry, kMinDomain, kPage);
    // Each run cut at the domain bounds: (destination, data_offset, bytes, source).
    struct Cut {
        int dest;
        std::uint64_t at, bytes;
        const unsigned char* p;
    };
    std::vector<Cut> cuts;
    for (const Run& r : runs) {
        std::uint64_t at = r.data_offset;
        const std::uint64_t end = r.data_offset + r.bytes;
        while (at < end) {
            const int k = static_cast<int>(std::upper_bound(d.bounds.begin(), d.bounds.end(), at) - d.bounds.begin()) - 1;
            const std::uint64_t stop = std::min(end, d.bounds[k + 1]);
            cuts.push_back({d.owner(k, size_), at, stop - at, r.data + (at - r.data_offset)});
            at = stop;
        }
    }
    std::stable_sort(cuts.begin(), cuts.end(), [](const Cut& x, const Cut& y) { return x.dest < y.dest; });
    // Counts first (one all-to-all of two ints per pair), then (data_offset, bytes) headers
    // and the bytes, in the same order. int counts: one rank's part of one dataset stays far
    // below 2 GiB (a 6144 x 24576 fp16 weight is 0.3 GB).
    std::vector<int> scount(2 * size_, 0), rcount(2 * size_, 0);
    std::uint64_t send_bytes = 0;
    for (const Cut& c : cuts) {
        scount[2 * c.dest] += 2 * static_cast<int>(sizeof(std::uint64_t));
        send_bytes += c.bytes;
        GPT_REQUIRE(static_cast<std::uint64_t>(scount[2 * c.dest + 1]) + c.bytes < (std::uint64_t{1} << 31), InternalError,
                    "strided exchange of ", name, ": over 2 GiB for one rank exceeds MPI's int counts");
        scount[2 * c.dest + 1] += static_cast<int>(c.bytes);
    }
    // Staging reused by every exchange of this thread (only the caller's thread exchanges):
    // touched once per process, not once per dataset (fresh pages cost host faults here).
    thread_local std::vector<unsigned char> send_head, send_body, recv_head, recv_body;
    send_head.resize(cuts.size() * 2 * sizeof(std::uint64_t));
    send_body.resize(send_bytes);
    {
        unsigned char* h = send_head.data();
        unsigned char* b = send_body.data();
        for (const Cut& c : cuts) {
            const std::uint64_t hv[2] = {c.at, c.bytes};
            std::memcpy(h, hv, sizeof hv);
            h += sizeof hv;
            std::memcpy(b, c.p, c.bytes);
            b += c.bytes;
        }
    }
    watchdog::Op op;
    op.name = "checkpoint strided exchange";
    op.nranks = size_;
    op.bytes = static_cast<std::int64_t>(send_head.size() + send_body.size());
    watchdog::OpScope scope(op);
    {
        MPI_Request req = MPI_REQUEST_NULL;
        if (MPI_Ialltoall(scount.data(), 2, MPI_INT, rcount.data(), 2, MPI_INT, comm_, &req) != MPI_SUCCESS)
            throw CommError("MPI_Ialltoall failed: checkpoint strided exchange counts");
        wait_politely(req, "MPI_Ialltoall of checkpoint strided exchange counts");
    }
    std::vector<int> sh(size_), rh(size_), sb(size_), rb(size_);
    for (int q = 0; q < size_; ++q) {
        sh[q] = scount[2 * q];
        sb[q] = scount[2 * q + 1];
        rh[q] = rcount[2 * q];
        rb[q] = rcount[2 * q + 1];
    }
    alltoallv(send_head, sh, recv_head, rh, comm_, "MPI_Ialltoallv of checkpoint strided exchange headers");
    alltoallv(send_body, sb, recv_body, rb, comm_, "MPI_Ialltoallv of checkpoint strided exchange bytes");

    // This rank's domain: placed at the file's page phase, so that its whole pages are
    // written from where they lie (DirectWrites writes page-aligned memory in place).
    int mine = -1;
    for (int k = 0; k < d.count(); ++k)
        if (d.owner(k, size_) == rank_) mine = k;
    const std::size_t nhead = recv_head.size() / (2 * sizeof(std::uint64_t));
    if (mine < 0) {
        if (nhead > 0 && problem_.empty())
            problem_ = "strided exchange of " + name + ": rank " + std::to_string(rank_) + " owns no domain but received pieces";
        return;
    }
    const std::uint64_t lo = d.bounds[mine], hi = d.bounds[mine + 1];
    const std::size_t phase = static_cast<std::size_t>((base + lo) % kPage);
    const auto buf = take(phase + (hi - lo));
    buffers_->held.push_back(buf);
    unsigned char* dom = buf.first + phase;
    // The pieces must tile [lo, hi): the writer's count check (selections add up to the
    // tensor) passes overlapping selections with a gap, which would leave stale bytes here.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;  // (data_offset, bytes)
    pieces.reserve(nhead);
    std::size_t from = 0;
    for (std::size_t i = 0; i < nhead; ++i) {
        std::uint64_t hv[2];
        std::memcpy(hv, recv_head.data() + i * sizeof hv, sizeof hv);
        if (hv[0] < lo || hv[0] + hv[1] > hi || from + hv[1] > recv_body.size()) {
            if (problem_.empty()) problem_ = "strided exchange of " + name + ": a piece outside this rank's domain";
            return;
        }
        std::memcpy(dom + (hv[0] - lo), recv_body.data() + from, hv[1]);
        from += hv[1];
        pieces.emplace_back(hv[0], hv[1]);
    }
    std::sort(pieces.begin(), pieces.end());
    std::uint64_t next = lo;
    for (const auto& [at, n] : pieces) {
        if (at != next) break;
        next += n;
    }
    if (next != hi) {
        if (problem_.empty())
            problem_ = "strided exchange of " + name + ": the ranks' selections do not cover bytes [" +
                       std::to_string(lo) + ", " + std::to_string(hi) + ") exactly once (first gap or overlap at byte " +
                       std::to_string(next) + "). HINT: each element must be written by exactly one rank";
        return;
    }
    domain_bytes_ += hi - lo;
    direct.add(entry, base + lo, lo, dom, hi - lo);
}

void StridedExchange::finish() const {
    GPT_REQUIRE(problem_.empty(), InternalError, problem_);
}

}  // namespace gpt::ckpt
