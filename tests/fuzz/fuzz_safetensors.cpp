// The safetensors header parser (lib/hf, convert_checkpoint --to megatron's input) from
// untrusted bytes: the input is a whole file. parse_safetensors_header must accept it or
// throw DataError. Oracle: an accepted header's tensors lie inside the file's data section,
// hold exactly shape x dtype-size bytes, and do not overlap; and the writer's header for the
// same F32 tensors parses back to the same shapes.
#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>

#include "core/errors.hpp"
#include "fuzz_util.hpp"
#include "hf/safetensors.hpp"

namespace hf = gpt::hf;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    hf::SafetensorsHeader h;
    try {
        h = hf::parse_safetensors_header(bytes, size);
    } catch (const gpt::DataError&) {
        return 0;
    }
    if (8 + h.header_bytes > size) gpt::fuzz::fail("header past the end accepted");
    const std::uint64_t data_bytes = size - 8 - h.header_bytes;
    std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
    std::vector<hf::NamedTensor> f32;
    for (const auto& [name, e] : h.tensors) {
        if (e.begin > e.end || e.end > data_bytes) gpt::fuzz::fail("tensor outside the data section accepted");
        std::uint64_t n = 1;
        for (auto d : e.shape) n *= static_cast<std::uint64_t>(d);
        const std::uint64_t item = e.dtype == "F32" ? 4 : 2;
        if (e.end - e.begin != n * item) gpt::fuzz::fail("tensor size disagrees with its shape");
        ranges.emplace_back(e.begin, e.end);
        if (e.dtype == "F32" && n < (1u << 16)) f32.push_back({name, e.shape, std::vector<float>(n)});
    }
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
        if (ranges[i].first < ranges[i - 1].second) gpt::fuzz::fail("overlapping tensors accepted");
    // The writer's header of the same tensors (zero data) parses back to them.
    std::string file = hf::safetensors_header(f32);
    const std::uint64_t n = file.size();
    std::uint64_t payload = 0;
    for (const auto& t : f32) payload += t.values.size() * 4;
    file.insert(0, std::string(reinterpret_cast<const char*>(&n), 8));
    file.append(payload, '\0');
    const hf::SafetensorsHeader back = hf::parse_safetensors_header(file, file.size());
    if (back.tensors.size() != f32.size()) gpt::fuzz::fail("written header lost tensors");
    for (const auto& t : f32)
        if (back.tensors.at(t.name).shape != t.shape) gpt::fuzz::fail("written header changed a shape");
    return 0;
}
