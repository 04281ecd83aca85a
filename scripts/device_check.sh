#!/usr/bin/env bash
# The GPU checks as ONE prepared call on a lent machine with one GPU, CUDA and PyTorch but
# none of our other runtime libraries (packed by scripts/device_bundle.sh into .rt/):
#
#   run (timeout_s 570, carry .rt):  bash scripts/device_check.sh [GROUPS]
#   GROUPS: any of "ops train app bench attn gemm sanitize" (default all)
#
# Budget. The whole call has DEVICE_BUDGET_S seconds (default 530: a lent machine runs one
# command for at most 9-10 minutes, and the files must still come back). Two phases:
#  1. the correctness steps (mode P below: the op tests, wgmma, both training runs, the app on
#     CPU, GPU and 2 ranks) all at once, each with 2 CPU threads and its own scratch folder:
#     they time nothing, and one at a time they left the GPU and the cores idle for up to
#     their summed caps (455 s) where together they take the longest one's;
#  2. the timed steps one at a time, in order of what they decide. Reserved (R) ones first:
#     the sm_90 attention beside PyTorch's flash and cuDNN (issue #33's goal), the sm_80
#     attention kernels as the old row, the FP8 step beside bf16 (issue #34's goal); then the
#     whole step beside eager and torch.compile, the document-masked attention beside the
#     unmasked one, the same step with the sm_90 attention, the other sm_90 backward, FP8's
#     GELU epilogue, the unfused GEMM epilogue, and so on down to the oldest variants and
#     PyTorch's FP8 peer.
# Each timed step's timeout is min(its cap, what is left - the floors of the reserved steps
# still to come), so a slow early step shrinks the later ones instead of pushing the call past
# its end; the phase's is min(its longest cap, the same). A step whose timeout would fall below
# its own floor is not started and the summary says "skipped: no time". DEVICE_CHECK_AFTER=STEP
# in a second call on the same machine leaves out phase 1 and every step up to STEP.
#
# Files. A lent machine returns at most 8 files from $OUT and every file counts (a folder of
# logs is not one file), so this writes 5: summary.txt (the GPU, each step's exit status and
# time, the benchmark tables), tests.log (ops, wgmma, train, app: each step's whole output,
# appended in table order when the phase ends), bench.log (training
# throughput with each kernel variant), attn.log (attention alone) and gemm.log (FP8 rows
# and the GEMM table). Results go to $OUT (default ./out).
#
# Kernel variants (README, "Kernel switches"): attn runs the sm_90 attention
# (GPT_CUDA_FLASH=sm90) and bench the default kernels beside PyTorch; the other rows are short
# and without peers, so old and new are measured side by side in the same call:
# attn-flash-sm80 (the default attention kernels), bench-flash-sm90 (the whole step with the
# sm_90 attention), attn-flash-sm90-dq-atomic (the backward's dQ by atomics instead of bulk
# reductions), attn-flash-sm90-bwd-ws (the backward warp-specialised: a producer warpgroup
# loading by TMA), attn-flash-sm90-bwd-1wg and attn-flash-sm90-bwd-plain (the backward's
# one-warpgroup and unpipelined variants), attn-flash-sm90-fwd (that forward, sm80's backward),
# attn-flash-sm90-basic (the basic wgmma forward), bench-unfused (GPT_CUDA_GEMM_EPILOGUE=
# unfused), bench-autotune and gemm-autotune (GPT_CUDA_GEMM_ALGO=autotune), bench-flash-simple
# and attn-flash-simple (GPT_CUDA_FLASH=simple), and the gemm-fp8-* rows (one FP8 switch each).
# attn-doc-mask times document masking (--reset-attention-mask's doc_start; the sm80 kernels,
# the only tensor-core ones with it) at gpt-1.3b's shape, documents of 512 and 2048 tokens
# (bench_attention --doc-len), each row beside the same shape unmasked: the whole-tile
# skipping's gain; then, with what is left of its cap, PyTorch's flex_attention as its peer.
# sanitize-sm90 runs the sm_90 attention tests under compute-sanitizer's racecheck, synccheck
# and memcheck: the hardware's word on the races the emulator's schedules look for.
#
# DEVICE_CHECK_DRY=1 runs nothing: it prints the plan (each step's cap, floor, mode, whether
# its binary is bundled) and the timeout each step would get if every
# earlier one ran to its limit (DEVICE_CHECK_DRY_SPEND=P: used P% of it), under the same
# budget arithmetic as a real run. Runs here without a GPU. DEVICE_CHECK_BIN: a folder of
# binaries to use instead of the bundle's .rt/bin.tar.xz (unpacked to /tmp/gpt-rt/bin);
# DEVICE_CHECK_RT: where the bundle's packages are unpacked (default /opt/rt);
# DEVICE_CHECK_WORK: the steps' scratch (default /tmp/gpt-check, emptied first).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/out}
groups=${1:-ops train app bench attn gemm sanitize}
budget=${DEVICE_BUDGET_S:-530}
dry=${DEVICE_CHECK_DRY:-0}
spend=${DEVICE_CHECK_DRY_SPEND:-100}
unpack=/tmp/gpt-rt  # the bundle's bin.tar.xz unpacks to $unpack/bin
bin=${DEVICE_CHECK_BIN:-$unpack/bin}
tarball=$root/.rt/bin.tar.xz
for v in "$budget" "$spend"; do
    case $v in '' | *[!0-9]*) echo "device_check: '$v' (DEVICE_BUDGET_S, DEVICE_CHECK_DRY_SPEND) is not a whole number" >&2; exit 2 ;; esac
