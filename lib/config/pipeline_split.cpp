#include "config/pipeline_split.hpp"

#include <cctype>

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

// --pipeline-model-parallel-layout: its stages are the virtual stages, in Megatron's order.
std::string layout_layers(int L, int pp, int vp, const PipelineSplit& s, std::vector<int>& out) {
    if (s.uneven() || s.account_for_embedding || s.account_for_loss)
        return "--pipeline-model-parallel-layout places the layers, the embedding and the loss itself: drop "
               "--decoder-first/last-pipeline-num-layers and --account-for-embedding/loss-in-pipeline-split";
    const auto stages = static_cast<int>(s.layout.size());
    if (pp == 1 && stages > 1)
        return "--pipeline-model-parallel-layout has " + str(stages) +
               " stages but pipeline-model-parallel-size is 1: give the pipeline size (a divisor of " + str(stages) +
               "; the rest are virtual stages)";
    if (stages != pp * vp)
        return "--pipeline-model-parallel-layout has " + str(stages) + " stages, not pipeline-model-parallel-size " +
               str(pp) + (vp > 1 ? " x " + str(vp) + " virtual stages" : "") +
               ": it must have a multiple of PP stages (the multiple is the virtual stages per rank)";
    int total = 0;
    for (int n : s.layout) total += n;
    if (total != L)
        return "--pipeline-model-parallel-layout has " + str(total) + " decoder layers (t), not num-layers " + str(L);
    out = s.layout;
    return "";
}

std::string chunk_layers(int L, int pp, int vp, const PipelineSplit& s, std::vector<int>& out) {
    if (pp <= 0 || vp <= 0) return "pipeline-model-parallel-size and the virtual stages must be positive";
    if (!s.layout.empty()) return layout_layers(L, pp, vp, s, out);
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

// Megatron's parse_str_to_list: (...)*n first (no nesting), then x*n.
std::string unrolled(std::string text, std::string& why) {
    std::string flat;
    for (char c : text)
        if (c != ',' && c != ' ') flat += c;
    // "*<digits>" at s[at]: the count (end: past it); -1 when there is none.
    const auto repeat = [](const std::string& s, std::size_t at, std::size_t& end) -> long {
        if (at >= s.size() || s[at] != '*') return -1;
        end = at + 1;
        while (end < s.size() && std::isdigit(static_cast<unsigned char>(s[end]))) ++end;
        if (end == at + 1 || end - at > 7) return -1;
        return std::stol(s.substr(at + 1, end - at - 1));
    };
    std::string pass;
    for (std::size_t i = 0; i < flat.size();) {
        std::size_t close = 0, end = 0;
        long n = -1;
        if (flat[i] == '(' && (close = flat.find(')', i)) != std::string::npos) n = repeat(flat, close + 1, end);
        if (n < 0) {
            pass += flat[i++];
            continue;
        }
        for (long k = 0; k < n; ++k) pass += flat.substr(i + 1, close - i - 1);
        i = end;
    }
    std::string out;
    for (std::size_t i = 0; i < pass.size(); ++i) {
        std::size_t end = 0;
        const long n = repeat(pass, i + 1, end);
        if (n < 0) {
            out += pass[i];
            continue;
        }
        out.append(static_cast<std::size_t>(n), pass[i]);
        i = end - 1;
    }
    if (out.size() > 1'000'000) why = "--pipeline-model-parallel-layout unrolls to more than a million layers";
    return out;
}

}  // namespace

std::string parse_pipeline_layout(const std::string& text, std::vector<int>& stage_layers) {
    std::string why;
    const std::string flat = unrolled(text, why);
    if (!why.empty()) return why;
    const std::string what = "--pipeline-model-parallel-layout '" + text + "'";
    stage_layers.assign(1, 0);
    int embeddings = 0, losses = 0;
    for (std::size_t i = 0; i < flat.size(); ++i) {
        const char c = flat[i];
        if (c == '|') {
            stage_layers.push_back(0);
        } else if (c == 't') {
            ++stage_layers.back();
        } else if (c == 'E') {
            if (i != 0) return what + ": the embedding E must be the first stage's first layer";
            ++embeddings;
        } else if (c == 'L') {
            if (i + 1 != flat.size()) return what + ": the loss L must be the last stage's last layer";
            ++losses;
        } else if (c == 'm') {
            return what + ": multi-token prediction layers (m) are not implemented";
        } else {
            return what + ": '" + std::string(1, c) +
                   "' is not a layer (E embedding, t decoder layer, L loss; stages split by '|', "
                   "(...)*n and x*n repeat, commas are cosmetic)";
        }
    }
    if (embeddings != 1 || losses != 1) return what + ": it must start with the embedding E and end with the loss L";
    return "";
}

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
