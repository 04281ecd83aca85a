// AdamW, gradient statistics and sums (two-stage reductions finished on the host in order).
#include <cmath>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/cuda_common.cuh"
#include "core/device_wait.hpp"

namespace gpt::cuda {

namespace {


// AdamW exactly as the CPU backend (lib/backend/cpu/adam.cpp), fp32 throughout.
template <typename T>
__global__ void adam_kernel(float* p, const float* g, float* m, float* v, T* model,
                            std::int64_t n, float b1, float b2, float eps, float gs,
                            float step_size, float inv_sqrt_bc2, float decay) {
    GPT_GRID_STRIDE(i, n) {
        const float gi = g[i] * gs;
        const float mi = b1 * m[i] + (1.0f - b1) * gi;
        const float vi = b2 * v[i] + (1.0f - b2) * gi * gi;
        m[i] = mi;
        v[i] = vi;
        const float denom = sqrtf(vi) * inv_sqrt_bc2 + eps;
        const float pi = p[i] * decay - step_size * mi / denom;
        p[i] = pi;
        if (model) stf(model + i, pi);
    }
}

// Per-block partial sums in double (squares when `squares`), whether all were finite, and
// how many were zero. Squares in double: loss-scaled gradients near fp32's range would
// overflow as fp32 squares.
using Count = unsigned long long;  // atomicAdd's 64-bit unsigned type

__global__ void reduce_kernel(const float* x, std::int64_t n, bool squares, double* partial,
                              Count* zeros, int* finite) {
    __shared__ double sh[kThreads];
    __shared__ int bad;
    __shared__ Count block_zeros;
    if (threadIdx.x == 0) {
        bad = 0;
        block_zeros = 0;
    }
    __syncthreads();
    double acc = 0.0;
    bool ok = true;
    Count z = 0;
    GPT_GRID_STRIDE(i, n) {
        const double xi = x[i];
        acc += squares ? xi * xi : xi;
        ok = ok && isfinite(x[i]);
        z += x[i] == 0.0f ? 1 : 0;
    }
    if (!ok) bad = 1;  // benign race: every writer stores 1
    if (z) atomicAdd(&block_zeros, z);
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) sh[threadIdx.x] += sh[threadIdx.x + s];
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        partial[blockIdx.x] = sh[0];
        zeros[blockIdx.x] = block_zeros;
        finite[blockIdx.x] = bad ? 0 : 1;
    }
}

}  // namespace

void CudaBackend::do_adam_step(const AdamArgs& a) {
    if (a.n == 0) return;
    // Bias corrections in double on the host: beta^step for large steps loses digits in fp32.
    const double bc1 = 1.0 - std::pow(static_cast<double>(a.beta1), static_cast<double>(a.step));
    const double bc2 = 1.0 - std::pow(static_cast<double>(a.beta2), static_cast<double>(a.step));
    const float step_size = static_cast<float>(a.lr / bc1);
    const float inv_sqrt_bc2 = static_cast<float>(1.0 / std::sqrt(bc2));
    const float decay = 1.0f - a.lr * a.weight_decay;
    // An fp32 model copy that is the main parameter itself needs no second write.
    void* model = a.model_param == a.main_param ? nullptr : a.model_param;
    dispatch(model ? a.model_dtype : DType::F32, [&](auto tag) {
        using T = decltype(tag);
        adam_kernel<T><<<grid_for(a.n), kThreads, 0, cuda_stream(stream())>>>(
            a.main_param, a.grad, a.exp_avg, a.exp_avg_sq, static_cast<T*>(model), a.n, a.beta1,
            a.beta2, a.eps, a.grad_scale, step_size, inv_sqrt_bc2, decay);
    });
    GPT_CUDA_LAUNCH_CHECK("adam_step");
}

namespace {
// reduce_kernel's result: the sum (of squares when asked), finiteness, zero count.
struct Reduced {
    double total = 0.0;
    bool finite = true;
    std::int64_t zeros = 0;
};

// Runs reduce_kernel and finishes on the host in block order (deterministic). The
// partials buffer holds kReduceBlocks doubles, then as many 64-bit zero counts, then ints.
Reduced reduce(void* partials, const float* x, std::int64_t n, bool squares, const char* op,
                 cudaStream_t stream) {
    double* part = static_cast<double*>(partials);
    auto* zeros = reinterpret_cast<Count*>(part + kReduceBlocks);
    int* fin = reinterpret_cast<int*>(zeros + kReduceBlocks);
    const unsigned blocks = std::min<unsigned>(kReduceBlocks, grid_for(n));
    reduce_kernel<<<blocks, kThreads, 0, stream>>>(x, n, squares, part, zeros, fin);
    GPT_CUDA_LAUNCH_CHECK(op);
    std::vector<double> hp(blocks);
    std::vector<Count> hz(blocks);
    std::vector<int> hf(blocks);
    wait_for_cuda_stream(stream, op);  // bounded by the hang watchdog, unlike cudaMemcpy
    GPT_CUDA_CHECK(cudaMemcpy(hp.data(), part, blocks * sizeof(double), cudaMemcpyDeviceToHost), op);
    GPT_CUDA_CHECK(cudaMemcpy(hz.data(), zeros, blocks * sizeof(Count), cudaMemcpyDeviceToHost), op);
    GPT_CUDA_CHECK(cudaMemcpy(hf.data(), fin, blocks * sizeof(int), cudaMemcpyDeviceToHost), op);
    Reduced st;
    for (unsigned b = 0; b < blocks; ++b) {
        st.total += hp[b];
        st.zeros += static_cast<std::int64_t>(hz[b]);
        st.finite = st.finite && hf[b] != 0;
    }
    return st;
}
}  // namespace

GradStats CudaBackend::do_grad_stats(const float* g, std::int64_t n) {
    if (n == 0) return GradStats{};
    const Reduced r = reduce(reduce_partials_, g, n, true, "grad_stats", cuda_stream(stream()));
    return GradStats{r.total, r.finite, r.zeros};
}

double CudaBackend::do_sum(const float* x, std::int64_t n) {
    if (n == 0) return 0.0;
    return reduce(reduce_partials_, x, n, false, "sum", cuda_stream(stream())).total;
}

}  // namespace gpt::cuda