done

# name|group|log|cap_s|floor_s|mode. Mode P: a correctness step of the first phase, run
# concurrently with the other P steps (they time nothing, and each alone leaves the GPU and
# the 16 cores mostly idle); R: reserved (a timed must-have); -: optional, timed.
STEPS=(
    "ops|ops|tests|150|40|P"
    "wgmma|ops|tests|60|10|P"
    "train|train|tests|150|40|P"
    "train-mpi2|train|tests|150|40|P"
    "app-cpu|app|tests|60|15|P"
    "app-cuda|app|tests|60|10|P"
    "app-mpi2|app|tests|60|15|P"
    "attn|attn|attn|120|40|R"
    "attn-flash-sm80|attn|attn|30|10|R"
    "gemm-fp8|gemm|gemm|75|36|R"
    "attn-flash-sm90-dq-atomic|attn|attn|30|10|-"
    "attn-flash-sm90-bwd-ws|attn|attn|30|10|-"
    "bench|bench|bench|240|60|-"
    "attn-doc-mask|attn|attn|60|15|-"
    "bench-flash-sm90|bench|bench|60|25|-"
    "attn-flash-sm90-bwd-1wg|attn|attn|30|10|-"
    "gemm-fp8-gelu-epilogue|gemm|gemm|30|12|-"
    "bench-unfused|bench|bench|60|25|-"
    "gemm-fp8-cast-tile|gemm|gemm|30|12|-"
    "attn-dropout|attn|attn|60|20|-"
    "gemm|gemm|gemm|90|30|-"
    "profile|bench|bench|75|30|-"
    "sanitize-sm90|sanitize|tests|90|30|-"
    "attn-flash-sm90-bwd-plain|attn|attn|30|10|-"
    "bench-autotune|bench|bench|50|25|-"
    "gemm-autotune|gemm|gemm|45|20|-"
    "gemm-fp8-separate|gemm|gemm|30|12|-"
    "gemm-fp8-bias-grad-separate|gemm|gemm|30|12|-"
    "attn-flash-sm90-fwd|attn|attn|30|10|-"
    "attn-flash-sm90-basic|attn|attn|30|10|-"
    "bench-flash-simple|bench|bench|45|20|-"
    "attn-flash-simple|attn|attn|30|10|-"
    "gemm-fp8-torch|gemm|gemm|120|60|-"
)
last_p=-1  # the concurrent phase: STEPS[0..last_p]
for i in "${!STEPS[@]}"; do [[ ${STEPS[$i]} == *"|P" ]] && last_p=$i; done

