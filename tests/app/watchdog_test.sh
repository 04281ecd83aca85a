#!/usr/bin/env bash
# The hang watchdog (lib/core/watchdog.hpp, --distributed-timeout-minutes) on a 4-rank tiny
# job (TP 1, PP 2, DP 2), with GPT_DISTRIBUTED_TIMEOUT_SECONDS for a limit of seconds:
#  1. rank 3 (last stage, second replica) is SIGSTOPped mid-run: the job ends with the
#     watchdog's exit code 3 and one console line naming the operation and rank 3;
#  2. rank 3 never reaches the save (GPT_TEST_STALL_BEFORE_SAVE): the same, at the save;
#     2b. rank 3 stops inside the save (GPT_TEST_STALL_IN_SAVE): the others, blocked inside
#     HDF5's collective set-up, are ended by the deadline monitor, exit 3 (in their
#     exit-code-rank-R files: mpiexec reports the killed rank 3's 9);
#  3. rank 3 is stopped for a few seconds, well under the limit: nothing fires, exit 0.
# No assertion is on time: `timeout` only keeps a broken watchdog from hanging CI.
#   watchdog_test.sh GPT_PRETRAIN MPIEXEC SOURCE_DIR SCRATCH
set -u
bin=$1; mpiexec=$2; src=$3; tmp=$4
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
args=("${TINY_ARGS[@]}" --lr-warmup-iters 1 --pipeline-model-parallel-size 2)
# Marks this test's processes, so the rank to stop is found among them only.
tag="wd$$"
fails=0
pass() { echo "ok   $1"; }
fail() { echo "FAIL $1"; shift; printf '%s\n' "$@" | tail -20; fails=$((fails+1)); }

# rank_pid RANK: the pid of this test's gpt_pretrain rank RANK (MPICH's launcher exports PMI_RANK)
rank_pid() {
  local p
  for p in $(pgrep -x gpt_pretrain); do
    if tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "GPT_WD_TAG=$tag" &&
       tr '\0' '\n' < "/proc/$p/environ" 2>/dev/null | grep -qx "PMI_RANK=$1"; then echo "$p"; return; fi
  done
}
# wait_for_iteration LOG N: until LOG shows iteration N (bounded)
wait_for_iteration() {
  for _ in $(seq 600); do grep -qE "iteration +$2/" "$1" && return 0; sleep 0.2; done
  return 1
}
# hang_report NAME LOG RC PATTERN: exit code 3, exactly one error line on the console, and
# it is the watchdog's, matching PATTERN
hang_report() {
  local name=$1 log=$2 rc=$3 pattern=$4 n
  n=$(grep -c "gpt_pretrain: error" "$log")
  if [ "$rc" -ne 3 ] || [ "$n" -ne 1 ] || ! grep -qE -- "$pattern" "$log"; then
    fail "$name: rc=$rc (want 3), $n error lines, want one matching '$pattern':" "$(cat "$log")"; return
  fi
  # The report comes at the limit, not before it: the waited seconds it names reach 5.
  waited=$(grep -oE "hang: waited [0-9]+" "$log" | grep -oE "[0-9]+$")
  if [ "${waited:-0}" -lt 5 ]; then
    fail "$name: the report came after $waited s of waiting, under the 5 s limit:" "$(grep "gpt_pretrain: error" "$log")"; return
  fi
  if ! cat logs-"$name"/rank-*.log 2>/dev/null | grep -qE -- "$pattern"; then
    fail "$name: the report is not in the --log-dir files"; return
  fi
  pass "$name: $(grep "gpt_pretrain: error" "$log")"
}

# --- 1: a stopped rank ---------------------------------------------------------------
GPT_WD_TAG=$tag GPT_DISTRIBUTED_TIMEOUT_SECONDS=5 timeout 300 "$mpiexec" -n 4 "$bin" "${args[@]}" \
  --train-iters 1000000 --log-dir logs-stopped > stopped.log 2>&1 &
job=$!
if wait_for_iteration stopped.log 3 && pid=$(rank_pid 3) && [ -n "$pid" ]; then
  kill -STOP "$pid"
  wait "$job"; rc=$?
  # Rank 3's peers wait for it first (rank 1's pipeline receive or its loss all-reduce on
  # the 'pp' or 'model-parallel' group, rank 2's data-parallel all-reduce), so the reporter
  # usually names it: as the peer, or in a two-rank group (group names may hold a hyphen).
  # Under load a rank waiting on one of those peers can reach the limit first (rank 0's
  # data-parallel all-reduce with rank 1, which waits on rank 3; CI, stop 50's run): its
  # report is as true, so the pattern takes a wait on any peer or two-rank group.
  hang_report stopped stopped.log "$rc" \
    "error on rank [0-2]: hang: waited [0-9]+ s \(limit 5 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS\) for [a-z -]+ of [0-9]+ bytes (from|to) rank [0-3] on group|error on rank [0-2]: hang: waited [0-9]+ s \(limit 5 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS\) for [a-z -]+ of [0-9]+ bytes on group '[a-z-]+' \(ranks [0-3],[0-3]\)"
  grep -qE "hang: .* at iteration [0-9]+.*; last completed: " stopped.log || fail "stopped: no iteration or last completed operation in the report"
