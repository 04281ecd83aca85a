#!/usr/bin/env bash
# A real one-node Slurm cluster on localhost (munged, slurmctld, slurmd from Debian's
# packages) runs the project's job templates the way a user submits them:
#   phase 1  cluster up: fresh munge key, slurm.conf, state folders and ports in a temp folder
#   phase 2  `module use modules; module load gpt-pretrain` in a non-interactive shell
#   phase 3  sbatch slurm/gpt-tiny-cpu.sbatch: 4 tasks TP 2 x PP 2 with --dry-run (the MPI
#            launch under the allocation), and a 1-task training job whose loss falls and
#            whose batch shell catches `scancel --batch --signal=USR1`
#   phase 4  checkpoint on USR1, requeue, resume at the saved iteration, and 4-rank TP 2 x PP 2
#            training (a preflight runs both features outside Slurm first and fails loudly);
#            a rank killed with SIGKILL requeues the job, which resumes from its checkpoint to
#            the uninterrupted job's final loss; exit 2 is not requeued; a hang the watchdog
#            ends (a SIGSTOPped rank) makes the job's exit code 3 and requeues it as a fault
#   tests/slurm/slurm_test.sh BUILD_DIR SOURCE_DIR
# Skips (exit 0, with the reason) only where Slurm cannot be installed or run at all: not
# root, or the Debian packages are missing and cannot be installed. Anything else that goes
# wrong is a failure, printed with the daemons' logs.
set -euo pipefail
# shellcheck source=tests/slurm/lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"
build=$(readlink -f "$1"); src=$(readlink -f "$2")
T0=$SECONDS
say() { echo "[slurm-test +$((SECONDS - T0))s] $*"; }
skip() { echo "SKIPPED slurm test: $*"; exit 0; }

# ---- Can this machine run Slurm at all? (the only reasons to skip) ------------------------
[ "$(id -u)" = 0 ] || skip "slurmd must run as root to start jobs, and this test runs as $(id -un)"
need=(slurmctld slurmd slurm-client munge)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  say "installing ${missing[*]} (scripts/setup.sh normally has)"
  apt_log=$(mktemp)
  if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
           --no-install-recommends "${missing[@]}"; } > "$apt_log" 2>&1; then
    tail -5 "$apt_log"; rm -f "$apt_log"
    skip "the Debian packages ${missing[*]} are not installed and apt-get could not install them"
  fi
  rm -f "$apt_log"
fi
# Debian starts the daemons from their postinst where systemd runs; this test never uses
# those (they would hold the default ports and the system munge key), only its own copies.

for tool in gpt_pretrain preprocess_data merge_datasets; do
  [ -x "$build/app/$tool" ] || { echo "FAIL: $build/app/$tool is not built"; exit 1; }
done

# ---- Fresh folders, and the exit trap that stops what this run started ---------------------
tmp=$(mktemp -d /tmp/gpt-slurm-test.XXXXXX)
# munged refuses a socket whose folders are not searchable by all (mktemp makes 0700);
# the key inside stays 0400.
chmod 755 "$tmp"
mkdir -p "$tmp"/{munge,state,spool/"$(hostname -s)",log,work}
chmod 755 "$tmp/munge"
pids=()          # daemons, in start order
jobs_submitted=()

