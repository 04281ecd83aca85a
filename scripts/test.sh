#!/usr/bin/env bash
# The test command: install what is missing, build (Release, CPU + CUDA when found), run
# every test through CTest. Exits non-zero when any test fails.
#   scripts/test.sh [ctest arguments, e.g. -R config]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${GPT_BUILD_DIR:-build}
# Oversubscribed MPI tests on 2 cores: our communicator yields while waiting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900 "$@"
