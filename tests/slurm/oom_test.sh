#!/usr/bin/env bash
# An out-of-memory kill by the kernel is named in the job's output (slurm/run-training.sh):
# run-training.sh (LAUNCHER=mpirun, as outside Slurm) runs in a memory cgroup of its own with
# a 256 MiB limit, and gpt_pretrain builds a model of about 2 GiB, with the memory
# prediction bypassed (DEVICE_MEMORY_GB). The kernel's OOM killer kills the rank; the output must hold
# "out of memory: the kernel's OOM killer killed 1 process(es) of this job (memory cgroup
# <ours>, limit 0.25 GiB)". Then a failure that is not an OOM kill (a bad flag) in the same
# cgroup must not be named one.
# Needs root and a writable memory cgroup (v1 memory controller, or v2 with memory enabled);
# prints "SKIPPED oom test: <why>" otherwise (CTest reports a skip, not a pass).
#   tests/slurm/oom_test.sh BUILD_DIR SOURCE_DIR
set -uo pipefail
build=$(readlink -f "$1"); src=$(readlink -f "$2")
skip() { echo "SKIPPED oom test: $*"; exit 0; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" = 0 ] || skip "needs root to create a memory cgroup"
[ -x "$build/app/gpt_pretrain" ] || fail "$build/app/gpt_pretrain is not built"

limit=$((256 * 1024 * 1024))
v1=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup | head -1)
if [ -n "$v1" ] && [ -w "/sys/fs/cgroup/memory$v1" ]; then
  cg=/sys/fs/cgroup/memory$v1/gpt-oom-$$
  mkdir "$cg" || skip "cannot create $cg"
  echo "$limit" > "$cg/memory.limit_in_bytes" || skip "cannot set memory.limit_in_bytes"
  # With swap the process would swap instead of being killed.
  [ -f "$cg/memory.memsw.limit_in_bytes" ] && echo "$limit" > "$cg/memory.memsw.limit_in_bytes"
else
  v2=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup | head -1)
  parent=/sys/fs/cgroup$v2
  grep -qw memory "$parent/cgroup.subtree_control" 2>/dev/null || skip "no writable memory cgroup (v1 memory controller or v2 with memory in $parent/cgroup.subtree_control)"
  cg=$parent/gpt-oom-$$
  mkdir "$cg" || skip "cannot create $cg"
  echo "$limit" > "$cg/memory.max" && echo 0 > "$cg/memory.swap.max" 2>/dev/null
fi
tmp=$(mktemp -d /tmp/gpt-oom.XXXXXX)
cleanup() {
  local p
  for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
  sleep 0.5; rmdir "$cg" 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
cd "$tmp" && ln -s "$src/configs" configs && ln -s "$src/data" data
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 PATH=$build/app:$PATH LAUNCHER=mpirun CHECKPOINTS=0
unset SLURM_JOB_ID SLURM_NTASKS

# in_cgroup CMD...: CMD inside the limited cgroup (the subshell moves itself there first).
in_cgroup() { (echo "$BASHPID" > "$cg/cgroup.procs" && exec "$@"); }
# About 150 M parameters: fp32 weights, gradients and Adam's state need over 2 GiB. The
# memory prediction would refuse it before training (it reads the cgroup's limit);
# DEVICE_MEMORY_GB=16 (the planner's override of a rank's memory) lets it through, as a
# prediction that underestimates would.
DEVICE_MEMORY_GB=16 in_cgroup "$src/slurm/run-training.sh" "" configs/gpt-tiny.ini "$tmp/run" --device cpu --distributed-backend mpi \
  --mock-data --num-layers 8 --hidden-size 1024 --num-attention-heads 8 --seq-length 64 \
  --max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 1 --train-iters 2 --lr-warmup-iters 1 --eval-iters 0 \
  > "$tmp/oom.log" 2>&1
rc=$?
cat "$tmp/oom.log" | grep -vE '^  [a-z_]+ \.+' | tail -8
((rc != 0)) || fail "the job over the cgroup limit exited 0"
want="out of memory: the kernel's OOM killer killed [1-9][0-9]* process\(es\) of this job \(memory cgroup [^ ]*/gpt-oom-$$, limit 0\.25 GiB\)"
grep -qE "$want" "$tmp/oom.log" || fail "no out-of-memory line /$want/ in the job's output"
echo "ok   an OOM kill is named: $(grep -oE "out of memory: [^;]*" "$tmp/oom.log")"

# A failure that is not an OOM kill must not be named one (the counter did not move).
in_cgroup "$src/slurm/run-training.sh" "" configs/gpt-tiny.ini "$tmp/run2" --no-such-flag > "$tmp/bad.log" 2>&1
rc=$?
((rc == 2)) || { tail -5 "$tmp/bad.log"; fail "a bad flag exited $rc, expected 2"; }
! grep -q "out of memory" "$tmp/bad.log" || fail "a bad flag was reported as out of memory: $(grep "out of memory" "$tmp/bad.log")"
echo "ok   a bad flag (exit 2) is not called an OOM kill"
echo PASS
