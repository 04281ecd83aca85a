// Plain configuration structs, one per concern. Field names follow Megatron-LM's flags
// (num-layers -> num_layers); defaults are Megatron's unless a comment says otherwise.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/enums.hpp"
#include "config/pipeline_split.hpp"
#include "core/fp8.hpp"

namespace gpt {

struct ModelConfig {
    int num_layers = 0;
    int hidden_size = 0;
    int num_attention_heads = 0;
    int ffn_hidden_size = 0;           // 0: 4 * hidden_size
    int seq_length = 0;
    int max_position_embeddings = 0;   // 0: seq_length
    int make_vocab_size_divisible_by = 128;
    int vocab_size = 0;                // unpadded; 0: taken from the tokenizer (50257 for GPT-2)
    double init_method_std = 0.02;
    double hidden_dropout = 0.1;
    double attention_dropout = 0.1;
    double layernorm_epsilon = 1e-5;
    bool openai_gelu = false;          // tanh approximation instead of exact erf
    // Megatron's bias-GELU fusion is on by default and computes the tanh approximation, so
    // the exact erf GELU needs --no-bias-gelu-fusion (and no --openai-gelu).
    bool no_bias_gelu_fusion = false;
    bool tanh_gelu() const { return openai_gelu || !no_bias_gelu_fusion; }

    // Modern decoder options (Megatron's flags and defaults; README "Llama-style models").
    PositionEmbeddingType position_embedding_type = PositionEmbeddingType::LearnedAbsolute;  // or rope (no position table)
    double rotary_percent = 1.0;       // fraction of each head's dims that rotate, in (0, 1]
    double rotary_base = 10000.0;
    bool rotary_interleaved = false;   // rotate pairs (2i, 2i+1) instead of halves
    Normalization normalization = Normalization::LayerNorm;  // or RMSNorm (weight only, no bias)
    double norm_epsilon = 0.0;         // Megatron's newer name; 0: --layernorm-epsilon applies
    // Megatron's --apply-layernorm-1p (zero-centred gamma): the norms scale by 1 + weight,
    // and their weights start at 0.
    bool apply_layernorm_1p = false;
    bool swiglu = false;               // gated SiLU MLP: fc1 gives [gate, up], 2 x ffn rows
    bool squared_relu = false;         // relu(x)^2 instead of GELU (Megatron's --squared-relu)
    // Megatron's --qk-layernorm: each query and key head normalised (--normalization, over
    // the head dimension, one weight per kind shared by all heads) before rope.
    bool qk_layernorm = false;
    bool group_query_attention = false;
    int num_query_groups = 1;          // K/V heads with --group-query-attention
    bool untie_embeddings_and_output_weights = false;  // a separate output_layer
    bool disable_bias_linear = false;  // no biases in the four linears of a layer
    // Megatron's --kv-channels (the head dimension; 0: not given). Validation sets it to
    // hidden-size / num-attention-heads, the only head dimension this model has.
    int kv_channels = 0;
    bool rope() const { return position_embedding_type == PositionEmbeddingType::Rope; }
    bool rmsnorm() const { return normalization == Normalization::RMSNorm; }
    int query_groups() const { return group_query_attention ? num_query_groups : num_attention_heads; }

    int head_dim() const { return hidden_size / num_attention_heads; }
    int ffn() const { return ffn_hidden_size > 0 ? ffn_hidden_size : 4 * hidden_size; }
};

struct ParallelConfig {
    int tensor_model_parallel_size = 1;
    int pipeline_model_parallel_size = 1;
    int num_layers_per_virtual_pipeline_stage = 0;  // 0: no interleaving
    int num_virtual_stages_per_pipeline_rank = 0;   // the chunks per stage instead (0: not given)
    // Uneven stages and the embedding/loss counted as layers (config/pipeline_split.hpp).
    int decoder_first_pipeline_num_layers = PipelineSplit::kNotGiven;
    int decoder_last_pipeline_num_layers = PipelineSplit::kNotGiven;
    bool account_for_embedding_in_pipeline_split = false;
    bool account_for_loss_in_pipeline_split = false;
    std::string pipeline_model_parallel_layout;      // Megatron's layout string ("": not given)
    int data_parallel_size = 0;                      // 0: world / (TP * PP)
    bool use_distributed_optimizer = false;
    bool sequence_parallel = false;
    bool recompute_activations = false;              // selective: the attention core
    RecomputeGranularity recompute_granularity = RecomputeGranularity::None;  // full or selective
    RecomputeMethod recompute_method = RecomputeMethod::None;                 // uniform or block
    int recompute_num_layers = 0;
    bool overlap_grad_reduce = false;                // DP buckets reduced during backward
    std::int64_t ddp_bucket_size = 0;                // elements per DP bucket (0: Megatron's default)
    bool use_flash_attn = false;
    DistributedBackend distributed_backend = DistributedBackend::Nccl;  // nccl or mpi (CPU always uses MPI)
    DeviceKind device = DeviceKind::Auto;            // auto, cuda or cpu
    // The hang watchdog (core/watchdog.hpp): no wait for another rank or the device lasts
    // longer; GPT_DISTRIBUTED_TIMEOUT_SECONDS overrides it (tests need seconds).
    int distributed_timeout_minutes = 10;

