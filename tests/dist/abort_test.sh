#!/usr/bin/env bash
# A rank that throws must make `mpiexec -n 4` exit non-zero within seconds, not hang.
set -u
probe=$1; mpiexec=$2
start=$(date +%s)
timeout 60 "$mpiexec" -n 4 "$probe" 2 > /tmp/abort_probe.$$.log 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
cat /tmp/abort_probe.$$.log; rm -f /tmp/abort_probe.$$.log
echo "exit code $rc after ${elapsed}s"
[ "$rc" -eq 124 ] && { echo "FAIL: the job hung until the timeout"; exit 1; }
[ "$rc" -eq 0 ] && { echo "FAIL: the job exited 0 although rank 2 failed"; exit 1; }
[ "$elapsed" -le 20 ] || { echo "FAIL: took ${elapsed}s to stop"; exit 1; }
echo PASS
