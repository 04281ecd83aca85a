// A CPU backend whose memory the host cannot address, standing in for a GPU in tests.
//
// It runs every op on a CpuBackend but hands out pointers moved by 2^62 (non-canonical
// addresses on x86-64 and AArch64): pointer arithmetic on them works as on device pointers,
// and any host load or store through one faults at once. host_memory() is false, so the
// trainer takes its device paths (staged communication, host copies for checkpoints and
// losses); results must equal the CPU backend's bit for bit, since the same kernels run.
// This is how CI checks, without a GPU, that nothing outside a backend touches device memory.
#pragma once

#include <memory>

#include "backend/backend.hpp"

namespace gpt::test {

std::unique_ptr<Backend> make_emulated_device_backend();

}  // namespace gpt::test
