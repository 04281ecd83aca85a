// Opens one checkpoint collectively with parallel HDF5, validates its structure (complete
// marker, manifest, every dataset present with its shape and type), and reads any
// hyperslab or flat range of any tensor, verifying checksums of what it returns: loading
// into a different parallel layout (resharding) is just each rank asking for other slices.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ckpt/attribute.hpp"
#include "ckpt/tensor_slice.hpp"

namespace gpt::ckpt {

struct ReaderOptions {
    // read() checks the checksum of every tensor it returns. When the ranks' selections of
    // a tensor, replicas counted once, cover it exactly (the usual layouts: tensor-/pipeline-
    // parallel slices read by every data-parallel replica, distributed-optimizer shards),
    // this costs no extra I/O; otherwise that tensor is read once more, split over ranks.
    bool verify_checksums = true;
    // Also verify every dataset at open (one extra pass over the whole file), so damage is
    // found before any state is touched, even in tensors this load does not read.
    bool verify_all_at_open = false;
    std::size_t verify_chunk_bytes = std::size_t(64) << 20;  // per-rank read size of a full pass
    IoMode io_mode = IoMode::Auto;
    MPI_Info info = MPI_INFO_NULL;
    // Independent reads (and full verification passes) of contiguous datasets read whole
    // pages with O_DIRECT at the offsets HDF5 reports (DirectReads: file order, two threads
    // ahead, no HDF5 on the data path); false: H5Dread, buffered through the page cache,
    // page-fault bound on our VMs (bench/checkpoint's loadH5: 9-14% of the disk).
    // Production code (gpt_pretrain, gpt_generate, the HF export: load_checkpoint with the
    // default options, io_mode Auto) reads through H5Dread only
    //  - the rank blobs (per-rank RNG state: bytes) and the manifest (HDF5 metadata),
    //  - datasets with no contiguous allocation: empty ones (no bytes), and every dataset of
    //    a file given a user block by another tool (h5repack -u/-b; our writer never does),
    // so no large data goes through it. IoMode::Collective (tests and bench only) sends
    // every tensor through collective H5Dread.
    bool direct_reads = true;
    // Kept in flight per rank where the file system has no O_DIRECT (posix_fadvise WILLNEED).
    std::uint64_t readahead_bytes = std::uint64_t{16} << 20;
};

struct TensorInfo {
    Shape shape;
    DType dtype;  // as stored
};

class CheckpointReader {
public:
    // Collective over comm. Opens and validates `file` (DIR/iter_NNNNNNN/model_optim.h5).
    // Throws IoError when it is missing or unreadable, DataError when it is damaged or
    // incomplete; the message names the file and the dataset or attribute at fault.
    CheckpointReader(MPI_Comm comm, const std::string& file, const ReaderOptions& options = {});
    // Collective: closes the file. Destroyed while an exception unwinds, it skips the
    // collective close (that rank may be alone there, about to abort the job), so keep a
    // reader outside a try block whose errors you handle (load_checkpoint does).
    ~CheckpointReader();
    CheckpointReader(const CheckpointReader&) = delete;
    CheckpointReader& operator=(const CheckpointReader&) = delete;

    const std::string& file() const;
    std::int64_t iteration() const;
    // This rank's counts so far (tests, bench/checkpoint): bytes read as a domain owner of a
    // strided tensor (StridedGather), and tensors whose checksum read() could not settle
    // from the pieces it read and so read once more in a full pass.
    struct ReadStats {
        std::uint64_t gathered_bytes = 0;
        std::int64_t rechecked_tensors = 0;
    };
    ReadStats stats() const;
    int saved_world_size() const;  // ranks that wrote it: the number of entries per rank blob

    std::vector<std::string> tensor_names() const;  // manifest order; rank blobs excluded
    bool has_tensor(const std::string& name) const;
    TensorInfo tensor_info(const std::string& name) const;  // throws DataError when absent

    const AttributeMap& attributes() const;
    bool has_attribute(const std::string& name) const;
    // Throw DataError when the attribute is absent or of another type.
    std::int64_t attribute_int(const std::string& name) const;
    double attribute_double(const std::string& name) const;
    std::string attribute_string(const std::string& name) const;

    // Collective. Every rank passes the same tensors in the same order, each with its own
    // selection (none for tensors it does not need); shapes must equal the stored ones.
    // Throws DataError naming the tensors whose checksums do not match.
    // Replicas are recognised per call (ranks whose selections in this call are all equal),
    // so read model weights (replicated over data parallelism) and distributed-optimizer
    // shards (distinct per rank) in separate calls, or every weight gets a second read.
    void read(const std::vector<TensorSliceOut>& slices);

    // Collective. Checks the checksum of every dataset (one pass over the file, each rank
    // reading 1/N). Throws DataError naming the damaged datasets.
    void verify_all();
    // Collective. Checks every dataset whose checksum no read()/verify_all() has checked yet
    // (e.g. the half-precision weights of a distributed-optimizer checkpoint, when the run
    // sets its parameters from the fp32 main params): each rank reads and sums 1/N of each.
    void verify_unread();

    bool has_rank_blob(const std::string& name) const;
    // Collective: each rank receives the blob that rank `source_rank` saved.
    std::vector<std::byte> read_rank_blob(const std::string& name, int source_rank);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace gpt::ckpt
