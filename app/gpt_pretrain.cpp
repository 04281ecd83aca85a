// gpt_pretrain: parse and validate the configuration, build the process groups, and train.
// All logic lives in lib/; this main only wires it and turns errors into exit codes.
#include <mpi.h>

#include <iostream>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "data/gpt2_tokenizer.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"
#include "log/log.hpp"
#include "plan/planner.hpp"
#include "train/pretrain.hpp"

namespace {

constexpr int kUsageExit = 2;
constexpr int kErrorExit = 1;

std::string layout_summary(const gpt::Config& cfg, const gpt::dist::RankGrid& g) {
    std::ostringstream os;
    os << "> parallel layout: world " << g.world_size() << " = TP " << g.tp_size() << " x PP "
       << g.pp_size() << " x DP " << g.dp_size() << "; micro-batch " << cfg.training.micro_batch_size
       << ", global batch " << cfg.training.global_batch_size << " ("
       << cfg.training.global_batch_size / (cfg.training.micro_batch_size * g.dp_size())
       << " micro-batches per iteration)\n";
    os << "> rank layout (global rank: tp dp pp):";
    for (int r = 0; r < g.world_size(); ++r) {
        auto c = g.coords(r);
        os << (r % 8 == 0 ? "\n   " : "  ") << r << ": " << c.tp << " " << c.dp << " " << c.pp;
    }
    return os.str();
}

// Fills the unpadded vocab size from the tokenizer files, as Megatron's build_tokenizer does.
void resolve_vocab(gpt::Config& cfg) {
    if (cfg.model.vocab_size > 0) return;
    if (!cfg.data.vocab_file.empty()) {
        cfg.model.vocab_size =
            gpt::data::Gpt2Tokenizer::load(cfg.data.vocab_file, cfg.data.merge_file).vocab_size();
        return;
    }
    GPT_THROW(UsageError, "the vocab size is unknown: give --vocab-file and --merge-file (GPT-2 BPE) or --vocab-size");
}

int plan_only(gpt::Config& cfg) {
    gpt::validate_model_and_training(cfg);
    resolve_vocab(cfg);
    GPT_REQUIRE(cfg.plan.world_size > 0, UsageError, "--plan-only needs --world-size");
    gpt::plan::print_plan(cfg, std::cout);
    return 0;
}

int run(gpt::Config& cfg, const gpt::dist::MpiEnvironment& mpi, bool& ranks_diverged) {
    gpt::log::init({mpi.rank(), mpi.size(), cfg.logging.log_level, cfg.logging.log_dir});
    gpt::validate_model_and_training(cfg);
    const bool auto_layout = !cfg.parallel.tp_given && !cfg.parallel.pp_given &&
                             (cfg.training.max_global_batch_size > 0 || !cfg.parallel.mbs_given);
    std::string plan_summary;
    int local = 1;  // ranks on this node
    {
        MPI_Comm node;
        MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.rank(), MPI_INFO_NULL, &node);
        MPI_Comm_size(node, &local);
        MPI_Comm_free(&node);
    }
    if (auto_layout && cfg.training.max_global_batch_size > 0) {
        resolve_vocab(cfg);
        plan_summary = gpt::plan::choose_layout(cfg, mpi.size(), local);
    }
    if (cfg.training.micro_batch_size == 0)
        GPT_THROW(UsageError, "--micro-batch-size auto needs the planner and --max-global-batch-size");
    gpt::resolve_layout(cfg, mpi.size());
    resolve_vocab(cfg);
    const gpt::dist::RankGrid grid(mpi.size(), cfg.parallel.tensor_model_parallel_size,
                                   cfg.parallel.pipeline_model_parallel_size);
    GPT_LOG(info) << "using world size: " << mpi.size() << ", data-parallel size: " << grid.dp_size()
                  << ", tensor-model-parallel size: " << grid.tp_size()
                  << ", pipeline-model-parallel size: " << grid.pp_size();
    if (!plan_summary.empty()) GPT_LOG(info) << plan_summary;
    GPT_LOG(info) << gpt::format_arguments(cfg);
    GPT_LOG(info) << layout_summary(cfg, grid);
    // Plan for the device this run will use: the CPU when no GPU is visible. A layout that
    // cannot fit fails here, on every rank alike, instead of being killed mid-run; a dry run
    // reports it and still exits 0.
    gpt::Config planned = cfg;
    if (planned.plan.plan_device == "auto" &&
        (cfg.parallel.device == "cpu" || gpt::visible_gpu_count() == 0))
        planned.plan.plan_device = "cpu";
    try {
        // Evaluated outside the log statement: Boost.Log skips the streamed expression on
        // ranks whose records are filtered out, and every rank must run the check.
        const std::string verdict = gpt::plan::check_memory(planned, mpi.size(), local);
        GPT_LOG(info) << verdict;
    } catch (const gpt::UsageError& e) {
        if (!cfg.logging.dry_run) throw;
        GPT_LOG(warning) << e.what();
    }
    if (cfg.logging.dry_run) return 0;

    // From here on ranks do different work, so an error may hit one rank only.
    ranks_diverged = true;
    gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, cfg.parallel.tensor_model_parallel_size,
                                    cfg.parallel.pipeline_model_parallel_size);
    return gpt::train::pretrain(cfg, groups);
}

}  // namespace

int main(int argc, char** argv) {
    gpt::ParsedArgs args;
    try {
        args = gpt::parse_args(argc, argv);
        if (args.help) {
            std::cout << gpt::usage_text();
            return 0;
        }
        // The planner alone needs no MPI: it runs on a login node.
        if (args.config.plan.plan_only) return plan_only(args.config);
    } catch (const gpt::UsageError& e) {
        std::cerr << "gpt_pretrain: error: " << e.what() << "\n";
        return kUsageExit;
    } catch (const gpt::Error& e) {
        std::cerr << "gpt_pretrain: error: " << e.what() << "\n";
        return kErrorExit;
    }

    gpt::dist::MpiEnvironment mpi(&argc, &argv);
    bool ranks_diverged = false;
    try {
        return run(args.config, mpi, ranks_diverged);
    } catch (const gpt::UsageError& e) {
        if (ranks_diverged) {
            std::cerr << "gpt_pretrain: error on rank " << mpi.rank() << ": " << e.what() << std::endl;
            gpt::dist::abort_all(kUsageExit);
        }
        // Configuration errors are found identically on every rank before any rank waits
        // on another, so each rank may exit on its own; rank 0 reports.
        if (mpi.rank() == 0) std::cerr << "gpt_pretrain: error: " << e.what() << "\n";
        return kUsageExit;
    } catch (const std::exception& e) {
        // Anything else may have hit one rank only: report with the rank and take every
        // rank down, so no rank waits for this one until the job's time limit.
        std::cerr << "gpt_pretrain: error on rank " << mpi.rank() << ": " << e.what() << std::endl;
        gpt::log::flush();
        gpt::dist::abort_all(kErrorExit);
    }
}
