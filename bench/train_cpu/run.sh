#!/usr/bin/env bash
# Training throughput of gpt-tiny on this machine's CPU cores, beside the PyTorch peer doing
# the same work (/work/shared/peers/peer_torch_cpu.py: fp32, AdamW + clipping, no dropout),
# each with its fastest OpenBLAS kernel set, alternating RUNS times in one command.
#
#   bench/train_cpu/run.sh                      # 2 threads, 5 runs each, alternating (~4-5 min idle)
#   RUNS=3 THREADS=2 bench/train_cpu/run.sh
#   CORETYPE=SkylakeX bench/train_cpu/run.sh    # skip the probe: one OPENBLAS_CORETYPE for both
#   bench/train_cpu/run.sh --use-flash-attn     # extra flags go to bench_train_cpu
#   THREADS=2 bench/train_cpu/run.sh --profile  # plus a per-op time table (stderr) per run
#
# Both implementations call the same OpenBLAS (Debian's DYNAMIC_ARCH build: PyTorch 1.13
# through libblas.so.3, ours through cblas), whose kernel set OPENBLAS_CORETYPE picks. Step 1
# times one short training run of each implementation per kernel set in CORETYPES ("unset"
# = the environment variable removed: OpenBLAS's own detection, and for us the backend's
# re-selection, lib/backend/cpu/blas.cpp) and keeps each one's fastest; step 2 alternates the
# two, RUNS times each, and prints every run, the medians and the ratio's median (min-max).
# Other processes on the machine distort both: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${GPT_BUILD_DIR:-build}
THREADS=${THREADS:-2}
RUNS=${RUNS:-5}
PYTHON=${PYTHON:-/usr/bin/python3}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}   # shared/ lives next to the repository
CORETYPES=${CORETYPES:-Haswell SkylakeX Cooperlake Zen unset}
# Timed iterations per run (after the warm-up ones): the peer is ~5x slower per iteration.
OUR_WARMUP=${OUR_WARMUP:-2} OUR_STEPS=${OUR_STEPS:-8}
PEER_WARMUP=${PEER_WARMUP:-1} PEER_STEPS=${PEER_STEPS:-3}

