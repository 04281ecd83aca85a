// The planner's parameter count per (pipeline stage, TP rank) against the model's own
// layout table (lib/model ParamLayout). Both read the one count (config/param_count.hpp,
// checked against published counts in test_model_shape.cpp) and ParamLayout checks its
// table against it per chunk; this adds the planner's stage-to-chunks mapping under
// interleaving and the flat buffers' alignment slack over whole stages.
#include <gtest/gtest.h>

#include "model/model_spec.hpp"
#include "model/param_layout.hpp"
#include "plan/model_shape.hpp"
#include "plan_fixtures.hpp"

namespace gpt::plan::test {
namespace {

model::ModelDims dims_for(const ModelShape& m, int tp, int tp_rank) {
    model::ModelDims d;
    d.num_layers = m.num_layers;
    d.hidden = m.hidden;
    d.heads = m.heads;
    d.head_dim = m.hidden / m.heads;
    d.ffn = m.ffn;
    d.seq = m.seq;
    d.max_positions = m.max_positions;
    d.vocab_padded = model::pad_vocab_size(m.vocab, m.vocab_divisible_by, tp);
    d.tp_size = tp;
    d.tp_rank = tp_rank;
    d.query_groups = m.query_groups;
    d.swiglu = m.swiglu;
    d.linear_bias = m.linear_bias;
    d.rmsnorm = m.rmsnorm;
    d.rope = !m.position_table;
    d.untied_output = m.untied_output;
    return d;
}

// Elements one rank holds over all its model chunks (virtual stages), as the model lays
// them out: chunk c of stage s runs layers [(c p + s) L/(p v), ...) (Megatron's interleaving).
struct Held {
    std::int64_t numel = 0;     // parameters
    std::int64_t elements = 0;  // flat-buffer elements incl. alignment padding
};
Held model_layout_count(const ModelShape& m, int tp, int tp_rank, int pp, int vp, int stage) {
    Held h;
    const int per_chunk = m.num_layers / (pp * vp);
    for (int c = 0; c < vp; ++c) {
        model::ChunkSpec chunk;
        chunk.first_layer = (c * pp + stage) * per_chunk;
        chunk.num_layers = per_chunk;
        chunk.pre_process = stage == 0 && c == 0;
        chunk.post_process = stage == pp - 1 && c == vp - 1;
        model::ParamLayout layout(dims_for(m, tp, tp_rank), chunk);
        for (const auto& e : layout.entries()) h.numel += e.numel;
        h.elements += layout.total_elements();
    }
    return h;
}

TEST(ModelLayout, StageParamsEqualTheModelsLayoutTable) {
    // And a Llama-style shape: 4 K/V groups, SwiGLU, RMSNorm, rope, untied, no biases.
    ModelShape llama = gpt(8, 256, 8, 128);
    llama.query_groups = 4;
    llama.swiglu = true;
    llama.ffn = 688;
    llama.linear_bias = false;
    llama.rmsnorm = true;
    llama.position_table = false;
    llama.untied_output = true;
    const ModelShape shapes[] = {gpt22b(), gpt(48, 1600, 25, 1024), gpt(12, 768, 12, 1024), gpt(8, 256, 8, 128),
                                 llama};
    for (const ModelShape& m : shapes) {
        for (int tp : {1, 2, 4, 8}) {
            if (m.heads % tp || (m.query_groups > 0 && m.query_groups % tp) || m.ffn % tp) continue;
            for (int pp : {1, 2, 3, 4}) {
                if (m.num_layers % pp) continue;
                for (int vp : {1, 2}) {
                    // Interleaving needs a pipeline (the planner proposes it only for PP > 2).
                    if (vp > 1 && pp == 1) continue;
                    if ((m.num_layers / pp) % vp) continue;
                    for (int stage = 0; stage < pp; ++stage) {
                        for (int tp_rank : {0, tp - 1}) {
                            Held held = model_layout_count(m, tp, tp_rank, pp, vp, stage);
                            std::int64_t planned = stage_params(m, tp, pp, stage).total();
                            EXPECT_EQ(planned, held.numel) << "h " << m.hidden << " TP" << tp << " PP" << pp
                                                           << " VP" << vp << " stage " << stage;
                            // The flat buffers align each tensor to 64 elements; the planner
                            // leaves that slack out, well under 0.1% of the stage.
                            EXPECT_GE(held.elements, held.numel);
                            EXPECT_LT(double(held.elements - held.numel), 1e-3 * double(held.numel));
                        }
                    }
                }
            }
        }
    }
}

TEST(ModelLayout, VocabPaddingAgrees) {
    ModelShape m = gpt22b();
    for (int tp : {1, 2, 3, 4, 8, 16})
        EXPECT_EQ(padded_vocab(m, tp), model::pad_vocab_size(m.vocab, m.vocab_divisible_by, tp)) << tp;
}

}  // namespace
}  // namespace gpt::plan::test
