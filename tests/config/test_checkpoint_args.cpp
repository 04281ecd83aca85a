// --use-checkpoint-args' rules over a saved run (config/checkpoint_args.hpp): which flags the
// user gave (command line and --config file), the parallel layout only with
// --use-mp-args-from-checkpoint-args, the tokenizer unless --no-use-tokenizer-model-...,
// and the flags a run may change. (The model's arguments themselves: the inference tests'
// CheckpointArgs, through gpt_generate's use of the same function.)
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

#include "config/checkpoint_args.hpp"
#include "config/options.hpp"
#include "core/errors.hpp"

namespace gpt {
namespace {

Config parsed(const std::vector<std::string>& flags) { return parse_args(flags).config; }

SavedRun saved_tp2_pp2() {
    const Config c = parsed({"--num-layers", "4", "--hidden-size", "48", "--num-attention-heads", "4", "--seq-length",
                             "32", "--tensor-model-parallel-size", "2", "--pipeline-model-parallel-size", "2",
                             "--decoder-first-pipeline-num-layers", "1", "--vocab-file", "v.json", "--merge-file",
                             "m.txt", "--hidden-dropout", "0.2"});
    return decode_saved_run(encode_saved_run(c), "f.h5");
}

std::set<std::string> given(const Config& c) { return {c.given_keys.begin(), c.given_keys.end()}; }

TEST(CheckpointArgsRules, GivenKeysAreTheFlagsOfTheCommandLineAndTheConfigFile) {
    const std::filesystem::path ini = std::filesystem::temp_directory_path() / "gpt_checkpoint_args_given.ini";
    std::ofstream(ini) << "num-layers = 3\nhidden-size = 48\n";
    const Config c = parsed({"--config", ini.string(), "--lr", "0.1", "--use-checkpoint-args", "--load", "x"});
    std::filesystem::remove(ini);
    EXPECT_EQ(given(c), (std::set<std::string>{"num_layers", "hidden_size", "lr", "use_checkpoint_args", "load"}));
}

TEST(CheckpointArgsRules, TheLayoutOnlyWithMpArgsTheTokenizerUnlessRefused) {
    Config c = parsed({"--load", "x", "--use-checkpoint-args"});
    const std::vector<std::string> taken = take_checkpoint_args(c, saved_tp2_pp2(), given(c), {true, false, "h"});
    EXPECT_EQ(c.model.num_layers, 4);
    EXPECT_EQ(c.model.hidden_dropout, 0.2);
    EXPECT_EQ(c.data.vocab_file, "v.json");
    EXPECT_EQ(c.parallel.tensor_model_parallel_size, 1);
    EXPECT_FALSE(c.parallel.tp_given);
    EXPECT_NE(std::find(taken.begin(), taken.end(), "num_layers 4"), taken.end());

    Config mp = parsed({"--load", "x", "--use-checkpoint-args"});
    take_checkpoint_args(mp, saved_tp2_pp2(), given(mp), {false, true, "h"});
    EXPECT_EQ(mp.parallel.tensor_model_parallel_size, 2);
    EXPECT_EQ(mp.parallel.pipeline_model_parallel_size, 2);
    EXPECT_TRUE(mp.parallel.tp_given && mp.parallel.pp_given);  // the planner keeps them
    EXPECT_EQ(mp.parallel.decoder_first_pipeline_num_layers, 1);
    EXPECT_EQ(mp.data.vocab_file, "");  // --no-use-tokenizer-model-from-checkpoint-args
    EXPECT_EQ(mp.data.merge_file, "");
}

TEST(CheckpointArgsRules, AGivenLayoutMustAgreeAGivenSequenceLengthOrDropoutIsTheRuns) {
    Config c = parsed({"--tensor-model-parallel-size", "4", "--seq-length", "64", "--hidden-dropout", "0"});
    try {
        take_checkpoint_args(c, saved_tp2_pp2(), given(c), {true, true, "leave it out"});
        ADD_FAILURE() << "TP 4 given against TP 2 saved was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--tensor-model-parallel-size: 2 in the checkpoint f.h5, 4 given. HINT: "
                                             "leave it out"),
                  std::string::npos)
            << e.what();
    }
    Config own = parsed({"--seq-length", "64", "--hidden-dropout", "0"});
    take_checkpoint_args(own, saved_tp2_pp2(), given(own), {true, false, "h"});
    EXPECT_EQ(own.model.seq_length, 64);
    EXPECT_EQ(own.model.hidden_dropout, 0.0);
    EXPECT_EQ(own.model.num_layers, 4);
}

}  // namespace
}  // namespace gpt
