// The interleaved schedule's activation memory, the way Megatron's is: one arena per rank
// holding every model chunk's workspace and one pool of micro-batch slots that a
// micro-batch of any chunk may take. The pool has as many slots as the schedule ever has
// micro-batch chunks alive at once (forwarded, backward not yet run) - fewer than the sum
// of each chunk's own peak - each as large as the largest chunk's slot.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "backend/backend.hpp"
#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"

namespace gpt::train {

class SharedActivations {
public:
    // This rank's chunks as pipeline_chunk_spec gives them, for the schedule of
    // num_micro_batches micro-batches.
    SharedActivations(const Config& cfg, const dist::ProcessGroups& groups, Backend& backend,
                      const model::ModelDims& dims, const model::ModelOptions& opt,
                      int micro_batch, std::int64_t num_micro_batches);
    ~SharedActivations();
    SharedActivations(const SharedActivations&) = delete;
    SharedActivations& operator=(const SharedActivations&) = delete;

    const model::SharedArena& arena(int chunk) const { return arenas_.at(static_cast<std::size_t>(chunk)); }
    int slots() const { return slots_; }
    std::size_t slot_bytes() const { return stride_; }
    std::size_t slot_pool_bytes() const { return stride_ * static_cast<std::size_t>(slots_); }

private:
    Backend& be_;
    std::byte* base_ = nullptr;
    std::vector<model::SharedArena> arenas_;
    int slots_ = 0;
    std::size_t stride_ = 0;
};

}  // namespace gpt::train
