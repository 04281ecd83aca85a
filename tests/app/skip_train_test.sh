#!/bin/bash
# --skip-train: a short run saves and evaluates at its end; --load of that checkpoint with
# --skip-train prints the same validation and test lines ("validation loss at iteration N on
# validation set | lm loss value: ... | lm loss PPL: ... |"), trains nothing and saves nothing.
# On 1 rank and on a PP2 layout (2 ranks).
#   skip_train_test.sh GPT_PRETRAIN MPIEXEC SOURCE_DIR SCRATCH
set -uo pipefail
bin=$1 mpiexec=$2 src=$3 tmp=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
evals() { grep -oE "validation loss at iteration [0-9]+ on (validation|test) set \|.*" "$1"; }

for layout in "1" "2 --pipeline-model-parallel-size 2"; do
  read -r n extra <<< "$layout"
  ck=ck$n
  # shellcheck disable=SC2086
  args=("${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 4 --eval-interval 2 --eval-iters 2 $extra)
  "$mpiexec" -n "$n" "$bin" "${args[@]}" --save "$ck" > train$n.log 2>&1 || { cat train$n.log; fail "training on $n rank(s) failed"; }
  want=$(evals train$n.log)
  [ "$(echo "$want" | grep -c "iteration 4 on")" = 2 ] || { cat train$n.log; fail "no final validation and test lines"; }
  before=$(ls -R "$ck" | md5sum)
  "$mpiexec" -n "$n" "$bin" "${args[@]}" --load "$ck" --save "$ck" --skip-train > skip$n.log 2>&1 \
    || { cat skip$n.log; fail "--skip-train on $n rank(s) failed"; }
  got=$(evals skip$n.log)
  [ "$got" = "$want" ] || fail "--skip-train on $n rank(s) printed [$got], the training run's end [$want]"
  ! grep -qE "iteration +[0-9]+/" skip$n.log || fail "--skip-train trained"
  [ "$(ls -R "$ck" | md5sum)" = "$before" ] || fail "--skip-train changed the checkpoint folder"
  echo "layout $layout: $got"
done
echo "PASS: --skip-train reproduces the end-of-training evaluation on 1 rank and PP2"
