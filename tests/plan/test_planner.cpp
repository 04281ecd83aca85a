// Entry points over gpt::Config: plan-only output and auto mode filling the config.
#include <gtest/gtest.h>

#include <cstdlib>
#include <sstream>

#include "core/errors.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "plan/planner.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

// configs/gpt22b.ini as gpt_pretrain reads it.
Config gpt22b_config() { return shipped_config("gpt22b"); }

class PlannerTest : public ::testing::Test {
protected:
    void SetUp() override { setenv("DEVICE_MEMORY_GB", "80", 1); }
    void TearDown() override { unsetenv("DEVICE_MEMORY_GB"); }
};

TEST_F(PlannerTest, PlanOnlyTableAndJson) {
    Config c = gpt22b_config();
    c.plan.plan_only = true;
    c.plan.world_size = 16;
    c.plan.local_world_size = 8;
    c.training.max_global_batch_size = 32;
    std::ostringstream table;
    print_plan(c, table);
    EXPECT_NE(table.str().find("device h100-80gb: 80.0 GiB per rank (DEVICE_MEMORY_GB)"), std::string::npos)
        << table.str();
    EXPECT_NE(table.str().find("22.07 B parameters"), std::string::npos);
    c.plan.plan_format = PlanFormat::Json;
    std::ostringstream json;
    print_plan(c, json);
    EXPECT_EQ(json.str().front(), '{');
    c.plan.plan_format = PlanFormat::Table;
    c.plan.world_size = 0;
    EXPECT_THROW(print_plan(c, json), UsageError);
}

TEST_F(PlannerTest, AutoModeFillsConfig) {
    Config c = gpt22b_config();
    c.training.max_global_batch_size = 32;
    std::string summary = choose_layout(c, 16, 8);
    const ParallelConfig& p = c.parallel;
    EXPECT_EQ(p.tensor_model_parallel_size * p.pipeline_model_parallel_size * p.data_parallel_size, 16);
    EXPECT_LE(c.training.global_batch_size, 32);
    EXPECT_EQ(c.training.global_batch_size % (c.training.micro_batch_size * p.data_parallel_size), 0);
    EXPECT_NE(summary.find("runner-up"), std::string::npos) << summary;
    if (p.recompute_granularity == RecomputeGranularity::Full) {
        EXPECT_EQ(p.recompute_method, RecomputeMethod::Uniform);
    }
    if (p.num_layers_per_virtual_pipeline_stage > 0) {
        EXPECT_GT(p.virtual_stages(c.model.num_layers), 1);
    }
}

TEST_F(PlannerTest, AutoModeKeepsGivenFlags) {
    Config c = gpt22b_config();
    c.training.global_batch_size = 16;
    c.parallel.tensor_model_parallel_size = 4;
    c.parallel.tp_given = true;
    c.training.micro_batch_size = 2;
    c.parallel.mbs_given = true;
    c.parallel.recompute_granularity = RecomputeGranularity::Full;
    choose_layout(c, 16, 8);
    EXPECT_EQ(c.parallel.tensor_model_parallel_size, 4);
    EXPECT_EQ(c.training.micro_batch_size, 2);
    EXPECT_EQ(c.training.global_batch_size, 16);
    EXPECT_EQ(c.parallel.recompute_granularity, RecomputeGranularity::Full);
}

// --pipeline-model-parallel-layout: the planner keeps the stages (PP and VP) and prices the
// layout's layers; without the pipeline size it cannot tell PP from the virtual stages.
TEST_F(PlannerTest, AutoModeKeepsALayoutString) {
    Config c = gpt22b_config();
    c.training.max_global_batch_size = 32;
    c.parallel.pipeline_model_parallel_layout = "Et*11|(t*12|)*2,t*13L";
    try {
        choose_layout(c, 16, 8);
        FAIL() << "a layout without --pipeline-model-parallel-size was planned";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("needs --pipeline-model-parallel-size"), std::string::npos) << e.what();
    }
    c.parallel.pipeline_model_parallel_size = 4;
    c.parallel.pp_given = true;
    const std::string summary = choose_layout(c, 16, 8);
    EXPECT_EQ(c.parallel.pipeline_model_parallel_size, 4);
    EXPECT_EQ(c.parallel.virtual_stages(c.model.num_layers), 1);
    EXPECT_EQ(c.parallel.num_virtual_stages_per_pipeline_rank, 0);
    EXPECT_EQ(c.parallel.num_layers_per_virtual_pipeline_stage, 0);
    EXPECT_NE(summary.find("layout=11,12,12,13"), std::string::npos) << summary;
}

