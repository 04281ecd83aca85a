#!/usr/bin/env bash
# kill -9 during saves: a job saves checkpoint after checkpoint; we SIGKILL all its ranks
# (or just one) at varied moments, so the kill lands in every phase of a save (data
# writes, close, fsync, rename, tracker update, retention). After every kill the tracker
# must name a checkpoint that loads and holds exactly that iteration's values (no
# --load-fallback), on 2 ranks and resharded to 1, and the next run must save again.
#   kill_test.sh PROBE MPIEXEC SCRATCH [async]
# async: the job saves with --async-save's background writer, and each kill is aimed at a
# save in flight (after DIR.pids/inflight appears: the helper threads are writing).
set -u
probe=$1; mpiexec=$2; scratch=$3; mode=${4:-sync}
dir=$scratch/save
rm -rf "$scratch"; mkdir -p "$scratch"
fail() { echo "FAIL: $*"; exit 1; }

"$mpiexec" -n 2 "$probe" save "$dir" 1 1 4 || fail "first save"
delays=(0.3 0.7 1.1 0.5 1.6 0.9 2.0 0.4)
save_mode=save mib=4
if [ "$mode" = async ]; then
    # Kills land this long after a background save started; 32 MiB per save keeps the
    # helper threads busy for a while.
    delays=(0 0.02 0.05 0 0.01 0.1)
    save_mode=save-async mib=32
fi
for round in "${!delays[@]}"; do
    before=$(cat "$dir/latest_checkpointed_iteration.txt"); seen=""
    rm -rf "$dir.pids"
    "$mpiexec" -n 2 "$probe" $save_mode "$dir" $((before + 1)) 100000 $mib 2 > "$scratch/save.log" 2>&1 &
    job=$!
    for _ in $(seq 100); do [ -f "$dir.pids/rank0" ] && [ -f "$dir.pids/rank1" ] && break; sleep 0.1; done
    if [ "$mode" = async ]; then
        # Round 1 and later: not the job's first save, so a published one precedes it.
        seen=""
        for _ in $(seq 1500); do
            seen=$(cat "$dir.pids/inflight" 2>/dev/null)
            [ -n "$seen" ] && { (( round % 3 == 0 )) || [ "$seen" != "$((before + 1))" ]; } && break
            seen=""
            sleep 0.02
        done
        [ -n "$seen" ] || fail "round $round: no background save in flight within 30 s"
    fi
    sleep "${delays[$round]}"
    if (( round % 2 == 0 )); then victims="$(cat "$dir.pids/rank0") $(cat "$dir.pids/rank1")"; else victims=$(cat "$dir.pids/rank1"); fi
    kill -9 $victims 2>/dev/null
    # The launcher must notice and end the job (the surviving rank must not hang).
    for _ in $(seq 300); do kill -0 $job 2>/dev/null || break; sleep 0.1; done
    kill -0 $job 2>/dev/null && { kill -9 $job; fail "round $round: job still running 30 s after kill -9 of $victims"; }
    wait $job
    after=$(cat "$dir/latest_checkpointed_iteration.txt")
    leftovers=$(ls "$dir" | grep -c '\.tmp-' || true)
    echo "round $round: killed [$victims] ${seen:+during the background save of $seen, }after ${delays[$round]} s; tracker $before -> $after; unfinished folders: $leftovers"
    [ "$after" -ge "$before" ] || fail "tracker went backwards"
    out=$("$mpiexec" -n 2 "$probe" check "$dir" 2>&1) || fail "round $round: check on 2 ranks: $out"
    echo "$out" | grep -q "^loaded iteration $after$" || fail "round $round: expected iteration $after, got: $out"
    out=$("$mpiexec" -n 1 "$probe" check "$dir" 2>&1) || fail "round $round: check on 1 rank: $out"
    echo "$out" | grep -q "^loaded iteration $after$" || fail "round $round: 1 rank: $out"
done
# The run restarts: a normal save after all the kills succeeds, cleans up and keeps 2.
latest=$(cat "$dir/latest_checkpointed_iteration.txt")
"$mpiexec" -n 2 "$probe" $save_mode "$dir" $((latest + 1)) 1 4 2 || fail "save after the kills"
ls "$dir"
[ "$(ls "$dir" | grep -c '\.tmp-')" -eq 0 ] || fail "unfinished folders left after a good save"
[ "$(ls -d "$dir"/iter_* | wc -l)" -eq 2 ] || fail "keep-last 2 not applied"
"$mpiexec" -n 2 "$probe" check "$dir" | grep -q "^loaded iteration $((latest + 1))$" || fail "final check"
echo PASS
