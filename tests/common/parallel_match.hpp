// Shared by the multi-rank trainer tests: train a configuration on a communicator, keep
// every iteration's record and every parameter this rank holds (by Megatron name), and
// compare a parallel run with the single-rank run of the same configuration.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"

namespace gpt::test {

struct Run {
    std::vector<train::IterationRecord> records;
    double eval_loss = 0.0;
    // Every parameter this rank holds, by Megatron name.
    struct Param {
        std::int64_t slice_start;
        int split_dim;
        std::vector<std::int64_t> local_shape;
        std::vector<float> values;
    };
    std::map<std::string, Param> params;
    double wait_seconds = 0.0, compute_seconds = 0.0;
    // Bytes each group moved in the first training iteration, by group name.
    std::map<std::string, dist::CommStats> first_iteration_bytes;
    train::MemoryReport memory;  // after the last iteration
    // Gradient buckets of the last iteration (all chunks) and how many of them started
    // reducing while backward still ran (--overlap-grad-reduce).
    int buckets = 0, buckets_launched_early = 0;
    // Every iteration's gradients by Megatron name (as reduced, before clipping), when
    // train_run was asked for them: the rounding bounds below are computed from them.
    std::vector<std::map<std::string, std::vector<float>>> step_grads;
};

// Trains cfg's train_iters on `comm` with TP x PP from cfg.parallel, on the WalkSource
// data, then evaluates 2 iterations, on the backend `device`: "cpu", "cuda" (this rank's
// GPU) or "emulated-device", a CPU backend whose memory the host cannot address
// (tests/common/emulated_device.hpp).
Run train_run(const Config& cfg, MPI_Comm comm, const std::string& device = "cpu",
              bool keep_step_grads = false);

// The parallel run equals the one-rank run: lm loss and grad norm of every iteration and
// the evaluation loss to `rel` relative, every parameter slice to `param_rel` (`rel` when
// 0; key biases at noise level), every layer held exactly once over the pipeline.
void expect_matches(const Run& ref, const Run& got, const Config& cfg, const std::string& what,
                    double rel = 1e-5, double param_rel = 0.0);

// The reference values of the slice `local` of the tensor `full` (split_dim, slice_start).
std::vector<float> reference_slice(const Run::Param& full, const Run::Param& local);

// The structural half of expect_matches: the loss fell, every layer is held exactly once
// over the pipeline, one head copy of the word embeddings per last stage when tied.
void expect_layout_complete(const Run& got, const Config& cfg, const std::string& what);

}  // namespace gpt::test
