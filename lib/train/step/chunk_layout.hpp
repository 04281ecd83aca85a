// Which model chunks a rank holds and how many micro-batch activation slots each needs
// (Megatron's PTD-P "P"): the rank is stage s of p and holds v model chunks; chunk c is
// virtual stage c*p + s (Megatron's interleaved assignment; v = 1 is plain 1F1B, p = v = 1
// the whole model run sequentially) with the layers config/pipeline_split.hpp gives it:
// L/(p*v) unless the flags ask for uneven stages. The first virtual stage holds the
// embeddings, the last the final layernorm and the head.
#pragma once

#include <cstdint>

#include "config/config.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"

namespace gpt::train {

// Model chunks per pipeline stage: --num-virtual-stages-per-pipeline-rank, or
// L / p / --num-layers-per-virtual-pipeline-stage, or 1. Throws UsageError when the layers
// do not split over the (virtual) stages as the flags ask.
int pipeline_num_chunks(const Config& cfg, const dist::ProcessGroups& groups);
// The layers and pre/post processing of this rank's chunk `chunk`. pp == 1: the whole model.
model::ChunkSpec pipeline_chunk_spec(const Config& cfg, const dist::ProcessGroups& groups,
                                     int chunk);
// Micro-batch slots chunk `chunk` needs: the most of its micro-batches the schedule has
// forwarded but not yet run backward at any moment (1 for the sequential schedule).
int pipeline_slots(const Config& cfg, const dist::ProcessGroups& groups,
                   std::int64_t num_micro_batches, int chunk);
// The most micro-batch chunks alive at once over all of this rank's chunks: the slots of
// an arena the chunks share (train::SharedActivations).
int pipeline_pooled_slots(const Config& cfg, const dist::ProcessGroups& groups,
                          std::int64_t num_micro_batches);

}  // namespace gpt::train
