#include "ckpt/checkpoint_writer.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <deque>
#include <exception>
#include <optional>
#include <random>
#include <set>
#include <stop_token>
#include <system_error>
#include <thread>

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/checksum.hpp"
#include "ckpt/checksum_worker.hpp"
#include "ckpt/collective.hpp"
#include "ckpt/dataset_io.hpp"
#include "ckpt/direct_writes.hpp"
#include "ckpt/format.hpp"
#include "ckpt/h5_util.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/strided_exchange.hpp"
#include "ckpt/write_plan.hpp"
#include "core/environment.hpp"
#include "core/watchdog_deadline.hpp"

namespace gpt::ckpt {

struct CheckpointWriter::Impl {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1;
    int node_rank = 0;  // among the ranks on this host: 0 flushes the host's page cache
    fs::path root, tmp, final_dir;
    std::string file_path;
    std::int64_t iteration = 0;
    WriterOptions opts;
    bool strided_collective = true;  // Auto: collective I/O for strided tensors
    h5::Handle file, dxpl_collective, dxpl_independent;
    AttributeMap attrs;
    std::vector<ManifestEntry> manifest;
    std::vector<std::uint64_t> local_sums;  // this rank's partial checksum per manifest entry
    std::set<std::string> names;
    bool committed = false;
    int keep_last = 0;
    // The independent pieces: written at the end of each write() call, or with
    // options.background by a helper thread that commit_in_background() starts.
    std::unique_ptr<DirectWrites> direct;
    std::deque<std::vector<unsigned char>> owned;  // copies of small buffers (blob offsets)
    std::vector<std::shared_ptr<void>> exchanged;  // strided tensors' domains (StridedExchange), read by `direct`
    WriteStats stats;
    void count_run() {
        stats.direct_bytes += direct->direct_bytes();
        stats.buffered_bytes += direct->buffered_bytes();
    }
    std::jthread background;                        // runs direct->run(); joined by finish_commit()
    std::atomic<bool> background_done{false};
    std::exception_ptr background_error;

    std::string where(const std::string& dataset) const {
        return "dataset '" + dataset + "' of " + file_path;
    }

