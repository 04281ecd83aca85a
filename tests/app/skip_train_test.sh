#!/bin/bash
# --skip-train: a short run saves and evaluates at its end; --load of that checkpoint with
# --skip-train prints the same validation and test lines ("validation loss at iteration N on
# validation set | lm loss value: ... | lm loss PPL: ... |"), trains nothing and saves nothing.
# On 1 rank, PP2 and TP2 layouts (2 ranks); and TP2 loading the 1-rank checkpoint prints the
# 1-rank run's numbers within fp32 rounding (the bound below).
#   skip_train_test.sh GPT_PRETRAIN MPIEXEC SOURCE_DIR SCRATCH
set -uo pipefail
bin=$1 mpiexec=$2 src=$3 tmp=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
evals() { grep -oE "validation loss at iteration [0-9]+ on (validation|test) set \|.*" "$1"; }

for layout in "1" "2 --pipeline-model-parallel-size 2" "2 --tensor-model-parallel-size 2"; do
  read -r n extra <<< "$layout"
  ck=ck$n${extra//[^0-9a-z]/}
  # shellcheck disable=SC2086
  args=("${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 4 --eval-interval 2 --eval-iters 2 $extra)
  "$mpiexec" -n "$n" "$bin" "${args[@]}" --save "$ck" > train$ck.log 2>&1 || { cat train$ck.log; fail "training on $n rank(s) failed"; }
  want=$(evals train$ck.log)
  [ "$(echo "$want" | grep -c "iteration 4 on")" = 2 ] || { cat train$ck.log; fail "no final validation and test lines"; }
  before=$(ls -R "$ck" | md5sum)
  "$mpiexec" -n "$n" "$bin" "${args[@]}" --load "$ck" --save "$ck" --skip-train > skip$ck.log 2>&1 \
    || { cat skip$ck.log; fail "--skip-train on $n rank(s) failed"; }
  got=$(evals skip$ck.log)
  [ "$got" = "$want" ] || fail "--skip-train on $n rank(s) printed [$got], the training run's end [$want]"
  ! grep -qE "iteration +[0-9]+/" skip$ck.log || fail "--skip-train trained"
  [ "$(ls -R "$ck" | md5sum)" = "$before" ] || fail "--skip-train changed the checkpoint folder"
  echo "layout $layout: $got"
done

# The 1-rank checkpoint evaluated by TP2 (resharded on load): the same tokens through the
# same parameters; only the order of fp32 sums differs (the row-parallel layers' all-reduce,
# the vocab-parallel cross-entropy's max and sum). Each op's result moves by a few ulps
# (~1e-7 relative) and the evaluation loss averages per-token losses (~10), so 1e-5
# relative (~20x a 5-op chain of 1e-7) bounds the loss; PPL = exp(loss) moves by
# |d loss| relative, so 1e-5 * loss relative; the lines print 6 significant digits (5e-7).
# Half the divisor keeps the padded vocabulary at 1 rank's (the checkpoint's) size.
"$mpiexec" -n 2 "$bin" "${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 4 --eval-interval 2 --eval-iters 2 \
  --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64 --load ck1 --skip-train > skip_tp2_from1.log 2>&1 \
  || { cat skip_tp2_from1.log; fail "--skip-train on TP2 from the 1-rank checkpoint failed"; }
one=$(evals trainck1.log) two=$(evals skip_tp2_from1.log)
/usr/bin/python3 - "$one" "$two" <<'PY' || fail "TP2 --skip-train of the 1-rank checkpoint: [$two], 1 rank: [$one]"
import re, sys
def parse(text):
    return [(m.group(1), float(m.group(2)), float(m.group(3))) for m in
            re.finditer(r"on (\w+) set \| lm loss value: (\S+) \| lm loss PPL: (\S+) \|", text)]
one, two = parse(sys.argv[1]), parse(sys.argv[2])
assert len(one) == 2 and [s for s, _, _ in one] == [s for s, _, _ in two], (one, two)
for (s, l1, p1), (_, l2, p2) in zip(one, two):
    assert abs(l2 - l1) <= 1e-5 * l1, (s, l1, l2)
    assert abs(p2 - p1) <= 1e-5 * l1 * p1 + 5e-7 * p1, (s, p1, p2)
PY
echo "TP2 from the 1-rank checkpoint: $(evals skip_tp2_from1.log)"
echo "PASS: --skip-train reproduces the end-of-training evaluation on 1 rank, PP2 and TP2, and TP2 = 1 rank"
