#!/bin/bash
# Per-split data on real (tiny) indexed datasets, 2 ranks:
#  1. --train-data-path A trains on the batches --data-path A --split 100,0,0 trains on (equal
#     losses, every iteration);
#  2. --multiple-validation-sets with --valid-data-path B C: each set's validation line by name,
#     and TensorBoard's "lm loss validation <name>" read back (tensorboard_reader.py) against
#     the metrics file;
#  3. --data-path with --train-data-path: one clear error.
#   eval_sets_test.sh GPT_PRETRAIN PREPROCESS_DATA MPIEXEC SOURCE_DIR SCRATCH
set -uo pipefail
bin=$1 pre=$2 mpiexec=$3 src=$4 tmp=$5
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"

# Three corpora of a few chapters each (one document per verse).
corpus() {  # NAME RANGE
  bible -f "$2" | sed -E 's/^[^ ]+ //; s/\\/\\\\/g; s/"/\\"/g; s/^/{"text": "/; s/$/"}/' > "$1.json"
  "$pre" --input "$1.json" --output-prefix "$1" --vocab-file data/gpt2/gpt2-vocab.json \
      --merge-file data/gpt2/gpt2-merges.txt --append-eod --log-interval 0 > "$1.log" 2>&1 \
    || { cat "$1.log"; fail "preprocessing $1"; }
}
corpus a "gen1:1-gen4:26"; corpus b "ex1:1-ex2:25"; corpus c "ps1:1-ps8:9"
args=("${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 4 --data-cache-path cache)

"$mpiexec" -n 2 "$bin" "${args[@]}" --data-path a_text_document --split 100,0,0 > split.log 2>&1 \
  || { cat split.log; fail "--data-path --split run failed"; }
"$mpiexec" -n 2 "$bin" "${args[@]}" --train-data-path a_text_document > per.log 2>&1 \
  || { cat per.log; fail "--train-data-path run failed"; }
want=$(losses split.log) got=$(losses per.log)
[ -n "$want" ] && [ "$want" = "$got" ] || fail "--train-data-path losses [$got] differ from --data-path --split 100,0,0 [$want]"

"$mpiexec" -n 2 "$bin" "${args[@]}" --train-data-path a_text_document --valid-data-path b_text_document c_text_document \
    --multiple-validation-sets --test-data-path c_text_document --eval-interval 2 --eval-iters 1 \
    --tensorboard-dir tb --metrics-file m.jsonl > sets.log 2>&1 || { cat sets.log; fail "--multiple-validation-sets run failed"; }
for it in 2 4; do
  for set in b_text_document c_text_document; do
    grep -qE "validation loss at iteration $it \($set\) \| lm loss value: " sets.log \
      || { cat sets.log; fail "no validation line for set $set at iteration $it"; }
  done
done
grep -qE "validation loss at iteration 4 on test set \| lm loss value: " sets.log || fail "no test-set line"
vb=$(grep -oE "iteration 2 \(b_text_document\) \| lm loss value: [0-9.E+-]+" sets.log | awk '{print $NF}')
vc=$(grep -oE "iteration 2 \(c_text_document\) \| lm loss value: [0-9.E+-]+" sets.log | awk '{print $NF}')
[ "$vb" != "$vc" ] || fail "sets b and c report the same loss $vb: not evaluated separately"
/usr/bin/python3 "$src/tests/app/tensorboard_reader.py" --dir tb --metrics m.jsonl --batch-size 4 --world-size 2 \
  || fail "the event file disagrees with the metrics file"
grep -q '"set": "c_text_document"' m.jsonl || fail "the metrics file does not name the validation sets"

if "$mpiexec" -n 2 "$bin" "${args[@]}" --data-path a_text_document --train-data-path a_text_document > bad.log 2>&1; then
  fail "--data-path with --train-data-path was accepted"
fi
grep -q -- "--data-path and --train-data-path/--valid-data-path/--test-data-path are exclusive" bad.log \
  || { cat bad.log; fail "no clear error for --data-path with --train-data-path"; }
echo "PASS: per-split training equals --split 100,0,0 ($(echo $got | wc -w) numbers); sets b ($vb) and c ($vc) by name"
