// Helpers for the CUDA-vs-CPU backend tests: both backends, buffers that hold the same
// values in each backend's memory, and read-back of device results for all_close.
// Every test skips (with a message) when no GPU is visible.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

#include "backend_test_util.hpp"
#include "core/device_info.hpp"
#include "core/errors.hpp"
#include "test_env.hpp"

namespace gpt::test {

// Decodes n elements of type t from raw host bytes.
inline std::vector<double> decode(DType t, const std::vector<unsigned char>& raw, std::size_t n) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        switch (t) {
            case DType::F32: {
                float f;
                std::memcpy(&f, raw.data() + 4 * i, 4);
                v[i] = f;
                break;
            }
            case DType::F16: {
                std::uint16_t h;
                std::memcpy(&h, raw.data() + 2 * i, 2);
                v[i] = half_bits_to_float(h);
                break;
            }
            case DType::BF16: {
                std::uint16_t h;
                std::memcpy(&h, raw.data() + 2 * i, 2);
                v[i] = bf16_bits_to_float(h);
                break;
            }
        }
    }
    return v;
}

// Fixture: cpu() is the reference, gpu() the backend under test.
class CudaVsCpu : public ::testing::Test {
protected:
    void SetUp() override {
        if (visible_gpu_count() == 0) {
            note_hardware_skip("no GPU visible");
            GTEST_SKIP() << "no GPU visible: CUDA backend tests need one";
        }
        cpu_ = make_backend("cpu", 0);
        gpu_ = make_backend("cuda", 0);
    }
    Backend& cpu() { return *cpu_; }
    Backend& gpu() { return *gpu_; }

    std::unique_ptr<Backend> cpu_, gpu_;
};

// The same n elements of type t in both backends. Constructed poisoned (NaN in every
// dtype) on both sides, so elements an op fails to write show up as NaN in the comparison.
class Twin {
public:
    Twin(Backend& cpu, Backend& gpu, DType t, std::size_t n)
        : cpu_(cpu, t, n), gpu_be_(&gpu), t_(t), n_(n) {
        g_ = gpu.alloc(bytes());
        poison();
    }
    Twin(Backend& cpu, Backend& gpu, DType t, const std::vector<double>& v)
        : Twin(cpu, gpu, t, v.size()) {
        set(v);
    }
    ~Twin() { gpu_be_->free(g_); }
    Twin(const Twin&) = delete;
    Twin& operator=(const Twin&) = delete;

    std::size_t bytes() const { return std::max<std::size_t>(n_, 1) * dtype_size(t_); }
    void* c() { return cpu_.p(); }
    void* g() { return g_; }
    float* cf() { return static_cast<float*>(cpu_.p()); }
    float* gf() { return static_cast<float*>(g_); }

    void set(const std::vector<double>& v) {
        cpu_.set(v);
        gpu_be_->copy_to_device(g_, cpu_.p(), bytes());
    }
    void poison() {
        cpu_.poison();
        std::vector<unsigned char> ff(bytes(), 0xff);
        gpu_be_->copy_to_device(g_, ff.data(), bytes());
    }
    std::vector<double> cpu_vals() const { return cpu_.get(); }
    std::vector<double> gpu_vals() const {
        std::vector<unsigned char> raw(bytes());
        gpu_be_->copy_to_host(raw.data(), g_, bytes());
        return decode(t_, raw, n_);
    }
    // GPU result against the CPU reference.
    ::testing::AssertionResult close(Tol tol) const { return all_close(gpu_vals(), cpu_vals(), tol); }

private:
    Buf cpu_;
    Backend* gpu_be_;
    DType t_;
    std::size_t n_;
    void* g_;
};

// int32 token/target arrays in both backends.
class Ints {
public:
    Ints(Backend& cpu, Backend& gpu, const std::vector<std::int32_t>& v)
        : cpu_be_(&cpu), gpu_be_(&gpu), bytes_(std::max<std::size_t>(v.size(), 1) * 4) {
        c_ = cpu.alloc(bytes_);
        g_ = gpu.alloc(bytes_);
        if (!v.empty()) {
            std::memcpy(c_, v.data(), v.size() * 4);
            gpu.copy_to_device(g_, v.data(), v.size() * 4);
        }
    }
    ~Ints() {
        cpu_be_->free(c_);
        gpu_be_->free(g_);
    }
    Ints(const Ints&) = delete;
    Ints& operator=(const Ints&) = delete;
    const std::int32_t* c() const { return static_cast<const std::int32_t*>(c_); }
    const std::int32_t* g() const { return static_cast<const std::int32_t*>(g_); }

private:
    Backend* cpu_be_;
    Backend* gpu_be_;
    std::size_t bytes_;
    void* c_;
    void* g_;
};

}  // namespace gpt::test
