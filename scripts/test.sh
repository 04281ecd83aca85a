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
# Sanitizers (cmake/GptSanitizers.cmake, tests/sanitizers, tests/fuzz), in their own clang
# build trees, CPU backend only:
#  - AddressSanitizer + UndefinedBehaviorSanitizer (+ libFuzzer coverage): the single-process
#    tests of the readers, kernels, model and optimizer, every fuzz target's corpus replay,
#    and a bounded fuzzing run of each target (GPT_FUZZ_SECONDS each, default 10);
#  - ThreadSanitizer: the threaded parts, i.e. the preprocess workers, the checkpoint
#    checksum worker and the CPU backend's OpenMP loops with 2 threads.
# They run by default when no ctest arguments were given; GPT_TEST_SANITIZE=0 leaves them
# out, GPT_TEST_SANITIZE=1 runs them (with the arguments) anyway.
if [ "${GPT_TEST_SANITIZE:-$([ $# -eq 0 ] && echo 1 || echo 0)}" != 0 ]; then
  san_start=$SECONDS
  SAN_CMAKE=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
             "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG")
  if command -v ccache >/dev/null 2>&1; then
    SAN_CMAKE+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  ASAN_DIR=${GPT_ASAN_BUILD_DIR:-build-asan}
  if [ ! -f "$ASAN_DIR/build.ninja" ]; then
    cmake -S . -B "$ASAN_DIR" "${SAN_CMAKE[@]}" -DGPT_SANITIZE=address,undefined -DGPT_FUZZ=ON
  fi
  cmake -S . -B "$ASAN_DIR" -DGPT_FUZZ_SECONDS="${GPT_FUZZ_SECONDS:-10}" >/dev/null
  cmake --build "$ASAN_DIR" -j "$(nproc)" --target test_core test_config test_data_tokenizer test_data_indexed \
    test_data_preprocess test_data_gpt_dataset test_ckpt_selection test_ckpt_roundtrip test_ckpt_validation \
    test_backend test_model test_optim test_fuzz_findings gpt_fuzz_targets
  ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$(nproc)" --timeout 900 "$@" \
    -R '^(test_core|test_config|test_data_(tokenizer|indexed|preprocess)|test_data_gpt_dataset\.np1|test_ckpt_selection|test_ckpt_(roundtrip|validation)\.np1|test_backend|test_model\.np1|test_optim|test_fuzz_findings|fuzz_replay_.*)$' || rc=$?
  ctest --test-dir "$ASAN_DIR" -L '^fuzz$' --output-on-failure -j "$(nproc)" "$@" || rc=$?
  TSAN_DIR=${GPT_TSAN_BUILD_DIR:-build-tsan}
  if [ ! -f "$TSAN_DIR/build.ninja" ]; then
    cmake -S . -B "$TSAN_DIR" "${SAN_CMAKE[@]}" -DGPT_SANITIZE=thread
  fi
  cmake --build "$TSAN_DIR" -j "$(nproc)" --target test_data_preprocess test_ckpt_validation test_backend
  # libomp reports its own synchronisation to ThreadSanitizer through the Archer tool.
  OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES=$(clang -print-resource-dir)/../../libarcher.so \
    ctest --test-dir "$TSAN_DIR" --output-on-failure -j 1 --timeout 900 "$@" \
    -R '^(test_data_preprocess|test_ckpt_validation\.np1|test_backend)$' || rc=$?
  echo "sanitizer builds and runs: $((SECONDS - san_start)) s"
fi
exit $rc
