#include "config/pipeline_split.hpp"

#include "core/errors.hpp"

namespace gpt {
namespace {

std::string str(int v) { return std::to_string(v); }

// Layers of each whole stage (all its chunks), or the reason there are none.
std::string stage_layers(int L, int pp, const PipelineSplit& s, std::vector<int>& out) {
    out.assign(static_cast<std::size_t>(pp), 0);
    if (!s.uneven()) {
        const int n = s.split_layers(L);
        if (n % pp) {
            std::string what = "num-layers " + str(L);
            if (s.account_for_embedding || s.account_for_loss)
                what += " + " + str(n - L) + " (the embedding and loss counted as layers) = " + str(n);
            return what + " is not divisible by pipeline-model-parallel-size " + str(pp) +
                   ": pipeline stages need equal layer counts. HINT: --decoder-first-pipeline-num-layers "
                   "and --decoder-last-pipeline-num-layers give the first and last stages their own counts";
        }
        for (int& v : out) v = n / pp;
        return "";
    }
    // Megatron: uneven stages have no standalone embedding or loss stage.
    if (s.account_for_embedding || s.account_for_loss)
        return "--decoder-first/last-pipeline-num-layers cannot be combined with "
               "--account-for-embedding-in-pipeline-split or --account-for-loss-in-pipeline-split";
    if (pp < 2) return "--decoder-first/last-pipeline-num-layers need pipeline-model-parallel-size > 1";
    const int first = s.first_stage_layers, last = s.last_stage_layers;
    for (const auto& [flag, v] : {std::pair{"first", first}, std::pair{"last", last}})
        if (v != PipelineSplit::kNotGiven && v < 0)
            return std::string("--decoder-") + flag + "-pipeline-num-layers must not be negative, got " + str(v);
    const int given = (first >= 0 ? first : 0) + (last >= 0 ? last : 0);
    const int middle_stages = pp - int{first >= 0} - int{last >= 0};
    const int rest = L - given;
    const std::string counts = "--decoder-first/last-pipeline-num-layers (" +
                               (first >= 0 ? str(first) : std::string("None")) + ", " +
                               (last >= 0 ? str(last) : std::string("None")) + ")";
    if (rest < 0) return counts + " give more layers than num-layers " + str(L);
    if (middle_stages == 0 && rest != 0)
        return counts + " give the two stages " + str(given) + " layers, not num-layers " + str(L);
    if (middle_stages > 0 && rest % middle_stages)
        return "the " + str(rest) + " layers " + counts + " leave for the other " + str(middle_stages) +
               " pipeline stages do not divide evenly over them";
    for (int& v : out) v = middle_stages > 0 ? rest / middle_stages : 0;
    if (first >= 0) out.front() = first;
    if (last >= 0) out.back() = last;
    return "";
}

std::string chunk_layers(int L, int pp, int vp, const PipelineSplit& s, std::vector<int>& out) {
    if (pp <= 0 || vp <= 0) return "pipeline-model-parallel-size and the virtual stages must be positive";
    if (vp > 1 && pp < 2) return "interleaved pipeline stages need pipeline-model-parallel-size > 1";
    std::vector<int> stages;
    if (std::string why = stage_layers(L, pp, s, stages); !why.empty()) return why;
    out.assign(static_cast<std::size_t>(pp * vp), 0);
    for (int stage = 0; stage < pp; ++stage) {
        const int n = stages[static_cast<std::size_t>(stage)];
        if (n % vp)
            return "pipeline stage " + str(stage) + "'s " + str(n) + " layers do not divide into " + str(vp) +
                   " virtual stages";
        for (int c = 0; c < vp; ++c) out[static_cast<std::size_t>(c * pp + stage)] = n / vp;
    }
    // The embedding and the loss take a layer's place in the first and the last virtual
    // stage. Each virtual stage has at least one slot (L + 1 > 0 slots split evenly), and
    // with pp = vp = 1 both come out of the one stage's L + 2.
    if (s.account_for_embedding) --out.front();
    if (s.account_for_loss) --out.back();
    GPT_ASSERT(out.front() >= 0 && out.back() >= 0, "pipeline split of ", L, " layers");
    return "";
}

}  // namespace

std::string pipeline_split_problem(int num_layers, int pp, int vp, const PipelineSplit& split) {
    std::vector<int> unused;
    return chunk_layers(num_layers, pp, vp, split, unused);
}

std::vector<int> pipeline_chunk_layers(int num_layers, int pp, int vp, const PipelineSplit& split) {
    std::vector<int> out;
    const std::string why = chunk_layers(num_layers, pp, vp, split, out);
    GPT_REQUIRE(why.empty(), UsageError, why);
    return out;
}

int pipeline_stage_layers(int num_layers, int pp, int vp, const PipelineSplit& split, int stage) {
    const std::vector<int> chunks = pipeline_chunk_layers(num_layers, pp, vp, split);
    GPT_ASSERT(stage >= 0 && stage < pp, "stage ", stage, " outside 0..", pp - 1);
    int n = 0;
    for (int c = 0; c < vp; ++c) n += chunks[static_cast<std::size_t>(c * pp + stage)];
    return n;
}

}  // namespace gpt
