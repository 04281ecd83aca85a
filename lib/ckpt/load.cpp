#include "ckpt/load.hpp"

#include <algorithm>
#include <memory>
#include <sstream>

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/collective.hpp"
#include "core/errors.hpp"

namespace gpt::ckpt {

namespace {

std::string list_text(const std::vector<std::int64_t>& its) {
    std::ostringstream os;
    for (std::size_t i = 0; i < its.size(); ++i) os << (i ? ", " : "") << its[i];
    return its.empty() ? std::string("none") : os.str();
}

// Rank 0 decides from the file system; the others receive the list. Empty: fresh start.
// `tracked`: what the tracker names, -1 when it is absent or damaged (step < 0 only).
std::vector<std::int64_t> candidates(const LoadRequest& req, std::vector<std::string>& notes,
                                     std::int64_t& tracked_out) {
    const fs::path root(req.dir);
    // Megatron's habit: --load and --save name the same folder, which the first run has not
    // created yet. No folder is a fresh start, like an empty one.
    if (!fs::exists(root)) return {};
    GPT_REQUIRE(fs::is_directory(root), IoError, "--load ", req.dir, " is not a folder");
    const std::vector<std::int64_t> committed = list_iterations(root);
    std::int64_t first = -1;
    if (req.step >= 0) {
        first = req.step;
        if (!std::binary_search(committed.begin(), committed.end(), first)) {
            GPT_REQUIRE(req.fallback, IoError, "no checkpoint for --ckpt-step ", req.step, " in ", req.dir,
                        " (available: ", list_text(committed), ")");
            notes.push_back("iteration " + std::to_string(first) + ": no folder " + iteration_dir_name(first));
        }
    } else {
        std::optional<std::int64_t> tracked;
        try {
            tracked = read_tracker(root);
        } catch (const DataError& e) {
            if (!req.fallback) throw;
            notes.push_back(e.what());
        }
        if (tracked) {
            first = *tracked;
            tracked_out = *tracked;
        } else if (committed.empty()) {
            return {};
        } else if (notes.empty()) {  // tracker absent, not damaged
            GPT_REQUIRE(req.fallback, IoError, req.dir, " holds checkpoint folders (", list_text(committed),
                        ") but no ", kTrackerFile,
                        ": the first save died before publishing. HINT: pass --ckpt-step N or --load-fallback");
            notes.push_back(std::string("no ") + kTrackerFile);
        }
        if (first < 0) first = committed.back();
    }
    std::vector<std::int64_t> out{first};
    if (req.fallback)
        for (auto it = committed.rbegin(); it != committed.rend(); ++it)
            if (*it < first) out.push_back(*it);
    return out;
}

// --load-fallback loaded `loaded` although the tracker is damaged, absent or names a
// checkpoint that failed: name the loaded one, so that the next save's "already the
// latest?" check and the next requeue see what this run really continues from (a
// garbage tracker used to fail the first save of every requeue). Best effort: a read-only
// --load folder keeps its tracker, and the message says so.
std::string repair_tracker(const std::string& dir, std::int64_t loaded) {
    try {
        write_tracker(dir, loaded);
        return "--load-fallback: rewrote " + (fs::path(dir) / kTrackerFile).string() + " to name iteration " +
               std::to_string(loaded) + ", the checkpoint loaded";
    } catch (const Error& e) {
        return std::string("--load-fallback: could not rewrite the tracker to name iteration ") +
               std::to_string(loaded) + ": " + e.what();
    }
}

}  // namespace

LoadResult load_checkpoint(MPI_Comm comm, const LoadRequest& request,
                           const std::function<void(CheckpointReader&)>& load_fn) {
    int rank = 0;
    MPI_Comm_rank(comm, &rank);
    LoadResult result;
    std::vector<std::int64_t> list;
    std::int64_t tracked = -1;
    collectively(comm, [&] {
        if (rank == 0) list = candidates(request, result.rejected, tracked);
    });
    std::uint64_t n = list.size();
    bcast(&n, 1, MPI_UINT64_T, 0, comm);
    list.resize(n);
    bcast(list.data(), static_cast<int>(n), MPI_INT64_T, 0, comm);
    if (n == 0) return result;

    for (std::size_t i = 0; i < list.size(); ++i) {
        const std::string file = checkpoint_file(request.dir, list[i]).string();
        // The reader lives outside the try: a rejected one is then closed by a normal scope
        // exit on every rank, not skipped as an unwinding destructor would (see ~CheckpointReader).
        std::unique_ptr<CheckpointReader> reader;
        std::string rejected;
        try {
            reader = std::make_unique<CheckpointReader>(comm, file, request.reader);
            collectively(comm, [&] { load_fn(*reader); });
            // Everything written is verified, not only what this layout read.
            if (request.reader.verify_checksums) reader->verify_unread();
        } catch (const DataError& e) {
            if (!request.fallback) throw;
            rejected = e.what();
        } catch (const IoError& e) {
            if (!request.fallback) throw;
            rejected = e.what();
        }
        if (rejected.empty()) {
            result.iteration = list[i];
            result.file = file;
            if (rank == 0 && request.fallback && request.step < 0 && tracked != list[i])
                result.notes.push_back(repair_tracker(request.dir, list[i]));
            return result;
        }
        result.rejected.push_back(std::move(rejected));
    }
    std::ostringstream os;
    for (const auto& r : result.rejected) os << "\n  " << r;
    GPT_THROW(DataError, "no loadable checkpoint in ", request.dir, "; rejected:", os.str());
}

std::optional<std::int64_t> first_candidate(const LoadRequest& request) {
    std::vector<std::string> notes;
    std::int64_t tracked = -1;
    const std::vector<std::int64_t> list = candidates(request, notes, tracked);
    if (list.empty()) return std::nullopt;
    return list.front();
}

}  // namespace gpt::ckpt
