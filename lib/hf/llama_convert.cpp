#include "hf/llama_convert.hpp"

#include <filesystem>
#include <sstream>

#include "core/errors.hpp"
#include "hf/folder_io.hpp"
#include "hf/hf_config.hpp"
#include "hf/llama_config.hpp"
#include "hf/llama_mapping.hpp"
#include "hf/safetensors.hpp"

namespace gpt::hf {

namespace fs = std::filesystem;

namespace {

LlamaConfig llama_config_of(const ModelConfig& m, bool bpe) {
    LlamaConfig c;
    c.num_hidden_layers = m.num_layers;
    c.hidden_size = m.hidden_size;
    c.num_attention_heads = m.num_attention_heads;
    c.num_key_value_heads = m.query_groups();
    c.intermediate_size = m.ffn();
    c.max_position_embeddings = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length;
    c.vocab_size = m.vocab_size;
    c.rms_norm_eps = m.norm_epsilon > 0.0 ? m.norm_epsilon : m.layernorm_epsilon;
    c.rope_theta = m.rotary_base;
    c.tie_word_embeddings = !m.untie_embeddings_and_output_weights;
    if (bpe) c.bos_token_id = c.eos_token_id = 50256;  // GPT-2's <|endoftext|>
    return c;
}

// The inverse of llama_config_of: the flags of the same model.
ModelConfig model_config_of(const LlamaConfig& c) {
    ModelConfig m;
    m.num_layers = c.num_hidden_layers;
    m.hidden_size = c.hidden_size;
    m.num_attention_heads = c.num_attention_heads;
    m.group_query_attention = c.num_key_value_heads != c.num_attention_heads;
    m.num_query_groups = c.num_key_value_heads;
    m.ffn_hidden_size = c.intermediate_size;
    m.seq_length = m.max_position_embeddings = c.max_position_embeddings;
    m.vocab_size = static_cast<int>(c.vocab_size);
    m.normalization = Normalization::RMSNorm;
    m.norm_epsilon = m.layernorm_epsilon = c.rms_norm_eps;
    m.position_embedding_type = PositionEmbeddingType::Rope;
    m.rotary_base = c.rope_theta;
    m.swiglu = true;
    m.untie_embeddings_and_output_weights = !c.tie_word_embeddings;
    m.disable_bias_linear = true;
    return m;
}

// GPT-2's JSON writers know the token ids and the context length.
Gpt2Config bpe_ids(const LlamaConfig& c) {
    Gpt2Config g;
    g.n_positions = c.max_position_embeddings;
    return g;
}

}  // namespace

std::string export_llama(const ExportOptions& o, const LoadedCheckpoint& ck, StagingDir& out) {
    const ModelConfig& m = ck.model();
    const bool bpe = ck.data.tokenizer_type == TokenizerType::GPT2BPETokenizer;
    const LlamaConfig c = llama_config_of(m, bpe);
    GPT_REQUIRE(m.seq_length <= c.max_position_embeddings, UsageError, "checkpoint seq-length ", m.seq_length,
                " exceeds its max-position-embeddings ", c.max_position_embeddings);
    const std::string vocab = o.vocab_file.empty() ? ck.data.vocab_file : o.vocab_file;
    const std::string merges = o.merge_file.empty() ? ck.data.merge_file : o.merge_file;
    const bool with_tokenizer = bpe && !vocab.empty() && !merges.empty();
    if (with_tokenizer)
        for (const std::string& f : {vocab, merges})
            GPT_REQUIRE(fs::exists(f), UsageError, "tokenizer file ", f, " (from ", ck.file,
                        ") does not exist here. HINT: give --vocab-file and --merge-file");
    write_model_file(out, megatron_to_llama(ck.dims, ck.layout(), ck.params.data(), m.vocab_size));
    out.write_file("config.json", llama_config_json(c));
    if (bpe) out.write_file("generation_config.json", generation_config_json(bpe_ids(c)));
    if (with_tokenizer) {
        out.copy_file(vocab, "vocab.json");
        out.copy_file(merges, "merges.txt");
        out.write_file("tokenizer_config.json", tokenizer_config_json(bpe_ids(c)));
    }
    out.publish();
    std::ostringstream os;
    os << "wrote Hugging Face Llama (" << c.num_hidden_layers << " layers, hidden " << c.hidden_size << ", "
       << c.num_attention_heads << " heads, " << c.num_key_value_heads << " key/value heads, vocabulary "
       << c.vocab_size << ", fp32" << (m.rotary_interleaved ? ", q/k rows permuted from --rotary-interleaved" : "")
       << ") from " << ck.file << " (iteration " << ck.iteration << ") to " << o.output;
    if (!with_tokenizer)
        os << "; no tokenizer files ("
           << (bpe ? std::string("the run named none") : "--tokenizer-type " + std::string(to_string(ck.data.tokenizer_type)) + " is not exported")
           << ")";
    return os.str();
}

std::string import_llama(const ImportOptions& o, const std::string& text, const std::string& config_path) {
    const LlamaConfig c = parse_llama_config_json(text, config_path);
    const SafetensorsFile weights(o.load_hf + "/model.safetensors");
    const DataConfig data = save_imported_checkpoint(o.load_hf, o.save, model_config_of(c), [&](const model::ModelDims& d, const model::ParamLayout& layout, float* flat) {
        llama_to_megatron(weights, d, layout, c.vocab_size, flat);
    });
    std::ostringstream os;
    os << "wrote checkpoint at iteration 0 to " << o.save << " from " << o.load_hf
       << ". Continue training with: --load " << o.save << " --finetune --num-layers " << c.num_hidden_layers
       << " --hidden-size " << c.hidden_size << " --num-attention-heads " << c.num_attention_heads;
    if (c.num_key_value_heads != c.num_attention_heads)
        os << " --group-query-attention --num-query-groups " << c.num_key_value_heads;
    os << " --ffn-hidden-size " << c.intermediate_size << " --max-position-embeddings " << c.max_position_embeddings
       << " --seq-length " << c.max_position_embeddings << " --position-embedding-type rope --rotary-base "
       << c.rope_theta << " --normalization RMSNorm --norm-epsilon " << c.rms_norm_eps
       << " --swiglu --disable-bias-linear" << (c.tie_word_embeddings ? "" : " --untie-embeddings-and-output-weights");
    if (!data.vocab_file.empty()) os << " --vocab-file " << data.vocab_file << " --merge-file " << data.merge_file;
    return os.str();
}

}  // namespace gpt::hf
