#include <gtest/gtest.h>
#include <mpi.h>

#include <cstring>
#include <map>
#include <vector>

#include "dist/process_groups.hpp"
#include "pipeline/executor.hpp"

using namespace gpt;
using namespace gpt::pipeline;

namespace {

// A toy model of L = p*v scalar-affine "layers" on vectors of n elements, so every
// activation and gradient the executor moves can be checked against a sequential run.
constexpr int n = 5;
double weight(int k) { return 1.0 + 0.1 * k; }
double bias(int k) { return 0.01 * (k + 1); }
double input(int mb, int i) { return 0.1 * (mb + 1) + 0.01 * i; }
double target(int i) { return i + 1.0; }

struct Grads {
    std::map<int, double> dw, db;
    double loss = 0.0;
};

Grads sequential(int L, int m) {
    Grads g;
    for (int mb = 0; mb < m; ++mb) {
        std::vector<std::vector<double>> acts(L + 1, std::vector<double>(n));
        for (int i = 0; i < n; ++i) acts[0][i] = input(mb, i);
        for (int k = 0; k < L; ++k)
            for (int i = 0; i < n; ++i) acts[k + 1][i] = weight(k) * acts[k][i] + bias(k);
        for (int i = 0; i < n; ++i) g.loss += acts[L][i] * target(i);
        std::vector<double> dy(n);
        for (int i = 0; i < n; ++i) dy[i] = target(i);
        for (int k = L - 1; k >= 0; --k)
            for (int i = 0; i < n; ++i) {
                g.dw[k] += dy[i] * acts[k][i];
                g.db[k] += dy[i];
                dy[i] *= weight(k);
            }
    }
    return g;
}

void run_case(int pp_size, int v, int m, bool forward_only = false) {
    int world = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    dist::ProcessGroups groups(MPI_COMM_WORLD, 1, pp_size);
    const int p = pp_size, s = groups.coords().pp, L = p * v;
    std::map<std::pair<int, int>, std::vector<double>> saved;  // (mb, chunk) -> chunk input
    Grads got;
    StageFunctions fn;
    fn.forward = [&](int mb, int chunk, const void* in, void* out) {
        const int k = chunk * p + s;
        std::vector<double> x(n);
        if (in) {
            std::memcpy(x.data(), in, n * sizeof(double));
        } else {
            ASSERT_EQ(k, 0);
            for (int i = 0; i < n; ++i) x[i] = input(mb, i);
        }
        saved[{mb, chunk}] = x;
        std::vector<double> y(n);
        for (int i = 0; i < n; ++i) y[i] = weight(k) * x[i] + bias(k);
        if (out) std::memcpy(out, y.data(), n * sizeof(double));
        else for (int i = 0; i < n; ++i) got.loss += y[i] * target(i);
    };
    fn.backward = [&](int mb, int chunk, const void* gout, void* gin) {
        const int k = chunk * p + s;
        std::vector<double> dy(n);
        if (gout) std::memcpy(dy.data(), gout, n * sizeof(double));
        else for (int i = 0; i < n; ++i) dy[i] = target(i);
        auto& x = saved.at({mb, chunk});
        for (int i = 0; i < n; ++i) {
            got.dw[k] += dy[i] * x[i];
            got.db[k] += dy[i];
            dy[i] *= weight(k);
        }
        saved.erase({mb, chunk});
        if (gin) std::memcpy(gin, dy.data(), n * sizeof(double));
    };
    PipelineShape shape{p, s, m, v, n, dist::CommType::F64};
    shape.forward_only = forward_only;
    if (forward_only)
        fn.backward = [](int, int, const void*, void*) { FAIL() << "backward in a forward-only run"; };
    run_pipeline(shape, groups.pp(), fn);
    const Grads ref = sequential(L, m);
    if (forward_only) {
        // Every (micro-batch, chunk) ran forward exactly once, and the loss is the same.
        EXPECT_EQ(saved.size(), static_cast<std::size_t>(m * v));
        if (s == p - 1) {
            EXPECT_NEAR(got.loss, ref.loss, 1e-12 * std::abs(ref.loss));
        }
        return;
    }
    EXPECT_TRUE(saved.empty());
    for (int c = 0; c < v; ++c) {
        const int k = c * p + s;
        EXPECT_NEAR(got.dw[k], ref.dw.at(k), 1e-12 * std::abs(ref.dw.at(k))) << "layer " << k;
        EXPECT_NEAR(got.db[k], ref.db.at(k), 1e-12 * std::abs(ref.db.at(k))) << "layer " << k;
    }
    if (s == p - 1) {
        EXPECT_NEAR(got.loss, ref.loss, 1e-12 * std::abs(ref.loss));
    }
}

int world_size() {
    int w = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &w);
    return w;
}

}  // namespace

TEST(PipelineExecutor, OneFOneBMatchesSequential) {
    for (int m : {1, 3, 8}) run_case(world_size(), 1, m);
}

TEST(PipelineExecutor, InterleavedMatchesSequential) {
    const int p = world_size();
    if (p == 1) GTEST_SKIP() << "the interleaved schedule needs at least 2 stages (this is the np1 run)";
    for (int v : {2, 3})
        for (int m : {p, 2 * p, 4 * p}) run_case(p, v, m);
}

TEST(PipelineExecutor, ForwardOnlyMatchesSequentialLoss) {
    const int p = world_size();
    for (int v : {1, 2})
        for (int m : {1, 3}) run_case(p, v, m, true);
}
