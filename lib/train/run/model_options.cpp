#include "train/run/model_options.hpp"

#include "config/params_dtype.hpp"
#include "core/environment.hpp"

namespace gpt::train {

model::ModelOptions model_options_of(const Config& cfg, DType dtype) {
    const auto& t = cfg.training;
    const auto& p = cfg.parallel;
    model::ModelOptions opt;
    opt.dtype = dtype;
    opt.flash_attention = p.use_flash_attn;
    opt.tanh_gelu = cfg.model.tanh_gelu();
    opt.hidden_dropout = static_cast<float>(cfg.model.hidden_dropout);
    opt.attention_dropout = static_cast<float>(cfg.model.attention_dropout);
    opt.layernorm_eps = static_cast<float>(cfg.model.layernorm_epsilon);
    opt.init_std = cfg.model.init_method_std;
    opt.seed = t.seed;
    opt.sequence_parallel = p.sequence_parallel;
    opt.recompute = p.recompute();
    opt.recompute_block = p.recompute_method == RecomputeMethod::Block;
    opt.recompute_num_layers = p.recompute_num_layers;
    const Fp8Config& f = cfg.fp8;
    if (f.enabled()) {
        opt.fp8.on = true;
        opt.fp8.forward = f.forward_format();
        opt.fp8.gradient = f.gradient_format();
        opt.fp8.delayed = f.fp8_recipe == Fp8Recipe::Delayed;
        opt.fp8.amax_history_len = f.fp8_amax_history_len;
        opt.fp8.amax_compute_algo = f.fp8_amax_compute_algo;
        opt.fp8.margin = f.fp8_margin;
        opt.fp8.wgrad = f.fp8_wgrad;
        opt.fp8.bf16_layers_at_start = f.bf16_layers_at_start();
        opt.fp8.bf16_layers_at_end = f.bf16_layers_at_end();
        opt.fp8.fused_input_cast = !env::fp8_input_cast_separate();
        opt.fp8.gelu_in_epilogue = env::fp8_gelu_epilogue();
        opt.fp8.fused_bias_grad = !env::fp8_bias_grad_separate();
    }
    return opt;
}

model::ModelOptions generation_model_options(const Config& cfg) {
    model::ModelOptions opt = model_options_of(cfg, params_dtype(cfg.training));
    opt.hidden_dropout = 0.0f;
    opt.attention_dropout = 0.0f;
    opt.fp8 = model::Fp8Options{};
    opt.sequence_parallel = false;
    opt.recompute = model::ModelOptions::Recompute::None;
    opt.recompute_block = false;
    opt.recompute_num_layers = 0;
    return opt;
}

}  // namespace gpt::train
