#!/bin/bash
# Shared body of the training jobs: module loads, per-job folders, the launch, forwarding
# Slurm's warning signal to the ranks, and requeueing after a checkpoint-and-exit.
#   run-training.sh "MODULES" CONFIG RUN_DIR [gpt_pretrain flags...]
# Launcher: srun --mpi=pmi2 inside an allocation (LAUNCHER=mpirun to use mpirun instead).
set -uo pipefail
modules=$1 config=$2 run_dir=$3; shift 3

if command -v module >/dev/null 2>&1 && [ -n "$modules" ]; then
  # shellcheck disable=SC2086
  module load $modules || { echo "module load $modules failed; edit MODULES for this cluster"; exit 1; }
fi

ckpt_dir=$run_dir/checkpoints
log_dir=$run_dir/logs/${SLURM_JOB_ID:-local}
mkdir -p "$ckpt_dir" "$log_dir"
echo "job ${SLURM_JOB_ID:-?} (restart count ${SLURM_RESTART_COUNT:-0}) on ${SLURM_JOB_NODELIST:-$(hostname)}: checkpoints in $ckpt_dir, logs in $log_dir"

# --load on the checkpoint folder: a requeued job resumes where the last one saved; the
# first job finds no tracker file and starts from scratch.
args=(--config "$config" --save "$ckpt_dir" --load "$ckpt_dir" --exit-signal-handler
      --log-dir "$log_dir" "$@")

case ${LAUNCHER:-srun} in
  srun) srun --mpi=pmi2 --kill-on-bad-exit=1 gpt_pretrain "${args[@]}" & ;;
  mpirun) mpirun -np "${SLURM_NTASKS:-1}" gpt_pretrain "${args[@]}" & ;;
  *) echo "unknown LAUNCHER=$LAUNCHER (srun or mpirun)"; exit 2 ;;
esac
launcher_pid=$!

# Slurm signals only this batch shell (--signal=B:USR1@...): pass it on to every rank, which
# agree to save at the end of the current iteration and exit 0.
signalled=0
forward() {
  signalled=1
  echo "$(date -Is) caught USR1: asking the ranks to checkpoint and exit"
  if [ "${LAUNCHER:-srun}" = srun ] && [ -n "${SLURM_JOB_ID:-}" ]; then
    # Without --batch, scancel signals the job steps (the ranks), not this shell.
    scancel --signal=USR1 "$SLURM_JOB_ID" 2>/dev/null || kill -USR1 "$launcher_pid"
  else
    pkill -USR1 -P "$launcher_pid" 2>/dev/null; kill -USR1 "$launcher_pid" 2>/dev/null
  fi
}
trap forward USR1 TERM

# `wait` returns early when a trapped signal arrives; keep waiting for the ranks.
while true; do
  wait "$launcher_pid"; rc=$?
  kill -0 "$launcher_pid" 2>/dev/null || break
done
echo "$(date -Is) gpt_pretrain exited with $rc"

if [ "$signalled" = 1 ] && [ "$rc" = 0 ] && [ -n "${SLURM_JOB_ID:-}" ] && [ "${NO_REQUEUE:-0}" != 1 ]; then
  echo "checkpoint written before the time limit: requeueing job $SLURM_JOB_ID"
  scontrol requeue "$SLURM_JOB_ID"
fi
exit "$rc"
