// gpt_generate's flags (generation/generate_options.hpp): its own parsed in the style every
// tool shares, gpt_pretrain's passed on as given and checked by gpt_pretrain's parser before
// MPI starts; each error one line naming the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "generation/generate_options.hpp"
#include "usage_error.hpp"

namespace gpt::generation {
namespace {

// The message of the UsageError that parsing `args` throws ("" if none).
std::string error_of(const std::vector<std::string>& args) {
    return test::usage_error_of([&] { parse_generate_args(args); });
}

TEST(GenerateOptions, OwnFlagsAndTheirDefaults) {
    const GenerateOptions d = parse_generate_args({"--load", "ck", "--prompt", "x"});
    EXPECT_EQ(d.ckpt_step, -1);
    EXPECT_EQ(d.max_new_tokens, 64);
    EXPECT_EQ(d.batch_size, 8);
    EXPECT_EQ(d.output_format, OutputFormat::Text);
    EXPECT_FALSE(d.sampling.greedy);
    EXPECT_EQ(d.sampling.seed, 1234u);
    EXPECT_TRUE(d.other.empty());

    const GenerateOptions o = parse_generate_args(
        {"--load=ck", "--ckpt-step", "20", "--prompt", "one two", "--prompt", "- a list item", "--max-new-tokens", "5",
         "--temperature", "0.5", "--top-k", "40", "--top-p", "0.9", "--seed", "9", "--batch-size", "2",
         "--output-format", "jsonl", "--greedy"});
    EXPECT_EQ(o.load, "ck");
    EXPECT_EQ(o.ckpt_step, 20);
    // --prompt repeats (each one a prompt, a leading dash included); other flags keep their last value.
    EXPECT_EQ(o.prompts, (std::vector<std::string>{"one two", "- a list item"}));
    EXPECT_EQ(o.max_new_tokens, 5);
    EXPECT_FLOAT_EQ(o.sampling.temperature, 0.5f);
    EXPECT_EQ(o.sampling.top_k, 40);
    EXPECT_FLOAT_EQ(o.sampling.top_p, 0.9f);
    EXPECT_EQ(o.sampling.seed, 9u);  // the sampling seed, not gpt_pretrain's --seed
    EXPECT_EQ(o.batch_size, 2);
    EXPECT_EQ(o.output_format, OutputFormat::Jsonl);
    EXPECT_TRUE(o.sampling.greedy);
    EXPECT_EQ(parse_generate_args({"--load", "a", "--load", "b", "--prompt", "x"}).load, "b");
    EXPECT_TRUE(parse_generate_args({"--help"}).help);
    EXPECT_TRUE(parse_generate_args({"-h"}).help);
}

TEST(GenerateOptions, PretrainFlagsArePassedOnAsGiven) {
    const GenerateOptions o = parse_generate_args({"--device", "cpu", "--load", "ck", "--bf16", "--prompt", "x",
                                                   "--tensor-model-parallel-size=2", "--num-layers", "2"});
    EXPECT_EQ(o.other, (std::vector<std::string>{"--device", "cpu", "--bf16", "--tensor-model-parallel-size=2",
                                                 "--num-layers", "2"}));
}

TEST(GenerateOptions, UnknownFlagSuggestsFromBothFlagSets) {
    EXPECT_EQ(error_of({"--load", "ck", "--prompt", "x", "--max-new-token", "3"}),
              "unknown flag --max-new-token; did you mean --max-new-tokens?");
    EXPECT_EQ(error_of({"--load", "ck", "--prompt", "x", "--tensor-model-paralel-size", "2"}),
              "unknown flag --tensor-model-paralel-size; did you mean --tensor-model-parallel-size?");
    // A Megatron flag this project lacks is refused with the reason, as gpt_pretrain does.
    EXPECT_EQ(error_of({"--load", "ck", "--prompt", "x", "--num-experts", "8"}),
              "--num-experts is not supported: mixture of experts is not implemented");
}

TEST(GenerateOptions, BadValueNamesTheFlag) {
    const std::vector<std::string> base{"--load", "ck", "--prompt", "x"};
    auto with = [&](std::vector<std::string> extra) {
        extra.insert(extra.begin(), base.begin(), base.end());
        return error_of(extra);
    };
    EXPECT_EQ(with({"--top-k", "many"}), "the argument ('many') for option '--top-k' is invalid");
    EXPECT_EQ(with({"--ckpt-step", "latest"}), "the argument ('latest') for option '--ckpt-step' is invalid");
    EXPECT_EQ(with({"--output-format", "csv"}), "--output-format must be one of text, jsonl, got 'csv'");
    EXPECT_NE(with({"--prompt-file"}).find("'--prompt-file'"), std::string::npos) << with({"--prompt-file"});
    // gpt_pretrain's flags, by gpt_pretrain's parser.
    EXPECT_EQ(with({"--device", "gpu"}), "--device must be one of auto, cuda, cpu, got 'gpu'");
    EXPECT_EQ(with({"--num-layers", "two"}), "the argument ('two') for option '--num-layers' is invalid");
    // Values out of range, and what must be given.
    EXPECT_EQ(with({"--batch-size", "0"}), "--batch-size 0 must be positive");
    EXPECT_EQ(with({"--max-new-tokens", "-1"}), "--max-new-tokens -1 must be >= 0");
    EXPECT_NE(with({"--temperature", "0"}).find("--temperature 0 must be positive"), std::string::npos);
    EXPECT_NE(error_of({"--prompt", "x"}).find("--load DIR is required"), std::string::npos);
    EXPECT_NE(error_of({"--load", "ck"}).find("give the prompts with --prompt"), std::string::npos);
    EXPECT_NE(with({"--prompt-file", "p.txt"}).find("give the prompts with --prompt"), std::string::npos);
}

TEST(GenerateOptions, UsageListsTheOwnFlagsWithDefaults) {
    const std::string u = generate_usage();
    for (const char* s : {"usage: [mpiexec -n T] gpt_generate --load DIR", "--max-new-tokens arg (=64)",
                          "--batch-size arg (=8)", "--seed arg (=1234)", "--output-format arg (=text)", "--greedy",
                          "--prompt arg"})
        EXPECT_NE(u.find(s), std::string::npos) << s << " in\n" << u;
}

}  // namespace
}  // namespace gpt::generation
