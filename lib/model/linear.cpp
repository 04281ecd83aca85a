#include "model/linear.hpp"

namespace gpt::model {

void linear_forward(Backend& be, const void* x, const void* w, void* y, std::int64_t tokens,
                    std::int64_t in, std::int64_t out, DType dtype, GemmEpilogue epilogue,
                    const void* bias, void* aux, bool tanh_gelu) {
    GemmArgs g;
    g.trans_b = true;  // W is [out, in]
    g.m = tokens;
    g.n = out;
    g.k = in;
    g.a = x;
    g.lda = in;
    g.b = w;
    g.ldb = in;
    g.c = y;
    g.ldc = out;
    g.dtype = dtype;
    g.c_dtype = dtype;
    g.epilogue = epilogue;
    g.bias = bias;
    g.aux = aux;
    g.tanh_gelu = tanh_gelu;
    be.gemm(g);
}

void linear_weight_grad(Backend& be, const void* dy, const void* x, float* dw,
                        std::int64_t tokens, std::int64_t in, std::int64_t out, DType dtype,
                        float* dbias) {
    GemmArgs g;
    g.trans_a = true;  // dy^T
    g.m = out;
    g.n = in;
    g.k = tokens;
    g.a = dy;
    g.lda = out;
    g.b = x;
    g.ldb = in;
    g.c = dw;
    g.ldc = in;
    g.beta = 1.0f;
    g.dtype = dtype;
    g.c_dtype = DType::F32;
    g.bias_grad = dbias;
    be.gemm(g);
}

void linear_input_grad(Backend& be, const void* dy, const void* w, void* dx, std::int64_t tokens,
                       std::int64_t in, std::int64_t out, DType dtype, const void* gelu_pre,
                       bool tanh_gelu) {
    GemmArgs g;
    g.m = tokens;
    g.n = in;
    g.k = out;
    g.a = dy;
    g.lda = out;
    g.b = w;
    g.ldb = in;
    g.c = dx;
    g.ldc = in;
    g.dtype = dtype;
    g.c_dtype = dtype;
    if (gelu_pre) {
        g.epilogue = GemmEpilogue::GeluGrad;
        g.aux = const_cast<void*>(gelu_pre);  // read only by GeluGrad
        g.tanh_gelu = tanh_gelu;
    }
    be.gemm(g);
}

}  // namespace gpt::model
