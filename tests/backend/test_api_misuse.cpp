// API misuse raises InternalError on the CPU backend (api_misuse.hpp).
#include "api_misuse.hpp"

#include "backend_test_util.hpp"

namespace gpt::test {
namespace {

TEST(ApiMisuse, CpuReportsInternalErrors) {
    auto be = cpu_backend();
    expect_api_misuse_is_internal(*be);
}

}  // namespace
}  // namespace gpt::test
