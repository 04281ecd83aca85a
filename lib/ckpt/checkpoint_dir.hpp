// The save folder: DIR/iter_0000100/model_optim.h5 per checkpoint, the tracker file
// DIR/latest_checkpointed_iteration.txt (Megatron's name) naming the newest complete one,
// temporary folders of saves in progress, and retention. Plain file-system code, no MPI:
// the writer calls it on rank 0 only, except EarlyWriteback (every rank, for its own writes).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gpt::ckpt {

namespace fs = std::filesystem;

inline constexpr const char* kTrackerFile = "latest_checkpointed_iteration.txt";
inline constexpr const char* kCheckpointFile = "model_optim.h5";

std::string iteration_dir_name(std::int64_t iteration);  // "iter_0000100"
fs::path checkpoint_file(const fs::path& root, std::int64_t iteration);
// "iter_0000100.tmp-<tag>": where a save writes until it is complete.
fs::path temp_dir(const fs::path& root, std::int64_t iteration, const std::string& tag);

// The iteration the tracker names; nullopt when there is no tracker. Throws DataError when
// the tracker exists but does not hold one non-negative integer.
std::optional<std::int64_t> read_tracker(const fs::path& root);
// The same, but nullopt also when the tracker is damaged or unreadable: for a saver, which
// replaces it anyway.
std::optional<std::int64_t> read_tracker_if_valid(const fs::path& root);
// Replaces the tracker atomically: temp file, fsync, rename, fsync of the folder.
void write_tracker(const fs::path& root, std::int64_t iteration);

// Iterations of the committed iter_NNNNNNN folders under root, ascending (temporary and
// replaced folders are not committed and not listed).
std::vector<std::int64_t> list_iterations(const fs::path& root);

// Flushes a file or folder to stable storage. Throws IoError.
void fsync_path(const fs::path& p);

// Starts the kernel's write-back of byte ranges this process has just written to a file,
// without waiting for it. A save's bytes otherwise sit in the page cache (far below the
// dirty limits) until the final fsync, which then waits for the disk while nothing else
// runs; started early, the disk works while the save still copies and checksums (the final
// fsync: 0.8 s -> 0.01 s). Only a hint: durability still comes from fsync_path. Does nothing where the file cannot be opened or on systems other
// than Linux.
class EarlyWriteback {
public:
    explicit EarlyWriteback(const fs::path& file);
    ~EarlyWriteback();  // flush()
    EarlyWriteback(const EarlyWriteback&) = delete;
    EarlyWriteback& operator=(const EarlyWriteback&) = delete;
    // Adjacent ranges are merged and started once they reach kBatchBytes: fewer calls.
    void start(std::uint64_t offset, std::uint64_t bytes);
    void flush();  // starts what start() still holds back

private:
    static constexpr std::uint64_t kBatchBytes = std::uint64_t{32} << 20;
    int fd_ = -1;
    std::uint64_t pending_offset_ = 0, pending_bytes_ = 0;
};

// Moves the temporary folder to its final name. A folder already there (a save of the
// same iteration that committed its folder but crashed before updating the tracker) is
// moved aside first and removed after. Throws IoError.
void publish_dir(const fs::path& temp, const fs::path& final_dir);

// Removes what saves that died before committing left behind (iter_*.tmp-*, iter_*.old-*
// folders, tracker temp files), except `keep`. Returns what it removed.
std::vector<fs::path> remove_stale_temp_dirs(const fs::path& root, const fs::path& keep);

// keep_last > 0: removes the committed checkpoints older than the keep_last newest among
// those at or before `committed` (newer folders from an abandoned run are left alone).
// Call only after `committed` is published and the tracker names it.
std::vector<std::int64_t> apply_retention(const fs::path& root, std::int64_t committed, int keep_last);

}  // namespace gpt::ckpt
