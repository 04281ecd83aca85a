// MPI waits go through the project's one wait (issue 20 section 8): a receive that nobody
// answers is seen by the wait hook, which can end it, instead of spinning in MPI_Wait forever.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

#include "core/wait.hpp"
#include "dist/comm_mpi.hpp"

TEST(WaitMpi, AnUnansweredReceiveIsSeenByTheHookAndEnded) {
    std::string seen;
    gpt::set_wait_hook([&](const char* what, double waited_s) {
        seen = what;
        if (waited_s >= 1.0) throw std::runtime_error("watchdog");
    });
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    {
        gpt::dist::MpiCommunicator comm(self, "self");
        float x = 0;
        EXPECT_THROW(comm.recv(&x, 1, gpt::dist::CommType::F32, 0, 77), std::runtime_error);
        float y = 1;
        comm.send(&y, 1, gpt::dist::CommType::F32, 0, 77);  // completes the pending receive
    }
    gpt::set_wait_hook({});
    EXPECT_EQ(seen, "recv");
}
