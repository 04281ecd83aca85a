// TensorBoard event files written by our own code: TFRecord framing around hand-encoded
// `Event` protobufs (TensorBoard's event.proto / summary.proto), scalars only. No protobuf or
// TensorFlow dependency: a scalar event is a few dozen bytes with five fields.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

namespace gpt::log {

// One TFRecord: u64 length (little-endian), masked CRC-32C of those 8 bytes, the payload,
// masked CRC-32C of the payload.
std::string tfrecord(std::string_view payload);

// Serialized Event{wall_time, file_version = "brain.Event:2"}: every event file's first record.
std::string file_version_event(double wall_time);
// Serialized Event{wall_time, step, summary{value{tag, simple_value}}}.
std::string scalar_event(double wall_time, std::int64_t step, std::string_view tag, float value);

// "events.out.tfevents.<unix seconds>.<hostname>.<pid>.<n>": the name TensorBoard scans for;
// n counts the writers this process opened.
std::string event_file_name(std::int64_t unix_seconds, const std::string& hostname, long pid,
                            int n);

// A new event file in `dir` (created when missing) per writer, so a restarted job never
// appends to or overwrites the file of an earlier run. add_scalar buffers (stdio); flush()
// hands the buffer to the kernel, so a killed job loses at most what came after the last
// flush. Every failure throws IoError naming the file and the reason.
class TensorboardWriter {
public:
    explicit TensorboardWriter(const std::string& dir);
    ~TensorboardWriter();  // flushes; errors there are not thrown (call flush() to see them)
    TensorboardWriter(const TensorboardWriter&) = delete;
    TensorboardWriter& operator=(const TensorboardWriter&) = delete;

    // TensorBoard's simple_value is a float: `value` is rounded to the nearest float.
    void add_scalar(const std::string& tag, double value, std::int64_t step);
    void flush();
    const std::string& path() const { return path_; }

private:
    void write_record(const std::string& payload);

    std::string path_;
    std::FILE* file_ = nullptr;
};

}  // namespace gpt::log
