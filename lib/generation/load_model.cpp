#include "generation/load_model.hpp"

#include <filesystem>

#include "ckpt/load.hpp"
#include "core/errors.hpp"
#include "generation/checkpoint_args.hpp"
#include "model/param_layout.hpp"
#include "train/state/load_model_state.hpp"
#include "train/state/saved_run_attributes.hpp"

namespace gpt::generation {

LoadedModel load_model(MPI_Comm comm, const std::string& dir, std::int64_t step,
                       const std::vector<std::string>& flags, int tp_rank, int tp_size) {
    GPT_REQUIRE(!dir.empty(), UsageError, "--load DIR is required: the checkpoint folder gpt_pretrain --save wrote");
    GPT_REQUIRE(std::filesystem::is_directory(dir), UsageError, "--load ", dir, ": no such folder");
    LoadedModel m;
    ckpt::LoadRequest req(dir, step, false);
    const ckpt::LoadResult res = ckpt::load_checkpoint(comm, req, [&](ckpt::CheckpointReader& r) {
        const std::optional<SavedRun> saved = train::read_saved_run(r);
        GPT_REQUIRE(saved, DataError, "checkpoint ", r.file(), " has neither a '", kSavedRunAttribute, "' nor a '",
                    kArgumentsTableAttribute, "' attribute (the arguments it was trained with): cannot tell its model");
        m.cfg = config_from_checkpoint(*saved, flags);
        m.dims = model::make_model_dims(m.cfg.model, 1, tp_size, tp_rank);
        // The padded vocabulary as stored (any TP size may have saved it); it must split
        // evenly over this run's TP ranks.
        const std::int64_t rows = train::stored_vocab_rows(r);
        GPT_REQUIRE(rows % tp_size == 0, UsageError, "checkpoint ", r.file(), " has a padded vocabulary of ", rows,
                    " rows, which --tensor-model-parallel-size ", tp_size, " does not divide");
        m.dims.vocab_padded = rows;
        const model::ParamLayout layout(m.dims, model::ChunkSpec{0, m.dims.num_layers, true, true});
        m.params = train::load_model_state(r, layout);
        m.iteration = r.iteration();
        m.file = r.file();
    });
    GPT_REQUIRE(res.iteration.has_value(), UsageError, "--load ", dir,
                " holds no checkpoint (no latest_checkpointed_iteration.txt and no iter_* folder)");
    return m;
}

}  // namespace gpt::generation
