// Two-phase writes of strided tensors. A row-parallel slice is one short run per row (1-4
// KiB for a hidden size of 1024 at TP 2), far below what a direct write needs; written by
// each rank on its own they went through the page cache, whose fresh pages cost more than
// the disk on our VMs (2 ranks, bench/checkpoint: save 1.2-1.6 s with row-parallel slices,
// 0.86-1.09 s with the same bytes column-parallel). So, like MPI-IO's collective buffering
// but ending in our O_DIRECT writer: the dataset's bytes are cut into a few contiguous,
// page-aligned domains, each owned by one rank; every rank sends each owner the parts of
// its runs inside the owner's domain (MPI_Ialltoallv, completed politely), and each owner
// writes its whole domain as one run (DirectWrites: whole pages direct, from memory that
// lies on the file's page phase, so written in place). Checksums are positional, so the
// owner's sum of its domain adds up with the other owners' to the dataset's checksum.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace gpt::ckpt {

class DirectWrites;

// Domain k of a dataset of `total` bytes at file offset `base` is bytes [bounds[k],
// bounds[k+1]), owned by rank (k + rotate) % nranks. The inner bounds fall on page
// boundaries of the file; a dataset gets fewer domains than ranks when a domain would be
// smaller than `min_domain` bytes (one for a small one), and `rotate` (the dataset's
// index) spreads the small ones over the ranks.
struct Domains {
    std::vector<std::uint64_t> bounds;
    int rotate = 0;
    int count() const { return static_cast<int>(bounds.size()) - 1; }
    int owner(int k, int nranks) const { return (k + rotate) % nranks; }
};
Domains split_domains(std::uint64_t base, std::uint64_t total, int nranks, std::size_t rotate,
                      std::uint64_t min_domain, std::uint64_t page);

// The split both directions use: domains of at least 256 KiB (a direct write's or read's
// minimum), inner bounds on 4 KiB pages of the file.
Domains strided_domains(std::uint64_t base, std::uint64_t total, int nranks, std::size_t rotate);

// Page-aligned memory of at least `bytes` for a domain, placed so that data + phase lies on
// a page boundary when (file offset of the domain) % 4096 == phase: O_DIRECT then moves
// its whole pages in place. The memory goes back to a process-wide pool when the last
// owner lets go (a fresh page costs a host fault on our VMs, more than the disk: every
// later save or load reuses it).
struct DomainBuffer {
    std::shared_ptr<unsigned char> memory;
    unsigned char* data = nullptr;  // memory + phase
};
DomainBuffer take_domain_buffer(std::size_t bytes, std::size_t phase);

class StridedExchange {
public:
    struct Run {
        std::uint64_t data_offset;  // in the dataset, bytes
        const unsigned char* data;
        std::size_t bytes;
    };
    explicit StridedExchange(MPI_Comm comm);
    ~StridedExchange();
    StridedExchange(const StridedExchange&) = delete;
    StridedExchange& operator=(const StridedExchange&) = delete;

    // Collective over comm: every rank calls it for the same datasets in the same order,
    // with its own runs of dataset `entry` (any number, in any order, none overlapping any
    // rank's). Adds this rank's domain, filled with every rank's bytes of it, to `direct`.
    // A domain not covered exactly (a rank's selection wrong) is recorded, not thrown,
    // so that no rank leaves the exchanges of the later datasets; finish() throws it.
    void exchange(std::size_t entry, const std::string& name, std::uint64_t base, std::uint64_t total,
                  const std::vector<Run>& runs, DirectWrites& direct);
    // Throws InternalError naming the first dataset whose domain was not covered exactly.
    void finish() const;
    // The domains' memory, which `direct` reads until its run() returns: keep it until then.
    std::shared_ptr<void> buffers();
    // Bytes this rank received into its domains (its share of the strided tensors).
    std::uint64_t domain_bytes() const { return domain_bytes_; }

private:
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::shared_ptr<std::vector<DomainBuffer>> buffers_;
    std::string problem_;
    std::uint64_t domain_bytes_ = 0;
};

// The load's mirror, for tensors that some rank reads strided: each domain owner reads its
// domain with O_DIRECT (the caller adds domain() to its DirectReads, checksummed there:
// the owners' sums add up to the dataset's, each byte read once), then exchange() sends
// every rank the bytes it asked for. Before, each rank read the pages covering all its rows,
// the other ranks' columns in between included: T times the tensor at tensor parallelism T.
class StridedGather {
public:
    struct Run {
        std::uint64_t data_offset;  // in the dataset, bytes
        unsigned char* dest;
        std::size_t bytes;
    };
    struct Domain {
        std::uint64_t lo = 0, hi = 0;  // bytes of the dataset
        unsigned char* data = nullptr;
    };
    explicit StridedGather(MPI_Comm comm);
    // Not collective. Records this rank's wanted runs of dataset `entry` (`total` bytes at
    // file offset `base`); returns the domain this rank must read before exchange(), if any.
    std::optional<Domain> add(std::size_t entry, const std::string& name, std::uint64_t base, std::uint64_t total,
                              std::vector<Run> wanted);
    // Collective (every rank added the same datasets in the same order): sends each rank
    // the bytes it wants out of the domains read. Throws InternalError on every rank when a
    // request falls outside its owner's domain (cannot happen unless the ranks disagree).
    void exchange();
    std::uint64_t domain_bytes() const { return domain_bytes_; }

private:
    struct Dataset {
        std::string name;
        Domains domains;
        std::vector<Run> wanted;
        Domain mine;
    };
    MPI_Comm comm_;
    int rank_ = 0, size_ = 1;
    std::vector<Dataset> datasets_;
    std::vector<DomainBuffer> buffers_;
    std::uint64_t domain_bytes_ = 0;
};

}  // namespace gpt::ckpt
