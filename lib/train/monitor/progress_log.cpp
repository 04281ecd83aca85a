#include "train/monitor/progress_log.hpp"

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <vector>

#include "log/log.hpp"

namespace gpt::train {

namespace {

namespace fs = std::filesystem;

constexpr const char* kTimeFormat = "%Y-%m-%d %H:%M:%S";

std::vector<std::string> split_tabs(const std::string& line) {
    std::vector<std::string> out;
    std::string field;
    std::istringstream is(line);
    while (std::getline(is, field, '\t')) out.push_back(field);
    return out;
}

// "Floating-point operations: 1.20e+15" -> 1.2e15; false when the field has no value.
template <typename T>
bool field_value(const std::string& field, T& out) {
    const std::size_t colon = field.find(": ");
    if (colon == std::string::npos) return false;
    std::istringstream is(field.substr(colon + 2));
    return static_cast<bool>(is >> out);
}

bool local_time(const std::string& text, std::int64_t& epoch) {
    std::tm tm{};
    std::istringstream is(text);
    is >> std::get_time(&tm, kTimeFormat);
    if (is.fail()) return false;
    tm.tm_isdst = -1;
    epoch = static_cast<std::int64_t>(std::mktime(&tm));
    return true;
}

std::string now_text() {
    const std::time_t t = std::time(nullptr);
    std::tm tm{};
    localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, kTimeFormat, &tm);
    return buf;
}

std::string fixed(double v, int digits) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", digits, v);
    return buf;
}

}  // namespace

ProgressStart progress_start(const std::string& text, int world_size) {
    ProgressStart start;
    double committed = 0.0, uncommitted = 0.0;
    bool pending = false;
    std::istringstream lines(text);
    std::string line;
    while (std::getline(lines, line)) {
        const std::vector<std::string> f = split_tabs(line);
        int size = 0;
        if (f.size() < 4 || !field_value(f[2], size)) continue;
        const std::string& event = f[3];
        double flops = 0.0;
        if (event == "Saved checkpoint" && f.size() > 7 && field_value(f[7], flops)) committed = flops;
        if (event == "Saving async checkpoint" && f.size() > 7 && field_value(f[7], flops)) {
            uncommitted = flops;
            pending = true;
        }
        if (event == "Saved async checkpoint" && pending) {
            committed = uncommitted;
            pending = false;
        }
        // A job of another world size starts the count again: its throughput is another run's.
        if (size != world_size) {
            start = ProgressStart{};
            continue;
        }
        std::int64_t epoch = 0;
        if (event == "Starting job" && !start.found && local_time(f[0], epoch)) {
            start.found = true;
            start.epoch_seconds = epoch;
            start.flops = committed;
        }
    }
    return start;
}

ProgressLog::ProgressLog(std::string save_dir, int world_size, bool writes)
    : file_((fs::path(save_dir) / "progress.txt").string()),
      world_size_(world_size),
      writes_(writes),
      started_(std::chrono::steady_clock::now()) {
    if (!writes_) return;
    std::error_code ec;
    fs::create_directories(save_dir, ec);
    append("Starting job");
}

void ProgressLog::saved(const ProgressPoint& p, bool async) {
    if (!writes_) return;
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    const double per_rank = 1e12 * world_size_;
    const double job = seconds > 0 ? (p.flops - flops_at_start_) / (seconds * per_rank) : 0.0;
    // The earlier jobs' lines (and this one's "Starting job"): the cumulative figure.
    std::ifstream in(file_);
    std::stringstream text;
    text << in.rdbuf();
    const ProgressStart start = progress_start(text.str(), world_size_);
    double cumulative = job;
    if (start.found) {
        const auto elapsed = static_cast<double>(std::time(nullptr) - start.epoch_seconds);
        cumulative = elapsed > 0 ? (p.flops - start.flops) / (elapsed * per_rank) : job;
    }
    char flops[32];
    std::snprintf(flops, sizeof flops, "%.2e", p.flops);
    append(std::string(async ? "Saving async checkpoint" : "Saved checkpoint") + "\tIteration: " +
           std::to_string(p.iteration) + "\tJob throughput: " + fixed(job, 1) +
           " TFLOP/s/GPU\tCumulative throughput: " + fixed(cumulative, 1) +
           " TFLOP/s/GPU\tFloating-point operations: " + flops +
           "\tTokens (in billions): " + fixed(static_cast<double>(p.tokens) / 1e9, 2));
}

void ProgressLog::published_async(std::int64_t iteration) {
    if (writes_) append("Saved async checkpoint\tIteration: " + std::to_string(iteration));
}

void ProgressLog::deleted(std::int64_t iteration) {
    if (writes_) append("Deleted checkpoint\tIteration: " + std::to_string(iteration));
}

void ProgressLog::append(const std::string& event) {
    const char* job = std::getenv("SLURM_JOB_ID");
    std::ofstream out(file_, std::ios::app);
    out << now_text() << "\tJob ID: " << (job ? job : "") << "\t# GPUs: " << world_size_ << "\t" << event << "\n";
    out.flush();
    // A progress line is a record, not the run's state: a full disk stops the run at its
    // next checkpoint, with its own message, not here on one rank.
    if (!out.good() && !warned_) {
        GPT_LOG(warning) << "--log-progress: cannot append to " << file_ << "; the progress lines are lost";
        warned_ = true;
    }
}

}  // namespace gpt::train
