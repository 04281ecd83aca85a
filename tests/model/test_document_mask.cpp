// --reset-position-ids and --reset-attention-mask: the arrays against Megatron's mask and
// position ids built its way, and what they mean for the whole model: a sample packed from
// documents computes, row for row, what each document computes alone.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "model/document_mask.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

// Megatron's get_ltor_masks_and_position_ids, written its way: a lower-triangular [s, s]
// mask, and for each EOD input i in order, mask[i+1:, :i+1] = 0 and positions[i+1:] -=
// i + 1 - prev, prev = i + 1.
void megatron_masks(const std::int32_t* tokens, int s, std::int32_t eod, std::vector<int>& mask,
                    std::vector<std::int32_t>& positions) {
    mask.assign(static_cast<std::size_t>(s * s), 0);
    positions.resize(static_cast<std::size_t>(s));
    for (int i = 0; i < s; ++i) {
        positions[static_cast<std::size_t>(i)] = i;
        for (int j = 0; j <= i; ++j) mask[static_cast<std::size_t>(i * s + j)] = 1;
    }
    int prev = 0;
    for (int i = 0; i < s; ++i) {
        if (tokens[i] != eod) continue;
        for (int r = i + 1; r < s; ++r)
            for (int c = 0; c <= i; ++c) mask[static_cast<std::size_t>(r * s + c)] = 0;
        for (int r = i + 1; r < s; ++r) positions[static_cast<std::size_t>(r)] -= i + 1 - prev;
        prev = i + 1;
    }
}

TEST(DocumentArrays, FollowMegatronsMaskAndPositions) {
    const int b = 3, s = 40;
    const std::int32_t eod = 4;
    std::mt19937 rng(5);
    std::uniform_int_distribution<int> u(0, 5);  // EOD about one token in six, runs of them too
    std::vector<std::int32_t> tokens(static_cast<std::size_t>(b * (s + 1)));
    for (auto& t : tokens) t = u(rng);
    tokens[0] = eod;      // a one-token first document
    tokens[s - 1] = eod;  // an EOD as the last input
    std::vector<std::int32_t> positions(static_cast<std::size_t>(b * s)), start(positions.size());
    document_arrays(tokens.data(), b, s, s + 1, eod, positions.data(), start.data());
    for (int bi = 0; bi < b; ++bi) {
        std::vector<int> mask;
        std::vector<std::int32_t> pos;
        megatron_masks(tokens.data() + bi * (s + 1), s, eod, mask, pos);
        for (int i = 0; i < s; ++i) {
            const std::int32_t first = start[static_cast<std::size_t>(bi * s + i)];
            EXPECT_EQ(positions[static_cast<std::size_t>(bi * s + i)], pos[static_cast<std::size_t>(i)])
                << "sample " << bi << " position " << i;
            for (int j = 0; j < s; ++j)  // row i attends exactly to keys [first, i]
                EXPECT_EQ(mask[static_cast<std::size_t>(i * s + j)], j >= first && j <= i ? 1 : 0)
                    << "sample " << bi << " row " << i << " key " << j;
        }
    }
}

struct PackedCase {
    const char* name;
    bool llama;  // rope, grouped query attention (else learned absolute positions)
    bool flash;
};

// Documents [3, 5] packed into one sample of 8 (the first ends with its EOD) against each run
// alone in a model of its own length: the loss sums, the logits of every row and the
// parameter gradients (the packed sample's are the documents' summed) agree to fp32 rounding
// (the same products, tiled at other row offsets). Without the flags they do not: the
// second document's rows then see the first and sit at positions 3..7.
class PackedDocuments : public ::testing::TestWithParam<PackedCase> {};

