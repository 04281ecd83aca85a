#include "hf/one_rank_model.hpp"

#include <filesystem>
#include <memory>
#include <optional>

#include "backend/backend.hpp"
#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "dist/process_groups.hpp"
#include "hf/staging_dir.hpp"
#include "train/state/load_model_state.hpp"
#include "train/state/saved_run_attributes.hpp"
#include "train/trainer.hpp"

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
                                    const std::function<void(const model::GptModel&, float*)>& fill) {
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
        // A trainer, for its saver: the checkpoint holds the optimizer state too.
        dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
        const std::unique_ptr<Backend> backend = make_backend("cpu", 0);
        train::Trainer trainer(one_rank_run(model, data, ck), groups, *backend);
        model::GptModel& m = trainer.chunks().chunk(0);
        std::vector<float> flat(static_cast<std::size_t>(m.layout().total_elements()));
        m.get_parameters(flat.data());
        fill(m, flat.data());
        m.set_parameters(flat.data());  // fp32: also the optimizer's main parameters
        trainer.save_checkpoint();      // iteration 0, synchronous
    }
    out.publish();
    return data;
}

}  // namespace gpt::hf
