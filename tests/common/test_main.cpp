#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdio>

#include "test_env.hpp"

namespace {
// Non-zero ranks stay quiet except for their failures, which name the rank: a test that
// fails on rank 3 only must still say where and why.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
public:
    explicit RankFailurePrinter(int rank) : rank_(rank) {}
    void OnTestPartResult(const ::testing::TestPartResult& r) override {
        if (!r.failed()) return;
        std::fprintf(stderr, "[rank %d] %s:%d: Failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                     r.line_number(), r.summary());
    }
    void OnTestEnd(const ::testing::TestInfo& info) override {
        if (info.result()->Failed())
            std::fprintf(stderr, "[rank %d] [  FAILED  ] %s.%s\n", rank_, info.test_suite_name(), info.name());
    }

private:
    int rank_;
};
}  // namespace

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    ::testing::InitGoogleTest(&argc, argv);
    if (rank != 0) {
        // Every rank runs every test; one copy of the report is enough.
        auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
        delete listeners.Release(listeners.default_result_printer());
        listeners.Append(new RankFailurePrinter(rank));
    }
    int local_failed = RUN_ALL_TESTS() != 0 ? 1 : 0;
    int any_failed = 0;
    MPI_Allreduce(&local_failed, &any_failed, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && any_failed && !local_failed)
        std::fprintf(stderr, "[  FAILED  ] a test failed on another rank (see its output above)\n");
    // Tests that skipped for want of hardware: CTest reports the run as skipped (never when
    // something failed, which must stay a failure).
    int skips = gpt::test::hardware_skips(), any_skips = 0;
    MPI_Allreduce(&skips, &any_skips, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && !any_failed && any_skips > 0)
        std::printf("%s %d test(s) skipped: this machine lacks the hardware they need\n",
                    gpt::test::kHardwareSkipMarker, any_skips);
    MPI_Finalize();
    return any_failed;
}