# The binary a step needs (its absence: "skipped: not bundled").
needs() {
    case $1 in
    ops | sanitize-sm90) echo test_backend_cuda ;;
    wgmma) echo test_cuda_wgmma ;;
    train*) echo test_cuda_training ;;
    app*) echo gpt_pretrain ;;
    bench* | gemm-fp8 | gemm-fp8-separate | gemm-fp8-gelu-epilogue | gemm-fp8-bias-grad-separate | gemm-fp8-cast-tile | \
        profile)
        echo bench_train_gpu ;;
    attn*) echo bench_attention ;;
    gemm | gemm-autotune) echo bench_gemm ;;
    gemm-fp8-torch) echo bench_train_gpu ;;  # a peer only: runs where our FP8 row could
    esac
}

selected() { [[ " $groups " == *" $1 "* ]]; }
# DEVICE_CHECK_AFTER=STEP: a second call on the same lent machine picks up where the first
# one's budget ran out: the concurrent phase and every step up to STEP (included) are left out.
after=-1
if [ -n "${DEVICE_CHECK_AFTER:-}" ]; then
    for i in "${!STEPS[@]}"; do [[ ${STEPS[$i]} == "$DEVICE_CHECK_AFTER|"* ]] && after=$i; done
    if [ "$after" -lt 0 ]; then echo "device_check: DEVICE_CHECK_AFTER='$DEVICE_CHECK_AFTER' names no step" >&2; exit 2; fi
fi
# Whether step $1 (an index) is left out by DEVICE_CHECK_AFTER.
done_before() { [ "$1" -le "$after" ] || { [ "$after" -ge 0 ] && [ "$1" -le "$last_p" ]; }; }
# Whether step $1 can run: its binary is bundled (a dry run plans as if every one were).
runnable() { [ "$dry" = 1 ] || [ -x "$bin/$(needs "$1")" ]; }
# The bundle's binaries, unpacked (python3's tarfile: the GPU machine may lack xz).
if [ -z "${DEVICE_CHECK_BIN:-}" ] && [ -f "$tarball" ] && [ "$dry" != 1 ]; then
    rm -rf "$unpack"
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$tarball" "$unpack" ||
        echo "device_check: cannot unpack $tarball" >&2
fi

# Floors of the reserved, selected steps after index $1.
reserve_after() {
    local i r=0 name group log cap floor res
    for ((i = $1 + 1; i < ${#STEPS[@]}; i++)); do
        IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
        if [ "$res" = R ] && selected "$group" && runnable "$name" && ! done_before "$i"; then r=$((r + floor)); fi
    done
    echo "$r"
}

# The timeout step $1 gets with $2 seconds left: min(cap, left - reserve), or 0 to skip.
limit_for() {
    local name group log cap floor res lim
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$1]}"
    lim=$(($2 - $(reserve_after "$1")))
    if [ "$lim" -gt "$cap" ]; then lim=$cap; fi
    if [ "$lim" -lt "$floor" ]; then lim=0; fi
    echo "$lim"
}

# The first phase: the P steps (the first entries of STEPS), run concurrently. It may last
# the largest cap among its selected steps, less what the reserved steps after it need; each
# step's timeout is min(its cap, that), or 0 (skipped) below its floor.
phase_limit() {  # $1: seconds left
    local i widest=0 name group log cap floor res lim
    for ((i = 0; i <= last_p; i++)); do
        IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
        if selected "$group" && runnable "$name" && ! done_before "$i" && [ "$cap" -gt "$widest" ]; then widest=$cap; fi
    done
    lim=$(($1 - $(reserve_after "$last_p")))
    if [ "$lim" -gt "$widest" ]; then lim=$widest; fi
    if [ "$lim" -lt 0 ]; then lim=0; fi
    echo "$lim"
}
phase_step_limit() {  # $1: step index, $2: the phase's limit
    local name group log cap floor res lim=$2
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$1]}"
    if [ "$lim" -gt "$cap" ]; then lim=$cap; fi
    if [ "$lim" -lt "$floor" ]; then lim=0; fi
    echo "$lim"
}

