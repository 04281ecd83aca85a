// gpt_pretrain: parse the flags, resolve the run (train/run/run_config.hpp), print it, build the
// process groups and train. All logic lives in lib/; this main only wires it and turns
// errors into exit codes.
#include <mpi.h>

#include <cstdint>
#include <iostream>
#include <sstream>

#include <unistd.h>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"
#include "core/watchdog.hpp"
#include "core/watchdog_deadline.hpp"
#include "dist/agreed.hpp"
#include "dist/fatal.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"
#include "log/log.hpp"
#include "log/rank_file.hpp"
#include "plan/checkpoint_size.hpp"
#include "plan/planner.hpp"
#include "train/pretrain.hpp"
#include "train/checkpoint_args.hpp"
#include "train/run/run_config.hpp"

namespace {

constexpr int kUsageExit = 2;
constexpr int kErrorExit = 1;
// A wait passed --distributed-timeout-minutes (core/watchdog.hpp): a hang, not an error of
// the run itself, so slurm/run-training.sh requeues it like a crash.
constexpr int kHangExit = 3;

// The watchdog's limit and where it came from.
std::pair<double, std::string> watchdog_limit(const gpt::Config& cfg) {
    if (const auto s = gpt::env::distributed_timeout_seconds()) return {*s, "GPT_DISTRIBUTED_TIMEOUT_SECONDS"};
    return {60.0 * cfg.parallel.distributed_timeout_minutes,
            "--distributed-timeout-minutes " + std::to_string(cfg.parallel.distributed_timeout_minutes)};
}

// Bounds the calls that block inside MPI or HDF5 (MPI_Init, communicator creation,
// MPI_Finalize, H5Fcreate/H5Fopen/H5Fclose): core/watchdog_deadline.hpp. Armed before
// MPI_Init; the monitor thread may not call MPI, so the rank reports itself and exits.
void arm_deadlines(const gpt::Config& cfg) {
    const auto [seconds, limit] = watchdog_limit(cfg);
    gpt::watchdog::arm_deadlines(seconds, limit, [](const std::string& line, int code) {
        gpt::dist::end_rank_now("gpt_pretrain", line, code);
    });
}

// Bounds every wait of this rank (core/watchdog.hpp); the report goes through fail_job,
// whose agreement on the reporter is itself bounded, so a stopped peer cannot hold it up.
void install_watchdog(const gpt::Config& cfg) {
    const auto [seconds, limit] = watchdog_limit(cfg);
    gpt::watchdog::install(seconds, limit, [](const std::string& line) {
        gpt::dist::fail_job("gpt_pretrain", line, kHangExit);
    });
}

int plan_only(gpt::Config& cfg) {
    if (const std::string taken = gpt::train::take_args_from_checkpoint(cfg); !taken.empty())
        std::cout << taken << "\n";
    gpt::validate_model_and_training(cfg);
    gpt::train::resolve_vocab(cfg);
    GPT_REQUIRE(cfg.plan.world_size > 0, UsageError, "--plan-only needs --world-size");
    gpt::plan::print_plan(cfg, std::cout);
    return 0;
}

int ranks_on_this_node(const gpt::dist::MpiEnvironment& mpi) {
    MPI_Comm node;
    gpt::watchdog::BlockedScope blocked("MPI_Comm_split_type (counting the ranks of this node)");
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, mpi.rank(), MPI_INFO_NULL, &node);
    int local = 1;
    MPI_Comm_size(node, &local);
    MPI_Comm_free(&node);
    return local;
}

// The payload bytes and calls each of this rank's groups moved in the run (the counters of
// dist::Communicator), one line per rank in its --log-dir file: tests/slurm/two_node_test.sh
// adds up the groups that span nodes and sets them beside the planner's prediction.
void log_comm_bytes(gpt::dist::ProcessGroups& g) {
    char host[256] = {};
    gethostname(host, sizeof host - 1);
    std::ostringstream os;
    os << "communication bytes of this run on rank " << g.rank() << " (host " << host << "):";
    for (gpt::dist::Communicator* c : {&g.tp(), &g.dp(), &g.pp(), &g.embedding(), &g.model_parallel(), &g.world()}) {
        os << " " << c->name() << "[" << c->size() << "]";
        for (int op = 0; op < static_cast<int>(gpt::dist::CommOp::kCount); ++op)
            if (c->stats().calls[op] > 0)
                os << " " << gpt::dist::comm_op_name(static_cast<gpt::dist::CommOp>(op)) << "="
                   << c->stats().bytes[op] << "/" << c->stats().calls[op];
        os << ";";
    }
    GPT_LOG(info) << os.str();
}

int run(gpt::Config& cfg, const gpt::dist::MpiEnvironment& mpi, bool& ranks_diverged) {
    gpt::log::init({mpi.rank(), mpi.size(), std::string(gpt::to_string(cfg.logging.log_level)), cfg.logging.log_dir});
    // Before anything reads the model's flags: --use-checkpoint-args fills them in.
    if (const std::string taken = gpt::train::take_args_from_checkpoint(cfg); !taken.empty()) GPT_LOG(info) << taken;
    const gpt::train::RunConfig run = gpt::train::resolve_run(cfg, mpi.size(), ranks_on_this_node(mpi));
    const auto& p = run.cfg.parallel;
    install_watchdog(run.cfg);
    // Every output path is written once and the --save folder has room for a checkpoint,
    // before any iteration runs; the ranks agree, so one rank's failure stops them all.
    gpt::dist::run_agreed(MPI_COMM_WORLD, [&] {
        gpt::check_output_paths(run.cfg, gpt::plan::predicted_checkpoint_bytes(run.cfg), mpi.rank());
    });
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
    const int rc = gpt::train::pretrain(run, groups);
    log_comm_bytes(groups);
    return rc;
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

    arm_deadlines(args.config);
    gpt::dist::MpiEnvironment mpi(&argc, &argv);
    bool ranks_diverged = false;
    try {
        const int rc = run(args.config, mpi, ranks_diverged);
        mpi.set_exit_code(rc);
        return rc;
    } catch (const gpt::UsageError& e) {
        if (ranks_diverged) gpt::dist::fail_job("gpt_pretrain", e.what(), kUsageExit);
        // Configuration errors are found identically on every rank before any rank waits
        // on another, so each rank may exit on its own; rank 0 reports.
        gpt::log::append_to_rank_file(std::string("gpt_pretrain: error: ") + e.what() + "\n");
        if (mpi.rank() == 0) std::cerr << "gpt_pretrain: error: " << e.what() << "\n";
        mpi.set_exit_code(kUsageExit);
        return kUsageExit;
    } catch (const std::exception& e) {
        // Anything else may have hit one rank only: report with the rank and take every
        // rank down, so no rank waits for this one until the job's time limit.
        gpt::dist::fail_job("gpt_pretrain", e.what(), kErrorExit);
    }
}
