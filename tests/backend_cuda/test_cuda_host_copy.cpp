// The checkpoint's host copy on the CUDA backend: pinned, page-aligned host memory filled by
// device-to-host copies queued on the compute stream (Backend::copy_to_host_async). On the
// emulator, whose streams run their work only when something forces them, these show:
//  - the bytes land only once the event is waited for (from another thread, as the
//    background writer does), and they are the values of the work queued before the copy;
//  - work queued after the copy (the next optimizer step overwriting the buffer) does not
//    run before it, even when the device is drained newest work first;
//  - a trainer saving with --async-save (and synchronously, through the reused host copy)
//    resumes bit-exactly: a save from a copy that read its buffers before the optimizer
//    step, after the next one, or before the copies landed would differ.
// On a GPU the same checks run, except that the bytes may land before the wait.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/backend.hpp"
#include "core/device_info.hpp"
#include "dist/process_groups.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

bool have_gpu() {
    if (visible_gpu_count() > 0) return true;
    test::note_hardware_skip("no GPU visible");
    return false;
}

constexpr std::int64_t kN = 1 << 16;

struct CopyFixture {
    std::unique_ptr<Backend> be = make_backend("cuda", 0);
    float* dev = nullptr;
    float* host = nullptr;
    CopyFixture() {
        std::vector<float> v(kN);
        for (std::int64_t i = 0; i < kN; ++i) v[i] = static_cast<float>(i);
        dev = static_cast<float*>(be->alloc(kN * sizeof(float)));
        be->copy_to_device(dev, v.data(), kN * sizeof(float));
        host = static_cast<float*>(be->alloc_host(kN * sizeof(float)));
        for (std::int64_t i = 0; i < kN; ++i) host[i] = -1.0f;  // what a copy not yet landed leaves
    }
    ~CopyFixture() {
        be->free_host(host);
        be->free(dev);
    }
    // Host element i must be 2i: the scale queued before the copy ran first, the zero
    // queued after it did not.
    void expect_doubled(const char* what) const {
        std::int64_t bad = 0, first = -1;
        for (std::int64_t i = 0; i < kN; ++i)
            if (host[i] != 2.0f * static_cast<float>(i) && bad++ == 0) first = i;
        EXPECT_EQ(bad, 0) << what << ": element " << first << " is " << (first >= 0 ? host[first] : 0.0f)
                          << ", not " << 2 * first;
    }
};

TEST(CudaHostCopy, LandsAfterTheWaitWithTheValuesOfEarlierWork) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    CopyFixture d;
    EXPECT_TRUE(d.be->host_pinned());
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(d.host) % Backend::kHostAlign, 0u);
    d.be->scale(d.dev, 2.0f, kN, DType::F32);  // the optimizer step that produces the values
    d.be->copy_to_host_async(d.host, d.dev, kN * sizeof(float));
    auto landed = d.be->record_host_copies();
#ifdef GPT_CUDA_EMU
    // Nothing forced the stream: on the emulator the copy has not run (on a GPU it may have).
    EXPECT_EQ(d.host[1], -1.0f) << "the copy into pinned memory landed before anything waited for it";
#endif
    std::thread writer([&] { landed->wait(); });  // the background writer's wait
    writer.join();
    d.expect_doubled("after the wait");
}

TEST(CudaHostCopy, LaterWorkRunsAfterTheCopy) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    CopyFixture d;
    d.be->scale(d.dev, 2.0f, kN, DType::F32);
    d.be->copy_to_host_async(d.host, d.dev, kN * sizeof(float));
    auto landed = d.be->record_host_copies();
    d.be->zero(d.dev, kN * sizeof(float));  // the next optimizer step overwrites the buffer
    // The emulator drains newest work first: the zero would run before a copy it is not
    // ordered after.
    d.be->synchronize();
    landed->wait();
    d.expect_doubled("with the overwrite queued after the copy");
    std::vector<float> now(kN, 1.0f);
    d.be->copy_to_host(now.data(), d.dev, kN * sizeof(float));
    EXPECT_EQ(now[kN - 1], 0.0f) << "the later work did not run";
}

