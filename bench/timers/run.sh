#!/usr/bin/env bash
# The cost of Megatron's per-phase timers (--timing-log-level 0, 1, 2, log interval 1, and with
# TensorBoard event files with the timers in them at levels 0 and 2) on a
# small CPU model, beside the same training with the step's phase hooks removed. One
# thread, the variants alternating within each run; prints the table of bench_timers.
#
#   bench/timers/run.sh                   # 7 runs x 39 timed iterations (about a minute idle)
#   bench/timers/run.sh --runs 9 --iters 40
#
# Other processes on the machine distort the figures: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${GPT_BUILD_DIR:-build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/common/bench_binary.sh
bench_binary bench_timers bench/timers/bench_timers
OMP_NUM_THREADS=${THREADS:-1} OPENBLAS_NUM_THREADS=${THREADS:-1} "$BIN" "$@"
