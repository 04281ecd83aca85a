// gpt_generate: text from a checkpoint gpt_pretrain saved (lib/generate). This main only
// parses, wires MPI and turns errors into exit codes.
#include <mpi.h>

#include <iostream>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "dist/fatal.hpp"
#include "dist/mpi_environment.hpp"
#include "generation/generate_cli.hpp"
#include "generation/generate_options.hpp"

namespace {
constexpr int kUsageExit = 2;
constexpr int kErrorExit = 1;
}  // namespace

int main(int argc, char** argv) {
    gpt::generation::GenerateOptions opts;
    try {
        opts = gpt::generation::parse_generate_args(std::vector<std::string>(argv + 1, argv + argc));
        if (opts.help) {
            std::cout << gpt::generation::generate_usage();
            return 0;
        }
    } catch (const gpt::Error& e) {
        std::cerr << "gpt_generate: error: " << e.what() << "\n";
        return kUsageExit;
    }
    gpt::dist::MpiEnvironment mpi(&argc, &argv);
    try {
        return gpt::generation::run_generate(opts, MPI_COMM_WORLD, std::cout, std::cerr);
    } catch (const gpt::UsageError& e) {
        // Usage errors (flags, the checkpoint's arguments, a missing --load) are found alike
        // on every rank: each exits, rank 0 reports.
        if (mpi.rank() == 0) std::cerr << "gpt_generate: error: " << e.what() << "\n";
        return kUsageExit;
    } catch (const std::exception& e) {
        // Anything else may have hit one rank only: take every rank down.
        gpt::dist::fail_job("gpt_generate", e.what(), kErrorExit);
    }
}
