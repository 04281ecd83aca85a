// preprocess_data's and merge_datasets' flags (text/preprocess_options.hpp,
// text/merge_options.hpp) in the style every tool shares, with the messages the tools always
// printed: Boost's text and " (see --help)" for a bad or missing flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "text/merge_options.hpp"
#include "text/preprocess_options.hpp"
#include "usage_error.hpp"

namespace gpt::data {
namespace {

std::string preprocess_error(const std::vector<std::string>& args) {
    return test::usage_error_of([&] { parse_preprocess_args(args); });
}

const std::vector<std::string> kGpt2 = {"--input", "a.json", "b*.json", "--output-prefix", "o",
                                        "--vocab-file", "v", "--merge-file", "m"};

std::vector<std::string> gpt2_with(std::vector<std::string> more) {
    std::vector<std::string> args = kGpt2;
    args.insert(args.end(), more.begin(), more.end());
    return args;
}

TEST(TextToolOptions, PreprocessDefaultsAndValues) {
    const PreprocessArgs d = parse_preprocess_args(kGpt2);
    EXPECT_EQ(d.opt.inputs, (std::vector<std::string>{"a.json", "b*.json"}));
    EXPECT_EQ(d.opt.json_keys, std::vector<std::string>{"text"});
    EXPECT_EQ(d.opt.output_prefix, "o");
    EXPECT_EQ(d.tokenizer_type, "GPT2BPETokenizer");
    EXPECT_EQ(d.opt.workers, 1);
    EXPECT_EQ(d.opt.chunk_size, 64);
    EXPECT_EQ(d.opt.log_interval, 1000);
    EXPECT_EQ(d.tik.num_special_tokens, 1000);
    EXPECT_EQ(d.make_vocab_size_divisible_by, 128);
    EXPECT_FALSE(d.opt.append_eod || d.opt.skip_bad_lines || d.dataset_impl_given);
    const PreprocessArgs a = parse_preprocess_args(
        gpt2_with({"--json-keys", "text", "title", "--workers", "4", "--append-eod", "--dataset-impl", "mmap"}));
    EXPECT_EQ(a.opt.json_keys, (std::vector<std::string>{"text", "title"}));
    EXPECT_EQ(a.opt.workers, 4);
    EXPECT_TRUE(a.opt.append_eod && a.dataset_impl_given);
    // The shared style: the last of a repeated flag wins.
    EXPECT_EQ(parse_preprocess_args(gpt2_with({"--workers", "2", "--workers", "3"})).opt.workers, 3);
}

TEST(TextToolOptions, PreprocessErrorsKeepTheirWording) {
    EXPECT_EQ(preprocess_error({"--input", "a.json"}), "the option '--output-prefix' is required but missing (see --help)");
    EXPECT_EQ(preprocess_error({"--output-prefix", "o"}), "the option '--input' is required but missing (see --help)");
    EXPECT_EQ(preprocess_error(gpt2_with({"--workers", "abc"})),
              "the argument ('abc') for option '--workers' is invalid (see --help)");
    EXPECT_EQ(preprocess_error(gpt2_with({"--partitions", "2"})), "--partitions 2 is not supported; use --workers");
    EXPECT_EQ(preprocess_error(gpt2_with({"--dataset-impl", ""})), "--dataset-impl  is not supported (only mmap)");
    EXPECT_EQ(preprocess_error({"--input", "a", "--output-prefix", "o"}),
              "--tokenizer-type GPT2BPETokenizer needs --vocab-file and --merge-file");
    // --help needs no other flag, but a bad value still fails.
    EXPECT_TRUE(parse_preprocess_args({"--help"}).help);
    EXPECT_EQ(preprocess_error({"--help", "--workers", "abc"}),
              "the argument ('abc') for option '--workers' is invalid (see --help)");
}

TEST(TextToolOptions, MergeFlags) {
    const MergeArgs m = parse_merge_args({"--input", "p1", "p2", "--output-prefix", "out"});
    EXPECT_EQ(m.inputs, (std::vector<std::string>{"p1", "p2"}));
    EXPECT_EQ(m.output_prefix, "out");
    EXPECT_TRUE(parse_merge_args({"-h"}).help);
    EXPECT_EQ(test::usage_error_of([] { parse_merge_args({"--input", "x"}); }),
              "the option '--output-prefix' is required but missing (see --help)");
    EXPECT_NE(merge_usage().find("--output-prefix arg"), std::string::npos);
}

}  // namespace
}  // namespace gpt::data
