#!/usr/bin/env bash
# The job templates on a real two-node Slurm cluster (tests/slurm/cluster.sh: node-a and
# node-b are network + UTS + mount namespaces joined by a bridge, each with its own boot id, so
# MPI data between the nodes goes over the veths by TCP and inside a node by shared memory):
#   phase 1  sbatch slurm/gpt22b.sbatch, unchanged: 2 nodes x 8 tasks, TP 8 x PP 2, a tiny
#            model through EXTRA_ARGS; trains, saves; TP groups inside a node, the pipeline
#            across; the bytes that cross the node boundary beside the planner's byte volumes
#   phase 2  gpt-tiny on 2 nodes x 2 ranks: TP 2 inside x DP 2 across, TP 2 x PP 2 (PP
#            across), TP 2 x DP 2 with the distributed optimizer, and TP 2 x DP 2 launched by
#            `mpirun -np 4` inside the allocation (Hydra starts its proxies through Slurm):
#            losses equal the 1-rank run
#   phase 3  the TP 2 x PP 2 checkpoint (written from both nodes) resumed as TP 1 x PP 2 x DP 2
#            with the node order reversed and the ranks dealt cyclically (rank 0 node-b, rank 1
#            node-a, ...: SLURM_HOSTFILE, --distribution=arbitrary): iterations 4-5 equal the
#            1-rank straight run's
#   phase 4  USR1 -> checkpoint -> requeue -> resume across two nodes; then node-b's link cut
#            mid-run: the watchdog (GPT_DISTRIBUTED_TIMEOUT_SECONDS=5) ends the ranks with exit
#            3 and its line naming the wait, before Slurm's node-failure path (SlurmdTimeout
#            30 s); the last checkpoint is intact; the cluster is rebuilt after the cut
#   phase 5  the planner's auto layout from Slurm's 2 nodes x 2 tasks (no --local-world-size)
#   phase 6  node-a's eth0 counters: at least the bytes the communicators sent to node-b
# MPICH 4.0.2's MPI_Finalize over UCX's TCP transport sometimes never returns with 2+ ranks per
# node; gpt_pretrain bounds it after the final barrier (lib/dist/mpi_environment.cpp), and the
# last line counts how often that happened.
#   tests/slurm/two_node_test.sh BUILD_DIR SOURCE_DIR
# Which traffic crosses the emulated network: see README "Two nodes". Not root, no
# CAP_NET_ADMIN or missing Slurm -> a failure, never a skip.
set -euo pipefail
# shellcheck source=tests/slurm/lib.sh
. "$(dirname "$(readlink -f "$0")")/lib.sh"
build=$(readlink -f "$1"); src=$(readlink -f "$2")
T0=$SECONDS
say() { echo "[two-node +$((SECONDS - T0))s] $*"; }
# Not root means no namespaces and no slurmd: a failure, not a skip (the issue's rule: a
# missing capability must not pass unnoticed).
[ "$(id -u)" = 0 ] || { echo "FAIL: the two-node test needs root (network namespaces, slurmd), runs as $(id -un)"; exit 1; }
for tool in gpt_pretrain preprocess_data; do
  [ -x "$build/app/$tool" ] || { echo "FAIL: $build/app/$tool is not built"; exit 1; }
done
cluster=$src/tests/slurm/cluster.sh
tmp=$(mktemp -d /tmp/gpt-two-node.XXXXXX)
chmod 755 "$tmp"
cdir=$tmp/cluster work=$tmp/work
mkdir -p "$work"
jobs_submitted=()
on() { "$cluster" exec "$cdir" "$@"; }   # on HOST CMD...: CMD on that host (gpt-ctl is the login node)

