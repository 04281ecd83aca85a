#include <gtest/gtest.h>

#include "core/dtype.hpp"
#include "core/errors.hpp"

using namespace gpt;

TEST(DType, SizesNamesAndParsing) {
    EXPECT_EQ(dtype_size(DType::F32), 4u);
    EXPECT_EQ(dtype_size(DType::F16), 2u);
    EXPECT_EQ(dtype_size(DType::BF16), 2u);
    EXPECT_EQ(parse_dtype(dtype_name(DType::BF16)), DType::BF16);
    EXPECT_THROW(parse_dtype("int8"), UsageError);
}
