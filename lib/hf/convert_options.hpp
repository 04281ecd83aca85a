// convert_checkpoint's flags, in the style every tool shares (config/flag_parser.hpp): one
// operation (--to hf, --to megatron or --dump-logits) and the folders and files it takes.
// Which flags go together is the tool's to check (app/convert_checkpoint.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/enums.hpp"

namespace gpt::hf {

// --to; None: not given (--dump-logits needs none).
enum class ConvertTarget { None, Hf, Megatron };

}  // namespace gpt::hf

namespace gpt {
// --to's spellings (config/enums.hpp): a bad value is one line with the allowed ones.
template <>
struct EnumNames<hf::ConvertTarget> {
    static constexpr std::array<std::pair<hf::ConvertTarget, std::string_view>, 3> names{
        {{hf::ConvertTarget::None, ""}, {hf::ConvertTarget::Hf, "hf"}, {hf::ConvertTarget::Megatron, "megatron"}}};
};
}  // namespace gpt

namespace gpt::hf {

struct ConvertArgs {
    ConvertTarget to = ConvertTarget::None;
    std::string load;              // our checkpoint folder to read (--to hf, --dump-logits)
    std::int64_t ckpt_step = -1;   // -1: the latest
    std::string output;            // --to hf: the Hugging Face folder to create
    std::string vocab_file, merge_file;  // --to hf: tokenizer files to copy; empty: the checkpoint's
    std::string load_hf;           // --to megatron: the Hugging Face folder to read
    std::string save;              // --to megatron: our checkpoint folder to create
    std::string dump_logits;       // the logits file to write
    std::vector<std::int32_t> tokens;  // --dump-logits: the token ids (--tokens 1,2,3)
    bool kv_cache = false;         // --dump-logits through the KV-cached forward
    bool help = false;
};

// Throws UsageError (one line naming the flag) for an unknown flag or a bad value.
ConvertArgs parse_convert_args(const std::vector<std::string>& args);
std::string convert_usage();

}  // namespace gpt::hf