dump_logs() {
  # The job the failure is about comes first: CI keeps only the head of a long failure, and
  # the cluster's logs and every earlier job's output used to push it out.
  if [ -n "${log:-}" ] && [ -f "$log" ]; then
    echo "---- $log (the current job)"; grep -v '^  [a-z_]* \.\.\.' "$log" | tail -n 40
    local d; d=$(dirname "$log")/logs/${id:-none}
    for f in "$d"/exit-code-rank-* "$d"/rank-*.log; do
      if [ -f "$f" ]; then echo "---- $f"; tail -n 6 "$f"; fi
    done
  fi
  on gpt-ctl sinfo -N -o '%N %T %E' 2>&1 || true
  for f in "$cdir"/log/*.log; do [ -s "$f" ] && { echo "---- $f"; tail -n 25 "$f"; }; done
  for f in $(find "$work/runs" -name 'slurm-*.out' 2>/dev/null); do echo "---- $f"; grep -v '^  [a-z_]* \.\.\.' "$f" | tail -n 30; done
}
fail() { { echo "FAIL: $*"; dump_logs; } >&2; exit 1; }
cleanup() {
  local rc=$?
  set +e
  [ -n "${watchdog:-}" ] && kill "$watchdog" 2>/dev/null
  "$cluster" down "$cdir"
  if [ "$rc" = 0 ] && [ "${KEEP_SLURM_TEST_DIR:-0}" != 1 ]; then rm -rf "$tmp"; else echo "two-node test folder kept: $tmp"; fi
  exit "$rc"
}
trap cleanup EXIT
trap 'fail "interrupted, or over the time limit"' INT TERM
# CTest's TIMEOUT kills with SIGKILL, which skips the trap: stop ourselves first.
(sleep "${SLURM_TEST_LIMIT:-1140}"; kill -TERM $$) > /dev/null 2>&1 &
watchdog=$!

wait_for() {  # wait_for SECONDS WHAT CMD...
  local limit=$1 what=$2; shift 2
  local end=$((SECONDS + limit))
  until "$@"; do ((SECONDS < end)) || fail "timed out after ${limit}s waiting for $what"; sleep 1; done
}
# A boot id per node: UCX then takes the other node's ranks for remote ones and sends by TCP.
# SlurmdTimeout 30 s: the cut link of phase 4b must be ended by our watchdog (5 s), not first
# by Slurm's node-failure path.
up() { CLUSTER_BOOT_IDS=1 SLURMD_TIMEOUT=30 "$cluster" up "$cdir" || fail "cluster.sh up failed"; }

# TWO_NODE_PHASES="2 3" runs only those (for working on the test; CTest runs all, and the
# last line names the phases that ran).
phases=${TWO_NODE_PHASES:-1 2 3 4 5 6}
want() { [[ " $phases " == *" $1 "* ]]; }

# ==== phase 0: cluster and data ===============================================================
say "phase 0: cluster up, corpus"
up
ln -s "$src/configs" "$work/configs"; ln -s "$src/data" "$work/data"
export MODULEPATH=$src/modules GPT_BUILD_DIR=$build MODULES=gpt-pretrain
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Each node has lo and eth0: UCX's TCP transport between nodes uses eth0 only.
export UCX_NET_DEVICES=eth0
command -v bible >/dev/null || fail "the bible program (Debian's bible-kjv, in scripts/setup.sh) is missing"
mkdir -p "$tmp/data"
kjv_json "gen1:1-gen20:18" > "$tmp/data/kjv.json"
"$build/app/preprocess_data" --input "$tmp/data/kjv.json" --output-prefix "$tmp/data/kjv" \
  --vocab-file "$src/data/gpt2/gpt2-vocab.json" --merge-file "$src/data/gpt2/gpt2-merges.txt" \
  --tokenizer-type GPT2BPETokenizer --append-eod --workers 1 > "$tmp/data/preprocess.log" 2>&1 \
  || { cat "$tmp/data/preprocess.log"; fail "preprocess_data"; }
corpus=$tmp/data/kjv_text_document
data=(--data-path "$corpus" --split 90,10,0 --data-cache-path "$tmp/data/cache")

# ---- job helpers ------------------------------------------------------------------------------
# submit TEMPLATE NAME [sbatch options...] [-- ENV=VALUE...]; sets id and log.
submit() {
  local template=$1 name=$2; shift 2
  local opts=() envs=()
  while (($#)); do if [ "$1" = -- ]; then shift; envs=("$@"); break; fi; opts+=("$1"); shift; done
  mkdir -p "$work/runs/$name"
  id=$(cd "$work" && env "${envs[@]}" "$cluster" exec "$cdir" gpt-ctl sbatch --parsable \
         --job-name="$name" --time=00:15:00 "${opts[@]}" "$src/slurm/$template" 2>&1) || fail "sbatch $name: $id"
  id=${id%%;*}; jobs_submitted+=("$id")
  log=$work/runs/$name/slurm-$id.out
}
job_field() { on gpt-ctl scontrol show job -o "$1" 2>/dev/null | grep -o " $2=[^ ]*" | head -1 | cut -d= -f2-; }
job_done() {
  case $(job_field "$1" JobState) in
    COMPLETED|FAILED|CANCELLED|TIMEOUT|NODE_FAIL|OUT_OF_MEMORY|BOOT_FAIL|DEADLINE|PREEMPTED) return 0 ;;
    PENDING) on gpt-ctl scontrol show job -o "$1" | grep -qE "Reason=(ReqNodeNotAvail|PartitionNodeLimit|BadConstraints|JobHeld)" \
               && fail "job $1 will never run: $(job_field "$1" Reason)"; return 1 ;;
    *) return 1 ;;
  esac
}
expect_done() {  # expect_done ID LIMIT STATE EXIT
  wait_for "$2" "job $1 to end" job_done "$1"
  local st ec; st=$(job_field "$1" JobState); ec=$(job_field "$1" ExitCode)
  [ "$st" = "$3" ] && [ "$ec" = "$4" ] || fail "job $1 ended $st with exit code $ec, expected $3 $4"
}
log_has() { grep -qE -- "$2" "$1" || fail "$(basename "$1") lacks /$2/"; }
# rank_line RUN RANK: the communication-bytes line of that rank's log (--log-dir of the job)
rank_line() { grep -h "communication bytes of this run on rank $2 " "$work"/runs/"$1"/logs/*/rank-"$2".log | tail -1; }
losses() { sed -nE 's/^\{"iteration": ([0-9]+), "lm_loss": ([^,]+),.*/\1 \2/p' "$1"; }
# same_losses A B WHAT [FROM TO]: every iteration's lm loss (of A's iterations FROM..TO, all
# when not given) agrees to 1e-5 relative, the bound the
# project's in-process layout tests use (tests/train/parallel_match.hpp): fp32 sums in a
# different order over a few thousand terms, a few iterations of Adam.
same_losses() {
  local a b; a=$(losses "$1" | awk -v f="${4:-0}" -v t="${5:-1e18}" '$1 >= f && $1 <= t'); b=$(losses "$2")
  [ -n "$a" ] && [ "$(echo "$a" | wc -l)" = "$(echo "$b" | wc -l)" ] || fail "$3: iterations differ: [$a] vs [$b]"
  paste <(echo "$a") <(echo "$b") | awk -v what="$3" '{ d = $2 - $4; if (d < 0) d = -d; r = $2 < 0 ? -$2 : $2
      if ($1 != $3 || d > 1e-5 * r) { printf "%s: iteration %s lm loss %s, 1-rank run %s\n", what, $1, $4, $2; bad = 1 } }
      END { exit bad }' || fail "$3: losses differ from the 1-rank run"
}