if [ "$dry" = 1 ]; then
    echo "device_check plan (dry run): budget $budget s, groups: $groups, binaries from $bin"
    echo "timeouts assume every earlier step (of the concurrent phase: its longest) used $spend% of its"
    echo "limit (100: the worst case), and every binary bundled (a real run skips a step whose binary"
    echo "is not, and reserves nothing for it)"
    printf '%-27s %-6s %-10s %5s %6s %4s %-8s %s\n' step group log cap floor mode bundled "timeout / verdict"
    left=$budget
    plim=$(phase_limit "$left")
    phase_wall=0
    for i in "${!STEPS[@]}"; do
        IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
        have=no
        if [ -x "$bin/$(needs "$name")" ] ||
            { [ -z "${DEVICE_CHECK_BIN:-}" ] && [ -f "$tarball" ] &&
              python3 -c 'import sys, tarfile; sys.exit(("bin/" + sys.argv[2]) not in tarfile.open(sys.argv[1]).getnames())' \
                  "$tarball" "$(needs "$name")"; }; then have=yes; fi
        if ! selected "$group"; then verdict="not selected"
        elif done_before "$i"; then verdict="left out (DEVICE_CHECK_AFTER)"
        elif [ "$i" -le "$last_p" ]; then
            lim=$(phase_step_limit "$i" "$plim")
            if [ "$lim" -eq 0 ]; then verdict="skipped: no time (phase limit $plim s)"
            else verdict="$lim s, concurrent"; [ "$lim" -gt "$phase_wall" ] && phase_wall=$lim; fi
        else
            if [ "$i" -eq $((last_p + 1)) ]; then left=$((left - phase_wall * spend / 100)); fi
            lim=$(limit_for "$i" "$left")
            if [ "$lim" -eq 0 ]; then verdict="skipped: no time ($left s left, $(reserve_after "$i") s reserved)"
            else verdict="$lim s"; left=$((left - lim * spend / 100)); fi
        fi
        printf '%-27s %-6s %-10s %5s %6s %4s %-8s %s\n' "$name" "$group" "$log.log" "$cap" "$floor" "$res" "$have" "$verdict"
    done
    echo "the plan leaves $left s of $budget; files under \$OUT: summary.txt tests.log bench.log attn.log gemm.log (5 of the 8 allowed)"
    exit 0
fi

mkdir -p "$out"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
note "device_check: budget $budget s, groups: $groups"
note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"

# Runtime libraries: the bundle's Debian packages, unpacked once per machine.
rt=${DEVICE_CHECK_RT:-/opt/rt}
if [ ! -d "$rt/usr" ] && ls "$root"/.rt/debs/*.deb >/dev/null 2>&1; then
    for d in "$root"/.rt/debs/*.deb; do dpkg -x "$d" "$rt"; done
fi
lib=$rt/usr/lib/x86_64-linux-gnu
# NCCL: the CUDA installation's, or the one PyTorch ships.
nccl=$(dirname "$( (ls /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; \
        python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))') 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/hdf5/mpich:$nccl:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=$rt/usr/bin:$PATH  # mpiexec.hydra and hydra_pmi_proxy (which it starts from PATH)
mpiexec=$(command -v mpiexec.hydra || command -v mpiexec || echo mpiexec)
work=${DEVICE_CHECK_WORK:-/tmp/gpt-check}  # scratch: the steps' outputs and folders
rm -rf "$work"
mkdir -p "$work"
export GPT_TEST_SOURCE_DIR=$root GPT_TEST_BINARY_DIR=$work
note "NCCL from: $nccl; mpiexec: $mpiexec"
# What the loader cannot find (the 2-rank steps once failed on libslurm.so.38, which
# Debian's mpiexec.hydra links): said once here rather than as a failing step later.
missing=$(for b in "$bin"/* "$mpiexec" "$(command -v hydra_pmi_proxy || true)"; do
              [ -f "$b" ] && ldd "$b" 2>/dev/null | awk -v b="${b##*/}" '/not found/ { print b ": " $1 }'
          done | sort -u | tr '\n' ' ')
note "libraries not found: ${missing:-none}"

tiny=(--config "$root/configs/gpt-tiny.ini" --train-iters 10 --lr-warmup-iters 2 --fp16
      --initial-loss-scale 4096 --eval-iters 0 --log-interval 1 --use-flash-attn)
# Short rows of the kernel variants: fewer iterations, no peers.
short=(PEER=none "BENCH_ARGS=--steps 10 --warmup 3" "BENCH_BIN=$bin/bench_train_gpu")

