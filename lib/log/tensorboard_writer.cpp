#include "log/tensorboard_writer.hpp"

#include <unistd.h>

#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/errors.hpp"
#include "log/crc32c.hpp"

namespace gpt::log {

namespace {

// Protobuf wire format: a field key is (field_number << 3) | wire_type; wire types 0 varint,
// 1 fixed64, 2 length-delimited, 5 fixed32. Fixed-width fields are little-endian.
void put_varint(std::string& out, std::uint64_t v) {
    while (v >= 0x80) {
        out.push_back(static_cast<char>((v & 0x7F) | 0x80));
        v >>= 7;
    }
    out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, int field, int wire_type) {
    put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire_type));
}

template <typename T>
void put_le(std::string& out, T v) {
    unsigned char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    if constexpr (std::endian::native == std::endian::big)
        for (std::size_t i = 0; i < sizeof(T) / 2; ++i) std::swap(b[i], b[sizeof(T) - 1 - i]);
    out.append(reinterpret_cast<const char*>(b), sizeof(T));
}

void put_bytes(std::string& out, int field, std::string_view s) {
    put_key(out, field, 2);
    put_varint(out, s.size());
    out.append(s);
}

// event.proto: Event { double wall_time = 1; int64 step = 2; string file_version = 3;
// Summary summary = 5; }. summary.proto: Summary { repeated Value value = 1; },
// Value { string tag = 1; float simple_value = 2; }.
constexpr int kEventWallTime = 1, kEventStep = 2, kEventFileVersion = 3, kEventSummary = 5;
constexpr int kSummaryValue = 1, kValueTag = 1, kValueSimpleValue = 2;

void put_wall_time(std::string& out, double wall_time) {
    put_key(out, kEventWallTime, 1);
    put_le(out, wall_time);
}

double now_seconds() {
    using namespace std::chrono;
    return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::atomic<int> g_writers{0};

}  // namespace

std::string tfrecord(std::string_view payload) {
    std::string out;
    std::string len;
    put_le(len, static_cast<std::uint64_t>(payload.size()));
    out += len;
    put_le(out, mask_crc32c(crc32c(len.data(), len.size())));
    out.append(payload);
    put_le(out, mask_crc32c(crc32c(payload.data(), payload.size())));
    return out;
}

std::string file_version_event(double wall_time) {
    std::string e;
    put_wall_time(e, wall_time);
    put_bytes(e, kEventFileVersion, "brain.Event:2");
    return e;
}

std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value) {
    std::string v;
    put_bytes(v, kValueTag, tag);
    // proto3 leaves out a scalar field at its default (+0.0, step 0), as TensorBoard's own
    // writers do; -0.0 is not the default and is written.
    if (!(value == 0.0f && !std::signbit(value))) {
        put_key(v, kValueSimpleValue, 5);
        put_le(v, value);
    }
    std::string summary;
    put_bytes(summary, kSummaryValue, v);
    std::string e;
    put_wall_time(e, wall_time);
    if (step != 0) {
        put_key(e, kEventStep, 0);
        put_varint(e, static_cast<std::uint64_t>(step));  // int64: negative steps as 10-byte varints
    }
    put_bytes(e, kEventSummary, summary);
    return e;
}

std::string event_file_name(std::int64_t unix_seconds, const std::string& hostname, long pid, int n) {
    return "events.out.tfevents." + std::to_string(unix_seconds) + "." + hostname + "." +
           std::to_string(pid) + "." + std::to_string(n);
}

TensorboardWriter::TensorboardWriter(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    GPT_REQUIRE(!ec, IoError, "cannot create --tensorboard-dir ", dir, ": ", ec.message());
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) std::strcpy(host, "localhost");
    const double now = now_seconds();
    path_ = (std::filesystem::path(dir) /
             event_file_name(static_cast<std::int64_t>(now), host, static_cast<long>(::getpid()),
                             g_writers.fetch_add(1)))
                .string();
    // "x": never reuse a file, even one another job on this host made in the same second.
    file_ = std::fopen(path_.c_str(), "wbx");
    GPT_REQUIRE(file_ != nullptr, IoError, "cannot create TensorBoard event file ", path_, ": ",
                std::strerror(errno));
    write_record(file_version_event(now));
    flush();
}

TensorboardWriter::~TensorboardWriter() {
    if (file_) std::fclose(file_);
}

void TensorboardWriter::write_record(const std::string& payload) {
    const std::string rec = tfrecord(payload);
    errno = 0;
    const std::size_t n = std::fwrite(rec.data(), 1, rec.size(), file_);
    GPT_REQUIRE(n == rec.size(), IoError, "writing TensorBoard event file ", path_, " failed: ",
                errno ? std::strerror(errno) : "short write");
}

void TensorboardWriter::add_scalar(const std::string& tag, double value, std::int64_t step) {
    write_record(scalar_event(now_seconds(), step, tag, static_cast<float>(value)));
}

void TensorboardWriter::flush() {
    errno = 0;
    GPT_REQUIRE(std::fflush(file_) == 0, IoError, "writing TensorBoard event file ", path_,
                " failed: ", errno ? std::strerror(errno) : "flush failed");
}

}  // namespace gpt::log
