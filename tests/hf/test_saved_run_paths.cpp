// A checkpoint's saved run through every reader of it - the trainer's resume (with its
// argument check and schedule), gpt_generate's load_model and the converter's one-rank
// load - from a checkpoint of this build (run_config) and the same checkpoint as an older
// build wrote it (the arguments table only): both give the same model, parameters and
// resumed losses. A run_config of an unknown version is one error naming file and key.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <mpi.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "ckpt/checkpoint.hpp"
#include "ckpt/format.hpp"
#include "ckpt/h5_util.hpp"
#include "config/saved_run.hpp"
#include "core/errors.hpp"
#include "generation/load_model.hpp"
#include "hf/one_rank_model.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt {
namespace {

namespace fs = std::filesystem;

// Replaces (or, with nullopt, removes) root attribute `name` of a published checkpoint and
// stores the attributes checksum that covers the result, as a build that wrote it so would.
void rewrite_root_attribute(const std::string& file, const char* name, const std::optional<std::string>& value) {
    hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0) << file;
    ASSERT_GE(H5Adelete(f, name), 0) << name;
    if (value) ckpt::h5::write_attribute(f, name, *value, file);
    const ckpt::AttributeMap root = ckpt::h5::read_attributes(f, file);
    hid_t g = H5Gopen2(f, "/_checkpoint", H5P_DEFAULT);
    const ckpt::AttributeMap meta = ckpt::h5::read_attributes(g, file);
    const auto sum = ckpt::attributes_checksum(root, std::get<std::int64_t>(meta.at("iteration")),
                                               std::get<std::int64_t>(meta.at("world_size")));
    ASSERT_GE(H5Adelete(g, "attributes_checksum"), 0);
    ckpt::h5::write_attribute(g, "attributes_checksum", static_cast<std::int64_t>(sum), file);
    H5Gclose(g);
    H5Fclose(f);
}

struct Job {
    dist::ProcessGroups groups{MPI_COMM_SELF, 1, 1};
    std::unique_ptr<Backend> be = make_backend("cpu", 0);
    std::unique_ptr<train::Trainer> tr;
    explicit Job(const Config& cfg) { tr = std::make_unique<train::Trainer>(cfg, groups, *be); }
    void train(int iters) {
        test::WalkSource src(61, 16, 2, 0, 1, tr->consumed_train_samples());
        for (int i = 0; i < iters; ++i) tr->train_step(src);
    }
};

// Two copies of one checkpoint after 2 iterations: as saved, and as an older build saved it.
struct Checkpoints {
    Config cfg = test::tiny::short_train();
    std::string typed, legacy, legacy_file;
    Checkpoints() {
        typed = test::scratch_dir("saved_run_typed");
        legacy = test::scratch_dir("saved_run_legacy");
        cfg.checkpoint.save = typed;
        Job j(cfg);
        j.train(2);
        j.tr->save_checkpoint();
        j.tr.reset();
        fs::remove_all(legacy);
        fs::copy(typed, legacy, fs::copy_options::recursive);
        legacy_file = ckpt::checkpoint_file(legacy, 2).string();
        rewrite_root_attribute(legacy_file, kSavedRunAttribute, std::nullopt);
    }
};

const Checkpoints& checkpoints() {
    static const Checkpoints c;
    return c;
}

TEST(SavedRunPaths, TheLegacyCopyHoldsOnlyTheTable) {
    const Checkpoints& c = checkpoints();
    ckpt::CheckpointReader typed(MPI_COMM_SELF, ckpt::checkpoint_file(c.typed, 2).string());
    ckpt::CheckpointReader legacy(MPI_COMM_SELF, c.legacy_file);
    EXPECT_TRUE(typed.has_attribute(kSavedRunAttribute));
    EXPECT_TRUE(typed.has_attribute(kArgumentsTableAttribute));
    EXPECT_FALSE(legacy.has_attribute(kSavedRunAttribute));
    EXPECT_EQ(legacy.attribute_string(kArgumentsTableAttribute), typed.attribute_string(kArgumentsTableAttribute));
}

