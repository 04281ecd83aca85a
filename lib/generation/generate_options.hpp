// gpt_generate's flags, in the style every tool shares (config/flag_parser.hpp): its own (the
// checkpoint, the prompts, sampling, output), and gpt_pretrain's, passed on to its parser
// (--device, --fp16/--bf16, --tensor-model-parallel-size, --use-flash-attn, or a model flag,
// which must then agree with the checkpoint: generation/checkpoint_args.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "inference/sampling.hpp"

namespace gpt::generation {

enum class OutputFormat { Text, Jsonl };

}  // namespace gpt::generation

namespace gpt {
// --output-format's spellings (config/enums.hpp): parsed, printed and listed in its error.
template <>
struct EnumNames<generation::OutputFormat> {
    static constexpr std::array<std::pair<generation::OutputFormat, std::string_view>, 2> names{
        {{generation::OutputFormat::Text, "text"}, {generation::OutputFormat::Jsonl, "jsonl"}}};
};
}  // namespace gpt

namespace gpt::generation {

struct GenerateOptions {
    std::string load;                  // --load DIR
    std::int64_t ckpt_step = -1;       // --ckpt-step N; -1: the tracker's
    std::vector<std::string> prompts;  // --prompt (repeatable)
    std::string prompt_file;           // --prompt-file F: one prompt per line
    int max_new_tokens = 64;
    inference::SamplingOptions sampling;
    int batch_size = 8;
    OutputFormat output_format = OutputFormat::Text;
    bool help = false;
    // gpt_pretrain's flags (see above), as given: already checked by its parser.
    std::vector<std::string> other;
};

// Throws UsageError (one line naming the flag) for an unknown flag, a bad or missing value,
// or a value out of range, gpt_pretrain's flags included.
GenerateOptions parse_generate_args(const std::vector<std::string>& args);
std::string generate_usage();

}  // namespace gpt::generation
