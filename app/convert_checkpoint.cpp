// convert_checkpoint: our checkpoints to and from Hugging Face GPT-2 and Llama (LlamaForCausalLM)
// folders (lib/hf): the checkpoint's options, or config.json's model_type, choose which.
//   convert_checkpoint --to hf --load DIR [--ckpt-step N] --output HF_DIR
//   convert_checkpoint --to megatron --load-hf HF_DIR --save DIR
//   convert_checkpoint --dump-logits FILE --load DIR --tokens 1,2,3 [--kv-cache]   (the reference tests' path)
// One process (it initialises a one-rank MPI world itself; mpiexec -n 1 works too).
#include <iostream>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "dist/mpi_environment.hpp"
#include "hf/convert.hpp"
#include "hf/convert_options.hpp"
#include "log/log.hpp"

#include "tool_main.hpp"

using namespace gpt;

namespace {

int run(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const hf::ConvertArgs a = hf::parse_convert_args(args);
    if (a.help || args.empty()) {
        std::cout << hf::convert_usage() << "\n";
        return a.help ? 0 : 2;
    }
    dist::MpiEnvironment mpi(&argc, &argv);
    GPT_REQUIRE(mpi.size() == 1, UsageError, "run convert_checkpoint as one process (it reads any layout alone)");
    log::init({0, 1, "warning", ""});
    if (!a.dump_logits.empty()) {
        GPT_REQUIRE(a.to == hf::ConvertTarget::None && !a.load.empty() && !a.tokens.empty(), UsageError,
                    "--dump-logits goes with --load and --tokens, without --to");
        hf::dump_logits(a.load, a.ckpt_step, a.tokens, a.dump_logits, a.kv_cache);
        return 0;
    }
    if (a.to == hf::ConvertTarget::Hf) {
        GPT_REQUIRE(!a.load.empty() && !a.output.empty() && a.load_hf.empty() && a.save.empty(), UsageError,
                    "--to hf takes --load DIR [--ckpt-step N] --output HF_DIR");
        std::cout << hf::export_to_hf({a.load, a.ckpt_step, a.output, a.vocab_file, a.merge_file}) << std::endl;
        return 0;
    }
    if (a.to == hf::ConvertTarget::Megatron) {
        GPT_REQUIRE(!a.load_hf.empty() && !a.save.empty() && a.load.empty() && a.output.empty() && a.ckpt_step == -1,
                    UsageError, "--to megatron takes --load-hf HF_DIR --save DIR");
        std::cout << hf::import_from_hf({a.load_hf, a.save}) << std::endl;
        return 0;
    }
    GPT_THROW(UsageError, "--to must be hf or megatron (not given), or --dump-logits FILE without it");
}

}  // namespace

int main(int argc, char** argv) {
    return gpt::app::run_tool("convert_checkpoint", [&] { return run(argc, argv); });
}
