#pragma once
// Megatron's assignment of decoder layers to pipeline stages and their virtual stages (model
// chunks): even, uneven (--decoder-first/last-pipeline-num-layers) or with the embedding and
// the loss counted as layers (--account-for-embedding/loss-in-pipeline-split). One function
// for the trainer (train/step/chunk_layout.cpp), the validation and the planner, so the
// layers a run builds and the ones the planner prices are the same.
#include <string>
#include <vector>

namespace gpt {

struct PipelineSplit {
    static constexpr int kNotGiven = -1;  // Megatron's None; 0 layers is a valid count
    int first_stage_layers = kNotGiven;   // --decoder-first-pipeline-num-layers
    int last_stage_layers = kNotGiven;    // --decoder-last-pipeline-num-layers
    bool account_for_embedding = false;   // --account-for-embedding-in-pipeline-split
    bool account_for_loss = false;        // --account-for-loss-in-pipeline-split
    // --pipeline-model-parallel-layout: the decoder layers of every virtual stage in Megatron's
    // order (vstage = chunk x pp + stage); empty when not given.
    std::vector<int> layout;
    bool uneven() const { return first_stage_layers != kNotGiven || last_stage_layers != kNotGiven; }
    bool any() const { return uneven() || account_for_embedding || account_for_loss || !layout.empty(); }
    // The layers Megatron divides over the stages: the embedding and the loss count as one each.
    int split_layers(int num_layers) const {
        return num_layers + int{account_for_embedding} + int{account_for_loss};
    }
};

// Megatron's --pipeline-model-parallel-layout string, e.g. "Et|(tt|)*3,t|tL": stages split by
// '|', E the embedding, t a decoder layer, L the loss, (...)*n and x*n repeated, commas
// cosmetic. Fills the decoder layers of each stage; "" or the one-line reason the string is
// not a layout this build runs (E first and L last, each once; MTP layers 'm' refused).
std::string parse_pipeline_layout(const std::string& text, std::vector<int>& stage_layers);

// Decoder layers of each virtual stage, in Megatron's order vstage = chunk x pp + stage
// (layers follow that order: vstage k starts where k - 1 ends), for pp stages of vp chunks
// each. "" or the one-line reason the split is impossible, naming the flags.
std::string pipeline_split_problem(int num_layers, int pp, int vp, const PipelineSplit& split);
// Throws UsageError with pipeline_split_problem's line.
std::vector<int> pipeline_chunk_layers(int num_layers, int pp, int vp, const PipelineSplit& split);
// The layers of `stage`'s chunks together.
int pipeline_stage_layers(int num_layers, int pp, int vp, const PipelineSplit& split, int stage);

}  // namespace gpt
