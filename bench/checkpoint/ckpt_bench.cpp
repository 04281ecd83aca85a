// Checkpoint save/load throughput: a GPT-like set of tensors (fp16 weights split as tensor
// parallelism splits them, fp32 main params and Adam moments as distributed-optimizer flat
// shards), saved with CheckpointWriter and loaded with CheckpointReader in the same layout.
//   mpiexec -n N ckpt_bench DIR LAYERS HIDDEN [auto|collective|independent] [REPS]
// REPS (3) times: rank 0 runs dd (write, buffered and direct), the ranks save, dd writes
// again, dd reads (buffered and direct, evicted first), the ranks load (verified), dd reads
// again; each save and load is compared with the faster dd of the runs right around it, so
// the disk's drift (2x within a minute on our VMs) does not count as ours (raw_disk.hpp).
// Rank 0 prints a "REP ..." line per repetition and one "RESULT ..." line: median, min and
// max over the repetitions of the save and load seconds (save_s, load_s, the slowest
// rank's), of their % of the dd around them (save_pct, load_pct) and of that dd (raw_w,
// raw_r, MB/s); save_pct_med / load_pct_med: our median MB/s over the repetitions as a % of
// dd's median over all of its runs around them (dd_w_med, dd_r_med), like for like;
// load_noverify_s and load_h5_s (once each, unverified and through H5Dread,
// with raw_r_once: the faster dd read around them); save_cpu_s (user+sys, getrusage, the
// slowest rank, median); checksum_s, the time one core takes to checksum this rank's bytes
// (max over ranks); and for an --async-save style save (CheckpointSaver) the time until
// commit() returned (async_stall_s: the training stall, the host copy included) and until
// it was published while the caller "trains" (polls every millisecond); the host copy is
// what the trainer's is: every byte of the rank's state copied into one host copy reused
// by every save (host_copy_bytes: the largest rank's). Two async saves run: the figures are
// the second's (reused copy); async_first_stall_s and host_copy_first_s are the first's,
// which allocates the copy.
// Then "PROFILE op=save|load ranks=.. <phase>=<s> ..." lines: ckpt/profile.hpp's per-phase
// seconds of the median save and of the verified load after it, the slowest rank's each.
// Before each load, one rank per node evicts the file from the page cache (fadvise
// DONTNEED on the fsynced file, what `dd iflag=nocache` does), so loads read the disk
// like a fresh job would: root cannot drop_caches here, and need not.
#include <fcntl.h>
#include <sys/resource.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "ckpt/checkpoint.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/profile.hpp"
#include "core/errors.hpp"
#include "raw_disk.hpp"

