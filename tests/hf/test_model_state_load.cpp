// The converter's and gpt_generate's load of a checkpoint (train/load_model_state, no
// trainer): exactly the saving run's fp32 main parameters, not the stored bf16 model weights,
// for the GPT-2 tensors and the Llama-style ones (untied output layer, grouped QKV, SwiGLU).
#include <gtest/gtest.h>
#include <mpi.h>

#include <memory>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "dist/process_groups.hpp"
#include "generation/load_model.hpp"
#include "hf/one_rank_model.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt {
namespace {

// A bf16 run's checkpoint after 2 iterations, and the run's parameters when it saved.
struct Saved {
    std::string dir;
    std::vector<float> main;   // the optimizer's fp32 main parameters
    std::vector<float> model;  // the bf16 model's parameters (their rounding), as fp32
};

Saved train_and_save(bool llama) {
    Config cfg = test::tiny::short_train();
    if (llama) test::tiny::llama_style(cfg.model);
    cfg.training.bf16 = true;
    Saved s;
    s.dir = test::scratch_dir(llama ? "model_state_load_llama" : "model_state_load_gpt2");
    cfg.checkpoint.save = s.dir;
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    const std::unique_ptr<Backend> be = make_backend("cpu", 0);
    train::Trainer tr(cfg, groups, *be);
    test::WalkSource src(61, 16, 2, 0, 1, 0);
    for (int i = 0; i < 2; ++i) tr.train_step(src);
    tr.save_checkpoint();
    model::GptModel& m = tr.chunks().chunk(0);
    const auto n = static_cast<std::size_t>(m.layout().total_elements());
    const float* main = tr.chunks().optimizer(0).main_params();
    s.main.assign(main, main + n);
    s.model.resize(n);
    m.get_parameters(s.model.data());
    return s;
}

const Saved& saved(bool llama) {
    static const Saved gpt2 = train_and_save(false), llama_style = train_and_save(true);
    return llama ? llama_style : gpt2;
}

class ModelStateLoad : public ::testing::TestWithParam<bool> {};

TEST_P(ModelStateLoad, TheConverterReadsTheMainParameters) {
    const Saved& s = saved(GetParam());
    ASSERT_NE(s.main, s.model) << "the bf16 weights equal the main parameters: the test could not tell them apart";
    const hf::LoadedCheckpoint ck = hf::load_checkpoint_one_rank(s.dir, -1);
    EXPECT_EQ(ck.iteration, 2);
    EXPECT_EQ(ck.params, s.main);
    EXPECT_EQ(ck.layout().total_elements(), static_cast<std::int64_t>(s.main.size()));
    EXPECT_EQ(ck.model().untie_embeddings_and_output_weights, GetParam());
}

TEST_P(ModelStateLoad, GenerationReadsTheMainParameters) {
    const Saved& s = saved(GetParam());
    const generation::LoadedModel m = generation::load_model(MPI_COMM_SELF, s.dir, -1, {"--device", "cpu"}, 0, 1);
    EXPECT_EQ(m.iteration, 2);
    EXPECT_EQ(m.params, s.main);
}

INSTANTIATE_TEST_SUITE_P(Models, ModelStateLoad, ::testing::Values(false, true),
                         [](const auto& info) { return std::string(info.param ? "LlamaStyle" : "Gpt2"); });

}  // namespace
}  // namespace gpt
