#include "train/state/checkpoint_slices.hpp"

#include <algorithm>
#include <type_traits>

#include "core/errors.hpp"

namespace gpt::train {

std::string main_param_name(const std::string& name) { return "optimizer/main_param/" + name; }
std::string exp_avg_name(const std::string& name) { return "optimizer/exp_avg/" + name; }
std::string exp_avg_sq_name(const std::string& name) { return "optimizer/exp_avg_sq/" + name; }

ckpt::Selection local_box(const model::ParamEntry& e) {
    ckpt::Shape offset(e.global_shape.size(), 0);
    if (e.split_dim >= 0) offset[static_cast<std::size_t>(e.split_dim)] = e.slice_start;
    return ckpt::Selection::box(std::move(offset), e.local_shape);
}

std::vector<TensorBinding> bind_tensors(const model::ParamLayout& full,
                                        const std::vector<const model::ParamLayout*>& chunks,
                                        int tp_rank, int dp_rank) {
    using model::ParamLayout;
    std::vector<TensorBinding> out;
    std::size_t bound = 0;
    for (const auto& g : full.entries()) {
        TensorBinding b;
        b.global = &g;
        for (std::size_t c = 0; c < chunks.size() && !b.local; ++c)
            if (const auto* e = chunks[c]->find(g.name)) {
                b.chunk = static_cast<int>(c);
                b.local = e;
            }
        if (b.local) {
            ++bound;
            b.tp_writer = g.split_dim >= 0 || tp_rank == 0;
            b.writes = dp_rank == 0 && b.tp_writer;
        } else if (g.name == ParamLayout::word_embeddings()) {
            // The last stage's copy loads from the one stored tensor and writes nothing.
            for (std::size_t c = 0; c < chunks.size() && !b.local; ++c)
                if (const auto* e = chunks[c]->find(ParamLayout::word_embeddings_for_head())) {
                    b.chunk = static_cast<int>(c);
                    b.local = e;
                    ++bound;
                }
        }
        out.push_back(b);
    }
    std::size_t held = 0;
    for (const auto* l : chunks) held += l->entries().size();
    GPT_REQUIRE(bound == held, InternalError, "checkpoint: this rank's model chunks hold ", held,
                " tensors but only ", bound, " of them are in the whole model's layout");
    return out;
}

namespace {

template <typename Buf>
auto* state_base(Buf& h, StateKind kind) {
    using Byte = std::conditional_t<std::is_const_v<Buf>, const std::byte, std::byte>;
    switch (kind) {
        case StateKind::Param: return reinterpret_cast<Byte*>(h.params.data());
        case StateKind::MainParam: return reinterpret_cast<Byte*>(h.main.data());
        case StateKind::ExpAvg: return reinterpret_cast<Byte*>(h.exp_avg.data());
        case StateKind::ExpAvgSq: break;
    }
    return reinterpret_cast<Byte*>(h.exp_avg_sq.data());
}

std::string state_name(const std::string& name, StateKind kind) {
    switch (kind) {
        case StateKind::Param: return name;
        case StateKind::MainParam: return main_param_name(name);
        case StateKind::ExpAvg: return exp_avg_name(name);
        case StateKind::ExpAvgSq: break;
    }
    return exp_avg_sq_name(name);
}

DType state_dtype(StateKind kind, DType param_dtype) {
    return kind == StateKind::Param ? param_dtype : DType::F32;
}

// Where this rank's piece of a tensor's state is: the whole local box for parameters and
// unsharded optimizer state; for a distributed-optimizer shard, the part of the entry's
// flat range inside [opt_begin, opt_begin + size) - a flat run within the box.
template <typename Byte>
bool state_piece(const model::ParamEntry& e, const ChunkHost& h, StateKind kind, Byte* base,
                 DType dt, ckpt::Selection& sel, Byte*& data) {
    if (kind == StateKind::Param || !h.sharded) {
        sel = local_box(e);
        const std::int64_t first = kind == StateKind::Param ? 0 : h.opt_begin;
        data = base + static_cast<std::size_t>(e.offset - first) * dtype_size(dt);
        return true;
    }
    const auto size = static_cast<std::int64_t>(h.main.size());
    const std::int64_t lo = std::max(e.offset, h.opt_begin);
    const std::int64_t hi = std::min(e.offset + e.numel, h.opt_begin + size);
    if (lo >= hi) return false;
    const ckpt::Selection box = local_box(e);
    sel = ckpt::Selection::flat_in_box(box.offset(), box.count(), lo - e.offset, hi - lo);
    data = base + static_cast<std::size_t>(lo - h.opt_begin) * dtype_size(dt);
    return true;
}

}  // namespace

std::vector<ckpt::TensorSlice> save_slices(const std::vector<TensorBinding>& tensors,
                                           const std::vector<ChunkHost>& host, StateKind kind,
                                           DType param_dtype) {
    const DType dt = state_dtype(kind, param_dtype);
    std::vector<ckpt::TensorSlice> out;
    out.reserve(tensors.size());
    for (const auto& b : tensors) {
        ckpt::TensorSlice s;
        s.name = state_name(b.global->name, kind);
        s.global_shape = b.global->global_shape;
        s.dtype = dt;
        const ChunkHost* h = b.chunk >= 0 ? &host.at(static_cast<std::size_t>(b.chunk)) : nullptr;
        // A distributed-optimizer shard is written by its owner, whatever its DP rank.
        const bool writer = h && kind != StateKind::Param && h->sharded ? b.tp_writer : b.writes;
        if (writer) {
            const std::byte* data = nullptr;
            if (state_piece(*b.local, *h, kind, state_base(*h, kind), dt, s.selection, data))
                s.data = data;
        }
        out.push_back(std::move(s));
    }
    return out;
}

std::vector<ckpt::TensorSliceOut> load_slices(const std::vector<TensorBinding>& tensors,
                                              std::vector<ChunkHost>& host, StateKind kind,
                                              DType param_dtype) {
    const DType dt = state_dtype(kind, param_dtype);
    std::vector<ckpt::TensorSliceOut> out;
    out.reserve(tensors.size());
    for (const auto& b : tensors) {
        ckpt::TensorSliceOut s;
        s.name = state_name(b.global->name, kind);
        s.global_shape = b.global->global_shape;
        s.dtype = dt;
        if (b.local) {
            ChunkHost& h = host.at(static_cast<std::size_t>(b.chunk));
            std::byte* data = nullptr;
            if (state_piece(*b.local, h, kind, state_base(h, kind), dt, s.selection, data))
                s.data = data;
        }
        out.push_back(std::move(s));
    }
    return out;
}

}  // namespace gpt::train
