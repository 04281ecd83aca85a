// The lm loss of a pass as Megatron reports it: the per-token losses summed over the tokens
// the loss counts, and how many those are (all of them unless --eod-mask-loss leaves some
// out). Megatron's loss_func returns this pair per micro-batch and the report is
// sum / count over the global batch, so a micro-batch with fewer counted tokens weighs less.
#pragma once

#include <cstdint>
#include <string>

namespace gpt::train {

struct LossTally {
    double sum = 0.0;
    double tokens = 0.0;
    LossTally& operator+=(const LossTally& o) {
        sum += o.sum;
        tokens += o.tokens;
        return *this;
    }
};

// sum / tokens. A tally without a counted token (every token of the pass an EOD input under
// --eod-mask-loss) has no loss: DataError naming `what` (the pass), not a NaN that the
// NaN check would misreport as a numerical fault.
double mean_loss(const LossTally& t, const std::string& what);

}  // namespace gpt::train
