#!/bin/bash
# gpt_pretrain's checkpoint guarantees end to end, on 2 ranks:
#  1. --async-save: saves are written in the background and published; a resumed run continues
#     with the losses of a run that was never interrupted; SIGUSR1 with --exit-signal-handler
#     waits for the background save and exits 0 with it published.
#  2. A checkpoint is refused by a model whose heads differ (both values named), and loads into
#     another layout (TP 2, bf16); --use-checkpoint-args resumes it given no model flags.
#  3. A tracker of NUL bytes: refused without --load-fallback; with it, the run loads the newest
#     good checkpoint, repairs the tracker and its own saves succeed.
#  4. A second job on the same --save folder is refused naming the first; after kill -9 of the
#     first, a requeue takes the folder.
#   trainer_ckpt_test.sh GPT_PRETRAIN MPIEXEC SCRATCH SOURCE_DIR
set -uo pipefail
bin=$1 mpiexec=$2 tmp=$3 src=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
args=("${TINY_ARGS[@]}" --lr 3e-3 --lr-warmup-iters 2 --hidden-dropout 0.1 --attention-dropout 0.1)
run() { local log=$1; shift; "$mpiexec" -n 2 "$bin" "${args[@]}" "$@" > "$log" 2>&1; }

# 1. asynchronous saves
# Same --train-iters in every run (it sets the LR schedule); --exit-interval stops the first.
run async.log --train-iters 8 --exit-interval 6 --save-interval 2 --save a --async-save || { cat async.log; fail "async run failed"; }
for it in 2 4 6; do
    grep -q "successfully saved checkpoint at iteration $it to a" async.log || { cat async.log; fail "iteration $it not published"; }
done
grep -q "being written in the background" async.log || fail "no background save logged"
[ "$(cat a/latest_checkpointed_iteration.txt)" = 6 ] || fail "tracker is not 6"
run resumed.log --train-iters 8 --load a --save a --async-save || { cat resumed.log; fail "resume failed"; }
run straight.log --train-iters 8 || { cat straight.log; fail "straight run failed"; }
[ "$(losses straight.log | tail -2)" = "$(losses resumed.log)" ] || fail "resumed losses differ: $(losses resumed.log)"
"$mpiexec" -n 2 "$bin" "${args[@]}" --train-iters 100000 --save s --load s --async-save --save-interval 3 \
    --exit-signal-handler > signal.log 2>&1 &
pid=$!
for _ in $(seq 240); do grep -q "successfully saved checkpoint at iteration 3 " signal.log && break; sleep 0.5; done
kill -USR1 "$pid"
wait "$pid"; rc=$?
[ "$rc" = 0 ] || { cat signal.log; fail "USR1 with --async-save exited $rc"; }
saved=$(cat s/latest_checkpointed_iteration.txt)
grep -q "exiting on signal SIGUSR1 after saving checkpoint at iteration $saved" signal.log || { cat signal.log; fail "no exit line"; }
grep -q "successfully saved checkpoint at iteration $saved " signal.log || { cat signal.log; fail "the exit save was not published before exit"; }
echo "async: saves 2 4 6 published, resume matches, USR1 -> $saved published before exit 0"

# 2. the model must match the checkpoint; the layout need not
# a/ now holds iteration 8 (the resumed run saved at its end).
run heads.log --train-iters 10 --load a --num-attention-heads 4 && fail "a 4-head model loaded a 2-head checkpoint"
grep -q -- "--num-attention-heads: 2 in the checkpoint, 4 in this run" heads.log || { cat heads.log; fail "no head-count message"; }
run tp2.log --train-iters 10 --load a --tensor-model-parallel-size 2 --make-vocab-size-divisible-by 64 --bf16 \
    || { cat tp2.log; fail "TP 2 bf16 could not load the TP 1 fp32 checkpoint"; }
