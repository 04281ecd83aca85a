// API misuse of a Backend is our bug, not the user's: every public op checks its arguments
// once, above the device implementations (backend/checked_ops.cpp), and throws
// InternalError (exit code of a bug), never UsageError (exit 2, the user's mistakes).
// Shared by the CPU test (tests/backend) and the CUDA one (tests/backend_cuda).
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "backend/backend.hpp"
#include "core/errors.hpp"

namespace gpt::test {

// f must throw InternalError whose message names `op`.
inline void expect_internal_error(const std::function<void()>& f, const std::string& op) {
    try {
        f();
        ADD_FAILURE() << op << ": misuse accepted";
    } catch (const UsageError& e) {
        ADD_FAILURE() << op << ": misuse reported as a user error: " << e.what();
    } catch (const InternalError& e) {
        EXPECT_NE(std::string(e.what()).find(op), std::string::npos) << e.what();
    }
}

// Misuses a few ops of each family on `be`; buffers are big enough for every call, so only
// the bad argument can make a call fail.
inline void expect_api_misuse_is_internal(Backend& be) {
    void* buf = be.alloc(4096);
    be.zero(buf, 4096);
    float* f = static_cast<float*>(buf);
    auto* tok = static_cast<std::int32_t*>(buf);
    GemmArgs g;
    g.m = g.n = g.k = 4;
    g.lda = g.ldb = g.ldc = 4;
    g.a = g.b = g.c = buf;
    g.epilogue = GemmEpilogue::Bias;  // without a bias
    expect_internal_error([&] { be.gemm(g); }, "gemm");
    expect_internal_error([&] { be.layernorm_forward(buf, buf, buf, buf, f, f, 2, 0, 1e-5f, DType::F32); },
                          "layernorm_forward");
    expect_internal_error([&] { be.gelu_forward(buf, buf, -1, false, DType::F32); }, "gelu_forward");
    expect_internal_error([&] { be.bias_grad(buf, f, -1, 4, DType::F32); }, "bias_grad");
    expect_internal_error([&] { be.dropout_forward(buf, buf, 4, 1.0f, 0, 0, DType::F32); },
                          "dropout_forward");
    // The composites are checked too: before they reach the ops they are made of.
    expect_internal_error([&] { be.bias_dropout_add_backward(buf, buf, f, 2, 2, -0.5f, 0, 0, DType::F32); },
                          "bias_dropout_add_backward");
    expect_internal_error([&] { be.bias_dropout_add_backward(buf, buf, f, -2, 2, 0.1f, 0, 0, DType::F32); },
                          "bias_dropout_add_backward");
    expect_internal_error([&] { be.cast(buf, DType::F32, buf, DType::F32, -1); }, "cast");
    AttentionArgs a;
    a.s = 0;  // no sequence
    a.b = a.np = 1;
    a.hn = 4;
    expect_internal_error([&] { (void)be.attention_saved_bytes(a); }, "attention");
    expect_internal_error([&] { be.attention_forward(a, buf, buf, buf); }, "attention");
    expect_internal_error([&] { be.embedding_forward(tok, buf, buf, 1, 2, 4, 8, 4, DType::F32); },
                          "embedding_forward");
    expect_internal_error([&] { be.cross_entropy_stats(buf, tok, f, f, f, 2, 0, 0, DType::F32); },
                          "cross_entropy_stats");
    QkvExpandArgs q;
    q.s = q.b = q.groups = 1;
    q.hn = 4;
    q.rotary_dim = 3;  // rope rotates pairs
    expect_internal_error([&] { be.qkv_expand_forward(q, buf, buf); }, "qkv_expand_forward");
    AdamArgs adam;
    adam.main_param = adam.exp_avg = adam.exp_avg_sq = f;
    adam.grad = f;
    adam.n = 4;
    adam.step = 0;  // steps are 1-based
    expect_internal_error([&] { be.adam_step(adam); }, "adam_step");
    expect_internal_error([&] { (void)be.grad_stats(f, -1); }, "grad_stats");
    // A correct call still works after the refused ones.
    be.gelu_forward(buf, buf, 4, false, DType::F32);
    be.synchronize();
    be.free(buf);
}

}  // namespace gpt::test
