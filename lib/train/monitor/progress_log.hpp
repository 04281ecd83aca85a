// Megatron's --log-progress: SAVE/progress.txt, one tab-separated line per event, appended by
// world rank 0 across every job of a run (requeues included), so that a run's throughput is
// on record beside its checkpoints. Lines, as Megatron writes them:
//   DATE TIME \t Job ID: <SLURM_JOB_ID> \t # GPUs: <world size> \t Starting job
//   ... \t Saved checkpoint \t Iteration: N \t Job throughput: X TFLOP/s/GPU \t
//       Cumulative throughput: Y TFLOP/s/GPU \t Floating-point operations: F \t Tokens (in billions): T
//   ... \t Saving async checkpoint \t (the same fields)     an --async-save begun
//   ... \t Saved async checkpoint \t Iteration: N             ... and published
//   ... \t Deleted checkpoint \t Iteration: N                 removed by --keep-last
// Job throughput: the model FLOPs of this job's iterations over its wall time since it
// started, per rank. Cumulative: the same since the first job of the current world size
// started, from the file's earlier lines (Megatron's get_start_time_from_progress_log).
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace gpt::train {

// What a save reports: where the run stands.
struct ProgressPoint {
    std::int64_t iteration = 0;
    double flops = 0.0;          // num_floating_point_operations_so_far
    std::int64_t tokens = 0;     // consumed training samples x sequence length
};

// Where the first job of this world size started, and the FLOPs done by then (the newest
// published save before it), from progress.txt's text; lines that are not Megatron's are
// passed over. found: there is such a job.
struct ProgressStart {
    bool found = false;
    std::int64_t epoch_seconds = 0;  // its "Starting job" line's local time
    double flops = 0.0;
};
ProgressStart progress_start(const std::string& text, int world_size);

class ProgressLog {
public:
    // Every rank constructs it; world rank 0 (`writes`) appends "Starting job" now, creating
    // the folder if needed. flops_at_start: the FLOPs done when this job started (after its
    // load; see started()).
    ProgressLog(std::string save_dir, int world_size, bool writes);
    // The FLOPs of the loaded checkpoint: this job's throughput counts from there.
    void started(double flops_at_start) { flops_at_start_ = flops_at_start; }
    // A persistent save: "Saved checkpoint" (synchronous) or "Saving async checkpoint".
    void saved(const ProgressPoint& p, bool async);
    void published_async(std::int64_t iteration);
    void deleted(std::int64_t iteration);
    const std::string& file() const { return file_; }

private:
    void append(const std::string& event);

    std::string file_;
    int world_size_ = 1;
    bool writes_ = false;
    bool warned_ = false;  // the one warning about a file it cannot append to
    double flops_at_start_ = 0.0;
    std::chrono::steady_clock::time_point started_;
};

}  // namespace gpt::train