# run_step NAME LIMIT: the step's command under `timeout` (which signals its whole process
# group: mpiexec's ranks and run.sh's benchmark and peers too).
run_step() {
    local t=(timeout -k 5 "$2")
    case $1 in
    ops) "${t[@]}" "$bin/test_backend_cuda" ;;
    # Hopper's wgmma in every descriptor layout against a host product (sm_90 only).
    wgmma) "${t[@]}" "$bin/test_cuda_wgmma" ;;
    train) "${t[@]}" "$bin/test_cuda_training" ;;
    # The sm_90 attention tests (forward, backward and their variants, dropout) under
    # compute-sanitizer's racecheck (shared-memory hazards: a missing barrier the emulator's
    # schedules do not reach), synccheck (barrier misuse) and memcheck, a third of the
    # limit each, every tool run whatever the one before found; its ERROR SUMMARY lines go
    # to the summary.
    sanitize-sm90) local cs tool rc=0
                   cs=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
                   for tool in racecheck synccheck memcheck; do
                       echo "---- compute-sanitizer --tool $tool"
                       timeout -k 5 $(($2 / 3)) "$cs" --tool "$tool" "$bin/test_backend_cuda" \
                           --gtest_filter='CudaAttention.FlashSm90*' || rc=$?
                   done
                   return "$rc" ;;
    # Two ranks on one GPU: the staged MPI path (NCCL refuses two ranks on one device).
    train-mpi2) "${t[@]}" "$mpiexec" -n 2 "$bin/test_cuda_training" ;;
    # The same command on both devices: losses side by side in tests.log.
    app-cpu) "${t[@]}" "$bin/gpt_pretrain" "${tiny[@]}" --device cpu ;;
    app-cuda) "${t[@]}" "$bin/gpt_pretrain" "${tiny[@]}" --device cuda ;;
    app-mpi2) "${t[@]}" "$mpiexec" -n 2 "$bin/gpt_pretrain" "${tiny[@]}" --device cuda \
                  --tensor-model-parallel-size 2 --sequence-parallel --distributed-backend mpi ;;
    bench) "${t[@]}" env "BENCH_BIN=$bin/bench_train_gpu" "PEERS=$root/.rt/peers" PYTHON=python3 \
               bash "$root/bench/train_gpu/run.sh" ;;
    bench-unfused) "${t[@]}" env GPT_CUDA_GEMM_EPILOGUE=unfused "${short[@]}" \
                       bash "$root/bench/train_gpu/run.sh" gpt-1.3b gpt22b-shape-4layers ;;
    # The whole step with the sm_90 attention (forward and backward), all three configs.
    bench-flash-sm90) "${t[@]}" env GPT_CUDA_FLASH=sm90 "${short[@]}" \
                          bash "$root/bench/train_gpu/run.sh" ;;
    # The step with autotuned GEMM algorithms (GPT_CUDA_GEMM_ALGO=autotune): 8 warm-up steps,
    # since a 4-layer model's shapes need a few steps to finish their tuning calls.
    bench-autotune) "${t[@]}" env GPT_CUDA_GEMM_ALGO=autotune PEER=none "BENCH_ARGS=--steps 10 --warmup 8" \
                        "BENCH_BIN=$bin/bench_train_gpu" bash "$root/bench/train_gpu/run.sh" gpt-1.3b gpt22b-shape-4layers ;;
    bench-flash-simple) "${t[@]}" env GPT_CUDA_FLASH=simple "${short[@]}" \
                            bash "$root/bench/train_gpu/run.sh" gpt-1.3b ;;
    # Per-op times inside the step (each op synchronised), default kernels, all three configs:
    # the figures the planner's Hopper presets are calibrated from (docs/planner.md).
    profile) "${t[@]}" env PEER=none "BENCH_ARGS=--steps 5 --warmup 2 --profile --profile-steps 3" \
                 "BENCH_BIN=$bin/bench_train_gpu" bash "$root/bench/train_gpu/run.sh" ;;
    # The sm_90 kernels (wgmma forward, two-warpgroup backward; issue #33 item 2) beside
    # PyTorch's SDPA with its flash backend and, where offered, its cuDNN backend: the
    # issue's goal, measured first. Should they fail on the card, the peers' rows still come.
    attn) "${t[@]}" env GPT_CUDA_FLASH=sm90 "BENCH_BIN=$bin/bench_attention" PYTHON=python3 \
              bash "$root/bench/attention_gpu/run.sh" ;;
    # Document masking on the sm80 kernels (the masked call runs them under every
    # GPT_CUDA_FLASH but simple; named so the unmasked rows beside them run the same ones),
    # gpt-1.3b's shape: documents of 512 tokens (a quarter of the causal work: the gain of the
    # skipped tiles, ideally 4x) and of 2048 = s (one document, nothing to skip: the masked
    # kernels' own cost), each beside the unmasked call, at most 25 s. Then, in a run of its
    # own so that a slow compile costs only its row, PyTorch's flex_attention with a document
    # block mask at 512, given what is left if that is 25 s or more (torch's import and the
    # compile of its forward and backward; the first table stays either way).
    attn-doc-mask) local rc=0 t0=$SECONDS left
                   timeout -k 5 $(($2 < 25 ? $2 : 25)) env GPT_CUDA_FLASH=sm80 "BENCH_BIN=$bin/bench_attention" \
                       PEER=none REPS=5 DOC_LEN="512 2048" bash "$root/bench/attention_gpu/run.sh" gpt-1.3b || rc=$?
                   left=$(($2 - (SECONDS - t0) - 5))  # 5: the kill's grace after a timeout
                   if [ "$left" -ge 25 ]; then
                       timeout -k 5 "$left" env GPT_CUDA_FLASH=sm80 "BENCH_BIN=$bin/bench_attention" PYTHON=python3 \
                           REPS=5 DOC_LEN=512 bash "$root/bench/attention_gpu/run.sh" gpt-1.3b ||
                           echo "attn-doc-mask: the flex_attention run ended with exit $? (124: out of time)"
                   else
                       echo "attn-doc-mask: no flex_attention run: $left s left of the step, 25 s needed"
                   fi
                   return "$rc" ;;
    # The default (sm_80) kernels, all three shapes, without peers: the old row.
    attn-flash-sm80) "${t[@]}" env GPT_CUDA_FLASH=sm80 "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                         bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-simple) "${t[@]}" env GPT_CUDA_FLASH=simple "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                           bash "$root/bench/attention_gpu/run.sh" gpt-1.3b ;;
    # The sm_90 variants, all three shapes, no peers: dQ by float2 atomics (sm90-dq-atomic), so
    # the bulk reductions' change shows; the warp-specialised backward (sm90-bwd-ws), so
    # TMA loads by a producer warpgroup show against sm90's cp.async; the one-warpgroup backward
    # (sm90-bwd-1wg), so the second warpgroup's change shows; the unpipelined one
    # (sm90-bwd-plain), so the double buffering's shows; that forward with sm80's backward
    # (sm90-fwd), so the backward's shows; and the basic forward (sm90-basic), so the
    # forward's pipelining's shows.
    attn-flash-sm90-dq-atomic) "${t[@]}" env GPT_CUDA_FLASH=sm90-dq-atomic "BENCH_BIN=$bin/bench_attention" \
                                   PEER=none REPS=5 bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-sm90-bwd-ws) "${t[@]}" env GPT_CUDA_FLASH=sm90-bwd-ws "BENCH_BIN=$bin/bench_attention" \
                                PEER=none REPS=5 bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-sm90-bwd-1wg) "${t[@]}" env GPT_CUDA_FLASH=sm90-bwd-1wg "BENCH_BIN=$bin/bench_attention" \
                                 PEER=none REPS=5 bash "$root/bench/attention_gpu/run.sh" ;;
    # Attention dropout 0.1 (Megatron's GPT configs; the benches above run without it) on
    # gpt-1.3b's shape: the default kernels beside PyTorch's SDPA with dropout_p, the sm_90
    # kernels, then the default kernels with the backward's dropout mask drawn per element
    # (GPT_CUDA_DROPOUT_DRAWS=element, the kernel before the word draws), a third of the limit each.
    attn-dropout) for k in sm80 sm90 sm80-element; do
                      timeout -k 5 $(($2 / 3)) env GPT_CUDA_FLASH=${k%-element} \
                          GPT_CUDA_DROPOUT_DRAWS=$([ $k = sm80-element ] && echo element || echo word) DROPOUT=0.1 REPS=5 \
                          "BENCH_BIN=$bin/bench_attention" PYTHON=python3 PEER=$([ $k = sm80 ] && echo torch || echo none) \
                          bash "$root/bench/attention_gpu/run.sh" gpt-1.3b || return
                  done ;;
    attn-flash-sm90-bwd-plain) "${t[@]}" env GPT_CUDA_FLASH=sm90-bwd-plain "BENCH_BIN=$bin/bench_attention" \
                                   PEER=none REPS=5 bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-sm90-fwd) "${t[@]}" env GPT_CUDA_FLASH=sm90-fwd "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                             bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-sm90-basic) "${t[@]}" env GPT_CUDA_FLASH=sm90-basic "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                               bash "$root/bench/attention_gpu/run.sh" ;;
    # FP8 training steps beside bf16 (issue 34), short; fp8 twice: forward GEMMs with fast
    # accumulation (the default) and without (GPT_CUDA_FP8_FAST_ACCUM=off).
    gemm-fp8) for p in bf16 fp8 fp8-split; do  # a third of the limit each
                  timeout -k 5 $(($2 / 3)) env GPT_CUDA_FP8_FAST_ACCUM=$([ $p = fp8-split ] && echo off || echo forward) \
                      "$bin/bench_train_gpu" --config gpt-1.3b --precision "${p%-split}" \
                      --steps 10 --warmup 3 || return
              done ;;
    # The fp8 row of gemm-fp8 again with its QKV and FC1 inputs cast in a pass of their own
    # (GPT_FP8_INPUT_CAST=separate) instead of by the norms: the fused cast's saving.
    gemm-fp8-separate) "${t[@]}" env GPT_FP8_INPUT_CAST=separate "$bin/bench_train_gpu" --config gpt-1.3b \
                           --precision fp8 --steps 10 --warmup 3 ;;
    # The fp8 row again with the element-wise 32 x 32 cast kernel (GPT_CUDA_FP8_CAST=tile)
    # instead of the vectorised 64 x 64 one: the casts' share of the FP8 step.
    gemm-fp8-cast-tile) "${t[@]}" env GPT_CUDA_FP8_CAST=tile "$bin/bench_train_gpu" --config gpt-1.3b \
                            --precision fp8 --steps 10 --warmup 3 ;;
    # The fp8 row again with the bias gradients summed by a pass of their own
    # (GPT_FP8_BIAS_GRAD=separate) instead of by the output gradients' casts.
    gemm-fp8-bias-grad-separate) "${t[@]}" env GPT_FP8_BIAS_GRAD=separate "$bin/bench_train_gpu" \
                                     --config gpt-1.3b --precision fp8 --steps 10 --warmup 3 ;;
    # The fp8 row again with fc1's GELU in its GEMM epilogue and fc2's input cast in a pass
    # (GPT_FP8_GELU=epilogue) instead of fc1's bias-only GEMM and the GELU pass that writes
    # fc2's codes (pass, the default): which of the two is faster on the card.
    gemm-fp8-gelu-epilogue) "${t[@]}" env GPT_FP8_GELU=epilogue "$bin/bench_train_gpu" --config gpt-1.3b \
                                --precision fp8 --steps 10 --warmup 3 ;;
    gemm) "${t[@]}" "$bin/bench_gemm" --reps 10 ;;
    # The same table with autotuned algorithms, gpt-1.3b's shapes: "ours" against the gemm
    # row's heuristic choice and against cuBLASLt's best.
    gemm-autotune) "${t[@]}" env GPT_CUDA_GEMM_ALGO=autotune "$bin/bench_gemm" --reps 10 --shape gpt-1.3b ;;
    # PyTorch's own FP8 path (torch._scaled_mm, compiled) on gpt-1.3b: the peer of gemm-fp8.
    gemm-fp8-torch) "${t[@]}" python3 "$root/bench/train_gpu/peer_torch_fp8.py" --peers "$root/.rt/peers" \
                        --only gpt-1.3b ;;
    esac
}

