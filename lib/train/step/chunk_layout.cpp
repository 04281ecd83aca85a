#include "train/step/chunk_layout.hpp"

#include <algorithm>

#include "config/batch_rampup.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "pipeline/schedule.hpp"

namespace gpt::train {

int pipeline_num_chunks(const Config& cfg, const dist::ProcessGroups& groups) {
    const int p = groups.grid().pp_size(), L = cfg.model.num_layers;
    const int per_virtual = cfg.parallel.num_layers_per_virtual_pipeline_stage;
    validate_pipeline_split(L, p, per_virtual);  // the flag check itself lives in config/validate
    if (per_virtual <= 0) return 1;
    return L / p / per_virtual;
}

model::ChunkSpec pipeline_chunk_spec(const Config& cfg, const dist::ProcessGroups& groups,
                                     int chunk) {
    const int p = groups.grid().pp_size(), s = groups.coords().pp;
    const int v = pipeline_num_chunks(cfg, groups);
    GPT_ASSERT(chunk >= 0 && chunk < v, "chunk ", chunk, " outside 0..", v - 1);
    const int per_vstage = cfg.model.num_layers / (p * v);
    const int vstage = chunk * p + s;  // Megatron's interleaved assignment
    return model::ChunkSpec{vstage * per_vstage, per_vstage, vstage == 0, vstage == p * v - 1};
}

namespace {
// The most forwarded-but-not-yet-backward micro-batches of `chunk` (-1: of all chunks) in
// the schedule the run executes (pipeline::make_schedule; sequential when p == 1).
// With --rampup-batch-size or --step-batch-size-schedule, the most over every micro-batch
// count an iteration may take (ramp_micro_batch_counts).
int most_alive(const Config& cfg, const dist::ProcessGroups& groups,
               std::int64_t num_micro_batches, int chunk) {
    const int p = groups.grid().pp_size();
    const int v = pipeline_num_chunks(cfg, groups);
    std::vector<std::int64_t> counts =
        ramp_micro_batch_counts(cfg, num_micro_batches, groups.grid().dp_size(), v > 1 ? p : 1);
    counts.push_back(num_micro_batches);
    int most = 0;
    for (const std::int64_t m : counts) {
        int live = 0;
        for (const auto& a : pipeline::make_schedule(p, groups.coords().pp, static_cast<int>(m), v)) {
            if (chunk >= 0 && a.chunk != chunk) continue;
            live += a.pass == pipeline::Pass::Forward ? 1 : -1;
            most = std::max(most, live);
        }
    }
    return std::max(most, 1);
}
}  // namespace

int pipeline_slots(const Config& cfg, const dist::ProcessGroups& groups,
                   std::int64_t num_micro_batches, int chunk) {
    return most_alive(cfg, groups, num_micro_batches, chunk);
}

int pipeline_pooled_slots(const Config& cfg, const dist::ProcessGroups& groups,
                          std::int64_t num_micro_batches) {
    return most_alive(cfg, groups, num_micro_batches, -1);
}

}  // namespace gpt::train
