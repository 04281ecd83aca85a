#!/usr/bin/env bash
# The reason for a failure reaches the user every time, once, and the rank's log file:
# repeats failing jobs (one rank fails while the others wait; every rank fails) and requires
# in each run exactly one "error on rank" line on the job's output holding the whole message,
# a non-zero exit, and the reason in the reporting rank's --log-dir file. (Other failing
# ranks log theirs too, unless the abort takes them down before they get there.)
set -u
probe=$1; mpiexec=$2; runs=${3:-10}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fails=0
check() {  # check NAME RANKS FAILING
  local name=$1 n=$2 failing=$3
  local i out rc lines
  for i in $(seq 1 "$runs"); do
    rm -rf "$tmp/logs"
    out=$(timeout 60 "$mpiexec" -n "$n" "$probe" "$failing" "$tmp/logs" 2>&1); rc=$?
    lines=$(grep -c "abort_probe: error on rank" <<<"$out")
    if [ "$rc" -eq 0 ] || [ "$rc" -eq 124 ] || [ "$lines" -ne 1 ] ||
       ! grep -qE "abort_probe: error on rank [0-9]+: probe failure on rank [0-9]+: x{3000} END-OF-REASON" <<<"$out"; then
      echo "FAIL $name run $i: rc=$rc, $lines report lines:"; echo "$out" | cut -c1-200 | tail -8
      fails=$((fails+1)); continue
    fi
    local r
    r=$(grep -oE "abort_probe: error on rank [0-9]+" <<<"$out" | grep -oE "[0-9]+$")
    if ! grep -q "fatal: abort_probe: error on rank $r: probe failure on rank $r: x* END-OF-REASON" "$tmp/logs/rank-$r.log" 2>/dev/null; then
      echo "FAIL $name run $i: the reason is not in rank $r's log file"; fails=$((fails+1))
    fi
  done
  echo "done $name ($runs runs)"
}
check one-of-2 2 1
check one-of-4 4 2
check all-of-2 2 all
check all-of-4 4 all
[ "$fails" -eq 0 ] && echo PASS || { echo "$fails failures"; exit 1; }