# What a step adds to the summary from its own lines of its log.
digest() {
    case $1 in
    app-*) grep -h "iteration \+10/" ;;
    # The table run.sh ends with, or its JSON lines when it was stopped before the table.
    bench*) awk '/^device .*TFLOP/ { buf = ""; found = 1 } found { buf = buf $0 "\n" }
                 /^\{.*model_tflops/ { json = json $0 "\n" }
                 END { printf "%s", found ? buf : json }' ;;
    # Each config's per-category breakdown (the per-op table stays in bench.log).
    profile) awk '/^profile of / { print } /^per-iteration breakdown/ { f = 1 } f && /^$/ { f = 0 } f' ;;
    # Both of its runs' tables (ours beside unmasked, then beside flex_attention) and its notes.
    attn-doc-mask) awk '/^device .*causal/ { f = 1 } /^(== |shape=)/ { f = 0 } f || /^attn-doc-mask: /' ;;
    attn*) awk '/^device .*causal/ { buf = ""; found = 1 } found { buf = buf $0 "\n" } END { printf "%s", buf }' ;;
    gemm*) grep -E '^\||fp8_peak|gemm_algo=|"model_tflops"|"error"' ;;
    *) grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|suites? ran|GPT_TEST_HARDWARE_SKIP|^---- compute-sanitizer|ERROR SUMMARY' ;;
    esac
}

