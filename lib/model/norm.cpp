#include "model/norm.hpp"

namespace gpt::model {

void norm_forward(const PassContext& c, const void* x, std::int64_t w, std::int64_t b, void* y,
                  float* mean, float* rstd, std::int64_t rows) {
    const DType t = c.opt->dtype;
    const std::int64_t h = c.dims->hidden;
    if (c.dims->rmsnorm)
        c.be->rmsnorm_forward(x, c.param(w), y, rstd, rows, h, c.opt->layernorm_eps, t, c.dims->layernorm_1p);
    else
        c.be->layernorm_forward(x, c.param(w), c.param(b), y, mean, rstd, rows, h,
                                c.opt->layernorm_eps, t, c.dims->layernorm_1p);
}

void norm_forward_fp8(const PassContext& c, const void* x, std::int64_t w, std::int64_t b, void* y,
                      float* mean, float* rstd, std::int64_t rows, const Backend::Fp8Codes& codes) {
    const bool rms = c.dims->rmsnorm;
    c.be->norm_forward_fp8(rms, x, c.param(w), rms ? nullptr : c.param(b), y, rms ? nullptr : mean, rstd, rows,
                           c.dims->hidden, c.opt->layernorm_eps, c.opt->dtype, codes, c.dims->layernorm_1p);
}

void norm_backward(const PassContext& c, const void* dy, const void* x, std::int64_t w,
                   std::int64_t b, const float* mean, const float* rstd, const void* dresidual,
                   void* dx, std::int64_t rows) {
    const DType t = c.opt->dtype;
    const std::int64_t h = c.dims->hidden;
    if (c.dims->rmsnorm)
        c.be->rmsnorm_backward(dy, x, c.param(w), rstd, dresidual, dx, c.grad(w), rows, h, t,
                               c.dims->layernorm_1p);
    else
        c.be->layernorm_backward(dy, x, c.param(w), mean, rstd, dresidual, dx, c.grad(w),
                                 c.grad(b), rows, h, t, c.dims->layernorm_1p);
}

}  // namespace gpt::model
