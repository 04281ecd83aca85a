// Checks of the FP8 flags (see Fp8Config): Megatron's rules (its TransformerConfig and
// Transformer Engine's), and what this build does not implement, each refused by name.
#include <sstream>

#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt {

namespace {

constexpr const char* kFp8Need = " is not a multiple of 16, which cuBLASLt's FP8 GEMMs need on Hopper";

// "--hidden-size 1000 / --tensor-model-parallel-size 4 = 250": one rank's slice of a dimension.
std::string slice(const std::string& what, std::int64_t v, int tp) {
    std::ostringstream os;
    os << what << " / --tensor-model-parallel-size " << tp;
    if (v % tp == 0) os << " = " << v / tp;
    return os.str();
}

// The QKV projection's output rows, (a + 2g) h / a (3h without grouped-query attention).
std::int64_t qkv_width(const ModelConfig& m) {
    return std::int64_t{m.num_attention_heads + 2 * m.query_groups()} * m.head_dim();
}

void require_non_negative(int v, const char* flag) {
    GPT_REQUIRE(v >= 0, UsageError, "--", flag, " must not be negative, got ", v);
}

}  // namespace

std::string fp8_gemm_dims_problem(int hidden, int ffn, std::int64_t qkv_width, int seq_length, int tp,
                                  int micro_batch) {
    const std::int64_t m = kFp8GemmMultiple;
    const std::string h = "--hidden-size " + std::to_string(hidden), f = "--ffn-hidden-size " + std::to_string(ffn),
                      q = "the QKV projection's width " + std::to_string(qkv_width) +
                          " (--hidden-size, --num-attention-heads, --num-query-groups)";
    if (hidden % m) return h + kFp8Need;
    if (ffn % m) return f + kFp8Need;
    if (qkv_width % m) return q + kFp8Need;
    if (tp > 0) {
        // QKV and fc1 split their output rows over TP, the attention projection and fc2
        // their input columns: each rank's GEMMs see these slices.
        if (hidden % (m * tp)) return slice(h, hidden, tp) + " (the attention projection's input per rank)" + kFp8Need;
        if (ffn % (m * tp)) return slice(f, ffn, tp) + " (fc2's input per rank)" + kFp8Need;
        if (qkv_width % (m * tp)) return slice(q, qkv_width, tp) + kFp8Need;
    }
    if (micro_batch > 0) {
        const std::int64_t tokens = std::int64_t{seq_length} * micro_batch;
        if (tokens % m)
            return "--seq-length " + std::to_string(seq_length) + " x --micro-batch-size " +
                   std::to_string(micro_batch) + " = " + std::to_string(tokens) + " tokens per micro-batch" + kFp8Need;
    }
    return "";
}

std::string fp8_bf16_layers_problem(const Fp8Config& f, int num_layers, int pp) {
    if (!f.enabled() || !f.first_last_layers_bf16 || pp <= 0) return "";
    const int per_stage = num_layers / pp;
    for (const auto& [flag, n] : {std::pair{"--num-layers-at-start-in-bf16", f.num_layers_at_start_in_bf16},
                                  std::pair{"--num-layers-at-end-in-bf16", f.num_layers_at_end_in_bf16}})
        if (n > per_stage)
            return std::string(flag) + " " + std::to_string(n) + " exceeds the " + std::to_string(per_stage) +
                   " layers of a pipeline stage (--num-layers " + std::to_string(num_layers) +
                   " / --pipeline-model-parallel-size " + std::to_string(pp) + "), Megatron's bound";
    return "";
}

