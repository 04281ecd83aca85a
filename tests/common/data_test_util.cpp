#include "data_test_util.hpp"

#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <random>
#include <sys/stat.h>
#include <sys/wait.h>

#include "text/json.hpp"
#include "text/utf8.hpp"
#include "test_env.hpp"

namespace gpt::data::test {

std::string vocab_file() { return gpt::test::source_dir() + "/data/gpt2/gpt2-vocab.json"; }
std::string merge_file() { return gpt::test::source_dir() + "/data/gpt2/gpt2-merges.txt"; }
std::string app_binary(const std::string& name) { return gpt::test::binary_dir() + "/app/" + name; }

std::string json_string(const std::string& s) {
    std::string out = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            out += '\\';
            out += static_cast<char>(c);
        } else if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof(buf), "\\u%04x", c);
            out += buf;
        } else {
            out += static_cast<char>(c);
        }
    }
    return out + "\"";
}

void write_file(const std::string& path, const std::string& contents) {
    std::ofstream out(path, std::ios::binary);
    out << contents;
    if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw std::runtime_error("cannot read " + path);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

std::vector<std::string> read_json_string_lines(const std::string& path) {
    std::vector<std::string> out;
    std::istringstream in(read_file(path));
    std::string line;
    while (std::getline(in, line)) {
        if (line.empty()) continue;
        JsonCursor cur(line);
        std::string s;
        cur.parse_string(s);
        out.push_back(s);
    }
    return out;
}

int run_command(const std::string& command, std::string& output) {
    output.clear();
    FILE* p = ::popen((command + " 2>&1").c_str(), "r");
    if (!p) throw std::runtime_error("cannot run " + command);
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) output.append(buf, n);
    int status = ::pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

std::vector<std::vector<std::int32_t>> tiktoken_ids(const std::vector<std::string>& texts, const std::string& scratch,
                                                    const std::string& encoding, const std::string& megatron_pattern) {
    const std::string in = scratch + "/tiktoken_in.jsonl", out = scratch + "/tiktoken_out.jsonl";
    std::string body;
    for (const auto& t : texts) body += json_string(t) + "\n";
    write_file(in, body);
    const std::string script = gpt::test::source_dir() + "/tests/peers/tiktoken_encode.js";
    std::string log;
    int rc = run_command("node '" + script + "' '" + in + "' " + encoding + " " + megatron_pattern + " > '" + out + "'", log);
    if (rc != 0)
        throw std::runtime_error("the reference tokenizer failed (exit " + std::to_string(rc) +
                                 "): node and tests/peers/node_modules/tiktoken are required; run scripts/setup.sh. " + log);
    std::vector<std::vector<std::int32_t>> ids;
    std::istringstream lines(read_file(out));
    std::string line;
    while (std::getline(lines, line)) {
        if (line.empty()) continue;
        JsonCursor cur(line);
        std::vector<std::int32_t> v;
        cur.expect('[');
        if (!cur.consume(']')) {
            do v.push_back(static_cast<std::int32_t>(cur.parse_int()));
            while (cur.consume(','));
            cur.expect(']');
        }
        ids.push_back(std::move(v));
    }
    if (ids.size() != texts.size())
        throw std::runtime_error("tiktoken returned " + std::to_string(ids.size()) + " lines for " + std::to_string(texts.size()) + " texts");
    return ids;
}

std::string tiktoken_rank_file(const std::string& encoding) {
    const std::string dir = gpt::test::binary_dir() + "/tiktoken_ranks";
    const std::string path = dir + "/" + encoding + ".tiktoken";
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) return path;
    ::mkdir(dir.c_str(), 0755);
    const std::string script = gpt::test::source_dir() + "/tests/peers/tiktoken_ranks.js";
    std::string log;
    // The script writes a temporary file and renames it: concurrent tests never see half a file.
    if (run_command("node '" + script + "' " + encoding + " '" + path + "'", log) != 0)
        throw std::runtime_error("cannot write the " + encoding + " rank file from npm tiktoken: node and "
                                 "tests/peers/node_modules/tiktoken are required; run scripts/setup.sh. " + log);
    return path;
}

std::vector<std::string> random_texts(std::size_t count, std::uint32_t seed) {
    std::mt19937 rng(seed);
    const std::vector<std::pair<std::uint32_t, std::uint32_t>> pools = {
        {'a', 'z'}, {'A', 'Z'}, {'0', '9'}, {' ', ' '}, {' ', ' '}, {'\'', '\''}, {'!', '/'}, {0x09, 0x0D},
        {0x00, 0x1F}, {0xA0, 0xFF}, {0x300, 0x36F}, {0x400, 0x4FF}, {0x4E00, 0x4FFF}, {0x3040, 0x30FF},
        {0xAC00, 0xACFF}, {0x600, 0x6FF}, {0x900, 0x97F}, {0x1F300, 0x1F6FF}, {0x200B, 0x200D}, {0xFE00, 0xFE0F},
        {0x2000, 0x206F}, {0x3000, 0x3000}, {0x85, 0x85}, {0x10000, 0x10FFFF}, {0x80, 0xFFFF}};
    std::vector<std::string> out;
    for (std::size_t i = 0; i < count; ++i) {
        std::string s;
        const int len = static_cast<int>(rng() % 60) + 1;
        for (int k = 0; k < len; ++k) {
            const auto& [lo, hi] = pools[rng() % pools.size()];
            std::uint32_t cp = lo + rng() % (hi - lo + 1);
            if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
            int repeat = rng() % 4 == 0 ? static_cast<int>(rng() % 5) + 1 : 1;
            while (repeat--) utf8::append(s, cp);
        }
        out.push_back(s);
    }
    return out;
}

}  // namespace gpt::data::test