# A finished step's lines: its header and output into its log, its verdict and digest into
# the summary. $1 name, $2 limit, $3 cap, $4 log, $5 exit status, $6 seconds, $7 output file,
# $8 start time, $9 a word for the header.
report() {
    local logf=$out/$4.log verdict="exit $5"
    echo "==== $1 (limit $2 s$9) $8" >>"$logf"
    cat "$7" >>"$logf"
    if [ "$5" -eq 124 ] || [ "$5" -eq 137 ]; then verdict="timed out"; fi
    note "$1: $verdict after $6 s (limit $2 s, cap $3 s$9)"
    digest "$1" <"$7" | tee -a "$summary"
}

# Phase 1: the correctness steps at once, each with its own scratch folder and 2 CPU threads
# (up to 9 processes share the 16 cores), their logs appended in table order when all end.
plim=$(phase_limit "$((budget - SECONDS))")
phase=()
for ((i = 0; i <= last_p; i++)); do
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
    selected "$group" && ! done_before "$i" || continue
    if ! runnable "$name"; then note "$name: skipped: not bundled ($bin/$(needs "$name"))"; continue; fi
    lim=$(phase_step_limit "$i" "$plim")
    if [ "$lim" -eq 0 ]; then note "$name: skipped: no time (phase limit $plim s, floor $floor s)"; continue; fi
    mkdir -p "$work/$name"
    (
        # The same working folder as the timed steps (the config's data paths are relative).
        export GPT_TEST_BINARY_DIR=$work/$name OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2
        date -u +%H:%M:%S >"$work/$name.start"
        t0=$SECONDS
        run_step "$name" "$lim" >"$work/$name.out" 2>&1
        echo "$? $((SECONDS - t0))" >"$work/$name.rc"
    ) &
    phase+=("$i|$lim")
