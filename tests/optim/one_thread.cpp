// The test models are tiny: OpenMP fork/join costs more than the work, and on a shared
// 2-core machine waiting threads dominate the run time. The kernels' threading is covered
// by the backend's own tests, so these binaries run single-threaded.
#include <omp.h>

namespace {
const int kSingleThread = (omp_set_num_threads(1), 0);
}  // namespace
