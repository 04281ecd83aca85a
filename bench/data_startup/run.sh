#!/usr/bin/env bash
# Dataset start-up: open the indexed datasets (mmap), build or load the document / sample /
# shuffle index caches (and a blend's dataset index), for the train/valid/test splits a real run
# needs; gpt-pretrain's build/app/prepare_cache beside Megatron-LM's own BlendedMegatronDatasetBuilder
# (bench/data_startup/megatron_peer.py, the way pretrain_gpt.py builds its datasets) on the same
# synthetic data, the same parameters and the same sample counts.
#   cold: an empty cache folder (every index built and written);
#   warm: the same folder again, the caches there (loaded and checked).
# Workloads (bench/data_startup/make_datasets.py writes Megatron's .bin/.idx directly, into
# BENCH_WORK, reused while its parameters do not change; nothing is stored in the repo):
#   A  a blend of BENCH_BLEND_DATASETS (100) datasets of BENCH_BLEND_MIN-BENCH_BLEND_MAX
#      (2M-20M) tokens, sizes and explicit weights ("w1 p1 w2 p2 ...") from a fixed seed;
#   B  one dataset of BENCH_TOKENS (2,000,000,000) tokens (4 GB .bin).
# Shared run parameters: seq_length 2048, split 969,30,1, seed 1234, global batch BENCH_GBS (512);
# train_iters = BENCH_TRAIN_ITERS or ~0.95 of an epoch of the workload's train split
# (floor(0.95 * 0.969 * tokens / 2048 / gbs)), eval_interval BENCH_EVAL_INTERVAL (100),
# eval_iters BENCH_EVAL_ITERS (10); Megatron's sample counts: train = train_iters * gbs,
# valid = (train_iters / eval_interval + 1) * eval_iters * gbs, test = eval_iters * gbs.
# Each of BENCH_RUNS (3) rounds runs, per workload: ours cold, Megatron cold, ours warm,
# Megatron warm (the order of the two tools swaps every round). Measured per process: the whole
# process's wall-clock (date +%s%N around it: interpreter start, imports, exit included), peak
# RSS (/usr/bin/time -f %M), and the tool's own seconds (prepare_cache's "ready in <s> s", the
# peer's builder seconds from just before BlendedMegatronDatasetBuilder to after .build(); the
# peer also reports its imports, torch alone takes ~1.5 s). The data files stay in the page
# cache (24 GB machine, written or read just before); "cold" is about the index caches, not
# the page cache. Neither tool reads the .bin (both mmap it); the .idx is read.
# Megatron-LM: the mirror's HEAD (MEGATRON_GIT, default /work/.mirror/NVIDIA+Megatron-LM/repo)
# is extracted to BENCH_WORK/megatron-<commit> and its helpers.cpp extension compiled there
# once with its Makefile (outside every timed region); BENCH_MEGATRON=DIR uses a checkout as is.
#   bench/data_startup/run.sh   [env: BUILD_DIR (build), BENCH_RUNS (3), BENCH_WORK
#       (/tmp/data-startup), BENCH_TOKENS, BENCH_BLEND_DATASETS, BENCH_BLEND_MIN, BENCH_BLEND_MAX,
#       BENCH_GBS, BENCH_TRAIN_ITERS, BENCH_EVAL_INTERVAL, BENCH_EVAL_ITERS, BENCH_WORKLOADS ("A B"),
#       BENCH_TOOLS ("ours megatron"), BENCH_MEGATRON_THREADS (1: pretrain_gpt.py's default
#       --num-dataset-builder-threads)]
# Builds nothing of the project: uses $BUILD_DIR/app/prepare_cache from scripts/setup.sh.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
RUNS=${BENCH_RUNS:-3}
WORK=${BENCH_WORK:-/tmp/data-startup}
TOKENS=${BENCH_TOKENS:-2000000000}
BLEND_N=${BENCH_BLEND_DATASETS:-100}
BLEND_MIN=${BENCH_BLEND_MIN:-2000000}
BLEND_MAX=${BENCH_BLEND_MAX:-20000000}
GBS=${BENCH_GBS:-512}
EVAL_INTERVAL=${BENCH_EVAL_INTERVAL:-100}
EVAL_ITERS=${BENCH_EVAL_ITERS:-10}
WORKLOADS=${BENCH_WORKLOADS:-A B}
TOOLS=${BENCH_TOOLS:-ours megatron}
MEG_THREADS=${BENCH_MEGATRON_THREADS:-1}
SEQ=2048 SPLIT=969,30,1 SEED=1234
PY=/usr/bin/python3  # Debian's, with python3-numpy and python3-torch (the python3 first on PATH lacks them)
HERE=bench/data_startup
OURS=$BUILD_DIR/app/prepare_cache

