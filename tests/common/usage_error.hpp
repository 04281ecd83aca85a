// What tests of the one-line usage errors compare: the message of the UsageError a call throws.
#pragma once

#include <string>

#include "core/errors.hpp"

namespace gpt::test {

// e.what() of the UsageError f() throws; "" when it returns.
template <typename F>
std::string usage_error_of(F&& f) {
    try {
        f();
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

}  // namespace gpt::test
