// Data-parallel gradient reduction of one model chunk, the way Megatron's DDP does it: the
// flat fp32 gradient buffer is cut into contiguous buckets, counted from the end of the
// buffer because backward finishes the last layers first. Each bucket is summed over the
// data-parallel group - all-reduced, or with the distributed optimizer reduce-scattered so
// that every rank receives the sum over its own shard only - as soon as the last
// micro-batch's backward has finished it (--overlap-grad-reduce), else all together after
// backward. Buckets that hold tied word embeddings wait for finish(): their embedding-group
// sum must come first (the shards of the two stages' buffers do not line up).
//
// --check-for-nan-in-loss-and-grad (bf16/fp32): like Megatron's start_grad_sync, each
// bucket's local gradients are checked for NaN/Inf just before its collective (held-back
// buckets before the embedding-group sum), so the report can name the rank where a
// non-finite gradient arose, not every rank the reduction carried it to.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "config/config.hpp"
#include "dist/communicator.hpp"
#include "dist/data_groups.hpp"
#include "dist/process_groups.hpp"
#include "model/gpt_model.hpp"
#include "optim/adam.hpp"

namespace gpt::train {

struct GradBucket {
    std::int64_t begin = 0, end = 0;  // flat elements
    bool held_back = false;           // launched only by finish()
};

// Megatron's default bucket: max(40M, 1M x DP) elements.
std::int64_t default_bucket_elements(int dp_size);

// Buckets of `bucket_elements` over [0, total) from the end of the buffer; a bucket that
// overlaps one of `held_back` (flat element ranges) is marked.
std::vector<GradBucket> make_buckets(std::int64_t total, std::int64_t bucket_elements,
                                     const std::vector<std::pair<std::int64_t, std::int64_t>>& held_back);

class GradReducer {
public:
    struct Options {
        std::int64_t bucket_elements = 0;  // 0: default_bucket_elements
        bool overlap = false;              // launch buckets during the last backward
        bool sharded = false;              // reduce-scatter into [shard_begin, +shard_size)
        std::int64_t shard_begin = 0, shard_size = 0;
        bool check_finite = false;         // check local gradients before each collective
    };
    // held_back: flat element ranges whose buckets wait for finish().
    GradReducer(model::GptModel& model, dist::Communicator& dp, const Options& opt,
                const std::vector<std::pair<std::int64_t, std::int64_t>>& held_back);
    ~GradReducer();
    GradReducer(const GradReducer&) = delete;
    GradReducer& operator=(const GradReducer&) = delete;

    // Before the backward of the chunk's last micro-batch of the iteration: from here on,
    // finished buckets are launched (with overlap).
    void start_final_backward();
    // After backward (and the embedding-group sum): launches what is left and waits for
    // every bucket; sharded, this rank's shard of the grad buffer then holds the DP sum.
    void finish();

    // Before the embedding-group sum: checks the held-back buckets' local gradients (their
    // collective waits for finish(), after that sum has mixed in another stage's).
    void check_held_back();
    // With check_finite: the first parameter (layout order) whose local gradient was not
    // finite before the reduction of the last finish()ed iteration; "" when none.
    std::string local_non_finite() const;
    // Test hook (fault injection): runs on the grad buffer with a bucket just before that
    // bucket's local gradients are checked and reduced.
    void set_before_reduce_hook(std::function<void(float* grads, const GradBucket&)> h) {
        before_reduce_ = std::move(h);
    }

    const std::vector<GradBucket>& buckets() const { return buckets_; }
    // Buckets launched while backward still ran in the last finish()ed iteration.
    int launched_during_backward() const { return launched_early_; }

private:
    void on_ready(std::int64_t first_final);
    void launch(std::size_t bucket);
    void check(std::size_t bucket);  // once per iteration, before the bucket's collective

    model::GptModel& model_;
    dist::Communicator& dp_;
    Options opt_;
    std::vector<GradBucket> buckets_;
    std::vector<std::unique_ptr<dist::PendingOp>> pending_;  // per bucket, null when idle
    std::vector<bool> launched_;
    std::vector<bool> checked_;
    std::int64_t first_bad_ = -1;  // flat offset of the first non-finite parameter found
    std::function<void(float*, const GradBucket&)> before_reduce_;
    int launched_early_ = 0, launched_now_ = 0;
};

// Elements the flat buffers of every chunk are padded to a multiple of: DP x alignment with
// the distributed optimizer (equal, aligned shards), else 1.
std::int64_t grad_buffer_multiple(const Config& cfg, const dist::ProcessGroups& groups);
// The optimizer of one chunk for this run: with --use-distributed-optimizer sharded over
// the DP group, its grad norm and overflow check then reduced over every rank (each holds
// distinct gradient pieces, a host scalar reduction); else over the model-parallel group.
// The parameter all-gather goes over `data`'s DP group (it moves backend memory).
std::unique_ptr<optim::AdamOptimizer> make_optimizer(const Config& cfg, dist::ProcessGroups& groups,
                                                     dist::DataGroups& data, model::GptModel& chunk);
// The reducer of one chunk for this run: bucket size and overlap from the flags, this DP
// rank's shard of the padded buffer when the optimizer is distributed, and the tied
// word embeddings held back when the embedding group spans two stages.
std::unique_ptr<GradReducer> make_grad_reducer(const Config& cfg, dist::ProcessGroups& groups,
                                               dist::DataGroups& data, model::GptModel& chunk,
                                               const optim::AdamOptimizer& optimizer);

}  // namespace gpt::train
