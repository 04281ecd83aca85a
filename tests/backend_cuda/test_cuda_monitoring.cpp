// The monitoring hooks of the CUDA build, read back from the emulator's recorder
// (gpt_emu/profiler_log.hpp): every timer phase is an NVTX range, opened and closed in
// balance around the phases of each step, and --profile's cudaProfilerStart/Stop bracket
// exactly iterations --profile-step-start+1 .. --profile-step-end on the ranks of
// --profile-ranks, and on no other rank. On a real GPU the calls go to the CUDA runtime,
// where nothing can read them back: the test skips there, saying so.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "core/device_info.hpp"
#include "test_env.hpp"
#include "backend/backend.hpp"
#include "dist/process_groups.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"
#ifdef GPT_CUDA_EMU
#include "gpt_emu/profiler_log.hpp"
#endif

namespace gpt::train {
namespace {

TEST(CudaMonitoring, NvtxRangesBalanceAndTheProfilerWindowIsExact) {
    if (visible_gpu_count() == 0) {
        test::note_hardware_skip("no GPU visible");
        return;
    }
#ifndef GPT_CUDA_EMU
    GTEST_SKIP() << "NVTX and cudaProfilerStart/Stop calls are read back only on the emulator";
#else
    int world = 0, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ASSERT_EQ(world, 2) << "registered for 2 ranks";
    Config cfg = test::tiny::train();
    cfg.model.hidden_size = 64;
    cfg.model.num_attention_heads = 2;
    cfg.training.train_iters = 4;
    cfg.optimizer.lr_warmup_iters = 1;
    cfg.parallel.distributed_backend = DistributedBackend::Mpi;
    cfg.monitor.profile = true;
    cfg.monitor.profile_step_start = 1;
    cfg.monitor.profile_step_end = 3;
    cfg.monitor.profile_ranks = {1};
    cfg.monitor.timing_log_level = 2;
    cfg.logging.log_interval = 1000;
    // Trainer::train, not test::train_run: the profiler window is the training loop's.
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cuda", groups.local_rank());
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, groups.grid().dp_size());
    gpt_emu::clear_profiler_calls();
    {
        Trainer tr(cfg, groups, *be);
        tr.train(src, nullptr, nullptr);
    }
    using C = gpt_emu::ProfilerCall;
    int depth = 0, steps = 0, optimizer_pops = 0, starts = 0, stops = 0;
    std::vector<std::string> open;
    for (const C& c : gpt_emu::profiler_calls()) {
        if (!c.main_thread) continue;  // (none expected: the trainer's phases run on its thread)
        switch (c.kind) {
            case C::RangePush:
                EXPECT_EQ(c.level, depth) << c.name;
                ++depth;
                open.push_back(c.name);
                if (c.name == "forward-backward") {
                    EXPECT_EQ(c.level, 0) << "forward-backward nested in " << open.front();
                    ++steps;
                }
                break;
            case C::RangePop:
                ASSERT_GE(c.level, 0) << "a range closed that was never opened";
                ASSERT_FALSE(open.empty());
                EXPECT_EQ(c.name, open.back());
                open.pop_back();
                --depth;
                if (c.name == "optimizer") ++optimizer_pops;
                break;
            case C::ProfilerStart:
                ++starts;
                EXPECT_EQ(depth, 0) << "profiler started inside a phase";
                // Before iteration start+1's first phase, after iteration start's last.
                EXPECT_EQ(steps, cfg.monitor.profile_step_start);
                EXPECT_EQ(optimizer_pops, cfg.monitor.profile_step_start);
                break;
            case C::ProfilerStop:
                ++stops;
                EXPECT_EQ(depth, 0) << "profiler stopped inside a phase";
                EXPECT_EQ(steps, cfg.monitor.profile_step_end);
                EXPECT_EQ(optimizer_pops, cfg.monitor.profile_step_end);
                break;
        }
    }
    EXPECT_EQ(depth, 0) << "ranges left open: " << (open.empty() ? "" : open.back());
    EXPECT_EQ(steps, 4);
    EXPECT_EQ(optimizer_pops, 4);
    const bool profiled = rank == 1;
    EXPECT_EQ(starts, profiled ? 1 : 0) << "rank " << rank;
    EXPECT_EQ(stops, profiled ? 1 : 0) << "rank " << rank;
#endif
}

}  // namespace
}  // namespace gpt::train
