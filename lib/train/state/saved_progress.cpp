#include "train/state/saved_progress.hpp"

#include <cstring>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"

namespace gpt::train {

namespace {
const char* kRngBlob = "rng_state";
}  // namespace

void SavedProgress::write_attributes(ckpt::CheckpointWriter& w) const {
    w.set_attribute("iteration", iteration);
    w.set_attribute("consumed_samples", consumed_train);  // the training data position
    w.set_attribute("consumed_train_samples", consumed_train);
    w.set_attribute("consumed_valid_samples", consumed_valid);
    w.set_attribute("skipped_iterations", skipped);
    w.set_attribute("optimizer_steps", optimizer_steps);
    w.set_attribute("lr_scheduler_num_steps", scheduler_steps);
    w.set_attribute("loss_scaler_dynamic", std::int64_t{dynamic_scaler ? 1 : 0});
    w.set_attribute("loss_scale", scale);
    w.set_attribute("loss_scale_growth_tracker", std::int64_t{growth});
    w.set_attribute("loss_scale_hysteresis_tracker", std::int64_t{hysteresis});
    w.set_attribute("dropout_micro_batches", dropout_micro_batches);
    w.set_attribute("seed", seed);
    w.set_attribute("num_floating_point_operations_so_far", flops);
}

void SavedProgress::write_rng(ckpt::CheckpointWriter& w) const {
    w.write_rank_blob(kRngBlob, &rng, sizeof rng);
}

SavedProgress SavedProgress::read(ckpt::CheckpointReader& r, int world_size, int rank) {
    SavedProgress p;
    p.iteration = r.attribute_int("iteration");
    p.consumed_train = r.attribute_int("consumed_train_samples");
    p.consumed_valid = r.attribute_int("consumed_valid_samples");
    p.skipped = r.attribute_int("skipped_iterations");
    p.optimizer_steps = r.attribute_int("optimizer_steps");
    p.scheduler_steps = r.attribute_int("lr_scheduler_num_steps");
    p.dynamic_scaler = r.attribute_int("loss_scaler_dynamic") != 0;
    p.scale = r.attribute_double("loss_scale");
    p.growth = static_cast<int>(r.attribute_int("loss_scale_growth_tracker"));
    p.hysteresis = static_cast<int>(r.attribute_int("loss_scale_hysteresis_tracker"));
    p.dropout_micro_batches = r.attribute_int("dropout_micro_batches");
    p.seed = r.attribute_int("seed");
    const char* flops = "num_floating_point_operations_so_far";
    p.flops = r.has_attribute(flops) ? r.attribute_double(flops) : 0.0;
    if (r.saved_world_size() == world_size && r.has_rank_blob(kRngBlob)) {
        const auto blob = r.read_rank_blob(kRngBlob, rank);
        GPT_REQUIRE(blob.size() == sizeof(RngState), DataError, r.file(), ": rank blob '", kRngBlob,
                    "' of rank ", rank, " has ", blob.size(), " bytes, expected ", sizeof(RngState));
        std::memcpy(&p.rng, blob.data(), sizeof(RngState));
        p.have_rng = true;
    }
    return p;
}

std::uint64_t SavedProgress::micro_batches_done(int dp_size, int dp_rank) const {
    const auto dp = static_cast<std::uint64_t>(dp_size);
    if (own_rng(dp_size, dp_rank)) return (rng.next_stream - static_cast<std::uint64_t>(rng.dp_rank)) / dp;
    return static_cast<std::uint64_t>(dropout_micro_batches) / dp;
}

}  // namespace gpt::train