# ==== phase 1: slurm/gpt22b.sbatch, 2 nodes x 8 tasks, TP 8 x PP 2 ===========================
# The template is submitted unchanged; EXTRA_ARGS (which it passes after the config) scales
# the model down and selects the CPU backend. fp16, sequence parallelism, flash attention
# and the distributed optimizer stay on, as in configs/gpt22b.ini.
if want 1; then
say "phase 1: sbatch slurm/gpt22b.sbatch (2 nodes x 8 tasks, gpu:8 per node), TP 8 x PP 2, tiny model"
h22=64 s22=32 m22=2 iters22=2
submit gpt22b.sbatch gpt22b -- EXTRA_ARGS="--device cpu --distributed-backend mpi --tensor-model-parallel-size 8 --pipeline-model-parallel-size 2 --num-layers 2 --hidden-size $h22 --num-attention-heads 8 --seq-length $s22 --max-position-embeddings $s22 --micro-batch-size 1 --global-batch-size $m22 --initial-loss-scale 4096 ${data[*]} --train-iters $iters22 --log-interval 1 --eval-iters 0"
expect_done "$id" 600 COMPLETED 0:0
log_has "$log" "on node-a,node-b:"
log_has "$log" "parallel layout: world 16 = TP 8 x PP 2 x DP 1"
log_has "$log" "/proc/meminfo / 8 ranks per node"
log_has "$log" "iteration +$iters22/ +$iters22 .*lm loss"
log_has "$log" "successfully saved checkpoint at iteration $iters22"
[ "$(tr -d '[:space:]' < "$work/runs/gpt22b/checkpoints/latest_checkpointed_iteration.txt")" = "$iters22" ] \
  || fail "gpt22b: the tracker does not name iteration $iters22"
