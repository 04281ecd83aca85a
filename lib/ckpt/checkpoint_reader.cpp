#include "ckpt/checkpoint_reader.hpp"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <algorithm>
#include <map>

#include "ckpt/checksum.hpp"
#include "ckpt/collective.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/direct_reads.hpp"
#include "ckpt/format.hpp"
#include "ckpt/h5_util.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/reader_impl.hpp"
#include "core/watchdog_deadline.hpp"

namespace gpt::ckpt {

namespace {
std::string hex(std::uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "0x%016" PRIx64, v);
    return buf;
}

// Where a dataset's elements start in the file, when they lie there as one plain run of
// bytes (contiguous layout, no external storage, allocated); else kNoOffset.
std::uint64_t contiguous_offset(hid_t dset) {
    constexpr std::uint64_t none = ~std::uint64_t{0};
    const hid_t dcpl = H5Dget_create_plist(dset);
    if (dcpl < 0) return none;
    const bool plain = H5Pget_layout(dcpl) == H5D_CONTIGUOUS && H5Pget_external_count(dcpl) == 0;
    H5Pclose(dcpl);
    const haddr_t addr = plain ? H5Dget_offset(dset) : HADDR_UNDEF;
    H5Eclear2(H5E_DEFAULT);
    return addr == HADDR_UNDEF ? none : static_cast<std::uint64_t>(addr);
}
}  // namespace