[ -f "$PEERS/peer_torch_cpu.py" ] || { echo "run.sh: $PEERS/peer_torch_cpu.py not found (set PEERS=...)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/common/bench_binary.sh
bench_binary bench_train_cpu bench/train_cpu/bench_train_cpu

field() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1" | head -1; }

# with_core CORETYPE CMD...: runs CMD with OPENBLAS_CORETYPE=CORETYPE, or without it ("unset").
with_core() {
  local core=$1; shift
  if [ "$core" = unset ]; then
    env -u OPENBLAS_CORETYPE OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" "$@"
  else
    env OPENBLAS_CORETYPE="$core" OMP_NUM_THREADS="$THREADS" OPENBLAS_NUM_THREADS="$THREADS" "$@"
  fi
}
ours() {  # CORETYPE WARMUP STEPS [flags]
  local core=$1 w=$2 s=$3; shift 3
  with_core "$core" "$BIN" --warmup "$w" --steps "$s" "$@"
}
# The peer's gpt-tiny case only (its main also runs a larger one), plus its peak RSS and the
# kernel set OpenBLAS runs in its process.
peer() {  # CORETYPE WARMUP STEPS
  with_core "$1" "$PYTHON" - "$PEERS" "$THREADS" "$2" "$3" <<'PY'
import ctypes, contextlib, io, json, resource, sys
sys.path.insert(0, sys.argv[1])
from peer_torch_cpu import bench
out = io.StringIO()
with contextlib.redirect_stdout(out):
    bench("gpt-tiny", l=4, h=256, a=4, s=256, B=8, threads=int(sys.argv[2]),
          warmup=int(sys.argv[3]), steps=int(sys.argv[4]))
rec = json.loads(out.getvalue().strip().splitlines()[-1])
rec["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
try:  # torch loaded libopenblas (through libblas.so.3) already: ask it which kernels it uses
    lib = ctypes.CDLL("libopenblas.so.0")
    lib.openblas_get_corename.restype = ctypes.c_char_p
    rec["blas_core"] = lib.openblas_get_corename().decode()
except OSError:
    rec["blas_core"] = "not OpenBLAS"
print(json.dumps(rec))
PY
}

# Where a figure comes from: the CPU model and its widest vector extension (the OpenBLAS kernel
# set each run used is in the tables' "kernels" column), and when.
cpu_model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
if grep -qw avx512f /proc/cpuinfo; then cpu_isa=AVX-512; elif grep -qw avx2 /proc/cpuinfo; then cpu_isa=AVX2; else cpu_isa="no AVX2"; fi
echo "$(date -u '+%Y-%m-%d %H:%M UTC'); CPU: ${cpu_model:-unknown} ($cpu_isa)"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $THREADS threads; OPENBLAS_CORETYPE in the environment: ${OPENBLAS_CORETYPE:-unset}"
if [ -n "${CORETYPE:-}" ]; then
  our_core=$CORETYPE peer_core=$CORETYPE
else
  echo
  echo "step 1: OpenBLAS kernel set per implementation (one short run each: ours 1+3 iterations, the peer's 1+1)"
  printf '%-12s %-22s %12s %-22s %12s\n' "CORETYPE" "ours: kernels" "tokens/s" "PyTorch: kernels" "tokens/s"
  best_o=0 best_p=0
  for core in $CORETYPES; do
    # A kernel set this CPU cannot run (SkylakeX or Cooperlake without AVX-512) dies of an
    # illegal instruction: noted in its row, and the probe goes on.
    orc=0 prc=0
    o=$(ours "$core" 1 3 "$@" 2>/dev/null) || orc=$?
    p=$(peer "$core" 1 1 2>/dev/null) || prc=$?
    ot=$(field "$o" tokens_per_s) pt=$(field "$p" tokens_per_s)
    ok=$(field "$o" blas_core) pk=$(field "$p" blas_core)
    if [ $orc -ne 0 ]; then ok="failed (exit $orc)" ot=0; fi
    if [ $prc -ne 0 ]; then pk="failed (exit $prc)" pt=0; fi
    printf '%-12s %-22s %12s %-22s %12s\n' "$core" "$ok" "$ot" "$pk" "$pt"
    if awk -v a="$ot" -v b="$best_o" 'BEGIN { exit !(a > b) }'; then best_o=$ot our_core=$core; fi
    if awk -v a="$pt" -v b="$best_p" 'BEGIN { exit !(a > b) }'; then best_p=$pt peer_core=$core; fi
  done
  echo "fastest: ours OPENBLAS_CORETYPE=$our_core, PyTorch OPENBLAS_CORETYPE=$peer_core"
fi

echo
echo "step 2: $RUNS runs each, alternating (ours $OUR_WARMUP+$OUR_STEPS iterations, the peer's $PEER_WARMUP+$PEER_STEPS)"
printf '%-4s %-30s %-12s %10s %10s %14s %10s %8s\n' "run" "implementation" "kernels" "ms/iter" "tokens/s" "model GFLOP/s" "RSS MiB" "loss"
row() {  # run, name, json
  printf '%-4s %-30s %-12s %10s %10s %14s %10s %8s\n' "$1" "$2" "$(field "$3" blas_core)" "$(field "$3" ms_per_iter)" \
    "$(field "$3" tokens_per_s)" "$(field "$3" model_gflops)" "$(field "$3" max_rss_mib)" "$(field "$3" loss)"
}
for ((r = 1; r <= RUNS; r++)); do
  o=$(ours "$our_core" "$OUR_WARMUP" "$OUR_STEPS" "$@")
  p=$(peer "$peer_core" "$PEER_WARMUP" "$PEER_STEPS")
  row "$r" "gpt-pretrain (C++, CPU)" "$o"
  row "$r" "$(field "$p" peer)" "$p"
  echo "$(field "$o" tokens_per_s) $(field "$p" tokens_per_s) $(field "$o" ms_per_iter) $(field "$p" ms_per_iter)" >> "$tmp/runs"
done

printf '\ngpt-tiny (4 layers, hidden 256, 4 heads, seq 256, micro-batch 8, vocab 50304, fp32), %s threads, %s runs each\n' "$THREADS" "$RUNS"
awk '
  function med(a, n,   i, j, t) {  # sorts a[1..n] in place
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { n++; ot[n] = $1; pt[n] = $2; om[n] = $3; pm[n] = $4; r[n] = $1 / $2 }
  END {
    printf "%-30s %14s %14s %16s\n", "", "median ms/iter", "median tok/s", "tok/s min-max"
    mo = med(om, n); mp = med(pm, n); a = med(ot, n); b = med(pt, n)
    printf "%-30s %14.1f %14.0f %9.0f-%-6.0f\n", "gpt-pretrain (C++, CPU)", mo, a, ot[1], ot[n]
    printf "%-30s %14.1f %14.0f %9.0f-%-6.0f\n", "PyTorch (peer)", mp, b, pt[1], pt[n]
    m = med(r, n)
    printf "ratio gpt-pretrain / PyTorch tokens/s (per alternating pair): median %.2fx, min-max %.2f-%.2fx\n", m, r[1], r[n]
  }' "$tmp/runs"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
