#include "generation/generate_options.hpp"

#include <boost/program_options/options_description.hpp>

#include "config/flag_binding.hpp"
#include "config/flag_parser.hpp"
#include "config/options.hpp"
#include "core/errors.hpp"

namespace po = boost::program_options;

namespace gpt::generation {

namespace {

// gpt_generate's own flags, bound to `o`. --load, --ckpt-step and --seed are gpt_pretrain's
// names too: here they mean the checkpoint to read and the sampling seed.
po::options_description generate_flags(GenerateOptions& o) {
    po::options_description g("generation");
    g.add_options()("help,h", po::bool_switch(&o.help), "print the options");
    add_flag(g, "load", &o.load, "the checkpoint folder gpt_pretrain --save wrote (required)");
    add_flag(g, "ckpt-step", &o.ckpt_step, "the iteration to load (-1: the latest)");
    add_repeated_flag(g, "prompt", &o.prompts, "a prompt (repeatable)");
    add_flag(g, "prompt-file", &o.prompt_file, "one prompt per line (instead of --prompt)");
    add_flag(g, "max-new-tokens", &o.max_new_tokens,
             "tokens to generate per prompt at most; EOD (50256) ends one sooner");
    add_flag(g, "greedy", &o.sampling.greedy, "argmax decoding (also what --top-k 1 gives)");
    add_flag(g, "temperature", &o.sampling.temperature, "divides the logits before top-k/top-p");
    add_flag(g, "top-k", &o.sampling.top_k, "keep the K most likely tokens (0: off)");
    add_flag(g, "top-p", &o.sampling.top_p, "keep the most likely tokens until their mass reaches P (0: off)");
    add_flag(g, "seed", &o.sampling.seed, "Philox seed of the draws: same seed, same text");
    add_flag(g, "batch-size", &o.batch_size, "prompts run together");
    add_flag(g, "output-format", &o.output_format,
             "text (prompt + completion) or jsonl (prompt, completion, token ids, log-probabilities of the "
             "chosen tokens, finish_reason)");
    return g;
}

}  // namespace

std::string generate_usage() {
    GenerateOptions defaults;
    const po::options_description g = generate_flags(defaults);
    return flags_usage(
        "usage: [mpiexec -n T] gpt_generate --load DIR [--ckpt-step N] (--prompt TEXT ... | --prompt-file F)\n"
        "                    [--flag value ...]\n"
        "The model's shape, vocabulary and tokenizer come from the checkpoint's saved arguments.\n"
        "gpt_pretrain's flags are passed on: --device cpu|cuda|auto, --fp16 | --bf16,\n"
        "--tensor-model-parallel-size T (the number of ranks), --use-flash-attn; a model flag\n"
        "given must agree with the checkpoint.\n",
        {&g});
}

GenerateOptions parse_generate_args(const std::vector<std::string>& args) {
    GenerateOptions o;
    const po::options_description flags = generate_flags(o);
    o.other = parse_flags(flags, args, pretrain_flags_passed_on()).passed_on;
    if (o.help) return o;
    // gpt_pretrain's flags are read again once the checkpoint is (checkpoint_args.hpp);
    // checked here already, so a bad one (an INI file's key too) stops the tool before MPI.
    parse_args(o.other);
    GPT_REQUIRE(!o.load.empty(), UsageError, "--load DIR is required (a folder gpt_pretrain --save wrote)");
    GPT_REQUIRE(o.prompts.empty() != o.prompt_file.empty(), UsageError,
                "give the prompts with --prompt TEXT (repeatable) or --prompt-file F, one of the two");
    GPT_REQUIRE(o.max_new_tokens >= 0, UsageError, "--max-new-tokens ", o.max_new_tokens, " must be >= 0");
    GPT_REQUIRE(o.batch_size > 0, UsageError, "--batch-size ", o.batch_size, " must be positive");
    inference::validate(o.sampling);
    return o;
}

}  // namespace gpt::generation
