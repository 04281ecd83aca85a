#include "hf/one_rank_model.hpp"

#include <filesystem>
#include <memory>
#include <optional>
#include <span>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_saver.hpp"
#include "core/errors.hpp"
#include "hf/staging_dir.hpp"
#include "model/param_init.hpp"
#include "train/state/load_model_state.hpp"
#include "train/state/saved_run_attributes.hpp"
#include "train/state/save_model_state.hpp"
#include "train/state/training_state.hpp"

namespace gpt::hf {

ModelConfig model_config_from_saved_run(const SavedRun& saved, std::int64_t padded_rows) {
    // The rows every build has written; the Llama-style options are absent from older
    // tables, whose defaults are GPT-2's.
    for (const char* k : {"num_layers", "hidden_size", "num_attention_heads", "ffn_hidden_size", "seq_length",
                          "max_position_embeddings", "vocab_size", "layernorm_epsilon", "openai_gelu",
                          "no_bias_gelu_fusion"})
        GPT_REQUIRE(saved.has(k), DataError, saved.file, ": its saved run lacks ", k);
    ModelConfig m = saved.config.model;
    GPT_REQUIRE(!m.group_query_attention || saved.has("num_query_groups"), DataError, saved.file,
                ": its saved run lacks num_query_groups");
    GPT_REQUIRE(m.vocab_size > 0, DataError, saved.file, ": its saved run has no vocabulary size");
    // The one-rank model pads the vocabulary to the checkpoint's rows (its TP made them).
    GPT_REQUIRE(padded_rows >= m.vocab_size, DataError, saved.file, ": ", padded_rows,
                " embedding rows for a vocabulary of ", m.vocab_size);
    m.make_vocab_size_divisible_by = static_cast<int>(padded_rows);
    m.hidden_dropout = m.attention_dropout = 0.0;
    return m;
}

train::RunConfig one_rank_run(const ModelConfig& model, const DataConfig& data, const CheckpointConfig& ck) {
    Config c;
    c.model = model;
    c.data = data;
    c.data.mock_data = true;  // the one-rank run reads no data
    c.parallel.tp_given = c.parallel.pp_given = c.parallel.mbs_given = true;
    c.parallel.device = DeviceKind::Cpu;
    c.training.micro_batch_size = 1;
    c.training.global_batch_size = 1;
    c.training.train_iters = 1;
    c.optimizer.lr_decay_style = LrDecayStyle::Constant;
    c.checkpoint = ck;
    c.logging.log_level = LogLevel::Warning;
    return train::resolve_run(c, 1, 1);
}

model::ParamLayout LoadedCheckpoint::layout() const {
    return model::ParamLayout(dims, model::ChunkSpec{0, dims.num_layers, true, true});
}

LoadedCheckpoint load_checkpoint_one_rank(const std::string& dir, std::int64_t ckpt_step) {
    LoadedCheckpoint out;
    ckpt::LoadRequest req(dir, ckpt_step, false);
    const ckpt::LoadResult res = ckpt::load_checkpoint(MPI_COMM_SELF, req, [&](ckpt::CheckpointReader& r) {
        const std::optional<SavedRun> saved = train::read_saved_run(r);
        GPT_REQUIRE(saved, DataError, r.file(), " has no saved run (attributes ", kSavedRunAttribute, ", ",
                    kArgumentsTableAttribute, "): the model's shape is unknown");
        out.data.vocab_file = saved->config.data.vocab_file;
        out.data.merge_file = saved->config.data.merge_file;
        out.data.tokenizer_type = saved->config.data.tokenizer_type;
        DataConfig no_files;  // the vocabulary size is known: the one-rank run reads no tokenizer
        no_files.tokenizer_type = out.data.tokenizer_type;
        // The model padded to the checkpoint's rows (its TP made them), as one fp32 rank.
        out.run = one_rank_run(model_config_from_saved_run(*saved, train::stored_vocab_rows(r)), no_files);
        out.dims = model::make_model_dims(out.model(), out.model().vocab_size, 1, 0);
        out.params = train::load_model_state(r, out.layout());
        out.iteration = r.iteration();
        out.file = r.file();
    });
    GPT_REQUIRE(res.iteration.has_value(), UsageError, "no checkpoint found in ", dir);
    return out;
}

HfArchitecture hf_architecture(const ModelConfig& m, const std::string& file) {
    GPT_REQUIRE(!m.squared_relu, UsageError, file, ": the MLP is squared ReLU (--squared-relu), which neither "
                "Hugging Face GPT-2 (GPT2LMHeadModel) nor Llama (LlamaForCausalLM) can express");
    GPT_REQUIRE(!m.qk_layernorm, UsageError, file, ": the queries and keys are normalised (--qk-layernorm), "
                "which neither Hugging Face GPT-2 (GPT2LMHeadModel) nor Llama (LlamaForCausalLM) can express");
    GPT_REQUIRE(!m.apply_layernorm_1p, UsageError, file, ": the norms scale by 1 + weight (--apply-layernorm-1p), "
                "which neither Hugging Face GPT-2 (GPT2LMHeadModel) nor Llama (LlamaForCausalLM) can express");
    const bool gpt2 = !m.rope() && !m.rmsnorm() && !m.swiglu && !m.group_query_attention &&
                      !m.untie_embeddings_and_output_weights && !m.disable_bias_linear;
    if (gpt2) return HfArchitecture::Gpt2;
    // Not GPT-2: every option Llama needs, the first one missing named.
    auto need = [&](bool ok, const char* what) {
        GPT_REQUIRE(ok, UsageError, file, ": a Llama-style model (it has rope, RMSNorm, SwiGLU, grouped-query attention, "
                    "an untied output layer or no linear biases) but ", what,
                    ", which Hugging Face Llama (LlamaForCausalLM) cannot express");
    };
    need(m.rmsnorm(), "--normalization is LayerNorm");
    need(m.rope(), "--position-embedding-type is learned_absolute");
    need(m.rotary_percent == 1.0, "--rotary-percent is below 1 (partial rotary)");
    need(m.swiglu, "the MLP is GELU (no --swiglu)");
    need(m.disable_bias_linear, "the linear layers have biases (no --disable-bias-linear)");
    return HfArchitecture::Llama;
}

DataConfig save_imported_checkpoint(const std::string& load_hf, const std::string& save, const ModelConfig& model,
                                    const ImportFill& fill) {
    namespace fs = std::filesystem;
    StagingDir out(save);
    DataConfig data;
    const std::string vocab = load_hf + "/vocab.json", merges = load_hf + "/merges.txt";
    if (fs::exists(vocab) && fs::exists(merges)) {
        data.vocab_file = fs::absolute(vocab).lexically_normal().string();
        data.merge_file = fs::absolute(merges).lexically_normal().string();
    }
    CheckpointConfig ck;
    ck.save = out.path();
    {
        const train::RunConfig run = one_rank_run(model, data, ck);
        const model::ModelDims dims = model::make_model_dims(run.cfg.model, run.cfg.model.vocab_size, 1, 0);
        const model::ParamLayout layout(dims, model::ChunkSpec{0, dims.num_layers, true, true});
        // A fresh run's parameters (its initialisation wherever fill writes nothing, the
        // alignment padding zero), then the imported ones.
        std::vector<float> params(static_cast<std::size_t>(layout.total_elements()));
        model::init_parameters(layout, dims, run.model_options.init_std, run.model_options.seed, params.data());
        fill(dims, layout, params.data());
        // What a fresh fp32 run saves: the parameters are also the optimizer's main
        // parameters, Adam's moments are zero (both read only: one zero buffer serves both),
        // the training state is at its start (iteration 0, optimizer step 0).
        std::vector<float> zeros(params.size(), 0.0f);
        std::vector<train::ChunkHost> host(1);
        host[0].layout = &layout;
        host[0].params = std::as_writable_bytes(std::span<float>(params));
        host[0].main = params;
        host[0].exp_avg = host[0].exp_avg_sq = zeros;
        ckpt::SaverOptions o;
        o.keep_last = run.cfg.checkpoint.keep_last;
        ckpt::CheckpointSaver saver(MPI_COMM_SELF, ck.save, o);  // no log: the converter prints its own line
        ckpt::CheckpointWriter& w = saver.begin(0);
        train::save_model_state(w, train::bind_tensors(layout, {&layout}, 0, 0), host, DType::F32, {},
                                train::TrainingState(run.cfg).save(0, 1, 0), train::SavedLayout{}, run.cfg);
        saver.commit(nullptr);  // synchronous: published in the staging folder
    }
    out.publish();
    return data;
}

}  // namespace gpt::hf
