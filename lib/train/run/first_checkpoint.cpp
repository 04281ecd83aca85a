#include "train/run/first_checkpoint.hpp"

#include <mpi.h>

#include "ckpt/checkpoint_dir.hpp"
#include "core/errors.hpp"

namespace gpt::train {

namespace {

ckpt::LoadRequest persistent_request(const CheckpointConfig& ck) {
    return ckpt::LoadRequest(ck.load, ck.ckpt_step, ck.load_fallback);
}

ckpt::LoadRequest non_persistent_request(const CheckpointConfig& ck) {
    return ckpt::LoadRequest(ck.non_persistent_load_dir(), -1, ck.load_fallback);
}

// The iteration a request loads first; none for a fresh start, and with --load-fallback
// also when the folder's tracker cannot be followed (the load then decides).
std::optional<std::int64_t> newest(const ckpt::LoadRequest& req) {
    try {
        return ckpt::first_candidate(req);
    } catch (const Error&) {
        if (!req.fallback) throw;
        return std::nullopt;
    }
}

}  // namespace

bool non_persistent_first(const CheckpointConfig& ck) {
    if (ck.load.empty() || ck.non_persistent_ckpt_type.empty() || ck.ckpt_step >= 0) return false;
    const std::optional<std::int64_t> transient = newest(non_persistent_request(ck));
    if (!transient) return false;
    const std::optional<std::int64_t> kept = newest(persistent_request(ck));
    return !kept || *kept <= *transient;
}

std::vector<ckpt::LoadRequest> load_requests(const CheckpointConfig& ck, bool non_persistent_first) {
    if (ck.load.empty()) return {};
    if (!non_persistent_first) return {persistent_request(ck)};
    return {non_persistent_request(ck), persistent_request(ck)};
}

std::optional<FirstCheckpoint> open_first_checkpoint(const CheckpointConfig& ck) {
    const std::vector<ckpt::LoadRequest> reqs = load_requests(ck, non_persistent_first(ck));
    if (reqs.empty()) return std::nullopt;
    const ckpt::LoadRequest& req = reqs.front();
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
