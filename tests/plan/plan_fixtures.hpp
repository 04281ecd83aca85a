// Model shapes and search inputs shared by the planner tests.
#pragma once

#include "plan/device_presets.hpp"
#include "plan/search.hpp"

namespace gpt::plan::test {

// Megatron GPT with f = 4h, GPT-2 vocabulary padded to 128 x TP.
inline ModelShape gpt(int layers, int hidden, int heads, int seq, DType dtype = DType::F16, int vocab = 50257) {
    ModelShape m;
    m.num_layers = layers;
    m.hidden = hidden;
    m.heads = heads;
    m.ffn = 4 * hidden;
    m.seq = seq;
    m.max_positions = seq;
    m.vocab = vocab;
    m.vocab_divisible_by = 128;
    m.dtype = dtype;
    return m;
}

// configs/gpt22b.ini: 48 layers, 64 heads, hidden 6144, seq 2048, fp16, GPT-2 vocabulary.
inline ModelShape gpt22b() { return gpt(48, 6144, 64, 2048); }

inline SearchInputs inputs(const ModelShape& m, const char* device, int world, int local, double memory_gib) {
    SearchInputs in;
    in.model = m;
    in.device = find_device_preset(device);
    in.fabric = default_fabric(in.device);
    in.device_memory_bytes = static_cast<std::uint64_t>(memory_gib * double(1ull << 30));
    in.device_memory_source = "test";
    in.world_size = world;
    in.local_world_size = local;
    return in;
}

}  // namespace gpt::plan::test
