// Training on real English text through lib/text's GPT-2 tokenizer: the loss must fall
// far below the uniform ln(50304) on held-out text. The text is the GPL-3 licence that
// every Debian system ships (base-files), so the test needs no download.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "core/errors.hpp"
#include "text/gpt2_tokenizer.hpp"
#include "train/run/eod_token.hpp"
#include "test_env.hpp"
#include "train/trainer.hpp"
#include "trainer_test_util.hpp"

namespace gpt::train {
namespace {

// Consecutive windows of seq + 1 tokens over [first, last) of a token stream.
class WindowSource final : public MicroBatchSource {
public:
    WindowSource(const std::vector<std::int32_t>& ids, std::size_t first, std::size_t last,
                 int seq, int mbs)
        : ids_(ids), first_(first), count_((last - first - 1) / seq), seq_(seq), mbs_(mbs) {}
    void next(std::int32_t* tokens) override {
        for (int j = 0; j < mbs_; ++j, ++i_) {
            const std::size_t start = first_ + (i_ % count_) * seq_;
            std::copy(ids_.begin() + start, ids_.begin() + start + seq_ + 1, tokens + j * (seq_ + 1));
        }
    }

private:
    const std::vector<std::int32_t>& ids_;
    std::size_t first_, count_;
    int seq_, mbs_;
    std::size_t i_ = 0;
};

// The GPL-3 text in GPT-2 tokens (empty, with a test failure, when the file is missing).
std::vector<std::int32_t> gpl3_tokens(const data::Gpt2Tokenizer& tok) {
    const std::string text_path = "/usr/share/common-licenses/GPL-3";
    std::ifstream in(text_path);
    EXPECT_TRUE(in.good()) << text_path << " missing (Debian's base-files ships it)";
    std::stringstream ss;
    ss << in.rdbuf();
    return tok.encode(ss.str());
}

data::Gpt2Tokenizer gpt2_tokenizer() {
    return data::Gpt2Tokenizer::load(test::source_dir() + "/data/gpt2/gpt2-vocab.json",
                                     test::source_dir() + "/data/gpt2/gpt2-merges.txt");
}

// --eod-mask-loss's token: the GPT-2 vocabulary's <|endoftext|>, the mock data's last id,
// and a clear refusal where the run names no tokenizer or the token misses the vocabulary.
TEST(TrainerRealText, EodTokenComesFromTheTokenizer) {
    Config cfg = test::tiny::train();
    cfg.data.eod_mask_loss = true;
    cfg.data.vocab_file = test::source_dir() + "/data/gpt2/gpt2-vocab.json";
    cfg.data.merge_file = test::source_dir() + "/data/gpt2/gpt2-merges.txt";
    cfg.model.vocab_size = 50257;
    EXPECT_EQ(end_of_document_token(cfg), 50256);
    EXPECT_EQ(end_of_document_token(cfg), gpt2_tokenizer().eod());
    cfg.model.vocab_size = 1000;  // --vocab-size below the tokenizer's
    try {
        end_of_document_token(cfg);
        ADD_FAILURE() << "accepted an EOD outside the vocabulary";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("token 50256 lies outside the vocabulary of 1000"), std::string::npos) << e.what();
    }
    Config mock = test::tiny::train();
    mock.data.mock_data = true;
    EXPECT_EQ(end_of_document_token(mock), mock.model.vocab_size - 1);
    Config none = test::tiny::train();  // real data (none given here) read with --vocab-size alone
    try {
        end_of_document_token(none);
        ADD_FAILURE() << "accepted a run without a tokenizer";
    } catch (const UsageError& e) {
        EXPECT_NE(std::string(e.what()).find("--eod-mask-loss needs the end-of-document token"), std::string::npos)
            << e.what();
    }
}

TEST(TrainerRealText, LossFallsOnEnglishText) {
    const auto tok = gpt2_tokenizer();
    const std::vector<std::int32_t> ids = gpl3_tokens(tok);
    ASSERT_GT(ids.size(), 6000u);

    Config cfg = test::tiny::train();
    cfg.model.vocab_size = tok.vocab_size();  // 50257 -> 50304 padded
    cfg.model.make_vocab_size_divisible_by = 128;
    cfg.model.seq_length = 32;
    cfg.training.micro_batch_size = 4;
    cfg.training.global_batch_size = 8;
    cfg.training.train_iters = 60;
    cfg.training.eval_iters = 4;
    cfg.optimizer.lr = 5e-3;
    cfg.optimizer.lr_warmup_iters = 5;
    dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
    auto be = make_backend("cpu", 0);
    Trainer tr(cfg, groups, *be);
    const std::size_t split = ids.size() * 9 / 10;  // the last tenth is held out
    WindowSource train(ids, 0, split, 32, 4);
    WindowSource valid(ids, split, ids.size(), 32, 4);
    const double valid_before = tr.evaluate(valid, cfg.training.eval_iters);
    EXPECT_NEAR(valid_before, std::log(50304.0), 0.3);
    for (int i = 0; i < 60; ++i) tr.train_step(train);
    WindowSource valid_again(ids, split, ids.size(), 32, 4);
    const double valid_after = tr.evaluate(valid_again, cfg.training.eval_iters);
    EXPECT_LT(valid_after, valid_before - 2.0) << "before " << valid_before << " after " << valid_after;
    EXPECT_LT(tr.history().back().lm_loss, tr.history().front().lm_loss - 2.0);
}

// FP8 training (issue 34) on the same text: the bf16 run and the FP8 run (hybrid formats,
// Megatron's default delayed scaling: history 1, most recent) from the same initialisation
// on the same batches. FP8 rounds every linear layer's inputs to 3 (E4M3) or 2 (E5M2)
// mantissa bits, relative errors up to 2^-4 and 2^-3 per operand, which add noise to each
// step, not a bias: the loss must keep falling as far as bf16's. Bound (measured, see the
// README's FP8 section): at every iteration the FP8 training loss within kFp8LossBand (5%)
// of the bf16 loss, relative (measured 2026-12-06: 0.02% over these 30 iterations; 3.6% over
// 60, whose higher learning rate for longer moves the runs apart more), and the held-out loss
// after training no worse than bf16's by more than the same band (one-sided: on this little
// text the held-out loss is noisy; after 60 iterations FP8's came out lower, 6.96 against
// 7.87).
TEST(TrainerRealText, Fp8LossFollowsBf16) {
    const auto tok = gpt2_tokenizer();
    const std::vector<std::int32_t> ids = gpl3_tokens(tok);
    ASSERT_GT(ids.size(), 6000u);
    const std::size_t split = ids.size() * 9 / 10;
    constexpr double kFp8LossBand = 0.05;
    constexpr int kIters = 30;
    std::vector<std::vector<double>> curves;
    std::vector<double> valid;
    for (const bool fp8 : {false, true}) {
        Config cfg = test::tiny::train();
        cfg.model.vocab_size = tok.vocab_size();
        cfg.model.make_vocab_size_divisible_by = 128;
        cfg.model.seq_length = 32;
        cfg.training.micro_batch_size = 4;
        cfg.training.global_batch_size = 8;
        cfg.training.train_iters = kIters;
        cfg.training.eval_iters = 4;
        cfg.training.bf16 = true;
        cfg.optimizer.lr = 5e-3;
        cfg.optimizer.lr_warmup_iters = 5;
        if (fp8) cfg.fp8.fp8_format = Fp8Scheme::Hybrid;
        dist::ProcessGroups groups(MPI_COMM_SELF, 1, 1);
        auto be = make_backend("cpu", 0);
        Trainer tr(cfg, groups, *be);
        WindowSource train(ids, 0, split, 32, 4);
        std::vector<double> curve;
        for (int i = 0; i < kIters; ++i) curve.push_back(tr.train_step(train).lm_loss);
        WindowSource held_out(ids, split, ids.size(), 32, 4);
        valid.push_back(tr.evaluate(held_out, cfg.training.eval_iters));
        curves.push_back(curve);
    }
    double worst = 0.0;
    for (std::size_t i = 0; i < curves[0].size(); ++i) {
        const double rel = std::abs(curves[1][i] - curves[0][i]) / curves[0][i];
        worst = std::max(worst, rel);
        EXPECT_LE(rel, kFp8LossBand) << "iteration " << i + 1 << ": FP8 " << curves[1][i] << ", bf16 " << curves[0][i];
    }
    EXPECT_LE(valid[1], valid[0] * (1.0 + kFp8LossBand)) << "held-out: FP8 " << valid[1] << ", bf16 " << valid[0];
    EXPECT_LT(curves[1].back(), curves[1].front() - 1.5);
    std::printf("FP8 vs bf16 on GPL-3: worst relative loss difference %.4f over %d iterations; held-out %.4f vs %.4f; "
                "final train loss %.4f vs %.4f\n", worst, kIters, valid[1], valid[0], curves[1].back(), curves[0].back());
}

}  // namespace
}  // namespace gpt::train
