// Integrity of everything a checkpoint holds, and the saver around it:
//  - a dataset that the load does not read (fp16 weights of a distributed-optimizer run,
//    which loads the fp32 main params) is still verified, by 1/N of it per rank;
//  - tampered root attributes are refused (attributes_checksum);
//  - the tracker is parsed strictly; --load-fallback rewrites a bad one;
//  - the save-folder lock refuses a second writer, naming it, and a dead holder's lock
//    does not block;
//  - asynchronous saves publish only when every rank's part is on disk, and a failed
//    background write is reported on every rank with the previous checkpoint named.
// (check_checkpoint_args, which compares the saved run with the run's: tests/config.)
#include <gtest/gtest.h>
#include <hdf5.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <thread>

#include "ckpt/checkpoint.hpp"
#include "ckpt/save_lock.hpp"
#include "ckpt_test_util.hpp"
#include "core/errors.hpp"
#include "h5_damage.hpp"
#include "test_env.hpp"

namespace gpt::ckpt {
namespace {

using namespace gpt::ckpt::test;
namespace fs = std::filesystem;

const Shape kW{48, 16};  // the "weights": fp16, rows split over ranks (TP-like)
const Shape kM{48, 16};  // fp32 "main params": flat shards (distributed optimizer)

struct Buffers {
    std::vector<unsigned char> w, m;
};

Selection w_sel() {
    auto [a, b] = split_range(kW[0], comm_rank(MPI_COMM_WORLD), comm_size(MPI_COMM_WORLD));
    return Selection::box({a, 0}, {b - a, kW[1]});
}
Selection m_sel() {
    auto [a, b] = split_range(kM[0] * kM[1], comm_rank(MPI_COMM_WORLD), comm_size(MPI_COMM_WORLD));
    return Selection::flat(a, b - a);
}

std::shared_ptr<Buffers> fill(std::int64_t it) {
    auto b = std::make_shared<Buffers>();
    b->w = to_bytes(packed_values(0, kW, w_sel(), it), DType::F16);
    b->m = to_bytes(packed_values(1, kM, m_sel(), it), DType::F32);
    return b;
}

void write_all(CheckpointWriter& w, const Buffers& b, std::int64_t it) {
    w.write({{"model/w", kW, DType::F16, w_sel(), b.w.data()}, {"optimizer/main_param/model/w", kM, DType::F32,
                                                                m_sel(), b.m.data()}});
    w.set_attribute("iteration", it);
    w.set_attribute("lr_scheduler_num_steps", it * 8);
    w.set_attribute("loss_scale", 65536.0);
}

void save(const std::string& dir, std::int64_t it) {
    auto b = fill(it);
    CheckpointWriter w(MPI_COMM_WORLD, dir, it);
    write_all(w, *b, it);
    w.commit();
}

// The distributed-optimizer load: only the fp32 shard is read.
void read_main_only(CheckpointReader& r) {
    std::vector<float> m(m_sel().num_elements(kM));
    r.read({{"optimizer/main_param/model/w", kM, DType::F32, m_sel(), m.data()}});
    EXPECT_EQ(m, packed_values(1, kM, m_sel(), r.iteration()));
}

template <typename Fn>
void on_rank0(Fn&& fn) {
    MPI_Barrier(MPI_COMM_WORLD);
    if (comm_rank(MPI_COMM_WORLD) == 0) fn();
    MPI_Barrier(MPI_COMM_WORLD);
}

void flip_byte(const std::string& file, const char* dataset, std::int64_t byte) {
    // The lowest mantissa bit of an fp16 value: a "plausible" weight.
    gpt::test::flip_dataset_bits(file, dataset, byte, 0x01);
}

template <typename E, typename Fn>
std::string expect_throw(Fn&& fn, std::initializer_list<std::string> needles) {
    try {
        fn();
    } catch (const E& e) {
        const std::string msg = e.what();
        for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
        return msg;
    }
    ADD_FAILURE() << "no exception";
    return {};
}

TEST(CkptIntegrity, UnreadHalfPrecisionWeightsAreVerified) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_unread");
    save(dir, 10);
    save(dir, 20);
    LoadRequest req{dir};
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, read_main_only).iteration, 20);  // intact: loads
    on_rank0([&] { flip_byte(checkpoint_file(dir, 20).string(), "model/w", 301); });
    expect_throw<DataError>([&] { load_checkpoint(MPI_COMM_WORLD, req, read_main_only); },
                            {"checksum mismatch", "'model/w'", "iter_0000020"});
    req.fallback = true;
    const LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, read_main_only);
    EXPECT_EQ(res.iteration, 10);
    // Each rank verifies its own share of an unread dataset: damage in the last rank's share
    // (its last byte) is found as well as in the first's.
    req.fallback = false;
    req.step = 20;  // the fallback made the tracker name 10
    on_rank0([&] {
        flip_byte(checkpoint_file(dir, 20).string(), "model/w", 301);  // undone
        flip_byte(checkpoint_file(dir, 20).string(), "model/w", kW[0] * kW[1] * 2 - 1);
    });
    expect_throw<DataError>([&] { load_checkpoint(MPI_COMM_WORLD, req, read_main_only); },
                            {"checksum mismatch", "'model/w'", "iter_0000020"});
}