# Where each rank ran, from its own log: rank = tp + 8 pp, so a TP group is 8 consecutive
# ranks (one node) and each pipeline pair (r, r + 8) must span the nodes.
declare -A host
for r in $(seq 0 15); do
  line=$(rank_line gpt22b "$r"); [ -n "$line" ] || fail "rank $r logged no communication bytes"
  host[$r]=$(echo "$line" | sed -nE 's/.*\(host ([^)]*)\).*/\1/p')
done
for r in $(seq 0 15); do
  [ "${host[$r]}" = "${host[$(((r / 8) * 8))]}" ] || fail "TP group of rank $r spans hosts: ${host[$r]} vs ${host[$(((r / 8) * 8))]}"
done
for r in $(seq 0 7); do
  [ "${host[$r]}" != "${host[$((r + 8))]}" ] || fail "pipeline pair ($r, $((r + 8))) is on one host ${host[$r]}"
done
say "phase 1 ok: job $id COMPLETED; TP groups 0-7 on ${host[0]}, 8-15 on ${host[8]}; pipeline pairs (r, r+8) across"
# Bytes across the node boundary per iteration, all ranks and both directions: the only
# groups spanning nodes are pp (activations forward, gradients back) and embedding (first
# and last stage all-reduce the tied word-embedding gradient); DP is 1. Each rank's pp
# send bytes and embedding all-reduce payload leave its node (a 2-rank all-reduce sends the
# whole buffer once). model-parallel/world carry a few scalars (loss, grad norm).
sum_field() {  # sum_field GROUP OP: over the 16 ranks, bytes of OP in GROUP
  local r t=0 v
  for r in $(seq 0 15); do
    v=$(rank_line gpt22b "$r" | sed -nE "s/.* $1\[[0-9]+\][^;]* $2=([0-9]+)\/.*/\1/p"); t=$((t + ${v:-0}))
  done
  echo "$t"
}
p2p=$(( $(sum_field pp send) / iters22 )); emb=$(( $(sum_field embedding all-reduce) / iters22 ))
# The planner's volumes (lib/plan/time_model.cpp): per micro-batch and direction, each TP
# rank of a boundary sends b*s*h/t elements of the 16-bit activations (all 8 pairs: b*s*h);
# the embedding all-reduce is V_pad/t * h fp32 gradients per rank, V_pad = 50257 padded to a
# multiple of 128 * t.
vpad=$(( (50257 + 1023) / 1024 * 1024 ))
p2p_plan=$(( 2 * m22 * 1 * s22 * h22 * 2 )); emb_plan=$(( 16 * vpad / 8 * h22 * 4 ))
printf '      | bytes per iteration across the node boundary (22B layout TP8 x PP2, h=%d s=%d, %d micro-batches)\n' "$h22" "$s22" "$m22"
printf '      | %-34s %12s %12s\n' traffic measured planner "pipeline p2p (pp send)" "$p2p" "$p2p_plan" "embedding all-reduce" "$emb" "$emb_plan"
[ "$p2p" = "$p2p_plan" ] && [ "$emb" = "$emb_plan" ] || fail "bytes across the node boundary differ from the planner's volumes"
fi

# ==== phase 2: gpt-tiny on 2 nodes x 2 ranks in three layouts, against the 1-rank run =========
tiny=(--num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 64 --max-position-embeddings 64
      --micro-batch-size 2 --global-batch-size 4 --lr 3e-3 --lr-warmup-iters 1 --log-interval 1
      --eval-iters 0 "${data[@]}"
      --lr-decay-iters 5)  # one schedule: a 3-iteration run is the first 3 of the 5-iteration
                           # 1-rank run, which phase 3's resume (iterations 4-5) follows
