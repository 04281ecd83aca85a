// A small MPI program for the tests that need whole processes:
//   ckpt_probe save DIR FIRST COUNT MIB [KEEP_LAST]   saves iterations FIRST.. in a loop
//   ckpt_probe save-async DIR FIRST COUNT MIB [KEEP_LAST]  the same with --async-save's writer:
//                                                     each save is written in the background while
//                                                     the "training" polls; DIR.pids/inflight marks it
//   ckpt_probe check DIR [fallback]                   loads the latest and checks every value
// Tensor values depend on the iteration, so `check` proves the loaded file is the one the
// tracker names and that it is whole. Each rank writes its pid to DIR.pids/rank<N> so a
// test can kill -9 exactly these processes.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt_test_util.hpp"
#include "core/errors.hpp"

namespace {

using namespace gpt;
using namespace gpt::ckpt;
using namespace gpt::ckpt::test;

struct Tensor {
    int id;
    const char* name;
    Shape shape;
    DType dtype;
    int split_dim;
};

std::vector<Tensor> tensors(std::int64_t mib) {
    return {
        {0, "language_model/encoder/layers.0/mlp/dense_h_to_4h/weight", {mib * 256, 1024}, DType::F32, 0},
        {1, "language_model/embedding/word_embeddings/weight", {100, 64}, DType::BF16, 1},
        {2, "language_model/encoder/layers.0/self_attention/query_key_value/weight", {96, 32}, DType::F16, 0},
    };
}

Selection split(const Tensor& t, int r, int p) {
    auto [lo, hi] = split_range(t.shape[t.split_dim], r, p);
    Shape off(t.shape.size(), 0), cnt = t.shape;
    off[t.split_dim] = lo;
    cnt[t.split_dim] = hi - lo;
    return Selection::box(off, cnt);
}

void save(const std::string& dir, std::int64_t first, std::int64_t count, std::int64_t mib, int keep_last) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    for (std::int64_t it = first; it < first + count; ++it) {
        std::vector<std::vector<unsigned char>> bufs;
        std::vector<TensorSlice> slices;
        for (const Tensor& t : tensors(mib)) {
            const Selection sel = split(t, r, p);
            bufs.push_back(to_bytes(packed_values(t.id, t.shape, sel, it), t.dtype));
            slices.push_back({t.name, t.shape, t.dtype, sel, nullptr});
        }
        for (std::size_t i = 0; i < slices.size(); ++i) slices[i].data = bufs[i].data();
        CheckpointWriter w(MPI_COMM_WORLD, dir, it);
        w.write(slices);
        w.set_attribute("iteration", it);
        w.set_attribute("consumed_samples", it * 32);
        w.set_attribute("loss_scale", 4096.0);
        w.set_attribute("config", std::string("[model]\nnum-layers = 1\nmib = ") + std::to_string(mib) + "\n");
        const std::string rng = "rng-state-of-rank-" + std::to_string(r) + "-at-" + std::to_string(it);
        w.write_rank_blob("rng_state", rng.data(), rng.size());
        w.commit(keep_last);
    }
}

// As save(), through CheckpointSaver with async on: the buffers move into the save, the
// probe "trains" (sleeps and polls) while the helper thread writes them.
void save_async(const std::string& dir, std::int64_t first, std::int64_t count, std::int64_t mib, int keep_last) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    SaverOptions opts;
    opts.async = true;
    opts.keep_last = keep_last;
    CheckpointSaver saver(MPI_COMM_WORLD, dir, opts);
    const std::string marker = dir + ".pids/inflight";
    for (std::int64_t it = first; it < first + count; ++it) {
        CheckpointWriter& w = saver.begin(it);
        auto bufs = std::make_shared<std::vector<std::vector<unsigned char>>>();
        std::vector<TensorSlice> slices;
        for (const Tensor& t : tensors(mib)) {
            const Selection sel = split(t, r, p);
            bufs->push_back(to_bytes(packed_values(t.id, t.shape, sel, it), t.dtype));
            slices.push_back({t.name, t.shape, t.dtype, sel, nullptr});
        }
        for (std::size_t i = 0; i < slices.size(); ++i) slices[i].data = (*bufs)[i].data();
        w.write(slices);
        w.set_attribute("iteration", it);
        w.set_attribute("consumed_samples", it * 32);
        w.set_attribute("loss_scale", 4096.0);
        w.set_attribute("config", std::string("[model]\nnum-layers = 1\nmib = ") + std::to_string(mib) + "\n");
        const std::string rng = "rng-state-of-rank-" + std::to_string(r) + "-at-" + std::to_string(it);
        w.write_rank_blob("rng_state", rng.data(), rng.size());
        saver.commit(bufs);
        bufs.reset();  // the saver owns them now
        // The marker exists exactly while this save is in flight (written, not published).
        if (r == 0) std::ofstream(marker) << it << "\n";
        for (int step = 0; step < 10; ++step) {  // ten "iterations" of training
            ::usleep(10000);
            if (saver.poll() && r == 0) std::filesystem::remove(marker);
        }
        if (saver.wait() && r == 0) std::filesystem::remove(marker);
    }
    saver.wait();
}

