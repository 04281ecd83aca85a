// CheckpointReader::read, step 1: the plan. Every check of the request happens here, before
// any byte is read, so a bad request leaves the caller's buffers untouched.
#include <algorithm>

#include "ckpt/checksum.hpp"
#include "ckpt/collective.hpp"
#include "ckpt/reader_impl.hpp"

namespace gpt::ckpt {

ReadPlan CheckpointReader::Impl::plan_read(const std::vector<TensorSliceOut>& slices) {
    ReadPlan plan;
    plan.tensors.resize(slices.size());
    std::uint64_t fingerprint = fnv1a(nullptr, 0);
    collectively(comm, [&] {
        for (std::size_t i = 0; i < slices.size(); ++i) {
            const TensorSliceOut& t = slices[i];
            GPT_REQUIRE(has_tensor(t.name), DataError, "checkpoint ", path, " has no tensor '", t.name, "'");
            const TensorInfo info = tensor_info(t.name);
            GPT_REQUIRE(info.shape == t.global_shape, DataError, "tensor '", t.name, "' is ", shape_string(info.shape),
                        " in checkpoint ", path, " but ", shape_string(t.global_shape),
                        " was requested. HINT: the checkpoint is of a different model size");
            t.selection.check_fits(t.global_shape, "checkpoint tensor", t.name);
            GPT_REQUIRE(t.selection.num_elements(t.global_shape) == 0 || t.data != nullptr, InternalError,
                        "tensor '", t.name, "': no output buffer");
            plan.tensors[i].stored = info.dtype;
            fingerprint = fnv1a(t.name.data(), t.name.size() + 1, fingerprint);
        }
    });
    require_same_on_all_ranks(comm, fingerprint, "tensor lists to CheckpointReader::read");

    // Replicas (ranks asking for exactly the same selections, e.g. data-parallel copies of
    // one model slice) must count once: only the lowest rank of each signature contributes
    // to the checksum sums. Then a tensor whose contributed element counts add up to its
    // size is covered exactly once, and the sum of partial checksums must be the stored one.
    std::uint64_t signature = fnv1a(nullptr, 0);
    for (const auto& t : slices) signature = t.selection.hash(signature);
    std::vector<std::uint64_t> signatures(size);
    allgather(&signature, signatures.data(), 1, MPI_UINT64_T, comm);
    plan.leader = std::find(signatures.begin(), signatures.begin() + rank, signature) == signatures.begin() + rank;
    plan.verifying = opts.verify_checksums && plan.leader;

    // Collective I/O only when asked for (IoMode::Collective): unlike the writer, Auto reads
    // strided tensors without MPI-IO on several nodes too. MPI-IO's two-phase reads go
    // through the page cache (at host-fault speed on our VMs, 9-14% of the disk in
    // bench/checkpoint's loadH5); ours (StridedGather, in execute) read each byte once with
    // O_DIRECT. IoMode::Independent keeps each rank reading its own windows with O_DIRECT
    // (the other ranks' rows in the gaps included: see kMaxGap in direct_reads.cpp).
    plan.collective_io = opts.io_mode == IoMode::Collective;
    // Independent reads of contiguous datasets bypass HDF5 (DirectReads); the rest go through
    // H5Dread. The same choice on every rank: it depends on the file and the options only.
    for (std::size_t i = 0; i < slices.size(); ++i) {
        TensorRead& r = plan.tensors[i];
        r.index = index.at(slices[i].name);
        r.entry = &manifest[r.index];
        r.convert = r.stored != slices[i].dtype;
        r.esize = h5::stored_size(r.entry->type);
        r.elements = slices[i].selection.num_elements(slices[i].global_shape);
        r.offset = offsets[r.index];
        r.direct = opts.direct_reads && !plan.collective_io && r.offset != kNoOffset;
    }
    // Tensors some rank reads strided (row-parallel slices: a short run per row) are read
    // once, by domain owners, and handed out (StridedGather), not once per rank.
    std::vector<int> strided(slices.size(), 0), any_strided(slices.size(), 0);
    for (std::size_t i = 0; i < slices.size(); ++i)
        strided[i] = plan.tensors[i].elements > 0 && !slices[i].selection.is_contiguous(slices[i].global_shape);
    allreduce(strided.data(), any_strided.data(), static_cast<int>(slices.size()), MPI_INT, MPI_MAX, comm);
    for (std::size_t i = 0; i < slices.size(); ++i)
        plan.tensors[i].gathered = plan.tensors[i].direct && any_strided[i] && size > 1 && opts.io_mode == IoMode::Auto;
    return plan;
}

}  // namespace gpt::ckpt