if want 2 || want 3; then
# The padded vocabulary is a multiple of 128 x TP (Megatron): the 1-rank run pads to 256
# like the TP 2 runs, so both initialise and normalise over the same 50432 logits.
say "phase 2: gpt-tiny 1 rank (reference) and 2 nodes x 2 ranks: TP2xDP2, TP2xPP2, TP2xDP2 + distributed optimizer"
submit gpt-tiny-cpu.sbatch ref --nodes=1 --ntasks=1 -- CHECKPOINTS=0 \
  EXTRA_ARGS="--tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 --make-vocab-size-divisible-by 256 ${tiny[*]} --train-iters 5 --metrics-file $work/runs/ref/metrics.jsonl"
ref_id=$id
declare -A layout=([tp2dp2]="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1"
                   [tp2pp2]="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --save-interval 3"
                   [distopt]="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 --use-distributed-optimizer"
                   [mpirun]="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1")
declare -A lid
for l in tp2dp2 tp2pp2 distopt mpirun; do
  ck=0; [ $l = tp2pp2 ] && ck=1   # tp2pp2 saves the checkpoint phase 3 resumes
  # mpirun: run-training.sh's LAUNCHER=mpirun, Hydra's `mpirun -np $SLURM_NTASKS` inside the
  # allocation (it starts one proxy per node through srun, and serves PMI itself).
  launcher=srun; [ $l = mpirun ] && launcher=mpirun
  submit gpt-tiny-cpu.sbatch "$l" --nodes=2 --ntasks-per-node=2 -- CHECKPOINTS=$ck NO_REQUEUE=1 LAUNCHER=$launcher \
    EXTRA_ARGS="${layout[$l]} ${tiny[*]} --train-iters 3 --metrics-file $work/runs/$l/metrics.jsonl"
  lid[$l]=$id
done
expect_done "$ref_id" 300 COMPLETED 0:0
for l in tp2dp2 tp2pp2 distopt mpirun; do
  expect_done "${lid[$l]}" 300 COMPLETED 0:0
  log_has "$work/runs/$l/slurm-${lid[$l]}.out" "on node-a,node-b:"
  same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/$l/metrics.jsonl" "$l" 1 3
  # rank 0 and 1 share node-a, 2 and 3 node-b: TP pairs inside, DP/PP pairs across.
  [ "$(rank_line "$l" 1 | grep -o 'host [^)]*')" = "host node-a" ] && [ "$(rank_line "$l" 2 | grep -o 'host [^)]*')" = "host node-b" ] \
    || fail "$l: ranks 1/2 not on node-a/node-b"
done
log_has "$work/runs/mpirun/slurm-${lid[mpirun]}.out" "launcher mpirun"
say "phase 2 ok: losses of TP2xDP2, TP2xPP2, DistOpt, TP2xDP2 by mpirun on 2 nodes equal the 1-rank run: $(losses "$work/runs/ref/metrics.jsonl" | head -3 | tr '\n' ' ')"

fi

# ==== phase 3: resume the two-node checkpoint, other layout, node order reversed =============
# tp2pp2 wrote stage 0 from node-a and stage 1 from node-b. Here rank 0 (stage 0, the first TP
# group) runs on node-b: srun inherits the job's --distribution=arbitrary (SLURM_DISTRIBUTION)
# and places task i on line i of SLURM_HOSTFILE, node-b first and the nodes alternating, so
# each DP pair spans the nodes and each node reads the other's files.
if want 3; then
say "phase 3: resume tp2pp2's checkpoint (iteration 3) as TP1 x PP2 x DP2, ranks on node-b,node-a,node-b,node-a"
mkdir -p "$work/runs/resume/checkpoints"
cp -r "$work/runs/tp2pp2/checkpoints/." "$work/runs/resume/checkpoints/"
printf '%s\n' node-b node-a node-b node-a > "$work/runs/resume/hostfile"
submit gpt-tiny-cpu.sbatch resume --nodes=2 --ntasks-per-node=2 --distribution=arbitrary -- NO_REQUEUE=1 \
  SLURM_HOSTFILE="$work/runs/resume/hostfile" \
  EXTRA_ARGS="--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 256 ${tiny[*]} --train-iters 5 --metrics-file $work/runs/resume/metrics.jsonl"
