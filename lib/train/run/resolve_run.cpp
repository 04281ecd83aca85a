// resolve_run and derive_run: the run resolved with what a resumed run takes from its
// checkpoint (the padded vocabulary, the data positions). Kept apart from run_config.cpp so
// that resolve_data_run's tool links no checkpoint reader (run_config_steps.hpp).
#include <optional>
#include <string>
#include <utility>

#include "log/log.hpp"
#include "train/run/checkpoint_vocab.hpp"
#include "train/run/data_positions.hpp"
#include "train/run/eod_token.hpp"
#include "train/run/first_checkpoint.hpp"
#include "train/run/run_config.hpp"
#include "train/run/run_config_steps.hpp"

namespace gpt::train {

RunConfig resolve_run(Config cfg, int world_size, int local_world_size) {
    ResolvedFlags r = resolve_flags(std::move(cfg), world_size, local_world_size);
    resolve_vocab(r.cfg);
    // The checkpoint --load tries first, opened once for what the run takes from it before
    // the ranks build anything: its padded vocabulary and its data positions.
    const std::optional<FirstCheckpoint> first = open_first_checkpoint(r.cfg.checkpoint);
    require_found_checkpoint(r.cfg.checkpoint, first.has_value());
    // A resumed run keeps its checkpoint's padded vocabulary when the TP size changed.
    const std::string vocab_note = adopt_checkpoint_vocab(r.cfg, first);
    if (!vocab_note.empty()) GPT_LOG(info) << vocab_note;
    RunConfig run = derive_run(r.cfg, r.grid, local_world_size, first);
    run.plan_summary = std::move(r.plan_summary);
    return run;
}

RunConfig derive_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size,
                     const std::optional<FirstCheckpoint>& first) {
    RunConfig run = derive_common(cfg, grid, local_world_size, true);
    if (cfg.data.eod_mask_loss) run.model_options.loss_mask_token = end_of_document_token(cfg);
    if (cfg.data.reset_position_ids || cfg.data.reset_attention_mask) {
        run.model_options.document_token = end_of_document_token(cfg);
        run.model_options.reset_position_ids = cfg.data.reset_position_ids;
        run.model_options.reset_attention_mask = cfg.data.reset_attention_mask;
    }
    run.data_positions = read_data_positions(cfg, first);
    return run;
}

RunConfig derive_run(const Config& cfg, const dist::RankGrid& grid, int local_world_size) {
    // --finetune reads no data positions (nor anything else of the checkpoint here).
    return derive_run(cfg, grid, local_world_size,
                      cfg.checkpoint.finetune ? std::nullopt : open_first_checkpoint(cfg.checkpoint));
}

}  // namespace gpt::train
