#include "train/step/shared_activations.hpp"

#include <algorithm>

#include "train/step/chunk_layout.hpp"

namespace gpt::train {

namespace {
constexpr std::size_t kAlign = 256;  // ActivationPlan aligns every buffer to this
std::size_t aligned(std::size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
}  // namespace

SharedActivations::SharedActivations(const Config& cfg, const dist::ProcessGroups& groups,
                                     Backend& backend, const model::ModelDims& dims,
                                     const model::ModelOptions& opt, int micro_batch,
                                     std::int64_t num_micro_batches)
    : be_(backend) {
    const int v = pipeline_num_chunks(cfg, groups);
    std::vector<model::ArenaNeeds> needs;
    for (int c = 0; c < v; ++c)
        needs.push_back(model::GptModel::arena_needs(backend, dims, pipeline_chunk_spec(cfg, groups, c),
                                                     opt, micro_batch));
    std::size_t at = 0;
    for (const auto& n : needs) {
        model::SharedArena a;
        a.placement.workspace_at = at;
        at += aligned(n.workspace);
        stride_ = std::max(stride_, aligned(n.slot));
        arenas_.push_back(a);
    }
    slots_ = pipeline_pooled_slots(cfg, groups, num_micro_batches);
    const std::size_t total = at + stride_ * static_cast<std::size_t>(slots_);
    base_ = static_cast<std::byte*>(be_.alloc(total));
    for (auto& a : arenas_) {
        a.base = base_;
        a.placement.slots_at = at;
        a.placement.slot_stride = stride_;
        a.placement.slots = slots_;
    }
}

SharedActivations::~SharedActivations() { be_.free(base_); }

}  // namespace gpt::train
