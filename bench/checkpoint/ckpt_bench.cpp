// Checkpoint save/load throughput: a GPT-like set of tensors (fp16 weights split as tensor
// parallelism splits them, fp32 main params and Adam moments as distributed-optimizer flat
// shards), saved with CheckpointWriter and loaded with CheckpointReader in the same layout.
//   mpiexec -n N ckpt_bench DIR LAYERS HIDDEN [auto|collective|independent]
// Rank 0 prints one line: "RESULT ranks=.. bytes=<payload> save_s=.. load_s=.. load_noverify_s=..
// load_h5_s=.. save_cpu_s=.. checksum_s=.. async_stall_s=.. async_total_s=.. host_copy_s=..
// host_copy_bytes=..": the CPU time (user+sys, getrusage, the slowest rank) of the synchronous
// save, the time one core takes to checksum this rank's bytes (max over ranks), the load
// through H5Dread instead of pread (ReaderOptions::direct_reads = false), and for an
// --async-save style save (CheckpointSaver) the time until commit() returned (the training
// stall, the host copy included) and until it was published while the caller "trains" (polls
// every millisecond); the host copy is what the trainer's is: every byte of the rank's state
// copied into one host copy reused by every save (host_copy_bytes: the largest rank's). Two
// async saves run: the figures are the second's (reused copy); async_first_stall_s and
// host_copy_first_s are the first's, which allocates the copy.
// Then "PROFILE op=save|load ranks=.. <phase>=<s> ..." lines: ckpt/profile.hpp's per-phase
// seconds of the synchronous save and the verified load, the slowest rank's for each phase.
// Before each load, one rank per node evicts the file from the page cache (fadvise
// DONTNEED on the fsynced file, what `dd iflag=nocache` does), so loads read the disk
// like a fresh job would: root cannot drop_caches here, and need not.
#include <fcntl.h>
#include <sys/resource.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/profile.hpp"
#include "core/errors.hpp"

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

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int r = 0, p = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &p);
    try {
        GPT_REQUIRE(argc >= 4, UsageError, "usage: ckpt_bench DIR LAYERS HIDDEN [auto|collective|independent]");
        const std::string dir = argv[1];
        const int layers = std::atoi(argv[2]);
        const std::int64_t hidden = std::atoll(argv[3]);
        const std::string mode_name = argc > 4 ? argv[4] : "auto";
        GPT_REQUIRE(mode_name == "auto" || mode_name == "collective" || mode_name == "independent", UsageError,
                    "io mode must be auto, collective or independent");
        const IoMode mode = mode_name == "auto" ? IoMode::Auto
                            : mode_name == "collective" ? IoMode::Collective : IoMode::Independent;
        Layout L = build(layers, hidden, r, p);

        // One core's checksum of this rank's bytes (warm: right after filling them).
        double checksum_s = now();
        std::uint64_t sink = 0;
        for (const auto& b : L.buffers) sink ^= checksum_bytes(0, b.data(), b.size());
        checksum_s = max_over_ranks(now() - checksum_s + (sink == 42 ? 1e-12 : 0.0));
        MPI_Barrier(MPI_COMM_WORLD);
        phase_times().reset();
        const double cpu0 = cpu_seconds();
        double t0 = now(), commit_s = 0;
        {
            WriterOptions wo;
            wo.io_mode = mode;
            CheckpointWriter w(MPI_COMM_WORLD, dir, 1, wo);
            w.write(L.out);
            MPI_Barrier(MPI_COMM_WORLD);
            commit_s = now();
            w.commit();
            commit_s = now() - commit_s;  // close + fsync + rename + tracker
        }
        MPI_Barrier(MPI_COMM_WORLD);
        const double save_s = now() - t0;
        const double save_cpu_s = max_over_ranks(cpu_seconds() - cpu0);
        const std::string save_profile = profile_line(Phase::SaveCreate, Phase::SaveCollective);
        const std::string file = checkpoint_file(dir, 1).string();

        // 0: verified (the default), 1: not verified, 2: verified through H5Dread.
        double load_s[3];
        std::string load_profile;
        for (int kind = 0; kind < 3; ++kind) {
            evict_from_page_cache(file);
            for (auto& b : L.buffers) std::memset(b.data(), 0, b.size());
            MPI_Barrier(MPI_COMM_WORLD);
            phase_times().reset();
            t0 = now();
            {
                ReaderOptions ro;
                ro.verify_checksums = kind != 1;
                ro.direct_reads = kind != 2;
                ro.io_mode = mode;
                CheckpointReader reader(MPI_COMM_WORLD, file, ro);
                reader.read(L.in);
            }
            MPI_Barrier(MPI_COMM_WORLD);
            load_s[kind] = now() - t0;
            if (kind == 0) load_profile = profile_line(Phase::LoadOpen, Phase::LoadClose);
            // The data came back: spot-check the first bytes of every buffer.
            for (std::size_t i = 0; i < L.buffers.size(); ++i)
                if (!L.buffers[i].empty())
                    GPT_REQUIRE(L.buffers[i][1] == static_cast<unsigned char>(131 + r), DataError,
                                "bench: tensor ", L.in[i].name, " did not load back");
        }
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
            CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
            auto copy = std::make_shared<std::vector<std::vector<unsigned char>>>(L.buffers.size());
            for (int round = 0; round < 2; ++round) {
                MPI_Barrier(MPI_COMM_WORLD);
                t0 = now();
                CheckpointWriter& w = saver.begin(2 + round);  // waits for the save before
                std::vector<TensorSlice> out = L.out;
                double c0 = now();
                for (std::size_t i = 0; i < L.buffers.size(); ++i) {
                    (*copy)[i].assign(L.buffers[i].begin(), L.buffers[i].end());  // same size: no allocation
                    out[i].data = (*copy)[i].data();
                }
                c0 = max_over_ranks(now() - c0);
                w.write(out);
                saver.commit(copy);  // the saver keeps the copy until published
                const double st = max_over_ranks(now() - t0);
                while (!saver.poll()) ::usleep(1000);
                (round == 0 ? first_stall_s : stall_s) = st;
                (round == 0 ? first_copy_s : copy_s) = c0;
                if (round == 1) async_s = now() - t0;
            }
        }
        if (r == 0) {
            std::printf("RESULT mode=%s ranks=%d bytes=%lld tensors=%zu save_s=%.3f load_s=%.3f load_noverify_s=%.3f "
                        "load_h5_s=%.3f commit_s=%.3f save_cpu_s=%.3f checksum_s=%.3f async_stall_s=%.3f "
                        "async_total_s=%.3f host_copy_s=%.3f host_copy_bytes=%.0f async_first_stall_s=%.3f host_copy_first_s=%.3f\n",
                        mode_name.c_str(), p, static_cast<long long>(L.file_bytes), L.out.size(), save_s, load_s[0],
                        load_s[1], load_s[2], commit_s, save_cpu_s, checksum_s, stall_s, async_s, copy_s, copy_bytes,
                        first_stall_s, first_copy_s);
            std::printf("PROFILE op=save ranks=%d%s\n", p, save_profile.c_str());
            std::printf("PROFILE op=load ranks=%d%s\n", p, load_profile.c_str());
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ckpt_bench rank %d: %s\n", r, e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return 0;
}
