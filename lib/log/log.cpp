#include "log/log.hpp"

#include <boost/log/attributes/constant.hpp>
#include <boost/log/core.hpp>
#include <boost/log/expressions.hpp>
#include <boost/log/sinks/sync_frontend.hpp>
#include <boost/log/sinks/text_ostream_backend.hpp>
#include <boost/log/utility/setup/common_attributes.hpp>
#include <boost/core/null_deleter.hpp>
#include <boost/make_shared.hpp>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>

#include "core/errors.hpp"
#include "core/fd_write.hpp"
#include "log/rank_file.hpp"

namespace gpt::log {

namespace logging = boost::log;
namespace expr = boost::log::expressions;
namespace sinks = boost::log::sinks;

BOOST_LOG_ATTRIBUTE_KEYWORD(severity_kw, "Severity", Level)
BOOST_LOG_ATTRIBUTE_KEYWORD(rank_kw, "Rank", int)

namespace {

const char* level_name(Level l) {
    switch (l) {
        case Level::trace: return "trace";
        case Level::debug: return "debug";
        case Level::info: return "info";
        case Level::warning: return "warning";
        case Level::error: return "error";
    }
    return "?";
}

using Sink = sinks::synchronous_sink<sinks::text_ostream_backend>;

std::mutex g_file_mutex;
std::string g_rank_file;

}  // namespace

Level parse_level(const std::string& name) {
    for (Level l : {Level::trace, Level::debug, Level::info, Level::warning, Level::error})
        if (name == level_name(l)) return l;
    GPT_THROW(UsageError, "unknown --log-level '", name,
              "' (expected trace, debug, info, warning or error)");
}

logging::sources::severity_logger_mt<Level>& logger() {
    static logging::sources::severity_logger_mt<Level> lg;
    return lg;
}

void init(const Options& opts) {
    const Level level = parse_level(opts.level);
    auto core = logging::core::get();
    core->remove_all_sinks();
    core->add_global_attribute("Rank", logging::attributes::constant<int>(opts.rank));

    // Console: rank 0 speaks for the job, as Megatron's print_rank_0 does; errors from any
    // rank are shown with their rank so a failure on rank 5 is not invisible.
    auto console = boost::make_shared<Sink>();
    console->locked_backend()->add_stream(boost::shared_ptr<std::ostream>(&std::cout, boost::null_deleter()));
    console->locked_backend()->auto_flush(true);
    console->set_filter((rank_kw == 0 && severity_kw >= level) || severity_kw >= Level::error);
    const int world = opts.world_size;
    console->set_formatter([world](const logging::record_view& rec, logging::formatting_ostream& os) {
        auto sev = rec[severity_kw];
        if (world > 1 && sev && *sev >= Level::warning) os << "[rank " << rec[rank_kw] << "] ";
        if (sev && *sev >= Level::warning) os << level_name(*sev) << ": ";
        os << rec[expr::smessage];
    });
    core->add_sink(console);

    {
        std::lock_guard<std::mutex> g(g_file_mutex);
        g_rank_file.clear();
    }
    if (!opts.dir.empty()) {
        std::error_code ec;
        std::filesystem::create_directories(opts.dir, ec);
        const std::string path = opts.dir + "/rank-" + std::to_string(opts.rank) + ".log";
        auto file = boost::make_shared<std::ofstream>(path, std::ios::app);
        if (!*file) GPT_THROW(IoError, "cannot open log file ", path, " for writing (--log-dir)");
        auto sink = boost::make_shared<Sink>();
        sink->locked_backend()->add_stream(file);
        sink->locked_backend()->auto_flush(true);
        sink->set_filter(severity_kw >= level);
        sink->set_formatter([](const logging::record_view& rec, logging::formatting_ostream& os) {
            auto sev = rec[severity_kw];
            os << "[rank " << rec[rank_kw] << "] " << (sev ? level_name(*sev) : "?") << ": "
               << rec[expr::smessage];
        });
        core->add_sink(sink);
        std::lock_guard<std::mutex> g(g_file_mutex);
        g_rank_file = path;
    }
}

std::string rank_file() {
    std::lock_guard<std::mutex> g(g_file_mutex);
    return g_rank_file;
}

void append_to_rank_file(const std::string& text) {
    const std::string path = rank_file();
    if (path.empty()) return;
    const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return;
    write_fully(fd, text.data(), text.size());
    ::fsync(fd);
    ::close(fd);
}

void flush() { logging::core::get()->flush(); }

}  // namespace gpt::log
