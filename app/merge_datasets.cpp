// merge_datasets: Megatron's tools/merge_datasets.py; see lib/text/merge.hpp. Its flags:
// lib/text/merge_options.hpp.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"
#include "text/merge.hpp"
#include "text/merge_options.hpp"

#include "tool_main.hpp"

using namespace gpt;

namespace {

int run(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    const data::MergeArgs a = data::parse_merge_args(args);
    if (a.help || args.empty()) {
        std::cout << data::merge_usage() << "\n";
        return a.help ? 0 : 2;
    }
    std::vector<std::string> prefixes;
    if (a.inputs.size() == 1 && std::filesystem::is_directory(a.inputs[0]))
        prefixes = data::dataset_prefixes_in_folder(a.inputs[0]);
    else
        prefixes = a.inputs;
    for (const auto& p : prefixes) std::cout << "Merging " << p << std::endl;
    data::merge_datasets(prefixes, a.output_prefix);
    data::IndexedDataset merged(a.output_prefix);
    std::printf("Wrote %s.bin and %s.idx: %lld documents, %lld sequences.\n", a.output_prefix.c_str(),
                a.output_prefix.c_str(), static_cast<long long>(merged.num_documents()),
                static_cast<long long>(merged.num_sequences()));
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    return gpt::app::run_tool("merge_datasets", [&] { return run(argc, argv); });
}
