#include "train/run/checkpoint_vocab.hpp"

#include "core/errors.hpp"
#include "model/param_layout.hpp"
#include "train/run/first_checkpoint.hpp"

namespace gpt::train {

int divisible_by_for_saved_vocab(const Config& cfg, std::int64_t saved, const std::string& file) {
    const int tp = cfg.parallel.tensor_model_parallel_size;
    // A vocabulary larger than the saved rows is another model: check_checkpoint_args and
    // the load's row check refuse it with their own message.
    if (saved == cfg.padded_vocab_size() || saved < cfg.model.vocab_size) return 0;
    GPT_REQUIRE(saved % tp == 0, UsageError, "checkpoint ", file, " has a padded vocabulary of ", saved,
                " rows, which --tensor-model-parallel-size ", tp,
                " does not divide: each tensor-parallel rank holds an equal share of the rows. HINT: "
                "choose a TP size that divides ", saved);
    // ceil(V / saved) * saved == saved for 0 < V <= saved: Megatron's padding to a multiple
    // of (saved / TP) x TP gives exactly the saved rows.
    return static_cast<int>(saved / tp);
}

std::string adopt_checkpoint_vocab(Config& cfg, const std::optional<FirstCheckpoint>& first) {
    // No reader: --load-fallback may load an older checkpoint; the row check there names a mismatch.
    if (!first || !first->reader) return "";
    const ckpt::CheckpointReader* reader = first->reader.get();
    const std::string& file = first->file;
    const char* name = model::ParamLayout::word_embeddings();
    if (!reader->has_tensor(name)) return "";  // the load reports the missing tensor
    const std::int64_t saved = reader->tensor_info(name).shape.at(0);
    const int divisible_by = divisible_by_for_saved_vocab(cfg, saved, file);
    if (divisible_by == 0) return "";
    const int was = cfg.padded_vocab_size();
    cfg.model.make_vocab_size_divisible_by = divisible_by;
    return "> padded vocabulary: " + std::to_string(saved) + " rows, as in checkpoint " + file +
           " (this layout would pad to " + std::to_string(was) + "); make_vocab_size_divisible_by " +
           std::to_string(divisible_by) + " at tensor-model-parallel size " +
           std::to_string(cfg.parallel.tensor_model_parallel_size);
}

}  // namespace gpt::train
