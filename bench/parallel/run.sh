#!/usr/bin/env bash
# PTD-P on this machine: gpt-tiny's shape (4 layers, hidden 256, seq 256; fp32, micro-batch
# 1, global batch 8) with a 128-token vocabulary, so that the LM head does not make the
# last pipeline stage several times slower than the others (Megatron's bubble formula
# assumes equal stages), on 1, 2 and 4 ranks in every layout: tokens/s, the bytes one
# iteration moves per process group (summed over ranks), and the measured pipeline bubble
# beside the formula (p-1)/(v m).
#
#   bench/parallel/run.sh            # OMP threads per rank: 1 (ranks share the 2 cores)
#   ITERS=8 bench/parallel/run.sh
#
# On a 2-core machine throughput cannot scale: 4 ranks time-share 2 cores, which also
# distorts the measured bubble (a waiting rank yields its core to a computing one); the
# 2-rank rows are the clean ones. The byte counts do not depend on that. Other processes
# on the machine distort everything: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${GPT_BUILD_DIR:-build}
ITERS=${ITERS:-6}
MPIEXEC=${MPIEXEC:-mpiexec}
if [ ! -f "$BUILD_DIR/build.ninja" ] && [ ! -f "$BUILD_DIR/Makefile" ]; then
  echo "run.sh: no build in $BUILD_DIR; run scripts/setup.sh first (or set GPT_BUILD_DIR)" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" --target bench_parallel >/dev/null
BIN="$BUILD_DIR/bench/parallel/bench_parallel"
COMMON=(--config configs/gpt-tiny.ini --vocab-size 128 --make-vocab-size-divisible-by 128 --micro-batch-size 1 --global-batch-size 8 --lr-warmup-iters 0 --iters "$ITERS" --warmup 1)

field() { sed -n "s/.*\"$2\": \([^,}]*\).*/\1/p" <<<"$1" | head -1; }

printf '%-5s %-22s %11s %12s %12s %12s %12s %10s %10s\n' ranks "layout (TP,PP,DP) extras" tokens/s \
  "tp MB/it" "pp MB/it" "dp MB/it" "emb MB/it" "bubble" "(p-1)/vm"
run() {
  local n=$1 label=$2; shift 2
  local out
  out=$(OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 "$MPIEXEC" -n "$n" "$BIN" "${COMMON[@]}" "$@" 2>&1 | grep '^{' || true)
  if [ -z "$out" ]; then echo "run.sh: $label on $n ranks failed" >&2; return 1; fi
  echo "$out" >>"${JSON_OUT:-/dev/null}"
  mb() { awk -v b="$(field "$out" "bytes_$1")" 'BEGIN { printf "%.2f", b / 1048576 }'; }
  printf '%-5s %-22s %11.0f %12s %12s %12s %12s %10.3f %10.3f\n' "$n" "$label" "$(field "$out" tokens_per_s)" \
    "$(mb tp)" "$(mb pp)" "$(mb dp)" "$(mb embedding)" "$(field "$out" bubble_measured)" \
    "$(field "$out" bubble_formula)"
}
run 1 "(1,1,1)"
run 2 "(2,1,1)"                --tensor-model-parallel-size 2
run 2 "(2,1,1) sp"             --tensor-model-parallel-size 2 --sequence-parallel
run 2 "(1,2,1) 1F1B"           --pipeline-model-parallel-size 2
run 2 "(1,2,1) v=2"            --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
run 2 "(1,1,2)"                --data-parallel-size 2
run 2 "(1,1,2) distopt"        --use-distributed-optimizer
run 4 "(2,2,1)"                --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2
run 4 "(1,4,1) 1F1B"           --pipeline-model-parallel-size 4
run 4 "(1,2,2) 1F1B"           --pipeline-model-parallel-size 2
run 4 "(1,2,2) v=2"            --pipeline-model-parallel-size 2 --num-layers-per-virtual-pipeline-stage 1
run 4 "(2,1,2) sp distopt"     --tensor-model-parallel-size 2 --sequence-parallel --use-distributed-optimizer
run 4 "(1,1,4) distopt"        --use-distributed-optimizer
