// Range checks of the monitoring flags (see MonitorConfig).
#include <cmath>

#include "config/validate.hpp"
#include "core/errors.hpp"

namespace gpt {

void validate_monitor(const MonitorConfig& m) {
    GPT_REQUIRE(m.timing_log_level >= 0 && m.timing_log_level <= 2, UsageError,
                "--timing-log-level must be 0, 1 or 2, got ", m.timing_log_level);
    if (m.profile)
        GPT_REQUIRE(m.profile_step_start >= 0 && m.profile_step_start < m.profile_step_end,
                    UsageError, "--profile-step-start ", m.profile_step_start,
                    " must be >= 0 and before --profile-step-end ", m.profile_step_end);
    for (const int r : m.profile_ranks)
        GPT_REQUIRE(r >= 0, UsageError, "--profile-ranks must be global ranks (>= 0), got ", r);
    GPT_REQUIRE(m.straggler_minmax_count >= 1, UsageError, "--straggler-minmax-count must be at least 1, got ",
                m.straggler_minmax_count);
    // A z-score needs a spread: three losses are the fewest that give one worth the name.
    GPT_REQUIRE(m.spiky_loss_window >= 3, UsageError, "--spiky-loss-window must be at least 3, got ",
                m.spiky_loss_window);
    GPT_REQUIRE(std::isfinite(m.spiky_loss_zscore) && m.spiky_loss_zscore > 0, UsageError,
                "--spiky-loss-zscore must be a positive number, got ", m.spiky_loss_zscore);
    GPT_REQUIRE(m.spiky_loss_max_consecutive >= 1, UsageError,
                "--spiky-loss-max-consecutive must be at least 1, got ", m.spiky_loss_max_consecutive);
}

}  // namespace gpt
