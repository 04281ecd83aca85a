// A job in which some ranks fail while the others wait for them in a collective: the app
// pattern (catch in main, dist::fail_job) must end every rank promptly and bring the
// reason to the user once, whole.
//   abort_probe FAILING [LOG_DIR]   FAILING: a rank number, or "all"
#include <cstdlib>
#include <string>

#include "core/errors.hpp"
#include "dist/fatal.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"
#include "log/log.hpp"
#include "log/rank_file.hpp"

int main(int argc, char** argv) {
    gpt::dist::MpiEnvironment mpi(&argc, &argv);
    const std::string failing = argc > 1 ? argv[1] : "2";
    try {
        gpt::log::init({mpi.rank(), mpi.size(), "info", argc > 2 ? argv[2] : ""});
        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        if (failing == "all" || std::atoi(failing.c_str()) == mpi.rank()) {
            // Long enough that a message written in pieces would be cut.
            GPT_THROW(DataError, "probe failure on rank ", mpi.rank(), ": ",
                      std::string(3000, 'x'), " END-OF-REASON");
        }
        groups.world().barrier();  // the others wait here for the failed ranks
        return 0;
    } catch (const std::exception& e) {
        gpt::dist::fail_job("abort_probe", e.what(), 1);
    }
}
