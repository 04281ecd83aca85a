// prepare_cache: gpt_pretrain's flags in, every dataset index cache that run reads built (or
// found and checked), one process, no MPI launch: Megatron's tools/prepare_cache.py, for a
// login node before sbatch. --world-size N resolves the layout as an N-rank job would (the
// planner may pick the global batch from it); without it, 1 rank.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "tool_main.hpp"
#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "log/log.hpp"
#include "train/run/prepare_cache.hpp"
#include "train/run/run_config.hpp"

int main(int argc, char** argv) {
    return gpt::app::run_tool("prepare_cache", [&] {
        const auto start = std::chrono::steady_clock::now();
        gpt::ParsedArgs args = gpt::parse_args(argc, argv);
        if (args.help) {
            std::cout << "usage: prepare_cache [gpt_pretrain's flags] [--world-size N]\n"
                         "Builds every dataset index cache the gpt_pretrain run with these flags reads, then exits.\n\n"
                      << gpt::usage_text();
            return 0;
        }
        gpt::Config& cfg = args.config;
        // This tool links no checkpoint reader (lib/train/run/run_config_steps.hpp).
        GPT_REQUIRE(!cfg.checkpoint.use_checkpoint_args, UsageError,
                    "prepare_cache reads no checkpoint, so --use-checkpoint-args cannot take the model's "
                    "arguments: give the model's flags (--seq-length among them) as the checkpoint has them");
        gpt::log::init({0, 1, std::string(gpt::to_string(cfg.logging.log_level)), cfg.logging.log_dir});
        const int world = cfg.plan.world_size > 0 ? cfg.plan.world_size : 1;
        const int local = cfg.plan.local_world_size > 0 ? std::min(cfg.plan.local_world_size, world) : world;
        const gpt::train::RunConfig run = gpt::train::resolve_data_run(cfg, world, local);
        const gpt::train::PreparedCaches done = gpt::train::prepare_data_caches(run);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        gpt::log::flush();
        std::printf("prepare_cache: %lld index caches ready in %.3f s (%lld built, %lld found)\n",
                    static_cast<long long>(done.files), seconds, static_cast<long long>(done.built),
                    static_cast<long long>(done.files - done.built));
        return 0;
    });
}
