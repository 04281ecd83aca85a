// The watchdog's deadline monitor (core/watchdog_deadline.hpp): a thread blocked inside a
// call that cannot be polled is reported by the monitor thread, which ends the process.
// Every case that ends a process runs in a forked child (gtest death tests); the parent
// never arms the monitor, so no monitor thread exists when the next child forks.
#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include "core/watchdog.hpp"
#include "core/watchdog_deadline.hpp"

using namespace gpt;

namespace {

const int kPipeRanks[] = {0, 4, 8, 12};

// The stand-in for MPI_Finalize or H5Fclose that never returns (a peer that never answers).
[[noreturn]] void fake_blocking_call() {
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// The action gpt_pretrain installs, without MPI: the line to stderr, then the code.
void write_and_exit(const std::string& line, int code) {
    const std::string text = line + "\n";
    (void)!::write(STDERR_FILENO, text.data(), text.size());
    ::_exit(code);
}

watchdog::Op pipeline(const char* name) {
    watchdog::Op op;
    op.name = name;
    op.group = "pp";
    op.ranks = kPipeRanks;
    op.nranks = 4;
    op.peer = 8;
    op.bytes = 4096;
    return op;
}

}  // namespace

TEST(WatchdogDeadline, TheReportNamesTheBlockedCallTheLimitAndTheContext) {
    EXPECT_EQ(watchdog::blocked_report("MPI_Comm_split", 31.4, 30, "GPT_DISTRIBUTED_TIMEOUT_SECONDS",
                                       "; last completed: none"),
              "hang: blocked 31 s (limit 30 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS) inside MPI_Comm_split, a call "
              "the watchdog cannot poll; last completed: none");
}

TEST(WatchdogDeadlineDeathTest, ACallBlockedPastTheLimitEndsTheProcessWithExit3AndTheLine) {
    EXPECT_EXIT(
        {
            watchdog::arm_deadlines(0.2, "test limit", write_and_exit);
            watchdog::set_iteration(3);
            { watchdog::OpScope sent(pipeline("send")); }
            watchdog::OpScope save(pipeline("recv"));
            watchdog::BlockedScope blocked("H5Fclose of the checkpoint file");
            fake_blocking_call();
        },
        ::testing::ExitedWithCode(3),
        "^hang: blocked [0-9]+ s \\(limit 0.2 s, test limit\\) inside H5Fclose of the checkpoint file, a call the "
        "watchdog cannot poll during recv of 4096 bytes from rank 8 on group 'pp' \\(ranks 0,4,8,12\\) at "
        "iteration 3; last completed: send of 4096 bytes to rank 8 on group 'pp' \\(ranks 0,4,8,12\\) at "
        "iteration 3\n$");
}

TEST(WatchdogDeadlineDeathTest, ScopesThatEndInTimeAreNotReported) {
    EXPECT_EXIT(
        {
            watchdog::arm_deadlines(0.3, "test limit", write_and_exit);
            for (int i = 0; i < 3; ++i) {
                watchdog::BlockedScope quick("MPI_Comm_dup");
            }
            // Past the limit of every scope above; the monitor must have nothing to report.
            std::this_thread::sleep_for(std::chrono::milliseconds(900));
            watchdog::disarm_deadlines();
            ::_exit(0);
        },
        ::testing::ExitedWithCode(0), "^$");
}

TEST(WatchdogDeadlineDeathTest, AScopeWithItsOwnLimitReportsItsOwnLineAndCode) {
    // The finalize bound: its own short limit, exit 0, while the armed limit is long.
    EXPECT_EXIT(
        {
            watchdog::arm_deadlines(1000, "test limit", write_and_exit);
            watchdog::BlockedScope finalize("MPI_Finalize", 0.2, "MPI_Finalize did not return", 0);
            fake_blocking_call();
        },
        ::testing::ExitedWithCode(0), "^MPI_Finalize did not return\n$");
}

TEST(WatchdogDeadlineDeathTest, TwoThreadsBlockedPastTheLimitGiveOneReport) {
    // The action of the first expiry is still running (it waits before exiting) when the
    // second scope expires: no second report starts (exit 4 and "#2" if one did).
    EXPECT_EXIT(
        {
            static std::atomic<int> reports{0};
            watchdog::arm_deadlines(0.2, "test limit", [](const std::string& line, int code) {
                const int n = ++reports;
                // A second report, if any, would start while this one waits.
                std::this_thread::sleep_for(std::chrono::milliseconds(600));
                write_and_exit(line + " #" + std::to_string(n), reports.load() == 1 ? code : 4);
            });
            std::thread other([] {
                watchdog::BlockedScope blocked("MPI_Init_thread");
                fake_blocking_call();
            });
            other.detach();
            watchdog::BlockedScope blocked("MPI_Comm_split");
            fake_blocking_call();
        },
        ::testing::ExitedWithCode(3), "inside MPI_(Init_thread|Comm_split), .* #1\n$");
}
