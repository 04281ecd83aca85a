#!/usr/bin/env bash
# slurm/run-training.sh's handling of a rank's recorded exit code, with a stand-in srun (no
# Slurm, a few seconds): a failing rank leaves <log-dir>/exit-code-rank-R (lib/dist/fatal.hpp)
#   1. srun still waiting after a rank recorded a hang (exit 3), as for a node it cannot
#      reach: the script ends srun HANG_GRACE_SECONDS later and exits 3
#   2. srun exits 137 (MPI_Abort: slurmstepd killed the step) after a recorded hang: exit 3
#   3. records 3 and 2 (a configuration error wins): exit 2
#   4. srun exits 1 with no record: the launcher's code stays
# The two-node test (phase 4b) and slurm_test.sh (phase 4d) run the real thing; this one
# pins the path the two-node test takes only when its cut lands in a call the watchdog
# cannot poll (the ranks _exit 3 and srun waits for the cut node).
#   tests/slurm/run_training_test.sh SOURCE_DIR
set -euo pipefail
src=$(readlink -f "$1")
tmp=$(mktemp -d /tmp/gpt-run-training.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
mkdir -p "$tmp/bin"
# gpt_pretrain is only looked up, never run: srun below stands for the launch.
printf '#!/bin/sh\nexit 0\n' > "$tmp/bin/gpt_pretrain"
# The stand-in srun: FAKE_RECORDS "RANK:CODE ..." written into --log-dir, then FAKE_EXIT, or
# (FAKE_EXIT=wait) a wait that only a signal ends, as srun's for an unreachable node (ended
# after 60 s, so a broken script leaves nothing behind).
cat > "$tmp/bin/srun" <<'EOS'
#!/bin/bash
log_dir=
while (($#)); do [ "$1" = --log-dir ] && log_dir=$2; shift; done
for r in $FAKE_RECORDS; do printf '%s\ngpt_pretrain: error on rank %s: %s\n' "${r#*:}" "${r%%:*}" "fake reason ${r#*:}" > "$log_dir/exit-code-rank-${r%%:*}"; done
[ "$FAKE_EXIT" = wait ] || exit "$FAKE_EXIT"
trap 'exit 143' TERM
for ((i = 0; i < 60; ++i)); do sleep 1; done
exit 99
EOS
chmod +x "$tmp/bin/gpt_pretrain" "$tmp/bin/srun"

# case NAME RECORDS SRUN_EXIT WANT_RC WANT_LINE
case_() {
  local name=$1 records=$2 srun_exit=$3 want=$4 line=$5 rc=0
  env -u SLURM_JOB_ID -u SLURM_RESTART_COUNT PATH="$tmp/bin:$PATH" CHECKPOINTS=0 HANG_GRACE_SECONDS=2 \
    FAKE_RECORDS="$records" FAKE_EXIT="$srun_exit" \
    timeout 30 "$src/slurm/run-training.sh" "" config.ini "$tmp/run-$name" > "$tmp/$name.out" 2>&1 || rc=$?
  [ "$rc" = "$want" ] || { cat "$tmp/$name.out"; fail "$name: run-training.sh exited $rc, expected $want"; }
  [ -z "$line" ] || grep -qE -- "$line" "$tmp/$name.out" || { cat "$tmp/$name.out"; fail "$name: no line /$line/"; }
  echo "ok $name: exit $rc"
}
case_ hang-srun-waits "1:3 0:3" wait 3 "^hang: the watchdog ended a wait on rank 0 \(exit 3\): gpt_pretrain: error on rank 0: fake reason 3"
grep -q "a rank ended a hang (exit 3) 2 s ago and srun is still waiting" "$tmp/hang-srun-waits.out" || fail "hang-srun-waits: srun was not ended by the script"
case_ hang-abort-137 "2:3" 137 3 "rank 2 recorded exit 3: the job's exit code is 3, not the launcher's 137"
case_ usage-wins "0:3 1:2" 143 2 "rank 1 recorded exit 2"
case_ no-record "" 1 1 "gpt_pretrain exited with 1"
echo "PASS"
