#!/usr/bin/env bash
# The GPU checks in one prepared run on a machine with one GPU, CUDA and
# PyTorch but none of our other runtime libraries (packed by scripts/device_bundle.sh into
# .rt/). Each step is time-boxed so one hang does not cost the others; logs go to $OUT
# (default ./out). Steps: (1) every CUDA op against the CPU backend, and wgmma in every
# shared-memory layout against a host product (sm_90 only); (2) 5 training
# iterations on the GPU against the CPU backend, and 2 ranks sharing the GPU (MPI staged)
# against 1; (3) gpt_pretrain --device cuda on gpt-tiny, NCCL on 1 rank and MPI on 2;
# (4) bench/train_gpu beside PyTorch eager and torch.compile; (5) attn: bench/attention_gpu,
# our flash attention forward and forward+backward beside PyTorch's
# scaled_dot_product_attention on the three configs' attention shapes; (6) gemm:
# bench/gemm_gpu, the linear layers' GEMMs in 16 bits and FP8 beside cuBLASLt's best FP8
# algorithm per problem and its FP8 peak (issue 34).
#   bash scripts/device_check.sh [STEPS]     # STEPS: any of "ops train app bench attn gemm" (default all)
# A lent machine runs one command for at most 10 minutes: run "ops train app" (about 6
# minutes at most) and "bench attn" (7 + 2) as two calls, carrying .rt.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${OUT:-$root/out}
steps=${1:-ops train app bench attn gemm}
mkdir -p "$out"
rt=/opt/rt
if [ ! -d "$rt/usr" ]; then
    for d in "$root"/.rt/debs/*.deb; do dpkg -x "$d" "$rt"; done
fi
lib=$rt/usr/lib/x86_64-linux-gnu
# NCCL: the CUDA installation's, or the one PyTorch ships.
nccl=$(dirname "$( (ls /usr/local/cuda/lib64/libnccl.so.2 /usr/lib/x86_64-linux-gnu/libnccl.so.2; \
        python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))') 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:$lib/hdf5/mpich:$nccl:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
mpiexec=$rt/usr/bin/mpiexec.hydra
export PATH=$rt/usr/bin:$PATH  # hydra_pmi_proxy beside mpiexec
bin=$root/.rt/bin
export GPT_TEST_SOURCE_DIR=$root GPT_TEST_BINARY_DIR=/tmp/gpt-check
mkdir -p /tmp/gpt-check
summary=$out/summary.txt
note() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME TIMEOUT_S COMMAND...: runs, logs to $out/NAME.log, notes the result
    local name=$1 limit=$2; shift 2
    local t0=$SECONDS
    timeout "$limit" "$@" >>"$out/$name.log" 2>&1
    note "$name: exit $? after $((SECONDS - t0)) s ($*)"
}
: > "$summary"
note "GPU: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | head -1)"
note "NCCL from: $nccl"
for s in $steps; do
    case $s in
    ops)
        step ops 150 "$bin/test_backend_cuda"
        # Hopper's wgmma in every descriptor layout against a host product: the hardware's
        # verdict on the emulator's reading of the layouts (docs/cuda-emulator.md).
        step ops 60 "$bin/test_cuda_wgmma" ;;
    train)
        step train 100 "$bin/test_cuda_training"
        step train 100 "$mpiexec" -n 2 "$bin/test_cuda_training" ;;
    app)
        # The same command on both devices: losses side by side in app.log.
        tiny=(--config "$root/configs/gpt-tiny.ini" --train-iters 10 --lr-warmup-iters 2 --fp16
              --initial-loss-scale 4096 --eval-iters 0 --log-interval 1 --use-flash-attn)
        step app 60 "$bin/gpt_pretrain" "${tiny[@]}" --device cpu
        step app 30 "$bin/gpt_pretrain" "${tiny[@]}" --device cuda
        step app 45 "$mpiexec" -n 2 "$bin/gpt_pretrain" "${tiny[@]}" --device cuda \
            --tensor-model-parallel-size 2 --sequence-parallel --distributed-backend mpi
        grep -h "iteration \+10/" "$out/app.log" | tee -a "$summary" ;;
    bench)
        BENCH_BIN=$bin/bench_train_gpu PEERS=$root/.rt/peers PYTHON=python3 \
            step bench 400 bash "$root/bench/train_gpu/run.sh"
        tail -n 12 "$out/bench.log" >> "$summary" ;;
    attn)
        BENCH_BIN=$bin/bench_attention PYTHON=python3 \
            step attn 120 bash "$root/bench/attention_gpu/run.sh"
        # The last table (from its "device ..." line), or nothing when run.sh died first.
        awk '/^device .*causal/ { buf = ""; found = 1 } found { buf = buf $0 "\n" }
             END { printf "%s", buf }' "$out/attn.log" >> "$summary" ;;
    gemm)
        # FP8 training steps beside bf16 (issue 34), then the GEMMs alone.
        for c in gpt-1.3b gpt22b-shape-4layers; do
            for p in bf16 fp8; do step gemm 90 "$bin/bench_train_gpu" --config "$c" --precision "$p"; done
        done
        step gemm 150 "$bin/bench_gemm" --reps 10
        grep -E "^\||fp8_peak|TFLOP/s" "$out/gemm.log" >> "$summary" ;;
    esac
done
