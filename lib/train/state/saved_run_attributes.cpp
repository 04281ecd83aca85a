#include "train/state/saved_run_attributes.hpp"

#include "config/options.hpp"

namespace gpt::train {

void write_saved_run(ckpt::CheckpointWriter& w, const Config& cfg) {
    w.set_attribute(kSavedRunAttribute, encode_saved_run(cfg));
    w.set_attribute(kArgumentsTableAttribute, format_arguments(cfg));
}

std::optional<SavedRun> read_saved_run(const ckpt::CheckpointReader& r) {
    if (r.has_attribute(kSavedRunAttribute)) return decode_saved_run(r.attribute_string(kSavedRunAttribute), r.file());
    if (r.has_attribute(kArgumentsTableAttribute))
        return saved_run_from_table(r.attribute_string(kArgumentsTableAttribute), r.file());
    return std::nullopt;
}

}  // namespace gpt::train
