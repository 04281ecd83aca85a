#include "model/document_mask.hpp"

namespace gpt::model {

void document_arrays(const std::int32_t* tokens, std::int64_t b, std::int64_t s, std::int64_t stride,
                     std::int32_t eod, std::int32_t* positions, std::int32_t* doc_start) {
    for (std::int64_t bi = 0; bi < b; ++bi) {
        std::int32_t start = 0;
        for (std::int64_t j = 0; j < s; ++j) {
            if (j > 0 && tokens[bi * stride + j - 1] == eod) start = static_cast<std::int32_t>(j);
            if (positions) positions[bi * s + j] = static_cast<std::int32_t>(j) - start;
            if (doc_start) doc_start[bi * s + j] = start;
        }
    }
}

}  // namespace gpt::model
