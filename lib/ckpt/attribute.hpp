// A checkpoint attribute value: iteration counters, loss-scaler and LR-scheduler state,
// consumed samples, the resolved config text.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <variant>

namespace gpt::ckpt {

using AttributeValue = std::variant<std::int64_t, double, std::string>;
using AttributeMap = std::map<std::string, AttributeValue>;

}  // namespace gpt::ckpt
