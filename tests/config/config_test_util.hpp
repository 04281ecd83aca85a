// The small valid command line the validation tests change one flag of at a time, and the
// arguments table's row of one key.
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt::test {

inline std::vector<std::string> tiny_args() {
    return {"--num-layers", "4", "--hidden-size", "64", "--num-attention-heads", "4",
            "--seq-length", "32", "--vocab-size", "100", "--train-iters", "10"};
}

// The UsageError message that parsing and validating tiny + extra on `world` ranks gives
// ("" if none).
inline std::string rejection(const std::vector<std::string>& extra, int world = 1) {
    auto args = tiny_args();
    args.insert(args.end(), extra.begin(), extra.end());
    try {
        Config cfg = parse_args(args).config;
        validate(cfg, world);
    } catch (const UsageError& e) {
        return e.what();
    }
    return "";
}

// The value the arguments table prints for `key` ("  key ..... value"), or "<no row key>".
inline std::string printed(const Config& cfg, const std::string& key) {
    const std::string table = format_arguments(cfg, {});
    const std::size_t at = table.find("\n  " + key + " .");
    if (at == std::string::npos) return "<no row " + key + ">";
    const std::size_t end = table.find('\n', at + 1);
    const std::string row = table.substr(at + 1, end - at - 1);
    return row.substr(row.find(". ", key.size() + 2) + 2);
}

}  // namespace gpt::test
