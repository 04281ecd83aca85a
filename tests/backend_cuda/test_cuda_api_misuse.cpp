// API misuse raises InternalError on the CUDA backend, as on the CPU (tests/common/api_misuse.hpp).
#include "api_misuse.hpp"

#include "cuda_test_util.hpp"

namespace gpt::test {
namespace {

class CudaApiMisuse : public CudaVsCpu {};

TEST_F(CudaApiMisuse, ReportsInternalErrors) { expect_api_misuse_is_internal(gpu()); }

}  // namespace
}  // namespace gpt::test
