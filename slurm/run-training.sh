#!/bin/bash
# Shared body of the training jobs: module loads, per-job folders, the launch, forwarding
# Slurm's warning signal to the ranks, and requeueing after a checkpoint-and-exit.
#   run-training.sh "MODULES" CONFIG RUN_DIR [gpt_pretrain flags...]
# Environment:
#   LAUNCHER=srun    (default) srun --mpi=pmi2: Slurm's PMI-2 server, which MPICH's PMI client
#                    speaks (Debian's MPICH included); one rank per Slurm task.
#   LAUNCHER=mpirun  MPICH's Hydra: inside an allocation it starts its proxies with srun and
#                    runs SLURM_NTASKS ranks. For MPI builds whose PMI Slurm does not serve.
#   CHECKPOINTS=0    no --save/--load/--exit-signal-handler: USR1 is then only logged (the
#                    ranks would die of it) and the job never requeues itself.
#   NO_REQUEUE=1     checkpoint on USR1 and exit, but do not requeue.
#   MAX_RESTARTS=N   (default 3; the templates' --max-restarts) requeue a job that died of a
#                    fault - a crash or signal, a hang ended by the watchdog (exit 3), a node
#                    failure - at most N times; it resumes from the newest complete
#                    checkpoint. Exit 2 (a configuration error) is never retried. Only fault
#                    restarts count: SLURM_RESTART_COUNT less this script's own requeues after
#                    a checkpoint on USR1 (counted in RUN_DIR/logs/planned-requeues-JOBID).
#   HANG_GRACE_SECONDS=N  (default 10) after a rank ended a hang (the watchdog's exit 3), the
#                    launcher gets N s to end the other ranks, else it is ended here; the job
#                    then ends with exit 3 (not the launcher's 137/143), a fault as above.
# A rank killed by the kernel's OOM killer (the memory cgroup's oom_kill counter rose during
# the run) is named in one "out of memory: ..." line and never requeued: it would recur.
set -uo pipefail
modules=$1 config=$2 run_dir=$3; shift 3
launcher=${LAUNCHER:-srun}
checkpoints=${CHECKPOINTS:-1}

# A batch shell is not a login shell, so `module` is often undefined here: source the site's
# init (Lmod or environment-modules). Module scripts are not `set -u` clean.
set +u
if ! type module >/dev/null 2>&1; then
  for init in "${MODULESHOME:-/nonexistent}/init/bash" /usr/share/lmod/lmod/init/bash \
              /usr/share/modules/init/bash /etc/profile.d/lmod.sh /etc/profile.d/modules.sh; do
    if [ -f "$init" ]; then . "$init"; break; fi
  done
fi
if [ -n "$modules" ]; then
  if type module >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    module load $modules || { echo "module load $modules failed; edit MODULES for this cluster"; exit 1; }
  else
    echo "no module command on $(hostname): MODULES=\"$modules\" not loaded, using PATH"
  fi
fi
set -u
command -v gpt_pretrain >/dev/null || { echo "gpt_pretrain is not on PATH (MODULES=\"$modules\")"; exit 1; }

ckpt_dir=$run_dir/checkpoints
log_dir=$run_dir/logs/${SLURM_JOB_ID:-local}
mkdir -p "$ckpt_dir" "$log_dir"

# Fault restarts so far: Slurm's restart count covers every requeue, this script's planned
# ones (checkpoint before the time limit) are not faults. A node failure makes Slurm requeue
# the job without this script, so the limit is checked here too, before training.
max_restarts=${MAX_RESTARTS:-3}
[[ $max_restarts =~ ^[0-9]+$ ]] || { echo "MAX_RESTARTS='$max_restarts' is not a number"; exit 2; }
planned_file=$run_dir/logs/planned-requeues-${SLURM_JOB_ID:-local}
planned=$(cat "$planned_file" 2>/dev/null || echo 0)
faults=$(( ${SLURM_RESTART_COUNT:-0} - planned ))
if ((faults > max_restarts)); then
  echo "job ${SLURM_JOB_ID:-?} was restarted after $faults faults, more than MAX_RESTARTS=$max_restarts: not training again"
  exit 1
fi
echo "job ${SLURM_JOB_ID:-?} (restart count ${SLURM_RESTART_COUNT:-0}) on ${SLURM_JOB_NODELIST:-$(hostname)}: $(command -v gpt_pretrain), launcher $launcher, checkpoints in $ckpt_dir, logs in $log_dir"

