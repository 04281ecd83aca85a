// The model split over 2 tensor-parallel ranks (heads, MLP columns and the vocabulary
// sharded; Megatron's conjugate all-reduces) computes the same loss and, slice by slice,
// the same gradients as the 1-rank model. Registered as test_model.np2.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>

#include "dist/comm_mpi.hpp"
#include "model_test_util.hpp"

namespace gpt::model {
namespace {

TEST(GptModelTensorParallel, TwoRanksMatchOneRank) {
    int world = 1, rank = 0;
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (world != 2) GTEST_SKIP() << "needs 2 ranks (registered as test_model.np2)";
    auto be = make_backend("cpu", 0);
    ModelConfig mc = test::tiny::model();
    mc.num_attention_heads = 4;
    ModelOptions opt;
    opt.hidden_dropout = 0.1f;  // the same mask on both TP ranks (outside the TP region)
    opt.seed = 3;
    auto self = test::self_comm("tp1");
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    dist::MpiCommunicator tp2(dup, "tp");
    const ModelDims d1 = make_model_dims(mc, 50, 1, 0), d2 = make_model_dims(mc, 50, 2, rank);
    ASSERT_EQ(d1.vocab_padded, d2.vocab_padded);  // 64 either way
    const ChunkSpec all{0, 2, true, true};
    GptModel full(d1, all, opt, 2, *be, *self);
    GptModel part(d2, all, opt, 2, *be, tp2);

    std::vector<float> p(static_cast<std::size_t>(full.layout().total_elements()));
    full.init_parameters_host(p.data());
    for (std::size_t i = 0; i < p.size(); ++i) p[i] += 0.05f * std::sin(0.37f * static_cast<float>(i));
    full.set_parameters(p.data());
    const auto mine = test::take_slices(full.layout(), p, part.layout());
    part.set_parameters(mine.data());

    auto tokens = test::random_tokens(2, d1.seq, 50, 7);
    double loss[2];
    GptModel* models[2] = {&full, &part};
    for (int k = 0; k < 2; ++k) {
        models[k]->zero_grads();
        models[k]->set_batch(0, tokens.data());
        loss[k] = models[k]->forward(0, true, 5);
        models[k]->backward(0, 1.0f / static_cast<float>(models[k]->tokens()));
    }
    EXPECT_NEAR(loss[0], loss[1], 1e-5 * std::abs(loss[0]));
    EXPECT_GT(loss[0], 1.0);
    // Forward: embedding + 2 per layer all-reduces and the three cross-entropy reductions;
    // backward: 2 per layer and the head's input-gradient all-reduce.
    EXPECT_EQ(tp2.stats().calls[static_cast<int>(dist::CommOp::AllReduce)], 1u + 4 + 3 + 4 + 1);

    std::vector<float> g1(p.size()), g2(mine.size());
    full.get_grads(g1.data());
    part.get_grads(g2.data());
    const auto expect = test::take_slices(full.layout(), g1, part.layout());
    for (const auto& e : part.layout().entries())
        for (std::int64_t i = 0; i < e.numel; ++i) {
            const std::size_t k = static_cast<std::size_t>(e.offset + i);
            ASSERT_NEAR(g2[k], expect[k], 1e-5 + 1e-4 * std::abs(expect[k])) << e.name << " " << i;
        }
}

}  // namespace
}  // namespace gpt::model
