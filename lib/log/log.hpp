// Logging through Boost.Log with a rank attribute.
// Console: rank 0's records at >= --log-level, and every rank's errors (prefixed with the
// rank). --log-dir: one file per rank with everything at >= --log-level.
#pragma once

#include <boost/log/sources/record_ostream.hpp>
#include <boost/log/sources/severity_logger.hpp>
#include <string>

namespace gpt::log {

enum class Level { trace, debug, info, warning, error };

struct Options {
    int rank = 0;
    int world_size = 1;
    std::string level = "info";  // trace, debug, info, warning, error
    std::string dir;             // "": no files
};

// Safe to call again (e.g. after the config is parsed): replaces the sinks.
void init(const Options& opts);
Level parse_level(const std::string& name);  // throws UsageError naming the valid levels
boost::log::sources::severity_logger_mt<Level>& logger();
void flush();

}  // namespace gpt::log

// GPT_LOG(info) << "text";
#define GPT_LOG(sev) BOOST_LOG_SEV(::gpt::log::logger(), ::gpt::log::Level::sev)
