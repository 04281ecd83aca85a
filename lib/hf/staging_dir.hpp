// An output folder published whole or not at all: files go into <final>.tmp.<pid>, each
// fsynced, and the folder is renamed to <final> only when everything is written. A
// converter that fails or is killed leaves the user's files as they were (an existing
// <final> is never touched: the converter refuses it up front), and a stale staging folder
// of a dead process is removed by the next run for the same output.
#pragma once

#include <string>
#include <string_view>

namespace gpt::hf {

class StagingDir {
public:
    // Throws UsageError when `final_path` exists, IoError when the staging folder cannot be made.
    explicit StagingDir(std::string final_path);
    ~StagingDir();  // removes the staging folder unless published
    StagingDir(const StagingDir&) = delete;
    StagingDir& operator=(const StagingDir&) = delete;

    const std::string& path() const { return staging_; }
    // Writes `name` inside the staging folder (fsynced).
    void write_file(const std::string& name, std::string_view bytes) const;
    // Copies the file at `source` to `name` inside the staging folder (fsynced).
    void copy_file(const std::string& source, const std::string& name) const;
    // fsyncs every file in the tree, renames the staging folder to the final path, fsyncs
    // its parent.
    void publish();

private:
    std::string final_, staging_;
    bool published_ = false;
};

}  // namespace gpt::hf
