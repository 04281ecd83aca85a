#include "hf/one_rank_model.hpp"

#include <filesystem>
#include <map>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "hf/staging_dir.hpp"
#include "train/run_config.hpp"

namespace gpt::hf {

namespace {

bool is_false(const std::string& v) { return v == "False" || v == "false" || v == "0"; }

// Architecture options of Megatron that neither Hugging Face GPT-2 nor Llama can express,
// with the values that are theirs.
struct ArchRow {
    const char* key;
    const char* value;
};

const std::vector<ArchRow>& arch_rows() {
    static const std::vector<ArchRow> rows = {
        {"squared_relu", "False"},
        {"apply_residual_connection_post_layernorm", "False"},
        {"qk_layernorm", "False"},
        {"apply_layernorm_1p", "False"},
    };
    return rows;
}

}  // namespace

ModelConfig model_config_from_table(const std::string& table, std::int64_t padded_rows, const std::string& file) {
    const auto t = ckpt::parse_arguments_table(table);
    auto get = [&](const char* k) -> const std::string& {
        const auto it = t.find(k);
        GPT_REQUIRE(it != t.end(), DataError, file, ": its arguments table lacks ", k);
        return it->second;
    };
    auto get_int = [&](const char* k) {
        try {
            return std::stoll(get(k));
        } catch (const std::logic_error&) {
            GPT_THROW(DataError, file, ": argument ", k, " is '", get(k), "', not an integer");
        }
    };
    for (const ArchRow& a : arch_rows()) {
        const auto it = t.find(a.key);
        GPT_REQUIRE(it == t.end() || is_false(it->second), UsageError, file, ": --", a.key, " is ", it->second,
                    ", which neither Hugging Face GPT-2 nor Llama can express");
    }
    auto flag = [&](const char* k) {
        const auto it = t.find(k);
        return it != t.end() && it->second != "None" && !is_false(it->second);
    };
    auto text = [&](const char* k, const char* def) {
        const auto it = t.find(k);
        return it == t.end() || it->second == "None" ? std::string(def) : it->second;
    };
    auto number = [&](const char* k, double def) {
        const std::string v = text(k, "");
        if (v.empty()) return def;
        try {
            return std::stod(v);
        } catch (const std::logic_error&) {
            GPT_THROW(DataError, file, ": argument ", k, " is '", v, "', not a number");
        }
    };
    ModelConfig m;
    m.num_layers = static_cast<int>(get_int("num_layers"));
    m.hidden_size = static_cast<int>(get_int("hidden_size"));
    m.num_attention_heads = static_cast<int>(get_int("num_attention_heads"));
    m.ffn_hidden_size = static_cast<int>(get_int("ffn_hidden_size"));
    m.seq_length = static_cast<int>(get_int("seq_length"));
    m.max_position_embeddings = static_cast<int>(get_int("max_position_embeddings"));
    m.vocab_size = static_cast<int>(get_int("vocab_size"));
    GPT_REQUIRE(m.vocab_size > 0, DataError, file, ": its arguments table has no vocabulary size");
    // The Llama-style options (absent in older tables: GPT-2's values).
    // A choice the table spells in a way this build does not know: the file is at fault.
    auto choice = [&]<typename E>(const char* k, E def) {
        const std::string v = text(k, std::string(to_string(def)).c_str());
        try {
            return parse_enum<E>(v, k);
        } catch (const UsageError&) {
            GPT_THROW(DataError, file, ": argument ", k, " is '", v, "', not one of ", allowed_values<E>());
        }
    };
    m.normalization = choice("normalization", Normalization::LayerNorm);
    m.position_embedding_type = flag("use_rotary_position_embeddings")
                                    ? PositionEmbeddingType::Rope
                                    : choice("position_embedding_type", PositionEmbeddingType::LearnedAbsolute);
    m.rotary_percent = number("rotary_percent", 1.0);
    m.rotary_base = number("rotary_base", 10000.0);
    m.rotary_interleaved = flag("rotary_interleaved");
    m.norm_epsilon = number("norm_epsilon", 0.0);
    m.swiglu = flag("swiglu");
    m.group_query_attention = flag("group_query_attention");
    if (m.group_query_attention) m.num_query_groups = static_cast<int>(get_int("num_query_groups"));
    m.untie_embeddings_and_output_weights = flag("untie_embeddings_and_output_weights");
    m.disable_bias_linear = flag("disable_bias_linear") || (t.count("add_bias_linear") && is_false(t.at("add_bias_linear")));
    if (const auto it = t.find("kv_channels"); it != t.end() && it->second != "None" && it->second != "0")
        GPT_REQUIRE(it->second == std::to_string(m.hidden_size / m.num_attention_heads), UsageError, file,
                    ": --kv_channels is ", it->second, ", which Hugging Face GPT-2 and Llama cannot express");
    try {
        m.layernorm_epsilon = std::stod(get("layernorm_epsilon"));
    } catch (const std::logic_error&) {
        GPT_THROW(DataError, file, ": argument layernorm_epsilon is '", get("layernorm_epsilon"), "'");
    }
    m.openai_gelu = !is_false(get("openai_gelu"));
    m.no_bias_gelu_fusion = !is_false(get("no_bias_gelu_fusion"));
    // The one-rank model pads the vocabulary to the checkpoint's rows (its TP made them).
    GPT_REQUIRE(padded_rows >= m.vocab_size, DataError, file, ": ", padded_rows,
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
    std::string table;
    std::int64_t padded_rows = 0;
    LoadedCheckpoint out;
    ckpt::LoadRequest req(dir, ckpt_step, false);
    const ckpt::LoadResult peek = ckpt::load_checkpoint(MPI_COMM_SELF, req, [&](ckpt::CheckpointReader& r) {
        GPT_REQUIRE(r.has_attribute("config"), DataError, r.file(),
                    " has no arguments table (config attribute): the model's shape is unknown");
        table = r.attribute_string("config");
        padded_rows = r.tensor_info(model::ParamLayout::word_embeddings()).shape.at(0);
    });
    GPT_REQUIRE(peek.iteration.has_value(), UsageError, "no checkpoint found in ", dir);
    const auto t = ckpt::parse_arguments_table(table);
    for (const char* k : {"vocab_file", "merge_file", "tokenizer_type"}) {
        const auto it = t.find(k);
        std::string v = it == t.end() || it->second == "None" ? std::string() : it->second;
        if (std::string(k) == "vocab_file") out.data.vocab_file = v;
        if (std::string(k) == "merge_file") out.data.merge_file = v;
        if (std::string(k) == "tokenizer_type" && !v.empty())
            out.data.tokenizer_type = parse_enum<TokenizerType>(v, "tokenizer-type");
    }
    const ModelConfig m = model_config_from_table(table, padded_rows, peek.file);
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