# The kernel's OOM killer ends a rank with SIGKILL, and all the user sees is the launcher's
# "KILLED BY SIGNAL: 9" (mpirun) or a task killed (srun). The memory cgroup counts its OOM
# kills: this job's cgroup (Slurm's job_<id> with task/cgroup, else this script's own, where
# the ranks also run) is read before the launch and after, and a rise is named in one line.
#   cgroup v2: memory.events "oom_kill N", limit memory.max; v1: memory.oom_control
#   "oom_kill N", limit memory.limit_in_bytes (CGROUP_FS=/sys/fs/cgroup by default).
cgroup_fs=${CGROUP_FS:-/sys/fs/cgroup}
memcg=""
memcg_find() {
  local path
  path=$(sed -n 's/^[0-9]*:\([^:]*,\)\{0,1\}memory\(,[^:]*\)\{0,1\}:\(.*\)$/\3/p' /proc/self/cgroup | head -1)
  if [ -n "$path" ] && [ -f "$cgroup_fs/memory$path/memory.oom_control" ]; then
    memcg=$cgroup_fs/memory$path
  else
    path=$(sed -n 's/^0::\(.*\)$/\1/p' /proc/self/cgroup | head -1)
    local m
    for m in "$cgroup_fs" "$cgroup_fs/unified"; do
      [ -n "$path" ] && [ -f "$m$path/memory.events" ] && { memcg=$m$path; break; }
    done
  fi
  [ -n "$memcg" ] || return 0
  # Slurm's cgroup plugins put the batch step under job_<id>, which also holds the ranks' steps.
  local d=$memcg
  while [ "$d" != / ] && [ "$d" != . ] && [ "${#d}" -gt "${#cgroup_fs}" ]; do
    if [ -n "${SLURM_JOB_ID:-}" ] && [ "$(basename "$d")" = "job_$SLURM_JOB_ID" ]; then memcg=$d; break; fi
    d=$(dirname "$d")
  done
}
oom_kills() {
  [ -n "$memcg" ] || { echo 0; return; }
  local f=$memcg/memory.events; [ -f "$f" ] || f=$memcg/memory.oom_control
  awk '$1 == "oom_kill" { print $2; found = 1 } END { if (!found) print 0 }' "$f" 2>/dev/null || echo 0
}
oom_limit() {
  local v
  v=$(cat "$memcg/memory.max" 2>/dev/null || cat "$memcg/memory.limit_in_bytes" 2>/dev/null || echo max)
  # v1 writes "no limit" as a page-rounded 2^63 - 1.
  if [[ $v =~ ^[0-9]+$ ]] && ((v < 1 << 60)); then awk -v b="$v" 'BEGIN { printf "%.2f GiB", b / 1073741824 }'
  else echo "none of its own"; fi
}
memcg_find
oom_before=$(oom_kills)

args=(--config "$config" --log-dir "$log_dir")
if [ "$checkpoints" != 0 ]; then
  # --load on the checkpoint folder: a requeued job resumes where the last one saved; the
  # first job finds no tracker file and starts from scratch.
  args+=(--save "$ckpt_dir" --load "$ckpt_dir" --exit-signal-handler)
fi
args+=("$@")

# A failing rank leaves <log-dir>/exit-code-rank-R (its exit code, then its line; see
# lib/dist/fatal.hpp): a run's files are this run's (a requeued job reuses the folder).
rm -f "$log_dir"/exit-code-rank-*
case $launcher in
  srun) srun --mpi=pmi2 --kill-on-bad-exit=1 gpt_pretrain "${args[@]}" & ;;
  mpirun) mpirun -np "${SLURM_NTASKS:-1}" gpt_pretrain "${args[@]}" & ;;
  *) echo "unknown LAUNCHER=$launcher (srun or mpirun)"; exit 2 ;;
esac
launcher_pid=$!

# Slurm signals only this batch shell (--signal=B:USR1@..., or scancel --batch): pass it on
# to every rank, which agree to save at the end of the current iteration and exit 0. Both
# srun and Hydra's mpirun forward a USR1 they receive to all of their tasks.
signalled=0 interrupted=0
forward() {
  interrupted=1
  if [ "$checkpoints" = 0 ]; then
    echo "$(date -Is) caught USR1: checkpoints are off (CHECKPOINTS=0), the ranks run on"
    return
  fi
  signalled=1
  echo "$(date -Is) caught USR1: asking the ranks to checkpoint and exit"
  kill -USR1 "$launcher_pid" 2>/dev/null
}
trap forward USR1

