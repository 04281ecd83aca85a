#include "hf/hf_tensors.hpp"

#include <cstring>

#include "core/errors.hpp"

namespace gpt::hf {

std::int64_t element_count(const std::vector<std::int64_t>& shape) {
    std::int64_t n = 1;
    for (auto x : shape) n *= x;
    return n;
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
    std::string t = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) t += (i ? ", " : "") + std::to_string(shape[i]);
    return t + "]";
}

std::vector<float> read_with_shape(const SafetensorsFile& f, const std::string& name,
                                   const std::vector<std::int64_t>& shape) {
    const auto& stored = f.header().tensors.at(name).shape;
    GPT_REQUIRE(stored == shape, DataError, f.path(), ": tensor ", name, " has shape ", shape_text(stored),
                " but config.json says ", shape_text(shape));
    return f.read(name);
}

void fill_padding_rows(float* table, std::int64_t vocab, std::int64_t padded, std::int64_t hidden) {
    for (std::int64_t r = vocab; r < padded; ++r)
        std::memcpy(table + r * hidden, table + (vocab - 1) * hidden, sizeof(float) * static_cast<std::size_t>(hidden));
}

}  // namespace gpt::hf
