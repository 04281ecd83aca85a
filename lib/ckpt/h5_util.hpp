// RAII guards, error conversion and type mapping for the HDF5 C API (internal to lib/ckpt).
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>
#include <utility>

#include "ckpt/attribute.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt::h5 {

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
public:
    using Closer = herr_t (*)(hid_t);
    Handle() = default;
    Handle(hid_t id, Closer closer) : id_(id), closer_(closer) {}
    ~Handle() { reset(); }
    Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), closer_(o.closer_) {}
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = std::exchange(o.id_, -1);
            closer_ = o.closer_;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;

    hid_t get() const { return id_; }
    // Gives the id up unclosed (only for a process that is about to be aborted).
    hid_t release_without_close() { return std::exchange(id_, -1); }
    bool valid() const { return id_ >= 0; }
    // Closes now and reports failure (a failed H5Fclose means unwritten data).
    herr_t close() {
        herr_t rc = (id_ >= 0 && closer_) ? closer_(id_) : 0;
        id_ = -1;
        return rc;
    }

private:
    void reset() {
        if (id_ >= 0 && closer_) closer_(id_);
        id_ = -1;
    }
    hid_t id_ = -1;
    Closer closer_ = nullptr;
};

// Turns HDF5's automatic error printing off: the library never prints.
void silence_errors();
// The innermost description on HDF5's error stack ("truncated file: eof = ..."), cleared after.
std::string take_error_message();

template <typename E = IoError>
hid_t check(hid_t id, const std::string& context) {
    if (id < 0) throw E(context + ": " + take_error_message());
    return id;
}
template <typename E = IoError>
void check_status(herr_t rc, const std::string& context) {
    if (rc < 0) throw E(context + ": " + take_error_message());
}

// Element types a dataset may hold: the tensor dtypes plus bytes (per-rank blobs) and int64.
enum class Stored : std::uint8_t { F32, F16, BF16, U8, I64 };
std::size_t stored_size(Stored t);
const char* stored_name(Stored t);  // "fp32", "fp16", "bf16", "u8", "i64"
bool parse_stored(const std::string& name, Stored& out);
// The HDF5 file type. fp16 and bf16 are IEEE-layout custom floats (HDF5 1.10 predefines
// neither), so h5dump prints values and h5py converts them to float16 / float32.
Handle file_type(Stored t);
bool type_matches(hid_t type, Stored t);

Handle make_plist(hid_t cls);
Handle create_simple_space(int rank, const hsize_t* dims);

void write_attribute(hid_t obj, const std::string& name, const AttributeValue& value,
                     const std::string& where);
// Every attribute of `obj` that holds an int64, a double or a string.
AttributeMap read_attributes(hid_t obj, const std::string& where);

}  // namespace gpt::ckpt::h5
