#include "inference/kv_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "model/linear.hpp"
#include "model/tp_mappings.hpp"
#include "model/transformer_layer.hpp"

namespace gpt::inference {

namespace {

// Scratch buffers, by role; each grows to the largest pass seen.
enum Scratch { kTokens, kX, kMid, kLn, kCtx, kTmp, kAux, kGelu, kMean, kRstd, kSaved, kScores, kProbs,
               kTargets, kOnes, kMax, kSum, kTarget, kLogits, kLogits32, kGathered, kNumScratch };

constexpr std::size_t kF = sizeof(float);

}  // namespace

KvModel::KvModel(const model::ModelDims& dims, const model::ModelOptions& opt, Backend& be,
                 dist::Communicator& tp, const std::vector<float>& host_params)
    : dims_(dims), opt_(opt), be_(be), tp_(tp),
      layout_(dims, model::ChunkSpec{0, dims.num_layers, true, true}) {
    // The cached forward is written for the GPT-2 layer; running a Llama-style model through it
    // would silently compute another function, so those options are refused by name.
    const char* unsupported = dims.rope                           ? "--position-embedding-type rope"
                              : dims.rmsnorm                      ? "--normalization RMSNorm"
                              : dims.swiglu                       ? "--swiglu"
                              : dims.groups() != dims.heads       ? "--group-query-attention"
                              : dims.untied_output                ? "--untie-embeddings-and-output-weights"
                              : !dims.linear_bias                 ? "--disable-bias-linear"
                                                                  : nullptr;
    GPT_REQUIRE(unsupported == nullptr, UsageError, "generation (gpt_generate, --sample-interval) does not run ",
                unsupported, " models yet: it implements the GPT-2 layer only");
    GPT_REQUIRE(static_cast<std::int64_t>(host_params.size()) == layout_.total_elements(), InternalError,
                "KvModel: ", host_params.size(), " parameters given, the layout has ", layout_.total_elements());
    for (int l = 0; l < dims.num_layers; ++l) layers_.push_back(model::layer_offsets(layout_, l));
    const auto n = static_cast<std::size_t>(layout_.total_elements());
    params_ = be_.alloc(n * dtype_size(opt.dtype));
    void* staged = be_.alloc(n * kF);
    be_.copy_to_device(staged, host_params.data(), n * kF);
    be_.cast(staged, DType::F32, params_, opt.dtype, static_cast<std::int64_t>(n));
    be_.synchronize();
    be_.free(staged);
    scratch_.assign(kNumScratch, {nullptr, 0});
}

KvModel::~KvModel() {
    for (void* c : cache_) be_.free(c);
    for (auto& [p, n] : scratch_)
        if (p) be_.free(p);
    be_.free(params_);
}

void* KvModel::buf(int id, std::size_t bytes) {
    auto& [p, n] = scratch_[static_cast<std::size_t>(id)];
    if (n < bytes) {
        if (p) be_.free(p);
        p = be_.alloc(bytes);
        n = bytes;
    }
    return p;
}

void* KvModel::param(std::int64_t off) const {
    return static_cast<std::byte*>(params_) + off * static_cast<std::int64_t>(dtype_size(opt_.dtype));
}

void KvModel::start(int batch, int max_len) {
    GPT_REQUIRE(batch > 0 && max_len > 0, InternalError, "KvModel::start(", batch, ", ", max_len, ")");
    GPT_REQUIRE(max_len <= dims_.max_positions, UsageError, "a sequence of ", max_len,
                " tokens is longer than the model's --max-position-embeddings ", dims_.max_positions);
    const std::size_t bytes = static_cast<std::size_t>(max_len) * batch * dims_.local_qkv() * dtype_size(opt_.dtype);
    if (batch != batch_ || max_len != max_len_) {
        for (void* c : cache_) be_.free(c);
        cache_.clear();
        for (int l = 0; l < dims_.num_layers; ++l) cache_.push_back(be_.alloc(bytes));
    }
    batch_ = batch;
    max_len_ = max_len;
    pos_ = 0;
}

// One query per sequence and head at position pos_ against the cached keys [0, pos_]:
// batched over (sequence, head), whose q, K and V sit at a fixed stride in the cache.
void KvModel::attention_step(int /*layer*/, void* cache, void* ctx) {
    const DType t = opt_.dtype;
    const std::int64_t np = dims_.local_heads(), hn = dims_.head_dim, B = batch_;
    const std::int64_t heads = B * np, L = pos_ + 1;
    const std::int64_t row = B * np * 3 * hn;  // elements per cached position
    const std::size_t es = dtype_size(t);
    auto at = [&](std::int64_t elements) { return static_cast<std::byte*>(cache) + elements * static_cast<std::int64_t>(es); };
    auto* scores = static_cast<float*>(buf(kScores, static_cast<std::size_t>(heads * L) * kF));
    GemmArgs s;
    s.trans_b = true;
    s.m = 1, s.n = L, s.k = hn;
    s.a = at(pos_ * row), s.lda = hn, s.stride_a = 3 * hn;      // q of the new position
    s.b = at(hn), s.ldb = row, s.stride_b = 3 * hn;             // K of positions [0, L)
    s.c = scores, s.ldc = L, s.stride_c = L;
    s.alpha = 1.0f / std::sqrt(static_cast<float>(hn));        // Megatron's 1/sqrt(hn)
    s.dtype = t, s.c_dtype = DType::F32, s.batch = heads;
    be_.gemm(s);
    // softmax(x) = d/dx of the cross-entropy against no target: the backend's softmax over
    // rows, in fp32, with the training loss's own max-subtracted exponentials.
    auto* targets = static_cast<std::int32_t*>(buf(kTargets, static_cast<std::size_t>(heads) * 4));
    auto* ones = static_cast<float*>(buf(kOnes, static_cast<std::size_t>(heads) * kF));
    auto* mx = static_cast<float*>(buf(kMax, static_cast<std::size_t>(heads) * kF));
    auto* se = static_cast<float*>(buf(kSum, static_cast<std::size_t>(heads) * kF));
    auto* tl = static_cast<float*>(buf(kTarget, static_cast<std::size_t>(heads) * kF));
    {
        const std::vector<std::int32_t> none(static_cast<std::size_t>(heads), -1);
        const std::vector<float> one(static_cast<std::size_t>(heads), 1.0f);
        be_.copy_to_device(targets, none.data(), none.size() * 4);
        be_.copy_to_device(ones, one.data(), one.size() * kF);
    }
    be_.cross_entropy_stats(scores, targets, mx, se, tl, heads, L, 0, DType::F32);
    be_.cross_entropy_backward(scores, targets, mx, se, ones, scores, heads, L, 0, DType::F32);
    const void* probs = scores;
    if (t != DType::F32) {
        void* p = buf(kProbs, static_cast<std::size_t>(heads * L) * es);
        be_.cast(scores, DType::F32, p, t, heads * L);
        probs = p;
    }
    GemmArgs o;
    o.m = 1, o.n = hn, o.k = L;
    o.a = probs, o.lda = L, o.stride_a = L;
    o.b = at(2 * hn), o.ldb = row, o.stride_b = 3 * hn;  // V of positions [0, L)
    o.c = ctx, o.ldc = hn, o.stride_c = hn;               // ctx [1, b, np, hn]
    o.dtype = t, o.c_dtype = t, o.batch = heads;
    be_.gemm(o);
}

std::vector<float> KvModel::forward(const std::int32_t* tokens, int n, bool all_positions) {
    GPT_REQUIRE(batch_ > 0, InternalError, "KvModel::forward before start()");
    GPT_REQUIRE(n >= 1 && (pos_ == 0 || n == 1), InternalError, "KvModel::forward: ", n,
                " tokens at position ", pos_, " (only the first pass takes several)");
    GPT_REQUIRE(pos_ + n <= max_len_, InternalError, "KvModel::forward past the cache's ", max_len_, " positions");
    const DType t = opt_.dtype;
    const std::size_t es = dtype_size(t);
    const model::ModelDims& d = dims_;
    const std::int64_t B = batch_, T = static_cast<std::int64_t>(n) * B, h = d.hidden;
    auto* tok = static_cast<std::int32_t*>(buf(kTokens, static_cast<std::size_t>(T) * 4));
    be_.copy_to_device(tok, tokens, static_cast<std::size_t>(T) * 4);
    void* x = buf(kX, static_cast<std::size_t>(T * h) * es);
    void* mid = buf(kMid, static_cast<std::size_t>(T * h) * es);
    void* ln = buf(kLn, static_cast<std::size_t>(T * h) * es);
    void* ctx = buf(kCtx, static_cast<std::size_t>(T * d.local_hidden()) * es);
    void* tmp = buf(kTmp, static_cast<std::size_t>(T * h) * es);
    void* aux = buf(kAux, static_cast<std::size_t>(T * d.local_ffn()) * es);
    void* gelu = buf(kGelu, static_cast<std::size_t>(T * d.local_ffn()) * es);
    auto* mean = static_cast<float*>(buf(kMean, static_cast<std::size_t>(T) * kF));
    auto* rstd = static_cast<float*>(buf(kRstd, static_cast<std::size_t>(T) * kF));

    // Embedding (model/embedding_head.cpp without dropout): vocab-parallel rows, summed.
    const model::ParamEntry& word = layout_.at(model::ParamLayout::word_embeddings());
    const model::ParamEntry& position = layout_.at(model::ParamLayout::position_embeddings());
    be_.embedding_forward(tok, param(word.offset), x, B, n, h, d.vocab_start(), d.vocab_start() + d.local_vocab(), t);
    model::reduce_from_tensor_model_parallel_region_forward(tp_, x, T * h, t);
    be_.position_embedding_forward(param(position.offset), x, B, n, h, pos_, t);

    AttentionArgs aa = model::attention_args(d, opt_, B);
    aa.s = n;
    aa.dropout = 0.0f;
    void* saved = pos_ == 0 ? buf(kSaved, be_.attention_saved_bytes(aa)) : nullptr;
    const float eps = opt_.layernorm_eps;
    for (int l = 0; l < d.num_layers; ++l) {
        const model::LayerParamOffsets& p = layers_[static_cast<std::size_t>(l)];
        // The layer of model/transformer_layer.cpp, dropout off, in the same op order.
        be_.layernorm_forward(x, param(p.ln1_w), param(p.ln1_b), ln, mean, rstd, T, h, eps, t);
        void* qkv = static_cast<std::byte*>(cache_[static_cast<std::size_t>(l)]) +
                    static_cast<std::int64_t>(pos_) * B * d.local_qkv() * static_cast<std::int64_t>(es);
        model::linear_forward(be_, ln, param(p.qkv_w), qkv, T, h, d.local_qkv(), t, GemmEpilogue::Bias, param(p.qkv_b));
        if (pos_ == 0)
            be_.attention_forward(aa, qkv, ctx, saved);
        else
            attention_step(l, cache_[static_cast<std::size_t>(l)], ctx);
        model::linear_forward(be_, ctx, param(p.dense_w), tmp, T, d.local_hidden(), h, t);
        model::reduce_from_tensor_model_parallel_region_forward(tp_, tmp, T * h, t);
        be_.bias_dropout_add(tmp, param(p.dense_b), x, mid, T, h, 0.0f, 0, 0, t);
        be_.layernorm_forward(mid, param(p.ln2_w), param(p.ln2_b), ln, mean, rstd, T, h, eps, t);
        model::linear_forward(be_, ln, param(p.fc1_w), gelu, T, h, d.local_ffn(), t, GemmEpilogue::BiasGelu,
                              param(p.fc1_b), aux, opt_.tanh_gelu);
        model::linear_forward(be_, gelu, param(p.fc2_w), tmp, T, d.local_ffn(), h, t);
        model::reduce_from_tensor_model_parallel_region_forward(tp_, tmp, T * h, t);
        be_.bias_dropout_add(tmp, param(p.fc2_b), mid, x, T, h, 0.0f, 0, 0, t);
    }
    pos_ += n;
    // The head over the last position's rows (the last B of the s-major activation), or all.
    const std::int64_t rows = all_positions ? T : B;
    return head(static_cast<std::byte*>(x) + (T - rows) * h * static_cast<std::int64_t>(es), rows);
}

// Final layernorm and the LM head tied to the word embeddings; the vocab shards' logits
// are gathered, so the result is (rows, padded vocab) on every TP rank.
std::vector<float> KvModel::head(const void* x, std::int64_t rows) {
    const DType t = opt_.dtype;
    const std::size_t es = dtype_size(t);
    const std::int64_t h = dims_.hidden, V = dims_.local_vocab(), tp = tp_.size();
    void* ln = buf(kLn, static_cast<std::size_t>(rows * h) * es);
    auto* mean = static_cast<float*>(buf(kMean, static_cast<std::size_t>(rows) * kF));
    auto* rstd = static_cast<float*>(buf(kRstd, static_cast<std::size_t>(rows) * kF));
    be_.layernorm_forward(x, param(layout_.at(model::ParamLayout::final_ln_weight()).offset),
                          param(layout_.at(model::ParamLayout::final_ln_bias()).offset), ln, mean, rstd, rows, h,
                          opt_.layernorm_eps, t);
    void* logits = buf(kLogits, static_cast<std::size_t>(rows * V) * es);
    model::linear_forward(be_, ln, param(layout_.at(model::ParamLayout::word_embeddings()).offset), logits, rows, h,
                          V, t);
    auto* l32 = static_cast<float*>(buf(kLogits32, static_cast<std::size_t>(rows * V) * kF));
    be_.cast(logits, t, l32, DType::F32, rows * V);
    std::vector<float> shards(static_cast<std::size_t>(tp * rows * V));
    if (tp == 1) {
        be_.copy_to_host(shards.data(), l32, shards.size() * kF);
        return shards;
    }
    auto* g = static_cast<float*>(buf(kGathered, shards.size() * kF));
    tp_.all_gather(l32, g, rows * V, dist::CommType::F32);
    be_.copy_to_host(shards.data(), g, shards.size() * kF);
    // (tp, rows, V/tp) -> (rows, V): rank r holds vocabulary ids [r V/tp, (r+1) V/tp).
    std::vector<float> out(shards.size());
    for (std::int64_t r = 0; r < tp; ++r)
        for (std::int64_t i = 0; i < rows; ++i)
            std::copy_n(shards.data() + (r * rows + i) * V, V, out.data() + (i * tp + r) * V);
    return out;
}

}  // namespace gpt::inference
