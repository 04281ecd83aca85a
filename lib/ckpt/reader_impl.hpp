// CheckpointReader's state, shared by the files of its steps (checkpoint_reader.cpp: open,
// validation, the accessors; read_plan.cpp, read_execute.cpp, read_verify.cpp: read()).
// Internal to lib/ckpt.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ckpt/attribute.hpp"
#include "ckpt/checkpoint_reader.hpp"
#include "ckpt/h5_util.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/read_plan.hpp"
#include "ckpt/selection.hpp"
#include "ckpt/tensor_slice.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

struct CheckpointReader::Impl {
    MPI_Comm comm = MPI_COMM_NULL;
    int rank = 0, size = 1;
    std::string path;
    ReaderOptions opts;
    h5::Handle file, dxpl_collective, dxpl_independent;
    std::vector<ManifestEntry> manifest;
    std::map<std::string, std::size_t> index;  // name -> manifest position
    AttributeMap attrs;
    std::int64_t iteration = 0;
    int world = 0;
    // Per manifest entry: its checksum has been checked over the whole dataset (by read()
    // or a full pass). verify_unread() checks the rest.
    std::vector<char> verified;
    // Per manifest entry: the file offset of its contiguous data (H5Dget_offset), or
    // kNoOffset where reads must go through HDF5 (another layout, a user block, empty).
    static constexpr std::uint64_t kNoOffset = ~std::uint64_t{0};
    std::vector<std::uint64_t> offsets;
    CheckpointReader::ReadStats stats;

    std::string where(const std::string& name) const { return "dataset '" + name + "' of checkpoint " + path; }
    const ManifestEntry& entry(const std::string& name) const {
        auto it = index.find(name);
        if (it == index.end()) GPT_THROW(DataError, "checkpoint ", path, " has no tensor '", name, "'");
        return manifest[it->second];
    }
    void open_and_validate();
    // Collective full pass over the listed manifest entries; throws DataError on mismatch.
    void verify_entries(const std::vector<std::size_t>& which);
    // Collective (dataset opens are collective metadata operations).
    h5::Handle open_dataset(const ManifestEntry& e);
    // Reads sel of an open dataset into `out` (stored type, packed). Collective only when
    // `collective` (which must then be the same on every rank).
    void read_open(hid_t dset, const ManifestEntry& e, const Selection& sel, void* out, bool collective);
    // Collective: open_dataset + read_open.
    void read_raw(const ManifestEntry& e, const Selection& sel, void* out, bool collective = false);

    bool has_tensor(const std::string& name) const;         // see CheckpointReader
    TensorInfo tensor_info(const std::string& name) const;  // see CheckpointReader

    // read()'s steps, each collective. plan_read checks the request against the manifest
    // (the same tensors on every rank, stored shapes, selections that fit) and chooses each
    // tensor's path (read_plan.cpp); execute_read reads into the caller's buffers, this
    // rank's checksum contributions on the side (read_execute.cpp); verify_read adds them
    // up and settles each tensor's checksum, rechecking what they do not settle
    // (read_verify.cpp).
    ReadPlan plan_read(const std::vector<TensorSliceOut>& slices);
    ReadSums execute_read(const ReadPlan& plan, const std::vector<TensorSliceOut>& slices);
    void verify_read(const ReadPlan& plan, const std::vector<TensorSliceOut>& slices, const ReadSums& sums);
};

}  // namespace gpt::ckpt
