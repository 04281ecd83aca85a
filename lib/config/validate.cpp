#include "config/validate.hpp"

#include "config/batch_rampup.hpp"
#include "config/data_blend.hpp"
#include "config/value_checks.hpp"
#include "config/vocab_padding.hpp"

#include <cmath>
#include <filesystem>

#include "core/errors.hpp"
#include "core/strings.hpp"

namespace gpt {

namespace fs = std::filesystem;

namespace {
constexpr int kMaxWorldSize = 1 << 20;
constexpr int kMaxLocalWorldSize = 1024;
}  // namespace

int Config::padded_vocab_size() const {
    // Megatron pads so that every tensor-parallel shard of the vocab is a multiple of
    // make-vocab-size-divisible-by.
    return static_cast<int>(pad_vocab(model.vocab_size, model.make_vocab_size_divisible_by,
                                      parallel.tensor_model_parallel_size));
}

PipelineSplit ParallelConfig::split() const {
    PipelineSplit s{decoder_first_pipeline_num_layers, decoder_last_pipeline_num_layers,
                    account_for_embedding_in_pipeline_split, account_for_loss_in_pipeline_split, {}};
    if (!pipeline_model_parallel_layout.empty()) {
        const std::string why = parse_pipeline_layout(pipeline_model_parallel_layout, s.layout);
        GPT_REQUIRE(why.empty(), UsageError, why);
    }
    return s;
}

namespace {

// --position-embedding-type, --normalization, --swiglu, --group-query-attention and the
// rest of the modern decoder options: what can be checked without the layout (the TP
// divisibility of the query groups is checked with the other TP rules in make_model_dims).
void validate_decoder_options(ModelConfig& m) {
    require_finite(m.rotary_percent, "rotary-percent");
    GPT_REQUIRE(m.rotary_percent > 0.0 && m.rotary_percent <= 1.0, UsageError,
                "--rotary-percent must be in (0, 1], got ", m.rotary_percent);
    require_finite(m.rotary_base, "rotary-base");
    GPT_REQUIRE(m.rotary_base > 0.0, UsageError, "--rotary-base must be positive, got ", m.rotary_base);
    if (m.rope() && m.hidden_size % m.num_attention_heads == 0) {
        // Megatron: rotary_dim = int(kv_channels * rotary_percent); rope rotates pairs.
        const int rot = static_cast<int>(m.head_dim() * m.rotary_percent);
        GPT_REQUIRE(rot >= 2 && rot % 2 == 0, UsageError, "--rotary-percent ", m.rotary_percent,
                    " of head dim ", m.head_dim(), " gives ", rot,
                    " rotary dims; rope needs an even number >= 2");
    }
    GPT_REQUIRE(!m.rotary_interleaved || m.rope(), UsageError,
                "--rotary-interleaved needs --position-embedding-type rope");
    if (m.group_query_attention) {
        require_positive(m.num_query_groups, "num-query-groups");
        GPT_REQUIRE(m.num_attention_heads % m.num_query_groups == 0, UsageError,
                    "--num-attention-heads ", m.num_attention_heads,
                    " is not divisible by --num-query-groups ", m.num_query_groups);
    }
    // Megatron asserts it; the two name different MLPs. --openai-gelu names a GELU, which
    // --squared-relu would silently replace (Megatron's order); refused rather than ignored.
    GPT_REQUIRE(!(m.squared_relu && m.swiglu), UsageError,
                "--squared-relu and --swiglu are two different MLP activations; give one");
    GPT_REQUIRE(!(m.squared_relu && m.openai_gelu), UsageError,
                "--squared-relu and --openai-gelu are two different MLP activations; give one");
    require_finite(m.norm_epsilon, "norm-epsilon");
    GPT_REQUIRE(m.norm_epsilon >= 0.0, UsageError, "--norm-epsilon must be positive, got ", m.norm_epsilon);
    if (m.norm_epsilon > 0.0) {
        // Both names set the one epsilon; two different values is a mistake, not a choice.
        GPT_REQUIRE(m.layernorm_epsilon == 1e-5 || m.layernorm_epsilon == m.norm_epsilon, UsageError,
                    "--norm-epsilon ", m.norm_epsilon, " and --layernorm-epsilon ",
                    m.layernorm_epsilon, " disagree; give one");
        m.layernorm_epsilon = m.norm_epsilon;
    }
}

}  // namespace

void validate_precision(const TrainingConfig& t) {
    GPT_REQUIRE(!(t.fp16 && t.bf16), UsageError, "--fp16 and --bf16 are mutually exclusive");
    GPT_REQUIRE(t.loss_scale >= 0, UsageError, "--loss-scale must not be negative");
    GPT_REQUIRE(t.loss_scale == 0.0 || t.fp16 || t.bf16, UsageError,
                "--loss-scale applies to --fp16 / --bf16 training only");
}

void validate_pipeline_split(int num_layers, const ParallelConfig& p) {
    const int pp = p.pipeline_model_parallel_size, per_virtual = p.num_layers_per_virtual_pipeline_stage;
    const PipelineSplit split = p.split();
    require_non_negative(per_virtual, "num-layers-per-virtual-pipeline-stage");
    require_non_negative(p.num_virtual_stages_per_pipeline_rank, "num-virtual-stages-per-pipeline-rank");
    GPT_REQUIRE(per_virtual == 0 || p.num_virtual_stages_per_pipeline_rank == 0, UsageError,
                "--num-layers-per-virtual-pipeline-stage and --num-virtual-stages-per-pipeline-rank are "
                "mutually exclusive; give one");
    // Megatron's rule: the layout's stage count gives the virtual stages.
    GPT_REQUIRE(split.layout.empty() || (per_virtual == 0 && p.num_virtual_stages_per_pipeline_rank == 0), UsageError,
                "--pipeline-model-parallel-layout gives the virtual stages itself (its stages / PP): drop "
                "--num-layers-per-virtual-pipeline-stage / --num-virtual-stages-per-pipeline-rank");
    // Megatron's rule: with uneven stages the layers per virtual stage differ between stages.
    GPT_REQUIRE(per_virtual == 0 || !split.uneven(), UsageError,
                "--decoder-first/last-pipeline-num-layers with interleaving need "
                "--num-virtual-stages-per-pipeline-rank, not --num-layers-per-virtual-pipeline-stage");
    if (per_virtual > 0) {
        GPT_REQUIRE(pp > 1, UsageError,
                    "--num-layers-per-virtual-pipeline-stage needs pipeline-model-parallel-size > 1");
        const int n = split.split_layers(num_layers);
        if (n % pp == 0)
            GPT_REQUIRE((n / pp) % per_virtual == 0, UsageError, "layers per pipeline stage ", n / pp,
                        " (num-layers ", n, " / PP ", pp,
                        ") is not divisible by num-layers-per-virtual-pipeline-stage ", per_virtual);
    }
    const int vp = p.num_layers_per_virtual_pipeline_stage > 0 && split.split_layers(num_layers) % pp
                       ? 1  // the even split's own line below says why
                       : p.virtual_stages(num_layers);
    const std::string why = pipeline_split_problem(num_layers, pp, vp, split);
    GPT_REQUIRE(why.empty(), UsageError, why);
}

void validate_checkpoint_args_flags(const CheckpointConfig& ck) {
    GPT_REQUIRE(!ck.use_checkpoint_args || !ck.load.empty(), UsageError,
                "--use-checkpoint-args needs --load: the checkpoint to take the model's arguments from");
    for (const auto& [flag, on] : {std::pair{"--use-mp-args-from-checkpoint-args", ck.use_mp_args_from_checkpoint_args},
                                   std::pair{"--no-use-tokenizer-model-from-checkpoint-args",
                                             ck.no_use_tokenizer_model_from_checkpoint_args}})
        GPT_REQUIRE(!on || ck.use_checkpoint_args, UsageError, flag, " needs --use-checkpoint-args");
}

void validate_non_persistent_flags(const CheckpointConfig& ck) {
    require_non_negative(ck.non_persistent_save_interval, "non-persistent-save-interval");
    const std::string& type = ck.non_persistent_ckpt_type;
    GPT_REQUIRE(type != "local" && type != "in_memory", UsageError, "--non-persistent-ckpt-type ", type,
                " is not implemented (Megatron's needs NVIDIA's resiliency extension): use global");
    GPT_REQUIRE(type.empty() || type == "global", UsageError,
                "--non-persistent-ckpt-type must be global (local and in_memory are not implemented), got '", type,
                "'");
    const bool on = ck.non_persistent_save_interval > 0;
    GPT_REQUIRE(!on || !type.empty(), UsageError,
                "--non-persistent-save-interval needs --non-persistent-ckpt-type global (where the saves go)");
    // Megatron would silently save nothing: hours of a run without the checkpoints asked for.
    GPT_REQUIRE(!on || !ck.save.empty(), UsageError, "--non-persistent-save-interval needs --save");
    GPT_REQUIRE(ck.non_persistent_global_ckpt_dir.empty() || !type.empty(), UsageError,
                "--non-persistent-global-ckpt-dir needs --non-persistent-ckpt-type global");
    // The non-persistent folder keeps only its newest checkpoint: on --save's folder that
    // would delete the persistent ones.
    const auto same = [](const std::string& a, const std::string& b) {
        std::error_code ec;
        return !a.empty() && !b.empty() && fs::weakly_canonical(a, ec) == fs::weakly_canonical(b, ec);
    };
    if (type.empty()) return;
    for (const auto& [flag, dir] : {std::pair{"--save", ck.save}, std::pair{"--load", ck.load}})
        GPT_REQUIRE(!same(dir, ck.non_persistent_dir(dir)), UsageError, "--non-persistent-global-ckpt-dir ",
                    ck.non_persistent_global_ckpt_dir, " is the ", flag,
                    " folder: non-persistent checkpoints need a folder of their own (it keeps only the newest)");
}

void validate_training_length(const TrainingConfig& t) {
    GPT_REQUIRE(t.train_iters > 0 || t.train_samples > 0, UsageError, "set --train-iters or --train-samples");
}

void validate_model_and_training(Config& cfg) {
    ModelConfig& m = cfg.model;
    ParallelConfig& p = cfg.parallel;
    TrainingConfig& t = cfg.training;
    OptimizerConfig& o = cfg.optimizer;

    require_positive(m.num_layers, "num-layers");
    require_positive(m.hidden_size, "hidden-size");
    require_positive(m.num_attention_heads, "num-attention-heads");
    require_positive(m.seq_length, "seq-length");
    GPT_REQUIRE(m.hidden_size % m.num_attention_heads == 0, UsageError, "hidden-size ",
                m.hidden_size, " is not divisible by num-attention-heads ", m.num_attention_heads);
    // Megatron sets kv_channels to hidden / heads when not given; another head dimension
    // (projections of heads x kv-channels) is not implemented.
    GPT_REQUIRE(m.kv_channels == 0 || m.kv_channels == m.head_dim(), UsageError, "--kv-channels ",
                m.kv_channels, " is not supported: the head dimension is hidden-size / num-attention-heads = ",
                m.hidden_size, " / ", m.num_attention_heads, " = ", m.head_dim());
    m.kv_channels = m.head_dim();
    require_non_negative(m.max_position_embeddings, "max-position-embeddings");
    if (m.max_position_embeddings == 0) m.max_position_embeddings = m.seq_length;
    GPT_REQUIRE(m.seq_length <= m.max_position_embeddings, UsageError, "seq-length ", m.seq_length,
                " exceeds max-position-embeddings ", m.max_position_embeddings);
    // Megatron's --swiglu default: 2/3 of 4h (two fc1 halves), down to a multiple of 64.
    if (m.ffn_hidden_size == 0 && m.swiglu) m.ffn_hidden_size = 4 * m.hidden_size * 2 / 3 / 64 * 64;
    if (m.ffn_hidden_size == 0) m.ffn_hidden_size = 4 * m.hidden_size;
    require_positive(m.make_vocab_size_divisible_by, "make-vocab-size-divisible-by");
    GPT_REQUIRE(m.vocab_size >= 0, UsageError, "--vocab-size must not be negative");
    GPT_REQUIRE(m.init_method_std > 0, UsageError, "--init-method-std must be positive");
    require_non_negative(m.ffn_hidden_size, "ffn-hidden-size");
    require_finite(m.init_method_std, "init-method-std");
    // A zero or negative epsilon divides by a zero variance (constant rows): NaN.
    require_finite(m.layernorm_epsilon, "layernorm-epsilon");
    GPT_REQUIRE(m.layernorm_epsilon > 0, UsageError, "--layernorm-epsilon must be positive, got ",
                m.layernorm_epsilon);
    validate_decoder_options(m);
    require_prob(m.hidden_dropout, "hidden-dropout");
    require_prob(m.attention_dropout, "attention-dropout");

    require_non_negative(t.global_batch_size, "global-batch-size");
    // A step schedule's last batch is the global batch, fixed before the planner and the
    // layout read it (BatchRampup refuses a --global-batch-size that says otherwise).
    if (!t.step_batch_size_schedule.empty()) t.global_batch_size = static_cast<int>(BatchRampup(cfg).final_batch());
    require_non_negative(t.max_global_batch_size, "max-global-batch-size");
    require_non_negative(t.micro_batch_size, "micro-batch-size");
    require_non_negative(t.exit_interval, "exit-interval");
    require_finite(t.exit_duration_in_mins, "exit-duration-in-mins");
    GPT_REQUIRE(t.exit_duration_in_mins >= 0, UsageError,
                "--exit-duration-in-mins must not be negative, got ", t.exit_duration_in_mins);
    require_finite(t.loss_scale, "loss-scale");
    require_finite(t.initial_loss_scale, "initial-loss-scale");
    require_finite(t.min_loss_scale, "min-loss-scale");
    validate_precision(t);
    GPT_REQUIRE(t.initial_loss_scale > 0 && t.min_loss_scale > 0 &&
                    t.min_loss_scale <= t.initial_loss_scale,
                UsageError, "loss scales disagree: min-loss-scale ", t.min_loss_scale,
                " must be positive and <= initial-loss-scale ", t.initial_loss_scale);
    require_positive(t.loss_scale_window, "loss-scale-window");
    require_positive(t.hysteresis, "hysteresis");
    require_positive(t.eval_interval, "eval-interval");
    require_positive(cfg.parallel.distributed_timeout_minutes, "distributed-timeout-minutes");
    GPT_REQUIRE(t.eval_iters >= 0, UsageError, "--eval-iters must not be negative");
    GPT_REQUIRE(!(t.train_iters > 0 && t.train_samples > 0), UsageError,
                "give --train-iters or --train-samples, not both");
    GPT_REQUIRE(t.train_iters >= 0 && t.train_samples >= 0, UsageError,
                "--train-iters / --train-samples must not be negative");

    validate_schedule(o);

    // Megatron: --recompute-activations is shorthand for selective granularity.
    if (p.recompute_activations) {
        GPT_REQUIRE(p.recompute_granularity != RecomputeGranularity::Full, UsageError,
                    "--recompute-activations (selective) contradicts --recompute-granularity full");
        p.recompute_granularity = RecomputeGranularity::Selective;
    }
    if (p.recompute_granularity == RecomputeGranularity::Full) {
        GPT_REQUIRE(p.recompute_method != RecomputeMethod::None, UsageError,
                    "--recompute-granularity full needs --recompute-method uniform or block");
        require_positive(p.recompute_num_layers, "recompute-num-layers");
    } else {
        GPT_REQUIRE(p.recompute_method == RecomputeMethod::None, UsageError, "--recompute-method ",
                    to_string(p.recompute_method), " needs --recompute-granularity full");
    }

    GPT_REQUIRE(p.ddp_bucket_size >= 0, UsageError, "--ddp-bucket-size must not be negative");
    require_non_negative(p.data_parallel_size, "data-parallel-size");
    require_non_negative(p.recompute_num_layers, "recompute-num-layers");

    // Megatron treats these as "every N iterations": a negative N would silently mean never.
    const CheckpointConfig& ck = cfg.checkpoint;
    require_non_negative(ck.save_interval, "save-interval");
    require_non_negative(ck.keep_last, "keep-last");
    GPT_REQUIRE(ck.ckpt_step >= -1, UsageError, "--ckpt-step must be an iteration (>= 0), or -1 for the latest; got ",
                ck.ckpt_step);
    // Whose learning-rate schedule a resumed run follows: one of the two, never both (the
    // checks against what the checkpoint holds are the load's: train/state/load_policy.cpp).
    GPT_REQUIRE(ck.load.empty() || !(ck.override_opt_param_scheduler && ck.use_checkpoint_opt_param_scheduler),
                UsageError,
                "--override-opt_param-scheduler and --use-checkpoint-opt_param-scheduler exclude each other");
    validate_checkpoint_args_flags(ck);
    validate_non_persistent_flags(ck);
    GPT_REQUIRE(!cfg.logging.log_progress || !ck.save.empty(), UsageError,
                "--log-progress writes SAVE/progress.txt: it needs --save");

    require_non_negative(cfg.plan.world_size, "world-size");
    require_non_negative(cfg.plan.local_world_size, "local-world-size");
    // The planner enumerates the divisors of the world size and its layouts: beyond the
    // largest machines built a value is a typo, and would search for minutes.
    GPT_REQUIRE(cfg.plan.world_size <= kMaxWorldSize && cfg.plan.local_world_size <= kMaxLocalWorldSize,
                UsageError, "--world-size ", cfg.plan.world_size, " / --local-world-size ",
                cfg.plan.local_world_size, " exceed the planner's bounds (", kMaxWorldSize, " ranks, ",
                kMaxLocalWorldSize, " per node): a typo?");
    require_finite(cfg.plan.plan_intra_node_gbps, "plan-intra-node-gbps");
    require_finite(cfg.plan.plan_inter_node_gbps, "plan-inter-node-gbps");
    GPT_REQUIRE(cfg.plan.plan_intra_node_gbps >= 0 && cfg.plan.plan_inter_node_gbps >= 0, UsageError,
                "--plan-intra-node-gbps / --plan-inter-node-gbps must not be negative");
    require_positive(cfg.logging.log_interval, "log-interval");
    validate_monitor(cfg.monitor);

    validate_fp8(cfg);

    // The data flags' values, as lib/data will read them (a bad one fails a dry run too).
    parse_blend(cfg.data.data_path, "data-path");
    parse_split(cfg.data.split);
    validate_eval_and_tensorboard(cfg);
}

// --sample-interval: samples need the tokenizer and a model rank 0's pipeline stage holds whole.
void validate_samples(const Config& cfg) {
    const SampleConfig& s = cfg.sample;
    require_non_negative(s.sample_interval, "sample-interval");
    if (s.sample_interval == 0) return;
    require_positive(s.sample_tokens, "sample-tokens");
    GPT_REQUIRE(s.sample_seed >= -1, UsageError, "--sample-seed must be -1 (greedy) or a seed >= 0");
    GPT_REQUIRE(!cfg.data.vocab_file.empty() && !cfg.data.merge_file.empty(), UsageError,
                "--sample-interval needs the GPT-2 tokenizer: give --vocab-file and --merge-file");
    GPT_REQUIRE(cfg.data.tokenizer_type == TokenizerType::GPT2BPETokenizer, UsageError,
                "--sample-interval decodes with the GPT-2 tokenizer; this run uses --tokenizer-type ",
                to_string(cfg.data.tokenizer_type));
    // The sampler's cached forward is the GPT-2 layer (lib/inference): refused here, before
    // training starts, rather than at the first sample.
    const ModelConfig& m = cfg.model;
    const char* arch = m.rope()                                  ? "--position-embedding-type rope"
                       : m.rmsnorm()                             ? "--normalization RMSNorm"
                       : m.swiglu                                ? "--swiglu"
                       : m.group_query_attention                 ? "--group-query-attention"
                       : m.untie_embeddings_and_output_weights   ? "--untie-embeddings-and-output-weights"
                       : m.disable_bias_linear                   ? "--disable-bias-linear"
                                                                 : nullptr;
    GPT_REQUIRE(arch == nullptr, UsageError, "--sample-interval does not run ", arch,
                " models yet (generation implements the GPT-2 layer only)");
    GPT_REQUIRE(cfg.parallel.pipeline_model_parallel_size == 1, UsageError,
                "--sample-interval needs --pipeline-model-parallel-size 1 (the sample runs the whole model "
                "on each TP group); got ", cfg.parallel.pipeline_model_parallel_size);
}

void resolve_layout(Config& cfg, int world_size) {
    ModelConfig& m = cfg.model;
    ParallelConfig& p = cfg.parallel;
    TrainingConfig& t = cfg.training;
    const int tp = p.tensor_model_parallel_size, pp = p.pipeline_model_parallel_size;
    require_positive(tp, "tensor-model-parallel-size");
    require_positive(pp, "pipeline-model-parallel-size");
    GPT_REQUIRE(world_size % (tp * pp) == 0, UsageError, "world size ", world_size,
                " is not divisible by tensor-model-parallel-size x pipeline-model-parallel-size = ",
                tp, " x ", pp, " = ", tp * pp);
    const int dp = world_size / (tp * pp);
    GPT_REQUIRE(p.data_parallel_size == 0 || p.data_parallel_size == dp, UsageError,
                "--data-parallel-size ", p.data_parallel_size, " disagrees with world size ",
                world_size, " / (TP ", tp, " x PP ", pp, ") = ", dp);
    p.data_parallel_size = dp;

    GPT_REQUIRE(m.num_attention_heads % tp == 0, UsageError, "num-attention-heads ",
                m.num_attention_heads, " is not divisible by tensor-model-parallel-size ", tp);
    validate_pipeline_split(m.num_layers, p);
    // Sequence parallelism shards the sequence over TP (Megatron turns it off at TP 1).
    if (p.sequence_parallel && p.tensor_model_parallel_size > 1)
        GPT_REQUIRE(m.seq_length % p.tensor_model_parallel_size == 0, UsageError,
                    "--sequence-parallel needs --seq-length ", m.seq_length,
                    " divisible by --tensor-model-parallel-size ", p.tensor_model_parallel_size);
    // Grouped-query attention: every TP rank holds whole K/V groups (replicating K/V heads
    // over TP when groups < TP is not supported).
    GPT_REQUIRE(!m.group_query_attention || m.num_query_groups % tp == 0, UsageError,
                "--num-query-groups ", m.num_query_groups, " is not divisible by --tensor-model-parallel-size ",
                tp, " (K/V heads replicated over TP are not supported)");
    if (p.recompute_granularity == RecomputeGranularity::Full && p.recompute_method == RecomputeMethod::Uniform) {
        for (int stage = 0; stage < pp; ++stage) {
            const int n = pipeline_stage_layers(m.num_layers, pp, p.virtual_stages(m.num_layers), p.split(), stage);
            const std::string which = pp > 1 && p.split().any() ? " (stage " + std::to_string(stage) + ")" : "";
            GPT_REQUIRE(n % p.recompute_num_layers == 0 || p.recompute_num_layers >= n, UsageError,
                        "layers per stage ", n, which, " is not divisible by recompute-num-layers ",
                        p.recompute_num_layers);
        }
    }

    const int mbs = t.micro_batch_size;
    require_positive(mbs, "micro-batch-size");
    if (t.global_batch_size == 0) {
        if (t.max_global_batch_size > 0) {
            // The largest global batch within the bound that the layout can split evenly.
            t.global_batch_size = t.max_global_batch_size / (mbs * dp) * (mbs * dp);
            GPT_REQUIRE(t.global_batch_size > 0, UsageError, "max-global-batch-size ",
                        t.max_global_batch_size, " is smaller than micro-batch-size x DP = ", mbs,
                        " x ", dp, " = ", mbs * dp);
        } else {
            t.global_batch_size = mbs * dp;
        }
    }
    GPT_REQUIRE(t.max_global_batch_size == 0 || t.global_batch_size <= t.max_global_batch_size,
                UsageError, "global-batch-size ", t.global_batch_size,
                " exceeds max-global-batch-size ", t.max_global_batch_size);
    const int interleaved_pp = p.interleaved_pp(m.num_layers);
    split_global_batch(t.global_batch_size, mbs, dp, interleaved_pp,
                       "global-batch-size " + std::to_string(t.global_batch_size));
    // Megatron checks each scheduled batch when it comes; all are known now, so a layout that
    // cannot split one is refused before the run starts. A run that may resume checks from
    // where it resumes, in the trainer: it may be scaled up past its small first batches.
    if (cfg.checkpoint.load.empty()) BatchRampup(cfg).check_layout(mbs, dp, interleaved_pp);
    validate_fp8_layout(cfg);
    validate_samples(cfg);
}

std::int64_t micro_batches_per_iteration(const TrainingConfig& t, int dp) {
    return split_global_batch(t.global_batch_size, t.micro_batch_size, dp, 1,
                              "global-batch-size " + std::to_string(t.global_batch_size));
}

void validate(Config& cfg, int world_size) {
    validate_model_and_training(cfg);
    resolve_layout(cfg, world_size);
}

}  // namespace gpt