void validate_fp8(const Config& cfg) {
    const Fp8Config& f = cfg.fp8;
    // The recipes Megatron lists that this build does not implement: refused whether or not
    // --fp8-format is given, so a value that cannot be honoured never passes silently.
    switch (f.fp8_recipe) {
        case Fp8Recipe::Delayed:
        case Fp8Recipe::Tensorwise: break;
        case Fp8Recipe::Mxfp8:
            GPT_THROW(UsageError, "--fp8-recipe mxfp8 is not supported: MXFP8 block scaling needs Blackwell's "
                                  "tensor cores, Hopper has none. HINT: --fp8-recipe delayed or tensorwise");
        case Fp8Recipe::Blockwise:
            GPT_THROW(UsageError, "--fp8-recipe blockwise is not supported: Transformer Engine's block scaling "
                                  "(1x128 and 128x128 tiles) is not implemented. HINT: --fp8-recipe delayed or "
                                  "tensorwise");
        case Fp8Recipe::Custom:
            GPT_THROW(UsageError, "--fp8-recipe custom is not supported: it loads a Python quantizer factory "
                                  "(--fp8-quantizer-factory). HINT: --fp8-recipe delayed or tensorwise");
    }
    GPT_REQUIRE(f.fp8_amax_history_len >= 1, UsageError, "--fp8-amax-history-len must be at least 1, got ",
                f.fp8_amax_history_len);
    require_non_negative(f.fp8_margin, "fp8-margin");
    require_non_negative(f.num_layers_at_start_in_bf16, "num-layers-at-start-in-bf16");
    require_non_negative(f.num_layers_at_end_in_bf16, "num-layers-at-end-in-bf16");
    // --fp8-interval: any value, ignored (Fp8Config).
    if (!f.enabled()) return;

    // Megatron accepts fp32 with FP8 (Transformer Engine casts fp32 inputs); this build's
    // FP8 GEMMs take 16-bit activations and parameters, so it refuses it by name.
    GPT_REQUIRE(cfg.training.bf16 || cfg.training.fp16, UsageError, "--fp8-format ", f.fp8_format,
                " needs --bf16 or --fp16: the FP8 GEMMs cast 16-bit activations and parameters (fp32 with FP8, "
                "which Megatron runs through Transformer Engine, is not implemented)");
    if (f.first_last_layers_bf16) {
        // Megatron: entering and leaving the FP8 region per layer breaks delayed scaling's
        // amax reduction.
        GPT_REQUIRE(f.fp8_recipe != Fp8Recipe::Delayed, UsageError,
                    "--first-last-layers-bf16 does not work with --fp8-recipe delayed (delayed scaling's amax "
                    "reduction cannot leave layers out; Megatron refuses it too). HINT: --fp8-recipe tensorwise");
        const int layers = cfg.model.num_layers;
        GPT_REQUIRE(f.num_layers_at_start_in_bf16 + f.num_layers_at_end_in_bf16 <= layers, UsageError,
                    "--num-layers-at-start-in-bf16 ", f.num_layers_at_start_in_bf16, " + --num-layers-at-end-in-bf16 ",
                    f.num_layers_at_end_in_bf16, " = ",
                    f.num_layers_at_start_in_bf16 + f.num_layers_at_end_in_bf16, " exceeds --num-layers ", layers);
    }
    const ModelConfig& m = cfg.model;
    const std::string dims = fp8_gemm_dims_problem(m.hidden_size, m.ffn(), qkv_width(m), m.seq_length, 0, 0);
    GPT_REQUIRE(dims.empty(), UsageError, "--fp8-format ", f.fp8_format, ": ", dims);
}

void validate_fp8_layout(const Config& cfg) {
    const Fp8Config& f = cfg.fp8;
    if (!f.enabled()) return;
    const ModelConfig& m = cfg.model;
    const std::string dims = fp8_gemm_dims_problem(m.hidden_size, m.ffn(), qkv_width(m), m.seq_length,
                                                   cfg.parallel.tensor_model_parallel_size,
                                                   cfg.training.micro_batch_size);
    GPT_REQUIRE(dims.empty(), UsageError, "--fp8-format ", f.fp8_format, ": ", dims);
    const std::string layers = fp8_bf16_layers_problem(f, m.num_layers, cfg.parallel.pipeline_model_parallel_size);
    GPT_REQUIRE(layers.empty(), UsageError, layers);
}

}  // namespace gpt
