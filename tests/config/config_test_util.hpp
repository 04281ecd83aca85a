// Validation of the small valid command line (tiny::cli) with one flag changed, and the
// arguments table's row of one key.
#pragma once

#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "tiny.hpp"

namespace gpt::test {

// The UsageError message that parsing and validating tiny + extra on `world` ranks gives
// ("" if none).
inline std::string rejection(const std::vector<std::string>& extra, int world = 1) {
    auto args = tiny::cli();
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
