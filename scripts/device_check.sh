#!/usr/bin/env bash
# The GPU checks as ONE prepared call on a lent machine with one GPU, CUDA and PyTorch but
# none of our other runtime libraries (packed by scripts/device_bundle.sh into .rt/):
#
#   run (timeout_s 570, carry .rt):  bash scripts/device_check.sh [GROUPS]
#   GROUPS: any of "ops train app bench attn gemm" (default all)
#
# Budget. The whole call has DEVICE_BUDGET_S seconds (default 530: a lent machine runs one
# command for at most 9-10 minutes, and the files must still come back). Steps run in order
# of value: the op tests, training and the app first, benchmarks after. Each step's timeout
# is min(its cap, what is left - the floors of the reserved steps still to come), so a slow
# early step shrinks the later ones instead of pushing the call past its end; a step whose
# timeout would fall below its own floor is not started and the summary says "skipped: no
# time". Reserved steps (R below) are the must-haves: ops, both training runs, the app on
# the GPU, the two benchmark rows that decide issue #33's switches (the unfused GEMM
# epilogue, attention beside PyTorch) and issue #34's FP8 step beside bf16 (gemm-fp8). The
# optional rows follow in the order of what they decide: the sm_90 attention alone and in the
# step, the GEMM table (FP8 against cuBLASLt's best), the profile for the planner, autotuned
# GEMMs, then the older variants and PyTorch's FP8 peer.
#
# Files. A lent machine returns at most 8 files from $OUT and every file counts (a folder of
# logs is not one file), so this writes 5: summary.txt (the GPU, each step's exit status and
# time, the benchmark tables), tests.log (ops, wgmma, train, app), bench.log (training
# throughput with each kernel variant), attn.log (attention alone) and gemm.log (FP8 rows
# and the GEMM table). Results go to $OUT (default ./out).
#
# Kernel variants (README, "Kernel switches"): bench and attn run the default kernels beside
# PyTorch; bench-unfused (GPT_CUDA_GEMM_EPILOGUE=unfused), bench-flash-sm90 (the whole step
# with the sm_90 attention), bench-autotune and gemm-autotune (GPT_CUDA_GEMM_ALGO=autotune),
# bench-flash-simple and attn-flash-simple (GPT_CUDA_FLASH=simple), attn-flash-sm90 (the
# wgmma forward and backward), attn-flash-sm90-bwd-1wg and attn-flash-sm90-bwd-plain (the
# same with the backward's one-warpgroup and unpipelined variants), attn-flash-sm90-fwd (that forward, sm80's backward) and attn-flash-sm90-basic (the basic wgmma
# forward, GPT_CUDA_FLASH=sm90-basic) are short rows without peers, so old and new are
# measured side by side in the same call.
#
# DEVICE_CHECK_DRY=1 runs nothing: it prints the plan (each step's cap, floor, whether it is
# reserved, whether its binary is bundled) and the timeout each step would get if every
# earlier one ran to its limit (DEVICE_CHECK_DRY_SPEND=P: used P% of it), under the same
# budget arithmetic as a real run. Runs here without a GPU. DEVICE_CHECK_BIN: a folder of
# binaries to use instead of the bundle's .rt/bin.tar.xz (unpacked to /tmp/gpt-rt/bin);
# DEVICE_CHECK_RT: where the bundle's packages are unpacked (default /opt/rt).
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/out}
groups=${1:-ops train app bench attn gemm}
budget=${DEVICE_BUDGET_S:-530}
dry=${DEVICE_CHECK_DRY:-0}
spend=${DEVICE_CHECK_DRY_SPEND:-100}
unpack=/tmp/gpt-rt  # the bundle's bin.tar.xz unpacks to $unpack/bin
bin=${DEVICE_CHECK_BIN:-$unpack/bin}
tarball=$root/.rt/bin.tar.xz
for v in "$budget" "$spend"; do
    case $v in '' | *[!0-9]*) echo "device_check: '$v' (DEVICE_BUDGET_S, DEVICE_CHECK_DRY_SPEND) is not a whole number" >&2; exit 2 ;; esac
done

