#include "hf/convert.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include "backend/backend.hpp"
#include "core/errors.hpp"
#include "core/fd_write.hpp"
#include "dist/process_groups.hpp"
#include "hf/folder_io.hpp"
#include "hf/gpt2_mapping.hpp"
#include "hf/hf_config.hpp"
#include "hf/llama_config.hpp"
#include "hf/llama_convert.hpp"
#include "hf/one_rank_model.hpp"
#include "hf/safetensors.hpp"
#include "hf/staging_dir.hpp"
#include "inference/kv_model.hpp"
#include "model/gpt_model.hpp"

namespace gpt::hf {

namespace fs = std::filesystem;

namespace {

Gpt2Config gpt2_config_of(const ModelConfig& m) {
    Gpt2Config c;
    c.n_layer = m.num_layers;
    c.n_embd = m.hidden_size;
    c.n_head = m.num_attention_heads;
    c.n_inner = m.ffn();
    c.n_positions = m.max_position_embeddings > 0 ? m.max_position_embeddings : m.seq_length;
    c.vocab_size = m.vocab_size;
    c.layer_norm_epsilon = m.layernorm_epsilon;
    c.tanh_gelu = m.tanh_gelu();
    return c;
}

// The inverse of gpt2_config_of: the flags of the same model.
ModelConfig model_config_of(const Gpt2Config& c) {
    ModelConfig m;
    m.num_layers = c.n_layer;
    m.hidden_size = c.n_embd;
    m.num_attention_heads = c.n_head;
    m.ffn_hidden_size = c.n_inner;
    m.seq_length = c.n_positions;
    m.max_position_embeddings = c.n_positions;
    m.vocab_size = static_cast<int>(c.vocab_size);
    m.layernorm_epsilon = c.layer_norm_epsilon;
    // gelu_new is Megatron's default (the bias-GELU fusion's tanh); erf needs the fusion off.
    m.openai_gelu = false;
    m.no_bias_gelu_fusion = !c.tanh_gelu;
    return m;
}

}  // namespace

std::string export_to_hf(const ExportOptions& o) {
    GPT_REQUIRE(!o.output.empty(), UsageError, "--output is required with --to hf");
    StagingDir out(o.output);  // refuses an existing folder before the work
    const LoadedCheckpoint ck = load_checkpoint_one_rank(o.load, o.ckpt_step);
    const ModelConfig& m = ck.model();
    if (hf_architecture(m, ck.file) == HfArchitecture::Llama) return export_llama(o, ck, out);
    const Gpt2Config hc = gpt2_config_of(m);
    GPT_REQUIRE(m.seq_length <= hc.n_positions, UsageError, "checkpoint seq-length ", m.seq_length,
                " exceeds its max-position-embeddings ", hc.n_positions);
    // Tokenizer files: the run's GPT-2 BPE files, or the ones given here.
    const std::string vocab = o.vocab_file.empty() ? ck.data.vocab_file : o.vocab_file;
    const std::string merges = o.merge_file.empty() ? ck.data.merge_file : o.merge_file;
    const bool bpe = ck.data.tokenizer_type == TokenizerType::GPT2BPETokenizer;
    GPT_REQUIRE(bpe, UsageError, ck.file, " was trained with --tokenizer-type ", to_string(ck.data.tokenizer_type),
                ": only the GPT-2 BPE tokenizer converts to a Hugging Face GPT-2 folder");
    const bool with_tokenizer = !vocab.empty() && !merges.empty();
    if (with_tokenizer)
        for (const std::string& f : {vocab, merges})
            GPT_REQUIRE(fs::exists(f), UsageError, "tokenizer file ", f, " (from ", ck.file,
                        ") does not exist here. HINT: give --vocab-file and --merge-file");
    write_model_file(out, megatron_to_hf(ck.dims, ck.layout(), ck.params.data(), m.vocab_size));
    out.write_file("config.json", config_json(hc));
    out.write_file("generation_config.json", generation_config_json(hc));
    if (with_tokenizer) {
        out.copy_file(vocab, "vocab.json");
        out.copy_file(merges, "merges.txt");
        out.write_file("tokenizer_config.json", tokenizer_config_json(hc));
    }
    out.publish();
    std::ostringstream os;
    os << "wrote Hugging Face GPT-2 (" << hc.n_layer << " layers, hidden " << hc.n_embd << ", " << hc.n_head
       << " heads, vocabulary " << hc.vocab_size << ", fp32) from " << ck.file << " (iteration " << ck.iteration
       << ") to " << o.output << (with_tokenizer ? "" : "; no tokenizer files (the run named none)");
    return os.str();
}

std::string import_from_hf(const ImportOptions& o) {
    GPT_REQUIRE(!o.load_hf.empty() && !o.save.empty(), UsageError, "--to megatron needs --load-hf and --save");
    const std::string config_path = o.load_hf + "/config.json";
    const std::string config_text = read_text(config_path);
    if (config_model_type(config_text, config_path) == "llama") return import_llama(o, config_text, config_path);
    const Gpt2Config hc = parse_config_json(config_text, config_path);
    const SafetensorsFile weights(o.load_hf + "/model.safetensors");
    const DataConfig data = save_imported_checkpoint(o.load_hf, o.save, model_config_of(hc), [&](const model::ModelDims& d, const model::ParamLayout& layout, float* flat) {
        hf_to_megatron(weights, d, layout, hc.vocab_size, flat);
    });
    std::ostringstream os;
    os << "wrote checkpoint at iteration 0 to " << o.save << " from " << o.load_hf
       << ". Continue training with: --load " << o.save << " --finetune --num-layers " << hc.n_layer
       << " --hidden-size " << hc.n_embd << " --num-attention-heads " << hc.n_head << " --ffn-hidden-size "
       << hc.n_inner << " --max-position-embeddings " << hc.n_positions << " --seq-length " << hc.n_positions
       << (hc.tanh_gelu ? "" : " --no-bias-gelu-fusion") << " --layernorm-epsilon "
       << hc.layer_norm_epsilon;
    if (!data.vocab_file.empty()) os << " --vocab-file " << data.vocab_file << " --merge-file " << data.merge_file;
    return os.str();
}

namespace {

// The loaded model's forward on one fp32 CPU rank (no optimizer: nothing trains here).
struct OneRankForward {
    explicit OneRankForward(const LoadedCheckpoint& ck) : options(ck.run.model_options) {}
    dist::ProcessGroups groups{MPI_COMM_SELF, 1, 1};
    std::unique_ptr<Backend> backend = make_backend("cpu", 0);
    model::ModelOptions options;
};

// The logits of the KV-cached generation path (lib/inference): a prompt pass over the first
// half of the tokens, then one cached step per token, so the rows after the first half come
// from rotary embeddings at cached positions and keys read from the cache.
std::vector<float> cached_logits(const LoadedCheckpoint& ck, OneRankForward& one,
                                 const std::vector<std::int32_t>& tokens) {
    inference::KvModel kv(ck.dims, one.options, *one.backend, one.groups.tp(), ck.params);
    const int n = static_cast<int>(tokens.size()), prompt = (n + 1) / 2;
    kv.start(1, n);
    std::vector<float> rows = kv.forward(tokens.data(), prompt, true);
    for (int i = prompt; i < n; ++i) {
        const std::vector<float> step = kv.forward(tokens.data() + i, 1);
        rows.insert(rows.end(), step.begin(), step.end());
    }
    return rows;
}

}  // namespace

void dump_logits(const std::string& load, std::int64_t ckpt_step, const std::vector<std::int32_t>& tokens,
                 const std::string& output, bool kv_cache) {
    const LoadedCheckpoint ck = load_checkpoint_one_rank(load, ckpt_step);
    const int seq = ck.dims.seq;
    const std::int64_t vocab = ck.model().vocab_size, padded = ck.dims.vocab_padded;
    GPT_REQUIRE(!tokens.empty() && static_cast<int>(tokens.size()) <= seq, UsageError, "--tokens gives ",
                tokens.size(), " tokens; the model takes 1 to ", seq);
    for (std::int32_t t : tokens)
        GPT_REQUIRE(t >= 0 && t < vocab, UsageError, "token ", t, " outside the vocabulary of ", vocab);
    OneRankForward one(ck);
    std::vector<float> cached;
    std::unique_ptr<model::GptModel> m;  // the training forward's model, alive while logits is read
    const float* logits = nullptr;       // fp32 (rows >= tokens, padded)
    if (kv_cache) {
        cached = cached_logits(ck, one, tokens);
        logits = cached.data();
    } else {
        m = std::make_unique<model::GptModel>(ck.dims, model::ChunkSpec{0, ck.dims.num_layers, true, true},
                                              one.options, 1, *one.backend, one.groups.tp());
        m->set_parameters(ck.params.data());
        // Causal attention: positions past the given tokens (filled with token 0) do not reach
        // the given positions' logits. The targets (the input shifted) only feed the loss.
        std::vector<std::int32_t> batch(static_cast<std::size_t>(seq) + 1, 0);
        std::copy(tokens.begin(), tokens.end(), batch.begin());
        m->set_batch(0, batch.data());
        m->forward(0, false, 0);
        logits = static_cast<const float*>(m->logits());  // fp32 model: (seq, padded)
    }
    std::vector<float> out;
    out.reserve(tokens.size() * static_cast<std::size_t>(vocab));
    for (std::size_t i = 0; i < tokens.size(); ++i)
        out.insert(out.end(), logits + i * padded, logits + i * padded + vocab);
    const std::string tmp = output + ".tmp." + std::to_string(::getpid());
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    GPT_REQUIRE(fd >= 0, IoError, "cannot create ", tmp, ": ", std::strerror(errno));
    const int err = write_fully(fd, out.data(), out.size() * sizeof(float));
    ::close(fd);
    if (err != 0) ::unlink(tmp.c_str());
    GPT_REQUIRE(err == 0, IoError, "cannot write ", tmp, ": ", std::strerror(err));
    GPT_REQUIRE(::rename(tmp.c_str(), output.c_str()) == 0, IoError, "cannot rename ", tmp, " to ", output, ": ",
                std::strerror(errno));
}

}  // namespace gpt::hf