expect_done "$id" 300 COMPLETED 0:0
log_has "$log" "loaded checkpoint.* at iteration 3"
# Where each rank ran, from its own line in the job's logs (the host it reports).
for r in 0 1 2 3; do
  want_host=node-b; ((r % 2)) && want_host=node-a
  got=$(rank_line resume $r | sed -nE 's/.*\(host ([^)]*)\).*/\1/p')
  [ "$got" = "$want_host" ] || fail "resume: rank $r ran on '${got:-?}', not $want_host (hostfile node-b,node-a,node-b,node-a)"
done
same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/resume/metrics.jsonl" "resume on node-b first" 4 5
say "phase 3 ok: job $id loaded iteration 3 written by TP2xPP2 (stage 0 on node-a), trained 4-5 as TP1xPP2xDP2 with rank 0 on node-b: $(losses "$work/runs/resume/metrics.jsonl" | tr '\n' ' ')"
fi

# ==== phase 4a: USR1 -> checkpoint -> requeue -> resume, across two nodes =====================
{ want 4 || want 4a; } && {
  iters=20   # USR1 goes out after iteration 3; the saved run then has iterations left
  say "phase 4a: 2 nodes x 2 ranks TP2 x PP2, USR1 -> checkpoint -> requeue -> resume"
  submit gpt-tiny-cpu.sbatch usr1 --nodes=2 --ntasks-per-node=2 -- EXTRA_ARGS="${tiny[*]} --train-iters $iters"
  ckpt=$work/runs/usr1/checkpoints
  wait_for 180 "job $id to log iteration 3" grep -qsE "iteration +3/" "$log"
  seen=$(grep -oE "iteration +[0-9]+/" "$log" | tail -1 | grep -oE "[0-9]+")
  on gpt-ctl scancel --batch --signal=USR1 "$id" || fail "scancel --batch --signal=USR1 $id"
  wait_for 180 "job $id to save and requeue itself" grep -qs "requeueing job $id" "$log"
  saved=$(tr -d '[:space:]' < "$ckpt/latest_checkpointed_iteration.txt")
  [[ $saved =~ ^[0-9]+$ ]] && ((saved >= seen && saved < iters)) || fail "usr1: tracker '$saved', USR1 sent after iteration $seen"
  wait_for 60 "job $id to be requeued" bash -c "[ \"\$('$cluster' exec '$cdir' gpt-ctl scontrol show job -o $id | grep -o 'Restarts=[0-9]*')\" = Restarts=1 ]"
  wait_for 60 "the first run of job $id to be cleaned up" \
    bash -c "! pgrep -f '$work/runs/[u]sr1' >/dev/null && ! '$cluster' exec '$cdir' gpt-ctl sinfo -h -o %T | grep -qi completing"
  sleep 2
  on gpt-ctl scontrol update jobid="$id" StartTime=now 2>/dev/null || true
  expect_done "$id" 600 COMPLETED 0:0
  second=$(sed -n "/job $id (restart count 1) on node-a,node-b/,\$p" "$log")
  [ -n "$second" ] || fail "usr1: the requeued job did not run on node-a,node-b"
  grep -qiE "loaded checkpoint.* at iteration $saved\b" <<< "$second" || fail "usr1: the requeued job did not load iteration $saved"
  grep -qE "iteration +$((saved + 1))/" <<< "$second" || fail "usr1: the requeued job did not continue at $((saved + 1))"
  say "phase 4a ok: saved at $saved after USR1 (sent after $seen), requeued on node-a,node-b, resumed, COMPLETED"
}

