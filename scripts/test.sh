#!/usr/bin/env bash
# The test command: install what is missing, build (Release, CPU + CUDA when found), run
# every test through CTest, then the GPU tests on the CUDA emulator (its own build tree).
# Exits non-zero when any test fails.
#   scripts/test.sh [ctest arguments, e.g. -R config]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
BUILD_DIR=${GPT_BUILD_DIR:-build}
# The cores, counted before OMP_NUM_THREADS is set: GNU nproc prints that variable when set.
CORES=$(nproc)
# Oversubscribed MPI tests on 2 cores: our communicator yields while waiting.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# Builds and the time-bounded fuzzers use every core. Tests run one at a time (TESTS_JOBS): the
# MPI tests oversubscribe the cores by themselves, and the suite has only ever been run so.
TESTS_JOBS=${GPT_TEST_JOBS:-1}
rc=0
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$TESTS_JOBS" --timeout 900 "$@" || rc=$?
# The CUDA code on CPUs: the GPU-labelled tests built for the SIMT emulator
# (tests/cuda_emu, -DGPT_CUDA_EMU=ON) run every kernel, cuBLASLt call and NCCL operation
# of the CUDA backend against the CPU backend. GPT_TEST_EMU=0 leaves them out.
if [ "${GPT_TEST_EMU:-1}" != 0 ]; then
  EMU_DIR=${GPT_EMU_BUILD_DIR:-build-emu}
  if [ ! -f "$EMU_DIR/build.ninja" ]; then
    cmake -S . -B "$EMU_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=OFF -DGPT_CUDA_EMU=ON \
      $(command -v ccache >/dev/null 2>&1 && echo -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
  fi
  cmake --build "$EMU_DIR" -j "$CORES" --target gpt_gpu_tests
  ctest --test-dir "$EMU_DIR" -L gpu --output-on-failure -j "$TESTS_JOBS" --timeout 900 "$@" || rc=$?
