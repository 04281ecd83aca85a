// Helpers shared by the data and text tests: paths of the committed GPT-2 files, JSON-lines I/O, and
// running the reference tokenizer (node + tiktoken, installed by scripts/setup.sh).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace gpt::data::test {

std::string vocab_file();   // data/gpt2/gpt2-vocab.json
std::string merge_file();   // data/gpt2/gpt2-merges.txt
std::string app_binary(const std::string& name);  // <build>/app/<name>

std::string json_string(const std::string& utf8);  // a JSON string literal
void write_file(const std::string& path, const std::string& contents);
std::string read_file(const std::string& path);
std::vector<std::string> read_json_string_lines(const std::string& path);  // one JSON string per line

// Token ids of each text from tiktoken's encoding (node; "gpt2" by default), split by
// Megatron's pattern "v1"/"v2" when megatron_pattern is given. Fails the test (throws) when
// node or tiktoken is missing: they are part of the test environment, never optional.
std::vector<std::vector<std::int32_t>> tiktoken_ids(const std::vector<std::string>& texts, const std::string& scratch,
                                                    const std::string& encoding = "gpt2",
                                                    const std::string& megatron_pattern = "");
// <build>/tiktoken_ranks/<encoding>.tiktoken, written from the npm package's ranks on first use.
std::string tiktoken_rank_file(const std::string& encoding);

// Random text that stresses a pre-tokeniser: every class boundary, apostrophes, all
// whitespace kinds, combining marks, emoji sequences and arbitrary code points.
std::vector<std::string> random_texts(std::size_t count, std::uint32_t seed);

// Runs a shell command; returns its exit status and stores stdout+stderr in output.
int run_command(const std::string& command, std::string& output);

}  // namespace gpt::data::test
