// One writer per save folder: two jobs given the same --save folder would otherwise
// delete each other's saves in progress (each save removes the temporary folders it finds).
// An exclusive fcntl lock on DIR/gpt_pretrain.lock, held for the whole run by the process
// that publishes (rank 0). The kernel drops the lock when that process dies, however it
// dies, so a stale lock file of a killed job never blocks its requeue. The file holds the
// holder's job id, host and pid, for the refusal message.
#pragma once

#include <filesystem>
#include <string>

namespace gpt::ckpt {

inline constexpr const char* kLockFile = "gpt_pretrain.lock";

class SaveFolderLock {
public:
    // Creates DIR if needed and takes the lock. Throws IoError naming the holder (job id,
    // host, pid, since when) when another process holds it, or naming the folder when it
    // cannot be created or locked.
    explicit SaveFolderLock(const std::filesystem::path& dir);
    ~SaveFolderLock();  // releases the lock (the file stays: removing it would race a waiter)
    SaveFolderLock(const SaveFolderLock&) = delete;
    SaveFolderLock& operator=(const SaveFolderLock&) = delete;

    const std::string& holder_text() const { return text_; }  // what this process wrote

private:
    int fd_ = -1;
    std::string text_;
};

}  // namespace gpt::ckpt