grep -qiE "loaded checkpoint.* at iteration 8" tp2.log || { cat tp2.log; fail "TP 2 did not load iteration 8"; }
# --use-checkpoint-args: no model flags (no gpt-tiny.ini either), the checkpoint's are taken;
# a contradicting one is refused naming both values.
"$mpiexec" -n 2 "$bin" --use-checkpoint-args --load a --mock-data --micro-batch-size 2 --global-batch-size 4 \
    --train-iters 10 --lr 3e-3 --log-interval 1 --eval-iters 0 --device cpu --distributed-backend mpi \
    > ckargs.log 2>&1 || { cat ckargs.log; fail "--use-checkpoint-args could not resume without model flags"; }
grep -q -- "--use-checkpoint-args: from a/.*num_layers 2, hidden_size 64, num_attention_heads 2" ckargs.log \
    || { cat ckargs.log; fail "no --use-checkpoint-args line"; }
grep -qiE "loaded checkpoint.* at iteration 8" ckargs.log \
    || { cat ckargs.log; fail "--use-checkpoint-args did not load 8"; }
run ckheads.log --train-iters 10 --load a --use-checkpoint-args --num-attention-heads 4 \
    && fail "--use-checkpoint-args accepted a contradicting head count"
grep -q -- "--num-attention-heads: 2 in the checkpoint a/.*, 4 given" ckheads.log \
    || { cat ckheads.log; fail "no conflict line"; }
echo "args: head change refused, TP2/bf16 load fine, --use-checkpoint-args resumes without model flags"

# 3. a tracker of NUL bytes
cp -r a t && head -c 8 /dev/zero > t/latest_checkpointed_iteration.txt
run nul.log --train-iters 10 --load t --save t && fail "a NUL tracker was accepted"
grep -q "not an iteration number" nul.log || { cat nul.log; fail "no tracker message"; }
run nulfb.log --train-iters 10 --load t --save t --load-fallback --save-interval 1 || { cat nulfb.log; fail "fallback run failed"; }
grep -qiE "loaded checkpoint.* at iteration 8" nulfb.log || { cat nulfb.log; fail "fallback did not load 8"; }
grep -q "rewrote .*latest_checkpointed_iteration.txt to name iteration 8" nulfb.log || { cat nulfb.log; fail "no repair logged"; }
[ "$(cat t/latest_checkpointed_iteration.txt)" = 10 ] || fail "saves after the fallback did not update the tracker"
echo "tracker: NUL refused; --load-fallback loaded 8, repaired the tracker, saved 9 and 10"

# 4. one writer per folder
"$mpiexec" -n 2 "$bin" "${args[@]}" --train-iters 100000 --save l > first.log 2>&1 &
first=$!
for _ in $(seq 240); do grep -qE "iteration +2/" first.log && break; sleep 0.5; done
run second.log --train-iters 10 --save l && fail "a second job wrote to a locked folder"
grep -q "is in use by another job" second.log || { cat second.log; fail "no lock message"; }
grep -q "pid " second.log || fail "the message does not name the holder"
# The holder named in the lock file is rank 0: kill -9 it, as a node failure would; the
# launcher then ends the job.
holder=$(grep -oE 'pid [0-9]+' l/gpt_pretrain.lock | cut -d' ' -f2)
[ -n "$holder" ] || fail "no pid in l/gpt_pretrain.lock"
kill -9 "$holder"
for _ in $(seq 300); do kill -0 "$first" 2>/dev/null || break; sleep 0.1; done
kill -0 "$first" 2>/dev/null && { kill -9 "$first"; fail "the first job did not end after kill -9 of its rank 0"; }
wait "$first" 2>/dev/null
run requeue.log --train-iters 10 --save l --load l || { cat requeue.log; fail "the requeue was blocked by a dead job's lock"; }
echo "lock: second writer refused ($(grep -o 'in use by another job ([^;]*' second.log | head -1)); requeue after kill -9 ran"
echo PASS