# A hang the watchdog ended (exit 3, lib/core/watchdog*) must end the job within the
# timeout plus a few seconds. The launcher usually follows at once (MPI_Abort, or srun
# --kill-on-bad-exit after a rank's exit 3), but a node that cannot be reached (a cut link)
# keeps srun waiting for its tasks until Slurm declares the node down (SlurmdTimeout, often
# minutes). So once a rank has recorded exit 3, the launcher gets HANG_GRACE_SECONDS
# (default 10) to end, then it is ended here; Slurm cleans up the unreachable node's part.
hang_grace=${HANG_GRACE_SECONDS:-10}
[[ $hang_grace =~ ^[0-9]+$ ]] || { echo "HANG_GRACE_SECONDS='$hang_grace' is not a number"; kill "$launcher_pid"; exit 2; }
recorded_codes() { local f; for f in "$log_dir"/exit-code-rank-*; do [ -f "$f" ] && head -n 1 "$f"; done; }
# (Not `recorded_codes | grep -q`: under pipefail, grep -q's early exit fails the pipeline
# with SIGPIPE once several ranks have recorded.)
has_record() { local c; c=$(recorded_codes); grep -qx "$1" <<< "$c"; }
first_record() {  # first_record CODE: the file of the lowest-numbered rank that recorded CODE
  local f; for f in $(ls -v "$log_dir"/exit-code-rank-* 2>/dev/null); do
    [ "$(head -n 1 "$f")" = "$1" ] && { echo "$f"; return; }; done
}
(
  while kill -0 "$launcher_pid" 2>/dev/null; do
    if has_record 3; then
      for ((i = 0; i < hang_grace; ++i)); do kill -0 "$launcher_pid" 2>/dev/null || exit 0; sleep 1; done
      echo "$(date -Is) a rank ended a hang (exit 3) ${hang_grace} s ago and $launcher is still waiting (for a node it cannot reach?): ending it"
      kill -TERM "$launcher_pid" 2>/dev/null
      for ((i = 0; i < 3; ++i)); do kill -0 "$launcher_pid" 2>/dev/null || exit 0; sleep 1; done
      kill -KILL "$launcher_pid" 2>/dev/null
      exit 0
    fi
    sleep 1
  done
) &
hang_monitor=$!

# `wait` returns early (status > 128) when a trapped signal arrives; then wait again for the
# launcher itself, whose exit status is the job's (bash keeps it if it ended meanwhile).
while true; do
  interrupted=0
  wait "$launcher_pid"; rc=$?
  [ "$interrupted" = 1 ] || break
done
kill "$hang_monitor" 2>/dev/null; wait "$hang_monitor" 2>/dev/null
echo "$(date -Is) gpt_pretrain exited with $rc"
# The launcher's code (srun: 137 after MPI_Abort, 143 or 9 for ranks it killed) replaces the
# one a failing rank chose; the ranks' records restore it: a configuration error (2) wins,
# then a hang the watchdog ended (3). The job then ends with that code (Slurm's ExitCode 3:0).
if [ "$rc" != 0 ]; then
  for want in 2 3; do
    if has_record "$want"; then
      f=$(first_record "$want")
      [ "$rc" = "$want" ] || echo "rank ${f##*-rank-} recorded exit $want: the job's exit code is $want, not the launcher's $rc"
      rc=$want
      [ "$want" = 3 ] && echo "hang: the watchdog ended a wait on rank ${f##*-rank-} (exit 3): $(sed -n 2p "$f")"
      break
    fi
  done
fi
oom=0
if [ "$rc" != 0 ] && (( $(oom_kills) > oom_before )); then
  oom=1
  echo "out of memory: the kernel's OOM killer killed $(( $(oom_kills) - oom_before )) process(es) of this job (memory cgroup ${memcg#"$cgroup_fs"}, limit $(oom_limit)); a rank needs more memory than it has: use more ranks or nodes (--tensor/--pipeline-model-parallel-size), --use-distributed-optimizer, --recompute-activations or a smaller --micro-batch-size, or ask Slurm for more (--mem)"
fi

if [ "$signalled" = 1 ] && [ "$rc" = 0 ] && [ -n "${SLURM_JOB_ID:-}" ] && [ "${NO_REQUEUE:-0}" != 1 ]; then
  # The job must be submitted with --requeue (the templates are). The requeued job keeps its
  # id, appends to the same log (--open-mode=append) and resumes from $ckpt_dir.
  echo "checkpoint written before the time limit: requeueing job $SLURM_JOB_ID"
  echo $((planned + 1)) > "$planned_file"
  scontrol requeue "$SLURM_JOB_ID" || { echo "scontrol requeue $SLURM_JOB_ID failed"; exit 1; }
elif [ "$oom" = 1 ]; then
  # The same layout would be killed again: not a fault a requeue can fix.
  [ -z "${SLURM_JOB_ID:-}" ] || echo "not requeueing job $SLURM_JOB_ID: an out-of-memory kill recurs with the same layout"
elif [ "$rc" != 0 ] && [ "$rc" != 2 ] && [ -n "${SLURM_JOB_ID:-}" ] && [ "$checkpoints" != 0 ]; then
  # A fault (3: the watchdog ended a hang; a rank killed or crashed; a lost node): resume
  # from the newest complete checkpoint (--load "$ckpt_dir"), up to MAX_RESTARTS times.
  # Exit 2 is a configuration error, which the same job would meet again.
  if ((faults < max_restarts)); then
    echo "gpt_pretrain failed with $rc: requeueing job $SLURM_JOB_ID (fault restart $((faults + 1)) of MAX_RESTARTS=$max_restarts), resuming from $ckpt_dir"
    scontrol requeue "$SLURM_JOB_ID" || { echo "scontrol requeue $SLURM_JOB_ID failed"; exit 1; }
  else
    echo "gpt_pretrain failed with $rc after $faults fault restarts (MAX_RESTARTS=$max_restarts): not requeueing"
  fi
fi
exit "$rc"
