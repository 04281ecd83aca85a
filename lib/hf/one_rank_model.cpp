#include "hf/one_rank_model.hpp"

#include <map>

#include "ckpt/checkpoint.hpp"
#include "core/errors.hpp"
#include "train/run_config.hpp"

namespace gpt::hf {

namespace {

bool is_false(const std::string& v) { return v == "False" || v == "false" || v == "0"; }

// Architecture options of Megatron (and of later builds of ours) that GPT-2 cannot express:
// the row and the values that are GPT-2's. A table without the row is GPT-2's.
struct ArchRow {
    const char* key;
    std::vector<std::string> gpt2_values;
};

const std::vector<ArchRow>& arch_rows() {
    static const std::vector<ArchRow> rows = {
        {"normalization", {"LayerNorm"}},
        {"position_embedding_type", {"learned_absolute"}},
        {"use_rotary_position_embeddings", {"False"}},
        {"swiglu", {"False"}},
        {"squared_relu", {"False"}},
        {"group_query_attention", {"False"}},
        {"untie_embeddings_and_output_weights", {"False"}},
        {"add_bias_linear", {"True"}},
        {"disable_bias_linear", {"False"}},
        {"apply_residual_connection_post_layernorm", {"False"}},
        {"qk_layernorm", {"False"}},
        {"apply_layernorm_1p", {"False"}},
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
        if (it == t.end()) continue;
        bool ok = false;
        for (const auto& v : a.gpt2_values) ok |= it->second == v || (v == "False" && is_false(it->second));
        GPT_REQUIRE(ok, UsageError, file, ": --", a.key, " is ", it->second,
                    ", which Hugging Face GPT-2 cannot express");
    }
    ModelConfig m;
    m.num_layers = static_cast<int>(get_int("num_layers"));
    m.hidden_size = static_cast<int>(get_int("hidden_size"));
    m.num_attention_heads = static_cast<int>(get_int("num_attention_heads"));
    m.ffn_hidden_size = static_cast<int>(get_int("ffn_hidden_size"));
    m.seq_length = static_cast<int>(get_int("seq_length"));
    m.max_position_embeddings = static_cast<int>(get_int("max_position_embeddings"));
    m.vocab_size = static_cast<int>(get_int("vocab_size"));
    GPT_REQUIRE(m.vocab_size > 0, DataError, file, ": its arguments table has no vocabulary size");
    // --num-query-groups only counts with --group-query-attention, which the rows above refuse.
    if (const auto it = t.find("kv_channels"); it != t.end() && it->second != "None" && it->second != "0")
        GPT_REQUIRE(it->second == std::to_string(m.hidden_size / m.num_attention_heads), UsageError, file,
                    ": --kv_channels is ", it->second, ", which Hugging Face GPT-2 cannot express");
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
    c.parallel.device = "cpu";
    c.training.micro_batch_size = 1;
    c.training.global_batch_size = 1;
    c.training.train_iters = 1;
    c.optimizer.lr_decay_style = "constant";
    c.checkpoint = ck;
    c.logging.log_level = "warning";
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
        if (std::string(k) == "tokenizer_type" && !v.empty()) out.data.tokenizer_type = v;
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

}  // namespace gpt::hf
