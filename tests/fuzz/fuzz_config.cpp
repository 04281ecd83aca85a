// The flag parser and the INI config parser, then the validation every run goes through.
// Input layout: command-line arguments one per line; after the first NUL byte (if any) the
// contents of an INI file, passed as --config FILE. Bad input must be a UsageError (or an
// IoError/DataError for files), never anything else; validation runs for 1, 2 and 8 ranks
// and every accepted layout is printed as rank 0 prints it.
#include <cstdint>
#include <string>
#include <vector>

#include "config/options.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view in(reinterpret_cast<const char*>(data), size);
    const std::size_t nul = in.find('\0');
    const std::string_view flags = in.substr(0, nul);
    std::vector<std::string> args;
    for (std::size_t pos = 0; pos <= flags.size();) {
        std::size_t eol = flags.find('\n', pos);
        if (eol == std::string_view::npos) eol = flags.size();
        if (eol > pos) args.emplace_back(flags.substr(pos, eol - pos));
        pos = eol + 1;
    }
    if (nul != std::string_view::npos) {
        const std::string ini = gpt::fuzz::scratch_dir() + "/config.ini";
        gpt::fuzz::write_file(ini, in.substr(nul + 1));
        args.push_back("--config");
        args.push_back(ini);
    }
    gpt::ParsedArgs parsed;
    try {
        parsed = gpt::parse_args(args);
    } catch (const gpt::UsageError&) {
        return 0;
    }
    (void)gpt::format_arguments(parsed.config);
    for (int world : {1, 2, 8}) {
        gpt::Config cfg = parsed.config;
        try {
            gpt::validate(cfg, world);
        } catch (const gpt::UsageError&) {
            continue;
        }
        (void)gpt::format_arguments(cfg);
    }
    return 0;
}
