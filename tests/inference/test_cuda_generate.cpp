// Generation on the CUDA backend (a GPU, or the emulator build's emulated one): the KV-cached
// forward's logits follow the CPU backend's, step by step, in fp32, fp16 and bf16; greedy
// tokens agree wherever the CPU's top-2 margin exceeds what rounding can move; and on the GPU
// itself greedy decoding with the cache equals argmax of fresh passes. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "core/device_info.hpp"
#include "inference/generator.hpp"
#include "inference/sampling.hpp"
#include "inference_test_util.hpp"
#include "test_env.hpp"

namespace gpt::inference {
namespace {

bool have_gpu() {
    if (visible_gpu_count() > 0) return true;
    test::note_hardware_skip("no GPU visible");
    return false;
}

using test::argmax;
using test::top2_margin;

// Teacher-forced greedy decoding: the CPU backend chooses each next token (argmax over the
// real vocabulary) and both backends are fed it, so the logits compare at every step even
// where a near tie would let the two choose differently.
TEST(CudaGenerate, CachedDecodeFollowsTheCpuBackend) {
    if (!have_gpu()) GTEST_SKIP();
    for (DType t : {DType::F32, DType::F16, DType::BF16}) {
        std::unique_ptr<Backend> cpu = make_backend("cpu", 0), gpu = make_backend("cuda", 0);
        std::unique_ptr<dist::Communicator> tp = test::self_comm();
        const model::ModelDims dims = test::inference_dims();
        model::ModelOptions opt;
        opt.dtype = t;
        const std::vector<float> params = test::inference_params(dims, 5);
        KvModel on_cpu(dims, opt, *cpu, *tp, params), on_gpu(dims, opt, *gpu, *tp, params);
        const int b = 2, prompt = 4, len = 24;
        const std::int64_t V = dims.vocab_padded, vocab = 50;
        on_cpu.start(b, len);
        on_gpu.start(b, len);
        std::vector<std::int32_t> tokens = {3, 17, 42, 8, 9, 1, 30, 2};  // (b, prompt)
        std::vector<float> want = on_cpu.forward(tokens.data(), prompt), got = on_gpu.forward(tokens.data(), prompt);
        int agreed = 0, compared = 0;
        for (int pos = prompt;; ++pos) {
            ASSERT_EQ(got.size(), want.size());
            // The backends differ in the order of fp32 sums only: see rounding_tolerance.
            const double tol = test::rounding_tolerance(t, test::max_abs(want));
            for (std::size_t i = 0; i < want.size(); ++i)
                ASSERT_NEAR(got[i], want[i], tol) << dtype_name(t) << " position " << pos << " element " << i;
            std::vector<std::int32_t> next;
            for (int i = 0; i < b; ++i) {
                const float* w = want.data() + i * V;
                const float* g = got.data() + i * V;
                next.push_back(argmax(w, vocab));
                // Rounding moves each logit by at most tol, so a margin above 2 tol decides.
                if (top2_margin(w, vocab) > 2.0 * tol) {
                    ++compared;
                    EXPECT_EQ(argmax(g, vocab), next.back()) << dtype_name(t) << " position " << pos << " sequence " << i;
                    agreed += argmax(g, vocab) == next.back();
                }
            }
            if (pos == len) break;
            want = on_cpu.forward(next.data(), 1);
            got = on_gpu.forward(next.data(), 1);
        }
        // The random weights give clear margins: most steps must be decided, or the token
        // check above would be vacuous.
        EXPECT_GE(compared, 20) << dtype_name(t) << ": only " << compared << " of 42 steps had a clear margin";
        EXPECT_EQ(agreed, compared) << dtype_name(t);
    }
}

// The KV-cache property on the GPU itself: each cached step gives the logits of a fresh pass
// over the whole prefix (fp32: the bound of test_kv_model.cpp), so greedy decoding with the
// cache chooses the argmax tokens of fresh passes.
TEST(CudaGenerate, GreedyWithCacheIsArgmaxOfFreshPasses) {
    if (!have_gpu()) GTEST_SKIP();
    std::unique_ptr<Backend> gpu = make_backend("cuda", 0);
    std::unique_ptr<dist::Communicator> tp = test::self_comm();
    const model::ModelDims dims = test::inference_dims();
    const model::ModelOptions opt;
    KvModel m(dims, opt, *gpu, *tp, test::inference_params(dims, 5));
    GenerationRequest rq;
    rq.prompts = {{3, 17, 42}, {9, 1, 1, 30, 2}, {44}};
    rq.max_new_tokens = 12;
    rq.sampling.greedy = true;
    rq.vocab = 50;
    rq.eod = 49;
    rq.batch_size = 3;
    const auto with = generate(m, rq);
    rq.use_cache = false;
    const auto without = generate(m, rq);
    ASSERT_EQ(with.size(), 3u);
    for (std::size_t i = 0; i < with.size(); ++i) {
        EXPECT_FALSE(with[i].tokens.empty()) << "prompt " << i;
        EXPECT_EQ(with[i].tokens, without[i].tokens) << "prompt " << i;
        ASSERT_EQ(with[i].log_probs.size(), without[i].log_probs.size());
        for (std::size_t k = 0; k < with[i].log_probs.size(); ++k)
            EXPECT_NEAR(with[i].log_probs[k], without[i].log_probs[k], 1e-4) << "prompt " << i << " token " << k;
    }
}

}  // namespace
}  // namespace gpt::inference
