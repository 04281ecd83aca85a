// Megatron's tools/preprocess_data.py in C++: loose-JSON corpus -> <prefix>_<key>_document.bin/.idx,
// byte-identical to Megatron's output, with worker threads and bounded memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gpt::data {

class TextTokenizer;

struct PreprocessOptions {
    std::vector<std::string> inputs;                 // files or glob patterns, in order
    std::vector<std::string> json_keys{"text"};
    std::string output_prefix;
    bool append_eod = false;
    int workers = 1;
    int chunk_size = 64;         // lines per task handed to a worker
    int log_interval = 1000;     // progress line every this many lines (0: never)
    bool skip_bad_lines = false; // count and skip bad lines instead of failing
};

struct PreprocessResult {
    std::int64_t lines = 0;        // lines read, bad and blank ones included
    std::int64_t documents = 0;    // documents written (per key)
    std::int64_t bad_lines = 0;    // skipped under skip_bad_lines
    std::int64_t blank_lines = 0;  // whitespace-only lines, ignored
    std::int64_t tokens = 0;       // over all keys, EODs included
    std::int64_t bytes = 0;        // input bytes
    double seconds = 0;
    std::vector<std::string> output_prefixes;  // one per key
};

// Where the pipeline's messages go; the app routes them (info to stdout, progress to stderr).
struct PreprocessLog {
    std::function<void(const std::string&)> info;
    std::function<void(const std::string&)> progress;
    std::function<void()> started;  // inputs checked and outputs created; encoding begins
};

std::string output_prefix_for_key(const std::string& prefix, const std::string& key);

// Runs the pipeline. A bad line (unparseable JSON, missing key, wrong value type, invalid
// UTF-8) throws DataError "<file>:<line>: <what>" unless skip_bad_lines; I/O failures throw
// IoError. On any error no output .idx is left behind (only complete datasets are renamed
// into place), and worker threads are stopped and joined before the exception leaves.
PreprocessResult preprocess_corpus(const PreprocessOptions& options, const TextTokenizer& tokenizer,
                                   const PreprocessLog& log);

}  // namespace gpt::data
