// convert_checkpoint's flags (hf/convert_options.hpp), in the style every tool shares: the
// flags of each operation parse, and each error is one line naming the flag.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "hf/convert_options.hpp"
#include "usage_error.hpp"

namespace gpt::hf {
namespace {

// The message of the UsageError that parsing `args` throws ("" if none).
std::string error_of(const std::vector<std::string>& args) {
    return test::usage_error_of([&] { parse_convert_args(args); });
}

TEST(ConvertOptions, EachOperationsFlagsParse) {
    const ConvertArgs e = parse_convert_args({"--to", "hf", "--load", "ck", "--ckpt-step", "200", "--output", "out"});
    EXPECT_EQ(e.to, ConvertTarget::Hf);
    EXPECT_EQ(e.load, "ck");
    EXPECT_EQ(e.ckpt_step, 200);
    EXPECT_EQ(e.output, "out");
    EXPECT_TRUE(e.vocab_file.empty() && e.merge_file.empty());
    const ConvertArgs i = parse_convert_args({"--to=megatron", "--load-hf", "hf", "--save", "ck"});
    EXPECT_EQ(i.to, ConvertTarget::Megatron);
    EXPECT_EQ(i.ckpt_step, -1);
    EXPECT_EQ(i.load_hf, "hf");
    EXPECT_EQ(i.save, "ck");
    const ConvertArgs d = parse_convert_args({"--dump-logits", "l.bin", "--load", "ck", "--tokens", "464,0,50256", "--kv-cache"});
    EXPECT_EQ(d.to, ConvertTarget::None);
    EXPECT_EQ(d.dump_logits, "l.bin");
    EXPECT_EQ(d.tokens, (std::vector<std::int32_t>{464, 0, 50256}));
    EXPECT_TRUE(d.kv_cache);
    EXPECT_FALSE(parse_convert_args({"--dump-logits", "l.bin"}).kv_cache);
    EXPECT_TRUE(parse_convert_args({"-h"}).help);
    // argparse's rule: a flag given twice keeps its last value.
    EXPECT_EQ(parse_convert_args({"--load", "a", "--load", "b"}).load, "b");
}

TEST(ConvertOptions, UnknownFlagSuggestsTheClosestName) {
    EXPECT_EQ(error_of({"--to", "hf", "--outptu", "x"}), "unknown flag --outptu; did you mean --output?");
    EXPECT_EQ(error_of({"--load-fh", "x"}), "unknown flag --load-fh; did you mean --load-hf?");
    // Never a guess: an abbreviation is not the flag it starts.
    EXPECT_EQ(error_of({"--kv"}).rfind("unknown flag --kv", 0), 0u) << error_of({"--kv"});
}

TEST(ConvertOptions, BadValueNamesTheFlag) {
    EXPECT_EQ(error_of({"--to", "safetensors"}), "--to must be one of hf, megatron, got 'safetensors'");
    EXPECT_EQ(error_of({"--ckpt-step", "last"}), "the argument ('last') for option '--ckpt-step' is invalid");
    EXPECT_EQ(error_of({"--tokens", "1,x,3"}), "--tokens: 'x' is not a token id");
    EXPECT_EQ(error_of({"--tokens", "1,-2"}), "--tokens: '-2' is not a token id");
    EXPECT_NE(error_of({"--output"}).find("'--output'"), std::string::npos) << error_of({"--output"});
}

TEST(ConvertOptions, UsageNamesEachOperation) {
    const std::string u = convert_usage();
    for (const char* s : {"convert_checkpoint --to hf --load DIR", "convert_checkpoint --to megatron --load-hf",
                          "--dump-logits FILE", "--ckpt-step arg (=-1)", "--kv-cache"})
        EXPECT_NE(u.find(s), std::string::npos) << s << " in\n" << u;
}

}  // namespace
}  // namespace gpt::hf