dump_logs() {
  if [ -n "${SLURM_CONF:-}" ]; then
    echo "---- sinfo / squeue"; sinfo -N -o '%N %T %E' 2>&1; squeue 2>&1
    for j in "${jobs_submitted[@]}"; do scontrol show job "$j" 2>&1 | grep -E "JobId|JobState|Restarts|StdOut"; done
  fi
  for f in "$tmp"/log/*.log "$tmp"/log/*.out; do
    [ -s "$f" ] || continue
    echo "---- last lines of $f"; tail -n 40 "$f"
  done
  for f in $(find "$tmp/work/runs" -name 'slurm-*.out' 2>/dev/null); do
    echo "---- $f"; tail -n 60 "$f"
  done
}
# To stderr: a failure inside $(...) would otherwise vanish into the variable.
fail() { { echo "FAIL: $*"; dump_logs; } >&2; exit 1; }

cleanup() {
  local rc=$?
  set +e
  if [ -n "${SLURM_CONF:-}" ] && ((${#jobs_submitted[@]})); then
    # Cancel our jobs first so slurmd ends their steps itself; then stop the daemons.
    scancel "${jobs_submitted[@]}" 2>/dev/null
    for _ in $(seq 1 30); do
      [ -z "$(squeue -h -o %i 2>/dev/null)" ] && break; sleep 0.5
    done
    # Steps that outlived KillWait: their processes, by the PIDs slurmstepd tracks.
    for p in $(scontrol listpids 2>/dev/null | awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $1 }'); do
      kill -KILL "$p" 2>/dev/null
    done
  fi
  local i
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill -TERM "${pids[i]}" 2>/dev/null; done
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do
    for _ in $(seq 1 20); do kill -0 "${pids[i]}" 2>/dev/null || break; sleep 0.25; done
    kill -KILL "${pids[i]}" 2>/dev/null
    wait "${pids[i]}" 2>/dev/null
  done
  [ -n "${watchdog:-}" ] && { pkill -P "$watchdog" 2>/dev/null; kill "$watchdog" 2>/dev/null; }
  if [ "$rc" = 0 ] && [ "${KEEP_SLURM_TEST_DIR:-0}" != 1 ]; then rm -rf "$tmp"
  else echo "slurm test folder kept: $tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'fail "interrupted, or over the time limit"' INT TERM
# CTest kills a test that runs past its TIMEOUT (900 s) with SIGKILL, which skips this exit
# trap and would leave the daemons running: stop ourselves first.
(sleep "${SLURM_TEST_LIMIT:-840}"; kill -TERM $$) > /dev/null 2>&1 &
watchdog=$!

# wait_for SECONDS WHAT CMD...: poll CMD once a second; fail with the logs after SECONDS.
wait_for() {
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do
    ((SECONDS < end)) || fail "timed out after ${limit}s waiting for $what"
    sleep 1
  done
}

# Two free TCP ports, picked at random so that runs (and a site's real Slurm) never collide.
port_in_use() {
  local hex; hex=$(printf '%04X' "$1")
  grep -qE "^ *[0-9]+: [0-9A-F]+:$hex [0-9A-F]+:[0-9A-F]+ 0A" /proc/net/tcp /proc/net/tcp6 2>/dev/null
}
pick_port() {
  local p
  for _ in $(seq 1 50); do
    p=$((20000 + RANDOM % 40000))
    port_in_use "$p" || port_in_use "$((p + 1))" || { echo "$p"; return; }
  done
  fail "no free TCP port pair found"
}

# ==== phase 1: cluster up =====================================================================
say "phase 1: cluster up in $tmp"
# munged with its own key, socket and files, so the system's munge (if any) is untouched.
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
sock=$tmp/munge/munge.socket
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$sock" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/log/munged.log" \
  --seed-file="$tmp/munge/munged.seed" > "$tmp/log/munged.out" 2>&1 &
pids+=($!)
wait_for 20 "munged to answer on $sock" bash -c "munge -n -S '$sock' 2>/dev/null | unmunge -S '$sock' >/dev/null 2>&1"

node=$(hostname -s)
ctld_port=$(pick_port); slurmd_port=$((ctld_port + 1))
export SLURM_CONF=$tmp/slurm.conf
# The node claims 4 CPUs on a 2-core machine (config_overrides makes slurmd trust the file),
# so 4-task jobs fit; linuxproc tracks processes without cgroups (containers, CI).
{ cat <<EOF
ClusterName=gpttest
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
NodeName=$node NodeAddr=127.0.0.1 CPUs=4 Boards=1 SocketsPerBoard=1 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=2000 State=UNKNOWN
PartitionName=test Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
  slurm_conf_common "$tmp" "$sock" 10; } > "$SLURM_CONF"
chmod 644 "$SLURM_CONF"

slurmctld -D -f "$SLURM_CONF" > "$tmp/log/slurmctld.out" 2>&1 &
pids+=($!)
wait_for 30 "slurmctld to answer (scontrol ping)" bash -c "scontrol ping 2>/dev/null | grep -q UP"
slurmd -D -f "$SLURM_CONF" > "$tmp/log/slurmd.out" 2>&1 &
pids+=($!)
node_idle() { sinfo -h -n "$node" -o %T 2>/dev/null | grep -qx idle; }
wait_for 60 "node $node to be idle" node_idle
say "phase 1 ok: $(sinfo -h -o 'partition %P, node %N %T, %c cpus')  (ports $ctld_port/$slurmd_port)"

# ==== phase 2: the modulefile from the checkout, in a non-interactive shell ====================
say "phase 2: module use $src/modules; module load gpt-pretrain"
init=/usr/share/modules/init/bash
[ -f "$init" ] || fail "phase 2: environment-modules is not installed ($init missing); scripts/setup.sh installs it"
found=$(env -i HOME="$HOME" PATH=/usr/bin:/bin GPT_BUILD_DIR="$build" bash --norc --noprofile -c "
  set -e; source $init; module use '$src/modules'; module load gpt-pretrain
  command -v gpt_pretrain; gpt_pretrain --help | grep -q tensor-model-parallel-size" 2>&1) \
  || fail "phase 2: module load gpt-pretrain did not give a working gpt_pretrain: $found"
[ "$found" = "$build/app/gpt_pretrain" ] || fail "phase 2: the module found '$found', not $build/app/gpt_pretrain"
say "phase 2 ok: gpt_pretrain -> $found"

# ==== job helpers ================================================================================
work=$tmp/work
ln -s "$src/configs" "$work/configs"   # the templates are submitted from a folder that holds
ln -s "$src/data" "$work/data"         # configs/ and data/ (the config names data/gpt2/...)
# What every job gets through sbatch's default --export=ALL: the module from this checkout
# (the batch shell loads it, not this one), one thread per rank on the 2 cores.
export MODULEPATH=$src/modules GPT_BUILD_DIR=$build MODULES=gpt-pretrain
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1

# submit NAME [sbatch options...] [-- ENV=VALUE...]: sbatch slurm/gpt-tiny-cpu.sbatch from
# $work with job name NAME; sets id (not run in $(...), so that jobs_submitted keeps it).
submit() {
  local name=$1; shift
  local opts=() envs=()
  while (($#)); do
    if [ "$1" = -- ]; then shift; envs=("$@"); break; fi
    opts+=("$1"); shift
  done
  mkdir -p "$work/runs/$name"
  id=$(cd "$work" && env "${envs[@]}" sbatch --parsable --job-name="$name" --time=00:10:00 \
         "${opts[@]}" "$src/slurm/gpt-tiny-cpu.sbatch" 2>&1) || fail "sbatch $name: $id"
  id=${id%%;*}
  jobs_submitted+=("$id")
}
job_log() { echo "$work/runs/$1/slurm-$2.out"; }
job_field() { scontrol show job -o "$1" 2>/dev/null | grep -o " $2=[^ ]*" | head -1 | cut -d= -f2-; }
# Reasons a pending job never starts on this cluster: fail at once instead of timing out.
stuck() {
  local why; why=$(scontrol show job -o "$1" 2>/dev/null | grep -oE "Reason=(PartitionConfig|DependencyNeverSatisfied|BadConstraints|ReqNodeNotAvail|PartitionNodeLimit|JobHeldAdmin|JobHeldUser|launch_failed_requeued_held)" | head -1)
  [ -z "$why" ] || fail "job $1 will never run: $why"
}
job_done() {
  stuck "$1"
  case $(job_field "$1" JobState) in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;;
    *) return 1 ;;
  esac
}
# expect_done ID LIMIT STATE EXIT: wait for the job to end, then check its state and exit code.
expect_done() {
  wait_for "$2" "job $1 to end" job_done "$1"
  local st ec; st=$(job_field "$1" JobState); ec=$(job_field "$1" ExitCode)
  [ "$st" = "$3" ] && [ "$ec" = "$4" ] || fail "job $1 ended $st with exit code $ec, expected $3 $4"
}
log_has() { grep -qE -- "$2" "$1" || fail "$(basename "$1") lacks /$2/"; }
show() { grep -E -- "$2" "$1" | head -"${3:-4}" | cut -c1-200 | sed "s/^/      | /"; }
# The model is gpt-tiny cut down (2 layers, hidden 64, seq 64) so a job trains in seconds on 2
# shared cores; TP 2 and PP 2 still divide heads and layers.
small=(--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 64
       --max-position-embeddings 64 --micro-batch-size 4 --global-batch-size 4
       --lr 3e-3 --lr-warmup-iters 2 --log-interval 1 --eval-iters 1 --split 90,10,0)
small_flags="${small[*]}"   # the same, as one string for EXTRA_ARGS

# A real corpus (the loss of --mock-data's uniform random tokens cannot fall): two books of
# the King James Bible from Debian's bible-kjv, one document per chapter, as scripts/demo.sh.
command -v bible >/dev/null || fail "the bible program (Debian's bible-kjv, in scripts/setup.sh) is missing"
mkdir -p "$tmp/data"
kjv_json "gen1:1-exo40:38" > "$tmp/data/kjv.json"

# ==== phase 3 data: slurm/submit-preprocess.sh, a job array of 2 shards and a dependent merge ==
say "phase 3 data: submit-preprocess.sh 'corpus/*.json' (2 shards -> array of 2 + merge)"
mkdir -p "$work/corpus"
head -n 45 "$tmp/data/kjv.json" > "$work/corpus/kjv-0.json"
tail -n +46 "$tmp/data/kjv.json" > "$work/corpus/kjv-1.json"
# --workers follows --cpus-per-task; the script's 8 do not fit the 4-CPU node.
out=$(cd "$work" && SBATCH_ARGS="--cpus-per-task=1 --time=00:05:00" "$src/slurm/submit-preprocess.sh" 'corpus/*.json' "$tmp/data/kjv" kjv 2>&1) \
  || fail "submit-preprocess.sh: $out"
read -r array_id merge_id < <(echo "$out" | sed -nE 's/^preprocess array ([0-9]+) .*merge job ([0-9]+)$/\1 \2/p')
[ -n "${merge_id:-}" ] || fail "cannot read the job ids from submit-preprocess.sh: $out"
jobs_submitted+=("$array_id" "$merge_id")
array_done() { stuck "$array_id"; ! scontrol show job -o "$array_id" 2>/dev/null | grep -qE "JobState=(PENDING|CONFIGURING|RUNNING|COMPLETING)"; }
wait_for 120 "preprocess array $array_id to end" array_done
states=$(scontrol show job -o "$array_id" | grep -oE "ArrayTaskId=[0-9]+ .*JobState=[A-Z_]+|ExitCode=[0-9:]+" | sed -E 's/ArrayTaskId=([0-9]+) .*JobState=/task \1 /' | paste -sd' ')
[ "$(echo "$states" | grep -o "COMPLETED ExitCode=0:0" | wc -l)" = 2 ] || fail "preprocess array $array_id: $states"
expect_done "$merge_id" 120 COMPLETED 0:0
corpus=$tmp/data/kjv/kjv_text_document
[ -s "$corpus.bin" ] && [ -s "$corpus.idx" ] || fail "the merge job did not write $corpus.bin/.idx"
merge_log=$(ls "$work"/runs/preprocess/slurm-"$merge_id"_*.out)
log_has "$merge_log" "dataset ready: --data-path $corpus"
say "phase 3 data ok: array $array_id ($states), merge job $merge_id COMPLETED 0:0"
show "$merge_log" "." 6

# ==== phase 3a: 4 ranks TP 2 x PP 2 under the allocation (--dry-run) ==========================
# Checkpoints are off in phase 3 (CHECKPOINTS=0): phase 3b checks that USR1 is then only
# logged and training runs on; phase 4a checkpoints on USR1.
for launcher in srun mpirun; do
  say "phase 3a: sbatch gpt-tiny-cpu.sbatch, 4 tasks, TP 2 x PP 2, --dry-run, LAUNCHER=$launcher"
  submit "dryrun-$launcher" -- CHECKPOINTS=0 LAUNCHER=$launcher EXTRA_ARGS="--dry-run"
  expect_done "$id" 120 COMPLETED 0:0
  log=$(job_log "dryrun-$launcher" "$id")
  # world 4 proves the 4 tasks joined one MPI world (PMI worked): singletons would each see
  # world 1 and fail validation (world size not divisible by TP x PP).
  log_has "$log" "launcher $launcher"
  log_has "$log" "parallel layout: world 4 = TP 2 x PP 2 x DP 1"
  log_has "$log" "0: 0 0 0  1: 1 0 0  2: 0 0 1  3: 1 0 1"
  log_has "$log" "gpt_pretrain exited with 0"
  say "phase 3a ok ($launcher): job $id COMPLETED 0:0"; show "$log" "launcher|parallel layout|0: 0 0 0|exited"
done

# ==== phase 3b: 1-task training job: loss falls, batch shell catches USR1 ======================
say "phase 3b: sbatch --ntasks=1 gpt-tiny-cpu.sbatch, TP 1 x PP 1, 30 iterations on KJV"
submit train1 --ntasks=1 -- CHECKPOINTS=0 DATA_PATH="$corpus" \
  EXTRA_ARGS="--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 $small_flags --train-iters 30 --data-cache-path $tmp/data/cache"
log=$(job_log train1 "$id")
wait_for 120 "job $id to log iteration 2 ($log)" grep -qs "iteration  *2/" "$log"
# Only the batch shell gets this (--batch): run-training.sh must log it, and with
# checkpoints off must not pass it on (the ranks would die of it) -- training runs on.
scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"
expect_done "$id" 300 COMPLETED 0:0
log_has "$log" "caught USR1"
log_has "$log" "iteration +30/ +30 "
log_has "$log" "gpt_pretrain exited with 0"
grep -qE "iteration +([3-9]|[12][0-9])/" <(sed -n '/caught USR1/,$p' "$log") \
  || fail "USR1 was caught after training had ended, so it proved nothing; see $log"
losses=$(grep -oE "iteration +[0-9]+/.*lm loss: [0-9.E+-]+" "$log" | sed -E 's/.*lm loss: //')
first=$(echo "$losses" | head -1); last3=$(echo "$losses" | tail -3 | tr '\n' ' ')
awk -v f="$first" -v l="$last3" 'BEGIN { n = split(l, a, " "); s = 0; for (i = 1; i <= n; i++) s += a[i];
  exit !(n == 3 && s / n < f - 1.0) }' \
  || fail "the loss did not fall by 1.0: first $first, last three $last3"
say "phase 3b ok: job $id COMPLETED 0:0, lm loss $first -> $last3(last three), USR1 caught mid-run"
show "$log" "caught USR1|iteration +(1|30)/|exited"

# ==== phase 4 preflight: the features phase 4 needs, run for 3 iterations outside Slurm =========
# (the LR decay must be longer than the 2 warm-up iterations of $small). Checkpoints and
# TP x PP training are built, so any failure here fails the test with the product's output,
# before a Slurm job hides it in a log.
probe() {  # probe NAME RANKS ARGS...: fails the test unless the feature runs
  local name=$1 ranks=$2; shift 2
  if (cd "$work" && timeout 120 mpiexec -n "$ranks" "$build/app/gpt_pretrain" --config configs/gpt-tiny.ini \
        "${small[@]}" --mock-data --train-iters 3 "$@") > "$tmp/log/probe-$name.out" 2>&1; then
    return
  fi
  cat "$tmp/log/probe-$name.out"; fail "preflight $name failed"
}
probe checkpoints 1 --save "$tmp/probe-ckpt" --load "$tmp/probe-ckpt" --exit-signal-handler
probe tp2pp2 4 --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2

# ==== phase 4a: USR1 -> checkpoint and exit 0 -> requeue -> resume at the saved iteration ======
{
  ntasks=4 tp=2 pp=2 iters=60
  say "phase 4a: $ntasks task(s) TP $tp x PP $pp, $iters iterations, USR1 -> checkpoint -> requeue -> resume"
  submit resume --ntasks=$ntasks -- DATA_PATH="$corpus" \
    EXTRA_ARGS="--tensor-model-parallel-size $tp --pipeline-model-parallel-size $pp $small_flags --train-iters $iters --data-cache-path $tmp/data/cache"
  log=$(job_log resume "$id"); ckpt=$work/runs/resume/checkpoints
  wait_for 180 "job $id to log iteration 5 ($log)" grep -qsE "iteration +5/" "$log"
  seen=$(grep -oE "iteration +[0-9]+/" "$log" | tail -1 | grep -oE "[0-9]+")
  scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"
  # The batch shell forwards USR1, the ranks save and exit 0, the shell requeues the job:
  # Slurm restarts it under the same id (restart count 1), appending to the same log.
  wait_for 180 "job $id to save and requeue itself" grep -qs "requeueing job $id" "$log"
  log_has "$log" "caught USR1: asking the ranks to checkpoint and exit"
  log_has "$log" "gpt_pretrain exited with 0"
  [ -f "$ckpt/latest_checkpointed_iteration.txt" ] || fail "no $ckpt/latest_checkpointed_iteration.txt after USR1"
  saved=$(tr -d '[:space:]' < "$ckpt/latest_checkpointed_iteration.txt")
  [[ $saved =~ ^[0-9]+$ ]] && ((saved >= seen && saved < iters)) \
    || fail "tracker says '$saved'; expected an iteration in [$seen, $iters) (USR1 was sent after iteration $seen)"
  [ -d "$ckpt/iter_$(printf %07d "$saved")" ] || fail "tracker names iteration $saved but $ckpt/iter_$(printf %07d "$saved") is missing"
  say "phase 4a: checkpoint at iteration $saved (USR1 sent after iteration $seen); waiting for the requeued job"
  # A requeued job may be held back (BeginTime) for a while; that is Slurm's choice, not a
  # failure, so release it now instead of waiting.
  wait_for 60 "job $id to be requeued" \
    bash -c "[ \"\$(scontrol show job -o $id | grep -o 'Restarts=[0-9]*')\" = Restarts=1 ]"
  # Starting it again while slurmd still tears down the first run makes slurmd refuse the
  # launch ("already killed, do not launch batch job"): wait for the first run's processes
  # and the node's completing state to be gone first.
  wait_for 60 "the first run of job $id to be cleaned up" \
    bash -c "! pgrep -f '$work/runs/[r]esume' >/dev/null && ! sinfo -h -o %T | grep -qi completing"
  sleep 2
  scontrol update jobid="$id" StartTime=now 2>/dev/null || true
  expect_done "$id" 300 COMPLETED 0:0
  log_has "$log" "job $id \(restart count 1\)"
  second=$(sed -n "/job $id (restart count 1)/,\$p" "$log")
  first_iter=$(echo "$second" | grep -oE "iteration +[0-9]+/" | head -1 | grep -oE "[0-9]+")
  [ "$first_iter" = $((saved + 1)) ] || fail "the requeued job's first iteration is '$first_iter', expected $((saved + 1)) (resume from $saved)"
  grep -qiE "loaded checkpoint.* at iteration $saved\b" <<< "$second" \
    || fail "the requeued job does not say it loaded the checkpoint at iteration $saved"
  grep -qE "iteration +$iters/ +$iters " <<< "$second" || fail "the requeued job did not train to iteration $iters"
  say "phase 4a ok: job $id saved at $saved, requeued itself, resumed at $((saved + 1)), COMPLETED 0:0"
  show "$log" "caught USR1|exited|requeueing|restart count|loaded checkpoint|iteration +$((saved + 1))/" 10
}

# ==== phase 4b: 4-rank TP 2 x PP 2 training under Slurm ========================================
{
  say "phase 4b: sbatch gpt-tiny-cpu.sbatch, 4 tasks, TP 2 x PP 2, 40 iterations on KJV"
  submit train4 -- CHECKPOINTS=0 DATA_PATH="$corpus" \
    EXTRA_ARGS="$small_flags --train-iters 40 --data-cache-path $tmp/data/cache"
  expect_done "$id" 300 COMPLETED 0:0
  log=$(job_log train4 "$id")
  log_has "$log" "parallel layout: world 4 = TP 2 x PP 2 x DP 1"
  log_has "$log" "iteration +40/ +40 "
  losses=$(grep -oE "iteration +[0-9]+/.*lm loss: [0-9.E+-]+" "$log" | sed -E 's/.*lm loss: //')
  first=$(echo "$losses" | head -1); last3=$(echo "$losses" | tail -3 | tr '\n' ' ')
  awk -v f="$first" -v l="$last3" 'BEGIN { n = split(l, a, " "); s = 0; for (i = 1; i <= n; i++) s += a[i];
    exit !(n == 3 && s / n < f - 0.5) }' \
    || fail "4-rank training: the loss did not fall by 0.5: first $first, last three $last3"
  say "phase 4b ok: job $id COMPLETED 0:0, lm loss $first -> $last3(last three)"
  final_4b=$(grep -oE "iteration +40/.*lm loss: [0-9.E+-]+" "$log" | sed -E 's/.*lm loss: //')
}

# ==== phase 4c: a fault requeues the job, which resumes; a configuration error does not ========
{
  # Phase 4b's layout, data and 40 iterations with a checkpoint every 4: one rank is killed
  # (SIGKILL, as by the kernel) after the checkpoint at 4; run-training.sh requeues the job
  # and it resumes from that checkpoint, ending at the same loss as 4b (bit-identical resume).
  say "phase 4c: kill -9 a rank after the checkpoint at 4 -> requeue -> resume -> 4b's final loss"
  submit kill9 -- DATA_PATH="$corpus" \
    EXTRA_ARGS="$small_flags --train-iters 40 --save-interval 4 --data-cache-path $tmp/data/cache"
  log=$(job_log kill9 "$id"); ckpt=$work/runs/kill9/checkpoints
  wait_for 180 "job $id to log iteration 6 ($log)" grep -qsE "iteration +6/" "$log"
  [ "$(tr -d '[:space:]' < "$ckpt/latest_checkpointed_iteration.txt" 2>/dev/null)" -ge 4 ] 2>/dev/null \
    || fail "no checkpoint at iteration 4 or later in $ckpt before the kill"
  victim=
  for p in $(pgrep -x gpt_pretrain); do  # a rank (not srun, whose command line is alike)
    tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "$work/runs/kill9/logs/$id " && victim=$p
  done
  [ -n "$victim" ] || fail "no rank of job $id found to kill"
  kill -9 "$victim"
  wait_for 120 "job $id to requeue itself after the fault" grep -qs "requeueing job $id (fault restart 1 of MAX_RESTARTS=3)" "$log"
  requeued_at=$SECONDS
  wait_for 60 "job $id to be requeued" \
    bash -c "[ \"\$(scontrol show job -o $id | grep -o 'Restarts=[0-9]*')\" = Restarts=1 ]"
  # Slurm starts the requeued job itself, cred_expire (lib.sh) + 1 s after the requeue. Not
  # sooner by hand (scontrol update StartTime=now): a run started within a minute of the
  # requeue had its step (the same id, 9.0 as the killed one) cancelled by Slurm, 3 of 3 times
  # with the default 120 s lifetime.
  wait_for 240 "job $id to end" job_done "$id"
  [ "$(job_field "$id" JobState) $(job_field "$id" ExitCode)" = "COMPLETED 0:0" ] \
    || fail "job $id ended $(job_field "$id" JobState) $(job_field "$id" ExitCode), expected COMPLETED 0:0"
  ! grep -q "job $id (restart count 2)" "$log" || fail "job $id was requeued a second time; see $log"
  saved=$(sed -n "/job $id (restart count 1)/,\$p" "$log" | grep -oiE "loaded checkpoint.* at iteration [0-9]+" | grep -oE "[0-9]+$" | head -1) || true
  [ -n "$saved" ] && ((saved >= 4)) || fail "the requeued job did not load a checkpoint at 4 or later"
  final=$(sed -n "/job $id (restart count 1)/,\$p" "$log" | grep -oE "iteration +40/.*lm loss: [0-9.E+-]+" | sed -E 's/.*lm loss: //') || true
  [ -n "$final" ] && [ "$final" = "$final_4b" ] \
    || fail "the resumed job's loss at iteration 40 is '$final', the uninterrupted job 4b's '$final_4b'"
  say "phase 4c ok: job $id killed, requeued, restarted by Slurm, resumed from $saved, final loss $final = 4b's ($((SECONDS - requeued_at)) s after the requeue)"
  show "$log" "exited|requeueing|restart count|loaded checkpoint|iteration +40/" 8

  # Exit 2 (here a flag out of range) is the user's to fix: the job fails and stays failed.
  say "phase 4c: a configuration error (exit 2) is not requeued"
  submit usage2 -- DATA_PATH="$corpus" EXTRA_ARGS="$small_flags --train-iters 20 --global-batch-size -8"
  expect_done "$id" 120 FAILED 2:0
  log=$(job_log usage2 "$id")
  log_has "$log" "gpt_pretrain exited with 2"
  ! grep -q "requeueing" "$log" || fail "job $id was requeued after exit 2"
  [ "$(job_field "$id" Restarts)" = 0 ] || fail "job $id restarted $(job_field "$id" Restarts) times after exit 2"
  say "phase 4c ok: job $id FAILED 2:0, not requeued"
}

# ==== phase 4d: a hang the watchdog ends is a fault: exit 3, requeued ===========================
{
  # One rank SIGSTOPped: the others' waits for it pass GPT_DISTRIBUTED_TIMEOUT_SECONDS, the
  # watchdog reports and ends the job through MPI_Abort, and slurmstepd kills the step, so
  # srun says 137. The ranks' records (exit-code-rank-R) give the job its code 3 back, and
  # run-training.sh requeues it as a fault (MAX_RESTARTS=1). The requeued run itself is
  # phase 4c's path; it is cancelled here.
  say "phase 4d: SIGSTOP a rank -> watchdog (5 s) -> job exit 3, requeued as a fault"
  submit hang -- DATA_PATH="$corpus" MAX_RESTARTS=1 GPT_DISTRIBUTED_TIMEOUT_SECONDS=5 \
    EXTRA_ARGS="$small_flags --train-iters 1000 --save-interval 1000 --data-cache-path $tmp/data/cache"
  log=$(job_log hang "$id")
  wait_for 180 "job $id to log iteration 3 ($log)" grep -qsE "iteration +3/" "$log"
  victim=
  for p in $(pgrep -x gpt_pretrain); do
    tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null | grep -q "$work/runs/hang/logs/$id " && victim=$p
  done
  [ -n "$victim" ] || fail "no rank of job $id found to stop"
  kill -STOP "$victim"
  wait_for 120 "job $id to requeue itself after the hang" grep -qs "requeueing job $id" "$log"
  log_has "$log" "gpt_pretrain: error on rank [0-3]: hang: waited [0-9]+ s \(limit 5 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS\) for "
  log_has "$log" "^hang: the watchdog ended a wait on rank [0-3] \(exit 3\): "
  log_has "$log" "gpt_pretrain failed with 3: requeueing job $id \(fault restart 1 of MAX_RESTARTS=1\)"
  wait_for 60 "job $id to be requeued" bash -c "[ \"\$(scontrol show job -o $id | grep -o 'Restarts=[0-9]*')\" = Restarts=1 ]"
  scancel "$id" 2>/dev/null || true
  kill -CONT "$victim" 2>/dev/null || true
  say "phase 4d ok: job $id: $(grep -m1 -oE "rank [0-9]+ recorded exit 3: [^,]*, not the launcher's [0-9]+" "$log" || echo "exit 3 from srun itself"); requeued as fault restart 1"
  show "$log" "hang:|recorded exit|exited with|requeueing" 6
}

say "PASS ($((SECONDS - T0))s)"