else
  kill "$job" 2>/dev/null; wait "$job"
  fail "stopped: the job did not reach iteration 3 or rank 3 was not found" "$(cat stopped.log)"
fi

# --- 2: a rank that never reaches the save -------------------------------------------
GPT_TEST_STALL_BEFORE_SAVE=3 GPT_DISTRIBUTED_TIMEOUT_SECONDS=5 timeout 300 "$mpiexec" -n 4 "$bin" "${args[@]}" \
  --train-iters 10 --save-interval 2 --save ck --log-dir logs-stall > stall.log 2>&1
rc=$?
hang_report stall stall.log "$rc" "error on rank [0-2]: hang: waited [0-9]+ s .* for .+ at iteration 2; last completed: "
[ ! -e ck/latest_checkpointed_iteration.txt ] || fail "stall: a checkpoint was published without rank 3"

# --- 2b: a rank that stops inside the save, before HDF5's collective file set-up ------
# The others block inside HDF5's MPI_Comm_dup (H5Pset_fapl_mpio), a call the watchdog cannot
# poll: its deadline monitor ends them. Each blocked rank reports itself (no claim from a
# monitor thread), so one to three lines. Before the fix the scope began at H5Fcreate and
# this job waited until `timeout` (seen across two nodes when a link went down mid-save).
GPT_TEST_STALL_IN_SAVE=3 GPT_DISTRIBUTED_TIMEOUT_SECONDS=5 timeout 120 "$mpiexec" -n 4 "$bin" "${args[@]}" \
  --train-iters 10 --save-interval 2 --save ck-in --log-dir logs-in-save > in-save.log 2>&1
rc=$?
blocked_re="error on rank [0-2]: hang: blocked ([0-9]+) s \(limit 5 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS\) inside H5Pset_fapl_mpio \(HDF5's MPI_Comm_dup of the checkpoint writer's communicator\), a call the watchdog cannot poll; last completed: checkpoint .* at iteration 2"
n=$(grep -c "gpt_pretrain: error" in-save.log)
blocked=$(grep -oE "hang: blocked [0-9]+" in-save.log | head -1 | grep -oE "[0-9]+$")
# mpiexec's own code is the worst of its ranks' (Hydra kills the stalled rank 3: 9), so
# the code 3 is checked where the job script reads it, the exit-code-rank-R files.
if [ "$rc" -eq 0 ] || [ "$n" -lt 1 ] || [ "$n" -gt 3 ] || [ "$(grep -c "gpt_pretrain: error" in-save.log)" != "$(grep -cE "$blocked_re" in-save.log)" ]; then
  fail "in-save: rc=$rc (want non-zero), $n error lines, want 1-3, each matching '$blocked_re':" "$(cat in-save.log)"
elif [ "${blocked:-0}" -lt 5 ]; then
  fail "in-save: reported after $blocked s, under the 5 s limit" "$(grep "gpt_pretrain: error" in-save.log)"
elif ! cat logs-in-save/rank-*.log | grep -qE -- "$blocked_re" || ! grep -qx 3 logs-in-save/exit-code-rank-[0-2]; then
  fail "in-save: the report or exit code 3 is not in the --log-dir files"
elif [ -e ck-in/latest_checkpointed_iteration.txt ]; then
  fail "in-save: a checkpoint was published without rank 3"
else pass "in-save: $(grep -m1 "gpt_pretrain: error" in-save.log)"; fi

# --- 3: a slow iteration, shorter than the limit --------------------------------------
GPT_WD_TAG=$tag GPT_DISTRIBUTED_TIMEOUT_SECONDS=60 timeout 300 "$mpiexec" -n 4 "$bin" "${args[@]}" \
  --train-iters 8 > slow.log 2>&1 &
job=$!
if wait_for_iteration slow.log 2 && pid=$(rank_pid 3) && [ -n "$pid" ]; then
  kill -STOP "$pid"; sleep 3; kill -CONT "$pid"
  wait "$job"; rc=$?
  if [ "$rc" -ne 0 ] || grep -q "hang:" slow.log || ! grep -qE "iteration +8/" slow.log; then
    fail "slow: rc=$rc, want 0, all 8 iterations and no watchdog report" "$(cat slow.log)"
  else pass "slow: a 3 s stall under a 60 s limit trains to the end"; fi
else
  kill "$job" 2>/dev/null; wait "$job"
  fail "slow: the job did not reach iteration 2 or rank 3 was not found" "$(cat slow.log)"
fi

[ "$fails" -eq 0 ] && echo "PASS: watchdog" || { echo "FAILED: $fails"; exit 1; }