    using Item = WriteItem;
    // Collective: creates every dataset (adding its manifest entry, checksum to come) and
    // writes this rank's selections, adding their partial checksums to local_sums. Phases
    // keep synchronisation off the data path: all creates (metadata, collective), the
    // collective-I/O tensors, then each rank streams its independent pieces (DirectWrites)
    // without waiting for anyone (or queues them, in background mode), and the ranks agree
    // on errors once at the end. Plan (write_plan.hpp), execute (the three below), verify.
    void write_batch(const std::vector<Item>& items);
    // Collective: H5Dcreate2 of every item, allocated at once (its file offset is known).
    void create_datasets(const std::vector<Item>& items, std::vector<h5::Handle>& dsets,
                         std::vector<h5::Handle>& ftypes);
    // Collective: the WritePath::Collective datasets through HDF5, checksummed here.
    void write_collective(const std::vector<Item>& items, const WritePlan& plan, const std::vector<h5::Handle>& dsets,
                          const std::vector<h5::Handle>& ftypes);
    // Collective (the exchanges): the Exchange and Direct datasets' runs, queued on
    // `direct` and, unless in background mode, written now.
    void write_independent(const std::vector<Item>& items, const WritePlan& plan, const std::vector<h5::Handle>& dsets);
    hid_t dxpl(bool collective) const {
        return collective ? dxpl_collective.get() : dxpl_independent.get();
    }
    void finish_file();
};

namespace {
std::string make_tag(MPI_Comm comm, int rank) {
    std::string tag;
    if (rank == 0) {
        const char* job = std::getenv("SLURM_JOB_ID");
        std::random_device rd;
        tag = (job ? std::string(job) + "-" : std::string()) + std::to_string(rd() % 1000000000u);
    }
    return broadcast_string(comm, tag, 0);
}

// GPT_TEST_STALL_IN_SAVE (core/environment.hpp): this rank stops before HDF5's collective
// file set-up, so a test sees the other ranks blocked inside it ended by the watchdog's
// deadline monitor. Sleeping (no wait of ours) keeps this rank's own watchdog out of it.
void stall_if_asked(int rank) {
    const std::optional<int> stalled = env::test_stall_in_save();
    if (!stalled || *stalled != rank) return;
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// The caller's MPI-IO hints plus ours where the caller set none (the caller frees it).
MPI_Info writer_hints(MPI_Info user) {
    MPI_Info info = MPI_INFO_NULL;
    if (user == MPI_INFO_NULL) MPI_Info_create(&info);
    else MPI_Info_dup(user, &info);
    auto set_default = [&](const char* key, const char* value) {
        int len = 0, found = 0;
        MPI_Info_get_valuelen(info, key, &len, &found);
        if (!found) MPI_Info_set(info, key, value);
    };
    // ROMIO's data sieving turns a strided write into a read-modify-write of 512 KiB blocks
    // under a file lock. The ranks write disjoint bytes, so plain writes of each run are
    // safe. It costs most in the collective metadata write at H5Fclose (HDF5's metadata lies
    // scattered between the 1 MiB-aligned datasets): 0.05 s -> 0.005 s at 1-2 ranks. For the
    // row-parallel slices on one node the difference was within noise.
    set_default("romio_ds_write", "disable");
    return info;
}

}  // namespace

CheckpointWriter::CheckpointWriter(MPI_Comm comm, const std::string& save_dir, std::int64_t iteration,
                                   const WriterOptions& options)
    : impl_(std::make_unique<Impl>()) {
    // Collective I/O needs every rank in MPI-IO calls together; a background save writes
    // from a helper thread with no MPI at all, so the two cannot be combined. (Auto mode's
    // collective I/O for strided tensors across nodes becomes independent pwrites there.)
    // Checked first: every rank has the same options, so every rank throws, before any MPI.
    GPT_REQUIRE(!(options.background && options.io_mode == IoMode::Collective), UsageError,
                "collective checkpoint I/O cannot be combined with --async-save: the background writer "
                "writes each rank's pieces independently; use independent or automatic I/O");
    Impl& s = *impl_;
    h5::silence_errors();
    MPI_Request dup = MPI_REQUEST_NULL;
    MPI_Comm_idup(comm, &s.comm, &dup);
    wait_politely(dup, "the checkpoint writer's MPI_Comm_idup");
    MPI_Comm_rank(s.comm, &s.rank);
    MPI_Comm_size(s.comm, &s.size);
    s.root = save_dir;
    s.iteration = iteration;
    s.opts = options;
    const NodeLayout node = node_layout(s.comm);
    s.node_rank = node.node_rank;
    s.strided_collective = options.io_mode == IoMode::Auto && node.multi_node;
    GPT_REQUIRE(iteration >= 0, InternalError, "checkpoint iteration must be >= 0, got ", iteration);
    const std::string tag = options.tag.empty() ? make_tag(s.comm, s.rank) : options.tag;
    s.tmp = temp_dir(s.root, iteration, tag);
    s.final_dir = s.root / iteration_dir_name(iteration);
    s.file_path = (s.tmp / kCheckpointFile).string();

    collectively(s.comm, [&] {
        if (s.rank != 0) return;
        std::error_code ec;
        fs::create_directories(s.root, ec);
        if (ec) GPT_THROW(IoError, "cannot create checkpoint folder ", s.root.string(), ": ", ec.message());
        fs::remove_all(s.tmp, ec);
        fs::create_directory(s.tmp, ec);
        if (ec) GPT_THROW(IoError, "cannot create ", s.tmp.string(), ": ", ec.message());
    });
    stall_if_asked(s.rank);
    PhaseTimer create_timer(Phase::SaveCreate);
    collectively(s.comm, [&] {
        h5::Handle fapl = h5::make_plist(H5P_FILE_ACCESS);
        MPI_Info info = writer_hints(s.opts.info);
        herr_t rc = -1;
        {
            // HDF5 keeps its own MPI_Comm_dup of the communicator: a blocking collective the
            // watchdog cannot poll. A rank whose peers were cut off mid-save waited here for
            // ever (slurm_two_nodes phase 4b) while the watchdog watched only H5Fcreate.
            watchdog::BlockedScope blocked("H5Pset_fapl_mpio (HDF5's MPI_Comm_dup of the checkpoint writer's communicator)");
            rc = H5Pset_fapl_mpio(fapl.get(), s.comm, info);
        }
        MPI_Info_free(&info);
        h5::check_status(rc, "H5Pset_fapl_mpio");
        h5::check_status(H5Pset_alignment(fapl.get(), s.opts.alignment_threshold, s.opts.alignment),
                         "H5Pset_alignment");
        // Collective metadata writes funnel the metadata flushes into collective writes, which
        // pays off with many ranks on a parallel file system. On one node their extra
        // collectives cost more than the few small writes HDF5 otherwise spreads over the
        // ranks (4 ranks on 2 cores: H5Fclose 0.14 s -> 0.04 s, save -7%). Tied to collective
        // data I/O, so the tests that force IoMode::Collective still cover them.
        const bool collective_io = s.opts.io_mode == IoMode::Collective || s.strided_collective;
        h5::check_status(H5Pset_coll_metadata_write(fapl.get(), collective_io), "H5Pset_coll_metadata_write");
        // Rank 0 reads metadata for everyone instead of every rank touching it.
        h5::check_status(H5Pset_all_coll_metadata_ops(fapl.get(), true), "H5Pset_all_coll_metadata_ops");
        // Collective inside HDF5's MPI-IO driver (MPI_File_open, metadata): cannot be
        // polled, so the watchdog's deadline monitor bounds it.
        watchdog::BlockedScope blocked("H5Fcreate of the checkpoint file (MPI-IO, collective)");
        s.file = h5::Handle(h5::check(H5Fcreate(s.file_path.c_str(), H5F_ACC_EXCL, H5P_DEFAULT, fapl.get()),
                                      "cannot create checkpoint file " + s.file_path),
                            H5Fclose);
        s.dxpl_collective = h5::make_plist(H5P_DATASET_XFER);
        h5::check_status(H5Pset_dxpl_mpio(s.dxpl_collective.get(), H5FD_MPIO_COLLECTIVE), "H5Pset_dxpl_mpio");
        s.dxpl_independent = h5::make_plist(H5P_DATASET_XFER);
        h5::check_status(H5Pset_dxpl_mpio(s.dxpl_independent.get(), H5FD_MPIO_INDEPENDENT), "H5Pset_dxpl_mpio");
        s.direct = std::make_unique<DirectWrites>(s.file_path);
        h5::Handle g(h5::check(H5Gcreate2(s.file.get(), kReservedGroup, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                               "creating group /_checkpoint in " + s.file_path),
                     H5Gclose);
    });
}

CheckpointWriter::~CheckpointWriter() {
    if (!impl_) return;
    // A background save still running (the job is ending on an error): stop it between two
    // pieces and wait, so that no thread writes from buffers about to be freed.
    if (impl_->background.joinable()) {
        impl_->background.request_stop();
        impl_->background.join();
    }
    // Closing the file and freeing the communicator are collective. While an exception is
    // unwinding, this rank may be the only one here (the app is about to abort the job), so
    // skip them rather than hang; otherwise every rank abandons the save together.
    if (std::uncaught_exceptions() > 0) {
        (void)impl_->file.release_without_close();
        return;
    }
    impl_->file.close();
    if (impl_->comm != MPI_COMM_NULL) MPI_Comm_free(&impl_->comm);
}

const std::string& CheckpointWriter::temp_file() const { return impl_->file_path; }

WriteStats CheckpointWriter::stats() const { return impl_->stats; }

void CheckpointWriter::set_attribute(const std::string& name, AttributeValue value) {
    GPT_REQUIRE(!name.empty() && name.find('/') == std::string::npos, InternalError,
                "invalid checkpoint attribute name '", name, "'");
    impl_->attrs[name] = std::move(value);
}

void CheckpointWriter::Impl::write_batch(const std::vector<Item>& items) {
    // Plan: each dataset's path, from the items alone (the same on every rank where the
    // path is collective).
    const WritePlan plan = plan_write(items, manifest.size());
    // Execute: create, then write (or queue) the bytes.
    std::vector<h5::Handle> dsets(items.size());
    std::vector<h5::Handle> ftypes(items.size());
    create_datasets(items, dsets, ftypes);
    for (const Item& it : items) manifest.push_back({it.name, it.type, it.shape, 0});
    local_sums.resize(manifest.size(), 0);
    std::exception_ptr err;
    try {
        write_collective(items, plan, dsets, ftypes);
        write_independent(items, plan, dsets);
    } catch (...) {
        err = std::current_exception();
    }
    // Verify: a rank that failed fails every rank together (none is left waiting in a
    // collective), then every dataset must close cleanly (HDF5 reports deferred errors there).
    agree_on_error(comm, err);
    collectively(comm, [&] {
        for (std::size_t i = 0; i < items.size(); ++i)
            h5::check_status(dsets[i].close(), "closing " + where(items[i].name));
    });
}

void CheckpointWriter::Impl::create_datasets(const std::vector<Item>& items, std::vector<h5::Handle>& dsets,
                                             std::vector<h5::Handle>& ftypes) {
    PhaseTimer create_timer(Phase::SaveCreate);
    collectively(comm, [&] {
        // Dataset creation is collective in parallel HDF5 (metadata, early allocation).
        watchdog::BlockedScope blocked("H5Dcreate2 of the checkpoint's datasets (MPI-IO, collective metadata)");
        h5::Handle lcpl = h5::make_plist(H5P_LINK_CREATE);
        h5::check_status(H5Pset_create_intermediate_group(lcpl.get(), 1), "H5Pset_create_intermediate_group");
        h5::Handle dcpl = h5::make_plist(H5P_DATASET_CREATE);
        // Every element is written by some rank: pre-filling with zeros would write it twice.
        h5::check_status(H5Pset_fill_time(dcpl.get(), H5D_FILL_TIME_NEVER), "H5Pset_fill_time");
        h5::check_status(H5Pset_alloc_time(dcpl.get(), H5D_ALLOC_TIME_EARLY), "H5Pset_alloc_time");
        for (std::size_t i = 0; i < items.size(); ++i) {
            const Item& it = items[i];
            const std::string what = where(it.name);
            std::vector<hsize_t> dims(it.shape.begin(), it.shape.end());
            h5::Handle space = h5::create_simple_space(static_cast<int>(dims.size()), dims.data());
            ftypes[i] = h5::file_type(it.type);
            dsets[i] = h5::Handle(h5::check(H5Dcreate2(file.get(), it.name.c_str(), ftypes[i].get(), space.get(),
                                                       lcpl.get(), dcpl.get(), H5P_DEFAULT),
                                            "creating " + what),
                                  H5Dclose);
            h5::write_attribute(dsets[i].get(), "dtype", std::string(h5::stored_name(it.type)), what);
        }
    });
}

void CheckpointWriter::Impl::write_collective(const std::vector<Item>& items, const WritePlan& plan,
                                              const std::vector<h5::Handle>& dsets,
                                              const std::vector<h5::Handle>& ftypes) {
    // Collective tensors go through HDF5's two-phase I/O, whole (every rank must make
    // the same calls), checksummed here.
    for (std::size_t i = 0; i < items.size(); ++i) {
        const Item& it = items[i];
        const DatasetWrite& d = plan.datasets[i];
        if (d.path != WritePath::Collective) continue;
        PhaseTimer t(Phase::SaveCollective);
        collectively(comm, [&] {
            const std::string what = where(it.name);
            h5::Handle fsel = file_selection(it.shape, it.sel, what);
            const std::int64_t n = d.elements;
            h5::Handle msel = memory_selection(n, what);
            if (n > 0)
                local_sums[d.entry] = checksum_add(local_sums[d.entry], checksum_selection(it.shape, it.sel, d.esize, it.data));
            static const unsigned char dummy = 0;  // HDF5 wants a buffer even for an empty selection
            // Memory type == file type: no conversion, which would turn collective I/O independent.
            // Two-phase I/O exchanges data between the ranks inside MPI-IO.
            watchdog::BlockedScope blocked("H5Dwrite of a collective tensor (MPI-IO two-phase I/O)");
            h5::check_status(H5Dwrite(dsets[i].get(), ftypes[i].get(), msel.get(), fsel.get(), dxpl(true),
                                      n > 0 ? it.data : &dummy),
                             "writing " + what);
        });
    }
}

void CheckpointWriter::Impl::write_independent(const std::vector<Item>& items, const WritePlan& plan,
                                               const std::vector<h5::Handle>& dsets) {
    // This rank's runs at the dataset's file offset (contiguous, allocated at creation), in
    // the tensor's row-major order, which is also the packed order. Strided tensors are
    // first exchanged into page-aligned domains (every rank takes part in each exchange,
    // also with nothing to send).
    std::optional<StridedExchange> exchange;
    for (std::size_t i = 0; i < items.size(); ++i) {
        const Item& it = items[i];
        const DatasetWrite& d = plan.datasets[i];
        if (d.path != WritePath::Direct && d.path != WritePath::Exchange) continue;
        const bool exchanged_here = d.path == WritePath::Exchange;
        const std::size_t esize = d.esize;
        const haddr_t base = H5Dget_offset(dsets[i].get());
        GPT_REQUIRE(base != HADDR_UNDEF, IoError, "HDF5 allocated no contiguous storage for ", where(it.name));
        std::vector<StridedExchange::Run> runs;
        const auto* bytes = static_cast<const unsigned char*>(it.data);
        if (d.elements > 0)
            for (const Box& b : it.sel.boxes(it.shape))
                for_each_run(it.shape, b, [&](std::int64_t start, std::int64_t len) {
                    const std::uint64_t off = static_cast<std::uint64_t>(start) * esize;
                    const std::size_t n = static_cast<std::size_t>(len) * esize;
                    if (exchanged_here) runs.push_back({off, bytes, n});
                    else direct->add(d.entry, base + off, off, bytes, n);
                    bytes += n;
                });
        if (!exchanged_here) continue;
        if (!exchange) exchange.emplace(comm);
        PhaseTimer t(Phase::SaveExchange);
        exchange->exchange(d.entry, where(it.name), base, static_cast<std::uint64_t>(num_elements(it.shape)) * esize,
                           runs, *direct);
    }
    if (exchange) {
        stats.exchanged_bytes += exchange->domain_bytes();
        exchange->finish();
        exchanged.push_back(exchange->buffers());
    }
    // Synchronous: written now, while the caller's buffers are valid; a helper thread
    // checksums each piece while this one writes the next.
    if (!opts.background) {
        ChecksumWorker worker(Phase::SaveChecksum);
        direct->run(local_sums, false, {}, &worker);
        count_run();
        PhaseTimer t(Phase::SaveChecksumWait);
        worker.finish();
        exchanged.clear();  // written: back to the pool for the next save
    }
}

void CheckpointWriter::write(const std::vector<TensorSlice>& slices) {
    Impl& s = *impl_;
    GPT_REQUIRE(!s.committed, InternalError, "CheckpointWriter::write after commit");
    std::uint64_t fingerprint = fnv1a(nullptr, 0);
    std::vector<std::int64_t> selected(slices.size());
    std::vector<int> strided(slices.size(), 0), any_strided(slices.size(), 0);
    collectively(s.comm, [&] {
        std::set<std::string> seen;
        for (std::size_t i = 0; i < slices.size(); ++i) {
            const TensorSlice& t = slices[i];
            check_tensor_name(t.name);
            GPT_REQUIRE(!s.names.count(t.name) && seen.insert(t.name).second, InternalError,
                        "tensor '", t.name, "' written twice to checkpoint ", s.file_path);
            t.selection.check_fits(t.global_shape, "checkpoint tensor", t.name);
            selected[i] = t.selection.num_elements(t.global_shape);
            strided[i] = t.selection.is_contiguous(t.global_shape) ? 0 : 1;
            GPT_REQUIRE(selected[i] == 0 || t.data != nullptr, InternalError, "tensor '", t.name,
                        "': selection of ", selected[i], " elements but no data");
            fingerprint = fnv1a(t.name.data(), t.name.size() + 1, fingerprint);
            fingerprint = fnv1a(&t.dtype, sizeof t.dtype, fingerprint);
            fingerprint = fnv1a(t.global_shape.data(), t.global_shape.size() * sizeof(std::int64_t), fingerprint);
        }
    });
    require_same_on_all_ranks(s.comm, fingerprint, "tensor lists to CheckpointWriter::write");
    // Coverage: a gap would leave garbage in the file, a double write a wrong checksum.
    std::vector<std::int64_t> total(slices.size());
    allreduce(selected.data(), total.data(), static_cast<int>(slices.size()), MPI_INT64_T, MPI_SUM, s.comm);
    for (std::size_t i = 0; i < slices.size(); ++i)
        GPT_REQUIRE(total[i] == num_elements(slices[i].global_shape), InternalError, "tensor '",
                    slices[i].name, "' ", shape_string(slices[i].global_shape), ": the ranks' selections add up to ",
                    total[i], " elements, not ", num_elements(slices[i].global_shape),
                    ". HINT: each element must be written by exactly one rank (replicas select none)");

    allreduce(strided.data(), any_strided.data(), static_cast<int>(slices.size()), MPI_INT, MPI_MAX, s.comm);
    std::vector<Impl::Item> items;
    for (std::size_t i = 0; i < slices.size(); ++i) {
        const TensorSlice& t = slices[i];
        // A background save keeps MPI and HDF5 off its thread: no collective data I/O.
        const bool collective = !s.opts.background && s.opts.io_mode == IoMode::Collective;
        // Auto: strided tensors through our two-phase exchange and direct writes, on one node
        // and across nodes (where MPI-IO's collective buffering did the same, slower). Not in
        // a background save: the exchange would run here, in the training stall (0.04-0.07 s
        // of a 1 GB save at 2 ranks), while the background thread's page-cache writes of
        // the short runs cost training nothing.
        const bool exchange = !collective && s.opts.io_mode == IoMode::Auto && !s.opts.background && any_strided[i] && s.size > 1;
        items.push_back({t.name, stored_type(t.dtype), t.global_shape, t.selection, t.data, collective, exchange});
    }
    s.write_batch(items);
    for (const TensorSlice& t : slices) s.names.insert(t.name);
}

void CheckpointWriter::write_rank_blob(const std::string& name, const void* data, std::size_t bytes) {
    Impl& s = *impl_;
    const std::string base = blob_group(name);
    collectively(s.comm, [&] {
        check_tensor_name(name);
        GPT_REQUIRE(!s.names.count(base), InternalError, "rank blob '", name, "' written twice");
        GPT_REQUIRE(bytes == 0 || data != nullptr, InternalError, "rank blob '", name, "': no data");
    });
    require_same_on_all_ranks(s.comm, fnv1a(name.data(), name.size()), "rank blob names");
    std::vector<std::int64_t> sizes(s.size);
    const std::int64_t mine = static_cast<std::int64_t>(bytes);
    allgather(&mine, sizes.data(), 1, MPI_INT64_T, s.comm);
    std::vector<std::int64_t> offsets(s.size + 1, 0);
    for (int r = 0; r < s.size; ++r) offsets[r + 1] = offsets[r] + sizes[r];
    GPT_REQUIRE(offsets[s.size] > 0, InternalError, "rank blob '", name, "': every rank passed 0 bytes");

    const Shape data_shape{offsets[s.size]}, offsets_shape{s.size + 1};
    const bool collective = !s.opts.background && s.opts.io_mode == IoMode::Collective;
    // Small: copied, so that a background save does not depend on the caller's buffer.
    const auto* p = static_cast<const unsigned char*>(data);
    s.owned.emplace_back(p, p + bytes);
    const auto* off_bytes = reinterpret_cast<const unsigned char*>(offsets.data());
    s.owned.emplace_back(off_bytes, off_bytes + offsets.size() * sizeof(std::int64_t));
    const void* own_data = s.owned[s.owned.size() - 2].data();
    const void* own_offsets = s.owned.back().data();
    s.write_batch(
        {{base + "/bytes", h5::Stored::U8, data_shape, Selection::flat(offsets[s.rank], mine), own_data, collective},
         {base + "/offsets", h5::Stored::I64, offsets_shape, s.rank == 0 ? Selection::all() : Selection::none(),
          own_offsets, collective}});
    s.names.insert(base);
}

void CheckpointWriter::Impl::finish_file() {
    // One reduction for every dataset: the partial checksums of all ranks add up.
    const std::vector<std::uint64_t> sums = allreduce_checksums(comm, local_sums);
    for (std::size_t i = 0; i < manifest.size(); ++i) manifest[i].checksum = sums[i];
    // Root attributes come from rank 0 so that the collective attribute writes agree.
    const AttributeMap stored = decode_attributes(broadcast_string(comm, encode_attributes(attrs), 0));
    const std::string text = encode_manifest(manifest);
    collectively(comm, [&] {
        h5::Handle root_group(h5::check(H5Gopen2(file.get(), "/", H5P_DEFAULT), "opening / of " + file_path),
                              H5Gclose);
        for (const auto& [name, value] : stored) h5::write_attribute(root_group.get(), name, value, file_path);

        h5::Handle group(h5::check(H5Gopen2(file.get(), kReservedGroup, H5P_DEFAULT), "opening /_checkpoint"),
                         H5Gclose);
        const std::string what = where(std::string(kReservedGroup) + "/manifest");
        h5::Handle stype(h5::check(H5Tcopy(H5T_C_S1), what), H5Tclose);
        h5::check_status(H5Tset_size(stype.get(), std::max<std::size_t>(text.size(), 1)), what);
        h5::Handle space(h5::check(H5Screate(H5S_SCALAR), what), H5Sclose);
        h5::Handle dset(h5::check(H5Dcreate2(group.get(), "manifest", stype.get(), space.get(), H5P_DEFAULT,
                                             H5P_DEFAULT, H5P_DEFAULT),
                                  "creating " + what),
                        H5Dclose);
        h5::Handle sel(h5::check(H5Screate(H5S_SCALAR), what), H5Sclose);
        if (rank != 0) {
            h5::check_status(H5Sselect_none(sel.get()), what);
        }
        h5::check_status(H5Dwrite(dset.get(), stype.get(), sel.get(), sel.get(), dxpl(false), text.c_str()),
                         "writing " + what);
        h5::write_attribute(group.get(), "format", std::string(kFormatName), file_path);
        h5::write_attribute(group.get(), "format_version", std::int64_t{kFormatVersion}, file_path);
        h5::write_attribute(group.get(), "iteration", iteration, file_path);
        h5::write_attribute(group.get(), "world_size", std::int64_t{size}, file_path);
        h5::write_attribute(group.get(), "manifest_checksum",
                            static_cast<std::int64_t>(fnv1a(text.data(), text.size())), file_path);
        h5::write_attribute(group.get(), "attributes_checksum",
                            static_cast<std::int64_t>(attributes_checksum(stored, iteration, size)), file_path);
        // Last: a reader accepts only a file that reached this line.
        h5::write_attribute(group.get(), "complete", std::int64_t{1}, file_path);
    });
}

CommitResult CheckpointWriter::commit(int keep_last) {
    commit_in_background(keep_last);
    return finish_commit();
}

void CheckpointWriter::commit_in_background(int keep_last, std::function<void()> ready) {
    Impl& s = *impl_;
    GPT_REQUIRE(!s.committed && !s.background.joinable(), InternalError, "CheckpointWriter committed twice");
    s.keep_last = keep_last;
    s.background_done = false;
    s.background_error = nullptr;
    if (!s.opts.background || s.direct->empty()) {  // nothing left to write
        s.background_done = true;
        return;
    }
    auto body = [&s, ready = std::move(ready)](std::stop_token stop) {
        try {
            if (ready) ready();  // the buffers' bytes have landed (e.g. a device's copies)
            // durable: this rank's part is on disk before finish_commit() publishes anything.
            // The worker sums while this thread writes, as in a synchronous save.
            ChecksumWorker worker(Phase::SaveChecksum);
            s.direct->run(s.local_sums, true, stop, &worker);
            s.count_run();
            worker.finish();
        } catch (...) {
            s.background_error = std::current_exception();
        }
        s.background_done = true;  // after background_error: read once this is seen
    };
    try {
        s.background = std::jthread(body);
    } catch (const std::system_error&) {
        body(std::stop_token{});  // no thread: write now
    }
}

bool CheckpointWriter::background_finished() {
    Impl& s = *impl_;
    const int mine = s.background_done ? 1 : 0;
    int all = 0;
    allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, s.comm);
    return all == 1;
}

CommitResult CheckpointWriter::finish_commit() {
    Impl& s = *impl_;
    GPT_REQUIRE(!s.committed, InternalError, "CheckpointWriter::finish_commit called twice");
    if (s.background.joinable()) s.background.join();
    try {
        agree_on_error(s.comm, s.background_error);
        PhaseTimer t(Phase::SaveMetadata);
        s.finish_file();
        collectively(s.comm, [&] {
            // The collective metadata write and MPI_File_close happen inside H5Fclose.
            watchdog::BlockedScope blocked("H5Fclose of the checkpoint file (MPI-IO, collective metadata write)");
            h5::check_status(s.file.close(), "closing checkpoint file " + s.file_path);
        });
    } catch (...) {
        // Every rank is here (each step above agrees on its errors). Abandon the file: its
        // data is useless now, and truncating it first gives HDF5's metadata flush room on a
        // full disk, so that the close succeeds. (A failed H5Fclose leaves the file half
        // closed, and HDF5 crashed closing it again at MPI_Finalize.)
        collectively(s.comm, [&] {
            if (s.rank == 0) (void)::truncate(s.file_path.c_str(), 0);
        });
        s.file.close();
        s.committed = true;  // nothing left for the destructor to close
        throw;
    }
    // Every node flushes what its ranks wrote before the folder becomes visible: after a
    // crash the renamed folder must never hold a file whose data is still in page caches.
    // (The data's write-back started as it was written; this waits for it and the metadata.)
    {
        PhaseTimer t(Phase::SaveFsync);
        collectively(s.comm, [&] {
            if (s.node_rank == 0) fsync_path(s.file_path);
        });
    }
    PhaseTimer publish_timer(Phase::SavePublish);
    CommitResult result;
    result.path = s.final_dir.string();
    collectively(s.comm, [&] {
        if (s.rank != 0) return;
        fsync_path(s.tmp);
        publish_dir(s.tmp, s.final_dir);
        write_tracker(s.root, s.iteration);  // only now does --load see the new checkpoint
        remove_stale_temp_dirs(s.root, s.final_dir);
        result.removed = apply_retention(s.root, s.iteration, s.keep_last);
    });
    s.committed = true;
    return result;
}

std::int64_t CheckpointWriter::iteration() const { return impl_->iteration; }

}  // namespace gpt::ckpt
