#!/usr/bin/env bash
# Throughput of preprocess_data (GPT-2 BPE) beside npm tiktoken (gpt2 encoding, node, one
# thread, encode only) on the same >= 20 MB corpus of distinct English documents (KJV Bible,
# GNU manuals, changelogs: bench/preprocess/make_corpus.js), BENCH_RUNS runs of each,
# alternating; prints median, min and max seconds and two ratios to tiktoken, per run pair:
#   per worker: preprocess_data --workers 1 against tiktoken's one thread;
#   whole tool: preprocess_data --workers BENCH_WORKERS (default: all cores) against tiktoken,
#               which has no parallel encoder (what a user of either tool gets on this machine).
# Builds nothing: uses $BUILD_DIR (default build/) from scripts/setup.sh.
#   bench/preprocess/run.sh      [env: BUILD_DIR, BENCH_MB (20), BENCH_RUNS (5), BENCH_WORKERS
#                                 (nproc), BENCH_WORK, BENCH_LONG_KB (100)]
# A second table times space-free pieces (issue 20: the BPE merge was quadratic in a piece's
# length): a base64 blob, a DNA-like string and one huge word, BENCH_LONG_KB each, beside
# tiktoken on the same text, and checks that the ids are equal. tiktoken's merge is still
# quadratic there: its 100 KB word takes ~20 s, 300 KB ~3 min, and a 1 MB word aborts
# ("RuntimeError: unreachable" in its wasm, 1.0.17 and 1.0.22 alike), hence 100 KB.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/preprocess/corpus.sh
bench_corpus
RUNS=${BENCH_RUNS:-5}
WALL=${BENCH_WORKERS:-$(nproc)}

# ours WORKERS: "tokens seconds" of one preprocess_data run; the seconds (its "Done:" line)
# cover reading, JSON, BPE and writing .bin/.idx, not the process start.
ours() {
  cat "$CORPUS" > /dev/null  # page cache
  "$PRE" --input "$CORPUS" --output-prefix "$WORK/out$1" --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers "$1" --log-interval 0 > "$WORK/log$1"
  # Done: N documents, T tokens, X MB in S s (...)
  sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens, .* MB in ([0-9.]+) s.*/\1 \2/p' "$WORK/log$1"
}
: > "$WORK/w1"; : > "$WORK/wall"; : > "$WORK/tik"
for ((r = 1; r <= RUNS; r++)); do
  ours 1 >> "$WORK/w1"
  ours "$WALL" >> "$WORK/wall"
  node bench/preprocess/tiktoken_bench.js "$CORPUS" | awk '{ print $1, $2 }' >> "$WORK/tik"
done
cmp -s "$WORK/out1_text_document.bin" "$WORK/out${WALL}_text_document.bin" &&
  cmp -s "$WORK/out1_text_document.idx" "$WORK/out${WALL}_text_document.idx" || { echo "bench: outputs differ between 1 and $WALL workers" >&2; exit 1; }
read -r otok _ < "$WORK/w1"; read -r ttok _ < "$WORK/tik"
# Ours counts one end-of-document token per document (--append-eod) on top of the same ids.
[ "$otok" -eq $((ttok + CORPUS_DOCS)) ] || { echo "bench: $otok tokens (with $CORPUS_DOCS EODs) vs tiktoken's $ttok" >&2; exit 1; }

echo
echo "$RUNS runs each, alternating; seconds: median (min-max); tokens/s at the median"
printf "%-46s %10s %9s %8s %8s %11s\n" "tool (gpt2 BPE)" "tokens" "median s" "min s" "max s" "tokens/s"
bench_summary "preprocess_data --workers 1" "$WORK/w1"
bench_summary "preprocess_data --workers $WALL" "$WORK/wall"
bench_summary "npm tiktoken $TIKTOKEN_VERSION (node, 1 thread, encode only)" "$WORK/tik"
echo
echo "speed relative to tiktoken (its seconds / ours, per alternating run):"
bench_ratio "$WORK/w1" "$WORK/tik" "per worker (--workers 1 vs 1 thread)"
bench_ratio "$WORK/wall" "$WORK/tik" "whole tool (--workers $WALL vs tiktoken)"
echo "Our token count is tiktoken's plus one end-of-document token per document ($CORPUS_DOCS)."
echo "preprocess_data's seconds include reading, JSON parsing and writing .bin/.idx; tiktoken's"
echo "only encoding (JSON parsed before its clock starts). Load average now: $(cut -d' ' -f1-3 /proc/loadavg)"

# Space-free pieces: one document each.
LONG=$((${BENCH_LONG_KB:-100} * 1024))
{
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 3 / 4)) /dev/urandom | base64 -w0)"
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 64)) /dev/urandom | tr -dc 'ACGT' | head -c "$LONG")"
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 16)) /dev/urandom | tr -dc 'a-z' | head -c "$LONG")"
} > "$WORK/long.json"
echo
echo "space-free pieces (${BENCH_LONG_KB:-100} KB each of base64, DNA-like ACGT, one lower-case word):"
printf "%-46s %10s %8s\n" "tool" "tokens" "seconds"
TIMEFORMAT='%R'
{ time "$PRE" --input "$WORK/long.json" --output-prefix "$WORK/long" --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --workers 1 --log-interval 0 > "$WORK/loglong"; } 2> "$WORK/timelong"
ltok=$(sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens.*/\1/p' "$WORK/loglong")
printf "%-46s %10d %8.2f\n" "preprocess_data --workers 1" "$ltok" "$(cat "$WORK/timelong")"
read -r lttok ltsec _ _ < <(node bench/preprocess/tiktoken_bench.js "$WORK/long.json")
printf "%-46s %10d %8.2f\n" "npm tiktoken $TIKTOKEN_VERSION (node, 1 thread, encode only)" "$lttok" "$ltsec"
[ "$ltok" = "$lttok" ] || { echo "bench: token counts differ from tiktoken on the long pieces" >&2; exit 1; }