    // Which flags the user gave explicitly; the planner keeps those as constraints.
    bool tp_given = false;
    bool pp_given = false;
    bool mbs_given = false;

    // The recompute mode acted on: --recompute-activations is Megatron's shorthand for
    // selective granularity.
    RecomputeGranularity recompute() const {
        return recompute_activations && recompute_granularity == RecomputeGranularity::None
                   ? RecomputeGranularity::Selective
                   : recompute_granularity;
    }

    // The flags' split; a layout string that does not parse is a UsageError (validate names it first).
    PipelineSplit split() const;
    int virtual_stages(int num_layers) const {
        // A layout's stages are PP x VP (Megatron derives VP from it).
        if (!pipeline_model_parallel_layout.empty()) {
            const auto stages = static_cast<int>(split().layout.size());
            return stages % pipeline_model_parallel_size == 0 ? stages / pipeline_model_parallel_size : 1;
        }
        if (num_virtual_stages_per_pipeline_rank > 0) return num_virtual_stages_per_pipeline_rank;
        if (num_layers_per_virtual_pipeline_stage <= 0) return 1;
        return split().split_layers(num_layers) / pipeline_model_parallel_size /
               num_layers_per_virtual_pipeline_stage;
    }
    // The pipeline size the interleaved schedule needs each iteration's micro-batch count to be
    // a multiple of; 1 when the run is not interleaved (one model chunk per stage).
    int interleaved_pp(int num_layers) const {
        return virtual_stages(num_layers) > 1 ? pipeline_model_parallel_size : 1;
    }
    // Megatron switches for what this build always does (accepted; the table shows True).
    bool attention_softmax_in_fp32 = true;
    bool accumulate_allreduce_grads_in_fp32 = true;
};

struct TrainingConfig {
    int micro_batch_size = 1;
    int global_batch_size = 0;       // 0: derived (max-global-batch-size or micro x DP)
    int max_global_batch_size = 0;   // 0: none
    // Megatron's --rampup-batch-size: start batch size, increment, ramp-up samples
    // (config/batch_rampup.hpp); empty: the global batch is constant.
    std::vector<int> rampup_batch_size;
    // Megatron's --step-batch-size-schedule "THRESHOLD:BATCH ..." (thresholds in tokens;
    // config/step_batch_schedule.hpp); empty: none.
    std::string step_batch_size_schedule;
    std::int64_t train_iters = 0;
    std::int64_t train_samples = 0;
    std::uint64_t seed = 1234;
    bool fp16 = false;
    bool bf16 = false;
    double loss_scale = 0.0;         // 0: dynamic
    double initial_loss_scale = 4294967296.0;  // 2^32
    double min_loss_scale = 1.0;
    int loss_scale_window = 1000;
    int hysteresis = 2;
    int eval_interval = 1000;
    int eval_iters = 100;
    std::int64_t exit_interval = 0;
    double exit_duration_in_mins = 0.0;
    bool exit_signal_handler = false;
    // Megatron's --skip-train: load (--load), evaluate on the validation and test sets, exit.
    bool skip_train = false;
    // The gradient of the global batch's summed token loss divided by its counted tokens,
    // instead of the mean over micro-batches of each one's mean (equal unless
    // --eod-mask-loss leaves micro-batches different counts).
    bool calculate_per_token_loss = false;
};

struct OptimizerConfig {
    OptimizerType optimizer = OptimizerType::Adam;
    double lr = 0.0;
    double min_lr = 0.0;
    LrDecayStyle lr_decay_style = LrDecayStyle::Linear;  // constant, linear, cosine, inverse-square-root, WSD
    std::int64_t lr_decay_iters = 0;         // 0: train-iters
    std::int64_t lr_decay_samples = 0;
    std::int64_t lr_warmup_iters = 0;
    std::int64_t lr_warmup_samples = 0;
    double lr_warmup_fraction = 0.0;
    double lr_warmup_init = 0.0;             // the warm-up's first learning rate
    // WSD (warmup-stable-decay): the annealing phase at the end of the decay, its length and shape.
    std::int64_t lr_wsd_decay_iters = 0;
    std::int64_t lr_wsd_decay_samples = 0;
    WsdDecayStyle lr_wsd_decay_style = WsdDecayStyle::Exponential;
    // Megatron's --decoupled-lr and --decoupled-min-lr: the word embeddings' and the output
    // layer's own peak and floor on the same schedule (warm-up from --lr-warmup-init, the same
    // decay); kLrNotGiven (Megatron's None): --lr's group, and for the floor --min-lr.
    static constexpr double kLrNotGiven = -1.0;
    double decoupled_lr = kLrNotGiven;
    double decoupled_min_lr = kLrNotGiven;
    double weight_decay = 0.01;
    // Megatron's --apply-wd-to-qk-layernorm: --qk-layernorm's query and key norms decay too
    // (Qwen3-Next's choice); every other 1-D parameter and bias does not.
    bool apply_wd_to_qk_layernorm = false;
    // Megatron's weight-decay schedule: from start to end over the run. kWeightDecayNotGiven
    // (Megatron's None) means --weight-decay; validation sets both to it for the constant style.
    static constexpr double kWeightDecayNotGiven = -1.0;
    double start_weight_decay = kWeightDecayNotGiven;
    double end_weight_decay = kWeightDecayNotGiven;
    WeightDecayIncrStyle weight_decay_incr_style = WeightDecayIncrStyle::Constant;
    double clip_grad = 1.0;
    double adam_beta1 = 0.9;
    double adam_beta2 = 0.999;
    double adam_eps = 1e-8;
};

struct DataConfig {
    std::vector<std::string> data_path;   // "prefix" or "w1 prefix1 w2 prefix2 ..."
    std::string split = "969, 30, 1";
    std::string vocab_file;
    std::string merge_file;
    TokenizerType tokenizer_type = TokenizerType::GPT2BPETokenizer;
    std::string data_cache_path;          // "": next to the data
    bool mock_data = false;               // synthetic tokens, no files (Megatron's --mock-data)
    bool eod_mask_loss = false;           // no loss on predictions made from an EOD input
    // Documents packed into one sample kept apart (Megatron's get_ltor_masks_and_position_ids
    // on the inputs): positions restart at 0 after each end-of-document token; a token after
    // one attends to no key at or before it.
    bool reset_position_ids = false;
    bool reset_attention_mask = false;
    // TikTokenizer (Megatron's --tokenizer-model / --tiktoken-*): a tiktoken rank file, the
    // split pattern (v1 | v2 | cl100k_base | o200k_base) and the special tokens put before it.
    std::string tokenizer_model;
    std::string tiktoken_pattern;
    int tiktoken_num_special_tokens = 1000;
    std::vector<std::string> tiktoken_special_tokens;  // empty: <unk> <s> </s>
    // Per-split data (Megatron's --train/valid/test-data-path), instead of --data-path and
    // --split; each a prefix or "w1 p1 w2 p2 ...". split_given: --split was on the command line.
    std::vector<std::string> train_data_path, valid_data_path, test_data_path;
    bool multiple_validation_sets = false;  // each --valid-data-path prefix is its own set
    bool split_given = false;
    bool per_split() const {
        return !train_data_path.empty() || !valid_data_path.empty() || !test_data_path.empty();
    }
    // Megatron's --mock-data means synthetic data whatever else is set; a config file's
    // `mock-data = true` is a default that a command line's data path overrides. The parser
    // records where each came from.
    bool mock_on_command_line = false;
    bool data_on_command_line = false;
    bool use_mock() const {
        return mock_data && (!(per_split() || !data_path.empty()) || mock_on_command_line || !data_on_command_line);
    }
    // Values of the blend flags that held whitespace and were read as Megatron's blend syntax
    // (words separated by spaces), for the message when a word is not a dataset.
    std::vector<std::string> blend_texts;
};

struct CheckpointConfig {
    std::string save;
    std::string load;
    int save_interval = 0;
    std::int64_t ckpt_step = -1;   // -1: latest
    bool load_fallback = false;
    int keep_last = 0;             // 0: keep all
    bool async_save = false;       // write checkpoints on a helper thread while training goes on
    // Megatron's non-persistent checkpoints (--non-persistent-ckpt-type global, its only
    // file-system kind): every N iterations to a folder of their own that keeps only the
    // newest; --load takes one when it is at least as new as the --load folder's
    // (train/run/first_checkpoint.hpp).
    int non_persistent_save_interval = 0;         // 0: none
    std::string non_persistent_ckpt_type;         // "" (none) or "global"
    std::string non_persistent_global_ckpt_dir;   // "": SAVE/non_persistent, LOAD/non_persistent
    std::string non_persistent_save_dir() const { return non_persistent_dir(save); }
    std::string non_persistent_load_dir() const { return non_persistent_dir(load); }
    std::string non_persistent_dir(const std::string& base) const {
        return non_persistent_global_ckpt_dir.empty() ? base + "/non_persistent" : non_persistent_global_ckpt_dir;
    }
    // Continued pretraining (Megatron's load_checkpoint): what of a loaded checkpoint is used.
    bool finetune = false;         // parameters only: iteration, optimizer, scheduler, data start afresh
    bool no_load_optim = false;    // keep the iteration; Adam state, LR scheduler and loss scale afresh
    bool no_load_rng = false;      // dropout RNG position afresh
    bool override_opt_param_scheduler = false;        // LR schedule from the flags, not the checkpoint
    bool use_checkpoint_opt_param_scheduler = false;  // LR schedule from the checkpoint, not the flags
    bool exit_on_missing_checkpoint = false;  // --load finds no checkpoint: stop, not a fresh start
    // Megatron's load_args_from_checkpoint (config/checkpoint_args.hpp): the model's arguments
    // from the checkpoint --load takes, where the user gave none.
    bool use_checkpoint_args = false;
    bool use_mp_args_from_checkpoint_args = false;            // TP, PP, virtual stages too
    bool no_use_tokenizer_model_from_checkpoint_args = false;  // the tokenizer stays the user's
};

struct LoggingConfig {
    int log_interval = 100;
    LogLevel log_level = LogLevel::Info;
    std::string log_dir;
    std::string metrics_file;      // JSON lines per iteration; "": none
    bool dry_run = false;          // validate, print arguments and rank layout, exit
    // TensorBoard (Megatron's flags): event files in tensorboard_dir, written by the last rank.
    std::string tensorboard_dir;   // "": none
    int tensorboard_log_interval = 1;
    int tensorboard_queue_size = 1000;  // accepted; we flush every log interval instead
    bool log_timers_to_tensorboard = false;
    bool log_throughput = false;  // TensorBoard's throughput (the log line always has it)
    bool log_params_norm = false;
    bool log_progress = false;    // Megatron's SAVE/progress.txt (train/monitor/progress_log.hpp)
    bool log_num_zeros_in_grad = false;  // zero gradient elements per step: log line, TensorBoard, metrics  // the parameters' L2 norm after each step: log line, TensorBoard, metrics
    bool log_validation_ppl_to_tensorboard = false;
    bool log_memory_to_tensorboard = false;
    bool log_world_size_to_tensorboard = false;
    bool no_log_loss_scale_to_tensorboard = false;
    bool no_log_learning_rate_to_tensorboard = false;
};

struct PlanConfig {
    bool plan_only = false;
    int world_size = 0;            // plan-only: ranks to plan for
    int local_world_size = 0;      // plan-only: ranks per node
    PlanFormat plan_format = PlanFormat::Table;  // table or json
    PlanDevice plan_device = PlanDevice::Auto;   // auto, a100-40gb, a100-80gb, h100-80gb, h200, cpu
    double plan_intra_node_gbps = 0.0;  // 0: the device preset's NVLink bandwidth
    double plan_inter_node_gbps = 0.0;  // 0: the device preset's InfiniBand bandwidth
};

// FP8 training (issue 34): Megatron-LM's flags, choices and defaults (its TransformerConfig's
// fp8 fields). Field names follow the flags; the arguments table and the saved run show
// Megatron's attribute names: fp8 (--fp8-format) and fp8_wgrad (True unless --no-fp8-wgrad).
// Which GEMMs run in FP8: the four linear layers of every transformer layer (QKV, attention
// projection, fc1, fc2), forward, data gradient and, unless --no-fp8-wgrad, weight gradient;
// attention's batched GEMMs, the embedding and the output layer stay 16-bit. Checked in
// validate_fp8.cpp (and on the device, for FP8 tensor cores: train/run/device_backend).
struct Fp8Config {
    Fp8Scheme fp8_format = Fp8Scheme::None;       // --fp8-format: none (off), e4m3 or hybrid
    Fp8Recipe fp8_recipe = Fp8Recipe::Delayed;    // delayed or tensorwise (mxfp8, blockwise, custom refused)
    int fp8_margin = 0;                           // scale = fp8_max / 2^margin / amax
    // Megatron marks it deprecated and ignores it (Transformer Engine 1.8 and later update
    // the scaling factors every step): accepted and ignored here too, with a warning when
    // set (train::resolve_run).
    int fp8_interval = 1;
    int fp8_amax_history_len = 1;                 // delayed scaling's amax history, in steps
    AmaxAlgo fp8_amax_compute_algo = AmaxAlgo::MostRecent;  // most_recent or max of the history
    bool fp8_wgrad = true;                        // --no-fp8-wgrad: weight gradients in 16-bit
    bool first_last_layers_bf16 = false;          // keep the first and last layers 16-bit
    int num_layers_at_start_in_bf16 = 1;          // with first_last_layers_bf16
    int num_layers_at_end_in_bf16 = 1;

