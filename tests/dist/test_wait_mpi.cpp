// MPI waits go through the project's one wait (issue 20 section 8): a receive that nobody
// answers is seen by the wait hook, which can end it, instead of spinning in MPI_Wait forever.
#include <gtest/gtest.h>
#include <mpi.h>

#include <stdexcept>

#include "core/wait.hpp"
#include "core/watchdog.hpp"
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

// A thread's last completed operation outlives the communicator it ran on: the next run
// builds new groups, and their BlockedScope describes that record (a CI run crashed reading
// the freed group name). The record must name an interned group, readable for good.
TEST(WaitMpi, TheLastCompletedOperationOutlivesItsCommunicator) {
    gpt::watchdog::reset_thread();
    int world = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &world);
    // Longer than the small-string buffer: the name lives on the heap, like "data-parallel-..."
    const std::string name = "a group whose name does not fit in a std::string's own buffer";
    MPI_Comm self;
    MPI_Comm_dup(MPI_COMM_SELF, &self);
    {
        gpt::dist::MpiCommunicator comm(self, name);
        const float y = 1;
        float x = 0;
        auto sent = comm.isend(&y, 1, gpt::dist::CommType::F32, 0, 78);
        comm.recv(&x, 1, gpt::dist::CommType::F32, 0, 78);
        sent->wait();
    }
    const gpt::watchdog::Op* last = gpt::watchdog::last_completed();
    ASSERT_NE(last, nullptr);
    const gpt::watchdog::Group& interned = gpt::watchdog::intern_group(name, {world});
    EXPECT_EQ(last->group, interned.name.c_str());
    EXPECT_EQ(last->ranks, interned.ranks.data());
    const std::string w = std::to_string(world);
    // The send's wait completed last.
    EXPECT_EQ(gpt::watchdog::describe(*last), "send of 4 bytes to rank " + w + " on group '" + name + "' (ranks " + w + ")");
}
