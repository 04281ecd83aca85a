#include "ckpt/format.hpp"

#include <cstring>

#include "ckpt/collective.hpp"
#include "ckpt/manifest.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

std::string blob_group(const std::string& name) {
    return std::string(kReservedGroup) + "/rank_blobs/" + name;
}

h5::Stored stored_type(DType t) {
    switch (t) {
        case DType::F32: return h5::Stored::F32;
        case DType::F16: return h5::Stored::F16;
        case DType::BF16: return h5::Stored::BF16;
    }
    GPT_THROW(InternalError, "unknown DType");
}

bool tensor_dtype(h5::Stored t, DType& out) {
    switch (t) {
        case h5::Stored::F32: out = DType::F32; return true;
        case h5::Stored::F16: out = DType::F16; return true;
        case h5::Stored::BF16: out = DType::BF16; return true;
        default: return false;
    }
}

namespace {
void put(std::string& out, const void* p, std::size_t n) { out.append(static_cast<const char*>(p), n); }
void put_string(std::string& out, const std::string& s) {
    const std::uint64_t n = s.size();
    put(out, &n, sizeof n);
    out += s;
}
struct Cursor {
    const std::string& in;
    std::size_t pos = 0;
    void get(void* p, std::size_t n) {
        GPT_ASSERT(pos + n <= in.size(), "attribute encoding truncated");
        std::memcpy(p, in.data() + pos, n);
        pos += n;
    }
    std::string get_string() {
        std::uint64_t n = 0;
        get(&n, sizeof n);
        GPT_ASSERT(pos + n <= in.size(), "attribute encoding truncated");
        std::string s = in.substr(pos, n);
        pos += n;
        return s;
    }
};
}  // namespace

std::string encode_attributes(const AttributeMap& attrs) {
    std::string out;
    for (const auto& [name, value] : attrs) {
        const char kind = static_cast<char>(value.index());
        out += kind;
        put_string(out, name);
        if (auto* i = std::get_if<std::int64_t>(&value)) put(out, i, sizeof *i);
        else if (auto* d = std::get_if<double>(&value)) put(out, d, sizeof *d);
        else put_string(out, std::get<std::string>(value));
    }
    return out;
}

AttributeMap decode_attributes(const std::string& bytes) {
    AttributeMap out;
    Cursor c{bytes};
    while (c.pos < bytes.size()) {
        char kind = 0;
        c.get(&kind, 1);
        std::string name = c.get_string();
        if (kind == 0) {
            std::int64_t v;
            c.get(&v, sizeof v);
            out[name] = v;
        } else if (kind == 1) {
            double v;
            c.get(&v, sizeof v);
            out[name] = v;
        } else {
            out[name] = c.get_string();
        }
    }
    return out;
}

std::uint64_t attributes_checksum(const AttributeMap& root, std::int64_t iteration, std::int64_t world_size) {
    // '/' cannot start a root attribute's name, so these keys never collide with the trainer's.
    AttributeMap all = root;
    all["/_checkpoint/iteration"] = iteration;
    all["/_checkpoint/world_size"] = world_size;
    const std::string bytes = encode_attributes(all);
    return fnv1a(bytes.data(), bytes.size());
}

}  // namespace gpt::ckpt