# ==== phase 4b: node-b's link cut mid-run ========================================================
{ want 4 || want 4b; } && {
  say "phase 4b: 2 nodes x 2 ranks TP2 x DP2 saving every 2 iterations, watchdog limit 5 s; ip link set eth0 down on node-b"
  # MAX_RESTARTS=0: run-training.sh classes a hang (exit 3) as a fault, which it would
  # requeue otherwise; here it must say so and end the job FAILED 3:0.
  submit gpt-tiny-cpu.sbatch cut --nodes=2 --ntasks-per-node=2 -- NO_REQUEUE=1 MAX_RESTARTS=0 GPT_DISTRIBUTED_TIMEOUT_SECONDS=5 HANG_GRACE_SECONDS=5 \
    EXTRA_ARGS="--tensor-model-parallel-size 2 --pipeline-model-parallel-size 1 ${tiny[*]} --train-iters 100000 --save-interval 2"
  ckpt=$work/runs/cut/checkpoints
  wait_for 180 "job $id to save at iteration 2" grep -qs "successfully saved checkpoint at iteration 2 " "$log"
  wait_for 60 "job $id to log iteration 3" grep -qsE "iteration +3/" "$log"
  "$cluster" link "$cdir" node-b down
  say "node-b's eth0 down at $(date +%T.%N | cut -c1-12) (Slurm's logs use this clock)"
  # The DP all-reduce (or a save's collective HDF5 I/O) between the nodes goes over the cut
  # link: the ranks wait, and the watchdog ends the wait after 5 s with exit 3 and its line
  # (a polled wait: "waited ... for"; a call inside MPI-IO: "blocked ... inside"), recorded
  # in the log folder (exit-code-rank-R). srun cannot reach node-b's tasks and would wait
  # until slurmctld declares node-b down (SlurmdTimeout 30 s) and requeues the job for the
  # node failure; run-training.sh ends it HANG_GRACE_SECONDS after the record instead, and
  # the job ends FAILED with exit code 3 (a NODE_FAIL or a requeue would mean Slurm's node
  # failure came first). The bound only keeps a broken test finite.
  ended() { [ "$(job_field "$id" Restarts)" = 1 ] || job_done "$id"; }
  wait_for 150 "Slurm to end job $id after node-b's link went down" ended
  hang_re="gpt_pretrain: error on rank [0-3]: hang: (waited|blocked) [0-9]+ s \(limit 5 s, GPT_DISTRIBUTED_TIMEOUT_SECONDS\) (for|inside) "
  log_has "$log" "$hang_re"
  log_has "$log" "^hang: the watchdog ended a wait on rank [0-3] \(exit 3\): gpt_pretrain: "
  log_has "$log" "gpt_pretrain failed with 3 after 0 fault restarts \(MAX_RESTARTS=0\): not requeueing"
  st=$(job_field "$id" JobState) ec=$(job_field "$id" ExitCode)
  [ "$st" = FAILED ] && [ "$ec" = 3:0 ] && [ "$(job_field "$id" Restarts)" = 0 ] \
    || fail "cut: job $id ended $st, exit code $ec, restarts $(job_field "$id" Restarts); expected FAILED 3:0 by the watchdog before Slurm's node failure"
  first_hang=$(grep -nE "$hang_re" "$log" | head -1 | cut -d: -f1)
  first_nf=$(grep -nE "Node failure|DUE TO NODE FAILURE" "$log" | head -1 | cut -d: -f1 || true)
  [ -z "$first_nf" ] || ((first_hang < first_nf)) || fail "cut: Slurm's node-failure path (line $first_nf) came before the watchdog's line (line $first_hang)"
  hang_line=$(grep -m1 -oE "hang: (waited|blocked) [^;]*" "$log" || true)
  # The last checkpoint is whole: the tracker names a folder whose files load, on one rank.
  saved=$(tr -d '[:space:]' < "$ckpt/latest_checkpointed_iteration.txt")
  [[ $saved =~ ^[0-9]+$ ]] && ((saved >= 2)) || fail "cut: tracker says '$saved'"
  (cd "$work" && timeout 120 mpiexec -n 1 "$build/app/gpt_pretrain" --config configs/gpt-tiny.ini --device cpu \
     --distributed-backend mpi --make-vocab-size-divisible-by 256 "${tiny[@]}" --train-iters $((saved + 1)) --load "$ckpt") > "$tmp/cut-load.log" 2>&1 \
    || { tail -20 "$tmp/cut-load.log"; fail "the checkpoint at iteration $saved does not load after the cut"; }
  log_has "$tmp/cut-load.log" "loaded checkpoint.* at iteration $saved\b"
  say "phase 4b ok: job $id FAILED 3:0, ended by the watchdog's exit 3 before Slurm's node failure: $hang_line; checkpoint $saved loads"
  say "rebuilding the cluster (ranks left on node-b end with it)"
  "$cluster" down "$cdir"; up
}

