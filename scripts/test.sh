#!/usr/bin/env bash
# The test command: install what is missing, build (Release, CPU + CUDA when found), run
# every test through CTest, then the GPU tests on the CUDA emulator (its own build tree).
# Exits non-zero when any test fails.
#   scripts/test.sh [ctest arguments, e.g. -R config]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${GPT_BUILD_DIR:-build}
# Oversubscribed MPI tests on 2 cores: our communicator yields while waiting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)" --timeout 900 "$@" || rc=$?
# The CUDA code on CPUs: the GPU-labelled tests built for the SIMT emulator
# (tests/cuda_emu, -DGPT_CUDA_EMU=ON) run every kernel, cuBLASLt call and NCCL operation
# of the CUDA backend against the CPU backend. GPT_TEST_EMU=0 leaves them out.
if [ "${GPT_TEST_EMU:-1}" != 0 ]; then
  EMU_DIR=${GPT_EMU_BUILD_DIR:-build-emu}
  if [ ! -f "$EMU_DIR/build.ninja" ]; then
    cmake -S . -B "$EMU_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=OFF -DGPT_CUDA_EMU=ON
  fi
  cmake --build "$EMU_DIR" -j "$(nproc)" --target gpt_gpu_tests
  ctest --test-dir "$EMU_DIR" -L gpu --output-on-failure -j "$(nproc)" --timeout 900 "$@" || rc=$?
fi
exit $rc
