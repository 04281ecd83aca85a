#include "ckpt/write_plan.hpp"

namespace gpt::ckpt {

WritePlan plan_write(const std::vector<WriteItem>& items, std::size_t first_entry) {
    WritePlan plan;
    plan.datasets.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
        const WriteItem& it = items[i];
        DatasetWrite d;
        d.entry = first_entry + i;
        d.esize = h5::stored_size(it.type);
        d.elements = it.sel.num_elements(it.shape);
        // Collective and exchanged tensors need every rank, also one with nothing to write.
        if (it.collective) d.path = WritePath::Collective;
        else if (it.exchange) d.path = WritePath::Exchange;
        else if (d.elements > 0) d.path = WritePath::Direct;
        plan.datasets.push_back(d);
    }
    return plan;
}

}  // namespace gpt::ckpt
