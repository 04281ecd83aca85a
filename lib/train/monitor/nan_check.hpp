// Megatron's --check-for-nan-in-loss-and-grad (on by default): a NaN or Inf lm loss or
// gradient in a run without a loss scaler (bf16, fp32; fp16's overflows are the scaler's to
// skip) stops training with one line that names the rank, its host and the tensor.
//
// Both reports are collective over the world and return the same text on every rank, so
// every rank throws alike and no rank waits for one that stopped. The loss is checked
// where it is computed (each data-parallel rank's last pipeline stage, before the
// reduction); gradients the same way, each rank's local gradients before the data-parallel
// reduction (and the embedding-group sum), which would carry a NaN from one rank to its
// peers (train/step/grad_reducer.hpp): the rank named is the lowest where one arose. Only a NaN
// the reduction itself made (an overflowing sum) is looked for after it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dist/process_groups.hpp"
#include "train/step/model_chunks.hpp"

namespace gpt::train {

// The lowest world rank for which `mine` is true, or -1 (collective over `world`).
int lowest_rank_with(bool mine, dist::Communicator& world);
// `text` of world rank `root`, on every rank (collective over `world`).
std::string share_text(const std::string& text, int root, dist::Communicator& world);

// For a non-finite global loss: which rank's own loss is not finite.
std::string non_finite_loss_report(double local_loss, double loss, std::int64_t iteration,
                                   dist::ProcessGroups& groups, const std::vector<std::string>& hosts);
// For a step with non-finite gradients: the first such parameter on the lowest rank whose
// local gradients had one, else on the lowest rank after the reduction.
std::string non_finite_grad_report(ModelChunks& chunks, std::int64_t iteration,
                                   dist::ProcessGroups& groups, const std::vector<std::string>& hosts);

}  // namespace gpt::train
