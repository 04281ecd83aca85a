#include "train/monitor/spike_guard.hpp"

#include <algorithm>
#include <cmath>

#include "core/errors.hpp"
#include "log/log.hpp"

namespace gpt::train {

namespace {
constexpr double kRelativeFloor = 0.01;
}

SpikeDetector::SpikeDetector(int window, double zscore)
    : capacity_(static_cast<std::size_t>(window)), threshold_(zscore) {}

SpikeVerdict SpikeDetector::judge(double loss) {
    SpikeVerdict v;
    if (window_.size() == capacity_) {
        double sum = 0.0;
        for (double x : window_) sum += x;
        v.mean = sum / static_cast<double>(window_.size());
        double sq = 0.0;
        for (double x : window_) sq += (x - v.mean) * (x - v.mean);
        v.stddev = std::sqrt(sq / static_cast<double>(window_.size() - 1));
        const double spread = std::max(v.stddev, kRelativeFloor * std::fabs(v.mean));
        v.zscore = spread > 0.0 ? (loss - v.mean) / spread : 0.0;
        v.spike = v.zscore > threshold_;
    }
    if (!v.spike) {
        window_.push_back(loss);
        if (window_.size() > capacity_) window_.pop_front();
    }
    return v;
}

SpikeGuard::SpikeGuard(const MonitorConfig& m)
    : detector_(m.spiky_loss_window, m.spiky_loss_zscore), max_consecutive_(m.spiky_loss_max_consecutive) {}

bool SpikeGuard::skip(double loss, std::int64_t iteration, std::int64_t first_sample, std::int64_t batch,
                      const std::string& last_good_checkpoint) {
    const SpikeVerdict v = detector_.judge(loss);
    if (!v.spike) {
        in_a_row_ = 0;
        return false;
    }
    ++in_a_row_;
    ++total_;
    GPT_REQUIRE(in_a_row_ < max_consecutive_, NumericError, in_a_row_,
                " spiky losses in a row (--check-for-spiky-loss): iteration ", iteration, " lm loss ", loss,
                " is ", v.zscore, " standard deviations above the mean ", v.mean, " of the last ",
                detector_.size(), " accepted losses (samples ", first_sample, "..", first_sample + batch - 1,
                "). The last good checkpoint: ", last_good_checkpoint,
                ". HINT: resume from it with a lower --lr, or look at those samples");
    GPT_LOG(warning) << "spiky loss at iteration " << iteration << ": lm loss " << loss << " is "
                     << v.zscore << " standard deviations above the mean " << v.mean << " (std "
                     << v.stddev << ") of the last " << detector_.size()
                     << " accepted losses; skipped the update of samples " << first_sample << ".."
                     << first_sample + batch - 1 << " (consumed-samples order)";
    return true;
}

}  // namespace gpt::train
