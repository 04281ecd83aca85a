// The hang watchdog's logic (core/watchdog.hpp), driven through the wait hook directly so
// that no test depends on how long anything takes: the per-thread operation record, the
// report line, the limit, and that the report cannot recurse into itself.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>
#include <thread>

#include "core/wait.hpp"
#include "core/watchdog.hpp"

using namespace gpt;

namespace {

struct Hang : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Each test starts with no hook, no record and no training position.
struct Fresh {
    Fresh() { reset(); }
    ~Fresh() { reset(); }
    static void reset() {
        watchdog::uninstall();
        watchdog::reset_thread();
        watchdog::set_iteration(-1);
        watchdog::set_micro_batch(-1);
    }
};

const int kPipeRanks[] = {0, 4, 8, 12};

watchdog::Op pipeline_recv() {
    watchdog::Op op;
    op.name = "recv";
    op.group = "pp";
    op.ranks = kPipeRanks;
    op.nranks = 4;
    op.peer = 8;
    op.bytes = 4096;
    return op;
}

}  // namespace

TEST(Watchdog, DescribesTheOperationWithPeersBytesIterationAndMicroBatch) {
    Fresh f;
    watchdog::set_iteration(7);
    watchdog::set_micro_batch(2);
    watchdog::OpScope scope(pipeline_recv());
    ASSERT_NE(watchdog::current(), nullptr);
    EXPECT_EQ(watchdog::describe(*watchdog::current()),
              "recv of 4096 bytes from rank 8 on group 'pp' (ranks 0,4,8,12) at iteration 7, micro-batch 2");
}

TEST(Watchdog, ASendNamesItsPeerAsTheDestination) {
    Fresh f;
    watchdog::Op op = pipeline_recv();
    op.name = "send";
    EXPECT_EQ(watchdog::describe(op), "send of 4096 bytes to rank 8 on group 'pp' (ranks 0,4,8,12)");
}

// Groups are interned: rebuilding the same group returns the same record (memory stays
// bounded over many rebuilds), a different name or membership a different one, and the
// record does not depend on the strings it was built from.
TEST(Watchdog, GroupsAreInternedByNameAndMembers) {
    const watchdog::Group* first = nullptr;
    {
        const std::string name = "tensor-and-data-parallel group of the interning test";
        first = &watchdog::intern_group(name, {0, 4, 8});
    }
    EXPECT_EQ(first, &watchdog::intern_group("tensor-and-data-parallel group of the interning test", {0, 4, 8}));
    EXPECT_NE(first, &watchdog::intern_group("tensor-and-data-parallel group of the interning test", {0, 4}));
    EXPECT_NE(first, &watchdog::intern_group("pp", {0, 4, 8}));
    const watchdog::Op op = watchdog::on_group("all-reduce", *first);
    EXPECT_EQ(watchdog::describe(op),
              "all-reduce on group 'tensor-and-data-parallel group of the interning test' (ranks 0,4,8)");
}

TEST(Watchdog, ACompletedScopeBecomesTheLastCompletedAndNestedScopesRestore) {
    Fresh f;
    EXPECT_EQ(watchdog::current(), nullptr);
    EXPECT_EQ(watchdog::last_completed(), nullptr);
    watchdog::Op outer;
    outer.name = "checkpoint all-reduce";
    outer.nranks = 16;
    {
        watchdog::OpScope a(outer);
        {
            watchdog::OpScope b(pipeline_recv());
            EXPECT_STREQ(watchdog::current()->name, "recv");
        }
        EXPECT_STREQ(watchdog::current()->name, "checkpoint all-reduce");
        EXPECT_STREQ(watchdog::last_completed()->name, "recv");
    }
    EXPECT_EQ(watchdog::current(), nullptr);
    EXPECT_EQ(watchdog::describe(*watchdog::last_completed()), "checkpoint all-reduce over (16 ranks)");
}

TEST(Watchdog, AScopeLeftByAnExceptionDidNotComplete) {
    Fresh f;
    {
        watchdog::Op done;
        done.name = "barrier";
        watchdog::OpScope s(done);
    }
    try {
        watchdog::OpScope s(pipeline_recv());
        throw Hang("failed");
    } catch (const Hang&) {
    }
    EXPECT_STREQ(watchdog::last_completed()->name, "barrier");
    EXPECT_EQ(watchdog::current(), nullptr);
}

