// gpt_pretrain: parse the flags, resolve the run (train/run_config.hpp), print it, build the
// process groups and train. All logic lives in lib/; this main only wires it and turns
// errors into exit codes.
#include <mpi.h>

#include <iostream>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"
#include "log/log.hpp"
#include "plan/planner.hpp"
#include "train/pretrain.hpp"
#include "train/run_config.hpp"

namespace {

constexpr int kUsageExit = 2;
constexpr int kErrorExit = 1;

int plan_only(gpt::Config& cfg) {
    gpt::validate_model_and_training(cfg);
    gpt::train::resolve_vocab(cfg);
    GPT_REQUIRE(cfg.plan.world_size > 0, UsageError, "--plan-only needs --world-size");
    gpt::plan::print_plan(cfg, std::cout);
    return 0;
}

int ranks_on_this_node(const gpt::dist::MpiEnvironment& mpi) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.rank(), MPI_INFO_NULL, &node);
    int local = 1;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    return local;
}

int run(gpt::Config& cfg, const gpt::dist::MpiEnvironment& mpi, bool& ranks_diverged) {
    gpt::log::init({mpi.rank(), mpi.size(), cfg.logging.log_level, cfg.logging.log_dir});
    const gpt::train::RunConfig run = gpt::train::resolve_run(cfg, mpi.size(), ranks_on_this_node(mpi));
    const auto& p = run.cfg.parallel;
    GPT_LOG(info) << "using world size: " << run.world_size << ", data-parallel size: "
                  << p.data_parallel_size << ", tensor-model-parallel size: "
                  << p.tensor_model_parallel_size << ", pipeline-model-parallel size: "
                  << p.pipeline_model_parallel_size;
    if (!run.plan_summary.empty()) GPT_LOG(info) << run.plan_summary;
    GPT_LOG(info) << gpt::format_arguments(run.cfg, gpt::env::rows());
    GPT_LOG(info) << gpt::train::describe_layout(run);
    // A layout that cannot fit fails here, on every rank alike, instead of being killed
    // mid-run; a dry run reports it and still exits 0.
    try {
        // Evaluated outside the log statement: Boost.Log skips the streamed expression on
        // ranks whose records are filtered out, and every rank must run the check.
        const std::string verdict = gpt::train::check_run_memory(run);
        GPT_LOG(info) << verdict;
    } catch (const gpt::UsageError& e) {
        if (!run.cfg.logging.dry_run) throw;
        GPT_LOG(warning) << e.what();
    }
    if (run.cfg.logging.dry_run) return 0;

    // From here on ranks do different work, so an error may hit one rank only.
    ranks_diverged = true;
    gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, p.tensor_model_parallel_size,
                                    p.pipeline_model_parallel_size);
    return gpt::train::pretrain(run, groups);
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
