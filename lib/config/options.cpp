#include "config/options.hpp"

#include <boost/program_options.hpp>
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <sstream>

#include "config/flag_binding.hpp"
#include "config/flag_parser.hpp"
#include "core/errors.hpp"
#include "core/strings.hpp"

namespace po = boost::program_options;

namespace gpt {

namespace {

// The arguments table's (and the saved run's) name of a flag: Megatron's, with underscores.
std::string row_key(std::string flag) {
    std::replace(flag.begin(), flag.end(), '-', '_');
    return flag;
}

struct Entry {
    std::string name;
    std::string key;  // the arguments table's and the saved run's name: Megatron's attribute
    std::function<std::string(const Config&)> print;
    std::function<OptionValue(const Config&)> get;     // the saved run's typed value
    std::function<void(Config&, const OptionValue&)> set;
};

// Ties each Megatron flag to one Config field: the same table builds the parser and
// prints the resolved values, so they cannot disagree.
class OptionTable {
public:
    explicit OptionTable(Config& cfg) : cfg_(cfg) { build(); }

    std::vector<std::pair<std::string, po::options_description>> groups;
    std::vector<Entry> entries;
    std::string micro_batch_text;  // "auto" or a number

    po::options_description all() const {
        po::options_description d;
        for (const auto& g : groups) d.add(g.second);
        return d;
    }

private:
    Config& cfg_;

    // `key`: Megatron's attribute where it is not the flag's name with underscores (the
    // flag's argparse dest, e.g. fp8 for --fp8-format); nullptr: the flag's name.
    template <typename S, typename T>
    void add(po::options_description& g, const char* name, S Config::*sec, T S::*field,
             const char* help, const char* key = nullptr) {
        add_flag(g, name, &(cfg_.*sec.*field), help);
        push_entry(name, key ? std::string(key) : row_key(name), sec, field);
    }

    // Megatron's store_false switch: --name clears `field` (default true), which the table
    // and the saved run show under Megatron's dest `key` (--no-fp8-wgrad: fp8_wgrad False).
    template <typename S>
    void add_store_false(po::options_description& g, const char* name, const char* key, S Config::*sec,
                         bool S::*field, const char* help) {
        bool* target = &(cfg_.*sec.*field);
        g.add_options()(name, po::bool_switch()->notifier([target](bool on) {
                                  if (on) *target = false;
                              }),
                        help);
        push_entry(name, key, sec, field);
    }

    // A Megatron store_true switch for what this project always does (its `field` defaults to
    // true): accepted, and the table shows True whether or not it was given.
    template <typename S>
    void add_always_on(po::options_description& g, const char* name, S Config::*sec, bool S::*field,
                       const char* help) {
        g.add_options()(name, po::bool_switch(), help);
        push_entry(name, row_key(name), sec, field);
    }

    template <typename S, typename T>
    void push_entry(const char* name, std::string key, S Config::*sec, T S::*field) {
        entries.push_back({name, std::move(key), [sec, field](const Config& c) { return flag_text(c.*sec.*field); },
                           [sec, field](const Config& c) { return option_value::to(c.*sec.*field); },
                           [sec, field, name](Config& c, const OptionValue& v) { option_value::from(v, c.*sec.*field, name); }});
    }