# name|group|log|cap_s|floor_s|R (reserved) or -
STEPS=(
    "ops|ops|tests|120|40|R"
    "wgmma|ops|tests|40|10|-"
    "train|train|tests|90|40|R"
    "train-mpi2|train|tests|90|40|R"
    "app-cpu|app|tests|45|15|-"
    "app-cuda|app|tests|30|10|R"
    "app-mpi2|app|tests|40|15|R"
    "bench|bench|bench|240|60|-"
    "bench-unfused|bench|bench|60|25|R"
    "attn|attn|attn|120|40|R"
    "gemm-fp8|gemm|gemm|75|36|R"
    "gemm-fp8-gelu-epilogue|gemm|gemm|30|12|-"
    "gemm-fp8-cast-tile|gemm|gemm|30|12|-"
    "attn-flash-sm90|attn|attn|30|10|-"
    "attn-flash-sm90-bwd-1wg|attn|attn|30|10|-"
    "bench-flash-sm90|bench|bench|60|25|-"
    "attn-flash-sm90-bwd-plain|attn|attn|30|10|-"
    "attn-dropout|attn|attn|45|15|-"
    "gemm|gemm|gemm|90|30|-"
    "profile|bench|bench|75|30|-"
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

# The binary a step needs (its absence: "skipped: not bundled").
needs() {
    case $1 in
    ops) echo test_backend_cuda ;;
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
        if [ "$res" = R ] && selected "$group" && runnable "$name"; then r=$((r + floor)); fi
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

if [ "$dry" = 1 ]; then
    echo "device_check plan (dry run): budget $budget s, groups: $groups, binaries from $bin"
    echo "timeouts assume every earlier step used $spend% of its limit (100: the worst case), and every"
    echo "binary bundled (a real run skips a step whose binary is not, and reserves nothing for it)"
    printf '%-25s %-6s %-10s %5s %6s %4s %-8s %s\n' step group log cap floor res bundled "timeout / verdict"
    left=$budget
    for i in "${!STEPS[@]}"; do
        IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
        have=no
        if [ -x "$bin/$(needs "$name")" ] ||
            { [ -z "${DEVICE_CHECK_BIN:-}" ] && [ -f "$tarball" ] &&
              python3 -c 'import sys, tarfile; sys.exit(("bin/" + sys.argv[2]) not in tarfile.open(sys.argv[1]).getnames())' \
                  "$tarball" "$(needs "$name")"; }; then have=yes; fi
        if ! selected "$group"; then verdict="not selected"
        else
            lim=$(limit_for "$i" "$left")
            if [ "$lim" -eq 0 ]; then verdict="skipped: no time ($left s left, $(reserve_after "$i") s reserved)"
            else verdict="$lim s"; left=$((left - lim * spend / 100)); fi
        fi
        printf '%-25s %-6s %-10s %5s %6s %4s %-8s %s\n' "$name" "$group" "$log.log" "$cap" "$floor" "$res" "$have" "$verdict"
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
export GPT_TEST_SOURCE_DIR=$root GPT_TEST_BINARY_DIR=/tmp/gpt-check
mkdir -p /tmp/gpt-check
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
    # Beside PyTorch's SDPA with its flash backend and, where offered, its cuDNN backend.
    attn) "${t[@]}" env "BENCH_BIN=$bin/bench_attention" PYTHON=python3 \
              bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-simple) "${t[@]}" env GPT_CUDA_FLASH=simple "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                           bash "$root/bench/attention_gpu/run.sh" gpt-1.3b ;;
    # The wgmma kernels (issue #33 item 2), all three shapes: forward (warp-specialised) and
    # backward (two warpgroups on 128 keys); beside them the same with the one-warpgroup
    # backward (sm90-bwd-1wg), so the second warpgroup's change shows, with the unpipelined
    # one (sm90-bwd-plain), so the double buffering's shows, that forward with sm80's
    # backward (sm90-fwd), so the backward's shows, and the basic forward (sm90-basic), so the
    # forward's pipelining's shows.
    attn-flash-sm90) "${t[@]}" env GPT_CUDA_FLASH=sm90 "BENCH_BIN=$bin/bench_attention" PEER=none REPS=5 \
                         bash "$root/bench/attention_gpu/run.sh" ;;
    attn-flash-sm90-bwd-1wg) "${t[@]}" env GPT_CUDA_FLASH=sm90-bwd-1wg "BENCH_BIN=$bin/bench_attention" \
                                 PEER=none REPS=5 bash "$root/bench/attention_gpu/run.sh" ;;
    # Attention dropout 0.1 (Megatron's GPT configs; the benches above run without it) on
    # gpt-1.3b's shape: the default kernels beside PyTorch's SDPA with dropout_p, then the
    # sm_90 kernels, half the limit each.
    attn-dropout) for k in sm80 sm90; do
                      timeout -k 5 $(($2 / 2)) env GPT_CUDA_FLASH=$k DROPOUT=0.1 REPS=5 "BENCH_BIN=$bin/bench_attention" \
                          PYTHON=python3 PEER=$([ $k = sm80 ] && echo torch || echo none) \
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
    attn*) awk '/^device .*causal/ { buf = ""; found = 1 } found { buf = buf $0 "\n" } END { printf "%s", buf }' ;;
    gemm*) grep -E '^\||fp8_peak|gemm_algo=|"model_tflops"|"error"' ;;
    *) grep -E '^\[  (PASSED|FAILED) |^\[  SKIPPED \] [0-9]|suites? ran|GPT_TEST_HARDWARE_SKIP' ;;
    esac
}

for i in "${!STEPS[@]}"; do
    IFS='|' read -r name group log cap floor res <<<"${STEPS[$i]}"
    selected "$group" || continue
    need=$(needs "$name")
    if [ ! -x "$bin/$need" ]; then
        note "$name: skipped: not bundled ($bin/$need)"
        continue
    fi
    left=$((budget - SECONDS))
    lim=$(limit_for "$i" "$left")
    if [ "$lim" -eq 0 ]; then
        note "$name: skipped: no time ($left s left, $(reserve_after "$i") s reserved for later steps, floor $floor s)"
        continue
    fi
    logf=$out/$log.log
    echo "==== $name (limit $lim s) $(date -u +%H:%M:%S)" >>"$logf"
    from=$(wc -l <"$logf")
    t0=$SECONDS
    run_step "$name" "$lim" >>"$logf" 2>&1
    rc=$?
    verdict="exit $rc"
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then verdict="timed out"; fi
    note "$name: $verdict after $((SECONDS - t0)) s (limit $lim s, cap $cap s)"
    tail -n +"$((from + 1))" "$logf" | digest "$name" | tee -a "$summary"
done
note "total $SECONDS s of the $budget s budget; files under \$OUT: $(cd "$out" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')"
