// The checkpoint tracker file (latest_checkpointed_iteration.txt) from untrusted bytes:
// read_tracker must return the one non-negative integer it holds, or throw a DataError.
// Oracle: an accepted value written back by write_tracker reads back unchanged.
#include <cstdint>
#include <filesystem>
#include <string>

#include "ckpt/checkpoint_dir.hpp"
#include "core/errors.hpp"
#include "fuzz_util.hpp"

namespace ckpt = gpt::ckpt;

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::filesystem::path root = gpt::fuzz::scratch_dir();
    gpt::fuzz::write_file((root / ckpt::kTrackerFile).string(),
                          std::string_view(reinterpret_cast<const char*>(data), size));
    std::optional<std::int64_t> it;
    try {
        it = ckpt::read_tracker(root);
    } catch (const gpt::DataError&) {
        return 0;
    }
    if (!it) gpt::fuzz::fail("an existing tracker read as absent");
    if (*it < 0) gpt::fuzz::fail("a negative iteration was accepted");
    ckpt::write_tracker(root, *it);
    if (ckpt::read_tracker(root) != it) gpt::fuzz::fail("write_tracker/read_tracker do not round-trip");
    return 0;
}
