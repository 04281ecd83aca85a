#!/usr/bin/env bash
# The README's demo: from nothing to a GPT whose loss goes down on real text, on the CPU.
#
#   scripts/demo.sh                 # setup + build, make the corpus, preprocess, train
#   DEMO_ITERS=200 scripts/demo.sh  # train longer (default 60 iterations, a few minutes)
#   scripts/demo.sh --use-flash-attn --log-interval 5   # extra gpt_pretrain flags (both phases)
#   FIRST_LAYOUT="--tensor-model-parallel-size 2 --sequence-parallel" SECOND_LAYOUT="--tensor-model-parallel-size 2" \
#     scripts/demo.sh               # other layouts (phase 2 keeps phase 1's padded vocabulary)
#
# Training runs in two phases on RANKS (default 2) ranks, as a preempted job would: the
# first half data-parallel with the distributed optimizer (ZeRO-1), saving a checkpoint as
# it exits; the second half resumes from that checkpoint as a 2-stage pipeline - the
# checkpoint is resharded on load (docs/checkpoint-format.md).
#
# Corpus: the King James Bible (public domain), printed by the `bible` program of Debian's
# bible-kjv package, one loose-JSON document per chapter.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${GPT_BUILD_DIR:-build}
DEMO_DIR=${DEMO_DIR:-$BUILD_DIR/demo}
RANKS=${RANKS:-2}
FIRST_LAYOUT=${FIRST_LAYOUT:---use-distributed-optimizer}
SECOND_LAYOUT=${SECOND_LAYOUT:---pipeline-model-parallel-size $RANKS}
DEMO_ITERS=${DEMO_ITERS:-60}
THREADS=$(( $(nproc) / RANKS ))           # cores per rank
[ "$THREADS" -ge 1 ] || THREADS=1
THREADS=${OMP_NUM_THREADS:-$THREADS}

# 1. Dependencies and the build (idempotent: only rebuilds what changed).
scripts/setup.sh
for tool in gpt_pretrain preprocess_data; do
  if [ ! -x "$BUILD_DIR/app/$tool" ]; then
    echo "demo: $BUILD_DIR/app/$tool was not built; see the build output above" >&2
    exit 1
  fi
done
mkdir -p "$DEMO_DIR"

# 2. Corpus: `bible -f gen1:1-rev22:21` prints all 31102 verses, one per line, as
#    "<Book><chapter>:<verse> text" (without -f, piped output is wrapped and loses the
#    references). Verses of a chapter become one document. JSON-escape \ and ".
CORPUS=$DEMO_DIR/kjv.json
if [ ! -s "$CORPUS" ]; then
  echo "demo: writing $CORPUS from the bible-kjv package"
  bible -f "gen1:1-rev22:21" | awk '
    function flush() { if (text != "") printf "{\"text\": \"%s\"}\n", text; text = "" }
    {
      ref = $1; sub(/:.*/, "", ref)              # "Ge1:1" -> "Ge1": book and chapter
      line = $0; sub(/^[^ ]+ /, "", line)        # drop the reference
      gsub(/\\/, "\\\\", line); gsub(/"/, "\\\"", line); gsub(/\t/, " ", line)
      if (ref != chapter) { flush(); chapter = ref; text = line } else text = text " " line
    }
    END { flush() }' > "$CORPUS.tmp"
  mv "$CORPUS.tmp" "$CORPUS"
fi
echo "demo: corpus $(wc -l < "$CORPUS") documents, $(du -h "$CORPUS" | cut -f1)"

# 3. Tokenise into Megatron's indexed dataset (<prefix>_text_document.bin/.idx).
PREFIX=$DEMO_DIR/kjv
if [ ! -s "${PREFIX}_text_document.idx" ]; then
  "$BUILD_DIR/app/preprocess_data" --input "$CORPUS" --output-prefix "$PREFIX" \
    --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt \
    --append-eod --workers 2
fi

# 4. Train gpt-tiny in two phases. The lm loss starts near ln(50304) = 10.8 and falls; the
#    metrics files have one JSON line per iteration.
HALF=$(( DEMO_ITERS / 2 ))
CKPT=$DEMO_DIR/checkpoints
rm -rf "$CKPT"
train() {  # train <metrics file> <flags...>
  local metrics=$1; shift
  OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS \
    mpiexec -n "$RANKS" "$BUILD_DIR/app/gpt_pretrain" --config configs/gpt-tiny.ini \
      --data-path "${PREFIX}_text_document" --data-cache-path "$DEMO_DIR/cache" \
      --train-iters "$DEMO_ITERS" --lr-warmup-iters $(( DEMO_ITERS / 6 )) \
      --eval-interval "$DEMO_ITERS" --log-interval 5 \
      --save "$CKPT" --load "$CKPT" --metrics-file "$metrics" "$@"
}
echo "demo: phase 1: iterations 1-$HALF on $RANKS rank(s) x $THREADS thread(s): $FIRST_LAYOUT"
# shellcheck disable=SC2086  # the layouts are flag lists
train "$DEMO_DIR/metrics-1.jsonl" $FIRST_LAYOUT --exit-interval "$HALF" "$@"
echo "demo: phase 2: resume from $CKPT, iterations $((HALF + 1))-$DEMO_ITERS: $SECOND_LAYOUT"
# shellcheck disable=SC2086
train "$DEMO_DIR/metrics-2.jsonl" $SECOND_LAYOUT "$@"

# 5. The evidence: the first and last training losses, and the resumed run continuing.
# The first or last training record of a metrics file. No reader may stop early here: under
# pipefail a `grep | head -1` fails with SIGPIPE (exit 141) whenever grep writes twice.
first_record() { awk '!/"split"/ { print; exit }' "$1"; }
last_record() { awk '!/"split"/ { line = $0 } END { print line }' "$1"; }
loss() { "$2" "$1" | sed 's/.*"lm_loss": \([^,]*\),.*/\1/'; }
iter() { "$2" "$1" | sed 's/.*"iteration": \([0-9]*\).*/\1/'; }
first=$(loss "$DEMO_DIR/metrics-1.jsonl" first_record)
last=$(loss "$DEMO_DIR/metrics-2.jsonl" last_record)
resumed_at=$(iter "$DEMO_DIR/metrics-2.jsonl" first_record)
echo "demo: lm loss went from $first (iteration 1) to $last (iteration $DEMO_ITERS); phase 2 resumed at iteration $resumed_at; metrics in $DEMO_DIR/metrics-{1,2}.jsonl"
[ "$resumed_at" = "$((HALF + 1))" ] || { echo "demo: phase 2 did not resume at iteration $((HALF + 1))" >&2; exit 1; }
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "demo: the loss did not go down" >&2; exit 1; }
