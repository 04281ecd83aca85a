#!/usr/bin/env bash
# TikTokenizer (cl100k_base ranks and pattern) in preprocess_data beside npm tiktoken's
# cl100k_base (node, one thread, encode only) on the corpus of bench/preprocess/run.sh
# (distinct documents, bench/preprocess/corpus.sh), BENCH_RUNS runs each, alternating; prints
# median, min and max and the ratio per run pair, and checks both count the same tokens.
# Builds nothing: uses $BUILD_DIR (default build/).
#   bench/preprocess/tiktoken_cl100k.sh   [env: BUILD_DIR, BENCH_MB (20), BENCH_RUNS (3), BENCH_WORK]
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/preprocess/corpus.sh
bench_corpus
node tests/peers/tiktoken_ranks.js cl100k_base "$WORK/cl100k_base.tiktoken"
RUNS=${BENCH_RUNS:-3}

: > "$WORK/ours"; : > "$WORK/tik"
for ((r = 1; r <= RUNS; r++)); do
  cat "$CORPUS" > /dev/null  # page cache
  "$PRE" --input "$CORPUS" --output-prefix "$WORK/out" --tokenizer-type TikTokenizer \
    --tokenizer-model "$WORK/cl100k_base.tiktoken" --tiktoken-pattern cl100k_base --workers 1 --log-interval 0 > "$WORK/log"
  # Done: N documents, T tokens, X MB in S s (...): S covers reading, JSON, BPE and writing.
  sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens, .* MB in ([0-9.]+) s.*/\1 \2/p' "$WORK/log" >> "$WORK/ours"
  node bench/preprocess/tiktoken_bench.js "$CORPUS" cl100k_base | awk '{ print $1, $2 }' >> "$WORK/tik"
done

echo
printf "%-46s %10s %9s %8s %8s %11s\n" "tool (cl100k_base)" "tokens" "median s" "min s" "max s" "tokens/s"
bench_summary "preprocess_data TikTokenizer --workers 1" "$WORK/ours"
bench_summary "npm tiktoken $TIKTOKEN_VERSION (node, 1 thread, encode only)" "$WORK/tik"
read -r otok _ < "$WORK/ours"; read -r ttok _ < "$WORK/tik"
[ "$otok" = "$ttok" ] || { echo "bench: token counts differ: $otok vs $ttok" >&2; exit 1; }
echo
echo "speed relative to tiktoken (its seconds / ours, per alternating run):"
bench_ratio "$WORK/ours" "$WORK/tik" "per worker (--workers 1 vs 1 thread)"
echo "preprocess_data's seconds include reading, JSON parsing and writing .bin/.idx; tiktoken's only encoding."
