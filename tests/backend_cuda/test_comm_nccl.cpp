// NcclCommunicator on device buffers (2 ranks, one GPU each): collectives, point-to-point
// in both directions at once, byte counters. Skips unless every rank on the node has a GPU
// (NCCL refuses two ranks on one device).
#include <gtest/gtest.h>
#include <mpi.h>

#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "core/stream.hpp"
#include "dist/comm_nccl.hpp"
#include "test_env.hpp"

namespace gpt::test {
namespace {

int local_rank_and_size(int* local_size) {
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int r = 0;
    MPI_Comm_rank(node, &r);
    MPI_Comm_size(node, local_size);
    MPI_Comm_free(&node);
    return r;
}

class NcclTest : public ::testing::Test {
protected:
    void SetUp() override {
        int local_size = 1;
        const int local = local_rank_and_size(&local_size);
        const int gpus = visible_gpu_count();
        MPI_Comm_size(MPI_COMM_WORLD, &size_);
        MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
        if (gpus < local_size) {
            const std::string why = "NCCL tests need one GPU per rank: " + std::to_string(local_size) +
                                    " ranks on this node, " + std::to_string(gpus) + " GPU(s) visible";
            test::note_hardware_skip(why);
            GTEST_SKIP() << why;
        }
        be_ = make_backend("cuda", local);
        comm_ = std::make_unique<dist::NcclCommunicator>(MPI_COMM_WORLD, "world", be_->stream());
    }
    // Host floats -> device, operation, device -> host floats.
    void* upload(const std::vector<float>& v) {
        void* p = be_->alloc(v.size() * 4);
        be_->copy_to_device(p, v.data(), v.size() * 4);
        return p;
    }
    std::vector<float> download(const void* p, std::size_t n) {
        std::vector<float> v(n);
        be_->copy_to_host(v.data(), p, n * 4);
        return v;
    }

    int rank_ = 0, size_ = 1;
    std::unique_ptr<Backend> be_;
    std::unique_ptr<dist::NcclCommunicator> comm_;
};

TEST_F(NcclTest, Collectives) {
    const std::size_t n = 1000;
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(rank_ + 1) * static_cast<float>(i);
    void* buf = upload(mine);
    comm_->all_reduce(buf, n, dist::CommType::F32, dist::ReduceOp::Sum);
    const float factor = static_cast<float>(size_ * (size_ + 1) / 2);
    auto got = download(buf, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], factor * static_cast<float>(i)) << i;
    EXPECT_EQ(comm_->stats().bytes[static_cast<int>(dist::CommOp::AllReduce)], n * 4);

    void* gathered = be_->alloc(n * 4 * size_);
    void* src = upload(mine);
    comm_->all_gather(src, gathered, n, dist::CommType::F32);
    got = download(gathered, n * size_);
    for (int r = 0; r < size_; ++r)
        for (std::size_t i = 0; i < n; ++i)
            ASSERT_EQ(got[r * n + i], static_cast<float>(r + 1) * static_cast<float>(i));

    // reduce-scatter of the gathered data: chunk r summed over ranks = size * chunk r.
    void* part = be_->alloc(n * 4);
    comm_->reduce_scatter(gathered, part, n, dist::CommType::F32, dist::ReduceOp::Sum);
    got = download(part, n);
    for (std::size_t i = 0; i < n; ++i)
        ASSERT_EQ(got[i], static_cast<float>(size_ * (rank_ + 1)) * static_cast<float>(i));

    std::vector<float> b(n, static_cast<float>(rank_ + 10));
    void* bb = upload(b);
    comm_->broadcast(bb, n, dist::CommType::F32, size_ - 1);
    got = download(bb, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(size_ - 1 + 10));