struct RunResult {
    std::vector<IterationRecord> records;
    std::vector<float> params, main;
};

// `iters` iterations on the emulated GPU, from cfg.checkpoint.load when set. With `loop`,
// through Trainer::train (its --save-interval saves, polls and final save), else step by step.
RunResult train_on_gpu(const Config& cfg, int iters, bool loop) {
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cuda", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, 0, 1, tr.consumed_train_samples());
    if (loop) tr.train(src, nullptr, nullptr);
    else
        for (int i = 0; i < iters; ++i) tr.train_step(src);
    RunResult r;
    r.records = tr.history();
    const auto n = static_cast<std::size_t>(tr.chunks().chunk(0).layout().total_elements());
    r.params.resize(n);
    tr.chunks().chunk(0).get_parameters(r.params.data());
    r.main.resize(static_cast<std::size_t>(tr.chunks().optimizer(0).shard_size()));
    be->copy_to_host(r.main.data(), tr.chunks().optimizer(0).main_params(), r.main.size() * sizeof(float));
    return r;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// 2N straight against N saved (--save-interval N, then N more iterations overwriting the
// device buffers while the save is written) + resumed from iteration N for N: identical bits,
// with dropout and fp16 loss scaling, as the CPU backend's exact-restart test.
TEST(CudaHostCopy, SavedRunResumesBitExactly) {
    if (!have_gpu()) GTEST_SKIP() << "no GPU visible";
    if (test::world_size() != 1) GTEST_SKIP() << "one rank";
    const int n = 2;
    Config cfg = test::tiny::short_train();
    cfg.model.hidden_size = 64;
    cfg.model.num_attention_heads = 2;
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    cfg.training.fp16 = true;
    cfg.training.initial_loss_scale = 4096;
    cfg.training.train_iters = 2 * n;
    cfg.parallel.distributed_backend = DistributedBackend::Mpi;
    const RunResult straight = train_on_gpu(cfg, 2 * n, false);
    for (bool async : {true, false}) {
        const std::string what = async ? "--async-save" : "synchronous save";
        Config save = cfg;
        save.checkpoint.save = test::scratch_dir(async ? "cuda_host_copy_async" : "cuda_host_copy_sync");
        save.checkpoint.save_interval = n;
        save.checkpoint.async_save = async;
        // Saving changes nothing in the run itself (the copies only read the buffers).
        const RunResult saving = train_on_gpu(save, 2 * n, true);
        ASSERT_EQ(saving.records.size(), straight.records.size()) << what;
        for (std::size_t i = 0; i < saving.records.size(); ++i)
            EXPECT_TRUE(same_bits(saving.records[i].lm_loss, straight.records[i].lm_loss)) << what << ", iteration " << i + 1;
        Config resume = cfg;
        resume.checkpoint.load = save.checkpoint.save;
        resume.checkpoint.ckpt_step = n;  // the save written while training went on
        const RunResult second = train_on_gpu(resume, n, false);
        ASSERT_EQ(second.records.size(), static_cast<std::size_t>(n)) << what;
        for (int i = 0; i < n; ++i) {
            const IterationRecord& a = straight.records[static_cast<std::size_t>(n + i)];
            const IterationRecord& b = second.records[static_cast<std::size_t>(i)];
            EXPECT_EQ(a.iteration, b.iteration) << what;
            EXPECT_TRUE(same_bits(a.lm_loss, b.lm_loss))
                << what << ", iteration " << a.iteration << ": " << a.lm_loss << " vs " << b.lm_loss;
            EXPECT_EQ(a.loss_scale, b.loss_scale) << what << ", iteration " << a.iteration;
        }
        EXPECT_EQ(straight.params, second.params) << what;
        EXPECT_EQ(straight.main, second.main) << what;
    }
}

}  // namespace
}  // namespace gpt::train