TEST(CkptIntegrity, TamperedAttributesAreRefused) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_attrs");
    save(dir, 10);
    const std::string file = checkpoint_file(dir, 10).string();
    {
        CheckpointReader r(MPI_COMM_WORLD, file);
        EXPECT_EQ(r.attribute_int("lr_scheduler_num_steps"), 80);
    }
    // The scheduler jumped to its end, as a hand edit or a bit flip would do.
    on_rank0([&] {
        hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen(f, "lr_scheduler_num_steps", H5P_DEFAULT);
        const std::int64_t v = 800000;
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(f);
    });
    expect_throw<DataError>([&] { CheckpointReader r(MPI_COMM_WORLD, file); }, {file, "attributes", "attributes_checksum"});
    // The iteration that /_checkpoint records is covered too.
    save(dir, 20);
    const std::string file20 = checkpoint_file(dir, 20).string();
    on_rank0([&] {
        hid_t f = H5Fopen(file20.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        hid_t a = H5Aopen_by_name(f, "_checkpoint", "iteration", H5P_DEFAULT, H5P_DEFAULT);
        const std::int64_t v = 21;
        H5Awrite(a, H5T_NATIVE_INT64, &v);
        H5Aclose(a);
        H5Fclose(f);
    });
    expect_throw<DataError>([&] { CheckpointReader r(MPI_COMM_WORLD, file20); }, {file20, "attributes_checksum"});
}

TEST(CkptIntegrity, TrackerIsParsedStrictlyAndFallbackRepairsIt) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_tracker");
    save(dir, 10);
    save(dir, 20);
    const fs::path tracker = fs::path(dir) / kTrackerFile;
    for (const std::string& bad : {std::string(8, '\0'), std::string("20abc\n"), std::string("\n"), std::string("-5"),
                                  std::string(" 2 0")}) {
        on_rank0([&] { std::ofstream(tracker, std::ios::binary | std::ios::trunc) << bad; });
        expect_throw<DataError>([&] { read_tracker(dir); }, {tracker.string(), "not an iteration number"});
        LoadRequest req{dir};
        expect_throw<DataError>([&] { load_checkpoint(MPI_COMM_WORLD, req, read_main_only); }, {"tracker"});
        req.fallback = true;
        const LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, read_main_only);
        EXPECT_EQ(res.iteration, 20);
        EXPECT_EQ(read_tracker(dir), 20);  // repaired: the next save and requeue see 20
    }
    for (const std::string good : {"20", "20\n", "20 \r\n"}) {
        on_rank0([&] { std::ofstream(tracker, std::ios::binary | std::ios::trunc) << good; });
        EXPECT_EQ(read_tracker(dir), 20) << good;
    }
    // NUL bytes are named visibly in the message.
    on_rank0([&] { std::ofstream(tracker, std::ios::binary | std::ios::trunc) << std::string(3, '\0'); });
    expect_throw<DataError>([&] { read_tracker(dir); }, {"\\x00\\x00\\x00"});
    // A save after a damaged tracker succeeds and replaces it.
    auto b = fill(30);
    SaverOptions so;
    CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
    write_all(saver.begin(30), *b, 30);
    ASSERT_TRUE(saver.commit(b).has_value());
    EXPECT_EQ(read_tracker(dir), 30);
}

