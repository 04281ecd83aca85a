#include "train/step/loss_tally.hpp"

#include "core/errors.hpp"

namespace gpt::train {

double mean_loss(const LossTally& t, const std::string& what) {
    GPT_REQUIRE(t.tokens > 0.0, DataError, what,
                ": every token is an end-of-document token, so --eod-mask-loss leaves no token for the "
                "loss. HINT: check the data (documents of one token?) or drop --eod-mask-loss");
    return t.sum / t.tokens;
}

}  // namespace gpt::train