namespace {

using namespace gpt;
using namespace gpt::ckpt;

struct Param {
    std::string name;
    Shape shape;
    int split_dim;  // tensor-parallel split: 0 column-parallel, 1 row-parallel
};

std::vector<Param> gpt_params(int layers, std::int64_t h) {
    std::vector<Param> out;
    for (int l = 0; l < layers; ++l) {
        const std::string p = "language_model/encoder/layers." + std::to_string(l) + "/";
        out.push_back({p + "self_attention/query_key_value/weight", {3 * h, h}, 0});
        out.push_back({p + "self_attention/dense/weight", {h, h}, 1});
        out.push_back({p + "mlp/dense_h_to_4h/weight", {4 * h, h}, 0});
        out.push_back({p + "mlp/dense_4h_to_h/weight", {h, 4 * h}, 1});
        out.push_back({p + "input_layernorm/weight", {h}, 0});
    }
    return out;
}

Selection tp_slice(const Param& prm, int r, int p) {
    const std::int64_t n = prm.shape[prm.split_dim];
    Shape off(prm.shape.size(), 0), cnt = prm.shape;
    off[prm.split_dim] = n * r / p;
    cnt[prm.split_dim] = n * (r + 1) / p - n * r / p;
    return Selection::box(off, cnt);
}

// Per tensor, this rank's flat piece of the concatenated fp32 optimizer buffer.
std::vector<Selection> dp_shard(const std::vector<Param>& params, int r, int p) {
    std::int64_t total = 0;
    for (const auto& prm : params) total += num_elements(prm.shape);
    const std::int64_t lo = total * r / p, hi = total * (r + 1) / p;
    std::vector<Selection> out;
    std::int64_t base = 0;
    for (const auto& prm : params) {
        const std::int64_t n = num_elements(prm.shape);
        const std::int64_t a = std::clamp(lo - base, std::int64_t{0}, n), b = std::clamp(hi - base, std::int64_t{0}, n);
        out.push_back(b > a ? Selection::flat(a, b - a) : Selection::none());
        base += n;
    }
    return out;
}

struct Layout {
    std::vector<std::vector<unsigned char>> buffers;
    std::vector<TensorSlice> out;
    std::vector<TensorSliceOut> in;
    std::int64_t file_bytes = 0;
};

Layout build(int layers, std::int64_t h, int r, int p) {
    const auto params = gpt_params(layers, h);
    const auto shard = dp_shard(params, r, p);
    Layout L;
    auto add = [&](const std::string& name, const Shape& shape, DType t, const Selection& sel) {
        L.buffers.emplace_back(sel.num_elements(shape) * dtype_size(t));
        // Non-constant bytes: the checksum must not see a trivial pattern, and pages get touched.
        auto& b = L.buffers.back();
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<unsigned char>(i * 131 + r);
        L.out.push_back({name, shape, t, sel, nullptr});
        L.in.push_back({name, shape, t, sel, nullptr});
        L.file_bytes += num_elements(shape) * dtype_size(t);
    };
    for (const auto& prm : params) add(prm.name, prm.shape, DType::F16, tp_slice(prm, r, p));
    for (const char* state : {"main_param", "exp_avg", "exp_avg_sq"})
        for (std::size_t i = 0; i < params.size(); ++i)
            add(std::string("optimizer/") + state + "/" + params[i].name, params[i].shape, DType::F32, shard[i]);
    for (std::size_t i = 0; i < L.out.size(); ++i) {
        L.out[i].data = L.buffers[i].data();
        L.in[i].data = L.buffers[i].data();
    }
    return L;
}

double now() { return MPI_Wtime(); }

double cpu_seconds() {
    struct rusage ru {};
    getrusage(RUSAGE_SELF, &ru);  // all threads of the process (the checksum helper too)
    auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
    return sec(ru.ru_utime) + sec(ru.ru_stime);
}

double max_over_ranks(double v) {
    double m = 0;
    MPI_Allreduce(&v, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

// The slowest rank's seconds per phase since the last reset, as "name=s ..." (rank 0).
std::string profile_line(Phase first, Phase last) {
    std::string out;
    for (int p = static_cast<int>(first); p <= static_cast<int>(last); ++p) {
        const double v = max_over_ranks(phase_times().seconds(static_cast<Phase>(p)));
        char buf[64];
        std::snprintf(buf, sizeof buf, " %s=%.3f", phase_name(static_cast<Phase>(p)), v);
        out += buf;
    }
    return out;
}

void evict_from_page_cache(const std::string& file) {
    MPI_Comm node = MPI_COMM_NULL;
    int rank = 0, node_rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
    MPI_Comm_rank(node, &node_rank);
    MPI_Comm_free(&node);
    if (node_rank == 0) {
        const int fd = ::open(file.c_str(), O_RDONLY);
        GPT_REQUIRE(fd >= 0, IoError, "bench: cannot open ", file);
        const int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
        ::close(fd);
        GPT_REQUIRE(rc == 0, IoError, "bench: posix_fadvise failed on ", file);
    }
    MPI_Barrier(MPI_COMM_WORLD);
}

// MPI_Barrier spins on its core; while rank 0 runs dd the others wait sleeping.
void polite_barrier() {
    MPI_Request req = MPI_REQUEST_NULL;
    MPI_Ibarrier(MPI_COMM_WORLD, &req);
    for (int done = 0; MPI_Test(&req, &done, MPI_STATUS_IGNORE), !done;) ::usleep(1000);
}

// One load of every rank's slices from a file evicted from the page cache (the slowest
// rank's seconds); verify: checksums checked; direct: pread at HDF5's offsets, else H5Dread.
double load(const std::string& file, Layout& L, IoMode mode, bool verify, bool direct, int r) {
    evict_from_page_cache(file);
    for (auto& b : L.buffers) std::memset(b.data(), 0, b.size());
    MPI_Barrier(MPI_COMM_WORLD);
    phase_times().reset();
    const double t0 = now();
    {
        ReaderOptions ro;
        ro.verify_checksums = verify;
        ro.direct_reads = direct;
        ro.io_mode = mode;
        CheckpointReader reader(MPI_COMM_WORLD, file, ro);
        reader.read(L.in);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    const double s = now() - t0;
    // The data came back: spot-check the first bytes of every buffer.
    for (std::size_t i = 0; i < L.buffers.size(); ++i)
        if (!L.buffers[i].empty())
            GPT_REQUIRE(L.buffers[i][1] == static_cast<unsigned char>(131 + r), DataError, "bench: tensor ",
                        L.in[i].name, " did not load back");
    return s;
}

// One repetition: the save and load and the dd runs around them.
struct Rep {
    double save_s = 0, load_s = 0, cpu_s = 0;
    std::uint64_t bytes_by_path[3] = {0, 0, 0};  // all ranks: O_DIRECT, page cache, received by the exchange
    bench::RawSpeed w0, w1, r0, r1;  // dd write before/after the save, dd read before/after the load
    std::string save_profile, load_profile;
};

struct Stats {
    double median = 0, min = 0, max = 0;
    std::size_t median_index = 0;  // the repetition holding the median (the lower one of two)
};

template <class F>
Stats stats(const std::vector<Rep>& reps, F value) {
    std::vector<std::pair<double, std::size_t>> v;
    for (std::size_t i = 0; i < reps.size(); ++i) v.emplace_back(value(reps[i]), i);
    std::sort(v.begin(), v.end());
    Stats s;
    const auto& m = v[(v.size() - 1) / 2];
    s.median = v.size() % 2 ? m.first : (m.first + v[v.size() / 2].first) / 2;
    s.median_index = m.second;
    s.min = v.front().first;
    s.max = v.back().first;
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int r = 0, p = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    try {
        GPT_REQUIRE(argc >= 4, UsageError, "usage: ckpt_bench DIR LAYERS HIDDEN [auto|collective|independent] [REPS]");
        const std::string dir = argv[1];
        const int layers = std::atoi(argv[2]);
        const std::int64_t hidden = std::atoll(argv[3]);
        const std::string mode_name = argc > 4 ? argv[4] : "auto";
        GPT_REQUIRE(mode_name == "auto" || mode_name == "collective" || mode_name == "independent", UsageError,
                    "io mode must be auto, collective or independent");
        const int reps = argc > 5 ? std::atoi(argv[5]) : 3;
        GPT_REQUIRE(reps >= 1, UsageError, "REPS must be at least 1");
        const IoMode mode = mode_name == "auto" ? IoMode::Auto
                            : mode_name == "collective" ? IoMode::Collective : IoMode::Independent;
        Layout L = build(layers, hidden, r, p);

        // One core's checksum of this rank's bytes (warm: right after filling them).
        double checksum_s = now();
        std::uint64_t sink = 0;
        for (const auto& b : L.buffers) sink ^= checksum_bytes(0, b.data(), b.size());
        checksum_s = max_over_ranks(now() - checksum_s + (sink == 42 ? 1e-12 : 0.0));

        // reps x (dd write, save, dd write, dd read, load, dd read): each save and load is
        // compared with the faster of the dd runs right before and after it (raw_disk.hpp).
        const std::string raw = dir + ".dd";  // beside the checkpoint, on the same disk
        const auto raw_bytes = static_cast<std::uint64_t>(L.file_bytes);
        auto on_rank0 = [&](auto f) {
            bench::RawSpeed s;
            if (r == 0) s = f(raw, raw_bytes);
            polite_barrier();  // the other ranks must not spin on the cores dd uses
            return s;
        };
        std::vector<Rep> reps_done;
        for (int rep = 0; rep < reps; ++rep) {
            Rep x;
            const std::int64_t iteration = 1 + rep;
            x.w0 = on_rank0(bench::dd_write);
            phase_times().reset();
            const double cpu0 = cpu_seconds();
            double t0 = now();
            {
                WriterOptions wo;
                wo.io_mode = mode;
                CheckpointWriter w(MPI_COMM_WORLD, dir, iteration, wo);
                w.write(L.out);
                w.commit();
                const WriteStats ws = w.stats();
                const std::uint64_t mine[3] = {ws.direct_bytes, ws.buffered_bytes, ws.exchanged_bytes};
                MPI_Allreduce(mine, x.bytes_by_path, 3, MPI_UINT64_T, MPI_SUM, MPI_COMM_WORLD);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            x.save_s = now() - t0;
            x.cpu_s = max_over_ranks(cpu_seconds() - cpu0);
            x.save_profile = profile_line(Phase::SaveCreate, Phase::SaveExchange);
            x.w1 = on_rank0(bench::dd_write);
            const std::string file = checkpoint_file(dir, iteration).string();
            auto dd_read_checkpoint = [&](const std::string&, std::uint64_t b) { return bench::dd_read(file, b); };
            x.r0 = on_rank0(dd_read_checkpoint);
            x.load_s = load(file, L, mode, true, true, r);
            x.load_profile = profile_line(Phase::LoadOpen, Phase::LoadClose);
            x.r1 = on_rank0(dd_read_checkpoint);
            if (r == 0 && rep > 0) std::filesystem::remove_all(checkpoint_file(dir, iteration - 1).parent_path());
            if (r == 0)
                std::printf("REP ranks=%d rep=%d save_s=%.3f load_s=%.3f dd_w=%.0f/%.0f,%.0f/%.0f dd_r=%.0f/%.0f,%.0f/%.0f\n", p,
                            rep, x.save_s, x.load_s, x.w0.buffered, x.w0.direct, x.w1.buffered, x.w1.direct,
                            x.r0.buffered, x.r0.direct, x.r1.buffered, x.r1.direct);
            if (r == 0) std::printf("REP_PROFILE rep=%d save%s load%s\n", rep, x.save_profile.c_str(), x.load_profile.c_str());
            reps_done.push_back(std::move(x));
        }
        const std::string file = checkpoint_file(dir, reps).string();
        auto dd_read_checkpoint = [&](const std::string&, std::uint64_t b) { return bench::dd_read(file, b); };
        // Not verified, and verified through H5Dread, once each, between two dd reads.
        const bench::RawSpeed r2 = on_rank0(dd_read_checkpoint);
        const double load_noverify_s = load(file, L, mode, false, true, r);
        const double load_h5_s = load(file, L, mode, true, false, r);
        const bench::RawSpeed r3 = on_rank0(dd_read_checkpoint);
        const double raw_r23 = std::max(r2.best(), r3.best());
        if (r == 0) ::unlink(raw.c_str());

        // The same save through the asynchronous saver, as gpt_pretrain --async-save does:
        // the state is copied to host memory first (the trainer's HostCopy::fill), into one
        // host copy that every save reuses. Two saves: the first allocates the copy (fresh
        // pages), the second reuses it (the steady state of a run; its figures are reported).
        double stall_s = 0, async_s = 0, copy_s = 0, first_stall_s = 0, first_copy_s = 0;
        double copy_bytes = 0;
        for (const auto& b : L.buffers) copy_bytes += static_cast<double>(b.size());
        copy_bytes = max_over_ranks(copy_bytes);
        {
            SaverOptions so;
            so.async = true;
            so.writer.io_mode = mode;
            // The trainer's host copy on the CPU backend (train/state/host_copy.cpp): Backend::alloc_host
            // blocks (page-aligned, kept for the run; declared before the saver, so freed after
            // it is gone), filled with copy_to_host_async.
            const std::unique_ptr<Backend> be = make_backend("cpu", 0);
            std::vector<void*> blocks(L.buffers.size(), nullptr);
            struct Release {
                Backend& be;
                std::vector<void*>& blocks;
                ~Release() {
                    for (void* p : blocks) be.free_host(p);
                }
            } release{*be, blocks};
            CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
            for (int round = 0; round < 2; ++round) {
                MPI_Barrier(MPI_COMM_WORLD);
                const double t0 = now();
                CheckpointWriter& w = saver.begin(reps + 1 + round);  // waits for the save before
                std::vector<TensorSlice> out = L.out;
                double c0 = now();
                for (std::size_t i = 0; i < L.buffers.size(); ++i) {
                    if (!blocks[i]) blocks[i] = be->alloc_host(L.buffers[i].size());  // first save only
                    be->copy_to_host_async(blocks[i], L.buffers[i].data(), L.buffers[i].size());
                    out[i].data = blocks[i];
                }
                be->record_host_copies()->wait();
                c0 = max_over_ranks(now() - c0);
                w.write(out);
                saver.commit(nullptr);  // the blocks outlive the saver
                const double st = max_over_ranks(now() - t0);
                while (!saver.poll()) ::usleep(1000);
                (round == 0 ? first_stall_s : stall_s) = st;
                (round == 0 ? first_copy_s : copy_s) = c0;
                if (round == 1) async_s = now() - t0;
            }
        }
        if (r == 0) {
            const Stats save = stats(reps_done, [&](const Rep& x) { return x.save_s; });
            const Stats load_st = stats(reps_done, [&](const Rep& x) { return x.load_s; });
            const Stats cpu = stats(reps_done, [&](const Rep& x) { return x.cpu_s; });
            const double b = static_cast<double>(L.file_bytes);
            const Stats save_pct = stats(reps_done, [&](const Rep& x) {
                return 100 * b / x.save_s / 1e6 / std::max(x.w0.best(), x.w1.best()); });
            const Stats load_pct = stats(reps_done, [&](const Rep& x) {
                return 100 * b / x.load_s / 1e6 / std::max(x.r0.best(), x.r1.best()); });
            const Stats raw_w = stats(reps_done, [&](const Rep& x) { return std::max(x.w0.best(), x.w1.best()); });
            const Stats raw_r = stats(reps_done, [&](const Rep& x) { return std::max(x.r0.best(), x.r1.best()); });
            // Like for like: our median speed over the repetitions against dd's median over
            // all of its runs in the same minutes (two per repetition). The per-repetition ratio
            // above takes the faster of the dd runs around each operation; on a disk whose
            // speed jumps between modes from one second to the next (reads here: ~1.5 or
            // ~5.5 GB/s), the best of two dd runs against one of ours favours dd.
            auto median_of = [](std::vector<double> v) {
                std::sort(v.begin(), v.end());
                const std::size_t n = v.size();
                return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
            };
            std::vector<double> ours_w, ours_r, dd_w, dd_r;
            for (const Rep& x : reps_done) {
                ours_w.push_back(b / x.save_s / 1e6);
                ours_r.push_back(b / x.load_s / 1e6);
                dd_w.insert(dd_w.end(), {x.w0.best(), x.w1.best()});
                dd_r.insert(dd_r.end(), {x.r0.best(), x.r1.best()});
            }
            const double save_pct_med = 100 * median_of(ours_w) / median_of(dd_w);
            const double load_pct_med = 100 * median_of(ours_r) / median_of(dd_r);
            const Rep& mid = reps_done[save.median_index];
            std::printf("RESULT mode=%s ranks=%d bytes=%lld tensors=%zu reps=%d save_s=%.3f save_min_s=%.3f save_max_s=%.3f "
                        "load_s=%.3f load_min_s=%.3f load_max_s=%.3f save_pct=%.1f save_pct_min=%.1f save_pct_max=%.1f "
                        "load_pct=%.1f load_pct_min=%.1f load_pct_max=%.1f raw_w=%.0f raw_w_min=%.0f raw_w_max=%.0f "
                        "raw_r=%.0f raw_r_min=%.0f raw_r_max=%.0f load_noverify_s=%.3f load_h5_s=%.3f raw_r_once=%.0f "
                        "save_cpu_s=%.3f checksum_s=%.3f async_stall_s=%.3f async_total_s=%.3f host_copy_s=%.3f "
                        "host_copy_bytes=%.0f async_first_stall_s=%.3f host_copy_first_s=%.3f direct_bytes=%llu buffered_bytes=%llu "
                        "exchanged_bytes=%llu save_pct_med=%.1f load_pct_med=%.1f dd_w_med=%.0f dd_r_med=%.0f\n",
                        mode_name.c_str(), p, static_cast<long long>(L.file_bytes), L.out.size(), reps, save.median,
                        save.min, save.max, load_st.median, load_st.min, load_st.max, save_pct.median, save_pct.min,
                        save_pct.max, load_pct.median, load_pct.min, load_pct.max, raw_w.median, raw_w.min, raw_w.max,
                        raw_r.median, raw_r.min, raw_r.max, load_noverify_s, load_h5_s, raw_r23, cpu.median, checksum_s,
                        stall_s, async_s, copy_s, copy_bytes, first_stall_s, first_copy_s,
                        static_cast<unsigned long long>(mid.bytes_by_path[0]),
                        static_cast<unsigned long long>(mid.bytes_by_path[1]),
                        static_cast<unsigned long long>(mid.bytes_by_path[2]), save_pct_med, load_pct_med,
                        median_of(dd_w), median_of(dd_r));
            // The phases of the median save and of the load right after it.
            std::printf("PROFILE op=save ranks=%d%s\n", p, mid.save_profile.c_str());
            std::printf("PROFILE op=load ranks=%d%s\n", p, mid.load_profile.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ckpt_bench rank %d: %s\n", r, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