fi
# Sanitizers (cmake/GptSanitizers.cmake, tests/sanitizers, tests/fuzz), in their own clang
# build trees, CPU backend only. GPT_TEST_SANITIZE:
#   fuzz: an AddressSanitizer + UndefinedBehaviorSanitizer build (+ libFuzzer coverage) of
#         the fuzz targets replays their corpora and the plain tests of their findings, and
#         runs each target for GPT_FUZZ_SECONDS (7: the suite's time budget; longer by hand);
#   ci (the default without ctest arguments): also the readers' unit tests (config, tokenizer,
#         .idx/.bin) under ASan+UBSan, and ThreadSanitizer on the preprocess
#         workers and the checkpoint checksum worker (about 3 minutes of cold build on 2 cores);
#   all: also the single-process tests of the readers, kernels, model and optimizer under
#         ASan+UBSan, and the CPU backend's OpenMP loops with 2 threads under ThreadSanitizer;
#   0:    none (the default when ctest arguments were given).
SANITIZE=${GPT_TEST_SANITIZE:-$([ $# -eq 0 ] && echo ci || echo 0)}
if [ "$SANITIZE" != 0 ]; then
  san_start=$SECONDS
  SAN_CMAKE=(-G Ninja -DCMAKE_BUILD_TYPE=Release -DGPT_CUDA=OFF -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
             "-DCMAKE_CXX_FLAGS_RELEASE=-O1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELEASE=-O1 -DNDEBUG")
  # No ccache here: these trees share no object with build/ or each other, so a fresh clone
  # (CI) gets no hit, and a cold ccache's preprocessing pass made clang's -O1 sanitizer
  # compiles about 30% slower (the TSan targets: 91 s plain, 119 s through ccache, 2 cores).
  ASAN_DIR=${GPT_ASAN_BUILD_DIR:-build-asan}
  if [ ! -f "$ASAN_DIR/build.ninja" ]; then
    cmake -S . -B "$ASAN_DIR" "${SAN_CMAKE[@]}" -DGPT_SANITIZE=address,undefined -DGPT_FUZZ=ON
  fi
  cmake -S . -B "$ASAN_DIR" -DGPT_FUZZ_SECONDS="${GPT_FUZZ_SECONDS:-7}" >/dev/null
  ASAN_TARGETS=(gpt_fuzz_targets test_fuzz_findings)
  ASAN_TESTS='test_fuzz_findings|fuzz_replay_.*'
  if [ "$SANITIZE" = ci ] || [ "$SANITIZE" = all ]; then
    # The readers' unit tests (config and flags, tokenizer, .idx/.bin) reuse the libraries
    # the fuzz targets already built: a CPU-test subset under ASan+UBSan for little time.
    ASAN_TARGETS+=(test_config test_data_tokenizer test_data_indexed)
    ASAN_TESTS+='|test_config|test_data_(tokenizer|indexed)'
  fi
  if [ "$SANITIZE" = all ]; then
    ASAN_TARGETS+=(test_core test_data_preprocess
                   test_data_gpt_dataset test_ckpt_selection test_ckpt_roundtrip
                   test_backend test_model test_optim)
    ASAN_TESTS+='|test_core|test_data_preprocess|test_data_gpt_dataset\.np1'
    ASAN_TESTS+='|test_ckpt_selection|test_ckpt_roundtrip\.np1|test_backend|test_model\.np1|test_optim'
  fi
  cmake --build "$ASAN_DIR" -j "$CORES" --target "${ASAN_TARGETS[@]}"
  ctest --test-dir "$ASAN_DIR" --output-on-failure -j "$TESTS_JOBS" --timeout 900 "$@" -R "^($ASAN_TESTS)\$" || rc=$?
  ctest --test-dir "$ASAN_DIR" -L '^fuzz$' --output-on-failure -j "$CORES" "$@" || rc=$?
  if [ "$SANITIZE" != fuzz ]; then
    TSAN_DIR=${GPT_TSAN_BUILD_DIR:-build-tsan}
    if [ ! -f "$TSAN_DIR/build.ninja" ]; then
      cmake -S . -B "$TSAN_DIR" "${SAN_CMAKE[@]}" -DGPT_SANITIZE=thread
    fi
    TSAN_TARGETS=(test_data_preprocess test_ckpt_validation)
    TSAN_TESTS='test_data_preprocess|test_ckpt_validation\.np1'
    if [ "$SANITIZE" = all ]; then
      TSAN_TARGETS+=(test_backend)
      TSAN_TESTS+='|test_backend'
    fi
    cmake --build "$TSAN_DIR" -j "$CORES" --target "${TSAN_TARGETS[@]}"
    # libomp reports its own synchronisation to ThreadSanitizer through the Archer tool.
    # Left out: the tests that run preprocess_data under a file-size limit (`ulimit -f`,
    # 4-8 KiB). ThreadSanitizer's runtime writes a 512 KiB marker file (/tmp/tsan.rodata.PID)
    # at start-up and maps it over the shadow of read-only segments; the limit cuts that
    # write short and the first shadow read past the file's end is a SIGBUS (BUS_ADRERR in
    # __tsan::MemoryAccessRange, seen when UCX patches libucm's code at MPICH's init). The
    # runtime, not the tool: the same runs pass under ASan and in the plain build.
    GTEST_FILTER=-Preprocess.WriteErrorLeavesNoIndex:Preprocess.FailedRewriteKeepsThePreviousDataset OMP_NUM_THREADS=2 OMP_TOOL_LIBRARIES=$(clang -print-resource-dir)/../../libarcher.so \
      ctest --test-dir "$TSAN_DIR" --output-on-failure -j 1 --timeout 900 "$@" \
      -R "^($TSAN_TESTS)\$" || rc=$?
  fi
  echo "sanitizer builds and runs ($SANITIZE): $((SECONDS - san_start)) s"
fi
exit $rc
