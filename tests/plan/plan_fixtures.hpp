// Model shapes and search inputs shared by the planner tests.
#pragma once

#include <string>

#include "config/options.hpp"
#include "plan/device_presets.hpp"
#include "plan/model_shape.hpp"
#include "plan/search.hpp"
#include "test_env.hpp"

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

// A shipped configuration, configs/<name>.ini, as gpt_pretrain --config reads it (the
// files are the truth: a test of a shipped config follows an edit of it).
inline Config shipped_config(const std::string& name) {
    return parse_args({"--config", gpt::test::source_dir() + "/configs/" + name + ".ini"}).config;
}

// configs/gpt22b.ini's shape: 48 layers, 64 heads, hidden 6144, seq 2048, fp16, GPT-2
// vocabulary. Without flash attention: the figures the shape tests check (Megatron's
// published runs, hand computations) are for the materialised attention core.
inline ModelShape gpt22b() {
    ModelShape m = model_shape_from_config(shipped_config("gpt22b"));
    m.flash_attention = false;
    return m;
}

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