void CheckpointReader::Impl::open_and_validate() {
    GPT_REQUIRE(std::filesystem::exists(path), IoError, "checkpoint file ", path, " does not exist");
    h5::Handle fapl = h5::make_plist(H5P_FILE_ACCESS);
    {
        // HDF5 keeps its own MPI_Comm_dup of the communicator: a blocking collective.
        watchdog::BlockedScope blocked("H5Pset_fapl_mpio (HDF5's MPI_Comm_dup of the checkpoint reader's communicator)");
        h5::check_status(H5Pset_fapl_mpio(fapl.get(), comm, opts.info), "H5Pset_fapl_mpio");
    }
    // Rank 0 reads each piece of metadata and broadcasts it, instead of N ranks asking.
    h5::check_status(H5Pset_all_coll_metadata_ops(fapl.get(), true), "H5Pset_all_coll_metadata_ops");
    // HDF5's MPI-IO driver opens the file and reads its metadata collectively inside the
    // call: bounded by the watchdog's deadline monitor, not by a polled wait.
    hid_t opened = -1;
    {
        watchdog::BlockedScope blocked("H5Fopen of the checkpoint file (MPI-IO, collective metadata reads)");
        opened = H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get());
    }
    file = h5::Handle(h5::check<DataError>(opened, "checkpoint " + path + " is not a readable HDF5 file (truncated or damaged?)"),
                      H5Fclose);
    dxpl_collective = h5::make_plist(H5P_DATASET_XFER);
    h5::check_status(H5Pset_dxpl_mpio(dxpl_collective.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
    dxpl_independent = h5::make_plist(H5P_DATASET_XFER);
    h5::check_status(H5Pset_dxpl_mpio(dxpl_independent.get(), H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio");

    GPT_REQUIRE(H5Lexists(file.get(), kReservedGroup, H5P_DEFAULT) > 0, DataError, "checkpoint ", path,
                " has no /_checkpoint group: not a gpt-pretrain checkpoint, or its save never finished");
    h5::Handle group(h5::check<DataError>(H5Gopen2(file.get(), kReservedGroup, H5P_DEFAULT), "opening /_checkpoint of " + path),
                     H5Gclose);
    const AttributeMap meta = h5::read_attributes(group.get(), "/_checkpoint of " + path);
    auto get_int = [&](const char* name) -> std::int64_t {
        auto it = meta.find(name);
        GPT_REQUIRE(it != meta.end() && std::holds_alternative<std::int64_t>(it->second), DataError, "checkpoint ",
                    path, ": attribute /_checkpoint/", name, " is missing (incomplete or damaged save)");
        return std::get<std::int64_t>(it->second);
    };
    GPT_REQUIRE(meta.count("complete") && get_int("complete") == 1, DataError, "checkpoint ", path,
                " is incomplete: the 'complete' marker was never written (the save was interrupted)");
    const std::int64_t version = get_int("format_version");
    GPT_REQUIRE(version >= kOldestReadableVersion && version <= kFormatVersion, DataError, "checkpoint ", path,
                " has format version ", version, "; this build reads versions ", kOldestReadableVersion, " to ",
                kFormatVersion, version > kFormatVersion ? " (it was written by a newer build)" : "");
    iteration = get_int("iteration");
    world = static_cast<int>(get_int("world_size"));

    const std::string mwhere = where("_checkpoint/manifest");
    GPT_REQUIRE(H5Lexists(group.get(), "manifest", H5P_DEFAULT) > 0, DataError, mwhere, " is missing");
    h5::Handle mset(h5::check<DataError>(H5Dopen2(group.get(), "manifest", H5P_DEFAULT), "opening " + mwhere), H5Dclose);
    h5::Handle mtype(h5::check<DataError>(H5Dget_type(mset.get()), mwhere), H5Tclose);
    GPT_REQUIRE(H5Tget_class(mtype.get()) == H5T_STRING && H5Tis_variable_str(mtype.get()) == 0, DataError, mwhere,
                " is not a fixed-length string");
    std::string text(H5Tget_size(mtype.get()), '\0');
    h5::check_status<DataError>(H5Dread(mset.get(), mtype.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, text.data()),
                                "reading " + mwhere);
    text.resize(std::strlen(text.c_str()));
    GPT_REQUIRE(static_cast<std::int64_t>(fnv1a(text.data(), text.size())) == get_int("manifest_checksum"),
                DataError, mwhere, " does not match its checksum (the file is damaged)");
    manifest = parse_manifest(text, path);

    hsize_t userblock = 0;
    {
        h5::Handle fcpl(h5::check<DataError>(H5Fget_create_plist(file.get()), "the creation properties of " + path),
                        H5Pclose);
        h5::check_status<DataError>(H5Pget_userblock(fcpl.get(), &userblock), "the user block of " + path);
    }
    offsets.clear();
    for (std::size_t i = 0; i < manifest.size(); ++i) {
        const ManifestEntry& e = manifest[i];
        index[e.name] = i;
        const std::string w = where(e.name);
        // H5Lexists fails on a missing intermediate group, so walk the path.
        bool present = true;
        for (std::size_t p = e.name.find('/'); present; p = e.name.find('/', p + 1)) {
            const std::string prefix = e.name.substr(0, p);
            present = H5Lexists(file.get(), prefix.c_str(), H5P_DEFAULT) > 0;
            if (p == std::string::npos) break;
        }
        H5Eclear2(H5E_DEFAULT);
        GPT_REQUIRE(present, DataError, w, " is listed in the manifest but missing from the file");
        h5::Handle d(h5::check<DataError>(H5Dopen2(file.get(), e.name.c_str(), H5P_DEFAULT), "opening " + w), H5Dclose);
        h5::Handle space(h5::check<DataError>(H5Dget_space(d.get()), w), H5Sclose);
        const int nd = H5Sget_simple_extent_ndims(space.get());
        std::vector<hsize_t> dims(nd > 0 ? nd : 0);
        if (nd > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
        const Shape shape(dims.begin(), dims.end());
        GPT_REQUIRE(shape == e.shape, DataError, w, " has shape ", shape_string(shape), ", the manifest says ",
                    shape_string(e.shape));
        h5::Handle type(h5::check<DataError>(H5Dget_type(d.get()), w), H5Tclose);
        GPT_REQUIRE(h5::type_matches(type.get(), e.type), DataError, w, " does not hold ", h5::stored_name(e.type),
                    " elements as the manifest says");
        offsets.push_back(userblock == 0 ? contiguous_offset(d.get()) : kNoOffset);
    }
    h5::Handle root(h5::check<DataError>(H5Gopen2(file.get(), "/", H5P_DEFAULT), "opening / of " + path), H5Gclose);
    attrs = h5::read_attributes(root.get(), "/ of checkpoint " + path);
    if (version >= 2) {
        const std::int64_t stored = get_int("attributes_checksum");
        const std::int64_t found = static_cast<std::int64_t>(attributes_checksum(attrs, iteration, world));
        GPT_REQUIRE(found == stored, DataError, "checkpoint ", path,
                    " is damaged: its attributes (iteration, consumed samples, scheduler and loss-scaler state, "
                    "config) do not match /_checkpoint/attributes_checksum (stored ",
                    hex(static_cast<std::uint64_t>(stored)), ", found ", hex(static_cast<std::uint64_t>(found)), ")");
    }
    verified.assign(manifest.size(), 0);
}

h5::Handle CheckpointReader::Impl::open_dataset(const ManifestEntry& e) {
    return h5::Handle(h5::check<DataError>(H5Dopen2(file.get(), e.name.c_str(), H5P_DEFAULT), "opening " + where(e.name)),
                      H5Dclose);
}

void CheckpointReader::Impl::read_open(hid_t dset, const ManifestEntry& e, const Selection& sel, void* out,
                                       bool collective) {
    const std::string w = where(e.name);
    h5::Handle ftype = h5::file_type(e.type);
    h5::Handle fsel = file_selection(e.shape, sel, w);
    const std::int64_t n = sel.num_elements(e.shape);
    h5::Handle msel = memory_selection(n, w);
    unsigned char dummy = 0;
    collective = collective || opts.io_mode == IoMode::Collective;
    PhaseTimer t(Phase::LoadRead);
    h5::check_status<DataError>(H5Dread(dset, ftype.get(), msel.get(), fsel.get(),
                                        collective ? dxpl_collective.get() : dxpl_independent.get(),
                                        n > 0 ? out : &dummy),
                                "reading " + w);
}

void CheckpointReader::Impl::read_raw(const ManifestEntry& e, const Selection& sel, void* out, bool collective) {
    h5::Handle d = open_dataset(e);
    read_open(d.get(), e, sel, out, collective);
}

namespace {
std::string mismatch_text(const std::string& name, std::uint64_t stored, std::uint64_t found) {
    return "'" + name + "' (manifest " + hex(stored) + ", data " + hex(found) + ")";
}
}  // namespace

void CheckpointReader::Impl::verify_entries(const std::vector<std::size_t>& which) {
    // Each rank reads an equal flat share of every dataset (elements [n*rank/size,
    // n*(rank+1)/size): disjoint, together the whole) and checksums it; the partial sums add
    // up to each dataset's checksum (see checksum.hpp). Together with the attributes'
    // checksum (checked at open) this covers everything the save wrote.
    std::vector<std::uint64_t> partial(which.size(), 0);
    std::vector<unsigned char> buf;
    // Contiguous datasets: every rank's shares in one sweep over the file, whole pages with
    // O_DIRECT, summed straight out of the bounce buffers (DirectReads).
    DirectReads direct(path, opts.readahead_bytes);
    std::vector<std::size_t> through_hdf5;
    for (std::size_t k = 0; k < which.size(); ++k) {
        const ManifestEntry& e = manifest[which[k]];
        const std::int64_t n = num_elements(e.shape);
        const std::size_t esize = h5::stored_size(e.type);
        const std::int64_t lo = n * rank / size, hi = n * (rank + 1) / size;
        if (opts.direct_reads && offsets[which[k]] != kNoOffset) {
            const std::uint64_t a = static_cast<std::uint64_t>(lo) * esize, b = static_cast<std::uint64_t>(hi) * esize;
            direct.add(k, &e.name, offsets[which[k]] + a, a, nullptr, static_cast<std::size_t>(b - a));
        } else {
            through_hdf5.push_back(k);
        }
    }
    // A rank whose reads fail (a truncated file) still takes part in the collective steps
    // below, then every rank throws together.
    std::exception_ptr direct_error;
    try {
        direct.run(&partial, nullptr);
    } catch (...) {
        direct_error = std::current_exception();
    }
    // The rest (ReaderOptions::direct_reads off, or no contiguous allocation: empty datasets
    // and files with a user block) through HDF5, the same number of rounds on every rank
    // (the dataset opens in read_raw are collective metadata operations).
    for (std::size_t k : through_hdf5) {
        const ManifestEntry& e = manifest[which[k]];
        const std::int64_t n = num_elements(e.shape);
        const std::size_t esize = h5::stored_size(e.type);
        const std::int64_t lo = n * rank / size, hi = n * (rank + 1) / size;
        const std::int64_t per_rank_max = (n + size - 1) / size;
        const std::int64_t chunk = std::max<std::int64_t>(1, static_cast<std::int64_t>(opts.verify_chunk_bytes / esize));
        const std::int64_t rounds = (per_rank_max + chunk - 1) / chunk;
        for (std::int64_t r = 0; r < rounds; ++r) {
            const std::int64_t a = std::min(hi, lo + r * chunk), b = std::min(hi, a + chunk);
            buf.resize(static_cast<std::size_t>(b - a) * esize);
            read_raw(e, Selection::flat(a, b - a), buf.data());
            PhaseTimer t(Phase::LoadVerify);
            if (b > a)
                partial[k] = checksum_add(partial[k], checksum_bytes(static_cast<std::uint64_t>(a) * esize, buf.data(), buf.size()));
        }
    }
    PhaseTimer agree_timer(Phase::LoadAgree);
    agree_on_error(comm, direct_error);
    const std::vector<std::uint64_t> total = allreduce_checksums(comm, partial);
    std::string bad;
    int nbad = 0;
    for (std::size_t k = 0; k < which.size(); ++k) {
        const ManifestEntry& e = manifest[which[k]];
        if (total[k] != e.checksum && nbad++ < 5) bad += (nbad > 1 ? "; " : "") + mismatch_text(e.name, e.checksum, total[k]);
    }
    GPT_REQUIRE(nbad == 0, DataError, "checkpoint ", path, " is damaged: checksum mismatch in ", nbad,
                " dataset(s): ", bad);
    for (std::size_t k : which) verified[k] = 1;
}

CheckpointReader::CheckpointReader(MPI_Comm comm, const std::string& file, const ReaderOptions& options)
    : impl_(std::make_unique<Impl>()) {
    Impl& s = *impl_;
    h5::silence_errors();
    {
        watchdog::BlockedScope blocked("MPI_Comm_dup (the checkpoint reader's communicator)");
        MPI_Comm_dup(comm, &s.comm);
    }
    MPI_Comm_rank(s.comm, &s.rank);
    MPI_Comm_size(s.comm, &s.size);
    s.path = file;
    s.opts = options;
    try {
        // Metadata is read collectively (rank 0 reads, all receive), so every rank meets
        // the same problem at the same step; agreeing once at the end is enough.
        PhaseTimer t(Phase::LoadOpen);
        collectively(s.comm, [&] { s.open_and_validate(); });
        t.stop();
        if (s.opts.verify_all_at_open) verify_all();
    } catch (...) {
        s.file.close();
        MPI_Comm_free(&s.comm);
        impl_.reset();
        throw;
    }
}

CheckpointReader::~CheckpointReader() {
    if (!impl_) return;
    if (std::uncaught_exceptions() > 0) {  // see ~CheckpointWriter: never hang while aborting
        (void)impl_->file.release_without_close();
        return;
    }
    PhaseTimer t(Phase::LoadClose);
    impl_->dxpl_collective.close();
    impl_->dxpl_independent.close();
    impl_->file.close();
    MPI_Comm_free(&impl_->comm);
}

const std::string& CheckpointReader::file() const { return impl_->path; }
std::int64_t CheckpointReader::iteration() const { return impl_->iteration; }
int CheckpointReader::saved_world_size() const { return impl_->world; }

std::vector<std::string> CheckpointReader::tensor_names() const {
    std::vector<std::string> out;
    for (const auto& e : impl_->manifest)
        if (e.name.rfind(kReservedGroup, 0) != 0) out.push_back(e.name);
    return out;
}

bool CheckpointReader::Impl::has_tensor(const std::string& name) const {
    return name.rfind(kReservedGroup, 0) != 0 && index.count(name) > 0;
}

TensorInfo CheckpointReader::Impl::tensor_info(const std::string& name) const {
    const ManifestEntry& e = entry(name);
    TensorInfo info{e.shape, DType::F32};
    GPT_REQUIRE(tensor_dtype(e.type, info.dtype), DataError, where(name), " is not a tensor");
    return info;
}

bool CheckpointReader::has_tensor(const std::string& name) const { return impl_->has_tensor(name); }
TensorInfo CheckpointReader::tensor_info(const std::string& name) const { return impl_->tensor_info(name); }

const AttributeMap& CheckpointReader::attributes() const { return impl_->attrs; }
bool CheckpointReader::has_attribute(const std::string& name) const { return impl_->attrs.count(name) > 0; }

namespace {
template <typename T>
T get_attr(const AttributeMap& attrs, const std::string& name, const std::string& path, const char* type) {
    auto it = attrs.find(name);
    GPT_REQUIRE(it != attrs.end(), DataError, "checkpoint ", path, " has no attribute '", name, "'");
    const T* v = std::get_if<T>(&it->second);
    GPT_REQUIRE(v != nullptr, DataError, "checkpoint ", path, ": attribute '", name, "' is not ", type);
    return *v;
}

}  // namespace

std::int64_t CheckpointReader::attribute_int(const std::string& name) const {
    return get_attr<std::int64_t>(impl_->attrs, name, impl_->path, "an integer");
}
double CheckpointReader::attribute_double(const std::string& name) const {
    return get_attr<double>(impl_->attrs, name, impl_->path, "a floating-point number");
}
std::string CheckpointReader::attribute_string(const std::string& name) const {
    return get_attr<std::string>(impl_->attrs, name, impl_->path, "a string");
}

// Plan (check the request, choose each tensor's path), execute (read), verify (settle the
// checksums): read_plan.cpp, read_execute.cpp, read_verify.cpp.
void CheckpointReader::read(const std::vector<TensorSliceOut>& slices) {
    Impl& s = *impl_;
    const ReadPlan plan = s.plan_read(slices);
    const ReadSums sums = s.execute_read(plan, slices);
    s.verify_read(plan, slices, sums);
}

CheckpointReader::ReadStats CheckpointReader::stats() const { return impl_->stats; }

void CheckpointReader::verify_unread() {
    Impl& s = *impl_;
    std::vector<std::size_t> rest;
    for (std::size_t i = 0; i < s.manifest.size(); ++i)
        if (!s.verified[i]) rest.push_back(i);
    if (!rest.empty()) collectively(s.comm, [&] { s.verify_entries(rest); });
}

void CheckpointReader::verify_all() {
    Impl& s = *impl_;
    std::vector<std::size_t> all(s.manifest.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    collectively(s.comm, [&] { s.verify_entries(all); });
}

bool CheckpointReader::has_rank_blob(const std::string& name) const {
    return impl_->index.count(blob_group(name) + "/bytes") > 0;
}

std::vector<std::byte> CheckpointReader::read_rank_blob(const std::string& name, int source_rank) {
    Impl& s = *impl_;
    const std::string base = blob_group(name);
    collectively(s.comm, [&] {
        GPT_REQUIRE(has_rank_blob(name), DataError, "checkpoint ", s.path, " has no rank blob '", name, "'");
        GPT_REQUIRE(source_rank >= 0 && source_rank < s.world, InternalError, "rank blob '", name, "': rank ",
                    source_rank, " requested but the checkpoint was saved by ", s.world, " ranks");
    });
    // Blobs are small: check both datasets whole rather than track who reads which bytes.
    if (s.opts.verify_checksums)
        collectively(s.comm, [&] { s.verify_entries({s.index.at(base + "/offsets"), s.index.at(base + "/bytes")}); });
    const ManifestEntry& offsets_entry = s.entry(base + "/offsets");
    std::vector<std::int64_t> offsets(static_cast<std::size_t>(offsets_entry.shape[0]));
    collectively(s.comm, [&] { s.read_raw(offsets_entry, Selection::all(), offsets.data()); });
    const ManifestEntry& bytes_entry = s.entry(base + "/bytes");
    std::vector<std::byte> out;
    collectively(s.comm, [&] {
        GPT_REQUIRE(static_cast<int>(offsets.size()) == s.world + 1, DataError, s.where(base + "/offsets"),
                    " has ", offsets.size(), " entries for ", s.world, " ranks");
        const std::int64_t a = offsets[source_rank], b = offsets[source_rank + 1];
        GPT_REQUIRE(0 <= a && a <= b && b <= bytes_entry.shape[0], DataError, s.where(base + "/offsets"),
                    " is damaged: rank ", source_rank, " spans [", a, ", ", b, ")");
        out.resize(static_cast<std::size_t>(b - a));
    });
    const std::int64_t a = offsets[source_rank];
    collectively(s.comm, [&] {
        s.read_raw(bytes_entry, Selection::flat(a, static_cast<std::int64_t>(out.size())), out.data());
    });
    return out;
}

}  // namespace gpt::ckpt
