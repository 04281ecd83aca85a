// The checkpoint reader's attribute and manifest parsing, on files it did not write.
//
// Fuzzing HDF5's own file format would test libhdf5 (uninstrumented, not ours), so the
// input is a list of edits applied through the HDF5 API to a valid checkpoint that
// CheckpointWriter saved once at start-up; CheckpointReader then opens the result, reads
// every tensor, attribute and rank blob. It may refuse with DataError/IoError only.
//
// Input: records until the bytes run out (a missing byte reads as 0):
//   0 obj idx                 delete the idx-th attribute of obj (0: '/', 1: '/_checkpoint',
//                             2: the first tensor dataset)
//   1 obj name type space ... create or replace an attribute (see set_attribute below)
//   2 fix len:u16 text        replace the manifest by text; fix&1: store its checksum too
//   3 fix pos:u16 len text    replace bytes [pos, pos + len) of the manifest by text
//   4 verify                  verify&1: verify every checksum at open
#include <hdf5.h>
#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/collective.hpp"
#include "core/errors.hpp"
#include "fuzz_util.hpp"

namespace fs = std::filesystem;
using namespace gpt::ckpt;

namespace {

std::string g_template;  // the bytes of a valid checkpoint file
const char* const kNames[] = {"complete", "format_version", "iteration", "world_size", "manifest_checksum",
                              "format", "consumed_train_samples", "learning_rate", "config", "dtype"};

class Bytes {
public:
    Bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
    bool done() const { return i_ >= n_; }
    std::uint8_t u8() { return i_ < n_ ? d_[i_++] : 0; }
    std::uint16_t u16() { return static_cast<std::uint16_t>(u8() | (u8() << 8)); }
    std::string str(std::size_t len) {
        len = std::min(len, n_ - std::min(i_, n_));
        std::string s(reinterpret_cast<const char*>(d_) + i_, len);
        i_ += len;
        return s;
    }

private:
    const std::uint8_t* d_;
    std::size_t n_, i_ = 0;
};

void write_template() {
    const std::string dir = gpt::fuzz::scratch_dir() + "/template";
    std::vector<float> w(6 * 4);
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = 0.25f * static_cast<float>(i);
    std::vector<std::uint16_t> h(10, 0x3C00);  // fp16 ones
    {
        CheckpointWriter writer(MPI_COMM_SELF, dir, 7);
        writer.set_attribute("consumed_train_samples", std::int64_t{448});
        writer.set_attribute("learning_rate", 0.00015);
        writer.set_attribute("config", std::string("num-layers = 2\n"));
        writer.write({{"model/layer.0/weight", {6, 4}, gpt::DType::F32, Selection::all(), w.data()},
                      {"model/bias", {10}, gpt::DType::F16, Selection::all(), h.data()}});
        const char blob[] = "rng state";
        writer.write_rank_blob("rng", blob, sizeof blob);
        writer.commit();
    }
    std::ifstream in(checkpoint_file(dir, 7), std::ios::binary);
    g_template.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
    if (g_template.empty()) gpt::fuzz::fail("could not write the template checkpoint");
}

hid_t open_object(hid_t file, int which) {
    if (which == 0) return H5Oopen(file, "/", H5P_DEFAULT);
    if (which == 1) return H5Oopen(file, "/_checkpoint", H5P_DEFAULT);
    return H5Oopen(file, "/model/bias", H5P_DEFAULT);
}

std::string read_manifest(hid_t file) {
    hid_t d = H5Dopen2(file, "/_checkpoint/manifest", H5P_DEFAULT);
    if (d < 0) return {};
    hid_t t = H5Dget_type(d);
    std::string text;
    if (H5Tget_class(t) == H5T_STRING && H5Tis_variable_str(t) == 0) {
        text.assign(H5Tget_size(t), '\0');
        if (H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()) < 0) text.clear();
        text.resize(std::strlen(text.c_str()));
    }
    H5Tclose(t);
    H5Dclose(d);
    return text;
}