    void build() {
        using C = Config;
        po::options_description model("model");
        add(model, "num-layers", &C::model, &ModelConfig::num_layers, "transformer layers");
        add(model, "hidden-size", &C::model, &ModelConfig::hidden_size, "transformer hidden size");
        add(model, "num-attention-heads", &C::model, &ModelConfig::num_attention_heads, "attention heads");
        add(model, "ffn-hidden-size", &C::model, &ModelConfig::ffn_hidden_size, "MLP hidden size (0: 4 x hidden-size)");
        add(model, "seq-length", &C::model, &ModelConfig::seq_length, "tokens per sample");
        add(model, "max-position-embeddings", &C::model, &ModelConfig::max_position_embeddings, "position embeddings (0: seq-length)");
        add(model, "make-vocab-size-divisible-by", &C::model, &ModelConfig::make_vocab_size_divisible_by, "pad the vocab to a multiple of this (x TP)");
        add(model, "vocab-size", &C::model, &ModelConfig::vocab_size, "unpadded vocab size (0: from the tokenizer)");
        add(model, "init-method-std", &C::model, &ModelConfig::init_method_std, "std of the normal weight initialisation");
        add(model, "hidden-dropout", &C::model, &ModelConfig::hidden_dropout, "dropout after attention/MLP and embeddings");
        add(model, "attention-dropout", &C::model, &ModelConfig::attention_dropout, "dropout on attention probabilities");
        add(model, "layernorm-epsilon", &C::model, &ModelConfig::layernorm_epsilon, "layernorm epsilon");
        add(model, "openai-gelu", &C::model, &ModelConfig::openai_gelu, "tanh-approximated GELU");
        add(model, "no-bias-gelu-fusion", &C::model, &ModelConfig::no_bias_gelu_fusion,
            "exact erf GELU (Megatron's default fused bias-GELU is the tanh approximation)");
        // Modern decoder options (Megatron's names; checked in validate.cpp).
        add(model, "position-embedding-type", &C::model, &ModelConfig::position_embedding_type, "learned_absolute or rope");
        add(model, "rotary-percent", &C::model, &ModelConfig::rotary_percent, "fraction of each head's dims rotated by rope, in (0, 1]");
        add(model, "rotary-base", &C::model, &ModelConfig::rotary_base, "rope base period");
        add(model, "rotary-interleaved", &C::model, &ModelConfig::rotary_interleaved, "rope rotates interleaved pairs instead of halves");
        add(model, "normalization", &C::model, &ModelConfig::normalization, "LayerNorm or RMSNorm");
        add(model, "norm-epsilon", &C::model, &ModelConfig::norm_epsilon, "epsilon of the norms (0: --layernorm-epsilon)");
        add(model, "apply-layernorm-1p", &C::model, &ModelConfig::apply_layernorm_1p,
            "the norms scale by 1 + weight, their weights initialised to 0 (zero-centred gamma)");
        add(model, "swiglu", &C::model, &ModelConfig::swiglu, "gated SiLU MLP (fc1 gives gate and up, 2 x ffn-hidden-size)");
        add(model, "squared-relu", &C::model, &ModelConfig::squared_relu, "squared ReLU MLP activation, relu(x)^2, instead of GELU");
        add(model, "qk-layernorm", &C::model, &ModelConfig::qk_layernorm,
            "normalise each query and key head (--normalization over the head dimension) before rope");
        add(model, "group-query-attention", &C::model, &ModelConfig::group_query_attention, "grouped-query attention");
        add(model, "num-query-groups", &C::model, &ModelConfig::num_query_groups, "key/value heads with --group-query-attention");
        add(model, "untie-embeddings-and-output-weights", &C::model, &ModelConfig::untie_embeddings_and_output_weights, "a separate output layer instead of the word embeddings");
        add(model, "kv-channels", &C::model, &ModelConfig::kv_channels, "head dimension: must equal hidden-size / num-attention-heads (0: that)");
        add(model, "disable-bias-linear", &C::model, &ModelConfig::disable_bias_linear, "no biases in the linear layers");
        groups.emplace_back("model", model);

        po::options_description par("distributed");
        add(par, "tensor-model-parallel-size", &C::parallel, &ParallelConfig::tensor_model_parallel_size, "tensor-parallel ranks");
        add(par, "pipeline-model-parallel-size", &C::parallel, &ParallelConfig::pipeline_model_parallel_size, "pipeline stages");
        add(par, "num-layers-per-virtual-pipeline-stage", &C::parallel, &ParallelConfig::num_layers_per_virtual_pipeline_stage, "layers per virtual stage (interleaved schedule; 0: off)");
        add(par, "num-virtual-stages-per-pipeline-rank", &C::parallel, &ParallelConfig::num_virtual_stages_per_pipeline_rank, "model chunks per pipeline stage (interleaved schedule; instead of --num-layers-per-virtual-pipeline-stage; 0: not given)");
        add(par, "decoder-first-pipeline-num-layers", &C::parallel, &ParallelConfig::decoder_first_pipeline_num_layers, "decoder layers of the first pipeline stage (uneven stages; the other stages share the rest evenly; -1: not given)");
        add(par, "pipeline-model-parallel-layout", &C::parallel, &ParallelConfig::pipeline_model_parallel_layout, "the layers of every pipeline stage, Megatron's string: stages split by '|' (PP x virtual stages of them), E embedding, t decoder layer, L loss; (...)*n and x*n repeat, e.g. \"Et|(tt|)*2,tL\"");
        add(par, "decoder-last-pipeline-num-layers", &C::parallel, &ParallelConfig::decoder_last_pipeline_num_layers, "decoder layers of the last pipeline stage (uneven stages; -1: not given)");
        add(par, "account-for-embedding-in-pipeline-split", &C::parallel, &ParallelConfig::account_for_embedding_in_pipeline_split, "count the embedding as a layer of the first (virtual) stage when splitting the layers");
        add(par, "account-for-loss-in-pipeline-split", &C::parallel, &ParallelConfig::account_for_loss_in_pipeline_split, "count the output layer and loss as a layer of the last (virtual) stage when splitting the layers");
        add(par, "data-parallel-size", &C::parallel, &ParallelConfig::data_parallel_size, "data-parallel replicas (0: world / (TP x PP); must agree when given)");
        add(par, "use-distributed-optimizer", &C::parallel, &ParallelConfig::use_distributed_optimizer, "shard fp32 main params and Adam state over DP (ZeRO-1)");
        add(par, "sequence-parallel", &C::parallel, &ParallelConfig::sequence_parallel, "shard layernorm/dropout regions along the sequence over TP");
        add(par, "recompute-activations", &C::parallel, &ParallelConfig::recompute_activations, "selective recomputation of the attention core");
        add(par, "recompute-granularity", &C::parallel, &ParallelConfig::recompute_granularity, "full or selective");
        add(par, "recompute-method", &C::parallel, &ParallelConfig::recompute_method, "uniform or block (with full granularity)");
        add(par, "recompute-num-layers", &C::parallel, &ParallelConfig::recompute_num_layers, "layers per recompute chunk (uniform) or recomputed layers per stage (block)");
        add(par, "overlap-grad-reduce", &C::parallel, &ParallelConfig::overlap_grad_reduce, "reduce data-parallel gradient buckets while backward still runs");
        add(par, "ddp-bucket-size", &C::parallel, &ParallelConfig::ddp_bucket_size, "elements per data-parallel gradient bucket (0: max(40M, 1M x DP))");
        add_always_on(par, "attention-softmax-in-fp32", &C::parallel, &ParallelConfig::attention_softmax_in_fp32,
                      "always the case here: attention scores are masked and softmaxed in fp32");
        add_always_on(par, "accumulate-allreduce-grads-in-fp32", &C::parallel,
                      &ParallelConfig::accumulate_allreduce_grads_in_fp32,
                      "always the case here: gradients accumulate and are reduced in fp32 main-gradient buffers");
        add(par, "use-flash-attn", &C::parallel, &ParallelConfig::use_flash_attn, "tiled online-softmax attention");
        add(par, "distributed-backend", &C::parallel, &ParallelConfig::distributed_backend, "nccl or mpi");
        add(par, "device", &C::parallel, &ParallelConfig::device, "auto, cuda or cpu");
        add(par, "distributed-timeout-minutes", &C::parallel, &ParallelConfig::distributed_timeout_minutes, "end the job (exit code 3) when a rank waits this long for another rank or its device");
        groups.emplace_back("distributed", par);

        po::options_description train("training");
        train.add_options()("micro-batch-size", po::value<std::string>(&micro_batch_text)->default_value("1"),
                            "samples per micro-batch per data-parallel rank, or auto (planner)");
        entries.push_back({"micro-batch-size", "micro_batch_size", [](const Config& c) { return flag_text(c.training.micro_batch_size); },
                           [](const Config& c) { return option_value::to(c.training.micro_batch_size); },
                           [](Config& c, const OptionValue& v) { option_value::from(v, c.training.micro_batch_size, "micro-batch-size"); }});
        add(train, "global-batch-size", &C::training, &TrainingConfig::global_batch_size, "samples per iteration (0: derived)");
        add(train, "max-global-batch-size", &C::training, &TrainingConfig::max_global_batch_size, "upper bound for the planner's global batch (0: none)");
        add(train, "rampup-batch-size", &C::training, &TrainingConfig::rampup_batch_size, "start batch size, increment and ramp-up samples: the global batch grows from the start to global-batch-size over the ramp-up samples (Megatron's; needs train-samples)");
        add(train, "step-batch-size-schedule", &C::training, &TrainingConfig::step_batch_size_schedule, "\"THRESHOLD:BATCH ...\": the global batch is BATCH once THRESHOLD tokens are consumed (suffixes K, M, B, T; the first threshold 0; Megatron's; needs train-samples; the global batch is the last entry's)");
        add(train, "train-iters", &C::training, &TrainingConfig::train_iters, "iterations to train");
        add(train, "train-samples", &C::training, &TrainingConfig::train_samples, "samples to train (instead of train-iters)");
        add(train, "seed", &C::training, &TrainingConfig::seed, "random seed");
        add(train, "calculate-per-token-loss", &C::training, &TrainingConfig::calculate_per_token_loss, "normalise the gradient by the global batch's counted tokens, not per micro-batch (Megatron's)");
        add(train, "eval-interval", &C::training, &TrainingConfig::eval_interval, "iterations between validations");
        add(train, "eval-iters", &C::training, &TrainingConfig::eval_iters, "iterations per validation");
        add(train, "exit-interval", &C::training, &TrainingConfig::exit_interval, "exit after the iteration divisible by this (0: off)");
        add(train, "exit-duration-in-mins", &C::training, &TrainingConfig::exit_duration_in_mins, "exit after this many minutes (0: off)");
        add(train, "exit-signal-handler", &C::training, &TrainingConfig::exit_signal_handler, "save and exit on SIGTERM/SIGUSR1");
        groups.emplace_back("training", train);

        po::options_description mp("mixed precision");
        add(mp, "fp16", &C::training, &TrainingConfig::fp16, "fp16 parameters and activations, dynamic loss scaling");
        add(mp, "bf16", &C::training, &TrainingConfig::bf16, "bf16 parameters and activations");
        add(mp, "loss-scale", &C::training, &TrainingConfig::loss_scale, "constant loss scale (0: dynamic)");
        add(mp, "initial-loss-scale", &C::training, &TrainingConfig::initial_loss_scale, "initial dynamic loss scale");
        add(mp, "min-loss-scale", &C::training, &TrainingConfig::min_loss_scale, "minimum dynamic loss scale");
        add(mp, "loss-scale-window", &C::training, &TrainingConfig::loss_scale_window, "clean iterations before the scale doubles");
        add(mp, "hysteresis", &C::training, &TrainingConfig::hysteresis, "overflows tolerated before the scale halves");
        groups.emplace_back("mixed precision", mp);

        // Megatron's FP8 flags (its TransformerConfig's fp8 fields; validate_fp8.cpp checks them).
        po::options_description f8("fp8");
        add(f8, "fp8-format", &C::fp8, &Fp8Config::fp8_format,
            "FP8 GEMMs in the linear layers: e4m3 (every FP8 tensor E4M3) or hybrid (E4M3 activations and "
            "weights, E5M2 gradients); not given: no FP8. Needs --bf16 or --fp16",
            "fp8");
        add(f8, "fp8-recipe", &C::fp8, &Fp8Config::fp8_recipe,
            "FP8 scaling recipe: delayed (scales from an amax history) or tensorwise (current per-tensor "
            "scaling); Megatron's mxfp8, blockwise and custom are not supported");
        add(f8, "fp8-margin", &C::fp8, &Fp8Config::fp8_margin, "scaling margin: the scale maps amax to the FP8 maximum / 2^margin");
        add(f8, "fp8-interval", &C::fp8, &Fp8Config::fp8_interval,
            "DEPRECATED in Megatron-LM and ignored: scaling factors are updated every step");
        add(f8, "fp8-amax-history-len", &C::fp8, &Fp8Config::fp8_amax_history_len,
            "steps of amax history kept per FP8 tensor (delayed scaling)");
        add(f8, "fp8-amax-compute-algo", &C::fp8, &Fp8Config::fp8_amax_compute_algo,
            "amax taken from the history: most_recent or max");
        add_store_false(f8, "no-fp8-wgrad", "fp8_wgrad", &C::fp8, &Fp8Config::fp8_wgrad,
                        "weight-gradient GEMMs in 16-bit even in FP8 runs");
        add(f8, "first-last-layers-bf16", &C::fp8, &Fp8Config::first_last_layers_bf16,
            "keep the first and last transformer layers' GEMMs in 16-bit in FP8 runs (not with --fp8-recipe delayed)");
        add(f8, "num-layers-at-start-in-bf16", &C::fp8, &Fp8Config::num_layers_at_start_in_bf16,
            "layers at the start kept in 16-bit with --first-last-layers-bf16");
        add(f8, "num-layers-at-end-in-bf16", &C::fp8, &Fp8Config::num_layers_at_end_in_bf16,
            "layers at the end kept in 16-bit with --first-last-layers-bf16");
        groups.emplace_back("fp8", f8);

        po::options_description opt("optimizer and learning rate");
        add(opt, "optimizer", &C::optimizer, &OptimizerConfig::optimizer, "adam");
        add(opt, "lr", &C::optimizer, &OptimizerConfig::lr, "peak learning rate");
        add(opt, "min-lr", &C::optimizer, &OptimizerConfig::min_lr, "learning rate floor");
        add(opt, "decoupled-lr", &C::optimizer, &OptimizerConfig::decoupled_lr,
            "peak learning rate of the word embeddings and the output layer (-1: --lr)");
        add(opt, "decoupled-min-lr", &C::optimizer, &OptimizerConfig::decoupled_min_lr,
            "learning rate floor of the word embeddings and the output layer (-1: --min-lr)");
        add(opt, "lr-decay-style", &C::optimizer, &OptimizerConfig::lr_decay_style, "constant, linear, cosine, inverse-square-root or WSD (warmup-stable-decay)");
        add(opt, "lr-decay-iters", &C::optimizer, &OptimizerConfig::lr_decay_iters, "iterations to decay over (0: train-iters)");
        add(opt, "lr-decay-samples", &C::optimizer, &OptimizerConfig::lr_decay_samples, "samples to decay over");
        add(opt, "lr-warmup-iters", &C::optimizer, &OptimizerConfig::lr_warmup_iters, "linear warm-up iterations");
        add(opt, "lr-warmup-samples", &C::optimizer, &OptimizerConfig::lr_warmup_samples, "linear warm-up samples");
        add(opt, "lr-warmup-fraction", &C::optimizer, &OptimizerConfig::lr_warmup_fraction, "warm-up as a fraction of the decay");
        add(opt, "lr-warmup-init", &C::optimizer, &OptimizerConfig::lr_warmup_init, "learning rate the linear warm-up starts from");
        add(opt, "lr-wsd-decay-style", &C::optimizer, &OptimizerConfig::lr_wsd_decay_style, "WSD's annealing: exponential, linear, cosine or minus_sqrt");
        add(opt, "lr-wsd-decay-iters", &C::optimizer, &OptimizerConfig::lr_wsd_decay_iters, "iterations of WSD's annealing phase, at the end of the decay");
        add(opt, "lr-wsd-decay-samples", &C::optimizer, &OptimizerConfig::lr_wsd_decay_samples, "samples of WSD's annealing phase, at the end of the decay");
        add(opt, "weight-decay", &C::optimizer, &OptimizerConfig::weight_decay, "decoupled weight decay (not on biases and layernorm)");
        add(opt, "apply-wd-to-qk-layernorm", &C::optimizer, &OptimizerConfig::apply_wd_to_qk_layernorm,
            "weight decay on --qk-layernorm's query and key norms too");
        add(opt, "start-weight-decay", &C::optimizer, &OptimizerConfig::start_weight_decay, "weight decay at the start of the run, with --weight-decay-incr-style linear or cosine (-1: not given)");
        add(opt, "end-weight-decay", &C::optimizer, &OptimizerConfig::end_weight_decay, "weight decay at the end of the run, with --weight-decay-incr-style linear or cosine (-1: not given)");
        add(opt, "weight-decay-incr-style", &C::optimizer, &OptimizerConfig::weight_decay_incr_style, "constant (--weight-decay), linear or cosine from --start-weight-decay to --end-weight-decay");
        add(opt, "clip-grad", &C::optimizer, &OptimizerConfig::clip_grad, "clip by global gradient norm (0: off)");
        add(opt, "adam-beta1", &C::optimizer, &OptimizerConfig::adam_beta1, "Adam beta1");
        add(opt, "adam-beta2", &C::optimizer, &OptimizerConfig::adam_beta2, "Adam beta2");
        add(opt, "adam-eps", &C::optimizer, &OptimizerConfig::adam_eps, "Adam epsilon");
        groups.emplace_back("optimizer", opt);

        po::options_description data("data");
        add(data, "data-path", &C::data, &DataConfig::data_path, "dataset prefix, or weights and prefixes: 0.3 A 0.7 B");
        add(data, "split", &C::data, &DataConfig::split, "train,valid,test proportions of the documents");
        add(data, "vocab-file", &C::data, &DataConfig::vocab_file, "GPT-2 vocab (gpt2-vocab.json)");
        add(data, "merge-file", &C::data, &DataConfig::merge_file, "GPT-2 merges (gpt2-merges.txt)");
        add(data, "tokenizer-type", &C::data, &DataConfig::tokenizer_type, "GPT2BPETokenizer");
        add(data, "data-cache-path", &C::data, &DataConfig::data_cache_path, "folder for index caches (default: next to the data)");
        add(data, "eod-mask-loss", &C::data, &DataConfig::eod_mask_loss, "leave the prediction made from an end-of-document token out of the loss (Megatron's)");
        add(data, "reset-position-ids", &C::data, &DataConfig::reset_position_ids, "positions restart at 0 after each end-of-document token (position embeddings and rope)");
        add(data, "reset-attention-mask", &C::data, &DataConfig::reset_attention_mask, "a token after an end-of-document token attends only to its own document (document masking; flash attention too)");
        add(data, "mock-data", &C::data, &DataConfig::mock_data, "synthetic data, no files (as in Megatron it wins over data paths, except that a config file's mock-data = true yields to a command line's --data-path)");
        add(data, "tokenizer-model", &C::data, &DataConfig::tokenizer_model, "TikTokenizer rank file (.tiktoken lines 'base64 rank', or Megatron's JSON list)");
        add(data, "tiktoken-pattern", &C::data, &DataConfig::tiktoken_pattern, "TikTokenizer split pattern: v1, v2 (Megatron's), cl100k_base, o200k_base");
        add(data, "tiktoken-num-special-tokens", &C::data, &DataConfig::tiktoken_num_special_tokens, "TikTokenizer: ids below this are special tokens; rank r gets id r + this");
        add(data, "tiktoken-special-tokens", &C::data, &DataConfig::tiktoken_special_tokens, "TikTokenizer special tokens (must include <unk> <s> </s>)");
        groups.emplace_back("data", data);

        po::options_description ck("checkpointing");
        add(ck, "save", &C::checkpoint, &CheckpointConfig::save, "checkpoint folder to save to");
        add(ck, "load", &C::checkpoint, &CheckpointConfig::load, "checkpoint folder to load from");
        add(ck, "save-interval", &C::checkpoint, &CheckpointConfig::save_interval, "iterations between saves (0: only at the end)");
        add(ck, "ckpt-step", &C::checkpoint, &CheckpointConfig::ckpt_step, "load this iteration instead of the latest (-1: latest)");
        add(ck, "load-fallback", &C::checkpoint, &CheckpointConfig::load_fallback, "fall back to the previous good checkpoint when the latest is damaged");
        add(ck, "keep-last", &C::checkpoint, &CheckpointConfig::keep_last, "keep only the newest N checkpoints (0: all)");
        add(ck, "async-save", &C::checkpoint, &CheckpointConfig::async_save, "write checkpoints in the background while training continues");
        add(ck, "non-persistent-save-interval", &C::checkpoint, &CheckpointConfig::non_persistent_save_interval, "iterations between non-persistent saves (0: none): to a folder that keeps only the newest, loaded when newer than --load's");
        add(ck, "non-persistent-ckpt-type", &C::checkpoint, &CheckpointConfig::non_persistent_ckpt_type, "kind of non-persistent checkpoints: global (a checkpoint folder of its own; local and in_memory are not implemented)");
        add(ck, "non-persistent-global-ckpt-dir", &C::checkpoint, &CheckpointConfig::non_persistent_global_ckpt_dir, "folder of the global non-persistent checkpoints (default: SAVE/non_persistent, and LOAD/non_persistent to load)");
        add(ck, "finetune", &C::checkpoint, &CheckpointConfig::finetune, "load the parameters only: iteration, optimizer, scheduler and data start afresh");
        add(ck, "no-load-optim", &C::checkpoint, &CheckpointConfig::no_load_optim, "do not load the optimizer, scheduler and loss-scaler state");
        add(ck, "no-load-rng", &C::checkpoint, &CheckpointConfig::no_load_rng, "do not load the dropout RNG position");
        add(ck, "override-opt_param-scheduler", &C::checkpoint, &CheckpointConfig::override_opt_param_scheduler, "learning-rate schedule from the flags, not the checkpoint");
        add(ck, "use-checkpoint-opt_param-scheduler", &C::checkpoint, &CheckpointConfig::use_checkpoint_opt_param_scheduler, "learning-rate schedule from the checkpoint, not the flags");
        add(ck, "use-checkpoint-args", &C::checkpoint, &CheckpointConfig::use_checkpoint_args, "take the model's arguments (shape, architecture, tokenizer) from the checkpoint --load takes, where not given; a given one must agree");
        add(ck, "use-mp-args-from-checkpoint-args", &C::checkpoint, &CheckpointConfig::use_mp_args_from_checkpoint_args, "with --use-checkpoint-args, take the tensor- and pipeline-parallel layout too");
        add(ck, "no-use-tokenizer-model-from-checkpoint-args", &C::checkpoint, &CheckpointConfig::no_use_tokenizer_model_from_checkpoint_args, "with --use-checkpoint-args, the tokenizer's type and files stay the flags'");
        add(ck, "exit-on-missing-checkpoint", &C::checkpoint, &CheckpointConfig::exit_on_missing_checkpoint, "stop (exit 1) when --load holds no checkpoint, instead of starting from iteration 0");
        groups.emplace_back("checkpointing", ck);

        po::options_description lg("logging");
        add(lg, "log-interval", &C::logging, &LoggingConfig::log_interval, "iterations between log lines");
        add(lg, "log-level", &C::logging, &LoggingConfig::log_level, "trace, debug, info, warning or error");
        add(lg, "log-dir", &C::logging, &LoggingConfig::log_dir, "write one log file per rank here");
        add(lg, "metrics-file", &C::logging, &LoggingConfig::metrics_file, "JSON lines of per-iteration metrics");
        add(lg, "log-progress", &C::logging, &LoggingConfig::log_progress, "append to SAVE/progress.txt at the start of each job and at each checkpoint: iteration, job and cumulative throughput (TFLOP/s/GPU), floating-point operations and tokens so far");
        add(lg, "log-params-norm", &C::logging, &LoggingConfig::log_params_norm, "compute the parameters' L2 norm after each step: 'params norm' in the log line, params-norm in TensorBoard, params_norm in the metrics file");
        add(lg, "log-num-zeros-in-grad", &C::logging, &LoggingConfig::log_num_zeros_in_grad, "count the gradient elements equal to zero each step (each parameter once): 'num zeros' in the log line, num-zeros in TensorBoard, num_zeros in the metrics file");
        add(lg, "dry-run", &C::logging, &LoggingConfig::dry_run, "validate the configuration, print the arguments and rank layout, and exit");
        groups.emplace_back("logging", lg);

        po::options_description pl("planner");
        add(pl, "plan-only", &C::plan, &PlanConfig::plan_only, "print the feasible parallel layouts and exit (no MPI)");
        add(pl, "world-size", &C::plan, &PlanConfig::world_size, "ranks to plan for (plan-only)");
        add(pl, "local-world-size", &C::plan, &PlanConfig::local_world_size, "ranks per node (plan-only)");
        add(pl, "plan-format", &C::plan, &PlanConfig::plan_format, "table or json");
        add(pl, "plan-device", &C::plan, &PlanConfig::plan_device, "device preset: auto, a100-40gb, a100-80gb, h100-80gb, h200 or cpu");
        add(pl, "plan-intra-node-gbps", &C::plan, &PlanConfig::plan_intra_node_gbps, "intra-node bandwidth per GPU in GB/s (0: preset)");
        add(pl, "plan-inter-node-gbps", &C::plan, &PlanConfig::plan_inter_node_gbps, "inter-node bandwidth per GPU in GB/s (0: preset)");
        groups.emplace_back("planner", pl);

        po::options_description sm("text samples during training");
        add(sm, "sample-interval", &C::sample, &SampleConfig::sample_interval, "iterations between logged text samples (0: none)");
        add(sm, "sample-prompt", &C::sample, &SampleConfig::sample_prompt, "the samples' prompt (<|endoftext|>: none)");
        add(sm, "sample-tokens", &C::sample, &SampleConfig::sample_tokens, "tokens per sample");
        add(sm, "sample-seed", &C::sample, &SampleConfig::sample_seed, "-1: greedy samples; else top-k 40 draws with this seed");
        groups.emplace_back("text samples during training", sm);

        po::options_description mon("monitoring");
        add(mon, "timing-log-level", &C::monitor, &MonitorConfig::timing_log_level, "per-phase timers to print: 0 none, 1 the iteration's phases, 2 also per micro-batch compute and pipeline sends/receives");
        add(mon, "timing-log-option", &C::monitor, &MonitorConfig::timing_log_option, "timer figures across ranks: minmax, max or all");
        add(mon, "log-straggler", &C::monitor, &MonitorConfig::log_straggler, "every log interval, the ranks whose compute time is furthest above the median, with their hosts");
        add(mon, "profile", &C::monitor, &MonitorConfig::profile, "CUDA build: cudaProfilerStart/Stop around --profile-step-start..--profile-step-end on rank 0");
        add(mon, "profile-step-start", &C::monitor, &MonitorConfig::profile_step_start, "iteration the profiler starts at");
        add(mon, "profile-step-end", &C::monitor, &MonitorConfig::profile_step_end, "iteration the profiler stops at");
        add(mon, "no-check-for-nan-in-loss-and-grad", &C::monitor, &MonitorConfig::no_check_for_nan_in_loss_and_grad, "do not stop on a NaN/Inf loss or gradient (bf16/fp32)");
        add(mon, "check-for-spiky-loss", &C::monitor, &MonitorConfig::check_for_spiky_loss, "skip the update of a step whose loss spikes; stop after --spiky-loss-max-consecutive in a row");
        add(mon, "spiky-loss-window", &C::monitor, &MonitorConfig::spiky_loss_window, "accepted losses the spike z-score is measured against");
        add(mon, "spiky-loss-zscore", &C::monitor, &MonitorConfig::spiky_loss_zscore, "a loss this many standard deviations above the window's mean is a spike");
        add(mon, "spiky-loss-max-consecutive", &C::monitor, &MonitorConfig::spiky_loss_max_consecutive, "spiky steps in a row that stop training");
        add(mon, "no-barrier-with-level-1-timing", &C::monitor, &MonitorConfig::no_barrier_with_level_1_timing, "no world barrier before the level-1 timers start (their times then include waiting for slower ranks)");
        add(mon, "profile-ranks", &C::monitor, &MonitorConfig::profile_ranks, "global ranks that run the --profile window");
        add(mon, "straggler-minmax-count", &C::monitor, &MonitorConfig::straggler_minmax_count, "--log-straggler: how many slowest and fastest ranks to report");
        groups.emplace_back("monitoring", mon);

        po::options_description tb("tensorboard");
        add(tb, "tensorboard-dir", &C::logging, &LoggingConfig::tensorboard_dir, "write TensorBoard event files here (from the last rank)");
        add(tb, "tensorboard-log-interval", &C::logging, &LoggingConfig::tensorboard_log_interval, "iterations between TensorBoard scalars");
        add(tb, "tensorboard-queue-size", &C::logging, &LoggingConfig::tensorboard_queue_size, "accepted for Megatron compatibility; events are flushed every log interval");
        add(tb, "log-timers-to-tensorboard", &C::logging, &LoggingConfig::log_timers_to_tensorboard, "write iteration-time, and with --timing-log-level 1 or 2 each timer as <name>-time (per log interval)");
        add(tb, "log-throughput", &C::logging, &LoggingConfig::log_throughput, "with --log-timers-to-tensorboard, write throughput (model TFLOP/s per GPU); the log line always shows it");
        add(tb, "log-validation-ppl-to-tensorboard", &C::logging, &LoggingConfig::log_validation_ppl_to_tensorboard, "write validation perplexity");
        add(tb, "log-memory-to-tensorboard", &C::logging, &LoggingConfig::log_memory_to_tensorboard, "write memory use");
        add(tb, "log-world-size-to-tensorboard", &C::logging, &LoggingConfig::log_world_size_to_tensorboard, "write the world size");
        add(tb, "no-log-loss-scale-to-tensorboard", &C::logging, &LoggingConfig::no_log_loss_scale_to_tensorboard, "do not write the loss scale");
        add(tb, "no-log-learning-rate-to-tensorboard", &C::logging, &LoggingConfig::no_log_learning_rate_to_tensorboard, "do not write the learning rate");
        groups.emplace_back("tensorboard", tb);

        po::options_description ev("evaluation and per-split data");
        add(ev, "train-data-path", &C::data, &DataConfig::train_data_path, "training data: a prefix or weights and prefixes (instead of --data-path/--split)");
        add(ev, "valid-data-path", &C::data, &DataConfig::valid_data_path, "validation data: a prefix or weights and prefixes");
        add(ev, "test-data-path", &C::data, &DataConfig::test_data_path, "test data: a prefix or weights and prefixes");
        add(ev, "multiple-validation-sets", &C::data, &DataConfig::multiple_validation_sets, "each --valid-data-path prefix is a validation set of its own, reported by name");
        add(ev, "skip-train", &C::training, &TrainingConfig::skip_train, "load the checkpoint, evaluate on the validation and test sets, and exit");
        groups.emplace_back("evaluation", ev);
    }
};

// Megatron flags users may carry over that this project does not implement: rejected with
// a message saying so, rather than as unknown typos.
const std::map<std::string, std::string>& unsupported_flags() {
    static const std::map<std::string, std::string> m{
        {"num-layers-per-virtual-pipeline-stage-auto", "not a Megatron flag"},
        {"use-mcore-models", "there is one model implementation; drop the flag"},
        {"apply-query-key-layer-scaling", "not implemented: query-key layer scaling stays off, Megatron's default"},
        {"context-parallel-size", "context parallelism is not implemented"},
        {"expert-model-parallel-size", "mixture of experts is not implemented"},
        {"num-experts", "mixture of experts is not implemented"},
        {"overlap-param-gather", "the distributed optimizer gathers parameters after the step, not overlapped with the next forward"},
        // FP8 and Transformer Engine (issue 34): this build's FP8 casts 16-bit parameters and
        // activations for the linear layers' GEMMs itself.
        {"transformer-impl", "there is one implementation of the layers, this project's own (no Transformer Engine); drop the flag"},
        {"fp8-param-gather", "not implemented: parameters stay 16-bit and are cast to FP8 each step, so the all-gather is 16-bit"},
        {"fp8-quantizer-factory", "it names a Python quantizer for --fp8-recipe custom, which is not supported"},
        {"fp8-output-proj", "it needs --fp8-recipe mxfp8, which is not supported; the output layer stays 16-bit"},
        {"te-precision-config-file", "per-module precision overrides are Transformer Engine's; not implemented"},
        {"fp4-format", "FP4 (NVFP4) training is not implemented"},
        {"fp4-recipe", "FP4 (NVFP4) training is not implemented"},
        {"fp4-param-gather", "FP4 (NVFP4) training is not implemented"},
        // Megatron flags common in its example scripts that this project does not implement.
        {"apply-residual-connection-post-layernorm", "not implemented: the residual is taken before the layernorm"},
        {"ckpt-format", "checkpoints are this project's HDF5 format (docs/checkpoint-format.md); drop the flag"},
        {"use-dist-ckpt", "checkpoints are this project's HDF5 format, sharded and resharded on load; drop the flag"},
        {"ckpt-fully-parallel-save", "checkpoints are always saved by every rank in parallel (HDF5); drop the flag"},
        {"ckpt-fully-parallel-load", "checkpoints are always loaded by every rank in parallel (HDF5); drop the flag"},
        {"non-persistent-local-ckpt-dir", "local non-persistent checkpoints (NVIDIA's resiliency extension) are not implemented: use --non-persistent-ckpt-type global"},
        {"non-persistent-local-ckpt-algo", "local non-persistent checkpoints (NVIDIA's resiliency extension) are not implemented: use --non-persistent-ckpt-type global"},
        {"no-weight-decay-cond-type", "Megatron's deprecated spelling: use --apply-wd-to-qk-layernorm"},
        {"wandb-project", "there is no Weights & Biases writer; use --tensorboard-dir or --metrics-file"},
        {"wandb-exp-name", "there is no Weights & Biases writer; use --tensorboard-dir or --metrics-file"},
        {"wandb-save-dir", "there is no Weights & Biases writer; use --tensorboard-dir or --metrics-file"},
        {"num-workers", "there are no data-loader worker processes: samples are read from the memory-mapped dataset in step; drop the flag"},
        {"dataloader-type", "the sampler is Megatron's single (pretraining) sampler; cyclic and external are not implemented"},
        {"tp-comm-overlap", "tensor-parallel communication is not overlapped with GEMMs (Transformer Engine's userbuffers)"},
        {"overlap-p2p-communication", "not implemented: pipeline sends and receives are not overlapped with compute"},
        {"use-torch-fsdp2", "FSDP is not implemented: use --use-distributed-optimizer (ZeRO-1)"},
        {"num-distributed-optimizer-instances", "not implemented: one distributed-optimizer instance spans the data-parallel group"},
        {"use-precision-aware-optimizer", "not implemented: main parameters, gradients and Adam moments are fp32"},
        {"main-grads-dtype", "not implemented: main gradients are fp32"},
        {"main-params-dtype", "not implemented: main parameters are fp32"},
        {"exp-avg-dtype", "not implemented: Adam moments are fp32"},
        {"exp-avg-sq-dtype", "not implemented: Adam moments are fp32"},
        {"recompute-modules", "not implemented: use --recompute-granularity selective (the attention core) or full"},
        {"attention-backend", "attention is this project's own kernels (--use-flash-attn; on CUDA the GPT_CUDA_FLASH switch); drop the flag"},
        {"no-masked-softmax-fusion", "kernel fusions are not switchable here (the fused kernels compute the same values); drop the flag"},
        {"no-bias-dropout-fusion", "kernel fusions are not switchable here (the fused kernels compute the same values); drop the flag"},
        {"no-gradient-accumulation-fusion", "kernel fusions are not switchable here (weight gradients always accumulate into fp32 main gradients); drop the flag"},
        {"no-rope-fusion", "kernel fusions are not switchable here (the fused kernels compute the same values); drop the flag"},
        {"no-bias-swiglu-fusion", "kernel fusions are not switchable here (the fused kernels compute the same values); drop the flag"},
        {"no-persist-layer-norm", "kernel fusions are not switchable here (the fused kernels compute the same values); drop the flag"},
        {"cross-entropy-loss-fusion", "the vocabulary-parallel cross entropy is always this project's fused kernel; drop the flag"},
        {"manual-gc", "there is no garbage collector to schedule (no Python); drop the flag"},
        {"manual-gc-interval", "there is no garbage collector to schedule (no Python); drop the flag"},
        {"empty-unused-memory-level", "there is no caching allocator cache to empty (PyTorch's); drop the flag"},
        {"log-energy", "not implemented: energy is not measured"},
        {"fim-rate", "fill-in-the-middle data is not implemented"},
    };
    return m;
}

std::vector<std::string> names_of(const OptionTable& t) {
    std::vector<std::string> n{"config", "help"};
    for (const auto& e : t.entries) n.push_back(e.name);
    return n;
}

void parse_micro_batch(const std::string& text, Config& cfg) {
    if (text == "auto") {
        cfg.training.micro_batch_size = 0;
        cfg.parallel.mbs_given = false;
        return;
    }
    try {
        std::size_t used = 0;
        int v = std::stoi(text, &used);
        if (used != text.size() || v <= 0) throw std::invalid_argument(text);
        cfg.training.micro_batch_size = v;
    } catch (const std::exception&) {
        GPT_THROW(UsageError, "--micro-batch-size must be a positive integer or auto, got '", text, "'");
    }
}

}  // namespace

ParsedArgs parse_args(const std::vector<std::string>& raw_args) {
    ParsedArgs out;
    Config& cfg = out.config;
    OptionTable table(cfg);
    // --config and --help first: the suggestions' candidates in option_names()'s order.
    po::options_description desc;
    desc.add_options()("config", po::value<std::string>(&cfg.config_file), "INI file of options")(
        "help,h", po::bool_switch(&out.help), "print the options");
    desc.add(table.all());
    FlagRules rules;
    rules.config_flag = "config";
    rules.unsupported = unsupported_flags();
    const ParsedFlags parsed = parse_flags(desc, raw_args, rules);
    const po::variables_map& vm = parsed.values;
    const std::vector<std::string>& args = parsed.args;

    parse_micro_batch(table.micro_batch_text, cfg);
    auto given = [&](const char* n) { return vm.count(n) && !vm[n].defaulted(); };
    cfg.parallel.tp_given = given("tensor-model-parallel-size");
    cfg.parallel.pp_given = given("pipeline-model-parallel-size");
    cfg.parallel.mbs_given = given("micro-batch-size") && table.micro_batch_text != "auto";
    for (const auto& [name, value] : vm) {
        if (value.defaulted() || name == "config" || name == "help") continue;
        std::string key = name;
        std::replace(key.begin(), key.end(), '-', '_');
        cfg.given_keys.push_back(key);
    }

    // An INI value "0.3 a 0.7 b" arrives as one string: split into words, Megatron's blend
    // syntax. A value that names a dataset whole ("<value>.idx" exists) is one prefix, so a
    // path with spaces can be given as one quoted argument, as Megatron's argparse takes it.
    for (auto* paths : {&cfg.data.data_path, &cfg.data.train_data_path, &cfg.data.valid_data_path,
                        &cfg.data.test_data_path}) {
        std::vector<std::string> words;
        for (const auto& s : *paths) {
            std::vector<std::string> w = split_whitespace(s);
            std::error_code ec;  // a long blend is no valid file name (ENAMETOOLONG): not a prefix
            if (w.size() > 1 && std::filesystem::is_regular_file(s + ".idx", ec)) {
                words.push_back(s);
                continue;
            }
            if (w.size() > 1) cfg.data.blend_texts.push_back(s);
            for (auto& t : w) words.push_back(t);
        }
        *paths = words;
    }
    auto on_command_line = [&](const char* flag) {
        const std::string f = std::string("--") + flag;
        return std::any_of(args.begin(), args.end(),
                           [&](const std::string& a) { return a == f || a.rfind(f + "=", 0) == 0; });
    };
    // On the command line only: a config file's split is a default that per-split paths override.
    cfg.data.split_given = on_command_line("split");
    cfg.data.mock_on_command_line = on_command_line("mock-data");
    cfg.data.data_on_command_line = on_command_line("data-path") || on_command_line("train-data-path") ||
                                    on_command_line("valid-data-path") || on_command_line("test-data-path");
    return out;
}

ParsedArgs parse_args(int argc, const char* const* argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    return parse_args(args);
}

std::string usage_text() {
    Config cfg;
    OptionTable table(cfg);
    std::vector<const po::options_description*> groups;
    for (const auto& g : table.groups) groups.push_back(&g.second);
    return flags_usage("usage: gpt_pretrain [--config FILE.ini] [--flag value ...]\n"
                       "Flags are Megatron-LM's; INI keys are the same names without dashes.\n",
                       groups);
}

FlagRules pretrain_flags_passed_on() {
    FlagRules rules;
    rules.unsupported = unsupported_flags();
    rules.pass_on = option_names();
    return rules;
}

std::vector<std::string> option_names() {
    Config cfg;
    OptionTable table(cfg);
    return names_of(table);
}

const std::vector<OptionField>& option_fields() {
    static const std::vector<OptionField> fields = [] {
        Config scratch;
        OptionTable table(scratch);
        std::vector<OptionField> f;
        for (const auto& e : table.entries) f.push_back({e.key, e.get, e.set});
        return f;
    }();
    return fields;
}

std::string format_arguments(const Config& cfg,
                             const std::vector<std::pair<std::string, std::string>>& extra) {
    Config scratch;
    OptionTable table(scratch);
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& e : table.entries) rows.emplace_back(e.key, e.print(cfg));
    rows.emplace_back("padded_vocab_size", cfg.model.vocab_size > 0 ? std::to_string(cfg.padded_vocab_size()) : "None");
    rows.emplace_back("config", cfg.config_file.empty() ? "None" : cfg.config_file);
    rows.insert(rows.end(), extra.begin(), extra.end());
    std::sort(rows.begin(), rows.end());
    std::ostringstream os;
    os << "------------------------ arguments ------------------------\n";
    for (const auto& [k, v] : rows) {
        std::size_t dots = k.size() < 48 ? 48 - k.size() : 1;
        os << "  " << k << " " << std::string(dots, '.') << " " << v << "\n";
    }
    os << "-------------------- end of arguments ---------------------";
    return os.str();
}

}  // namespace gpt