TEST(CkptIntegrity, SaveFolderLockRefusesASecondWriterNamingIt) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_lock");  // collective
    if (comm_rank(MPI_COMM_WORLD) != 0) return;  // process-level: one rank is enough
    {
        SaveFolderLock first(dir);
        const std::string msg = expect_throw<IoError>([&] { SaveFolderLock second(dir); },
                                                      {dir, "in use by another job", "pid " + std::to_string(::getpid())});
        EXPECT_NE(msg.find(first.holder_text()), std::string::npos) << msg;
    }
    SaveFolderLock again(dir);  // released by the first's end
}

TEST(CkptIntegrity, LockOfAKilledJobDoesNotBlockItsRequeue) {
    // fork() beside MPI's progress threads can deadlock the child (np2 did); the 1-rank run
    // covers it, and tests/ckpt/trainer_ckpt_test.sh kills a real gpt_pretrain holder.
    if (comm_size(MPI_COMM_WORLD) != 1) GTEST_SKIP() << "fork() test runs in the 1-rank job";
    const std::string dir = gpt::test::scratch_dir("ckpt_int_lock_dead");
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    const pid_t child = ::fork();
    ASSERT_GE(child, 0);
    if (child == 0) {  // the "other job": takes the lock and waits to be killed
        ::close(ready[0]);
        try {
            SaveFolderLock held(dir);
            char c = 1;
            (void)!::write(ready[1], &c, 1);
            ::pause();
        } catch (...) {
        }
        ::_exit(3);
    }
    ::close(ready[1]);
    char c = 0;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    ::close(ready[0]);
    expect_throw<IoError>([&] { SaveFolderLock second(dir); }, {"pid " + std::to_string(child)});
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    // Its lock file is still there, naming the dead job, but the lock went with it.
    EXPECT_TRUE(fs::exists(fs::path(dir) / kLockFile));
    SaveFolderLock requeue(dir);
    EXPECT_EQ(requeue.holder_text().find("pid " + std::to_string(child)), std::string::npos);
}

TEST(CkptIntegrity, AsyncSavePublishesOnlyWhenEveryRankIsDone) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_async");
    SaverOptions so;
    so.async = true;
    so.keep_last = 2;
    CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
    for (std::int64_t it : {10, 20, 30}) {
        auto b = fill(it);
        write_all(saver.begin(it), *b, it);
        // The host copy's size per rank, as the trainer passes it: reported max and sum.
        const std::uint64_t copy_bytes = 1000 * static_cast<std::uint64_t>(comm_rank(MPI_COMM_WORLD) + 1);
        EXPECT_FALSE(saver.commit(b, copy_bytes).has_value());  // the helper thread writes
        b.reset();                                  // the saver keeps the buffers alive
        EXPECT_TRUE(saver.in_flight());
        // Not published before the background part finished and poll()/wait() ran.
        EXPECT_NE(read_tracker_if_valid(dir), std::optional<std::int64_t>(it));
        std::optional<SaveResult> done;
        for (int i = 0; i < 10000 && !done; ++i) {
            done = saver.poll();
            if (!done) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        ASSERT_TRUE(done.has_value());
        EXPECT_EQ(done->iteration, it);
        const auto p = static_cast<std::uint64_t>(comm_size(MPI_COMM_WORLD));
        EXPECT_EQ(done->host_copy_bytes_max, 1000 * p);
        EXPECT_EQ(done->host_copy_bytes_total, 1000 * p * (p + 1) / 2);
        EXPECT_EQ(read_tracker(dir), it);
        EXPECT_FALSE(saver.in_flight());
    }
    EXPECT_EQ(list_iterations(dir), (std::vector<std::int64_t>{20, 30}));
    LoadRequest req{dir};
    LoadResult res = load_checkpoint(MPI_COMM_WORLD, req, [](CheckpointReader& r) {
        read_main_only(r);
        std::vector<unsigned char> w(w_sel().num_elements(kW) * 2);
        r.read({{"model/w", kW, DType::F16, w_sel(), w.data()}});
        EXPECT_EQ(from_bytes(w, DType::F16), packed_values(0, kW, w_sel(), 30));
        EXPECT_EQ(r.attribute_int("lr_scheduler_num_steps"), 240);
    });
    EXPECT_EQ(res.iteration, 30);
    // wait() publishes at once; the next begin() waits for the previous save itself.
    auto b = fill(40);
    write_all(saver.begin(40), *b, 40);
    saver.commit(b);
    auto b2 = fill(50);
    write_all(saver.begin(50), *b2, 50);  // finishes 40 first
    EXPECT_EQ(read_tracker(dir), 40);
    saver.commit(b2);
    ASSERT_TRUE(saver.wait().has_value());
    EXPECT_EQ(read_tracker(dir), 50);
}

