// The command-line style every tool shares (config/flag_parser.hpp) on a small flag set of
// its own: each error one UsageError line naming the flag, argparse's last-occurrence rule,
// repeated flags, and flags passed on to a second parser (gpt_generate's way).
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/flag_binding.hpp"
#include "config/flag_parser.hpp"
#include "core/errors.hpp"
#include "usage_error.hpp"

using namespace gpt;
namespace po = boost::program_options;

namespace {

struct Tool {
    int layers = 2;
    double rate = 0.5;
    std::uint64_t seed = 7;
    bool fast = false;
    std::string name;
    DeviceKind device = DeviceKind::Auto;
    std::vector<std::string> notes;
    po::options_description flags{"tool"};

    Tool() {
        add_flag(flags, "num-layers", &layers, "layers");
        add_flag(flags, "rate", &rate, "a rate");
        add_flag(flags, "seed", &seed, "a seed");
        add_flag(flags, "fast", &fast, "a switch");
        add_flag(flags, "name", &name, "a name");
        add_flag(flags, "device", &device, "auto, cuda or cpu");
        add_repeated_flag(flags, "note", &notes, "a note (repeatable)");
    }
};

// The message of the UsageError that parsing `args` throws ("" if none).
std::string error_of(const std::vector<std::string>& args, const FlagRules& rules = {}) {
    Tool t;
    return test::usage_error_of([&] { parse_flags(t.flags, args, rules); });
}

}  // namespace

TEST(FlagParser, ValuesDefaultsAndBothSpellings) {
    Tool t;
    parse_flags(t.flags, {"--num-layers", "4", "--rate=0.25", "--fast", "--name", "-x", "--device", "cpu"});
    EXPECT_EQ(t.layers, 4);
    EXPECT_DOUBLE_EQ(t.rate, 0.25);
    EXPECT_EQ(t.seed, 7u);  // the default stays
    EXPECT_TRUE(t.fast);
    EXPECT_EQ(t.name, "-x");  // a value may start with a dash
    EXPECT_EQ(t.device, DeviceKind::Cpu);
}

TEST(FlagParser, UnknownFlagSuggestsTheClosestName) {
    EXPECT_EQ(error_of({"--num-layres", "4"}), "unknown flag --num-layres; did you mean --num-layers?");
    EXPECT_EQ(error_of({"--zzzzzzzzzz"}), "unknown flag --zzzzzzzzzz");
    // Never a guess: an abbreviation is unknown, not the flag it starts.
    EXPECT_EQ(error_of({"--num", "4"}).rfind("unknown flag --num", 0), 0u) << error_of({"--num", "4"});
    FlagRules rules;
    rules.unsupported = {{"num-experts", "mixture of experts is not implemented"}};
    EXPECT_EQ(error_of({"--num-experts", "4"}, rules), "--num-experts is not supported: mixture of experts is not implemented");
}

TEST(FlagParser, BadValueNamesTheFlag) {
    EXPECT_EQ(error_of({"--num-layers", "four"}), "the argument ('four') for option '--num-layers' is invalid");
    EXPECT_EQ(error_of({"--rate", "1x"}), "the argument ('1x') for option '--rate' is invalid");
    EXPECT_EQ(error_of({"--device", "gpu"}), "--device must be one of auto, cuda, cpu, got 'gpu'");
    EXPECT_NE(error_of({"--name"}).find("'--name'"), std::string::npos) << error_of({"--name"});
    EXPECT_NE(error_of({"--fast=yes"}).find("'--fast'"), std::string::npos) << error_of({"--fast=yes"});
}

TEST(FlagParser, LastOccurrenceWinsButRepeatedFlagsKeepEveryValue) {
    Tool t;
    const ParsedFlags p = parse_flags(t.flags, {"--num-layers", "4", "--note", "a", "--fast", "--note", "b",
                                                "--num-layers=6", "--fast"});
    EXPECT_EQ(t.layers, 6);
    EXPECT_TRUE(t.fast);
    EXPECT_EQ(t.notes, (std::vector<std::string>{"a", "b"}));
    EXPECT_EQ(p.args, (std::vector<std::string>{"--note", "a", "--note", "b", "--num-layers=6", "--fast"}));
}

TEST(FlagParser, PassedOnFlagsComeBackInOrderAndUnknownOnesSuggestFromBoth) {
    FlagRules rules;
    rules.pass_on = {"hidden-size", "bf16", "data-path"};
    Tool t;
    const ParsedFlags p = parse_flags(
        t.flags, {"--hidden-size", "64", "--num-layers", "3", "--bf16", "--data-path", "0.3", "a", "--hidden-size=-8"},
        rules);
    EXPECT_EQ(t.layers, 3);
    EXPECT_EQ(p.passed_on, (std::vector<std::string>{"--bf16", "--data-path", "0.3", "a", "--hidden-size=-8"}));
    EXPECT_EQ(error_of({"--hiden-size", "64"}, rules), "unknown flag --hiden-size; did you mean --hidden-size?");
    EXPECT_EQ(error_of({"--num-layer", "3"}, rules), "unknown flag --num-layer; did you mean --num-layers?");
}

TEST(FlagParser, UsageListsEveryFlagWithItsDefault) {
    Tool t;
    const std::string u = flags_usage("usage: tool [--flag value ...]\n", {&t.flags});
    EXPECT_EQ(u.rfind("usage: tool [--flag value ...]\n\ntool:\n", 0), 0u) << u;
    for (const char* s : {"--num-layers arg (=2)", "--rate arg (=0.5)", "--device arg (=auto)", "--fast", "--note arg"})
        EXPECT_NE(u.find(s), std::string::npos) << s << " in\n" << u;
}
