#!/bin/bash
# --tensorboard-dir on a 2-rank gpt-tiny run, read back by tests/app/tensorboard_reader.py
# (Python's protobuf over TensorBoard's schema, its own CRC-32C): every record's CRCs, every
# tag, step and value against the run's --metrics-file. Then --tensorboard-log-interval with
# the --no-log-*-to-tensorboard flags, and a restart into the same folder (a new file; the
# first one untouched).
#   tensorboard_test.sh GPT_PRETRAIN MPIEXEC SOURCE_DIR SCRATCH
set -uo pipefail
bin=$1 mpiexec=$2 src=$3 tmp=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
reader=("$src/tests/app/tensorboard_reader.py" --batch-size 4 --world-size 2)

# fp16 from 2^25 with hysteresis 1 and window 2: steps 1-3 and 6 overflow and are skipped (no
# lm loss / grad-norm for them, as Megatron).
"$mpiexec" -n 2 "$bin" "${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --fp16 --initial-loss-scale 33554432 --hysteresis 1 --loss-scale-window 2 \
    --train-iters 6 --eval-interval 3 --eval-iters 1 --log-interval 2 \
    --tensorboard-dir tb1 --metrics-file m1.jsonl --log-validation-ppl-to-tensorboard \
    --log-memory-to-tensorboard --log-world-size-to-tensorboard --log-timers-to-tensorboard \
    > run1.log 2>&1 || { cat run1.log; fail "run 1 failed"; }
/usr/bin/python3 "${reader[@]}" --dir tb1 --metrics m1.jsonl --log-interval 2 --ppl --memory \
    --world-size-tag --timers || fail "run 1's event file disagrees with its metrics file"

"$mpiexec" -n 2 "$bin" "${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 4 --tensorboard-dir tb2 \
    --tensorboard-log-interval 2 --no-log-loss-scale-to-tensorboard \
    --no-log-learning-rate-to-tensorboard --metrics-file m2.jsonl > run2.log 2>&1 \
    || { cat run2.log; fail "run 2 failed"; }
/usr/bin/python3 "${reader[@]}" --dir tb2 --metrics m2.jsonl --tensorboard-log-interval 2 \
    --no-loss-scale --no-learning-rate || fail "run 2's event file disagrees with its metrics file"

# --timing-log-level 2: each timer as "<name>-time" (Megatron's timers.write) beside iteration-time,
# --log-throughput's throughput (run 1, without it, must have none), --log-params-norm's
# params-norm and --log-num-zeros-in-grad's num-zeros, as the metrics file and the log line have them.
"$mpiexec" -n 2 "$bin" "${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 2 --tensorboard-dir tb4 \
    --metrics-file m4.jsonl --log-timers-to-tensorboard --timing-log-level 2 --log-throughput --log-params-norm --log-num-zeros-in-grad > run4.log 2>&1 \
    || { cat run4.log; fail "run 4 failed"; }
/usr/bin/python3 "${reader[@]}" --dir tb4 --metrics m4.jsonl --timers --throughput --timer-tags \
    forward-backward,forward-compute,backward-compute,batch-generator,all-grads-sync,optimizer-clip-main-grad,optimizer-inner-step,optimizer \
    || fail "run 4's timers disagree with its metrics file"
grep -q "forward-backward ......" run4.log || fail "run 4 printed no timer block"
grep -qE "grad norm: [0-9.]+ \| num zeros: [0-9]+\.0 \| params norm: [0-9.]+ \|" run4.log \
  || fail "run 4's log line lacks num zeros or params norm"
grep -q '"num_zeros": ' m4.jsonl || fail "run 4's metrics file has no num_zeros"
grep -q '"params_norm": ' m4.jsonl || fail "run 4's metrics file has no params_norm"
! grep -qE "params norm|num zeros" run1.log || fail "run 1 logged a params norm or zeros without the flags"

first=$(ls tb2) sum=$(md5sum < "tb2/$first")
"$mpiexec" -n 2 "$bin" "${TINY_ARGS[@]}" --lr 1e-3 --lr-warmup-iters 0 --train-iters 2 --tensorboard-dir tb2 > run3.log 2>&1 \
  || { cat run3.log; fail "run 3 failed"; }
[ "$(ls tb2 | wc -l)" = 2 ] || fail "a restart into tb2 should add a second event file: $(ls tb2)"
[ "$(md5sum < "tb2/$first")" = "$sum" ] || fail "a restart changed the first run's event file"
echo "PASS: event files agree with the metrics files; a restart writes a new file"