void write_manifest(hid_t file, const std::string& text, bool fix_checksum) {
    H5Ldelete(file, "/_checkpoint/manifest", H5P_DEFAULT);
    hid_t t = H5Tcopy(H5T_C_S1);
    H5Tset_size(t, std::max<std::size_t>(1, text.size()));
    hid_t s = H5Screate(H5S_SCALAR);
    hid_t d = H5Dcreate2(file, "/_checkpoint/manifest", t, s, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    std::string buf = text;
    buf.resize(std::max<std::size_t>(1, text.size()), '\0');
    if (d >= 0) {
        H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data());
        H5Dclose(d);
    }
    H5Sclose(s);
    H5Tclose(t);
    if (!fix_checksum) return;
    // The reader stores what it compares: the checksum of the text up to its first NUL.
    const std::string stored(buf.c_str());
    const std::int64_t sum = static_cast<std::int64_t>(fnv1a(stored.data(), stored.size()));
    hid_t g = H5Oopen(file, "/_checkpoint", H5P_DEFAULT);
    H5Adelete(g, "manifest_checksum");
    hid_t as = H5Screate(H5S_SCALAR);
    hid_t a = H5Acreate2(g, "manifest_checksum", H5T_STD_I64LE, as, H5P_DEFAULT, H5P_DEFAULT);
    if (a >= 0) {
        H5Awrite(a, H5T_NATIVE_INT64, &sum);
        H5Aclose(a);
    }
    H5Sclose(as);
    H5Oclose(g);
}

// An attribute of a type and shape chosen by the input, holding the input's bytes.
void set_attribute(hid_t file, Bytes& in) {
    hid_t obj = open_object(file, in.u8() % 3);
    if (obj < 0) return;
    const std::uint8_t pick = in.u8();
    const std::string name = pick < 0xC0 ? kNames[pick % std::size(kNames)] : in.str(pick % 12);
    const std::uint8_t type_code = in.u8() % 12;
    const std::uint8_t space_code = in.u8() % 4;
    hsize_t dims[2] = {hsize_t(in.u8() % 5), hsize_t(in.u8() % 3 + 1)};
    hid_t space = space_code == 0 ? H5Screate(H5S_SCALAR)
                : space_code == 1 ? H5Screate(H5S_NULL)
                                  : H5Screate_simple(space_code == 2 ? 1 : 2, dims, nullptr);
    hid_t type = -1;
    bool vlen = false;
    switch (type_code) {
        case 0: type = H5Tcopy(H5T_STD_I64LE); break;
        case 1: type = H5Tcopy(H5T_STD_I32BE); break;
        case 2: type = H5Tcopy(H5T_STD_U8LE); break;
        case 3: type = H5Tcopy(H5T_STD_U64LE); break;
        case 4: type = H5Tcopy(H5T_IEEE_F64LE); break;
        case 5: type = H5Tcopy(H5T_IEEE_F32BE); break;
        case 6:
        case 7:  // variable-length string, UTF-8 or ASCII
            type = H5Tcopy(H5T_C_S1);
            H5Tset_size(type, H5T_VARIABLE);
            H5Tset_cset(type, type_code == 6 ? H5T_CSET_UTF8 : H5T_CSET_ASCII);
            vlen = true;
            break;
        case 8:  // fixed-length string
            type = H5Tcopy(H5T_C_S1);
            H5Tset_size(type, in.u8() % 9 + 1);
            break;
        case 9: {  // compound {i64, f64}
            type = H5Tcreate(H5T_COMPOUND, 16);
            H5Tinsert(type, "a", 0, H5T_STD_I64LE);
            H5Tinsert(type, "b", 8, H5T_IEEE_F64LE);
            break;
        }
        case 10: {  // array of 3 i64
            const hsize_t n = 3;
            type = H5Tarray_create2(H5T_STD_I64LE, 1, &n);
            break;
        }
        default: type = H5Tcopy(H5T_STD_I8LE); break;
    }
    H5Adelete(obj, name.c_str());
    hid_t attr = H5Acreate2(obj, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT);
    if (attr >= 0) {
        const hssize_t points = H5Sget_simple_extent_npoints(space);
        const std::size_t n = points > 0 ? static_cast<std::size_t>(points) : 0;
        if (vlen) {
            std::vector<std::string> strs;
            std::vector<const char*> ptrs;
            for (std::size_t i = 0; i < n; ++i) strs.push_back(in.str(in.u8() % 24));
            for (auto& s : strs) ptrs.push_back(s.c_str());
            if (n) H5Awrite(attr, type, ptrs.data());
        } else {
            std::string raw = in.str(H5Tget_size(type) * n);
            raw.resize(H5Tget_size(type) * n, '\0');
            if (n) H5Awrite(attr, type, raw.data());
        }
        H5Aclose(attr);
    }
    H5Tclose(type);
    H5Sclose(space);
    H5Oclose(obj);
}

