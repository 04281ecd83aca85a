// The trainer on a backend whose memory the host cannot address (tests/common/
// emulated_device.hpp): every path a GPU takes -- host-staged communication, tokens copied
// in, losses and checkpoints copied out, pipeline buffers in device memory -- runs in CI.
// A host access to device memory faults; results must equal the CPU backend's exactly,
// since the same kernels run and staging moves bytes unchanged.
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "dist/process_groups.hpp"
#include "emulated_device.hpp"
#include "parallel_match.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

struct Variant {
    const char* name;
    int tp, pp;
    bool sequence_parallel = false, distributed_optimizer = false, interleaved = false,
         overlap = false, fp16 = false;
};

Config variant_config(const Variant& v) {
    Config c = test::tiny::layers4(4);
    c.optimizer.lr_warmup_iters = 1;
    auto& p = c.parallel;
    p.tensor_model_parallel_size = v.tp;
    p.pipeline_model_parallel_size = v.pp;
    p.sequence_parallel = v.sequence_parallel;
    p.use_distributed_optimizer = v.distributed_optimizer;
    if (v.interleaved && v.pp > 1) p.num_layers_per_virtual_pipeline_stage = 1;
    p.overlap_grad_reduce = v.overlap;
    p.ddp_bucket_size = v.overlap ? 3000 : 0;
    if (v.fp16) {
        c.training.fp16 = true;
        c.training.initial_loss_scale = 4096;
    }
    return c;
}

// Runs a variant on both backends and expects identical records and parameters.
void expect_same_on_device(const Variant& v) {
    const int world = test::world_size();
    if (world % (v.tp * v.pp) != 0) return;
    const Config cfg = variant_config(v);
    const std::string what = std::string(v.name) + " on " + std::to_string(world) + " ranks, rank " +
                             std::to_string(test::world_rank());
    const test::Run host = test::train_run(cfg, MPI_COMM_WORLD, "cpu");
    const test::Run device = test::train_run(cfg, MPI_COMM_WORLD, "emulated-device");
    ASSERT_EQ(host.records.size(), 4u) << what;
    ASSERT_EQ(device.records.size(), host.records.size()) << what;
    for (std::size_t i = 0; i < host.records.size(); ++i) {
        EXPECT_EQ(device.records[i].lm_loss, host.records[i].lm_loss) << what << " iteration " << i + 1;
        EXPECT_EQ(device.records[i].skipped, host.records[i].skipped) << what << " iteration " << i + 1;
        if (!host.records[i].skipped) {
            EXPECT_EQ(device.records[i].grad_norm, host.records[i].grad_norm) << what << " iteration " << i + 1;
        }
        EXPECT_EQ(device.records[i].loss_scale, host.records[i].loss_scale) << what;
    }
    EXPECT_EQ(device.eval_loss, host.eval_loss) << what;
    ASSERT_EQ(device.params.size(), host.params.size()) << what;
    for (const auto& [name, p] : host.params)
        EXPECT_EQ(device.params.at(name).values, p.values) << what << " " << name;
    EXPECT_EQ(device.first_iteration_bytes.at("tp").total_bytes(),
              host.first_iteration_bytes.at("tp").total_bytes()) << what;
}

TEST(DevicePaths, TrainingEqualsTheCpuBackend) {
    const std::vector<Variant> variants = {
        {"plain", 1, 1},
        {"fp16 distopt overlap", 1, 1, false, true, false, true, true},
        {"TP2 SP", 2, 1, true},
        {"PP2 interleaved", 1, 2, false, false, true},
        {"TP2 PP2 SP distopt overlap interleaved fp16", 2, 2, true, true, true, true, true},
    };
    for (const Variant& v : variants) expect_same_on_device(v);
}

// Trains `iters` iterations on the world (DP = world size) after loading cfg.checkpoint.load
// when set, saving at the end when cfg.checkpoint.save is set; returns the records.
std::vector<IterationRecord> train_for(const Config& cfg, int iters, bool device) {
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
    auto be = device ? test::make_emulated_device_backend() : make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    tr.load_checkpoint();
    test::WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                         cfg.training.micro_batch_size, groups.coords().dp, groups.grid().dp_size(),
                         tr.consumed_train_samples());
    for (int i = 0; i < iters; ++i) tr.train_step(src);
    if (!cfg.checkpoint.save.empty()) tr.save_checkpoint();
    return tr.history();
}

// Checkpoints go through host copies: save on the device, resume on the device, and the
// losses equal an uninterrupted CPU run bit for bit (distributed optimizer, fp16, dropout).
TEST(DevicePaths, CheckpointRestartEqualsTheCpuBackend) {
    Config cfg = variant_config({"restart", 1, 1, false, true, false, true, true});
    cfg.model.hidden_dropout = 0.1;
    cfg.model.attention_dropout = 0.1;
    cfg.training.eval_iters = 0;
    const std::vector<IterationRecord> straight = train_for(cfg, 4, false);
    cfg.checkpoint.save = test::scratch_dir("device_paths_restart");
    std::vector<IterationRecord> joined = train_for(cfg, 2, true);
    cfg.checkpoint.load = cfg.checkpoint.save;
    cfg.checkpoint.save.clear();
    const std::vector<IterationRecord> second = train_for(cfg, 2, true);
    joined.insert(joined.end(), second.begin(), second.end());
    ASSERT_EQ(joined.size(), straight.size());
    for (std::size_t i = 0; i < straight.size(); ++i) {
        EXPECT_EQ(joined[i].iteration, straight[i].iteration);
        EXPECT_EQ(joined[i].lm_loss, straight[i].lm_loss) << "iteration " << i + 1;
        EXPECT_EQ(joined[i].loss_scale, straight[i].loss_scale) << "iteration " << i + 1;
    }
}

}  // namespace
}  // namespace gpt::train
