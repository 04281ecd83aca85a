// Reads loose-JSON corpus files as batches of lines for the preprocessing workers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

namespace gpt::data {

// Expands --input values: a file, or a glob pattern (sorted matches). Every file must exist
// and be a readable regular file; otherwise IoError naming it, before any work starts.
std::vector<std::string> expand_input_paths(const std::vector<std::string>& inputs);

// Up to chunk_size consecutive lines of one file ('\n' separated; a trailing '\r' is dropped).
struct LineBatch {
    std::int64_t seq = 0;             // position in the stream of batches
    std::size_t file = 0;             // index into the reader's files
    std::int64_t first_line = 1;      // 1-based line number of line 0
    std::string data;                 // the lines back to back
    std::vector<std::size_t> starts;  // line k is data[starts[k], ends[k])
    std::vector<std::size_t> ends;
    std::int64_t bytes = 0;           // input bytes consumed, newlines included

    std::size_t size() const { return starts.size(); }
    std::string_view line(std::size_t k) const { return std::string_view(data).substr(starts[k], ends[k] - starts[k]); }
};

// Streams the files in order with a fixed-size read buffer, so memory does not depend on the
// input size (only on the longest line).
class CorpusReader {
public:
    CorpusReader(std::vector<std::string> files, std::size_t chunk_size);
    ~CorpusReader();
    CorpusReader(const CorpusReader&) = delete;
    CorpusReader& operator=(const CorpusReader&) = delete;

    // Fills batch with the next lines; false at the end of the last file. IoError on read failure.
    bool next(LineBatch& batch);
    const std::vector<std::string>& files() const { return files_; }

private:
    bool fill();  // reads more of the current file into buf_; false at its end

    std::vector<std::string> files_;
    std::size_t chunk_size_;
    std::size_t file_ = 0;
    std::FILE* fp_ = nullptr;
    bool eof_ = false;
    std::int64_t line_no_ = 1;
    std::int64_t seq_ = 0;
    std::vector<char> buf_;
    std::size_t begin_ = 0, end_ = 0;  // unconsumed bytes buf_[begin_, end_)
};

}  // namespace gpt::data