void delete_attribute(hid_t file, Bytes& in) {
    hid_t obj = open_object(file, in.u8() % 3);
    if (obj < 0) return;
    hsize_t count = 0, idx = 0;
    H5Aiterate2(obj, H5_INDEX_NAME, H5_ITER_INC, &idx,
                [](hid_t, const char*, const H5A_info_t*, void* n) -> herr_t {
                    ++*static_cast<hsize_t*>(n);
                    return 0;
                },
                &count);
    if (count > 0) H5Adelete_by_idx(obj, ".", H5_INDEX_NAME, H5_ITER_INC, in.u8() % count, H5P_DEFAULT);
    H5Oclose(obj);
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
    int provided = 0;
    MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided);
    std::atexit([] { MPI_Finalize(); });
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    write_template();
    return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const fs::path dir = fs::path(gpt::fuzz::scratch_dir()) / "case";
    const fs::path file = checkpoint_file(dir, 7);
    fs::create_directories(file.parent_path());
    gpt::fuzz::write_file(file.string(), g_template);
    Bytes in(data, size);
    ReaderOptions options;
    {
        hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
        if (f < 0) gpt::fuzz::fail("cannot open the template copy");
        for (int records = 0; !in.done() && records < 16; ++records) {
            switch (in.u8() % 5) {
                case 0: delete_attribute(f, in); break;
                case 1: set_attribute(f, in); break;
                case 2: {
                    const bool fix = in.u8() & 1;
                    write_manifest(f, in.str(in.u16() % 2048), fix);
                    break;
                }
                case 3: {
                    const bool fix = in.u8() & 1;
                    std::string text = read_manifest(f);
                    const std::size_t pos = text.empty() ? 0 : in.u16() % (text.size() + 1);
                    const std::size_t len = std::min<std::size_t>(in.u8() % 8, text.size() - pos);
                    text.replace(pos, len, in.str(in.u8() % 8));
                    write_manifest(f, text, fix);
                    break;
                }
                default: options.verify_all_at_open = in.u8() & 1; break;
            }
        }
        H5Fclose(f);
    }
    H5Eclear2(H5E_DEFAULT);
    try {
        CheckpointReader reader(MPI_COMM_SELF, file.string(), options);
        for (const auto& [name, value] : reader.attributes()) {
            if (std::holds_alternative<std::int64_t>(value)) (void)reader.attribute_int(name);
            else if (std::holds_alternative<double>(value)) (void)reader.attribute_double(name);
            else (void)reader.attribute_string(name);
        }
        std::vector<std::vector<unsigned char>> bufs;
        std::vector<TensorSliceOut> slices;
        for (const std::string& name : reader.tensor_names()) {
            const TensorInfo info = reader.tensor_info(name);
            const gpt::DType dt = info.dtype;
            std::int64_t n = 1;
            for (auto d : info.shape) n *= d;
            bufs.emplace_back(static_cast<std::size_t>(n) * gpt::dtype_size(dt));
            slices.push_back({name, info.shape, dt, Selection::all(), bufs.back().data()});
        }
        reader.read(slices);
        if (reader.has_rank_blob("rng")) (void)reader.read_rank_blob("rng", 0);
    } catch (const gpt::DataError&) {
    } catch (const gpt::IoError&) {
    }
    return 0;
}
