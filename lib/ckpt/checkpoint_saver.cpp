#include "ckpt/checkpoint_saver.hpp"

#include <exception>
#include <sstream>

#include "ckpt/checkpoint_dir.hpp"
#include "ckpt/collective.hpp"
#include "ckpt/save_lock.hpp"
#include "core/errors.hpp"
#include "core/watchdog_deadline.hpp"

namespace gpt::ckpt {

namespace {
double since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
std::string gigabytes(std::uint64_t bytes) {
    std::ostringstream os;
    os.precision(3);
    os << static_cast<double>(bytes) / 1e9;
    return os.str();
}
}  // namespace

CheckpointSaver::CheckpointSaver(MPI_Comm comm, std::string dir, SaverOptions options, LogFn log)
    : dir_(std::move(dir)), opts_(std::move(options)), log_(std::move(log)) {
    {
        watchdog::BlockedScope blocked("MPI_Comm_dup (the checkpoint saver's communicator)");
        MPI_Comm_dup(comm, &comm_);
    }
    MPI_Comm_rank(comm_, &rank_);
    opts_.writer.background = opts_.async;
    std::exception_ptr err;
    try {
        collectively(comm_, [&] {
            if (rank_ != 0) return;
            lock_ = std::make_unique<SaveFolderLock>(dir_);
            latest_ = read_tracker_if_valid(dir_).value_or(-1);  // a damaged one: the next save replaces it
        });
    } catch (...) {
        err = std::current_exception();
    }
    if (err) {
        lock_.reset();
        MPI_Comm_free(&comm_);
        std::rethrow_exception(err);
    }
    bcast(&latest_, 1, MPI_INT64_T, 0, comm_);
}

CheckpointSaver::~CheckpointSaver() {
    writer_.reset();  // stops and joins a background write before its buffers go
    keep_alive_.reset();
    if (comm_ != MPI_COMM_NULL && std::uncaught_exceptions() == 0) MPI_Comm_free(&comm_);
}

CheckpointWriter& CheckpointSaver::begin(std::int64_t iteration) {
    wait();
    started_ = std::chrono::steady_clock::now();
    writer_ = std::make_unique<CheckpointWriter>(comm_, dir_, iteration, opts_.writer);
    return *writer_;
}

std::optional<SaveResult> CheckpointSaver::commit(std::shared_ptr<const void> keep_alive,
                                                   std::uint64_t keep_alive_bytes, std::function<void()> ready) {
    GPT_REQUIRE(writer_ != nullptr, InternalError, "CheckpointSaver::commit without begin");
    // A synchronous save has written everything in write(): its buffers were complete then.
    GPT_REQUIRE(opts_.async || !ready, InternalError, "CheckpointSaver::commit: a ready wait for a synchronous save");
    keep_alive_ = std::move(keep_alive);
    writer_->commit_in_background(opts_.keep_last, std::move(ready));
    stall_ = since(started_);
    allreduce(&keep_alive_bytes, &copy_max_, 1, MPI_UINT64_T, MPI_MAX, comm_);
    allreduce(&keep_alive_bytes, &copy_total_, 1, MPI_UINT64_T, MPI_SUM, comm_);
    if (opts_.async) {
        if (log_ && rank_ == 0) {
            std::ostringstream os;
            os << "checkpoint at iteration " << writer_->iteration() << " is being written in the background"
               << " (--async-save; training stalled " << stall_ << " s; host copy held until published: "
               << gigabytes(copy_max_) << " GB on the largest rank, " << gigabytes(copy_total_) << " GB in all)";
            log_(os.str());
        }
        return std::nullopt;
    }
    return publish();
}

std::optional<SaveResult> CheckpointSaver::poll() {
    if (!writer_) return std::nullopt;
    if (!writer_->background_finished()) return std::nullopt;
    return publish();
}

std::optional<SaveResult> CheckpointSaver::wait() {
    if (!writer_) return std::nullopt;
    return publish();
}

SaveResult CheckpointSaver::publish() {
    const auto t0 = std::chrono::steady_clock::now();
    SaveResult r;
    r.iteration = writer_->iteration();
    try {
        r.commit = writer_->finish_commit();
    } catch (const Error& e) {
        // Every rank is here with the same error (finish_commit agrees on it). The writer's
        // temporary folder stays for the next save to remove; the tracker was not touched.
        // A failed background save stops training: continuing would leave the job without
        // the checkpoint the user expects at this interval.
        writer_.reset();
        keep_alive_.reset();
        if (rank_ == 0) latest_ = read_tracker_if_valid(dir_).value_or(-1);
        bcast(&latest_, 1, MPI_INT64_T, 0, comm_);
        const std::string previous =
            latest_ >= 0 ? "the latest complete checkpoint is iteration " + std::to_string(latest_) + " (" +
                               (fs::path(dir_) / iteration_dir_name(latest_)).string() + "), intact"
                         : "there is no complete checkpoint in " + dir_ + " yet";
        GPT_THROW(IoError, "saving the checkpoint of iteration ", r.iteration, " to ", dir_,
                  opts_.async ? " in the background" : "", " failed: ", e.what(), ". Training stops; ", previous);
    }
    writer_.reset();
    keep_alive_.reset();
    latest_ = r.iteration;
    r.stall_seconds = stall_ + (opts_.async ? since(t0) : 0.0);
    r.total_seconds = since(started_);
    r.host_copy_bytes_max = copy_max_;
    r.host_copy_bytes_total = copy_total_;
    if (log_ && rank_ == 0) {
        std::ostringstream os;
        os << "successfully saved checkpoint at iteration " << r.iteration << " to " << dir_ << " ("
           << r.total_seconds << " s";
        if (opts_.async) os << "; training stalled " << r.stall_seconds << " s";
        os << ")";
        log_(os.str());
        const std::string why =
            opts_.retention.empty() ? "--keep-last " + std::to_string(opts_.keep_last) : opts_.retention;
        for (std::int64_t old : r.commit.removed)
            log_("removed checkpoint at iteration " + std::to_string(old) + " (" + why + ")");
    }
    return r;
}

}  // namespace gpt::ckpt