TEST(SavedRunPaths, TrainingResumesAlike) {
    const Checkpoints& c = checkpoints();
    std::vector<double> losses[2];
    for (int legacy = 0; legacy < 2; ++legacy) {
        Config cfg = c.cfg;
        cfg.checkpoint.save.clear();
        cfg.checkpoint.load = legacy ? c.legacy : c.typed;
        cfg.checkpoint.use_checkpoint_opt_param_scheduler = true;  // the schedule read from the saved run
        Job j(cfg);
        ASSERT_EQ(j.tr->load_checkpoint(), std::optional<std::int64_t>(2));
        j.train(2);
        for (const auto& r : j.tr->history()) losses[legacy].push_back(r.lm_loss);
    }
    ASSERT_EQ(losses[0].size(), 2u);
    EXPECT_EQ(losses[0], losses[1]);
    // The argument check reads the legacy table too.
    Config heads = c.cfg;
    heads.checkpoint.save.clear();
    heads.checkpoint.load = c.legacy;
    heads.model.num_attention_heads = 8;
    Job j(heads);
    try {
        j.tr->load_checkpoint();
        FAIL() << "no error";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--num-attention-heads: 4 in the checkpoint, 8 in this run"),
                  std::string::npos)
            << e.what();
    }
}

TEST(SavedRunPaths, GenerationLoadsAlike) {
    const Checkpoints& c = checkpoints();
    const auto a = generation::load_model(MPI_COMM_SELF, c.typed, -1, {"--device", "cpu"}, 0, 1);
    const auto b = generation::load_model(MPI_COMM_SELF, c.legacy, -1, {"--device", "cpu"}, 0, 1);
    EXPECT_EQ(encode_saved_run(a.cfg), encode_saved_run(b.cfg));
    EXPECT_EQ(a.cfg.model.num_layers, c.cfg.model.num_layers);
    EXPECT_EQ(a.cfg.model.vocab_size, c.cfg.model.vocab_size);
    EXPECT_EQ(a.params, b.params);
}

TEST(SavedRunPaths, ConversionLoadsAlike) {
    const Checkpoints& c = checkpoints();
    const hf::LoadedCheckpoint a = hf::load_checkpoint_one_rank(c.typed, -1);
    const hf::LoadedCheckpoint b = hf::load_checkpoint_one_rank(c.legacy, -1);
    EXPECT_EQ(encode_saved_run(a.run.cfg), encode_saved_run(b.run.cfg));
    EXPECT_EQ(a.data.vocab_file, b.data.vocab_file);
    EXPECT_EQ(a.data.tokenizer_type, b.data.tokenizer_type);
    EXPECT_EQ(a.model().hidden_size, c.cfg.model.hidden_size);
    EXPECT_EQ(a.params, b.params);
}

TEST(SavedRunPaths, AnUnknownVersionNamesTheFileAndTheAttribute) {
    const Checkpoints& c = checkpoints();
    const std::string dir = test::scratch_dir("saved_run_newer");
    fs::remove_all(dir);
    fs::copy(c.typed, dir, fs::copy_options::recursive);
    const std::string file = ckpt::checkpoint_file(dir, 2).string();
    rewrite_root_attribute(file, kSavedRunAttribute, std::string("version 9\nnum_layers int 2\n"));
    Config cfg = c.cfg;
    cfg.checkpoint.save.clear();
    cfg.checkpoint.load = dir;
    for (int path = 0; path < 3; ++path) {
        try {
            if (path == 0) generation::load_model(MPI_COMM_SELF, dir, -1, {"--device", "cpu"}, 0, 1);
            if (path == 1) hf::load_checkpoint_one_rank(dir, -1);
            if (path == 2) Job(cfg).tr->load_checkpoint();
            ADD_FAILURE() << "no error on path " << path;
        } catch (const DataError& e) {
            const std::string m = e.what();
            EXPECT_NE(m.find(file), std::string::npos) << m;
            EXPECT_NE(m.find("run_config has format version 9"), std::string::npos) << m;
        }
    }
}

}  // namespace
}  // namespace gpt