TEST(Watchdog, TheRecordIsPerThread) {
    Fresh f;
    watchdog::OpScope scope(pipeline_recv());
    const watchdog::Op* other = reinterpret_cast<const watchdog::Op*>(1);
    std::thread([&] { other = watchdog::current(); }).join();
    EXPECT_EQ(other, nullptr);
    EXPECT_NE(watchdog::current(), nullptr);
}

TEST(Watchdog, AWaitShorterThanTheLimitIsLeftAlone) {
    Fresh f;
    int fired = 0;
    watchdog::install(30.0, "test limit", [&](const std::string&) { ++fired; });
    call_wait_hook("a slow iteration's all-reduce", 1.0);
    call_wait_hook("a slow iteration's all-reduce", 29.0);
    EXPECT_EQ(fired, 0);
}

TEST(Watchdog, AWaitAtTheLimitIsReportedWithWhatItWaitedForAndTheLastCompleted) {
    Fresh f;
    std::string line;
    watchdog::install(30.0, "--distributed-timeout-minutes 1", [&](const std::string& l) {
        line = l;
        throw Hang(l);
    });
    watchdog::set_iteration(3);
    {
        watchdog::Op sent = pipeline_recv();
        sent.name = "send";
        watchdog::OpScope s(sent);
    }
    watchdog::set_micro_batch(1);
    watchdog::OpScope scope(pipeline_recv());
    EXPECT_THROW(call_wait_hook("recv", 30.0), Hang);
    EXPECT_EQ(line,
              "hang: waited 30 s (limit 30 s, --distributed-timeout-minutes 1) for recv of 4096 bytes "
              "from rank 8 on group 'pp' (ranks 0,4,8,12) at iteration 3, micro-batch 1; last completed: "
              "send of 4096 bytes to rank 8 on group 'pp' (ranks 0,4,8,12) at iteration 3");
}

TEST(Watchdog, AWaitWithoutARecordIsNamedByItsLabel) {
    Fresh f;
    std::string line;
    watchdog::install(2.0, "GPT_DISTRIBUTED_TIMEOUT_SECONDS", [&](const std::string& l) { line = l; });
    call_wait_hook("the index build's broadcast", 2.5);
    EXPECT_EQ(line, "hang: waited 2 s (limit 2 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS) for the index build's "
                    "broadcast; last completed: none");
}

TEST(Watchdog, TheReportsOwnWaitsAreNotWatched) {
    Fresh f;
    int fired = 0;
    // fail_job's claim waits through poll_until too: a report must not start a second one.
    watchdog::install(1.0, "test limit", [&](const std::string&) {
        ++fired;
        call_wait_hook("the fatal-error claim", 5.0);
    });
    call_wait_hook("recv", 1.0);
    EXPECT_EQ(fired, 1);
    call_wait_hook("recv", 2.0);  // the next long wait is watched again
    EXPECT_EQ(fired, 2);
}

TEST(Watchdog, APollingWaitPastTheLimitEnds) {
    Fresh f;
    watchdog::install(1.0, "test limit", [](const std::string& l) { throw Hang(l); });
    // A wait that never completes: only the watchdog ends it (about a second in).
    EXPECT_THROW(poll_until([] { return false; }, "a stopped peer"), Hang);
    watchdog::uninstall();
    // Without the hook the same wait only ends at its own deadline.
    EXPECT_FALSE(poll_until([] { return false; }, "a stopped peer",
                            WaitClock::now() + std::chrono::milliseconds(1100)));
}

TEST(Watchdog, ALabelNamesAWaitOnlyWhenNothingMoreIsRecorded) {
    Fresh f;
    {
        watchdog::LabelScope label("the index build's broadcast");
        EXPECT_STREQ(watchdog::current()->name, "the index build's broadcast");
    }
    watchdog::OpScope scope(pipeline_recv());
    watchdog::LabelScope label("recv");
    EXPECT_EQ(watchdog::describe(*watchdog::current()), "recv of 4096 bytes from rank 8 on group 'pp' (ranks 0,4,8,12)");
}
