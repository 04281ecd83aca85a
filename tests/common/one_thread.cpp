// Linked into the trainer, model and optimizer tests (gpt_test_one_thread). Their models are
// tiny: OpenMP fork/join costs more than the work, and on a shared 2-core machine waiting
// threads dominate the run time, so they run single-threaded. An explicit OMP_NUM_THREADS
// wins: CTest's *.threads2 entries set it to 2 so that the CPU backend's threaded paths
// (the GEMM split, per-thread layernorm partials) run in CI too.
#include <omp.h>

#include <cstdlib>

namespace {
const int kThreads = (std::getenv("OMP_NUM_THREADS") == nullptr ? omp_set_num_threads(1) : void(), 0);
}  // namespace
