// The Backend's defaults for the modern decoder ops: a backend without them names itself.
// The model checks has_decoder_ops() at start-up (a UsageError naming the flags), so getting
// here is a bug of ours: InternalError.
#include "backend/backend.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {
[[noreturn]] void missing(const Backend& be, const char* op) {
    GPT_THROW(InternalError, "the ", be.name(), " backend does not implement ", op,
              " (RMSNorm, SwiGLU, squared ReLU, rope and grouped-query attention run on --device cpu and cuda)");
}
}  // namespace

void Backend::do_rmsnorm_forward(const void*, const void*, void*, float*, std::int64_t,
                                 std::int64_t, float, DType, bool, const NormRows&) {
    missing(*this, "rmsnorm_forward");
}
void Backend::do_rmsnorm_backward(const void*, const void*, const void*, const float*, const void*,
                                  void*, float*, std::int64_t, std::int64_t, DType, bool, const NormRows&) {
    missing(*this, "rmsnorm_backward");
}
void Backend::do_swiglu_forward(const void*, void*, std::int64_t, std::int64_t, DType) {
    missing(*this, "swiglu_forward");
}
void Backend::do_swiglu_backward(const void*, const void*, void*, std::int64_t, std::int64_t, DType) {
    missing(*this, "swiglu_backward");
}
void Backend::do_squared_relu_forward(const void*, void*, std::int64_t, DType) {
    missing(*this, "squared_relu_forward");
}
void Backend::do_squared_relu_backward(const void*, const void*, void*, std::int64_t, DType) {
    missing(*this, "squared_relu_backward");
}
void Backend::do_qkv_expand_forward(const QkvExpandArgs&, const void*, void*) {
    missing(*this, "qkv_expand_forward");
}
void Backend::do_qkv_expand_backward(const QkvExpandArgs&, const void*, void*) {
    missing(*this, "qkv_expand_backward");
}

}  // namespace gpt
