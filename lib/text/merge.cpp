#include "text/merge.hpp"

#include <algorithm>
#include <filesystem>
#include <set>

#include "core/errors.hpp"
#include "data/indexed_dataset.hpp"

namespace gpt::data {

std::vector<std::string> dataset_prefixes_in_folder(const std::string& folder) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) GPT_THROW(IoError, "'", folder, "' is not a folder");
    std::set<std::string> bins, idxs;
    for (const auto& entry : fs::directory_iterator(folder, ec)) {
        if (!entry.is_regular_file()) continue;
        const fs::path& p = entry.path();
        if (p.extension() == ".bin") bins.insert((p.parent_path() / p.stem()).string());
        if (p.extension() == ".idx") idxs.insert((p.parent_path() / p.stem()).string());
    }
    if (ec) GPT_THROW(IoError, "cannot list '", folder, "': ", ec.message());
    for (const auto& b : bins)
        if (!idxs.count(b)) GPT_THROW(IoError, "'", b, ".bin' has no matching .idx");
    for (const auto& i : idxs)
        if (!bins.count(i)) GPT_THROW(IoError, "'", i, ".idx' has no matching .bin");
    if (bins.empty()) GPT_THROW(IoError, "no .bin/.idx datasets in '", folder, "'");
    return {bins.begin(), bins.end()};  // std::set iterates in sorted order
}

void merge_datasets(const std::vector<std::string>& inputs, const std::string& output_prefix) {
    if (inputs.empty()) GPT_THROW(UsageError, "nothing to merge: no input datasets");
    for (const auto& in : inputs)
        if (in == output_prefix) GPT_THROW(UsageError, "the output prefix '", output_prefix, "' is also an input");
    TokenDType dtype;
    {
        IndexedDataset first(inputs.front());  // validates, and fixes the dtype as Megatron does
        dtype = first.dtype();
    }
    IndexedDatasetWriter writer(output_prefix, dtype);
    for (const auto& in : inputs) writer.append_dataset(in);
    writer.finalize();
}

}  // namespace gpt::data
