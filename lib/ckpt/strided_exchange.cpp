#include "ckpt/strided_exchange.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>

#include "ckpt/collective.hpp"
#include "ckpt/direct_writes.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {
constexpr std::uint64_t kPage = 4096;
}  // namespace

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

Domains strided_domains(std::uint64_t base, std::uint64_t total, int nranks, std::size_t rotate) {
    return split_domains(base, total, nranks, rotate, std::uint64_t{256} << 10, kPage);
}

namespace {

std::mutex pool_mutex;
std::vector<std::pair<unsigned char*, std::size_t>>& pool() {
    static auto* p = new std::vector<std::pair<unsigned char*, std::size_t>>;  // never freed: outlives static teardown
    return *p;
}

}  // namespace

DomainBuffer take_domain_buffer(std::size_t bytes, std::size_t phase) {
    const std::size_t need = phase + bytes;
    std::pair<unsigned char*, std::size_t> got{nullptr, 0};
    {
        std::lock_guard lock(pool_mutex);
        auto& p = pool();
        auto best = p.end();
        for (auto it = p.begin(); it != p.end(); ++it)
            if (it->second >= need && (best == p.end() || it->second < best->second)) best = it;
        if (best != p.end()) {
            got = *best;
            p.erase(best);
        }
    }
    if (!got.first) {
        const std::size_t size = (need + kPage - 1) / kPage * kPage;
        void* m = std::aligned_alloc(kPage, size);
        if (!m) throw std::bad_alloc();
        got = {static_cast<unsigned char*>(m), size};
    }
    DomainBuffer b;
    b.memory = std::shared_ptr<unsigned char>(got.first, [size = got.second](unsigned char* m) {
        std::lock_guard lock(pool_mutex);
        pool().emplace_back(m, size);
    });
    b.data = got.first + phase;
    return b;
}

namespace {

// A run cut at the domain bounds: the part of it that domain owner `owner` holds.
struct Cut {
    int owner;
    std::uint64_t at, bytes;  // bytes of the dataset
    std::size_t run;          // index of the run it came from
};

// The runs (data_offset, bytes) cut at d's bounds, grouped by owner (in run order inside
// each group): the order both sides of an exchange list them in.
template <class Runs>
std::vector<Cut> cut_runs(const Domains& d, const Runs& runs, int nranks) {
    std::vector<Cut> cuts;
    for (std::size_t i = 0; i < runs.size(); ++i) {
        std::uint64_t at = runs[i].data_offset;
        const std::uint64_t end = at + runs[i].bytes;
        while (at < end) {
            const int k = static_cast<int>(std::upper_bound(d.bounds.begin(), d.bounds.end(), at) - d.bounds.begin()) - 1;
            const std::uint64_t stop = std::min(end, d.bounds[k + 1]);
            cuts.push_back({d.owner(k, nranks), at, stop - at, i});
            at = stop;
        }
    }
    std::stable_sort(cuts.begin(), cuts.end(), [](const Cut& x, const Cut& y) { return x.owner < y.owner; });
    return cuts;
}

// Per-rank byte counts of the cuts' headers (two u64 each) and bytes, refusing more than
// MPI's int counts can carry (one rank's part of one dataset: a 6144 x 24576 fp16 weight
// is 0.3 GB in all).
void count_cuts(const std::vector<Cut>& cuts, int nranks, const std::string& name, std::vector<int>& head,
                std::vector<int>& body) {
    head.assign(nranks, 0);
    std::vector<std::uint64_t> b(nranks, 0);
    for (const Cut& c : cuts) {
        head[c.owner] += 2 * static_cast<int>(sizeof(std::uint64_t));
        b[c.owner] += c.bytes;
    }
    body.assign(nranks, 0);
    for (int q = 0; q < nranks; ++q) {
        GPT_REQUIRE(b[q] < (std::uint64_t{1} << 31), InternalError, "strided exchange of ", name,
                    ": over 2 GiB between two ranks exceeds MPI's int counts");
        body[q] = static_cast<int>(b[q]);
    }
}

void pack_headers(const std::vector<Cut>& cuts, std::vector<unsigned char>& out) {
    out.resize(cuts.size() * 2 * sizeof(std::uint64_t));
    unsigned char* h = out.data();
    for (const Cut& c : cuts) {
        const std::uint64_t hv[2] = {c.at, c.bytes};
        std::memcpy(h, hv, sizeof hv);
        h += sizeof hv;
    }
}

std::pair<std::uint64_t, std::uint64_t> header(const std::vector<unsigned char>& heads, std::size_t i) {
    std::uint64_t hv[2];
    std::memcpy(hv, heads.data() + i * sizeof hv, sizeof hv);
    return {hv[0], hv[1]};
}

int my_domain(const Domains& d, int rank, int nranks) {
    for (int k = 0; k < d.count(); ++k)
        if (d.owner(k, nranks) == rank) return k;
    return -1;
}

// Staging reused by every exchange of this thread (only the caller's thread exchanges):
// touched once per process, not once per dataset (fresh pages cost host faults here).
struct Staging {
    std::vector<unsigned char> send_head, send_body, recv_head, recv_body;
};
Staging& staging() {
    thread_local Staging s;
    return s;
}

}  // namespace

