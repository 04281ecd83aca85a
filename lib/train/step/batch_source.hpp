// Where the trainer gets micro-batches from: lib/data's MicroBatchLoader in production
// (see pretrain.cpp), anything that yields token ids in tests and benchmarks.
#pragma once

#include <cstdint>

namespace gpt::train {

class MicroBatchSource {
public:
    virtual ~MicroBatchSource() = default;
    // Writes this rank's next micro-batch: (micro_batch, seq + 1) token ids, row-major.
    virtual void next(std::int32_t* tokens) = 0;
};

}  // namespace gpt::train
