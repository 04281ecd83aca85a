#include "ckpt/h5_util.hpp"

#include <algorithm>
#include <vector>

namespace gpt::ckpt::h5 {

void silence_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

std::string take_error_message() {
    // H5E_WALK_DOWNWARD starts at the API call and ends at the frame that detected the
    // problem. Both ends matter: the outer frames say what we were doing, the innermost one
    // carries the cause (e.g. MPI-IO's "No space left on device"), so keep the two outermost
    // and the innermost frame, with HDF5's embedded newlines flattened to one line.
    std::vector<std::string> frames;
    H5Ewalk2(
        H5E_DEFAULT, H5E_WALK_DOWNWARD,
        [](unsigned, const H5E_error2_t* err, void* out) -> herr_t {
            if (err->desc && *err->desc)
                static_cast<std::vector<std::string>*>(out)->emplace_back(err->desc);
            return 0;
        },
        &frames);
    H5Eclear2(H5E_DEFAULT);
    if (frames.empty()) return "HDF5 call failed";
    if (frames.size() > 3) frames.erase(frames.begin() + 2, frames.end() - 1);
    std::string msg;
    for (const auto& f : frames) {
        if (!msg.empty()) msg += "; ";
        msg += f;
    }
    std::replace(msg.begin(), msg.end(), '\n', ' ');
    return msg;
}

std::size_t stored_size(Stored t) {
    switch (t) {
        case Stored::F32: return 4;
        case Stored::F16:
        case Stored::BF16: return 2;
        case Stored::U8: return 1;
        case Stored::I64: return 8;
    }
    return 0;
}

const char* stored_name(Stored t) {
    switch (t) {
        case Stored::F32: return "fp32";
        case Stored::F16: return "fp16";
        case Stored::BF16: return "bf16";
        case Stored::U8: return "u8";
        case Stored::I64: return "i64";
    }
    return "?";
}

bool parse_stored(const std::string& name, Stored& out) {
    for (Stored t : {Stored::F32, Stored::F16, Stored::BF16, Stored::U8, Stored::I64})
        if (name == stored_name(t)) {
            out = t;
            return true;
        }
    return false;
}

namespace {
Handle custom_float(std::size_t sign_pos, std::size_t exp_pos, std::size_t exp_bits,
                    std::size_t mant_bits, std::size_t bias) {
    Handle t(check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy"), H5Tclose);
    check_status(H5Tset_fields(t.get(), sign_pos, exp_pos, exp_bits, 0, mant_bits), "H5Tset_fields");
    check_status(H5Tset_offset(t.get(), 0), "H5Tset_offset");
    check_status(H5Tset_precision(t.get(), 16), "H5Tset_precision");
    check_status(H5Tset_size(t.get(), 2), "H5Tset_size");
    check_status(H5Tset_ebias(t.get(), bias), "H5Tset_ebias");
    return t;
}
}  // namespace

Handle file_type(Stored t) {
    switch (t) {
        case Stored::F32: return Handle(check(H5Tcopy(H5T_IEEE_F32LE), "H5Tcopy"), H5Tclose);
        case Stored::F16: return custom_float(15, 10, 5, 10, 15);
        case Stored::BF16: return custom_float(15, 7, 8, 7, 127);
        case Stored::U8: return Handle(check(H5Tcopy(H5T_STD_U8LE), "H5Tcopy"), H5Tclose);
        case Stored::I64: return Handle(check(H5Tcopy(H5T_STD_I64LE), "H5Tcopy"), H5Tclose);
    }
    GPT_THROW(InternalError, "unknown stored type");
}

bool type_matches(hid_t type, Stored t) {
    Handle expected = file_type(t);
    return H5Tequal(type, expected.get()) > 0;
}

Handle make_plist(hid_t cls) { return Handle(check(H5Pcreate(cls), "H5Pcreate"), H5Pclose); }

Handle create_simple_space(int rank, const hsize_t* dims) {
    return Handle(check(H5Screate_simple(rank, dims, nullptr), "H5Screate_simple"), H5Sclose);
}

void write_attribute(hid_t obj, const std::string& name, const AttributeValue& value,
                     const std::string& where) {
    const std::string ctx = "writing attribute '" + name + "' of " + where;
    Handle space(check(H5Screate(H5S_SCALAR), ctx), H5Sclose);
    Handle type;
    const void* buf = nullptr;
    const char* cstr = nullptr;
    if (auto* i = std::get_if<std::int64_t>(&value)) {
        type = Handle(check(H5Tcopy(H5T_STD_I64LE), ctx), H5Tclose);
        buf = i;
    } else if (auto* d = std::get_if<double>(&value)) {
        type = Handle(check(H5Tcopy(H5T_IEEE_F64LE), ctx), H5Tclose);
        buf = d;
    } else {
        // Variable-length UTF-8: h5py returns str, h5dump prints the text.
        type = Handle(check(H5Tcopy(H5T_C_S1), ctx), H5Tclose);
        check_status(H5Tset_size(type.get(), H5T_VARIABLE), ctx);
        check_status(H5Tset_cset(type.get(), H5T_CSET_UTF8), ctx);
        cstr = std::get<std::string>(value).c_str();
        buf = &cstr;
    }
    Handle attr(check(H5Acreate2(obj, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), ctx),
                H5Aclose);
    check_status(H5Awrite(attr.get(), type.get(), buf), ctx);
}

namespace {
struct AttrIterState {
    AttributeMap* out;
    std::string where;
    std::string error;
};

herr_t read_one(hid_t obj, const char* name, const H5A_info_t*, void* data) {
    auto& st = *static_cast<AttrIterState*>(data);
    hid_t attr = H5Aopen(obj, name, H5P_DEFAULT);
    if (attr < 0) {
        st.error = std::string("cannot open attribute '") + name + "'";
        return -1;
    }
    Handle a(attr, H5Aclose);
    Handle type(H5Aget_type(attr), H5Tclose);
    if (!type.valid()) return -1;
    // Every attribute we store is one value; H5Aread would write an array (or an empty
    // one's nothing) past the single value read below.
    Handle space(H5Aget_space(attr), H5Sclose);
    const hssize_t points = space.valid() ? H5Sget_simple_extent_npoints(space.get()) : -1;
    if (points != 1) {
        st.error = std::string("attribute '") + name + "' holds " + std::to_string(points) +
                   " values; this reader stores single values";
        return -1;
    }
    const H5T_class_t cls = H5Tget_class(type.get());
    herr_t rc = 0;
    if (cls == H5T_INTEGER) {
        std::int64_t v = 0;
        rc = H5Aread(attr, H5T_NATIVE_INT64, &v);
        (*st.out)[name] = v;
    } else if (cls == H5T_FLOAT) {
        double v = 0;
        rc = H5Aread(attr, H5T_NATIVE_DOUBLE, &v);
        (*st.out)[name] = v;
    } else if (cls == H5T_STRING && H5Tis_variable_str(type.get()) > 0) {
        char* s = nullptr;
        Handle mem(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(mem.get(), H5T_VARIABLE);
        H5Tset_cset(mem.get(), H5Tget_cset(type.get()));
        rc = H5Aread(attr, mem.get(), &s);
        if (rc >= 0) {
            (*st.out)[name] = std::string(s ? s : "");
            H5free_memory(s);
        }
    } else {
        st.error = std::string("attribute '") + name + "' has a type this reader does not store";
        return -1;
    }
    if (rc < 0) st.error = std::string("cannot read attribute '") + name + "': " + take_error_message();
    return rc < 0 ? -1 : 0;
}
}  // namespace

AttributeMap read_attributes(hid_t obj, const std::string& where) {
    AttributeMap out;
    AttrIterState st{&out, where, {}};
    hsize_t idx = 0;
    if (H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx, read_one, &st) < 0)
        throw DataError("reading attributes of " + where + ": " +
                        (st.error.empty() ? take_error_message() : st.error));
    return out;
}

}  // namespace gpt::ckpt::h5
