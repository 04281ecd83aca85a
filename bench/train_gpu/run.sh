#!/usr/bin/env bash
# Training throughput of one GPU on the GPU training shapes (configs/gpt-1.3b.ini and the others below), beside the PyTorch peer (eager and
# torch.compile) doing the same work (/work/shared/peers/peer_torch_gpt.py: fp16, flash
# attention, AdamW + clipping, no dropout, vocab 50304), config by config in one run.
#
#   bench/train_gpu/run.sh                                   # the three configs, then a table
#   bench/train_gpu/run.sh gpt-1.3b                          # some of them (or CONFIGS="a b")
#   BENCH_ARGS="--profile" bench/train_gpu/run.sh gpt-1.3b   # plus per-op/category times (stderr)
#   DEVICE=cpu CONFIGS=tiny PEER=none bench/train_gpu/run.sh # smoke test without a GPU
#   GPT_CUDA_GEMM_EPILOGUE=unfused PEER=none bench/train_gpu/run.sh gpt-1.3b   # another kernel variant
#
# The table's header names the kernel variants ours ran (bench_train_gpu's "kernels": the
# GPT_CUDA_* switches of README.md, "Kernel switches", passed through from the environment).
#
# Environment: GPT_BUILD_DIR (default build), BENCH_BIN (a prebuilt bench_train_gpu: no
# build), DEVICE (cuda), CONFIGS, BENCH_ARGS (extra
# bench_train_gpu flags), PEER (torch, or none to skip it), PEERS (the folder holding
# peer_torch_gpt.py, default ../shared/peers next to the repository), PYTHON (default: the
# first of /usr/bin/python3 and python3 that imports torch).
# Prints every JSON line as it comes, then one row per config; a failing config keeps its
# error in its row and the others still run. Exit status 1 when any of ours failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${GPT_BUILD_DIR:-build}
DEVICE=${DEVICE:-cuda}
PEER=${PEER:-torch}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}   # shared/ lives next to the repository
read -r -a EXTRA <<<"${BENCH_ARGS:-}"
if [ $# -gt 0 ]; then CONFIGS="$*"; fi
read -r -a CONFIG_LIST <<<"${CONFIGS:-gpt-1.3b gpt2-1.5b-s1024 gpt22b-shape-4layers}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/common/bench_binary.sh
bench_binary bench_train_gpu bench/train_gpu/bench_train_gpu

if [ "$PEER" != "none" ]; then
  if [ ! -f "$PEERS/peer_torch_gpt.py" ]; then
    echo "run.sh: $PEERS/peer_torch_gpt.py not found (set PEERS=..., or PEER=none to skip it)" >&2
    exit 1
  fi
  if [ -z "${PYTHON:-}" ]; then
    for p in /usr/bin/python3 python3; do
      if "$p" -c 'import torch' >/dev/null 2>&1; then PYTHON=$p; break; fi
    done
    PYTHON=${PYTHON:-/usr/bin/python3}  # none imports torch: the peer's error lands in the rows
  fi
fi

# field LINE KEY: a scalar value of a one-line JSON object ("" when absent).
field() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1" | head -1; }
# The peer's JSON line for config $2 and implementation $3 (pytorch-eager/-compile) in file $1.
peer_line() { grep -F "\"config\": \"$2\"" "$1" | grep -F "\"peer\": \"$3\"" | tail -1 || true; }
peer_error() { grep -F "\"config\": \"$2\"" "$1" | grep -F '"error"' | tail -1 || true; }

declare -A ROW
ours_kernels=
failed=0
for cfg in "${CONFIG_LIST[@]}"; do
  echo "== $cfg" >&2
  rc=0
  "$BIN" --device "$DEVICE" --config "$cfg" ${EXTRA[@]+"${EXTRA[@]}"} >"$tmp/ours.out" 2>"$tmp/ours.err" || rc=$?
  ours=$(grep -m1 '^{' "$tmp/ours.out" || true)
  if [ -n "$ours" ]; then echo "$ours"; fi
  cat "$tmp/ours.err" >&2
  if [ $rc -ne 0 ] || [ -z "$ours" ]; then
    failed=1
    msg=$(grep -m1 'error' "$tmp/ours.err" || tail -1 "$tmp/ours.err" || true)
    ROW[$cfg.ours_error]="FAILED (rc $rc): ${msg:-no output}"
  else
    ROW[$cfg.tflops]=$(field "$ours" model_tflops)
    ROW[$cfg.tokens]=$(field "$ours" tokens_per_s)
    ROW[$cfg.peak]=$(field "$ours" peak_mem_gib)
    if [ -z "$ours_kernels" ]; then ours_kernels=$(field "$ours" kernels); fi
  fi

  if [ "$PEER" != "none" ]; then
    prc=0
    "$PYTHON" "$PEERS/peer_torch_gpt.py" --only "$cfg" >"$tmp/peer.out" 2>"$tmp/peer.err" || prc=$?
    grep '^{' "$tmp/peer.out" || true
    eager=$(peer_line "$tmp/peer.out" "$cfg" pytorch-eager)
    comp=$(peer_line "$tmp/peer.out" "$cfg" pytorch-compile)
    perr=$(peer_error "$tmp/peer.out" "$cfg")
    ROW[$cfg.eager]=$(field "$eager" model_tflops)
    ROW[$cfg.compile]=$(field "$comp" model_tflops)
    if [ $prc -ne 0 ] || [ -n "$perr" ]; then
      tail -5 "$tmp/peer.err" >&2
      ROW[$cfg.peer_error]="peer: ${perr:-exit $prc: $(tail -1 "$tmp/peer.err")}"
    fi
  fi
done

val() { local v=${ROW[$1]:-}; echo "${v:--}"; }
echo
printf 'device %s, fp16, flash attention, vocab 50304; model TFLOP/s by Megatron'"'"'s formula (no causal discount)\n' "$DEVICE"
printf 'kernels: %s\n' "${ours_kernels:-unknown (no run of ours finished)}"
printf '%-22s %12s %10s %9s %14s %16s %15s\n' config "ours TFLOP/s" tokens/s "peak GiB" "eager TFLOP/s" \
  "compile TFLOP/s" "ours/compile"
for cfg in "${CONFIG_LIST[@]}"; do
  ratio=-
  ours_t=${ROW[$cfg.tflops]:-}
  if [ -n "$ours_t" ]; then
    if [ -n "${ROW[$cfg.compile]:-}" ]; then
      ratio=$(awk -v a="$ours_t" -v b="${ROW[$cfg.compile]}" 'BEGIN { printf "%.2fx", a / b }')
    elif [ -n "${ROW[$cfg.eager]:-}" ]; then
      ratio=$(awk -v a="$ours_t" -v b="${ROW[$cfg.eager]}" 'BEGIN { printf "%.2fx eager", a / b }')
    fi
  fi
  printf '%-22s %12s %10s %9s %14s %16s %15s\n' "$cfg" "$(val "$cfg.tflops")" "$(val "$cfg.tokens")" \
    "$(val "$cfg.peak")" "$(val "$cfg.eager")" "$(val "$cfg.compile")" "$ratio"
  if [ -n "${ROW[$cfg.ours_error]:-}" ]; then printf '  %s\n' "${ROW[$cfg.ours_error]:0:200}"; fi
  if [ -n "${ROW[$cfg.peer_error]:-}" ]; then printf '  %s\n' "${ROW[$cfg.peer_error]:0:200}"; fi
done
echo "goal: ours/compile >= 1.10 on every row"
exit $failed