// The trainer's host copy on a GPU is filled by device-to-host copies that land after
// commit() returned: the background writer must wait for them (commit's `ready`) before it
// reads the buffers. Here `ready` is where the bytes land: the buffers hold zeros until it
// runs, so a writer reading before it (or never calling it) stores zeros.
TEST(CkptIntegrity, AsyncSaveWaitsForTheHostCopyToLand) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_async_ready");
    SaverOptions so;
    so.async = true;
    CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
    const std::int64_t it = 10;
    auto b = fill(it);
    auto landing = std::make_shared<Buffers>(*b);  // what the "copies" bring
    std::fill(b->w.begin(), b->w.end(), 0);
    std::fill(b->m.begin(), b->m.end(), 0);
    write_all(saver.begin(it), *b, it);
    auto called = std::make_shared<std::atomic<int>>(0);
    saver.commit(b, 0, [b, landing, called] {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // copies still in flight
        b->w = landing->w;  // same sizes: the buffers stay where write() saw them
        b->m = landing->m;
        ++*called;
    });
    ASSERT_TRUE(saver.wait().has_value());
    EXPECT_EQ(called->load(), 1) << "the background writer never waited for the host copy";
    LoadRequest req{dir};
    load_checkpoint(MPI_COMM_WORLD, req, [](CheckpointReader& r) {
        read_main_only(r);
        std::vector<unsigned char> w(w_sel().num_elements(kW) * 2);
        r.read({{"model/w", kW, DType::F16, w_sel(), w.data()}});
        EXPECT_EQ(from_bytes(w, DType::F16), packed_values(0, kW, w_sel(), 10));
    });
    // A synchronous save has nothing in flight to wait for: a ready function is a bug.
    CheckpointSaver sync(MPI_COMM_WORLD, gpt::test::scratch_dir("ckpt_int_sync_ready"), SaverOptions{});
    write_all(sync.begin(20), *landing, 20);
    EXPECT_THROW(sync.commit(landing, 0, [] {}), InternalError);
}