TEST_F(PlannerTest, AutoModeFailsClearly) {
    Config c = gpt22b_config();
    c.training.max_global_batch_size = 0;  // the file's bound taken away: no batch size at all
    EXPECT_THROW(choose_layout(c, 16, 8), UsageError);
    c.training.max_global_batch_size = 8;
    setenv("DEVICE_MEMORY_GB", "4", 1);
    try {
        choose_layout(c, 8, 8);
        FAIL() << "22B cannot fit 8 x 4 GiB";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("out of memory by"), std::string::npos) << e.what();
    }
}

}  // namespace
}  // namespace gpt::plan::test


namespace gpt::plan::test {

TEST(PlanFlags, DeviceAndFabricFlagsReachTheSearch) {
    // configs/gpt-tiny.ini's model (4 layers, hidden 256, 4 heads, sequence 256).
    Config cfg = parse_args({"--config", gpt::test::source_dir() + "/configs/gpt-tiny.ini", "--vocab-size", "50257",
                             "--train-iters", "1", "--plan-device", "a100-80gb", "--plan-intra-node-gbps", "150",
                             "--plan-inter-node-gbps", "12.5"})
                     .config;
    validate_model_and_training(cfg);
    SearchInputs in = search_inputs_from_config(cfg, 16, 8, true);
    EXPECT_EQ(in.device.name, "a100-80gb");
    EXPECT_DOUBLE_EQ(in.fabric.intra_node_gbps, 150.0);
    EXPECT_DOUBLE_EQ(in.fabric.inter_node_gbps, 12.5);
    cfg.plan.plan_device = PlanDevice::H200;
    cfg.plan.plan_inter_node_gbps = 0;
    SearchInputs h = search_inputs_from_config(cfg, 16, 8, true);
    EXPECT_EQ(h.device.name, "h200");
    EXPECT_GT(h.fabric.inter_node_gbps, 0.0);
}

// Megatron's --step-batch-size-schedule reaches the search as the global batch (its last
// entry) and the smaller batches before it, those the run takes (--train-samples 300 at
// sequence 256 stops before the 64); the planner then picks a layout that splits every one.
TEST(PlanFlags, TheBatchScheduleReachesTheSearch) {
    Config cfg = parse_args({"--config", gpt::test::source_dir() + "/configs/gpt-tiny.ini", "--vocab-size", "50257",
                             "--train-iters", "0", "--train-samples", "300", "--lr-warmup-iters", "0",
                             "--global-batch-size", "0", "--micro-batch-size", "auto", "--max-global-batch-size", "64",
                             "--step-batch-size-schedule", "0:4 1K:16 100K:64"})
                     .config;
    validate_model_and_training(cfg);
    EXPECT_EQ(cfg.training.global_batch_size, 64);
    const SearchInputs in = search_inputs_from_config(cfg, 8, 8, false);
    EXPECT_EQ(in.global_batch, 64);
    EXPECT_EQ(in.scheduled_batches, (std::vector<std::int64_t>{4, 16}));
    choose_layout(cfg, 8, 8);
    EXPECT_EQ(4 % (cfg.training.micro_batch_size * cfg.parallel.data_parallel_size), 0);
}

}  // namespace gpt::plan::test
namespace gpt::plan::test {

TEST(CheckMemory, FitsOrNamesTheShortfall) {
    // configs/gpt22b.ini (fp16, distributed optimizer) at TP 8 x PP 2.
    Config cfg = parse_args({"--config", gpt::test::source_dir() + "/configs/gpt22b.ini", "--train-iters", "1",
                             "--plan-device", "h100-80gb", "--tensor-model-parallel-size", "8",
                             "--pipeline-model-parallel-size", "2"})
                     .config;
    validate(cfg, 16);
    setenv("DEVICE_MEMORY_GB", "80", 1);
    EXPECT_NE(check_memory(cfg, 16, 8).find("needs"), std::string::npos);
    setenv("DEVICE_MEMORY_GB", "4", 1);
    try {
        check_memory(cfg, 16, 8);
        ADD_FAILURE() << "22B on 16 ranks of 4 GiB must not fit";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("predicted out of memory by"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("HINT"), std::string::npos);
    }
    unsetenv("DEVICE_MEMORY_GB");
}

}  // namespace gpt::plan::test
