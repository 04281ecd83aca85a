#include "train/state/save_model_state.hpp"

#include <cstdint>
#include <string>

#include "train/state/saved_run_attributes.hpp"

namespace gpt::train {

namespace {

std::string dtype_label(DType t) { return t == DType::F16 ? "fp16" : t == DType::BF16 ? "bf16" : "fp32"; }

}  // namespace

void save_model_state(ckpt::CheckpointWriter& w, const std::vector<TensorBinding>& tensors,
                      const std::vector<ChunkHost>& host, DType param_dtype,
                      const std::vector<ckpt::TensorSlice>& fp8, const SavedProgress& progress,
                      const SavedLayout& layout, const Config& cfg) {
    std::vector<ckpt::TensorSlice> slices;
    for (StateKind k : {StateKind::Param, StateKind::MainParam, StateKind::ExpAvg, StateKind::ExpAvgSq})
        for (auto&& s : save_slices(tensors, host, k, param_dtype)) slices.push_back(std::move(s));
    w.write(slices);
    if (!fp8.empty()) w.write(fp8);
    progress.write_attributes(w);
    w.set_attribute("params_dtype", dtype_label(param_dtype));
    w.set_attribute("tensor_model_parallel_size", std::int64_t{layout.tp});
    w.set_attribute("pipeline_model_parallel_size", std::int64_t{layout.pp});
    w.set_attribute("data_parallel_size", std::int64_t{layout.dp});
    write_saved_run(w, cfg);
    progress.write_rng(w);
}

}  // namespace gpt::train
