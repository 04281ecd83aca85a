#include "train/step/chunk_layout.hpp"

#include <algorithm>

#include "config/batch_rampup.hpp"
#include "config/validate.hpp"
#include "core/errors.hpp"
#include "pipeline/schedule.hpp"

namespace gpt::train {

namespace {
// The config's pipeline flags over the groups' stages (a Config built by hand may leave
// pipeline_model_parallel_size at 1).
ParallelConfig over_stages(const Config& cfg, const dist::ProcessGroups& groups) {
    ParallelConfig p = cfg.parallel;
    p.pipeline_model_parallel_size = groups.grid().pp_size();
    return p;
}
}  // namespace

int pipeline_num_chunks(const Config& cfg, const dist::ProcessGroups& groups) {
    const ParallelConfig p = over_stages(cfg, groups);
    validate_pipeline_split(cfg.model.num_layers, p);  // the flag check lives in config/validate
    return p.virtual_stages(cfg.model.num_layers);
}

model::ChunkSpec pipeline_chunk_spec(const Config& cfg, const dist::ProcessGroups& groups,
                                     int chunk) {
    const int p = groups.grid().pp_size(), s = groups.coords().pp;
    const int v = pipeline_num_chunks(cfg, groups);
    GPT_ASSERT(chunk >= 0 && chunk < v, "chunk ", chunk, " outside 0..", v - 1);
    const std::vector<int> layers = pipeline_chunk_layers(cfg.model.num_layers, p, v, cfg.parallel.split());
    const int vstage = chunk * p + s;  // Megatron's interleaved assignment
    int first = 0;
    for (int k = 0; k < vstage; ++k) first += layers[static_cast<std::size_t>(k)];
    return model::ChunkSpec{first, layers[static_cast<std::size_t>(vstage)], vstage == 0, vstage == p * v - 1};
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
