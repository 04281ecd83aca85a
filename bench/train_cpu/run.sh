#!/usr/bin/env bash
# Training throughput of gpt-tiny on this machine's CPU cores, beside the PyTorch peer doing
# the same work (/work/shared/peers/peer_torch_cpu.py: fp32, AdamW + clipping, no dropout).
#
#   bench/train_cpu/run.sh                      # 2 threads, 2 warm-up + 8 timed iterations
#   THREADS=2 bench/train_cpu/run.sh --profile  # plus a per-op time table (stderr)
#   bench/train_cpu/run.sh --use-flash-attn     # any bench_train_cpu flag
#
# Prints one JSON line per implementation and a table with the ratio. Other processes on the
# machine distort both numbers: run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD_DIR=${GPT_BUILD_DIR:-build}
THREADS=${THREADS:-2}
PYTHON=${PYTHON:-/usr/bin/python3}
PEERS=${PEERS:-$(cd .. && pwd)/shared/peers}   # shared/ lives next to the repository

if [ ! -f "$BUILD_DIR/build.ninja" ] && [ ! -f "$BUILD_DIR/Makefile" ]; then
  echo "run.sh: no build in $BUILD_DIR; run scripts/setup.sh first (or set GPT_BUILD_DIR)" >&2
  exit 1
fi
cmake --build "$BUILD_DIR" --target bench_train_cpu >/dev/null

field() { sed -n "s/.*\"$2\": \"\{0,1\}\([^,\"}]*\).*/\1/p" <<<"$1" | head -1; }

ours=$(OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS \
       "$BUILD_DIR/bench/train_cpu/bench_train_cpu" "$@")
echo "$ours"

if [ ! -f "$PEERS/peer_torch_cpu.py" ]; then
  echo "run.sh: $PEERS/peer_torch_cpu.py not found (set PEERS=...); no comparison" >&2
  exit 1
fi
# Only the peer's gpt-tiny case (its main also runs a larger one), plus its peak RSS.
peer=$(OMP_NUM_THREADS=$THREADS "$PYTHON" - "$PEERS" "$THREADS" <<'PY'
import json, resource, sys, io, contextlib
sys.path.insert(0, sys.argv[1])
from peer_torch_cpu import bench
out = io.StringIO()
with contextlib.redirect_stdout(out):
    bench("gpt-tiny", l=4, h=256, a=4, s=256, B=8, threads=int(sys.argv[2]))
rec = json.loads(out.getvalue().strip().splitlines()[-1])
rec["max_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
print(json.dumps(rec))
PY
)
echo "$peer"

o_tok=$(field "$ours" tokens_per_s); p_tok=$(field "$peer" tokens_per_s)
printf '\ngpt-tiny (4 layers, hidden 256, 4 heads, seq 256, micro-batch 8, vocab 50304, fp32), %s threads\n' "$THREADS"
printf '%-28s %12s %12s %16s %16s\n' "implementation" "ms/iter" "tokens/s" "model GFLOP/s" "peak mem (MiB)"
printf '%-28s %12s %12s %16s %16s\n' "gpt-pretrain (C++, CPU)" "$(field "$ours" ms_per_iter)" "$o_tok" \
  "$(field "$ours" model_gflops)" "$(field "$ours" max_rss_mib) RSS"
printf '%-28s %12s %12s %16s %16s\n' "$(field "$peer" peer)" "$(field "$peer" ms_per_iter)" "$p_tok" \
  "$(field "$peer" model_gflops)" "$(field "$peer" max_rss_mib) RSS"
awk -v a="$o_tok" -v b="$p_tok" 'BEGIN { printf "ratio gpt-pretrain / PyTorch tokens/s: %.2fx\n", a / b }'
