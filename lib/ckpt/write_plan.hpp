// CheckpointWriter's batches in three steps: plan (below: which path each dataset's bytes
// take, decided from the items alone before anything is created), execute (create the
// datasets, write or queue the bytes) and verify (the ranks agree on errors, every dataset
// closes cleanly); the last two are CheckpointWriter::Impl's (checkpoint_writer.cpp). The
// file's checksums are settled at commit, over everything the batches wrote.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ckpt/h5_util.hpp"
#include "ckpt/selection.hpp"

namespace gpt::ckpt {

// One dataset of a batch, with this rank's selection of it.
struct WriteItem {
    std::string name;
    h5::Stored type;
    Shape shape;
    Selection sel;
    const void* data;
    bool collective;        // the same on every rank
    bool exchange = false;  // strided on some rank: two-phase, through StridedExchange (same on every rank)
};

enum class WritePath {
    Collective,  // HDF5's two-phase I/O, whole: every rank makes the same calls, empty selections too
    Exchange,    // our two-phase exchange into page-aligned domains: every rank takes part
    Direct,      // this rank's runs at the dataset's file offset (DirectWrites)
    None,        // nothing of it on this rank
};

struct DatasetWrite {
    std::size_t entry = 0;      // manifest position (its partial checksum: local_sums[entry])
    std::size_t esize = 0;      // bytes per stored element
    std::int64_t elements = 0;  // in this rank's selection
    WritePath path = WritePath::None;
};

struct WritePlan {
    std::vector<DatasetWrite> datasets;  // one per item, same order
};

// Pure: the items' manifest entries start at first_entry.
WritePlan plan_write(const std::vector<WriteItem>& items, std::size_t first_entry);

}  // namespace gpt::ckpt
