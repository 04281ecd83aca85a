#!/usr/bin/env bash
# Throughput of preprocess_data (1 and 2 workers) beside tiktoken (gpt2, one thread, encode
# only) on the same >= 20 MB English corpus (KJV Bible from bible-kjv, repeated).
# Builds nothing: uses $BUILD_DIR (default build/) from scripts/setup.sh.
#   bench/preprocess/run.sh            [env: BUILD_DIR, BENCH_MB (default 20), BENCH_WORK,
#                                       BENCH_LONG_MB (default 1)]
# A second table times space-free pieces (issue 20: the BPE merge was quadratic in a piece's
# length): a base64 blob, a DNA-like string and one huge word, BENCH_LONG_MB each, beside
# tiktoken on the same text, and checks that the ids are equal.
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
CORPUS_BYTES=$(stat -c %s "$WORK/corpus.json")

rows=()
for w in 1 2; do
  # Warm the page cache so both runs read from memory.
  cat "$WORK/corpus.json" > /dev/null
  # bash's `time` gives the CPU seconds of all threads (tokenizer loading included).
  TIMEFORMAT='%U %S'
  { time "$PRE" --input "$WORK/corpus.json" --output-prefix "$WORK/out$w" --vocab-file data/gpt2/gpt2-vocab.json \
      --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers "$w" --log-interval 0 > "$WORK/log$w"; } 2> "$WORK/time$w"
  line=$(grep '^Done:' "$WORK/log$w")
  cpu=$(awk '{ print $1 + $2 }' "$WORK/time$w")
  # Done: N documents, T tokens, X MB in S s (...)
  tokens=$(echo "$line" | sed -E 's/^Done: [0-9]+ documents, ([0-9]+) tokens.*/\1/')
  secs=$(echo "$line" | sed -E 's/.* MB in ([0-9.]+) s.*/\1/')
  rows+=("preprocess_data --workers $w|$tokens|$secs|$CORPUS_BYTES|$cpu")
done
cmp -s "$WORK/out1_text_document.bin" "$WORK/out2_text_document.bin" &&
  cmp -s "$WORK/out1_text_document.idx" "$WORK/out2_text_document.idx" || { echo "bench: outputs differ between 1 and 2 workers" >&2; exit 1; }
read -r ttok tsec tbytes tcpu < <(node bench/preprocess/tiktoken_bench.js "$WORK/corpus.json")
rows+=("tiktoken gpt2 (node, 1 thread, encode only)|$ttok|$tsec|$tbytes|$tcpu")

# awk does the arithmetic (always present on Debian, unlike bc).
awk -v corpus="$WORK/corpus.json" -v bytes="$CORPUS_BYTES" -v cores="$(nproc)" -v ttok="$ttok" -v tsec="$tsec" '
  BEGIN {
    FS = "|"
    printf "corpus: %s (%.1f MB of loose JSON, KJV Bible repeated), %d cores\n", corpus, bytes / 1048576, cores
    printf "%-44s %10s %8s %8s %12s %11s %13s\n", "tool", "tokens", "seconds", "MB/s", "tokens/s", "vs tiktoken", "tokens/CPU-s"
    ttps = ttok / tsec
  }
  {
    tps = $2 / $3
    printf "%-44s %10d %8.3f %8.2f %12.0f %10.2fx %13.0f\n", $1, $2, $3, $4 / 1048576 / $3, tps, tps / ttps, $2 / $5
  }
' < <(printf '%s\n' "${rows[@]}")
echo "MB/s: input bytes (JSON lines for preprocess_data, text for tiktoken). preprocess_data's time covers reading,"
echo "JSON, BPE and writing .bin/.idx; its token count includes one EOD per document (--append-eod)."
echo "tokens/CPU-s: tokens per CPU-second of all threads (reader and writer threads and tokenizer loading"
echo "included for preprocess_data), which stays meaningful when other jobs share the cores."

# Space-free pieces: one document each.
LONG=$((${BENCH_LONG_MB:-1} * 1048576))
{
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 3 / 4)) /dev/urandom | base64 -w0)"
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 64)) /dev/urandom | tr -dc 'ACGT' | head -c "$LONG")"
  printf '{"text": "%s"}\n' "$(head -c $((LONG * 16)) /dev/urandom | tr -dc 'a-z' | head -c "$LONG")"
} > "$WORK/long.json"
echo
echo "space-free pieces (${BENCH_LONG_MB:-1} MB each of base64, DNA-like ACGT, one lower-case word):"
printf "%-44s %10s %8s\n" "tool" "tokens" "seconds"
TIMEFORMAT='%R'
{ time "$PRE" --input "$WORK/long.json" --output-prefix "$WORK/long" --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --workers 1 --log-interval 0 > "$WORK/loglong"; } 2> "$WORK/timelong"
ltok=$(sed -nE 's/^Done: [0-9]+ documents, ([0-9]+) tokens.*/\1/p' "$WORK/loglong")
printf "%-44s %10d %8.2f\n" "preprocess_data --workers 1" "$ltok" "$(cat "$WORK/timelong")"
read -r lttok ltsec _ _ < <(node bench/preprocess/tiktoken_bench.js "$WORK/long.json")
printf "%-44s %10d %8.2f\n" "tiktoken gpt2 (node, 1 thread, encode only)" "$lttok" "$ltsec"
[ "$ltok" = "$lttok" ] || { echo "bench: token counts differ from tiktoken on the long pieces" >&2; exit 1; }