int check(const std::string& dir, bool fallback) {
    const int r = comm_rank(MPI_COMM_WORLD), p = comm_size(MPI_COMM_WORLD);
    LoadRequest req{dir, -1, fallback};
    LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, [&](CheckpointReader& reader) {
        const std::int64_t it = reader.iteration();
        const std::string cfg = reader.attribute_string("config");
        const std::int64_t mib = std::stoll(cfg.substr(cfg.rfind('=') + 1));
        GPT_REQUIRE(reader.attribute_int("consumed_samples") == it * 32, DataError, "wrong consumed_samples");
        for (const Tensor& t : tensors(mib)) {
            const Selection sel = split(t, r, p);
            std::vector<unsigned char> buf(sel.num_elements(t.shape) * dtype_size(t.dtype));
            reader.read({{t.name, t.shape, t.dtype, sel, buf.data()}});
            GPT_REQUIRE(from_bytes(buf, t.dtype) == packed_values(t.id, t.shape, sel, it), DataError,
                        "values of ", t.name, " are not those of iteration ", it);
        }
        if (reader.saved_world_size() == p) {
            const auto blob = reader.read_rank_blob("rng_state", r);
            const std::string expect = "rng-state-of-rank-" + std::to_string(r) + "-at-" + std::to_string(it);
            GPT_REQUIRE(std::string(reinterpret_cast<const char*>(blob.data()), blob.size()) == expect, DataError,
                        "wrong rng_state blob");
        }
    });
    if (r == 0) {
        for (const auto& why : res.rejected) std::printf("rejected: %s\n", why.c_str());
        if (res.iteration) std::printf("loaded iteration %lld\n", static_cast<long long>(*res.iteration));
        else std::printf("no checkpoint\n");
    }
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rc = 0;
    try {
        GPT_REQUIRE(argc >= 3, UsageError, "usage: ckpt_probe save DIR FIRST COUNT MIB [KEEP_LAST] | check DIR [fallback]");
        const std::string mode = argv[1], dir = argv[2];
        if (mode == "save") {
            GPT_REQUIRE(argc >= 6, UsageError, "save needs DIR FIRST COUNT MIB");
            const std::string pid_dir = dir + ".pids";
            std::filesystem::create_directories(pid_dir);
            std::ofstream(pid_dir + "/rank" + std::to_string(comm_rank(MPI_COMM_WORLD))) << ::getpid() << "\n";
            MPI_Barrier(MPI_COMM_WORLD);
            save(dir, std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]), argc > 6 ? std::stoi(argv[6]) : 0);
        } else if (mode == "save-async") {
            GPT_REQUIRE(argc >= 6, UsageError, "save-async needs DIR FIRST COUNT MIB");
            const std::string pid_dir = dir + ".pids";
            std::filesystem::create_directories(pid_dir);
            std::ofstream(pid_dir + "/rank" + std::to_string(comm_rank(MPI_COMM_WORLD))) << ::getpid() << "\n";
            MPI_Barrier(MPI_COMM_WORLD);
            save_async(dir, std::stoll(argv[3]), std::stoll(argv[4]), std::stoll(argv[5]),
                       argc > 6 ? std::stoi(argv[6]) : 0);
        } else if (mode == "check") {
            rc = check(dir, argc > 3 && std::strcmp(argv[3], "fallback") == 0);
        } else {
            GPT_THROW(UsageError, "unknown mode '", mode, "'");
        }
    } catch (const std::exception& e) {
        std::fprintf(stderr, "ckpt_probe rank %d: %s\n", comm_rank(MPI_COMM_WORLD), e.what());
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Finalize();
    return rc;
}
