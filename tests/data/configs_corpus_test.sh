#!/bin/bash
# Every config in configs/ as shipped - its sequence length, split, precision, evaluation and
# architecture flags - with only its size shrunk (2 layers, hidden 64, 4 heads, global batch 2,
# 2 iterations) on the CPU backend, trained on real preprocessed text of two sizes:
#   the KJV Bible (one document per chapter, ~1M tokens, like a first corpus a user tries),
#     evaluated once (--eval-iters 1: the config's own count only repeats the same work);
#   a tiny corpus (30 verses, ~1000 tokens: less than one sequence of the big configs), with
#     --eval-iters 0 (its validation and test splits are empty; data_edges_test.sh covers that).
# So a data problem specific to one config shows here, not on a cluster.
#   configs_corpus_test.sh BUILD_DIR SOURCE_DIR SCRATCH
set -uo pipefail
build=$1 src=$2 tmp=$3
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2

# The KJV as the demo makes it: the verses of a chapter are one document.
bible -f "gen1:1-rev22:21" | awk '
  function flush() { if (text != "") printf "{\"text\": \"%s\"}\n", text; text = "" }
  { ref = $1; sub(/:.*/, "", ref); line = $0; sub(/^[^ ]+ /, "", line)
    gsub(/\\/, "\\\\", line); gsub(/"/, "\\\"", line); gsub(/\t/, " ", line)
    if (ref != chapter) { flush(); chapter = ref; text = line } else text = text " " line }
  END { flush() }' > kjv.json
bible -f "gen1:1-gen1:30" | sed -E 's/^[^ ]+ //; s/\\/\\\\/g; s/"/\\"/g; s/^/{"text": "/; s/$/"}/' > tiny.json
for c in kjv tiny; do
  "$build/app/preprocess_data" --input $c.json --output-prefix $c --vocab-file data/gpt2/gpt2-vocab.json \
      --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers 2 --log-interval 0 > $c.log 2>&1 \
    || { cat $c.log; fail "preprocessing $c"; }
done

n=0
for ini in "$src"/configs/*.ini; do
  name=$(basename "$ini" .ini)
  shrink=(--config "$ini" --num-layers 2 --hidden-size 64 --num-attention-heads 4 --micro-batch-size 1
          --global-batch-size 2 --train-iters 2 --eval-interval 2 --log-interval 1 --device cpu
          --data-cache-path cache)
  # SwiGLU configs give ffn-hidden-size: shrink it with the rest (GPT configs derive 4 x hidden).
  grep -q "^ffn-hidden-size" "$ini" && shrink+=(--ffn-hidden-size 128)
  # A warm-up in iterations must stay shorter than the 2 iterations of decay.
  grep -q "^lr-warmup-iters" "$ini" && shrink+=(--lr-warmup-iters 0)
  # A planner config (max-global-batch-size) picks the batch itself.
  grep -q "^max-global-batch-size" "$ini" && shrink+=(--max-global-batch-size 2)
  for corpus in kjv tiny; do
    extra=(--eval-iters 1)
    [ $corpus = tiny ] && extra=(--eval-iters 0)
    "$build/app/gpt_pretrain" "${shrink[@]}" --data-path ${corpus}_text_document "${extra[@]}" > "$name-$corpus.log" 2>&1 \
      || { cat "$name-$corpus.log"; fail "$name on $corpus"; }
    grep -qE "iteration +2/ +2 " "$name-$corpus.log" || { cat "$name-$corpus.log"; fail "$name on $corpus: no iteration 2"; }
    if [ $corpus = kjv ]; then
      grep -q "validation loss at iteration 2" "$name-$corpus.log" \
        || { cat "$name-$corpus.log"; fail "$name on kjv: no validation at iteration 2"; }
    fi
    n=$((n + 1))
  done
done
[ $n -ge 10 ] || fail "only $n runs: configs/ lost its files?"
echo "PASS configs_corpus_test: $n runs"
