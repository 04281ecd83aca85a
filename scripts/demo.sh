#!/usr/bin/env bash
# The README's demo: from nothing to a GPT whose loss goes down on real text, on the CPU.
#
#   scripts/demo.sh                 # setup + build, make the corpus, preprocess, train
#   RANKS=2 scripts/demo.sh --micro-batch-size 4           # 2 ranks, data parallel
#   RANKS=2 scripts/demo.sh --tensor-model-parallel-size 2 # 2 ranks, tensor parallel
#   DEMO_ITERS=200 scripts/demo.sh  # train longer (default 60 iterations, a few minutes)
#   scripts/demo.sh --use-flash-attn --log-interval 5   # extra gpt_pretrain flags
#
# Corpus: the King James Bible (public domain), printed by the `bible` program of Debian's
# bible-kjv package, one loose-JSON document per chapter.
set -euo pipefail
cd "$(dirname "$0")/.."

BUILD_DIR=${GPT_BUILD_DIR:-build}
DEMO_DIR=${DEMO_DIR:-$BUILD_DIR/demo}
RANKS=${RANKS:-1}
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

# 4. Train gpt-tiny. The lm loss starts near ln(50304) = 10.8 and falls; the metrics file
#    has one JSON line per iteration.
METRICS=$DEMO_DIR/metrics.jsonl
echo "demo: training configs/gpt-tiny.ini for $DEMO_ITERS iterations on $RANKS rank(s) x $THREADS thread(s)"
OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS \
  mpiexec -n "$RANKS" "$BUILD_DIR/app/gpt_pretrain" --config configs/gpt-tiny.ini \
    --data-path "${PREFIX}_text_document" --data-cache-path "$DEMO_DIR/cache" \
    --train-iters "$DEMO_ITERS" --eval-interval "$DEMO_ITERS" --log-interval 5 \
    --metrics-file "$METRICS" "$@"

# 5. The evidence: first and last training losses from the metrics file.
first=$(grep -v '"split"' "$METRICS" | head -1 | sed 's/.*"lm_loss": \([^,]*\),.*/\1/')
last=$(grep -v '"split"' "$METRICS" | tail -1 | sed 's/.*"lm_loss": \([^,]*\),.*/\1/')
echo "demo: lm loss went from $first (iteration 1) to $last (iteration $DEMO_ITERS); per-iteration metrics in $METRICS"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || { echo "demo: the loss did not go down" >&2; exit 1; }