TEST_P(PackedDocuments, EqualEachDocumentAlone) {
    const PackedCase pc = GetParam();
    auto be = make_backend("cpu", 0);
    auto tp = test::self_comm();
    const std::int32_t eod = 49;
    // The packed sample (8 inputs and the last target) and the two documents' own samples.
    const std::vector<std::int32_t> packed{7, 21, eod, 3, 30, 12, 44, 9, 17};
    const std::vector<std::int32_t> first{7, 21, eod, 3}, second{3, 30, 12, 44, 9, 17};
    struct Out {
        double loss;
        std::vector<float> logits, grads;
    };
    auto run = [&](const std::vector<std::int32_t>& tokens, int seq, bool reset_positions, bool reset_mask) {
        ModelConfig mc = pc.llama ? test::tiny::llama_model() : test::tiny::model();
        mc.seq_length = seq;
        mc.max_position_embeddings = 8;  // one position table for every length
        const ModelDims dims = make_model_dims(mc, 50, 1, 0);
        ModelOptions opt;
        opt.flash_attention = pc.flash;
        opt.seed = 11;
        opt.document_token = reset_positions || reset_mask ? eod : -1;
        opt.reset_position_ids = reset_positions;
        opt.reset_attention_mask = reset_mask;
        GptModel m(dims, {0, 2, true, true}, opt, 1, *be, *tp);
        std::vector<float> p(static_cast<std::size_t>(m.layout().total_elements()));
        m.init_parameters_host(p.data());
        std::mt19937 rng(3);
        std::normal_distribution<float> n(0.0f, 0.3f);  // attention far from uniform
        for (auto& x : p) x += n(rng);
        m.set_parameters(p.data());
        m.zero_grads();
        m.set_batch(0, tokens.data());
        Out o;
        o.loss = m.forward(0, true, 0);
        const std::int64_t V = dims.local_vocab();
        o.logits.resize(static_cast<std::size_t>(seq * V));
        be->copy_to_host(o.logits.data(), m.logits(), o.logits.size() * 4);
        m.backward(0, 1.0f);
        o.grads.resize(p.size());
        m.get_grads(o.grads.data());
        return o;
    };
    const Out a = run(first, 3, false, false), b = run(second, 5, false, false);
    const std::size_t split = a.logits.size();  // the first document's rows come first
    // The largest difference of rows [from, to) of two logit arrays, relative to 1 + |value|.
    auto worst = [](const std::vector<float>& x, std::size_t xfrom, const std::vector<float>& y, std::size_t yfrom,
                    std::size_t n) {
        double w = 0.0;
        for (std::size_t i = 0; i < n; ++i)
            w = std::max(w, std::abs(double(x[xfrom + i]) - y[yfrom + i]) / (1.0 + std::abs(y[yfrom + i])));
        return w;
    };
    // fp32: the same products at other row offsets and tile boundaries, a few ulp of O(1).
    const double tol = 1e-5;
    const Out both = run(packed, 8, true, true);
    EXPECT_LT(worst(both.logits, 0, a.logits, 0, split), tol);
    EXPECT_LT(worst(both.logits, split, b.logits, 0, b.logits.size()), tol);
    EXPECT_LT(std::abs(both.loss - (a.loss + b.loss)) / (a.loss + b.loss), tol);
    double num = 0.0, den = 0.0;
    for (std::size_t i = 0; i < both.grads.size(); ++i) {
        const double want = double(a.grads[i]) + b.grads[i];
        num += (both.grads[i] - want) * (both.grads[i] - want);
        den += want * want;
    }
    // Gradients sum over the tokens in another order; relative to their norm.
    EXPECT_LT(std::sqrt(num / den), 1e-4);
    // The control: without the flags the second document's rows are another computation.
    const Out none = run(packed, 8, false, false);
    EXPECT_GT(worst(none.logits, split, b.logits, 0, b.logits.size()), 1e-2);
    // Positions alone (rope is relative, so under the mask its positions cancel out; here
    // they do not): the first document's rows are its own, the second's differ from the
    // run without the flag.
    const Out positions = run(packed, 8, true, false);
    EXPECT_LT(worst(positions.logits, 0, a.logits, 0, split), tol);
    EXPECT_GT(worst(positions.logits, split, none.logits, split, b.logits.size()), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Models, PackedDocuments,
                         ::testing::Values(PackedCase{"gpt_plain", false, false},
                                           PackedCase{"gpt_flash", false, true},
                                           PackedCase{"llama_plain", true, false},
                                           PackedCase{"llama_flash", true, true}),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace gpt::model
