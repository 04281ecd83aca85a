// CheckpointReader::read in three steps: plan (below: what each tensor's read is, worked out
// and checked before any byte moves, the same on every rank where the collectives need it),
// execute (the reads, from the plan: read_execute.cpp) and verify (the checksums of what was
// read: read_verify.cpp). Plain data, so each step can be read on its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ckpt/manifest.hpp"
#include "core/dtype.hpp"

namespace gpt::ckpt {

// One requested tensor (one TensorSliceOut, same position).
struct TensorRead {
    const ManifestEntry* entry = nullptr;  // the stored dataset: its shape is the requested one
    std::size_t index = 0;                 // its manifest position
    DType stored = DType::F32;             // as stored
    bool convert = false;                  // stored != requested: read into staging, converted after
    std::size_t esize = 0;                 // bytes per stored element
    std::int64_t elements = 0;             // in this rank's selection (0: nothing to read here)
    std::uint64_t offset = 0;              // where its contiguous data starts in the file (direct only)
    // How the bytes come, the same choice on every rank (it depends on the file, the options
    // and, for `gathered`, every rank's selection only):
    bool direct = false;    // DirectReads at `offset`, no HDF5 on the data path; else H5Dread
    bool gathered = false;  // some rank reads it strided: read once by domain owners, handed out
};

struct ReadPlan {
    std::vector<TensorRead> tensors;
    // Replicas (ranks asking for exactly the same selections) count once: only the lowest
    // rank of each selection signature sums what it reads for the checksums.
    bool leader = true;
    bool collective_io = false;  // IoMode::Collective: every tensor through collective H5Dread
    bool verifying = false;      // this rank sums what it reads (verify_checksums and leader)
};

// What execute hands to verify: this rank's contributions to each tensor's checksum and the
// elements they cover (0 where it contributed nothing).
struct ReadSums {
    std::vector<std::uint64_t> partial;
    std::vector<std::int64_t> counted;
};

}  // namespace gpt::ckpt
