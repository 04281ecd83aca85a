#!/usr/bin/env bash
# Issue 20: gpt_pretrain's failures reach the user whole, once, before training where they
# can be known then. Full disks and read-only folders are real: small tmpfs / read-only
# mounts made in a private mount namespace (unshare -m as root, unshare -rm otherwise).
#   reliability_test.sh GPT_PRETRAIN MPIEXEC SOURCE_DIR SCRATCH [RUNS]
set -u
if [ -z "${GPT_REL_IN_NS:-}" ]; then
  if [ "$(id -u)" = 0 ]; then exec env GPT_REL_IN_NS=1 unshare -m --propagation private "$0" "$@"
  else exec env GPT_REL_IN_NS=1 unshare -rm --propagation private "$0" "$@"; fi
fi
bin=$1; mpiexec=$2; src=$3; tmp=$4; runs=${5:-5}
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
small=("${TINY_ARGS[@]}" --lr-warmup-iters 1)
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; shift; printf '%s\n' "$@" | tail -15; fails=$((fails+1)); }
# one_line NAME RC PATTERN -- command: exit RC and exactly one line, matching PATTERN
one_line() {
  local name=$1 want=$2 pattern=$3; shift 4
  local out rc; out=$("$@" 2>&1); rc=$?
  if [ "$rc" -ne "$want" ] || [ "$(grep -c . <<<"$out")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: rc=$rc (want $want), want one line matching '$pattern':" "$out"
  else pass "$name: $out"; fi
}
# reason NAME RC PATTERN LOGDIR -- command: exit RC, exactly one "error" report line
# matching PATTERN on the output, and PATTERN in some rank's --log-dir file
reason() {
  local name=$1 want=$2 pattern=$3 logs=$4; shift 5
  local out rc n
  out=$("$@" 2>&1); rc=$?
  n=$(grep -c "gpt_pretrain: error" <<<"$out")
  if [ "$rc" -ne "$want" ] || [ "$n" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    fail "$name: rc=$rc (want $want), $n report lines, pattern '$pattern':" "$out"; return
  fi
  if ! cat "$logs"/rank-*.log 2>/dev/null | grep -qE -- "$pattern"; then
    fail "$name: the reason is not in the --log-dir files"; return
  fi
  pass "$name"
}

# --- section 4: every value and output path is checked before training ---------------
one_line global-batch-negative 2 "global-batch-size must not be negative" -- "$bin" "${small[@]}" --global-batch-size -8 --dry-run
one_line layernorm-eps-negative 2 "layernorm-epsilon must be positive" -- "$bin" "${small[@]}" --layernorm-epsilon -1 --dry-run
one_line save-interval-negative 2 "save-interval must not be negative" -- "$bin" "${small[@]}" --save-interval -1 --dry-run
one_line ckpt-step-negative 2 "ckpt-step must be an iteration" -- "$bin" "${small[@]}" --ckpt-step -7 --dry-run
one_line config-is-folder 2 "is a directory" -- "$bin" --config configs
# Checked before the dry run ends, not at the first training step: a static loss scale in a
# 32-bit run, and no training length.
one_line loss-scale-fp32 2 "--loss-scale applies to --fp16 / --bf16 training only" -- "$bin" "${small[@]}" --loss-scale 1024 --dry-run
one_line no-train-length 2 "set --train-iters or --train-samples" -- "$bin" "${small[@]}" --train-iters 0 --dry-run
one_line plan-world-size-typo 2 "exceed the planner's bounds" -- "$bin" "${small[@]}" --plan-only --world-size 10000000
touch a-file
one_line save-is-a-file 2 "--save $tmp/a-file is a file, not a folder" -- "$mpiexec" -n 2 "$bin" "${small[@]}" --save "$tmp/a-file" --dry-run
mkdir -p ro && mount -t tmpfs -o size=1m,ro tmpfs ro
one_line save-read-only 2 "--save $tmp/ro/ck is not writable|cannot create the folder: Read-only" -- "$mpiexec" -n 2 "$bin" "${small[@]}" --save "$tmp/ro/ck" --dry-run
one_line metrics-read-only 2 "metrics-file .*(Read-only|not writable)" -- "$bin" "${small[@]}" --metrics-file "$tmp/ro/m.jsonl" --dry-run
mkdir -p full && mount -t tmpfs -o size=64k tmpfs full && dd if=/dev/zero of=full/fill bs=4k count=100 2>/dev/null
one_line log-dir-full 2 "--log-dir $tmp/full/logs is not writable: No space left on device" -- "$mpiexec" -n 2 "$bin" "${small[@]}" --log-dir "$tmp/full/logs" --dry-run
one_line save-no-room 2 "--save $tmp/small has .* free, but one checkpoint of this model needs about" -- \
  bash -c "mkdir -p small && mount -t tmpfs -o size=64k tmpfs small && '$bin' ${small[*]} --save '$tmp/small' --dry-run"

# --- section 1: the reason reaches the user, once, every time ------------------------
"$mpiexec" -n 2 "$bin" "${small[@]}" --train-iters 2 --save ck > train.log 2>&1 || { cat train.log; fail "training for the checkpoint"; }
cp -r ck ck-damaged && truncate -s 5000 ck-damaged/iter_0000002/model_optim.h5
for i in $(seq "$runs"); do
  rm -rf logs
  reason "damaged-checkpoint-2-ranks run $i" 1 "gpt_pretrain: error on rank [01]: .*iter_0000002" logs -- \
    "$mpiexec" -n 2 "$bin" "${small[@]}" --train-iters 4 --load ck-damaged --log-dir logs
done
# A full disk at the second save: room for one checkpoint, not two (the start-up check
# passes; the disk fills during the run).
ckbytes=$(du -sb ck/iter_0000002 | cut -f1)
for n in 1 2; do
  for i in $(seq "$runs"); do
    rm -rf logs; mkdir -p "d$n.$i" && mount -t tmpfs -o size=$((ckbytes * 3 / 2)) tmpfs "d$n.$i"
    reason "full-disk-save-$n-ranks run $i" 1 "gpt_pretrain: error( on rank [01])?: writing checkpoint file .*model_optim.h5 failed: No space left on device" logs -- \
      "$mpiexec" -n "$n" "$bin" "${small[@]}" --train-iters 2 --save-interval 1 --save "$tmp/d$n.$i" --log-dir logs
    umount "d$n.$i"
  done
done

# --- section 6: SIGUSR1 without --exit-signal-handler; fp16 runs that never update -----
"$mpiexec" -n 2 "$bin" "${small[@]}" --train-iters 100000 --log-dir usr1logs > usr1.log 2>&1 &
pid=$!
until grep -qE "iteration +2/" usr1.log 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.2; done
kill -USR1 $pid
until grep -q "received SIGUSR1" usr1.log usr1logs/rank-0.log 2>/dev/null || ! kill -0 $pid 2>/dev/null; do sleep 0.2; done
kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null
if grep -q "received SIGUSR1 .*checkpoint-on-signal is off" usr1.log; then pass "sigusr1-logged"
else fail "sigusr1-logged" "$(tail -5 usr1.log)"; fi
reason "fp16-never-updates" 1 "no update for 100 iterations in a row" fp16logs -- \
  "$bin" "${small[@]}" --fp16 --loss-scale 1e30 --train-iters 150 --log-dir fp16logs

umount ro full small 2>/dev/null
[ "$fails" -eq 0 ] && echo PASS || { echo "$fails failed"; exit 1; }
