#include "parallel_match.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "backend/backend.hpp"
#include "dist/process_groups.hpp"
#include "emulated_device.hpp"
#include "trainer_test_util.hpp"

namespace gpt::test {

namespace {

void collect(model::GptModel& m, Run& run) {
    std::vector<float> all(static_cast<std::size_t>(m.layout().total_elements()));
    m.get_parameters(all.data());
    for (const auto& e : m.layout().entries())
        run.params[e.name] = Run::Param{e.slice_start, e.split_dim, e.local_shape,
                                        std::vector<float>(all.begin() + e.offset,
                                                           all.begin() + e.offset + e.numel)};
}

}  // namespace

// The reference slice of a global tensor the rank holds: split_dim 0 rows or 1 columns.
std::vector<float> reference_slice(const Run::Param& full, const Run::Param& local) {
    if (local.split_dim < 0) return full.values;
    // Any rank (SwiGLU's fc1 is [2, ffn, h] split along dim 1): each local element's index
    // in the full tensor, dim by dim.
    const std::size_t nd = local.local_shape.size();
    std::int64_t n = 1;
    for (auto d : local.local_shape) n *= d;
    std::vector<float> out(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) {
        std::int64_t rest = i, at = 0, stride = 1;
        for (std::size_t k = nd; k-- > 0;) {
            std::int64_t idx = rest % local.local_shape[k];
            rest /= local.local_shape[k];
            if (static_cast<int>(k) == local.split_dim) idx += local.slice_start;
            at += idx * stride;
            stride *= full.local_shape[k];
        }
        out[static_cast<std::size_t>(i)] = full.values[static_cast<std::size_t>(at)];
    }
    return out;
}

Run train_run(const Config& cfg, MPI_Comm comm, const std::string& device, bool keep_step_grads) {
    dist::ProcessGroups groups(comm, cfg.parallel.tensor_model_parallel_size,
                               cfg.parallel.pipeline_model_parallel_size);
    auto be = device == "emulated-device" ? make_emulated_device_backend()
                                          : make_backend(device, groups.local_rank());
    train::Trainer tr(cfg, groups, *be);
    const int dp = groups.grid().dp_size();
    WalkSource src(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                   cfg.training.micro_batch_size, groups.coords().dp, dp);
    Run run;
    dist::Communicator* all[] = {&groups.tp(), &groups.dp(), &groups.pp(), &groups.embedding(),
                                 &groups.model_parallel(), &groups.world()};
    for (auto* c : all) c->reset_stats();
    for (std::int64_t i = 0; i < tr.train_iters(); ++i) {
        tr.train_step(src);
        if (keep_step_grads) {
            auto& step = run.step_grads.emplace_back();
            for (int c = 0; c < tr.chunks().num_chunks(); ++c) {
                const model::GptModel& m = tr.chunks().chunk(c);
                std::vector<float> all(static_cast<std::size_t>(m.layout().total_elements()));
                m.get_grads(all.data());
                for (const auto& e : m.layout().entries())
                    step[e.name].assign(all.begin() + e.offset, all.begin() + e.offset + e.numel);
            }
        }
        if (i == 0)
            for (auto* c : all) run.first_iteration_bytes[c->name()] = c->stats();
        run.wait_seconds += tr.chunks().last_timing().wait_seconds;
        run.compute_seconds += tr.chunks().last_timing().compute_seconds;
    }
    run.records = tr.history();
    run.memory = tr.memory();
    for (int c = 0; c < tr.chunks().num_chunks(); ++c) {
        const train::GradReducer& r = tr.chunks().grad_reducer(c);
        run.buckets += static_cast<int>(r.buckets().size());
        run.buckets_launched_early += r.launched_during_backward();
    }
    WalkSource valid(static_cast<int>(cfg.model.vocab_size), cfg.model.seq_length,
                     cfg.training.micro_batch_size, groups.coords().dp, dp, 1000);
    run.eval_loss = tr.evaluate(valid, 2);
    for (int c = 0; c < tr.chunks().num_chunks(); ++c) collect(tr.chunks().chunk(c), run);
    return run;
}

void expect_matches(const Run& ref, const Run& got, const Config& cfg, const std::string& what,
                    double rel, double param_rel) {
    if (param_rel == 0.0) param_rel = rel;
    ASSERT_EQ(got.records.size(), ref.records.size()) << what;
    for (std::size_t i = 0; i < ref.records.size(); ++i) {
        const auto &a = ref.records[i], &b = got.records[i];
        EXPECT_NEAR(b.lm_loss, a.lm_loss, rel * a.lm_loss) << what << " iteration " << i + 1;
        EXPECT_NEAR(b.grad_norm, a.grad_norm, rel * a.grad_norm) << what << " iteration " << i + 1;
    }
    EXPECT_NEAR(got.eval_loss, ref.eval_loss, rel * ref.eval_loss) << what;
    ASSERT_FALSE(got.params.empty()) << what;
    const char* head_copy = model::ParamLayout::word_embeddings_for_head();
    for (const auto& [name, p] : got.params) {
        const std::string ref_name =
            name == head_copy ? std::string(model::ParamLayout::word_embeddings()) : name;
        ASSERT_EQ(ref.params.count(ref_name), 1u) << what << " " << name;
        const std::vector<float> want = reference_slice(ref.params.at(ref_name), p);
        ASSERT_EQ(want.size(), p.values.size()) << what << " " << name;
        // The key bias has an exactly zero gradient (softmax ignores a shift shared by all
        // keys), so Adam turns round-off into ~1e-6 values that depend on summation order:
        // those elements only have to stay at noise level on both sides.
        const bool qkv_bias = name.find("query_key_value/bias") != std::string::npos;
        const int head_dim = cfg.model.hidden_size / cfg.model.num_attention_heads;
        double worst = 0.0, worst_key = 0.0;
        for (std::size_t i = 0; i < want.size(); ++i) {
            const double diff = std::abs(double(p.values[i]) - want[i]);
            const std::int64_t row = p.slice_start + static_cast<std::int64_t>(i);
            if (qkv_bias && row % (3 * head_dim) >= head_dim && row % (3 * head_dim) < 2 * head_dim)
                worst_key = std::max(worst_key, diff);
            else
                worst = std::max(worst, diff / std::max(std::abs(double(want[i])), 1e-2));
        }
        EXPECT_LT(worst, param_rel) << what << " " << name;
        EXPECT_LT(worst_key, 5 * param_rel) << what << " " << name << " (key bias, noise level)";
    }
    expect_layout_complete(got, cfg, what);
}

void expect_layout_complete(const Run& got, const Config& cfg, const std::string& what) {
    EXPECT_LT(got.records.back().lm_loss, got.records.front().lm_loss) << what;
    // Stages hold disjoint layers: over the pipeline every layer appears exactly once.
    const int pp = cfg.parallel.pipeline_model_parallel_size;
    int layers_here = 0;
    for (const auto& [name, p] : got.params)
        if (name.find("/input_layernorm/weight") != std::string::npos) ++layers_here;
    // Ranks are global = tp + TP (dp + DP pp): a stage is world / pp consecutive ranks.
    const int stage = world_rank() / (world_size() / pp);
    EXPECT_EQ(layers_here, pipeline_stage_layers(cfg.model.num_layers, pp, cfg.parallel.virtual_stages(cfg.model.num_layers),
                                                 cfg.parallel.split(), stage))
        << what;
    int all = 0;
    MPI_Allreduce(&layers_here, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    EXPECT_EQ(all, cfg.model.num_layers * (world_size() / pp)) << what;
    int copies = got.params.count(model::ParamLayout::word_embeddings_for_head()) > 0 ? 1 : 0, total = 0;
    MPI_Allreduce(&copies, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    // Untied: the last stage has its own output_layer instead, and no copy.
    const bool tied = !cfg.model.untie_embeddings_and_output_weights;
    EXPECT_EQ(total, pp > 1 && tied ? world_size() / pp : 0) << "one head copy of the word embeddings per last stage";
}

}  // namespace gpt::test
