// Megatron's assignment of layers to (virtual) pipeline stages: the chunk sizes, in virtual
// stage order, that Megatron's get_num_layers_to_build gives each (pp rank, vp stage), and
// their running sums its get_transformer_layer_offset (worked out by hand below).
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "config/pipeline_split.hpp"
#include "core/errors.hpp"

namespace gpt {
namespace {

constexpr int kNone = PipelineSplit::kNotGiven;

TEST(PipelineSplit, ChunksFollowMegatronsAssignment) {
    struct Case {
        int layers, pp, vp;
        PipelineSplit split;
        std::vector<int> chunks;  // vstage = chunk x pp + stage
    };
    const std::vector<Case> cases{
        {8, 4, 1, {}, {2, 2, 2, 2}},
        {8, 2, 2, {}, {2, 2, 2, 2}},
        {7, 4, 1, {1, kNone}, {1, 2, 2, 2}},          // the middle and last stages share 6
        {7, 4, 1, {kNone, 1}, {2, 2, 2, 1}},
        {10, 4, 1, {2, 2}, {2, 3, 3, 2}},
        {5, 2, 1, {0, kNone}, {0, 5}},                // a first stage of the embedding alone
        {3, 2, 1, {kNone, 3}, {0, 3}},                // the first stage shares what is left: none
        // Interleaved uneven (--num-virtual-stages-per-pipeline-rank 2): stages {2, 4, 4, 2},
        // each halved per round. Megatron's offset of (pp rank 1, vp stage 1):
        // 1 x (1 + 4 + 1) + 1 + 0 = 7 = 1 + 2 + 2 + 1 + 1.
        {12, 4, 2, {2, 2}, {1, 2, 2, 1, 1, 2, 2, 1}},
        // Embedding and loss as layers: (6 + 2) / 4 = 2 slots a stage.
        {6, 4, 1, {kNone, kNone, true, true}, {1, 2, 2, 1}},
        {2, 4, 1, {kNone, kNone, true, true}, {0, 1, 1, 0}},
        // 16 slots, 2 per chunk; Megatron's offset of (pp rank 1, vp stage 0): 0 + 2 - 1 = 1.
        {14, 4, 2, {kNone, kNone, true, true}, {1, 2, 2, 2, 2, 2, 2, 1}},
        {7, 4, 1, {kNone, kNone, true, false}, {1, 2, 2, 2}},
        {3, 1, 1, {kNone, kNone, true, true}, {3}},   // one stage: the flags change nothing
    };
    for (const Case& c : cases) {
        EXPECT_EQ(pipeline_chunk_layers(c.layers, c.pp, c.vp, c.split), c.chunks)
            << c.layers << " layers, PP " << c.pp << " VP " << c.vp;
        for (int stage = 0; stage < c.pp; ++stage) {
            int n = 0;
            for (int chunk = 0; chunk < c.vp; ++chunk) n += c.chunks[static_cast<std::size_t>(chunk * c.pp + stage)];
            EXPECT_EQ(pipeline_stage_layers(c.layers, c.pp, c.vp, c.split, stage), n);
        }
    }
}

TEST(PipelineSplit, ImpossibleSplitsSayWhy) {
    EXPECT_EQ(pipeline_split_problem(8, 4, 1, {1, 1}), "");
    EXPECT_NE(pipeline_split_problem(8, 4, 1, {1, kNone}).find("the 7 layers"), std::string::npos);
    EXPECT_NE(pipeline_split_problem(7, 4, 1, {}).find("HINT: --decoder-first-pipeline-num-layers"), std::string::npos);
    EXPECT_NE(pipeline_split_problem(4, 2, 1, {1, 1}).find("give the two stages 2 layers, not num-layers 4"),
              std::string::npos);
    EXPECT_NE(pipeline_split_problem(4, 2, 1, {-2, kNone}).find("must not be negative"), std::string::npos);
    EXPECT_NE(pipeline_split_problem(4, 1, 2, {}).find("need pipeline-model-parallel-size > 1"), std::string::npos);
    EXPECT_EQ(pipeline_split_problem(6, 2, 2, {2, 4}), "");
    EXPECT_NE(pipeline_split_problem(6, 2, 2, {1, 5}).find("stage 0's 1 layers do not divide into 2 virtual stages"),
              std::string::npos);
    EXPECT_THROW(pipeline_chunk_layers(7, 2, 1, {}), UsageError);
}

// Megatron's --pipeline-model-parallel-layout strings (its parse_str_to_list and
// validate_layer_layout): the decoder layers of each stage in string order, which is the
// virtual-stage order (stage k = chunk x PP + rank).
TEST(PipelineLayout, MegatronsStringsGiveTheStagesLayers) {
    const std::vector<std::pair<std::string, std::vector<int>>> cases{
        {"Et|(tt|)*2,tL", {1, 2, 2, 1}},
        {"E|t*4|t*4|L", {0, 4, 4, 0}},
        {"Ettt|(tt|)*29,tL", [] {
             std::vector<int> v{3};
             v.insert(v.end(), 29, 2);
             v.push_back(1);
             return v;
         }()},
        {"E,t*2,|,(t|)*2,L", {2, 1, 1, 0}},
        {"EtttL", {3}},
        {"(|t)*2,|EL", {}},  // E not first: refused below
    };
    for (const auto& [text, want] : cases) {
        std::vector<int> got;
        const std::string why = parse_pipeline_layout(text, got);
        if (want.empty()) {
            EXPECT_NE(why.find("the embedding E must be the first stage's first layer"), std::string::npos) << why;
            continue;
        }
        EXPECT_EQ(why, "") << text;
        EXPECT_EQ(got, want) << text;
    }
    const std::vector<std::pair<std::string, std::string>> bad{
        {"tE|tL", "the embedding E must be the first stage's first layer"},
        {"Et|L|t", "the loss L must be the last stage's last layer"},
        {"Ett|tt", "it must start with the embedding E and end with the loss L"},
        {"Et|m|L", "multi-token prediction layers (m) are not implemented"},
        {"Et|x|L", "'x' is not a layer (E embedding, t decoder layer, L loss"},
        {"E(t|L", "'(' is not a layer"},
    };
    for (const auto& [text, want] : bad) {
        std::vector<int> got;
        const std::string why = parse_pipeline_layout(text, got);
        EXPECT_NE(why.find(want), std::string::npos) << text << ": " << why;
        EXPECT_NE(why.find("'" + text + "'"), std::string::npos) << why;  // names the string
    }
}

TEST(PipelineLayout, TheStagesArePpTimesVirtualStagesAndHoldEveryLayer) {
    PipelineSplit s;
    ASSERT_EQ(parse_pipeline_layout("Et|(tt|)*2,tL", s.layout), "");
    EXPECT_EQ(pipeline_chunk_layers(6, 2, 2, s), (std::vector<int>{1, 2, 2, 1}));
    EXPECT_EQ(pipeline_stage_layers(6, 2, 2, s, 0), 3);  // chunks 0 and 2
    EXPECT_EQ(pipeline_chunk_layers(6, 4, 1, s), (std::vector<int>{1, 2, 2, 1}));
    EXPECT_NE(pipeline_split_problem(6, 2, 1, s).find("has 4 stages, not pipeline-model-parallel-size 2"),
              std::string::npos);
    EXPECT_NE(pipeline_split_problem(6, 1, 4, s).find("pipeline-model-parallel-size is 1: give the pipeline size"),
              std::string::npos);
    EXPECT_NE(pipeline_split_problem(8, 2, 2, s).find("has 6 decoder layers (t), not num-layers 8"),
              std::string::npos);
    PipelineSplit both = s;
    both.first_stage_layers = 1;
    EXPECT_NE(pipeline_split_problem(6, 2, 2, both).find("drop --decoder-first/last-pipeline-num-layers"),
              std::string::npos);
    both = s;
    both.account_for_loss = true;
    EXPECT_NE(pipeline_split_problem(6, 2, 2, both).find("--account-for-embedding/loss"), std::string::npos);
}

}  // namespace
}  // namespace gpt
