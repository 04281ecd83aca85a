#include "hf/one_rank_model.hpp"

#include <filesystem>
#include <optional>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "hf/staging_dir.hpp"
#include "train/saved_run_attributes.hpp"
#include "train/run_config.hpp"

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

OneRankModel::OneRankModel(const ModelConfig& model, const DataConfig& data, const CheckpointConfig& ck) {
    Config c;
    c.model = model;
    c.data = data;
    c.data.mock_data = true;  // the trainer reads no data here
    c.parallel.tp_given = c.parallel.pp_given = c.parallel.mbs_given = true;
    c.parallel.device = DeviceKind::Cpu;
    c.training.micro_batch_size = 1;
    c.training.global_batch_size = 1;
    c.training.train_iters = 1;
    c.optimizer.lr_decay_style = LrDecayStyle::Constant;
    c.checkpoint = ck;
    c.logging.log_level = LogLevel::Warning;
    const train::RunConfig run = train::resolve_run(c, 1, 1);
    config = run.cfg;
    backend = make_backend("cpu", 0);
    trainer = std::make_unique<train::Trainer>(run, groups, *backend);
}

std::vector<float> OneRankModel::parameters() {
    std::vector<float> flat(static_cast<std::size_t>(model().layout().total_elements()));
    model().get_parameters(flat.data());
    return flat;
}

void OneRankModel::set_parameters(const std::vector<float>& flat) {
    GPT_REQUIRE(flat.size() == static_cast<std::size_t>(model().layout().total_elements()), InternalError,
                "set_parameters with ", flat.size(), " values");
    model().set_parameters(flat.data());  // fp32: also the optimizer's main parameters
}

LoadedCheckpoint load_checkpoint_one_rank(const std::string& dir, std::int64_t ckpt_step) {
    std::optional<SavedRun> saved;
    std::int64_t padded_rows = 0;
    LoadedCheckpoint out;
    ckpt::LoadRequest req(dir, ckpt_step, false);
    const ckpt::LoadResult peek = ckpt::load_checkpoint(MPI_COMM_SELF, req, [&](ckpt::CheckpointReader& r) {
        saved = train::read_saved_run(r);
        GPT_REQUIRE(saved, DataError, r.file(), " has no saved run (attributes ", kSavedRunAttribute, ", ",
                    kArgumentsTableAttribute, "): the model's shape is unknown");
        padded_rows = r.tensor_info(model::ParamLayout::word_embeddings()).shape.at(0);
    });
    GPT_REQUIRE(peek.iteration.has_value(), UsageError, "no checkpoint found in ", dir);
    out.data.vocab_file = saved->config.data.vocab_file;
    out.data.merge_file = saved->config.data.merge_file;
    out.data.tokenizer_type = saved->config.data.tokenizer_type;
    const ModelConfig m = model_config_from_saved_run(*saved, padded_rows);
    DataConfig no_files;  // the vocabulary size is known: the one-rank run reads no tokenizer
    no_files.tokenizer_type = out.data.tokenizer_type;
    CheckpointConfig ck;
    ck.load = dir;
    ck.ckpt_step = ckpt_step;
    out.model = std::make_unique<OneRankModel>(m, no_files, ck);
    // The trainer's loader: reshards any saved layout, checks the arguments, sets the fp32
    // main parameters into the (fp32) model.
    const auto loaded = out.model->trainer->load_checkpoint();
    GPT_REQUIRE(loaded.has_value(), UsageError, "no checkpoint found in ", dir);
    out.iteration = *loaded;
    out.file = peek.file;
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
        OneRankModel one(model, data, ck);
        std::vector<float> flat = one.parameters();
        fill(one.model(), flat.data());
        one.set_parameters(flat);
        one.trainer->save_checkpoint();  // iteration 0, synchronous
    }
    out.publish();
    return data;
}

}  // namespace gpt::hf
