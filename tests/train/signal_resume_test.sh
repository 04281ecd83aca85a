#!/bin/bash
# gpt_pretrain under mpiexec -n 2 with --exit-signal-handler: USR1 sent to the launcher (as
# Slurm's batch shell does) -> the ranks save at the end of the iteration and exit 0 -> a
# second run with --load resumes at the next iteration with the same losses as a run that
# was never interrupted.
#   signal_resume_test.sh GPT_PRETRAIN MPIEXEC SCRATCH SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 tmp=$3 src=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
args=("${TINY_ARGS[@]}" --lr 3e-3 --lr-warmup-iters 2 --train-iters 400
      --hidden-dropout 0.1 --attention-dropout 0.1)

# Megatron's --log-progress and non-persistent saves every 2 iterations ride along.
"$mpiexec" -n 2 "$bin" "${args[@]}" --save ck --load ck --exit-signal-handler --log-progress \
  --non-persistent-save-interval 2 --non-persistent-ckpt-type global > run1.log 2>&1 &
pid=$!
for _ in $(seq 240); do grep -qE "iteration +3/" run1.log && break; sleep 0.5; done
grep -qE "iteration +3/" run1.log || { kill "$pid"; cat run1.log; fail "no iteration 3 within 120 s"; }
kill -USR1 "$pid"
wait "$pid"; rc=$?
[ "$rc" = 0 ] || { cat run1.log; fail "the signalled run exited with $rc, expected 0"; }
saved=$(tr -d '[:space:]' < ck/latest_checkpointed_iteration.txt) || fail "no tracker after USR1"
[[ $saved =~ ^[0-9]+$ ]] && ((saved >= 3 && saved < 400)) || fail "tracker says '$saved'"
grep -q "exiting on signal SIGUSR1 after saving checkpoint at iteration $saved" run1.log \
  || { cat run1.log; fail "no exit line for iteration $saved"; }
grep -qP "^\S+ \S+\tJob ID: [^\t]*\t# GPUs: 2\tStarting job$" ck/progress.txt || fail "no 'Starting job' in progress.txt"
grep -qP "\t# GPUs: 2\tSaved checkpoint\tIteration: $saved\tJob throughput: [0-9.]+ TFLOP/s/GPU\t.*\tFloating-point operations: [0-9.]+e\+[0-9]+\t" \
  ck/progress.txt || { cat ck/progress.txt; fail "no 'Saved checkpoint' line for iteration $saved in progress.txt"; }
kept=$(ls ck/non_persistent | grep -c '^iter_')
[ "$kept" = 1 ] || { ls ck/non_persistent; fail "the non-persistent folder keeps $kept checkpoints, not 1"; }
last=$(losses run1.log | tail -1 | cut -d' ' -f1)
[ "$last" = "$saved" ] || fail "the last logged iteration is $last but the checkpoint is at $saved"

stop=$((saved + 2))
"$mpiexec" -n 2 "$bin" "${args[@]}" --load ck --exit-interval "$stop" > run2.log 2>&1 \
  || { cat run2.log; fail "the resumed run failed"; }
grep -qiE "loaded checkpoint.* at iteration $saved\b" run2.log || { cat run2.log; fail "no 'loaded checkpoint ... at iteration $saved'"; }
first=$(losses run2.log | head -1 | cut -d' ' -f1)
[ "$first" = $((saved + 1)) ] || fail "the resumed run starts at iteration $first, expected $((saved + 1))"

"$mpiexec" -n 2 "$bin" "${args[@]}" --exit-interval "$stop" > straight.log 2>&1 \
  || { cat straight.log; fail "the uninterrupted run failed"; }
want=$(losses straight.log | tail -2) got=$(losses run2.log)
[ "$want" = "$got" ] || fail "resumed losses differ from the uninterrupted run's: want [$want] got [$got]"
echo "PASS: USR1 -> checkpoint at $saved, exit 0; resumed at $((saved + 1)); losses $(echo $got)"
