// The trainer's checkpoints: what is saved (docs/checkpoint-format.md, "Using it from the
// trainer"), how it is loaded into any supported layout, and the end-of-iteration decision
// to save and exit. Trainer members defined here keep trainer.cpp about the training loop.
#include <chrono>
#include <cstring>
#include <functional>
#include <optional>
#include <thread>

#include "ckpt/checkpoint.hpp"
#include "ckpt/collective.hpp"
#include "core/environment.hpp"
#include "core/errors.hpp"
#include "log/log.hpp"
#include "train/state/checkpoint_slices.hpp"
#include "train/run/exit_conditions.hpp"
#include "train/run/first_checkpoint.hpp"
#include "train/state/fp8_checkpoint.hpp"
#include "train/state/host_copy.hpp"
#include "train/state/load_policy.hpp"
#include "train/state/load_model_state.hpp"
#include "train/state/save_model_state.hpp"
#include "train/state/saved_progress.hpp"
#include "train/state/saved_run_attributes.hpp"
#include "train/trainer.hpp"

namespace gpt::train {

namespace {

// This rank's model chunks and their optimizers (chunk 0 first).
struct ChunkRefs {
    std::vector<model::GptModel*> models;
    std::vector<optim::AdamOptimizer*> optimizers;
};

ChunkRefs chunk_refs(ModelChunks& chunks) {
    ChunkRefs r;
    for (int c = 0; c < chunks.num_chunks(); ++c) {
        r.models.push_back(&chunks.chunk(c));
        r.optimizers.push_back(&chunks.optimizer(c));
    }
    return r;
}

// Every chunk's state where the backend keeps it, as views: on a host-memory backend what a
// synchronous save writes from directly (no copy); on a device, what HostCopy::fill copies
// (device pointers, never dereferenced on the host).
std::vector<ChunkHost> state_in_backend(const ChunkRefs& refs) {
    std::vector<ChunkHost> out(refs.models.size());
    for (std::size_t c = 0; c < out.size(); ++c) {
        model::GptModel& m = *refs.models[c];
        optim::AdamOptimizer& opt = *refs.optimizers[c];
        ChunkHost& h = out[c];
        const auto n = static_cast<std::size_t>(m.layout().total_elements());
        // The optimizer's own range: the whole buffer, or its distributed-optimizer shard.
        const auto shard = static_cast<std::size_t>(opt.shard_size());
        h.layout = &m.layout();
        h.opt_begin = opt.shard_begin();
        h.sharded = opt.distributed();
        h.params = {static_cast<std::byte*>(m.params()), n * dtype_size(m.options().dtype)};
        h.main = {opt.main_params(), shard};
        h.exp_avg = {opt.exp_avg(), shard};
        h.exp_avg_sq = {opt.exp_avg_sq(), shard};
    }
    return out;
}

std::vector<TensorBinding> bind(const ChunkRefs& refs, const model::ParamLayout& full,
                                const dist::RankCoords& c) {
    std::vector<const model::ParamLayout*> layouts;
    for (auto* m : refs.models) layouts.push_back(&m->layout());
    return bind_tensors(full, layouts, c.tp, c.dp);
}

model::ParamLayout whole_model_layout(const model::GptModel& m) {
    return model::ParamLayout(m.dims(), model::ChunkSpec{0, m.dims().num_layers, true, true});
}

// GPT_TEST_STALL_BEFORE_SAVE (core/environment.hpp): this rank never reaches the save, as
// a rank stuck in a file system or a kernel would; only the other ranks' watchdog can end
// the job. Sleeping (no wait of ours) keeps this rank's own watchdog out of it.
void stall_if_asked(int world_rank) {
    const std::optional<int> rank = env::test_stall_before_save();
    if (!rank || *rank != world_rank) return;
    GPT_LOG(warning) << "GPT_TEST_STALL_BEFORE_SAVE: rank " << world_rank << " stalls before the save";
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

// The folders --load tries (train/run/first_checkpoint.hpp), as rank 0 reads the trackers:
// every rank must try the same ones.
std::vector<ckpt::LoadRequest> agreed_load_requests(const CheckpointConfig& ck, dist::ProcessGroups& g) {
    std::int32_t first = 0;
    ckpt::collectively(g.world_mpi(), [&] {
        if (g.rank() == 0) first = non_persistent_first(ck) ? 1 : 0;
    });
    g.world().broadcast(&first, 1, dist::CommType::I32, 0);
    return load_requests(ck, first != 0);
}

}  // namespace

void Trainer::save_checkpoint(SaveKind kind) {
    const bool persistent = kind == SaveKind::Persistent;
    const auto& ck = cfg_.checkpoint;
    GPT_REQUIRE(!ck.save.empty(), InternalError, "save_checkpoint without --save");
    GPT_REQUIRE(persistent || ck.non_persistent_save_interval > 0, InternalError,
                "a non-persistent save without --non-persistent-save-interval");
    const std::string dir = persistent ? ck.save : ck.non_persistent_save_dir();
    stall_if_asked(groups_.rank());
    // A run resumed from DIR that stops at once would write the same iteration again.
    std::int64_t latest = -1;
    if (groups_.rank() == 0) latest = ckpt::read_tracker_if_valid(dir).value_or(-1);
    groups_.world().broadcast(&latest, 1, dist::CommType::I64, 0);
    const std::int64_t iteration = state_.iteration;
    if (latest == iteration) {
        GPT_LOG(info) << "checkpoint at iteration " << iteration << " is already the latest in "
                      << dir << ": not saving it again";
        if (persistent) last_saved_iteration_ = iteration;
        return;
    }
    GPT_LOG(info) << "saving " << (persistent ? "" : "non-persistent ") << "checkpoint at iteration " << iteration
                  << " to " << dir;
    open_saver();
    // One save at a time over both folders (begin() waits for its own saver's): the other
    // saver's background write may still read the host copy and FP8 arrays refilled below.
    wait_for_saves();
    ckpt::CheckpointWriter& w = saver(kind).begin(iteration);
    const DType dt = chunks_->chunk(0).options().dtype;
    const auto c = groups_.coords();
    const ChunkRefs refs = chunk_refs(*chunks_);
    const model::ParamLayout full = whole_model_layout(chunks_->chunk(0));
    const std::vector<TensorBinding> tensors = bind(refs, full, c);
    // What the save writes from. A synchronous save on a host-memory backend: the model's and
    // optimizer's own buffers, which nothing changes before commit() returns. Otherwise the
    // run's host copy, kept and reused by every save (begin() above waited for the previous
    // one, so nothing reads it any more), filled by copies queued after the optimizer step:
    // --async-save hands their event to the background writer, which waits for it before
    // reading, so training stalls only for queuing them (on a GPU) or the copy itself (the
    // CPU backend); a synchronous save waits for them here. The saver keeps an asynchronous
    // save's host copy alive until the save is published.
    const bool async = cfg_.checkpoint.async_save;
    std::vector<ChunkHost> state = state_in_backend(refs);
    std::shared_ptr<HostCopy> copy;
    std::function<void()> ready;
    if (async || !be_.host_memory()) {
        copy = host_copy_ ? host_copy_ : std::make_shared<HostCopy>(be_);
        host_copy_ = copy;
        std::shared_ptr<Backend::HostCopyEvent> landed = copy->fill(state);
        if (async) ready = [landed] { landed->wait(); };
        else landed->wait();
    }
    const std::vector<ChunkHost>& host = copy ? copy->chunks() : state;
    // FP8 delayed scaling's amax histories and scales (host arrays, current after the step).
    const std::vector<ckpt::TensorSlice> fp8 = fp8_state_slices(cfg_, *chunks_, groups_, fp8_saved_);
    const SavedLayout layout{groups_.grid().tp_size(), groups_.grid().pp_size(), groups_.grid().dp_size()};
    save_model_state(w, tensors, host, dt, fp8, state_.save(chunks_->optimizer(0).steps(), layout.dp, c.dp),
                     layout, cfg_);
    // The host copy's bytes: what --async-save holds until published (logged); 0 when the
    // save wrote from the model's own buffers.
    const std::uint64_t host_bytes = copy ? copy->bytes() : 0;
    // Logs "successfully saved ..." when published: now, or (--async-save) at a later poll.
    const std::optional<ckpt::SaveResult> done = saver(kind).commit(copy, host_bytes, std::move(ready));
    last_good_ = dir + "/" + ckpt::iteration_dir_name(iteration);
    if (!persistent) return;  // Megatron's progress lines are the persistent saves'
    last_saved_iteration_ = iteration;
    if (progress_) progress_->saved({iteration, state_.flops, state_.consumed_train * cfg_.model.seq_length}, !done);
    log_published(done, false);
}

void Trainer::open_saver() {
    const auto& ck = cfg_.checkpoint;
    if (saver_ || ck.save.empty()) return;
    ckpt::SaverOptions o;
    o.async = ck.async_save;
    o.keep_last = ck.keep_last;
    const auto log = [](const std::string& m) { GPT_LOG(info) << m; };
    saver_ = std::make_unique<ckpt::CheckpointSaver>(groups_.world_mpi(), ck.save, o, log);
    if (ck.non_persistent_save_interval <= 0) return;
    // Megatron's cleanup_old_non_persistent_checkpoint keeps one, removed before the next
    // save; removed here only once the next is published, so a complete one always exists.
    o.keep_last = 1;
    o.retention = "non-persistent checkpoints: only the newest is kept";
    np_saver_ = std::make_unique<ckpt::CheckpointSaver>(groups_.world_mpi(), ck.non_persistent_save_dir(), o, log);
}

void Trainer::wait_for_saves() {
    if (saver_) log_published(saver_->wait(), true);
    if (np_saver_) np_saver_->wait();
}

void Trainer::log_published(const std::optional<ckpt::SaveResult>& r, bool async) {
    if (!progress_ || !r) return;
    if (async) progress_->published_async(r->iteration);
    for (std::int64_t old : r->commit.removed) progress_->deleted(old);
}

std::optional<std::int64_t> Trainer::load_checkpoint() {
    const auto& ck = cfg_.checkpoint;
    open_saver();  // locks --save now: a second job on the folder is refused before training
    if (ck.load.empty()) return std::nullopt;
    const LoadPolicy policy(cfg_);
    // Read into a host copy (pinned on a GPU), kept for the saves when they reuse it.
    std::shared_ptr<HostCopy> state = std::make_shared<HostCopy>(be_);
    if (!ck.save.empty() && (ck.async_save || !be_.host_memory())) host_copy_ = state;
    // 1. Read what the checkpoint holds. The policy refuses one this run cannot take before
    //    its tensors are read, and says whether the Adam moments are read at all.
    const std::optional<HeldCheckpoint> held = read_checkpoint(policy, *state);
    if (!held) {
        data_start_ = checked_positions(data_start_, std::nullopt, state_.consumed_train, state_.consumed_valid);
        return std::nullopt;
    }
    // 2. The run's policy: what of it this run takes.
    const auto c = groups_.coords();
    const SavedProgress progress = policy.progress(*held, groups_.grid().dp_size(), c.dp);
    const std::optional<optim::LrScheduler> schedule = policy.schedule(*held, state_.scheduler);
    // 3. Restore it into the trainer.
    restore_checkpoint(state->chunks(), progress, schedule);
    if (held->fp8) restore_fp8_state(*held->fp8, cfg_, *chunks_);
    data_start_ = checked_positions(data_start_, held->progress.iteration, state_.consumed_train, state_.consumed_valid);
    GPT_LOG(info) << "successfully loaded checkpoint from " << loaded_dir_ << " at iteration " << state_.iteration
                  << policy.left_out();
    return state_.iteration;
}

std::optional<HeldCheckpoint> Trainer::read_checkpoint(const LoadPolicy& policy, HostCopy& state) {
    const auto& ck = cfg_.checkpoint;
    const ChunkRefs refs = chunk_refs(*chunks_);
    const model::ParamLayout full = whole_model_layout(chunks_->chunk(0));
    const std::vector<TensorBinding> tensors = bind(refs, full, groups_.coords());
    const char* embedding = model::ParamLayout::word_embeddings();
    const std::int64_t padded_vocab_rows = full.at(embedding).global_shape.at(0);
    // Filled from the device first, so the alignment padding between entries keeps its
    // (zero) values when everything is copied back.
    state.fill(state_in_backend(refs))->wait();
    HeldCheckpoint held;
    const auto load_fn = [&](ckpt::CheckpointReader& r) {
        held = HeldCheckpoint{};  // --load-fallback: an older candidate starts afresh
        held.file = r.file();
        // A missing embedding the tensor read reports itself.
        if (r.has_tensor(embedding)) held.vocab_rows = stored_vocab_rows(r);
        held.saved_run = read_saved_run(r);
        policy.refuse_mismatch(held, padded_vocab_rows);
        // The model's parameters are the rounding of the fp32 main parameters (the
        // invariant Adam keeps), so they are set from those, in any precision, without
        // a second rounding through the stored model dtype (fp16 -> bf16). Optimizer
        // state is read in its own call, as the reader asks of sharded state. Without
        // the optimizer (--finetune, --no-load-optim), the fp32 main parameters only:
        // the Adam moments stay this trainer's own (a fresh run's zeros), as Megatron's.
        load_model_state(r, tensors, state.chunks(), policy.load_optim());
        held.progress = SavedProgress::read(r, groups_.world_size(), groups_.rank());
        // FP8 scaling state belongs to the model (Megatron's _extra_state): read whenever
        // the checkpoint has it and this run uses delayed scaling.
        held.fp8 = read_fp8_state(r, cfg_, *chunks_);
    };
    const std::vector<ckpt::LoadRequest> requests = agreed_load_requests(ck, groups_);
    ckpt::LoadResult res;
    for (std::size_t i = 0; i < requests.size() && !res.iteration; ++i) {
        const bool last = i + 1 == requests.size();
        try {
            res = ckpt::load_checkpoint(groups_.world_mpi(), requests[i], load_fn);
        } catch (const DataError& e) {
            // Every rank has the same error. --load-fallback: the next folder's checkpoints.
            if (last || !ck.load_fallback) throw;
            GPT_LOG(warning) << "rejected the non-persistent checkpoints in " << requests[i].dir << ": " << e.what();
            continue;
        }
        for (const auto& why : res.rejected) GPT_LOG(warning) << "rejected checkpoint: " << why;
        for (const auto& note : res.notes) GPT_LOG(warning) << note;
        if (res.iteration) loaded_dir_ = requests[i].dir;
    }
    require_found_checkpoint(ck, res.iteration.has_value());
    if (!res.iteration) {
        // Megatron's habit: --save and --load on the same folder, empty on the first run.
        GPT_LOG(info) << "no checkpoint found in " << ck.load << ": starting from iteration 0";
        return std::nullopt;
    }
    last_good_ = loaded_dir_ + "/" + ckpt::iteration_dir_name(*res.iteration);
    return held;
}

void Trainer::restore_checkpoint(const std::vector<ChunkHost>& host, const SavedProgress& p,
                                 const std::optional<optim::LrScheduler>& schedule) {
    const auto& ck = cfg_.checkpoint;
    const DType dt = chunks_->chunk(0).options().dtype;
    const ChunkRefs refs = chunk_refs(*chunks_);
    for (std::size_t c = 0; c < host.size(); ++c) {
        model::GptModel& m = *refs.models[c];
        optim::AdamOptimizer& o = *refs.optimizers[c];
        const auto n = host[c].main.size() * sizeof(float);
        be_.copy_to_device(o.main_params(), host[c].main.data(), n);  // the model's own when fp32
        be_.copy_to_device(o.exp_avg(), host[c].exp_avg.data(), n);
        be_.copy_to_device(o.exp_avg_sq(), host[c].exp_avg_sq.data(), n);
        if (o.distributed()) {
            // Each DP rank read only its shard of the main params: round it into the model's
            // params and gather the whole model, as after an optimizer step.
            o.publish_main_params();
        } else if (dt != DType::F32) {
            m.set_parameters(host[c].main.data());
        }
    }
    for (auto* o : refs.optimizers) o->set_steps(p.optimizer_steps);  // every chunk's
    state_.restore(p, schedule, groups_.grid().dp_size(), groups_.coords().dp);
    if (ck.save == loaded_dir_) last_saved_iteration_ = state_.iteration;
}

bool Trainer::end_of_iteration(ExitConditions& exits) {
    const auto& ck = cfg_.checkpoint;
    const ExitReason why = exits.check(state_.iteration);
    const bool interval = ck.save_interval > 0 && state_.iteration % ck.save_interval == 0;
    const bool save = !ck.save.empty() && (interval || why != ExitReason::None);
    // Megatron's: a persistent save at the same iteration wins.
    const bool transient = !save && ck.non_persistent_save_interval > 0 && !ck.save.empty() &&
                           state_.iteration % ck.non_persistent_save_interval == 0;
    // Publishes a finished background save; throws if one failed.
    if (saver_) log_published(saver_->poll(), true);
    if (np_saver_) np_saver_->poll();
    if (save) save_checkpoint();
    if (transient) save_checkpoint(SaveKind::NonPersistent);
    if (why == ExitReason::None) return false;
    wait_for_saves();  // exit (signal, interval, duration): the save must be on disk
    GPT_LOG(info) << exits.describe(why, state_.iteration, save);
    return true;
}

void Trainer::save_at_end() {
    // Megatron saves after the last iteration unless the interval just did.
    if (!cfg_.checkpoint.save.empty() && state_.iteration > 0 && last_saved_iteration_ != state_.iteration)
        save_checkpoint();
    wait_for_saves();
}

}  // namespace gpt::train
