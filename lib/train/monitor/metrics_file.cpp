#include "train/monitor/metrics_file.hpp"

#include <cmath>
#include <cstdio>

#include "core/errors.hpp"

namespace gpt::train {

namespace {
// JSON has no NaN/Infinity: non-finite numbers become null.
std::string num(double v) {
    if (!std::isfinite(v)) return "null";
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.9g", v);
    return buf;
}
}  // namespace

MetricsFile::MetricsFile(const std::string& path) : out_(path, std::ios::trunc), path_(path) {
    GPT_REQUIRE(out_.good(), IoError, "cannot write --metrics-file ", path,
                ". HINT: check that its folder exists and is writable");
}

void MetricsFile::write(const IterationMetrics& m) {
    out_ << "{\"iteration\": " << m.iteration << ", \"lm_loss\": " << num(m.lm_loss)
         << ", \"lr\": " << num(m.lr) << ", \"grad_norm\": " << num(m.grad_norm)
         << ", \"loss_scale\": " << num(m.loss_scale) << ", \"elapsed_ms\": " << num(m.elapsed_ms)
         << ", \"tokens_per_s\": " << num(m.tokens_per_s);
    if (!std::isnan(m.params_norm)) out_ << ", \"params_norm\": " << num(m.params_norm);
    if (m.num_zeros >= 0) out_ << ", \"num_zeros\": " << m.num_zeros;
    out_
         << ", \"skipped\": " << (m.skipped ? "true" : "false") << "}\n";
    out_.flush();
    GPT_REQUIRE(out_.good(), IoError, "writing --metrics-file ", path_, " failed");
}

void MetricsFile::write_eval(std::int64_t iteration, const std::string& split, double lm_loss,
                             const std::string& name) {
    out_ << "{\"iteration\": " << iteration << ", \"split\": \"" << split << "\", ";
    if (!name.empty()) out_ << "\"set\": \"" << name << "\", ";
    out_ << "\"lm_loss\": " << num(lm_loss)
         << ", \"ppl\": " << num(std::exp(std::min(20.0, lm_loss))) << "}\n";
    out_.flush();
    GPT_REQUIRE(out_.good(), IoError, "writing --metrics-file ", path_, " failed");
}

}  // namespace gpt::train