done
wait
for p in "${phase[@]}"; do
    i=${p%|*}
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
    read -r rc took <"$work/$name.rc" || { rc=1; took=?; }
    report "$name" "${p#*|}" "$cap" "$log" "$rc" "$took" "$work/$name.out" "$(cat "$work/$name.start")" ", concurrent"
done

# Phase 2: the timed steps, one at a time.
for ((i = last_p + 1; i < ${#STEPS[@]}; i++)); do
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
    selected "$group" && ! done_before "$i" || continue
    if ! runnable "$name"; then note "$name: skipped: not bundled ($bin/$(needs "$name"))"; continue; fi
    left=$((budget - SECONDS))
    lim=$(limit_for "$i" "$left")
    if [ "$lim" -eq 0 ]; then
        note "$name: skipped: no time ($left s left, $(reserve_after "$i") s reserved for later steps, floor $floor s)"
        continue
    fi
    start=$(date -u +%H:%M:%S)
    t0=$SECONDS
    run_step "$name" "$lim" >"$work/$name.out" 2>&1
    rc=$?
    report "$name" "$lim" "$cap" "$log" "$rc" "$((SECONDS - t0))" "$work/$name.out" "$start" ""
done
note "total $SECONDS s of the $budget s budget; files under \$OUT: $(cd "$out" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
