#include "config/enums.hpp"

#include "core/errors.hpp"

namespace gpt {

void throw_bad_enum(std::string_view flag, const std::string& allowed, std::string_view given) {
    GPT_THROW(UsageError, "--", flag, " must be one of ", allowed, ", got '", given, "'");
}

}  // namespace gpt