# What the benchmark needs beyond the project's build: GNU time, Debian's numpy and torch (the
# Megatron peer and the generator), pybind11 and g++ for Megatron's helpers extension.
setup() {
  local want=()
  [ -x /usr/bin/time ] || want+=(time)
  $PY -c 'import numpy' 2>/dev/null || want+=(python3-numpy)
  if [[ " $TOOLS " == *" megatron "* ]]; then
    $PY -c 'import torch' 2>/dev/null || want+=(python3-torch)
    $PY -c 'import pybind11' 2>/dev/null || want+=(python3-pybind11)
    [ -x /usr/bin/python3-config ] || want+=(python3-dev)
    command -v g++ >/dev/null || want+=(g++)
  fi
  if ((${#want[@]})); then
    echo "bench: installing ${want[*]}" >&2
    apt-get install -y "${want[@]}" >/dev/null || { apt-get update -qq && apt-get install -y "${want[@]}" >/dev/null; }
  fi
  if [[ " $TOOLS " == *" ours "* ]]; then
    [ -x "$OURS" ] || { echo "bench: $OURS not found; build the project first (scripts/setup.sh)" >&2; exit 1; }
  fi
  mkdir -p "$WORK"
  if [[ " $TOOLS " == *" megatron "* ]]; then
    if [ -n "${BENCH_MEGATRON:-}" ]; then
      MEG=$BENCH_MEGATRON
      MEG_REV="checkout $MEG"
    else
      local git=${MEGATRON_GIT:-/work/.mirror/NVIDIA+Megatron-LM/repo}
      local rev
      rev=$(git --git-dir="$git" rev-parse --short=10 HEAD)
      MEG=$WORK/megatron-$rev
      MEG_REV="$rev ($(git --git-dir="$git" log -1 --format=%cs HEAD))"
      if [ ! -f "$MEG/.ready" ]; then
        rm -rf "$MEG" && mkdir -p "$MEG"
        git --git-dir="$git" archive HEAD megatron | tar -x -C "$MEG"
      fi
    fi
    if [ ! -f "$MEG/.ready" ]; then
      # Megatron's Makefile calls python3 and python3-config: Debian's, first on PATH here.
      echo "bench: compiling Megatron's helpers.cpp in $MEG (once, not timed)" >&2
      (cd "$MEG/megatron/core/datasets" && PATH=/usr/bin:$PATH make >/dev/null)
      touch "$MEG/.ready"
    fi
  fi
}

# workload NAME: sets DATA_PATH, WTOKENS and the iteration/sample counts for it.
workload() {
  local out
  case $1 in
    A) out=$($PY $HERE/make_datasets.py "$WORK/data" blend "$BLEND_N" "$BLEND_MIN" "$BLEND_MAX" "$SEED") ;;
    B) out=$($PY $HERE/make_datasets.py "$WORK/data" single "$TOKENS" "$SEED") ;;
  esac
  WTOKENS=$(sed -n 1p <<< "$out")
  DATA_PATH=$(sed -n 2p <<< "$out")
  TRAIN_ITERS=${BENCH_TRAIN_ITERS:-$(awk -v t="$WTOKENS" -v g="$GBS" -v s="$SEQ" \
    'BEGIN { n = int(0.95 * 0.969 * t / s / g); print n < 1 ? 1 : n }')}
  TRAIN_SAMPLES=$((TRAIN_ITERS * GBS))
  VALID_SAMPLES=$(((TRAIN_ITERS / EVAL_INTERVAL + 1) * EVAL_ITERS * GBS))
  TEST_SAMPLES=$((EVAL_ITERS * GBS))
}

# timed LOG CMD...: runs CMD with stdout+stderr to LOG; sets WALL (s) and RSS (KB).
timed() {
  local log=$1 t0 t1
  shift
  t0=$(date +%s%N)
  /usr/bin/time -f "%e %M" -o "$log.time" "$@" > "$log" 2>&1 || {
    echo "bench: failed: $*" >&2; tail -20 "$log" >&2; exit 1; }
  t1=$(date +%s%N)
  WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f", (b - a) / 1e9 }')
  RSS=$(awk '{ v = $2 } END { print v }' "$log.time")
}

# run_tool TOOL WORKLOAD STATE ROUND: one timed start-up, appended to $RESULTS. Each round's
# cold run starts in a folder of its own, which the warm run then finds full; the folders are
# removed only when the bench ends (both workloads). Removing them before each cold run penalised
# every later run of both tools: on an ext4 without a journal (this machine's) the inode
# allocator skips and re-reads each inode deleted in the last 60-300 s, so creating files right
# after deleting a blend's 300 (ours) or 1,200 (Megatron's) caches slowed both tools round
# after round (ours 0.21 -> 0.40 s, Megatron 1.8 -> 2.9 s on the blend), which is not the
# cold start a user sees.
run_tool() {
  local tool=$1 w=$2 state=$3 r=$4 cache=$WORK/cache/$1-$2-r$4 log own imp=""
  log=$WORK/logs/$tool-$w-$state-$r.log
  if [ "$state" = cold ] && [ -e "$cache" ]; then
    echo "bench: $cache already exists before its cold run" >&2; exit 1
  fi
  mkdir -p "$cache"
  if [ "$tool" = ours ]; then
    timed "$log" "$OURS" --config configs/gpt-tiny.ini --data-path "$DATA_PATH" --data-cache-path "$cache" \
      --seq-length $SEQ --max-position-embeddings $SEQ --train-iters "$TRAIN_ITERS" --global-batch-size "$GBS" \
      --micro-batch-size 1 --eval-interval "$EVAL_INTERVAL" --eval-iters "$EVAL_ITERS" --split $SPLIT --seed $SEED
    own=$(sed -nE 's/^prepare_cache: ([0-9]+) index caches ready in ([0-9.eE+-]+) s.*/\2/p' "$log" | tail -1)
    [ -n "$own" ] || { echo "bench: no 'prepare_cache: ... ready in' line in $log" >&2; tail -5 "$log" >&2; exit 1; }
    # Start-up must not read the corpus: a peak RSS over 64 MB + half the .bin's size says it did.
    if ((RSS / 1024 > 64 + WTOKENS * 2 / 1048576 / 2)); then
      echo "bench: WARNING: prepare_cache's peak RSS $((RSS / 1024)) MB is over 64 MB + half the $((WTOKENS * 2 / 1048576)) MB of .bin: was the corpus read?" >&2
      RSS_WARN+=("$w $state round $r: ours $((RSS / 1024)) MB peak RSS against $((WTOKENS * 2 / 1048576)) MB of .bin")
    fi
  else
    timed "$log" $PY $HERE/megatron_peer.py --megatron "$MEG" --data-path "$DATA_PATH" --cache "$cache" \
      --train "$TRAIN_SAMPLES" --valid "$VALID_SAMPLES" --test "$TEST_SAMPLES" --seq-length $SEQ \
      --split $SPLIT --seed $SEED --threads "$MEG_THREADS"
    own=$(sed -nE 's/^megatron_peer: import ([0-9.]+) s, build ([0-9.]+) s.*/\2/p' "$log")
    imp=$(sed -nE 's/^megatron_peer: import ([0-9.]+) s, build ([0-9.]+) s.*/\1/p' "$log")
    [ -n "$own" ] || { echo "bench: no 'megatron_peer:' line in $log" >&2; tail -5 "$log" >&2; exit 1; }
  fi
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$state" "$tool" "$r" "$WALL" "$own" "$RSS" "$imp" >> "$RESULTS"
  printf '  %s %-5s %-8s round %d: %8.3f s whole, %8.3f s own, %6d MB peak RSS\n' \
    "$w" "$state" "$tool" "$r" "$WALL" "$own" $((RSS / 1024)) >&2
}

setup
rm -rf "$WORK/cache"  # left by an interrupted run only (each run removes its own at the end)
mkdir -p "$WORK/logs" "$WORK/cache"
RESULTS=$WORK/results.tsv
: > "$RESULTS"
HEADER=() RSS_WARN=()
for w in $WORKLOADS; do
  echo "bench: workload $w: preparing data in $WORK/data (reused when already there)" >&2
  workload "$w"
  case $w in
    A) desc="A: blend of $BLEND_N datasets, $BLEND_MIN-$BLEND_MAX tokens each, explicit weights, $WTOKENS tokens in all" ;;
    B) desc="B: one dataset, $WTOKENS tokens ($((WTOKENS * 2 / 1000000)) MB .bin)" ;;
  esac
  HEADER+=("$desc; train_iters $TRAIN_ITERS, global batch $GBS, eval_interval $EVAL_INTERVAL, eval_iters $EVAL_ITERS: samples train/valid/test $TRAIN_SAMPLES/$VALID_SAMPLES/$TEST_SAMPLES")
  for ((r = 1; r <= RUNS; r++)); do
    order=$TOOLS
    ((r % 2 == 0)) && order=$(tr ' ' '\n' <<< "$TOOLS" | tac | tr '\n' ' ')
    for state in cold warm; do
      for tool in $order; do run_tool "$tool" "$w" "$state" "$r"; done
    done
  done
  if [[ " $TOOLS " == *" megatron "* ]]; then
    sed -nE 's/.*samples train\/valid\/test ([0-9/]+).*/  Megatron dataset lengths train\/valid\/test: \1/p' \
      "$WORK/logs/megatron-$w-cold-1.log" >&2
  fi
  if [[ " $TOOLS " == *" ours "* ]]; then grep -h '^prepare_cache:' "$WORK/logs/ours-$w-cold-1.log" | tail -1 >&2; fi
done
rm -rf "$WORK/cache"  # after the last timed run (see run_tool)

echo
echo "Dataset start-up, $RUNS runs each (median (min-max)); seq_length $SEQ, split $SPLIT, seed $SEED; $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
for h in "${HEADER[@]}"; do echo "- $h"; done
[[ " $TOOLS " == *" megatron "* ]] && echo "- Megatron-LM $MEG_REV, Debian python3 $($PY -c 'import sys; print(sys.version.split()[0])'), torch $($PY -c 'import torch; print(torch.__version__)'), numpy $($PY -c 'import numpy; print(numpy.__version__)'), --num-dataset-builder-threads $MEG_THREADS"
echo
$PY $HERE/summarize.py "$RESULTS"
echo
echo "whole process: wall-clock around the process (for Megatron it includes the Python interpreter and"
echo "importing torch, numpy and megatron.core.datasets, listed as 'imports' in its own column); own: the"
echo "tool's own seconds (prepare_cache's 'ready in' figure; the peer's BlendedMegatronDatasetBuilder(...).build())."
for m in "${RSS_WARN[@]}"; do echo "WARNING: $m (was the corpus read?)"; done
