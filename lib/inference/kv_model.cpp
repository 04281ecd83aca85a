#include "inference/kv_model.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "inference/kv_cache_layout.hpp"
#include "model/linear.hpp"
#include "model/qk_norm.hpp"
#include "model/tp_mappings.hpp"
#include "model/transformer_layer.hpp"

namespace gpt::inference {

namespace {

// Scratch buffers, by role; each grows to the largest pass seen.
enum Scratch { kTokens, kX, kMid, kLn, kCtx, kTmp, kAux, kGelu, kMean, kRstd, kSaved, kScores, kProbs,
               kTargets, kOnes, kMax, kSum, kTarget, kLogits, kLogits32, kGathered, kProj, kExpanded,
               kProj32, kRot32, kRot, kRope, kKeyRows, kValueRows, kNumScratch };

constexpr std::size_t kF = sizeof(float);

}  // namespace

KvModel::KvModel(const model::ModelDims& dims, const model::ModelOptions& opt, Backend& be,
                 dist::Communicator& tp, const std::vector<float>& host_params)
    : dims_(dims), opt_(opt), be_(be), tp_(tp),
      layout_(dims, model::ChunkSpec{0, dims.num_layers, true, true}) {
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
    for (void* c : k_cache_) be_.free(c);
    for (void* c : v_cache_) be_.free(c);
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
    if (off < 0) return nullptr;  // a parameter the architecture lacks (a bias)
    return static_cast<std::byte*>(params_) + off * static_cast<std::int64_t>(dtype_size(opt_.dtype));
}

void KvModel::start(int batch, int max_len) {
    GPT_REQUIRE(batch > 0 && max_len > 0, InternalError, "KvModel::start(", batch, ", ", max_len, ")");
    GPT_REQUIRE(max_len <= dims_.max_positions, UsageError, "a sequence of ", max_len,
                " tokens is longer than the model's --max-position-embeddings ", dims_.max_positions);
    const std::size_t bytes = static_cast<std::size_t>(max_len) * batch * dims_.local_groups() * dims_.head_dim *
                              dtype_size(opt_.dtype);
    if (batch != batch_ || max_len != max_len_) {
        for (auto* cache : {&k_cache_, &v_cache_}) {
            for (void* c : *cache) be_.free(c);
            cache->clear();
            for (int l = 0; l < dims_.num_layers; ++l) cache->push_back(be_.alloc(bytes));
        }
    }
    batch_ = batch;
    max_len_ = max_len;
    pos_ = 0;
}

// The model's normalization (model/norm.cpp's choice), b = -1 under RMSNorm.
void KvModel::norm(const void* x, std::int64_t w, std::int64_t b, void* y, std::int64_t rows) {
    auto* mean = static_cast<float*>(buf(kMean, static_cast<std::size_t>(rows) * kF));
    auto* rstd = static_cast<float*>(buf(kRstd, static_cast<std::size_t>(rows) * kF));
    if (dims_.rmsnorm)
        be_.rmsnorm_forward(x, param(w), y, rstd, rows, dims_.hidden, opt_.layernorm_eps, opt_.dtype,
                            dims_.layernorm_1p);
    else
        be_.layernorm_forward(x, param(w), param(b), y, mean, rstd, rows, dims_.hidden, opt_.layernorm_eps,
                              opt_.dtype, dims_.layernorm_1p);
}

// The grouped projection proj [rows, ng, hpg + 2, hn] of one position (pos_ > 0) with its
// queries and keys rotated to pos_ (the value rows are rotated too, and never read from the
// result: one GEMM over all rows costs less than picking the others out). fp32 GEMM with the fp32 rotation, rounded once to the storage type as the expand
// op rounds its fp32 result.
const void* KvModel::rotate_step(const void* proj, std::int64_t rows) {
    const DType t = opt_.dtype;
    const std::int64_t hn = dims_.head_dim, n = rows * dims_.local_qkv_proj();
    const std::vector<float> m = rope_matrix(hn, dims_.rotary_dim, dims_.rotary_base, dims_.rotary_interleaved, pos_);
    void* rope = buf(kRope, m.size() * kF);
    be_.copy_to_device(rope, m.data(), m.size() * kF);
    const void* in = proj;
    if (t != DType::F32) {
        void* p32 = buf(kProj32, static_cast<std::size_t>(n) * kF);
        be_.cast(proj, t, p32, DType::F32, n);
        in = p32;
    }
    void* out = buf(t == DType::F32 ? kRot : kRot32, static_cast<std::size_t>(n) * kF);
    GemmArgs g;
    g.m = n / hn, g.n = hn, g.k = hn;
    g.a = in, g.lda = hn;
    g.b = rope, g.ldb = hn;
    g.c = out, g.ldc = hn;
    g.dtype = DType::F32, g.c_dtype = DType::F32;
    be_.gemm(g);
    if (t == DType::F32) return out;
    void* rot = buf(kRot, static_cast<std::size_t>(n) * dtype_size(t));
    be_.cast(out, DType::F32, rot, t, n);
    return rot;
}

// Copies rows key_rows of keys and the rows after them (the values) of values, each viewed as
// a table of table_rows hn-wide rows, into the cache at position pos_: exact row gathers.
void KvModel::append_kv(int layer, const void* keys, const void* values, const std::vector<std::int32_t>& key_rows,
                        std::int64_t table_rows) {
    const DType t = opt_.dtype;
    const std::int64_t hn = dims_.head_dim, count = static_cast<std::int64_t>(key_rows.size());
    const std::int64_t at = static_cast<std::int64_t>(pos_) * batch_ * dims_.local_groups() * hn *
                            static_cast<std::int64_t>(dtype_size(t));
    const std::vector<std::int32_t> value_rows = next_rows(key_rows);
    auto* k = static_cast<std::int32_t*>(buf(kKeyRows, key_rows.size() * 4));
    auto* v = static_cast<std::int32_t*>(buf(kValueRows, value_rows.size() * 4));
    be_.copy_to_device(k, key_rows.data(), key_rows.size() * 4);
    be_.copy_to_device(v, value_rows.data(), value_rows.size() * 4);
    const auto l = static_cast<std::size_t>(layer);
    be_.embedding_forward(k, keys, static_cast<std::byte*>(k_cache_[l]) + at, 1, count, hn, 0, table_rows, t);
    be_.embedding_forward(v, values, static_cast<std::byte*>(v_cache_[l]) + at, 1, count, hn, 0, table_rows, t);
}

// One query per sequence and head at position pos_ against the cached keys [0, pos_]:
// batched over (sequence, group); a group's hpg queries are consecutive rows of the grouped
// projection, its keys and values rows of the cache at a fixed stride.
void KvModel::attention_step(int layer, const void* grouped, void* ctx) {
    const DType t = opt_.dtype;
    const std::int64_t ng = dims_.local_groups(), hpg = dims_.heads / dims_.groups(), hn = dims_.head_dim;
    const std::int64_t B = batch_, L = pos_ + 1, groups = B * ng, heads = groups * hpg;
    const std::int64_t row = B * ng * hn;  // elements per cached position
    const std::size_t es = dtype_size(t);
    const auto l = static_cast<std::size_t>(layer);
    auto* scores = static_cast<float*>(buf(kScores, static_cast<std::size_t>(heads * L) * kF));
    GemmArgs s;
    s.trans_b = true;
    s.m = hpg, s.n = L, s.k = hn;
    s.a = grouped, s.lda = hn, s.stride_a = (hpg + 2) * hn;  // the group's queries
    s.b = k_cache_[l], s.ldb = row, s.stride_b = hn;         // its keys of positions [0, L)
    s.c = scores, s.ldc = L, s.stride_c = hpg * L;
    s.alpha = 1.0f / std::sqrt(static_cast<float>(hn));    // Megatron's 1/sqrt(hn)
    s.dtype = t, s.c_dtype = DType::F32, s.batch = groups;
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
    o.m = hpg, o.n = hn, o.k = L;
    o.a = probs, o.lda = L, o.stride_a = hpg * L;
    o.b = v_cache_[l], o.ldb = row, o.stride_b = hn;  // the group's values of positions [0, L)
    o.c = ctx, o.ldc = hn, o.stride_c = hpg * hn;      // ctx [1, b, np, hn], head g hpg + i
    o.dtype = t, o.c_dtype = t, o.batch = groups;
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
    const std::int64_t ng = d.local_groups(), hpg = d.heads / d.groups(), hn = d.head_dim;
    auto* tok = static_cast<std::int32_t*>(buf(kTokens, static_cast<std::size_t>(T) * 4));
    be_.copy_to_device(tok, tokens, static_cast<std::size_t>(T) * 4);
    void* x = buf(kX, static_cast<std::size_t>(T * h) * es);
    void* mid = buf(kMid, static_cast<std::size_t>(T * h) * es);
    void* ln = buf(kLn, static_cast<std::size_t>(T * h) * es);
    void* proj = buf(kProj, static_cast<std::size_t>(T * d.local_qkv_proj()) * es);
    void* ctx = buf(kCtx, static_cast<std::size_t>(T * d.local_hidden()) * es);
    void* tmp = buf(kTmp, static_cast<std::size_t>(T * h) * es);
    void* aux = buf(kAux, static_cast<std::size_t>(T * d.local_fc1()) * es);
    void* act = buf(kGelu, static_cast<std::size_t>(T * d.local_ffn()) * es);

    // Embedding (model/embedding_head.cpp without dropout): vocab-parallel rows, summed; the
    // learned positions of this pass's positions (none with rope).
    be_.embedding_forward(tok, param(layout_.at(model::ParamLayout::word_embeddings()).offset), x, B, n, h,
                          d.vocab_start(), d.vocab_start() + d.local_vocab(), t);
    model::reduce_from_tensor_model_parallel_region_forward(tp_, x, T * h, t);
    if (const model::ParamEntry* position = layout_.find(model::ParamLayout::position_embeddings()))
        be_.position_embedding_forward(param(position->offset), x, B, n, h, pos_, t);

    // The prompt pass runs the training attention op on the expanded [n, b, np, 3, hn]; a
    // step reads its queries from the (rotated) grouped projection.
    const bool prompt = pos_ == 0;
    AttentionArgs aa = model::attention_args(d, opt_, B);
    aa.s = n;
    aa.dropout = 0.0f;
    QkvExpandArgs qa;
    qa.s = n, qa.b = B, qa.groups = ng, qa.heads_per_group = hpg, qa.hn = hn;
    qa.rotary_dim = d.rope ? d.rotary_dim : 0;
    qa.rotary_base = d.rotary_base;
    qa.rotary_interleaved = d.rotary_interleaved;
    qa.dtype = t;
    void* saved = prompt ? buf(kSaved, be_.attention_saved_bytes(aa)) : nullptr;
    void* expanded = prompt && d.qkv_expanded() ? buf(kExpanded, static_cast<std::size_t>(T * d.local_qkv()) * es)
                                                : nullptr;
    const std::vector<std::int32_t> key_rows = prompt ? expanded_key_rows(T, ng, hpg) : grouped_key_rows(B, ng, hpg);
    for (int l = 0; l < d.num_layers; ++l) {
        const model::LayerParamOffsets& p = layers_[static_cast<std::size_t>(l)];
        // The layer of model/transformer_layer.cpp, dropout off, in the same op order.
        norm(x, p.ln1_w, p.ln1_b, ln, T);
        model::linear_forward(be_, ln, param(p.qkv_w), proj, T, h, d.local_qkv_proj(), t,
                              p.qkv_b < 0 ? GemmEpilogue::None : GemmEpilogue::Bias, param(p.qkv_b));
        if (d.qk_layernorm) {
            // In place: nothing reads the projection before the norms at inference.
            const auto rows = static_cast<std::size_t>(model::qk_norm_rows(d, T));
            model::qk_norm_forward(be_, d, {param(p.q_norm_w), param(p.q_norm_b), param(p.k_norm_w), param(p.k_norm_b)},
                                   proj, proj, static_cast<float*>(buf(kMean, rows * kF)),
                                   static_cast<float*>(buf(kRstd, rows * kF)), T, opt_.layernorm_eps, t);
        }
        if (prompt) {
            const void* qkv = proj;  // [n, b, np, 3, hn] already without groups or rope
            if (expanded) {
                be_.qkv_expand_forward(qa, proj, expanded);
                qkv = expanded;
            }
            be_.attention_forward(aa, qkv, ctx, saved);
            append_kv(l, qkv, qkv, key_rows, T * d.local_qkv() / hn);
        } else {
            // Queries and keys rotated to this position; the values as projected.
            const void* grouped = d.rope ? rotate_step(proj, B) : proj;
            append_kv(l, grouped, proj, key_rows, B * d.local_qkv_proj() / hn);
            attention_step(l, grouped, ctx);
        }
        model::linear_forward(be_, ctx, param(p.dense_w), tmp, T, d.local_hidden(), h, t);
        model::reduce_from_tensor_model_parallel_region_forward(tp_, tmp, T * h, t);
        be_.bias_dropout_add(tmp, param(p.dense_b), x, mid, T, h, 0.0f, 0, 0, t);
        norm(mid, p.ln2_w, p.ln2_b, ln, T);
        if (d.swiglu) {
            model::linear_forward(be_, ln, param(p.fc1_w), aux, T, h, d.local_fc1(), t,
                                  p.fc1_b < 0 ? GemmEpilogue::None : GemmEpilogue::Bias, param(p.fc1_b));
            be_.swiglu_forward(aux, act, T, d.local_ffn(), t);
        } else if (d.squared_relu) {
            model::linear_forward(be_, ln, param(p.fc1_w), aux, T, h, d.local_ffn(), t,
                                  p.fc1_b < 0 ? GemmEpilogue::None : GemmEpilogue::Bias, param(p.fc1_b));
            be_.squared_relu_forward(aux, act, T * d.local_ffn(), t);
        } else if (p.fc1_b >= 0) {
            model::linear_forward(be_, ln, param(p.fc1_w), act, T, h, d.local_ffn(), t, GemmEpilogue::BiasGelu,
                                  param(p.fc1_b), aux, opt_.tanh_gelu);
        } else {
            model::linear_forward(be_, ln, param(p.fc1_w), aux, T, h, d.local_ffn(), t);
            be_.gelu_forward(aux, act, T * d.local_ffn(), opt_.tanh_gelu, t);
        }
        model::linear_forward(be_, act, param(p.fc2_w), tmp, T, d.local_ffn(), h, t);
        model::reduce_from_tensor_model_parallel_region_forward(tp_, tmp, T * h, t);
        be_.bias_dropout_add(tmp, param(p.fc2_b), mid, x, T, h, 0.0f, 0, 0, t);
    }
    pos_ += n;
    // The head over the last position's rows (the last B of the s-major activation), or all.
    const std::int64_t rows = all_positions ? T : B;
    return head(static_cast<std::byte*>(x) + (T - rows) * h * static_cast<std::int64_t>(es), rows);
}

// Final norm and the LM head (the word embeddings, or the untied output layer); the vocab
// shards' logits are gathered, so the result is (rows, padded vocab) on every TP rank.
std::vector<float> KvModel::head(const void* x, std::int64_t rows) {
    const DType t = opt_.dtype;
    const std::size_t es = dtype_size(t);
    const std::int64_t h = dims_.hidden, V = dims_.local_vocab(), tp = tp_.size();
    void* ln = buf(kLn, static_cast<std::size_t>(rows * h) * es);
    const model::ParamEntry* ln_b = layout_.find(model::ParamLayout::final_ln_bias());
    norm(x, layout_.at(model::ParamLayout::final_ln_weight()).offset, ln_b ? ln_b->offset : -1, ln, rows);
    const char* weight = dims_.untied_output ? model::ParamLayout::output_layer() : model::ParamLayout::word_embeddings();
    void* logits = buf(kLogits, static_cast<std::size_t>(rows * V) * es);
    model::linear_forward(be_, ln, param(layout_.at(weight).offset), logits, rows, h, V, t);
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
