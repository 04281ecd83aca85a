// Megatron's --log-progress: SAVE/progress.txt's lines as Megatron writes them, the
// cumulative throughput's start as Megatron finds it in the file, and the FLOPs count
// carried across a resume by the checkpoint (num_floating_point_operations_so_far).
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "train/monitor/iteration_log.hpp"
#include "train/monitor/progress_log.hpp"
#include "train/trainer.hpp"
#include "test_env.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

std::vector<std::vector<std::string>> read_lines(const std::string& file) {
    MPI_Barrier(MPI_COMM_WORLD);  // rank 0 wrote it
    std::ifstream in(file);
    std::vector<std::vector<std::string>> out;
    std::string line, field;
    while (std::getline(in, line)) {
        std::vector<std::string> f;
        std::istringstream is(line);
        while (std::getline(is, field, '\t')) f.push_back(field);
        out.push_back(f);
    }
    return out;
}

double value(const std::string& field) { return std::stod(field.substr(field.find(": ") + 2)); }

TEST(ProgressStart, TheFirstJobOfTheCurrentWorldSizeAndTheFlopsSavedBeforeIt) {
    const std::string text =
        "2026-01-01 10:00:00\tJob ID: 1\t# GPUs: 8\tStarting job\n"
        "2026-01-01 10:30:00\tJob ID: 1\t# GPUs: 8\tSaved checkpoint\tIteration: 10\tJob throughput: 1.0 TFLOP/s/GPU"
        "\tCumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: 1.00e+15\tTokens (in billions): 0.01\n"
        "garbage line\n"
        "2026-01-01 11:00:00\tJob ID: 2\t# GPUs: 16\tStarting job\n"
        "2026-01-01 11:30:00\tJob ID: 2\t# GPUs: 16\tSaving async checkpoint\tIteration: 20\tJob throughput: 1.0 "
        "TFLOP/s/GPU\tCumulative throughput: 1.0 TFLOP/s/GPU\tFloating-point operations: 3.00e+15\tTokens (in "
        "billions): 0.02\n"
        "2026-01-01 11:31:00\tJob ID: 2\t# GPUs: 16\tSaved async checkpoint\tIteration: 20\n"
        "2026-01-01 12:00:00\tJob ID: 3\t# GPUs: 16\tStarting job\n";
    // 16 ranks: job 2 (the 8-rank job before it is another run's throughput), with the FLOPs
    // of the last published save before it: job 1's.
    const ProgressStart s16 = progress_start(text, 16);
    ASSERT_TRUE(s16.found);
    std::tm tm{};
    tm.tm_year = 126, tm.tm_mon = 0, tm.tm_mday = 1, tm.tm_hour = 11, tm.tm_isdst = -1;
    EXPECT_EQ(s16.epoch_seconds, static_cast<std::int64_t>(std::mktime(&tm)));
    EXPECT_EQ(s16.flops, 1e15);
    // 8 ranks: the 16-rank jobs came after, so no job of this size is current.
    EXPECT_FALSE(progress_start(text, 8).found);
    // Job 3 counts from the published async save of job 2 when it is the first of its size.
    const std::string later = text.substr(text.find("2026-01-01 11:30:00"));
    const ProgressStart s3 = progress_start(later, 16);
    ASSERT_TRUE(s3.found);
    EXPECT_EQ(s3.flops, 3e15);
    // An async save never published does not count.
    const std::string unpublished = text.substr(0, text.find("2026-01-01 11:31:00")) + text.substr(text.find("2026-01-01 12:00"));
    EXPECT_EQ(progress_start(unpublished.substr(unpublished.find("2026-01-01 11:30:00")), 16).flops, 0.0);
}

