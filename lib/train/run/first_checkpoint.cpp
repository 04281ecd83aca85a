#include "train/run/first_checkpoint.hpp"

#include <mpi.h>

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/load.hpp"
#include "core/errors.hpp"

namespace gpt::train {

std::optional<FirstCheckpoint> open_first_checkpoint(const CheckpointConfig& ck) {
    if (ck.load.empty()) return std::nullopt;
    const ckpt::LoadRequest req(ck.load, ck.ckpt_step, ck.load_fallback);
    const std::optional<std::int64_t> it = ckpt::first_candidate(req);
    if (!it) return std::nullopt;
    FirstCheckpoint first;
    first.iteration = *it;
    first.file = ckpt::checkpoint_file(req.dir, *it).string();
    // Metadata only: the load verifies the file's contents.
    ckpt::ReaderOptions opts;
    opts.verify_checksums = false;
    try {
        first.reader = std::make_unique<ckpt::CheckpointReader>(MPI_COMM_SELF, first.file, opts);
    } catch (const Error&) {
        // --load-fallback may load an older checkpoint; the load decides. Without it the
        // load reports this same error.
        if (!ck.load_fallback) throw;
    }
    return first;
}

void require_found_checkpoint(const CheckpointConfig& ck, bool found) {
    GPT_REQUIRE(found || ck.load.empty() || !ck.exit_on_missing_checkpoint, IoError,
                "--exit-on-missing-checkpoint: no checkpoint was found in --load ", ck.load,
                " (no latest_checkpointed_iteration.txt there); a typo in the path?");
}

}  // namespace gpt::train
