// merge_datasets: Megatron's tools/merge_datasets.py; see lib/text/merge.hpp.
#include <boost/program_options.hpp>
#include <cstdio>
#include <filesystem>
#include <iostream>

#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"
#include "text/merge.hpp"

#include "tool_main.hpp"

namespace po = boost::program_options;
using namespace gpt;

namespace {

int run(int argc, char** argv) {
    std::vector<std::string> inputs;
    std::string output;
    po::options_description desc("merge_datasets: concatenate Megatron .bin/.idx datasets");
    desc.add_options()
        ("help,h", "show this help")
        ("input", po::value(&inputs)->multitoken()->required(),
         "a folder (every <name>.bin/.idx pair in it, sorted by name) or a list of dataset prefixes")
        ("output-prefix", po::value(&output)->required(), "writes <prefix>.bin/.idx");
    po::variables_map vm;
    po::store(po::parse_command_line(argc, argv, desc), vm);
    if (vm.count("help") || argc == 1) {
        std::cout << desc << "\n";
        return vm.count("help") ? 0 : 2;
    }
    po::notify(vm);
    std::vector<std::string> prefixes;
    if (inputs.size() == 1 && std::filesystem::is_directory(inputs[0]))
        prefixes = data::dataset_prefixes_in_folder(inputs[0]);
    else
        prefixes = inputs;
    for (const auto& p : prefixes) std::cout << "Merging " << p << std::endl;
    data::merge_datasets(prefixes, output);
    data::IndexedDataset merged(output);
    std::printf("Wrote %s.bin and %s.idx: %lld documents, %lld sequences.\n", output.c_str(), output.c_str(),
                static_cast<long long>(merged.num_documents()), static_cast<long long>(merged.num_sequences()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return gpt::app::run_tool("merge_datasets", [&] { return run(argc, argv); });
}