    bool enabled() const { return fp8_format != Fp8Scheme::None; }
    // The FP8 element formats: E4M3 for activations and weights; gradients E5M2 under hybrid.
    Fp8Format forward_format() const { return Fp8Format::E4M3; }
    Fp8Format gradient_format() const { return fp8_format == Fp8Scheme::Hybrid ? Fp8Format::E5M2 : Fp8Format::E4M3; }
    // Layers kept 16-bit at each end (0 without --first-last-layers-bf16), and whether layer
    // `layer` (0-based, of num_layers) runs its linear GEMMs in FP8 (Megatron's
    // is_first_last_bf16_layer, negated).
    int bf16_layers_at_start() const { return first_last_layers_bf16 ? num_layers_at_start_in_bf16 : 0; }
    int bf16_layers_at_end() const { return first_last_layers_bf16 ? num_layers_at_end_in_bf16 : 0; }
    bool layer_in_fp8(int layer, int num_layers) const {
        return enabled() && layer >= bf16_layers_at_start() && layer < num_layers - bf16_layers_at_end();
    }
};

// Text samples during training (llm.c's periodic generation): every sample_interval
// iterations rank 0 logs the model's greedy continuation of sample_prompt.
struct SampleConfig {
    int sample_interval = 0;       // 0: never
    std::string sample_prompt = "<|endoftext|>";  // this exact text: start from EOD alone
    int sample_tokens = 32;
    std::int64_t sample_seed = -1; // -1: greedy; else top-k 40 draws with this seed
};

// Watching a long run (Megatron's names): the per-phase timers, the straggler report, the
// profiler window, and the guards against non-finite values and loss spikes.
struct MonitorConfig {
    int timing_log_level = 0;                  // 0, 1 or 2: the timers printed
    TimingLogOption timing_log_option = TimingLogOption::MinMax;  // minmax, max or all (across ranks)
    bool log_straggler = false;                // the slowest ranks' compute time
    bool profile = false;                      // cudaProfilerStart/Stop (CUDA build)
    std::int64_t profile_step_start = 10;
    std::int64_t profile_step_end = 12;
    // Megatron's flag is the negative one: the check is on by default.
    bool no_check_for_nan_in_loss_and_grad = false;
    bool check_for_nan_in_loss_and_grad() const { return !no_check_for_nan_in_loss_and_grad; }
    bool check_for_spiky_loss = false;
    int spiky_loss_window = 100;               // accepted losses the z-score is taken over
    double spiky_loss_zscore = 6.0;            // a loss this many std above the mean spikes
    int spiky_loss_max_consecutive = 3;        // spikes in a row that stop the run
    // Megatron's barrier_with_L1_time (on by default; --no-barrier-with-level-1-timing):
    // a world barrier before each measured level-1 timer starts.
    bool no_barrier_with_level_1_timing = false;
    bool barrier_with_L1_time() const { return !no_barrier_with_level_1_timing; }
    std::vector<int> profile_ranks = {0};      // global ranks that run the --profile window
    int straggler_minmax_count = 1;            // --log-straggler: slowest/fastest ranks shown
};

struct Config {
    ModelConfig model;
    ParallelConfig parallel;
    TrainingConfig training;
    OptimizerConfig optimizer;
    DataConfig data;
    CheckpointConfig checkpoint;
    LoggingConfig logging;
    PlanConfig plan;
    SampleConfig sample;
    MonitorConfig monitor;
    Fp8Config fp8;
    std::string config_file;       // the --config INI, if any
    // The options the user gave, on the command line or in --config (Megatron's names with
    // underscores; parse_args fills it): what --use-checkpoint-args leaves alone.
    std::vector<std::string> given_keys;

    int padded_vocab_size() const;  // vocab padded to make-vocab-size-divisible-by x TP
};

}  // namespace gpt