# ==== phase 5: the planner picks the layout from Slurm's nodes and tasks per node ===============
if want 5; then
say "phase 5: sbatch gpt22b.sbatch --ntasks-per-node=2, no TP/PP given: planner auto mode"
submit gpt22b.sbatch auto --ntasks-per-node=2 -- EXTRA_ARGS="--device cpu --distributed-backend mpi --num-layers 2 --hidden-size 64 --num-attention-heads 8 --seq-length 32 --max-position-embeddings 32 --micro-batch-size 1 --max-global-batch-size 4 --initial-loss-scale 4096 ${data[*]} --train-iters 1 --eval-iters 0 --dry-run"
expect_done "$id" 300 COMPLETED 0:0
log_has "$log" "planner chose .* for 4 ranks \(2 per node\)"
say "phase 5 ok: $(grep -oE "planner chose [^:]*" "$log" | head -1)"
fi

# ==== phase 6: MPI data over the emulated network ==============================================
# With each node's own boot id UCX sends the data between the nodes by TCP over the veths
# (every phase above does). Here node-a's eth0 counter proves it: PP 2 x DP 2 on 2 nodes x 2
# ranks, stage 0 (ranks 0, 1) on node-a, stage 1 on node-b.
if want 6; then
say "phase 6: PP 2 x DP 2 over 2 nodes x 2 ranks, MPI over TCP on the veths"
. "$cdir/cluster.env"
tx_a() { ip -n "$NS_A" -s link show eth0 | awk '/TX:/ { getline; print $1 }'; }
tx0=$(tx_a)
submit gpt-tiny-cpu.sbatch net --nodes=2 --ntasks-per-node=2 -- CHECKPOINTS=0 \
  EXTRA_ARGS="--tensor-model-parallel-size 1 --pipeline-model-parallel-size 2 --make-vocab-size-divisible-by 256 ${tiny[*]} --train-iters 3 --metrics-file $work/runs/net/metrics.jsonl"
expect_done "$id" 300 COMPLETED 0:0
tx=$(( $(tx_a) - tx0 ))
want 2 && same_losses "$work/runs/ref/metrics.jsonl" "$work/runs/net/metrics.jsonl" "PP2 x DP2 over TCP" 1 3
# Ranks 0 and 1 (node-a) send their activations and their half of the embedding all-reduce
# to node-b.
sent=0
for r in 0 1; do
  [ "$(rank_line net $r | grep -o 'host [^)]*')" = "host node-a" ] || fail "net: rank $r is not on node-a"
  line=$(rank_line net $r)
  for v in $(echo "$line" | sed -nE 's/.* pp\[2\][^;]* send=([0-9]+)\/.*/\1/p') \
           $(echo "$line" | sed -nE 's/.* embedding\[2\][^;]* all-reduce=([0-9]+)\/.*/\1/p'); do sent=$((sent + v)); done
done
((sent > 0)) || fail "net: ranks 0/1 logged no pp/embedding bytes"
((tx >= sent)) || fail "net: node-a's eth0 sent $tx bytes, less than the $sent bytes ranks 0 and 1 sent to node-b: MPI did not use the network"
say "phase 6 ok: node-a eth0 sent $tx bytes during the job; ranks 0 and 1 sent $sent bytes to node-b"
fi

# How often MPI_Finalize had to be cut short (lib/dist/mpi_environment.cpp): not a failure.
cut_short=$(cat $(find "$work/runs" -name 'slurm-*.out') 2>/dev/null | grep -c "MPI_Finalize did not return" || true)
say "ranks whose MPI_Finalize did not return within 10 s and were ended with their own exit code: $cut_short"
say "PASS, phases $phases ($((SECONDS - T0))s)"