TEST(CkptIntegrity, AsyncSaveRefusesCollectiveIo) {
    // The background writer has no MPI on its thread: collective I/O is refused up front on
    // every rank, with a message naming both, and nothing is created.
    const std::string dir = gpt::test::scratch_dir("ckpt_int_async_coll");
    SaverOptions so;
    so.async = true;
    so.writer.io_mode = IoMode::Collective;
    CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
    try {
        saver.begin(10);
        ADD_FAILURE() << "collective I/O with an asynchronous save was accepted";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--async-save"), std::string::npos) << e.what();
        EXPECT_NE(std::string(e.what()).find("collective"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(saver.in_flight());
    EXPECT_TRUE(list_iterations(dir).empty());
}

// Makes writes of this process fail beyond `bytes` in a folder: a tiny tmpfs mounted over
// it when we are root (ENOSPC, as on a full disk), else a file-size limit (EFBIG).
class SmallDisk {
public:
    explicit SmallDisk(const std::string& dir) : dir_(dir) {}
    // Collective; returns the reason text the failure must carry.
    std::string fill_up_after(std::size_t bytes) {
        int ok = 1;
        if (comm_rank(MPI_COMM_WORLD) == 0 && ::geteuid() == 0) {
            const std::string opts = "size=" + std::to_string(bytes);
            ok = ::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) == 0 ? 1 : 0;
        }
        int all = 0;
        MPI_Allreduce(&ok, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        mounted_ = ::geteuid() == 0 && all == 1;
        int root = ::geteuid() == 0 ? 1 : 0, all_root = 0;
        MPI_Allreduce(&root, &all_root, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (all_root && all) return "No space left on device";
        mounted_ = false;
        ::signal(SIGXFSZ, SIG_IGN);
        limited_ = true;
        return "File too large";
    }
    void limit_now(std::size_t bytes) {
        if (!limited_) return;
        getrlimit(RLIMIT_FSIZE, &saved_);
        struct rlimit lim = saved_;
        lim.rlim_cur = bytes;
        setrlimit(RLIMIT_FSIZE, &lim);
    }
    void unlimit() {
        if (limited_) setrlimit(RLIMIT_FSIZE, &saved_);
        limited_ = false;
    }
    ~SmallDisk() {
        unlimit();
        MPI_Barrier(MPI_COMM_WORLD);
        if (mounted_ && comm_rank(MPI_COMM_WORLD) == 0) ::umount(dir_.c_str());
        MPI_Barrier(MPI_COMM_WORLD);
    }

private:
    std::string dir_;
    bool mounted_ = false, limited_ = false;
    struct rlimit saved_ {};
};

TEST(CkptIntegrity, FailedBackgroundWriteStopsTrainingOnEveryRankNamingThePreviousCheckpoint) {
    const std::string dir = gpt::test::scratch_dir("ckpt_int_async_fail");
    SmallDisk disk(dir);
    // Room for the small first checkpoint, not for the big second one.
    const std::string why = disk.fill_up_after(std::size_t(3) << 20);
    SaverOptions so;
    so.async = true;
    std::string msg;
    {
        CheckpointSaver saver(MPI_COMM_WORLD, dir, so);
        auto b = fill(10);
        write_all(saver.begin(10), *b, 10);
        saver.commit(b);
        ASSERT_TRUE(saver.wait().has_value());
        EXPECT_EQ(read_tracker(dir), 10);
        // 8 MiB of fp32 per save: more than the disk has left.
        const Shape big{1024, 2048};
        auto [a, e] = split_range(big[0] * big[1], comm_rank(MPI_COMM_WORLD), comm_size(MPI_COMM_WORLD));
        auto data = std::make_shared<std::vector<float>>(static_cast<std::size_t>(e - a), 1.5f);
        CheckpointWriter& w = saver.begin(20);
        w.write({{"big", big, DType::F32, Selection::flat(a, e - a), data->data()}});
        w.set_attribute("iteration", std::int64_t{20});
        disk.limit_now(std::size_t(3) << 20);
        saver.commit(data);
        // Training goes on; the failure comes out of poll() on every rank at the same call.
        msg = expect_throw<IoError>(
            [&] {
                for (int i = 0; i < 100000; ++i) {
                    saver.poll();
                    std::this_thread::sleep_for(std::chrono::milliseconds(1));
                }
            },
            {"iteration 20", why, "Training stops", "latest complete checkpoint is iteration 10",
             "iter_0000010"});
        disk.unlimit();
        EXPECT_FALSE(saver.in_flight());
    }
    EXPECT_EQ(read_tracker(dir), 10);  // untouched, and its checkpoint intact
    LoadRequest req{dir};
    EXPECT_EQ(load_checkpoint(MPI_COMM_WORLD, req, read_main_only).iteration, 10);
}

}  // namespace
}  // namespace gpt::ckpt