TEST(ProgressLog, MegatronsFieldsAndFormats) {
    const std::string dir = test::scratch_dir("progress_fields");
    const int rank = test::world_rank();
    setenv("SLURM_JOB_ID", "4242", 1);
    {
        ProgressLog log(dir, 16, rank == 0);
        log.started(1e15);
        log.saved({120, 2.5e17, 1'234'567'890}, false);
        log.saved({130, 2.6e17, 1'300'000'000}, true);
        log.published_async(130);
        log.deleted(120);
    }
    unsetenv("SLURM_JOB_ID");
    const auto lines = read_lines(dir + "/progress.txt");
    ASSERT_EQ(lines.size(), 5u);
    for (const auto& l : lines) {
        EXPECT_EQ(l[1], "Job ID: 4242");
        EXPECT_EQ(l[2], "# GPUs: 16");
        EXPECT_EQ(l[0].size(), 19u) << l[0];  // %Y-%m-%d %H:%M:%S
    }
    EXPECT_EQ(lines[0][3], "Starting job");
    ASSERT_EQ(lines[1].size(), 9u);
    EXPECT_EQ(lines[1][3], "Saved checkpoint");
    EXPECT_EQ(lines[1][4], "Iteration: 120");
    EXPECT_EQ(lines[1][5].find("Job throughput: "), 0u);
    EXPECT_NE(lines[1][5].find(" TFLOP/s/GPU"), std::string::npos);
    EXPECT_EQ(lines[1][6].find("Cumulative throughput: "), 0u);
    EXPECT_EQ(lines[1][7], "Floating-point operations: 2.50e+17");
    EXPECT_EQ(lines[1][8], "Tokens (in billions): 1.23");
    EXPECT_EQ(lines[2][3], "Saving async checkpoint");
    EXPECT_EQ(lines[2][4], "Iteration: 130");
    EXPECT_EQ((std::vector<std::string>(lines[3].begin() + 3, lines[3].end())),
              (std::vector<std::string>{"Saved async checkpoint", "Iteration: 130"}));
    EXPECT_EQ((std::vector<std::string>(lines[4].begin() + 3, lines[4].end())),
              (std::vector<std::string>{"Deleted checkpoint", "Iteration: 120"}));
}

struct Job {
    std::int64_t iteration = 0;
    double flops_per_iteration = 0;
};

Job run_job(const Config& cfg) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, groups.grid().dp_size(),
                         tr.consumed_train_samples());
    tr.train(src, nullptr, nullptr);
    return {tr.iteration(), model_flops_per_iteration(cfg.model, tr.chunks().chunk(0).dims().vocab_padded,
                                                      cfg.training.global_batch_size)};
}

// Two jobs of one run (the first stops at --exit-interval, the second resumes): each
// starts with "Starting job"; the saves' FLOPs are Megatron's formula times the
// iterations, across the resume; --keep-last's removal is logged; --async-save's two lines.
TEST(ProgressLog, TheTrainerLogsEachJobAndSaveAndTheFlopsSurviveTheResume) {
    for (const bool async : {false, true}) {
        Config cfg = test::tiny::short_train();  // 8 iterations
        const std::string dir = test::scratch_dir(async ? "progress_async" : "progress_sync");
        cfg.checkpoint.save = cfg.checkpoint.load = dir;
        cfg.checkpoint.save_interval = 4;
        cfg.checkpoint.keep_last = 1;
        cfg.checkpoint.async_save = async;
        cfg.logging.log_progress = true;
        cfg.training.exit_interval = 4;
        EXPECT_EQ(run_job(cfg).iteration, 4);
        cfg.training.exit_interval = 0;
        const Job second = run_job(cfg);
        EXPECT_EQ(second.iteration, 8);
        std::vector<std::string> events;
        std::vector<double> flops;
        for (const auto& l : read_lines(dir + "/progress.txt")) {
            ASSERT_GE(l.size(), 4u);
            events.push_back(l[3] + (l.size() > 4 ? " " + l[4] : ""));
            if (l.size() == 9) flops.push_back(value(l[7]));
        }
        const std::string saved = async ? "Saving async checkpoint" : "Saved checkpoint";
        std::vector<std::string> want{"Starting job", saved + " Iteration: 4"};
        if (async) want.push_back("Saved async checkpoint Iteration: 4");
        want.insert(want.end(), {"Starting job", saved + " Iteration: 8"});
        if (async) want.push_back("Saved async checkpoint Iteration: 8");
        want.push_back("Deleted checkpoint Iteration: 4");
        EXPECT_EQ(events, want);
        // Printed to 3 significant digits: within half a unit of the third.
        ASSERT_EQ(flops.size(), 2u);
        EXPECT_NEAR(flops[0], 4 * second.flops_per_iteration, 5e-3 * flops[0]);
        EXPECT_NEAR(flops[1], 8 * second.flops_per_iteration, 5e-3 * flops[1]);
    }
}

}  // namespace
}  // namespace gpt::train
