#include "train/state/fp8_checkpoint.hpp"

#include "core/errors.hpp"
#include "log/log.hpp"
#include "model/param_layout.hpp"

namespace gpt::train {

namespace {

constexpr int kPerLayer = model::Fp8Linears::kLinears * model::Fp8Linears::kOperands;

bool delayed_fp8(const Config& cfg) { return cfg.fp8.enabled() && cfg.fp8.fp8_recipe == Fp8Recipe::Delayed; }

std::string history_name(int layer) { return model::ParamLayout::layer_prefix(layer) + "fp8_amax_history"; }
std::string scale_name(int layer) { return model::ParamLayout::layer_prefix(layer) + "fp8_scale"; }

// Calls f(chunk, local layer) for each of this rank's FP8 layers, by global layer.
template <typename F>
void for_local_layers(ModelChunks& chunks, int layer, F&& f) {
    for (int c = 0; c < chunks.num_chunks(); ++c) {
        model::GptModel& m = chunks.chunk(c);
        const int l = layer - m.chunk().first_layer;
        if (m.fp8() && l >= 0 && l < m.chunk().num_layers) f(m, l);
    }
}

}  // namespace

std::vector<ckpt::TensorSlice> fp8_state_slices(const Config& cfg, ModelChunks& chunks,
                                                const dist::ProcessGroups& groups,
                                                std::vector<std::vector<float>>& storage) {
    std::vector<ckpt::TensorSlice> out;
    if (!delayed_fp8(cfg)) return out;
    const int layers = cfg.model.num_layers, H = cfg.fp8.fp8_amax_history_len;
    const bool writer = groups.coords().tp == 0 && groups.coords().dp == 0;
    storage.clear();
    storage.reserve(static_cast<std::size_t>(2 * layers));
    for (int L = 0; L < layers; ++L) {
        if (!cfg.fp8.layer_in_fp8(L, layers)) continue;
        ckpt::TensorSlice h{history_name(L), {H, kPerLayer}, DType::F32, ckpt::Selection::none(), nullptr};
        ckpt::TensorSlice s{scale_name(L), {kPerLayer}, DType::F32, ckpt::Selection::none(), nullptr};
        for_local_layers(chunks, L, [&](model::GptModel& m, int l) {
            if (!writer) return;
            const DelayedScaling& d = *m.fp8()->delayed();
            const auto n = static_cast<std::size_t>(d.tensors());
            std::vector<float> hist(static_cast<std::size_t>(H * kPerLayer)), sc(kPerLayer);
            for (int r = 0; r < H; ++r)
                for (int k = 0; k < kPerLayer; ++k)
                    hist[static_cast<std::size_t>(r * kPerLayer + k)] =
                        d.history()[static_cast<std::size_t>(r) * n + static_cast<std::size_t>(l * kPerLayer + k)];
            for (int k = 0; k < kPerLayer; ++k) sc[static_cast<std::size_t>(k)] = d.scales()[static_cast<std::size_t>(l * kPerLayer + k)];
            storage.push_back(std::move(hist));
            h.selection = ckpt::Selection::all();
            h.data = storage.back().data();
            storage.push_back(std::move(sc));
            s.selection = ckpt::Selection::all();
            s.data = storage.back().data();
        });
        out.push_back(std::move(h));
        out.push_back(std::move(s));
    }
    return out;
}

std::optional<SavedFp8Scaling> read_fp8_state(ckpt::CheckpointReader& r, const Config& cfg,
                                              ModelChunks& chunks) {
    if (!delayed_fp8(cfg)) return std::nullopt;
    const int layers = cfg.model.num_layers, H = cfg.fp8.fp8_amax_history_len;
    // Every rank decides alike: from the file and the flags only.
    std::vector<int> stored;
    for (int L = 0; L < layers; ++L) {
        if (!cfg.fp8.layer_in_fp8(L, layers)) continue;
        if (!r.has_tensor(history_name(L)) || !r.has_tensor(scale_name(L))) {
            GPT_LOG(info) << "checkpoint " << r.file() << " holds no FP8 scaling state for layer " << L
                          << ": delayed scaling starts afresh (scales 1, empty amax history)";
            return std::nullopt;
        }
        const ckpt::Shape shape = r.tensor_info(history_name(L)).shape;
        if (shape.size() != 2 || shape[0] != H || shape[1] != kPerLayer) {
            GPT_LOG(warning) << "checkpoint " << r.file() << " holds an FP8 amax history of "
                             << (shape.empty() ? 0 : shape[0]) << " steps, this run keeps --fp8-amax-history-len "
                             << H << ": delayed scaling starts afresh";
            return std::nullopt;
        }
        stored.push_back(L);
    }
    // Read into per-layer buffers, then into each chunk's arrays.
    std::vector<std::vector<float>> hist(stored.size()), sc(stored.size());
    std::vector<ckpt::TensorSliceOut> want;
    for (std::size_t i = 0; i < stored.size(); ++i) {
        bool mine = false;
        for_local_layers(chunks, stored[i], [&](model::GptModel&, int) { mine = true; });
        hist[i].resize(static_cast<std::size_t>(H * kPerLayer));
        sc[i].resize(kPerLayer);
        const auto sel = mine ? ckpt::Selection::all() : ckpt::Selection::none();
        want.push_back({history_name(stored[i]), {H, kPerLayer}, DType::F32, sel, hist[i].data()});
        want.push_back({scale_name(stored[i]), {kPerLayer}, DType::F32, sel, sc[i].data()});
    }
    r.read(want);
    return SavedFp8Scaling{stored, std::move(hist), std::move(sc)};
}

void restore_fp8_state(const SavedFp8Scaling& saved, const Config& cfg, ModelChunks& chunks) {
    const int H = cfg.fp8.fp8_amax_history_len;
    const std::vector<int>& stored = saved.layers;
    const auto& hist = saved.history;
    const auto& sc = saved.scales;
    for (int c = 0; c < chunks.num_chunks(); ++c) {
        model::GptModel& m = chunks.chunk(c);
        if (!m.fp8()) continue;
        const DelayedScaling& d = *m.fp8()->delayed();
        const auto n = static_cast<std::size_t>(d.tensors());
        std::vector<float> history = d.history(), scales = d.scales();
        for (std::size_t i = 0; i < stored.size(); ++i) {
            const int l = stored[i] - m.chunk().first_layer;
            if (l < 0 || l >= m.chunk().num_layers) continue;
            for (int r0 = 0; r0 < H; ++r0)
                for (int k = 0; k < kPerLayer; ++k)
                    history[static_cast<std::size_t>(r0) * n + static_cast<std::size_t>(l * kPerLayer + k)] =
                        hist[i][static_cast<std::size_t>(r0 * kPerLayer + k)];
            for (int k = 0; k < kPerLayer; ++k)
                scales[static_cast<std::size_t>(l * kPerLayer + k)] = sc[i][static_cast<std::size_t>(k)];
        }
        m.fp8()->restore(history, scales);
    }
}

}  // namespace gpt::train
