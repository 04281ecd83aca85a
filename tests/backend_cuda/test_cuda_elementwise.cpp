// CUDA backend vs CPU backend: GELU, squared ReLU, bias, add/accumulate/scale/cast, dropout family.
#include "cuda_test_util.hpp"

#include "core/philox.hpp"

namespace gpt::test {
namespace {

class CudaElementwise : public CudaVsCpu {};

// Odd sizes: partial Philox blocks, partial thread blocks.
const std::int64_t kSizes[] = {1, 7, 1000, 65537};

TEST_F(CudaElementwise, GeluForwardBackward) {
    for (DType t : kAllTypes)
        for (std::int64_t n : kSizes)
            for (bool tanh_approx : {false, true}) {
                SCOPED_TRACE(dname(t) + " n=" + std::to_string(n) + (tanh_approx ? " tanh" : " erf"));
                Twin x(cpu(), gpu(), t, random_vec(n, 1, -6.0, 6.0));
                Twin dy(cpu(), gpu(), t, random_vec(n, 2));
                Twin y(cpu(), gpu(), t, n), dx(cpu(), gpu(), t, n);
                cpu().gelu_forward(x.c(), y.c(), n, tanh_approx, t);
                gpu().gelu_forward(x.g(), y.g(), n, tanh_approx, t);
                EXPECT_TRUE(y.close(tol_for(t)));
                cpu().gelu_backward(dy.c(), x.c(), dx.c(), n, tanh_approx, t);
                gpu().gelu_backward(dy.g(), x.g(), dx.g(), n, tanh_approx, t);
                EXPECT_TRUE(dx.close(tol_for(t)));
            }
}

// One rounding of an exact product on both (the CPU backend's test holds it to that): the
// same bits. 1000 and 65537 values: the vectorised kernels and the element-wise one.
TEST_F(CudaElementwise, SquaredReluForwardBackwardAreTheCpuBackendsBits) {
    for (DType t : kAllTypes)
        for (std::int64_t n : kSizes) {
            SCOPED_TRACE(dname(t) + " n=" + std::to_string(n));
            Twin x(cpu(), gpu(), t, random_vec(n, 1, -6.0, 6.0));
            Twin dy(cpu(), gpu(), t, random_vec(n, 2));
            Twin y(cpu(), gpu(), t, n), dx(cpu(), gpu(), t, n);
            cpu().squared_relu_forward(x.c(), y.c(), n, t);
            gpu().squared_relu_forward(x.g(), y.g(), n, t);
            EXPECT_TRUE(y.close({0, 0}));
            cpu().squared_relu_backward(dy.c(), x.c(), dx.c(), n, t);
            gpu().squared_relu_backward(dy.g(), x.g(), dx.g(), n, t);
            EXPECT_TRUE(dx.close({0, 0}));
            gpu().squared_relu_backward(dy.g(), x.g(), dy.g(), n, t);  // in place, as the MLP runs it
            EXPECT_TRUE(all_close(dy.gpu_vals(), dx.cpu_vals(), {0, 0}));
        }
}

TEST_F(CudaElementwise, BiasAddAndGrad) {
    const std::int64_t shapes[][2] = {{1, 1}, {3, 5}, {257, 96}, {1000, 1030}};
    for (DType t : kAllTypes)
        for (auto& sh : shapes) {
            const std::int64_t rows = sh[0], cols = sh[1];
            SCOPED_TRACE(dname(t) + " " + std::to_string(rows) + "x" + std::to_string(cols));
            Twin x(cpu(), gpu(), t, random_vec(rows * cols, 3));
            Twin bias(cpu(), gpu(), t, random_vec(cols, 4));
            cpu().bias_add(x.c(), bias.c(), rows, cols, t);
            gpu().bias_add(x.g(), bias.g(), rows, cols, t);
            EXPECT_TRUE(x.close(tol_for(t)));
            // Gradients accumulate (+=) into what is there.
            Twin db(cpu(), gpu(), DType::F32, random_vec(cols, 5));
            Twin dy(cpu(), gpu(), t, random_vec(rows * cols, 6));
            cpu().bias_grad(dy.c(), db.cf(), rows, cols, t);
            gpu().bias_grad(dy.g(), db.gf(), rows, cols, t);
            EXPECT_TRUE(db.close(tol_for(DType::F32, 1.0 + rows / 16.0)));
        }
}

TEST_F(CudaElementwise, AddAccumulateScale) {
    for (DType t : kAllTypes)
        for (std::int64_t n : kSizes) {
            SCOPED_TRACE(dname(t) + " n=" + std::to_string(n));
            Twin a(cpu(), gpu(), t, random_vec(n, 7)), b(cpu(), gpu(), t, random_vec(n, 8));
            Twin y(cpu(), gpu(), t, n);
            cpu().add(a.c(), b.c(), y.c(), n, t);
            gpu().add(a.g(), b.g(), y.g(), n, t);
            EXPECT_TRUE(y.close(tol_for(t)));
            cpu().add(a.c(), b.c(), a.c(), n, t);  // y aliases a
            gpu().add(a.g(), b.g(), a.g(), n, t);
            EXPECT_TRUE(a.close(tol_for(t)));
            Twin acc(cpu(), gpu(), DType::F32, random_vec(n, 9));
            cpu().accumulate_f32(b.c(), acc.cf(), n, t);
            gpu().accumulate_f32(b.g(), acc.gf(), n, t);
            EXPECT_TRUE(acc.close(tol_for(DType::F32)));
            cpu().scale(b.c(), -0.37f, n, t);
            gpu().scale(b.g(), -0.37f, n, t);
            EXPECT_TRUE(b.close(tol_for(t)));
        }
}

TEST_F(CudaElementwise, CastEveryPair) {
    // Values that round differently in fp16 and bf16, plus huge ones that overflow fp16.
    auto v = random_vec(4099, 10, -70000.0, 70000.0);
    auto small = random_vec(1000, 11, -1e-3, 1e-3);
    v.insert(v.end(), small.begin(), small.end());
    const std::int64_t n = static_cast<std::int64_t>(v.size());
    for (DType s : kAllTypes)
        for (DType d : kAllTypes) {
            SCOPED_TRACE(dname(s) + " -> " + dname(d));
            Twin src(cpu(), gpu(), s, v);
            Twin dst(cpu(), gpu(), d, n);
            cpu().cast(src.c(), s, dst.c(), d, n);
            gpu().cast(src.g(), s, dst.g(), d, n);
            // One correctly rounded step on both sides: bit-identical values (Inf included).
            const auto got = dst.gpu_vals(), want = dst.cpu_vals();
            int bad = 0;
            for (std::int64_t i = 0; i < n; ++i)
                if (!(got[i] == want[i])) ++bad;
            EXPECT_EQ(bad, 0);
        }
}

TEST_F(CudaElementwise, DropoutMaskIdenticalToCpu) {
    // Ones in fp32: the output is exactly 0 or 1/(1-p), so the mask is compared bit for bit.
    // Offsets that are multiples of 4 with n a multiple of 4 take the vectorized kernel.
    for (std::uint64_t offset : {0ull, 3ull, 7ull, 12ull, (1ull << 33) + 4, (1ull << 33) + 5}) {
        for (std::int64_t n : {std::int64_t{1}, std::int64_t{6}, std::int64_t{100000}, std::int64_t{100003}}) {
            SCOPED_TRACE("offset=" + std::to_string(offset) + " n=" + std::to_string(n));
            Twin x(cpu(), gpu(), DType::F32, std::vector<double>(n, 1.0));
            Twin y(cpu(), gpu(), DType::F32, n);
            cpu().dropout_forward(x.c(), y.c(), n, 0.3f, 1234, offset, DType::F32);
            gpu().dropout_forward(x.g(), y.g(), n, 0.3f, 1234, offset, DType::F32);
            const auto got = y.gpu_vals(), want = y.cpu_vals();
            ASSERT_EQ(got, want);
            // And both follow philox.hpp directly.
            for (std::int64_t i = 0; i < std::min<std::int64_t>(n, 64); ++i)
                EXPECT_EQ(got[i] != 0.0, dropout_keep(1234, offset + i, dropout_threshold(0.3f)));
        }
    }
}

TEST_F(CudaElementwise, DropoutTypes) {
    // 5008 elements at stream offset 12 take the vectorized kernel, 5001 at 11 do not.
    for (const auto& [n, offset] : {std::pair<std::int64_t, std::uint64_t>{5001, 11}, {5008, 12}})
        for (DType t : kAllTypes) {
            SCOPED_TRACE(dname(t) + " n=" + std::to_string(n));
            Twin x(cpu(), gpu(), t, random_vec(n, 12));
            Twin y(cpu(), gpu(), t, n);
            cpu().dropout_forward(x.c(), y.c(), n, 0.1f, 99, offset, t);
            gpu().dropout_forward(x.g(), y.g(), n, 0.1f, 99, offset, t);
            EXPECT_TRUE(y.close(tol_for(t)));
            y.poison();
            cpu().dropout_forward(x.c(), y.c(), n, 0.0f, 99, offset, t);  // p = 0 copies
            gpu().dropout_forward(x.g(), y.g(), n, 0.0f, 99, offset, t);
            EXPECT_TRUE(y.close(tol_for(t)));
        }
}

TEST_F(CudaElementwise, BiasDropoutAddForwardBackward) {
    const std::int64_t rows = 67;
    // 136 columns at a stream offset of 8 take the vectorized kernels, 130 at 9 do not.
    for (const auto& [cols, off] : {std::pair<std::int64_t, std::uint64_t>{130, 9}, {136, 8}})
        for (DType t : kAllTypes)
            for (float p : {0.0f, 0.2f})
                for (bool with_bias : {false, true}) {
                    SCOPED_TRACE(dname(t) + " cols=" + std::to_string(cols) + " p=" + std::to_string(p) +
                                 (with_bias ? " bias" : ""));
                    Twin x(cpu(), gpu(), t, random_vec(rows * cols, 13));
                    Twin bias(cpu(), gpu(), t, random_vec(cols, 14));
                    Twin res(cpu(), gpu(), t, random_vec(rows * cols, 15));
                    Twin out(cpu(), gpu(), t, rows * cols);
                    const void* bc = with_bias ? bias.c() : nullptr;
                    const void* bg = with_bias ? bias.g() : nullptr;
                    cpu().bias_dropout_add(x.c(), bc, res.c(), out.c(), rows, cols, p, 5, off, t);
                    gpu().bias_dropout_add(x.g(), bg, res.g(), out.g(), rows, cols, p, 5, off, t);
                    EXPECT_TRUE(out.close(tol_for(t)));
                    // out aliasing residual (the model's in-place residual stream)
                    cpu().bias_dropout_add(x.c(), bc, res.c(), res.c(), rows, cols, p, 5, off, t);
                    gpu().bias_dropout_add(x.g(), bg, res.g(), res.g(), rows, cols, p, 5, off, t);
                    EXPECT_TRUE(res.close(tol_for(t)));

                    Twin dout(cpu(), gpu(), t, random_vec(rows * cols, 16));
                    Twin dx(cpu(), gpu(), t, rows * cols);
                    Twin db(cpu(), gpu(), DType::F32, random_vec(cols, 17));
                    cpu().bias_dropout_add_backward(dout.c(), dx.c(), with_bias ? db.cf() : nullptr,
                                                    rows, cols, p, 5, off, t);
                    gpu().bias_dropout_add_backward(dout.g(), dx.g(), with_bias ? db.gf() : nullptr,
                                                    rows, cols, p, 5, off, t);
                    EXPECT_TRUE(dx.close(tol_for(t)));
                    EXPECT_TRUE(db.close(tol_for(DType::F32, 8.0)));
                }
}

TEST_F(CudaElementwise, RejectsBadDropoutProbability) {
    Twin x(cpu(), gpu(), DType::F32, 4);
    EXPECT_THROW(gpu().dropout_forward(x.g(), x.g(), 4, 1.0f, 0, 0, DType::F32), InternalError);
}

}  // namespace
}  // namespace gpt::test
