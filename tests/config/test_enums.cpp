// The enum-valued options: every spelling of every enum parses from its flag (command line
// and INI) to its value and prints back as the same text in the arguments table, and a bad
// value is one UsageError line naming the flag and the allowed values.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "config_test_util.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

using namespace gpt;
using gpt::test::printed;

namespace {

template <typename E, typename Field>
void expect_every_value_round_trips(const char* flag, Field field) {
    std::string key = flag;
    std::replace(key.begin(), key.end(), '-', '_');
    int seen = 0;
    for (const auto& [value, name] : EnumNames<E>::names) {
        ++seen;
        EXPECT_EQ(to_string(value), name);
        EXPECT_EQ(parse_enum<E>(name, flag), value) << name;
        if (name.empty()) continue;  // "" is the flag not given: printed None, tested below
        const Config cfg = parse_args({"--" + std::string(flag), std::string(name)}).config;
        EXPECT_EQ(field(cfg), value) << flag << " " << name;
        EXPECT_EQ(printed(cfg, key), name) << flag;
        // An INI file's value takes the same path.
        const std::string ini = test::scratch_dir("enums") + "/" + key + ".ini";
        std::ofstream(ini) << flag << " = " << name << "\n";
        EXPECT_EQ(field(parse_args({"--config", ini}).config), value) << ini;
    }
    EXPECT_GE(seen, 1);
}

std::string usage_error(const std::vector<std::string>& args) {
    try {
        parse_args(args);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

TEST(OptionEnums, EverySpellingParsesAndPrintsBack) {
    expect_every_value_round_trips<PositionEmbeddingType>("position-embedding-type",
                                                          [](const Config& c) { return c.model.position_embedding_type; });
    expect_every_value_round_trips<Normalization>("normalization", [](const Config& c) { return c.model.normalization; });
    expect_every_value_round_trips<RecomputeGranularity>("recompute-granularity",
                                                         [](const Config& c) { return c.parallel.recompute_granularity; });
    expect_every_value_round_trips<RecomputeMethod>("recompute-method", [](const Config& c) { return c.parallel.recompute_method; });
    expect_every_value_round_trips<DistributedBackend>("distributed-backend",
                                                       [](const Config& c) { return c.parallel.distributed_backend; });
    expect_every_value_round_trips<DeviceKind>("device", [](const Config& c) { return c.parallel.device; });
    expect_every_value_round_trips<OptimizerType>("optimizer", [](const Config& c) { return c.optimizer.optimizer; });
    expect_every_value_round_trips<LrDecayStyle>("lr-decay-style", [](const Config& c) { return c.optimizer.lr_decay_style; });
    expect_every_value_round_trips<WsdDecayStyle>("lr-wsd-decay-style",
                                                  [](const Config& c) { return c.optimizer.lr_wsd_decay_style; });
    expect_every_value_round_trips<WeightDecayIncrStyle>("weight-decay-incr-style",
                                                         [](const Config& c) { return c.optimizer.weight_decay_incr_style; });
    expect_every_value_round_trips<TokenizerType>("tokenizer-type", [](const Config& c) { return c.data.tokenizer_type; });
    expect_every_value_round_trips<LogLevel>("log-level", [](const Config& c) { return c.logging.log_level; });
    expect_every_value_round_trips<PlanFormat>("plan-format", [](const Config& c) { return c.plan.plan_format; });
    expect_every_value_round_trips<PlanDevice>("plan-device", [](const Config& c) { return c.plan.plan_device; });
    expect_every_value_round_trips<TimingLogOption>("timing-log-option",
                                                    [](const Config& c) { return c.monitor.timing_log_option; });
    // Every recipe Megatron lists parses (validation refuses the unimplemented ones by name).
    expect_every_value_round_trips<Fp8Recipe>("fp8-recipe", [](const Config& c) { return c.fp8.fp8_recipe; });
    expect_every_value_round_trips<AmaxAlgo>("fp8-amax-compute-algo",
                                             [](const Config& c) { return c.fp8.fp8_amax_compute_algo; });
}

// Megatron's defaults, printed as Megatron prints them (None for a choice not made).
TEST(OptionEnums, DefaultsPrintAsBefore) {
    const Config cfg = parse_args(std::vector<std::string>{}).config;
    EXPECT_EQ(cfg.model.position_embedding_type, PositionEmbeddingType::LearnedAbsolute);
    EXPECT_EQ(cfg.model.normalization, Normalization::LayerNorm);
    EXPECT_EQ(cfg.parallel.recompute_granularity, RecomputeGranularity::None);
    EXPECT_EQ(cfg.parallel.recompute_method, RecomputeMethod::None);
    EXPECT_EQ(cfg.parallel.distributed_backend, DistributedBackend::Nccl);
    EXPECT_EQ(cfg.parallel.device, DeviceKind::Auto);
    EXPECT_EQ(cfg.data.tokenizer_type, TokenizerType::GPT2BPETokenizer);
    EXPECT_EQ(cfg.logging.log_level, LogLevel::Info);
    EXPECT_EQ(cfg.plan.plan_format, PlanFormat::Table);
    EXPECT_EQ(cfg.plan.plan_device, PlanDevice::Auto);
    EXPECT_EQ(printed(cfg, "recompute_granularity"), "None");
    EXPECT_EQ(printed(cfg, "recompute_method"), "None");
    EXPECT_EQ(printed(cfg, "position_embedding_type"), "learned_absolute");
    EXPECT_EQ(printed(cfg, "normalization"), "LayerNorm");
    EXPECT_EQ(printed(cfg, "timing_log_option"), "minmax");
    // The help shows each default in its flag spelling.
    const std::string help = usage_text();
    EXPECT_NE(help.find("--normalization arg (=LayerNorm)"), std::string::npos) << help;
    EXPECT_NE(help.find("--lr-decay-style arg (=linear)"), std::string::npos);
}

// --recompute-activations is Megatron's shorthand for selective: the mode the planner and
// the model act on, read from the one helper.
TEST(OptionEnums, RecomputeMode) {
    ParallelConfig p;
    EXPECT_EQ(p.recompute(), RecomputeGranularity::None);
    p.recompute_activations = true;
    EXPECT_EQ(p.recompute(), RecomputeGranularity::Selective);
    p.recompute_activations = false;
    p.recompute_granularity = RecomputeGranularity::Full;
    EXPECT_EQ(p.recompute(), RecomputeGranularity::Full);
}

TEST(OptionEnums, BadValueIsOneLineNamingFlagAndChoices) {
    EXPECT_EQ(usage_error({"--normalization", "rmsnorm"}), "--normalization must be one of LayerNorm, RMSNorm, got 'rmsnorm'");
    EXPECT_EQ(usage_error({"--recompute-granularity", "partial"}),
              "--recompute-granularity must be one of full, selective, got 'partial'");
    EXPECT_EQ(usage_error({"--plan-device", "v100"}),
              "--plan-device must be one of auto, a100-40gb, a100-80gb, h100-80gb, h200, cpu, got 'v100'");
    EXPECT_EQ(usage_error({"--log-level", "verbose"}),
              "--log-level must be one of trace, debug, info, warning, error, got 'verbose'");
    EXPECT_EQ(usage_error({"--timing-log-option", "mean"}), "--timing-log-option must be one of minmax, max, all, got 'mean'");
    // Spellings are exact, as Megatron's argparse choices are.
    EXPECT_EQ(usage_error({"--lr-decay-style", "Cosine"}),
              "--lr-decay-style must be one of constant, linear, cosine, inverse-square-root, WSD, got 'Cosine'");
    const std::string ini = test::scratch_dir("enums") + "/bad.ini";
    std::ofstream(ini) << "device = tpu\n";
    EXPECT_EQ(usage_error({"--config", ini}), "--device must be one of auto, cuda, cpu, got 'tpu'");
}

}  // namespace
