// convert_checkpoint: our checkpoints to and from Hugging Face GPT-2 and Llama (LlamaForCausalLM)
// folders (lib/hf): the checkpoint's options, or config.json's model_type, choose which.
//   convert_checkpoint --to hf --load DIR [--ckpt-step N] --output HF_DIR
//   convert_checkpoint --to megatron --load-hf HF_DIR --save DIR
//   convert_checkpoint --dump-logits FILE --load DIR --tokens 1,2,3 [--kv-cache]   (the reference tests' path)
// One process (it initialises a one-rank MPI world itself; mpiexec -n 1 works too).
#include <boost/program_options.hpp>
#include <cstdio>
#include <iostream>
#include <sstream>

#include "core/errors.hpp"
#include "dist/mpi_environment.hpp"
#include "hf/convert.hpp"
#include "log/log.hpp"

#include "tool_main.hpp"

namespace po = boost::program_options;
using namespace gpt;

namespace {

std::vector<std::int32_t> parse_tokens(const std::string& text) {
    std::vector<std::int32_t> out;
    std::stringstream in(text);
    std::string item;
    while (std::getline(in, item, ',')) {
        std::size_t used = 0;
        long long v = -1;
        try {
            v = std::stoll(item, &used);
        } catch (const std::logic_error&) {
        }
        GPT_REQUIRE(used == item.size() && v >= 0 && v <= INT32_MAX, UsageError, "--tokens: '", item,
                    "' is not a token id");
        out.push_back(static_cast<std::int32_t>(v));
    }
    return out;
}

int run(int argc, char** argv) {
    std::string to, load, load_hf, save, output, vocab, merges, dump, tokens;
    std::int64_t step = -1;
    po::options_description desc(
        "convert_checkpoint: our checkpoints to and from Hugging Face GPT-2 or Llama (config.json + model.safetensors)");
    desc.add_options()
        ("help,h", "show this help")
        ("to", po::value(&to), "hf (our checkpoint -> Hugging Face) or megatron (Hugging Face -> our checkpoint)")
        ("load", po::value(&load), "our checkpoint folder to read (--to hf, --dump-logits)")
        ("ckpt-step", po::value(&step), "the iteration to read instead of the latest")
        ("output", po::value(&output), "--to hf: the Hugging Face folder to create")
        ("vocab-file", po::value(&vocab), "--to hf: GPT-2 vocab file to copy (default: the checkpoint's)")
        ("merge-file", po::value(&merges), "--to hf: GPT-2 merges file to copy (default: the checkpoint's)")
        ("load-hf", po::value(&load_hf), "--to megatron: the Hugging Face GPT-2 or Llama folder to read")
        ("save", po::value(&save), "--to megatron: our checkpoint folder to create (iteration 0)")
        ("dump-logits", po::value(&dump), "write fp32 logits (tokens x vocabulary) of our forward to this file")
        ("tokens", po::value(&tokens), "--dump-logits: comma-separated token ids")
        ("kv-cache", "--dump-logits: from the generation path's KV cache (a prompt pass over the first half, then one cached step per token)");
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help") || argc == 1) {
        std::cout << desc << "\n";
        return vm.count("help") ? 0 : 2;
    }
    po::notify(vm);
    dist::MpiEnvironment mpi(&argc, &argv);
    GPT_REQUIRE(mpi.size() == 1, UsageError, "run convert_checkpoint as one process (it reads any layout alone)");
    log::init({0, 1, "warning", ""});
    if (!dump.empty()) {
        GPT_REQUIRE(to.empty() && !load.empty() && !tokens.empty(), UsageError,
                    "--dump-logits goes with --load and --tokens, without --to");
        hf::dump_logits(load, step, parse_tokens(tokens), dump, vm.count("kv-cache") > 0);
        return 0;
    }
    if (to == "hf") {
        GPT_REQUIRE(!load.empty() && !output.empty() && load_hf.empty() && save.empty(), UsageError,
                    "--to hf takes --load DIR [--ckpt-step N] --output HF_DIR");
        std::cout << hf::export_to_hf({load, step, output, vocab, merges}) << std::endl;
        return 0;
    }
    if (to == "megatron") {
        GPT_REQUIRE(!load_hf.empty() && !save.empty() && load.empty() && output.empty() && step == -1, UsageError,
                    "--to megatron takes --load-hf HF_DIR --save DIR");
        std::cout << hf::import_from_hf({load_hf, save}) << std::endl;
        return 0;
    }
    GPT_THROW(UsageError, "--to must be hf or megatron (got '", to, "')");
}

}  // namespace

int main(int argc, char** argv) {
    return gpt::app::run_tool("convert_checkpoint", [&] { return run(argc, argv); });
}
