// The --metrics-file: one JSON object per line, per iteration (and per evaluation), for
// plotting and for scripts that check a run (loss going down, no skipped steps).
#pragma once

#include <cmath>
#include <cstdint>
#include <fstream>
#include <string>

namespace gpt::train {

struct IterationMetrics {
    std::int64_t iteration = 0;
    double lm_loss = 0.0;
    double lr = 0.0;
    double grad_norm = 0.0;  // NaN (written as null) for a skipped iteration
    double params_norm = std::nan("");  // --log-params-norm (NaN: not written)
    std::int64_t num_zeros = -1;        // --log-num-zeros-in-grad (-1: not written)
    double loss_scale = 1.0;
    double elapsed_ms = 0.0;
    double tokens_per_s = 0.0;
    bool skipped = false;
};

class MetricsFile {
public:
    // Truncates `path`; throws IoError when it cannot be written.
    explicit MetricsFile(const std::string& path);
    void write(const IterationMetrics& m);
    // `name`: the validation set's name with --multiple-validation-sets ("": one set).
    void write_eval(std::int64_t iteration, const std::string& split, double lm_loss,
                    const std::string& name = "");

private:
    std::ofstream out_;
    std::string path_;
};

}  // namespace gpt::train