    comm_->all_reduce(bb, n, dist::CommType::F32, dist::ReduceOp::Max);
    comm_->barrier();
    for (void* p : {buf, gathered, src, part, bb}) be_->free(p);
}

// Collectives return without waiting on the host; backend work issued next must still see
// their results (the compute stream waits for them on the device), and a chain of them
// must run in order: all-reduce, scale by a kernel, all-reduce again, then read.
TEST_F(NcclTest, BackendWorkAfterACollectiveSeesItsResult) {
    const std::size_t n = 4096;
    std::vector<float> mine(n);
    for (std::size_t i = 0; i < n; ++i) mine[i] = static_cast<float>(rank_ + 1) + static_cast<float>(i % 7);
    void* buf = upload(mine);
    void* out = be_->alloc(n * 4);
    for (int round = 0; round < 3; ++round) {
        comm_->all_reduce(buf, n, dist::CommType::F32, dist::ReduceOp::Sum);
        be_->scale(buf, 0.5f, n, DType::F32);
    }
    be_->copy(out, buf, n * 4);
    const auto got = download(out, n);
    double rank_sum = 0;
    for (int r = 0; r < size_; ++r) rank_sum += r + 1;
    for (std::size_t i = 0; i < n; ++i) {
        // Round 1 sums (r + 1 + i%7) over ranks; every later round multiplies by size/2.
        double want = (rank_sum + size_ * static_cast<double>(i % 7)) * 0.5;
        for (int round = 1; round < 3; ++round) want *= size_ * 0.5;
        ASSERT_EQ(got[i], static_cast<float>(want)) << i;
    }
    be_->free(buf);
    be_->free(out);
}

// The compute stream (core/stream.hpp) is one explicit object: the CUDA backend creates its
// own device queue (not the default stream by convention: a second backend gets another
// one), hands out the same handle every time, and the communicator given it reports that
// very stream and refuses a host one. BackendWorkAfterACollectiveSeesItsResult shows the
// ordering through it.
TEST_F(NcclTest, SharesTheBackendsComputeStream) {
    const Stream s = be_->stream();
    EXPECT_FALSE(s.on_host());
    EXPECT_NE(s.native(), nullptr);
    EXPECT_EQ(be_->stream().native(), s.native());
    EXPECT_EQ(comm_->compute_stream().native(), s.native());
    int local_size = 1;
    const std::unique_ptr<Backend> other = make_backend("cuda", local_rank_and_size(&local_size));
    EXPECT_FALSE(other->stream().on_host());
    EXPECT_NE(other->stream().native(), s.native());
    EXPECT_THROW(dist::NcclCommunicator(MPI_COMM_WORLD, "host", Stream{}), InternalError);
    // The host backend has no device queue: its ops run in call order on the caller's thread.
    EXPECT_TRUE(make_backend("cpu", 0)->stream().on_host());
    EXPECT_TRUE(Stream{}.on_host());
}

TEST_F(NcclTest, SendRecvBothWaysAtOnce) {
    if (size_ < 2) GTEST_SKIP() << "needs 2 ranks";
    const std::size_t n = 4096;
    const int peer = rank_ ^ 1;
    if (peer >= size_) return;
    std::vector<float> mine(n, static_cast<float>(rank_ + 1));
    void* out = upload(mine);
    void* in = be_->alloc(n * 4);
    // Both ranks post their send before their receive: must not deadlock.
    auto pending = comm_->isend(out, n, dist::CommType::F32, peer, 0);
    comm_->recv(in, n, dist::CommType::F32, peer, 0);
    pending->wait();
    auto got = download(in, n);
    for (std::size_t i = 0; i < n; ++i) ASSERT_EQ(got[i], static_cast<float>(peer + 1));
    // Blocking send paired with recv, ordered by rank.
    if (rank_ < peer) {
        comm_->send(out, n, dist::CommType::F32, peer, 1);
        comm_->recv(in, n, dist::CommType::F32, peer, 1);
    } else {
        comm_->recv(in, n, dist::CommType::F32, peer, 1);
        comm_->send(out, n, dist::CommType::F32, peer, 1);
    }
    got = download(in, n);
    EXPECT_EQ(got[n - 1], static_cast<float>(peer + 1));
    EXPECT_EQ(comm_->stats().bytes[static_cast<int>(dist::CommOp::Send)], 2 * n * 4);
    EXPECT_EQ(comm_->stats().bytes[static_cast<int>(dist::CommOp::Recv)], 2 * n * 4);
    be_->free(out);
    be_->free(in);
}

}  // namespace
}  // namespace gpt::test