StridedExchange::StridedExchange(MPI_Comm comm)
    : comm_(comm), buffers_(std::make_shared<std::vector<DomainBuffer>>()) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
}

StridedExchange::~StridedExchange() = default;

std::shared_ptr<void> StridedExchange::buffers() { return buffers_; }

void StridedExchange::exchange(std::size_t entry, const std::string& name, std::uint64_t base, std::uint64_t total,
                               const std::vector<Run>& runs, DirectWrites& direct) {
    const Domains d = strided_domains(base, total, size_, entry);
    const std::vector<Cut> cuts = cut_runs(d, runs, size_);
    std::vector<int> sh, sb;
    count_cuts(cuts, size_, name, sh, sb);
    Staging& st = staging();
    pack_headers(cuts, st.send_head);
    std::size_t send_bytes = 0;
    for (const Cut& c : cuts) send_bytes += c.bytes;
    st.send_body.resize(send_bytes);
    unsigned char* b = st.send_body.data();
    for (const Cut& c : cuts) {
        std::memcpy(b, runs[c.run].data + (c.at - runs[c.run].data_offset), c.bytes);
        b += c.bytes;
    }
    // Counts (two ints per pair), then the (data_offset, bytes) headers and the bytes.
    std::vector<int> scount(2 * size_), rcount(2 * size_);
    for (int q = 0; q < size_; ++q) {
        scount[2 * q] = sh[q];
        scount[2 * q + 1] = sb[q];
    }
    alltoall_ints(scount.data(), rcount.data(), 2, comm_, "checkpoint strided exchange counts");
    std::vector<int> rh(size_), rb(size_);
    for (int q = 0; q < size_; ++q) {
        rh[q] = rcount[2 * q];
        rb[q] = rcount[2 * q + 1];
    }
    alltoallv_bytes(st.send_head.data(), sh, st.recv_head, rh, comm_, "checkpoint strided exchange headers");
    alltoallv_bytes(st.send_body.data(), sb, st.recv_body, rb, comm_, "checkpoint strided exchange bytes");

    const int mine = my_domain(d, rank_, size_);
    const std::size_t nhead = st.recv_head.size() / (2 * sizeof(std::uint64_t));
    if (mine < 0) {
        if (nhead > 0 && problem_.empty())
            problem_ = "strided exchange of " + name + ": rank " + std::to_string(rank_) + " owns no domain but received pieces";
        return;
    }
    // This rank's domain: placed at the file's page phase, so that its whole pages are
    // written from where they lie (DirectWrites writes page-aligned memory in place).
    const std::uint64_t lo = d.bounds[mine], hi = d.bounds[mine + 1];
    DomainBuffer buf = take_domain_buffer(hi - lo, static_cast<std::size_t>((base + lo) % kPage));
    unsigned char* dom = buf.data;
    buffers_->push_back(std::move(buf));
    // The pieces must tile [lo, hi): the writer's count check (selections add up to the
    // tensor) passes overlapping selections with a gap, which would leave stale bytes here.
    std::vector<std::pair<std::uint64_t, std::uint64_t>> pieces;  // (data_offset, bytes)
    pieces.reserve(nhead);
    std::size_t from = 0;
    for (std::size_t i = 0; i < nhead; ++i) {
        const auto [at, n] = header(st.recv_head, i);
        if (at < lo || at + n > hi || from + n > st.recv_body.size()) {
            if (problem_.empty()) problem_ = "strided exchange of " + name + ": a piece outside this rank's domain";
            return;
        }
        std::memcpy(dom + (at - lo), st.recv_body.data() + from, n);
        from += n;
        pieces.emplace_back(at, n);
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

StridedGather::StridedGather(MPI_Comm comm) : comm_(comm) {
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
}

std::optional<StridedGather::Domain> StridedGather::add(std::size_t entry, const std::string& name, std::uint64_t base,
                                                        std::uint64_t total, std::vector<Run> wanted) {
    Dataset ds{name, strided_domains(base, total, size_, entry), std::move(wanted), {}};
    const int k = my_domain(ds.domains, rank_, size_);
    if (k >= 0) {
        ds.mine.lo = ds.domains.bounds[k];
        ds.mine.hi = ds.domains.bounds[k + 1];
        // At the file's page phase: AlignedReads reads whole pages into it in place.
        DomainBuffer buf = take_domain_buffer(ds.mine.hi - ds.mine.lo, static_cast<std::size_t>((base + ds.mine.lo) % kPage));
        ds.mine.data = buf.data;
        buffers_.push_back(std::move(buf));
        domain_bytes_ += ds.mine.hi - ds.mine.lo;
    }
    datasets_.push_back(std::move(ds));
    if (k < 0) return std::nullopt;
    return datasets_.back().mine;
}

void StridedGather::exchange() {
    std::string problem;
    Staging& st = staging();
    for (const Dataset& ds : datasets_) {
        // Requests: this rank's wanted runs cut at the domain bounds, to each owner.
        const std::vector<Cut> cuts = cut_runs(ds.domains, ds.wanted, size_);
        std::vector<int> sh, want;
        count_cuts(cuts, size_, ds.name, sh, want);
        pack_headers(cuts, st.send_head);
        std::vector<int> rh(size_);
        alltoall_ints(sh.data(), rh.data(), 1, comm_, "checkpoint strided gather counts");
        alltoallv_bytes(st.send_head.data(), sh, st.recv_head, rh, comm_, "checkpoint strided gather requests");
        // Answers: the requested bytes out of this rank's domain, in request order.
        std::vector<int> give(size_, 0);
        st.send_body.clear();
        std::size_t at_head = 0;
        for (int q = 0; q < size_; ++q) {
            const std::size_t n = static_cast<std::size_t>(rh[q]) / (2 * sizeof(std::uint64_t));
            std::uint64_t bytes = 0;
            for (std::size_t i = 0; i < n; ++i, ++at_head) {
                const auto [at, len] = header(st.recv_head, at_head);
                if (!ds.mine.data || at < ds.mine.lo || at + len > ds.mine.hi) {
                    if (problem.empty()) problem = "strided gather of " + ds.name + ": a request outside this rank's domain";
                    continue;  // answered short: the requester's count check fails too
                }
                const unsigned char* p = ds.mine.data + (at - ds.mine.lo);
                st.send_body.insert(st.send_body.end(), p, p + len);
                bytes += len;
            }
            GPT_REQUIRE(bytes < (std::uint64_t{1} << 31), InternalError, "strided gather of ", ds.name,
                        ": over 2 GiB between two ranks exceeds MPI's int counts");
            give[q] = static_cast<int>(bytes);
        }
        // What arrives from each owner is exactly what was asked of it, unless an owner refused.
        std::vector<int> got(size_);
        alltoall_ints(give.data(), got.data(), 1, comm_, "checkpoint strided gather answer sizes");
        alltoallv_bytes(st.send_body.data(), give, st.recv_body, got, comm_, "checkpoint strided gather bytes");
        bool complete = true;
        for (int q = 0; q < size_; ++q) complete = complete && got[q] == want[q];
        if (!complete) {
            if (problem.empty()) problem = "strided gather of " + ds.name + ": an owner answered short";
            continue;
        }
        const unsigned char* from = st.recv_body.data();
        for (const Cut& c : cuts) {
            const Run& r = ds.wanted[c.run];
            std::memcpy(r.dest + (c.at - r.data_offset), from, c.bytes);
            from += c.bytes;
        }
    }
    datasets_.clear();
    buffers_.clear();
    GPT_REQUIRE(problem.empty(), InternalError, problem);
}

}  // namespace gpt::ckpt
