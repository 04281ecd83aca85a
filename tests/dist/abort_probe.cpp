// A job in which one rank fails while the others wait for it in a collective: the app
// pattern (catch in main, abort_all) must end every rank promptly.
#include <cstdlib>
#include <iostream>
#include <string>

#include "core/errors.hpp"
#include "dist/mpi_environment.hpp"
#include "dist/process_groups.hpp"

int main(int argc, char** argv) {
    gpt::dist::MpiEnvironment mpi(&argc, &argv);
    const int failing = argc > 1 ? std::atoi(argv[1]) : 2;
    try {
        gpt::dist::ProcessGroups groups(MPI_COMM_WORLD, 1, 1);
        if (mpi.rank() == failing) GPT_THROW(DataError, "probe failure on rank ", failing);
        groups.world().barrier();  // the others wait here for the failed rank
        return 0;
    } catch (const std::exception& e) {
        std::cerr << "abort_probe: error on rank " << mpi.rank() << ": " << e.what() << std::endl;
        gpt::dist::abort_all(1);
    }
}
