// What --load DIR, --ckpt-step N and --load-fallback mean: which checkpoint to open, and
// which older one to try when it is damaged.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "ckpt/checkpoint_reader.hpp"

namespace gpt::ckpt {

struct LoadRequest {
    explicit LoadRequest(std::string load_dir, std::int64_t ckpt_step = -1, bool load_fallback = false)
        : dir(std::move(load_dir)), step(ckpt_step), fallback(load_fallback) {}
    std::string dir;         // --load
    std::int64_t step = -1;  // --ckpt-step; -1: the one the tracker names
    bool fallback = false;   // --load-fallback: try older complete checkpoints on failure
    ReaderOptions reader;
};

struct LoadResult {
    std::optional<std::int64_t> iteration;  // none: DIR is absent or holds no checkpoint (fresh start)
    std::string file;
    // One line per checkpoint tried and rejected before the loaded one (for the log).
    std::vector<std::string> rejected;
    // Rank 0 only: what --load-fallback did to the tracker (rewrote it to name the loaded
    // checkpoint, or could not), for the log.
    std::vector<std::string> notes;
};

// Collective. Candidates, newest first: the requested step (or the tracker's iteration),
// then with fallback every older committed iter_ folder. Each is opened and verified and
// handed to load_fn, which reads what the trainer needs. A candidate that fails (DataError
// or IoError, from validation or from load_fn) ends the load with that error, or with
// fallback moves on to the next older one; load_fn must then set all state it owns again.
// After load_fn, every dataset that no rank read through read() is verified too (each
// rank checksums 1/N of it), so damage anywhere in the file rejects it. With fallback,
// a loaded checkpoint that the tracker does not name becomes the tracker's (see notes).
LoadResult load_checkpoint(MPI_Comm comm, const LoadRequest& request,
                           const std::function<void(CheckpointReader&)>& load_fn);

// Not collective: the checkpoint load_checkpoint tries first (none: a fresh start), for a
// look before the ranks build anything (the padded vocabulary a resumed run adopts). The
// same errors as load_checkpoint's for a --ckpt-step or tracker it cannot follow.
std::optional<std::int64_t> first_candidate(const LoadRequest& request);

}  // namespace gpt::ckpt
