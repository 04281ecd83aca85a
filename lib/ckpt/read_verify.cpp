// CheckpointReader::read, step 3: the checksums of what was read. The ranks' contributions
// (read_execute.cpp) add up to each tensor's checksum when they cover it exactly once; a
// tensor they do not settle gets an authoritative full pass.
#include "ckpt/collective.hpp"
#include "ckpt/profile.hpp"
#include "ckpt/reader_impl.hpp"

namespace gpt::ckpt {

void CheckpointReader::Impl::verify_read(const ReadPlan& plan, const std::vector<TensorSliceOut>& slices,
                                         const ReadSums& sums) {
    if (!opts.verify_checksums || slices.empty()) return;
    PhaseTimer agree_timer(Phase::LoadAgree);
    const int m = static_cast<int>(slices.size());
    const std::vector<std::uint64_t> total = allreduce_checksums(comm, sums.partial);
    std::vector<std::int64_t> covered(slices.size(), 0);
    allreduce(sums.counted.data(), covered.data(), m, MPI_INT64_T, MPI_SUM, comm);
    agree_timer.stop();
    // Tensors read partly or with overlapping non-identical selections, and any mismatch
    // (which overlapping leaders could also cause), get an authoritative full pass.
    std::vector<std::size_t> recheck;
    for (std::size_t i = 0; i < slices.size(); ++i) {
        const TensorRead& t = plan.tensors[i];
        if (covered[i] != num_elements(t.entry->shape) || total[i] != t.entry->checksum) recheck.push_back(t.index);
        else verified[t.index] = 1;
    }
    stats.rechecked_tensors += static_cast<std::int64_t>(recheck.size());
    if (!recheck.empty()) collectively(comm, [&] { verify_entries(recheck); });
}

}  // namespace gpt::ckpt
