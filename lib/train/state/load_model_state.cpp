#include "train/state/load_model_state.hpp"

namespace gpt::train {

std::int64_t stored_vocab_rows(const ckpt::CheckpointReader& r) {
    return r.tensor_info(model::ParamLayout::word_embeddings()).shape.at(0);
}

void load_model_state(ckpt::CheckpointReader& r, const std::vector<TensorBinding>& tensors,
                      std::vector<ChunkHost>& host, bool adam_moments) {
    std::vector<ckpt::TensorSliceOut> slices;
    for (StateKind k : {StateKind::MainParam, StateKind::ExpAvg, StateKind::ExpAvgSq}) {
        if (k != StateKind::MainParam && !adam_moments) continue;
        // Optimizer state is fp32 whatever the model's dtype (which only Param slices use).
        for (auto&& s : load_slices(tensors, host, k, DType::F32)) slices.push_back(std::move(s));
    }
    r.read(slices);
}

std::vector<float> load_model_state(ckpt::CheckpointReader& r, const model::ParamLayout& layout) {
    std::vector<float> params(static_cast<std::size_t>(layout.total_elements()), 0.0f);
    // One chunk holding the whole model, unsharded. The entries carry the TP slice; the TP
    // and DP ranks bind_tensors takes only pick who writes, which a load does not ask.
    std::vector<ChunkHost> host(1);
    host[0].layout = &layout;
    host[0].main = params;
    load_model_state(r, bind_tensors(layout, {&layout}, 0, 0), host, false);
    return params;
}

}  // namespace gpt::train
