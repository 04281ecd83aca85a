#!/usr/bin/env bash
# Our flash attention (causal, forward and forward+backward) beside PyTorch's
# scaled_dot_product_attention, flash backend forced where possible and, in the same run, its
# cuDNN backend where this torch and GPU offer it (else the reason is listed), on the attention shapes
# of the three GPU training shapes (bench_attention.cpp's kShapes), shape by shape in one run; TFLOP/s count the causal half of
# the s x s work (FlashAttention's convention), forward+backward = 3.5 x forward.
#
#   bench/attention_gpu/run.sh                               # the three shapes, then a table
#   bench/attention_gpu/run.sh gpt-1.3b                      # some of them (or SHAPES="a b")
#   DEVICE=cpu SHAPES=tiny REPS=2 bench/attention_gpu/run.sh # smoke test without a GPU
#
# Environment: GPT_BUILD_DIR (default build), BENCH_BIN (a prebuilt bench_attention: no
# build), DEVICE (cuda), DTYPE (fp16 or bf16), REPS (20), DROPOUT (0: attention dropout,
# both sides; Megatron's GPT configs use 0.1), SHAPES, PEER (torch, or none to
# skip it), PYTHON (default: the first of /usr/bin/python3 and python3 that imports torch).
# Prints every key=value line as it comes, then a markdown table; a failing shape keeps its
# error under its row and the others still run. Exit status 1 when any of ours failed.
set -euo pipefail
cd "$(dirname "$0")/../.."
here=bench/attention_gpu

BUILD_DIR=${GPT_BUILD_DIR:-build}
DEVICE=${DEVICE:-cuda}
DTYPE=${DTYPE:-fp16}
REPS=${REPS:-20}
DROPOUT=${DROPOUT:-0}
PEER=${PEER:-torch}
if [ $# -gt 0 ]; then SHAPES="$*"; fi
read -r -a SHAPE_LIST <<<"${SHAPES:-gpt-1.3b gpt2-1.5b-s1024 gpt22b-shape}"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. bench/common/bench_binary.sh
bench_binary bench_attention bench/attention_gpu/bench_attention

if [ "$PEER" != "none" ] && [ -z "${PYTHON:-}" ]; then
  for p in /usr/bin/python3 python3; do
    if "$p" -c 'import torch' >/dev/null 2>&1; then PYTHON=$p; break; fi
  done
  PYTHON=${PYTHON:-/usr/bin/python3}  # none imports torch: the peer's error lands in the rows
fi

# field LINE KEY: the value of KEY=value in a key=value line ("" when absent; quotes kept out).
field() { sed -n "s/.* $2=\"\{0,1\}\([^\" ]*\).*/\1/p" <<<" $1" | head -1; }
# quoted LINE KEY: the whole value of KEY="..." (error messages with spaces).
quoted() { sed -n "s/.* $2=\"\([^\"]*\)\".*/\1/p" <<<" $1" | head -1; }
# The line of shape $2 and implementation $3 (ours, torch, torch-cudnn) in file $1.
shape_line() { grep "^shape=$2 impl=$3 " "$1" | tail -1 || true; }

declare -A ROW
failed=0
for shape in "${SHAPE_LIST[@]}"; do
  echo "== $shape" >&2
  rc=0
  "$BIN" --device "$DEVICE" --dtype "$DTYPE" --reps "$REPS" --dropout "$DROPOUT" --shape "$shape" \
    >"$tmp/ours.out" 2>"$tmp/ours.err" || rc=$?
  grep -v '^#' "$tmp/ours.out" || true
  cat "$tmp/ours.err" >&2
  ours=$(shape_line "$tmp/ours.out" "$shape" ours)
  if [ -n "$ours" ] && [ -z "$(quoted "$ours" error)" ]; then
    ROW[$shape.fwd]=$(field "$ours" fwd_tflops)
    ROW[$shape.fb]=$(field "$ours" fwdbwd_tflops)
    if [ "$(field "$ours" finite)" != 1 ]; then ROW[$shape.ours_error]="ours: non-finite output or gradient"; failed=1; fi
  fi
  if [ $rc -ne 0 ] || [ -z "$ours" ] || [ -n "$(quoted "$ours" error)" ]; then
    failed=1
    msg=$(quoted "$ours" error)
    [ -n "$msg" ] || msg=$(grep -m1 'error' "$tmp/ours.err" || tail -1 "$tmp/ours.err" || true)
    ROW[$shape.ours_error]="ours FAILED (rc $rc): ${msg:-no output}"
  fi

  if [ "$PEER" != "none" ]; then
    prc=0
    "$PYTHON" "$here/peer_torch_attention.py" --device "$DEVICE" --dtype "$DTYPE" --reps "$REPS" --dropout "$DROPOUT" \
      --shape "$shape" >"$tmp/peer.out" 2>"$tmp/peer.err" || prc=$?
    grep -v '^#' "$tmp/peer.out" || true
    peer=$(shape_line "$tmp/peer.out" "$shape" torch)
    perr=$(quoted "$peer" error)
    if [ -n "$peer" ] && [ -z "$perr" ]; then
      ROW[$shape.pfwd]=$(field "$peer" fwd_tflops)
      ROW[$shape.pfb]=$(field "$peer" fwdbwd_tflops)
      ROW[$shape.backend]=$(field "$peer" backend)
      pnote=$(quoted "$peer" note)
      if [ -n "$pnote" ]; then ROW[$shape.peer_error]="peer note: $pnote"; fi
    fi
    if [ $prc -ne 0 ] || [ -z "$peer" ] || [ -n "$perr" ]; then
      tail -5 "$tmp/peer.err" >&2
      ROW[$shape.peer_error]="peer: ${perr:-exit $prc: $(tail -1 "$tmp/peer.err")}"
    fi
    # cuDNN's row: its numbers, or why there are none (unavailable, or its error).
    cud=$(shape_line "$tmp/peer.out" "$shape" torch-cudnn)
    if [ -n "$cud" ] && [ -z "$(quoted "$cud" error)" ] && [ -z "$(quoted "$cud" unavailable)" ]; then
      ROW[$shape.cfwd]=$(field "$cud" fwd_tflops)
      ROW[$shape.cfb]=$(field "$cud" fwdbwd_tflops)
    else
      why=$(quoted "$cud" unavailable)
      [ -n "$why" ] || why=$(quoted "$cud" error)
      ROW[$shape.cudnn_note]="cuDNN: ${why:-no line from the peer}"
    fi
  fi
done

val() { local v=${ROW[$1]:-}; echo "${v:--}"; }
ratio() {  # ours / torch, or - when either is missing
  if [ -n "${ROW[$1]:-}" ] && [ -n "${ROW[$2]:-}" ]; then
    awk -v a="${ROW[$1]}" -v b="${ROW[$2]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'
  else
    echo -
  fi
}
echo
echo "device $DEVICE, $DTYPE, causal, dropout $DROPOUT, median of $REPS; TFLOP/s count the causal half" \
  "(fwd 2*b*np*s*s*hn, fwd+bwd 3.5x fwd); torch = F.scaled_dot_product_attention (flash forced," \
  "its backend in the last column), cuDNN = the same with SDPBackend.CUDNN_ATTENTION forced;" \
  "ours with GPT_CUDA_FLASH=${GPT_CUDA_FLASH:-(unset)}, GPT_CUDA_DROPOUT_DRAWS=${GPT_CUDA_DROPOUT_DRAWS:-(unset)}"
echo
echo "| shape | ours fwd TFLOP/s | torch fwd | ratio | cuDNN fwd | ratio | ours fwd+bwd | torch fwd+bwd | ratio | cuDNN fwd+bwd | ratio | torch backend |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
for shape in "${SHAPE_LIST[@]}"; do
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$(val "$shape.fwd")" \
    "$(val "$shape.pfwd")" "$(ratio "$shape.fwd" "$shape.pfwd")" \
    "$(val "$shape.cfwd")" "$(ratio "$shape.fwd" "$shape.cfwd")" "$(val "$shape.fb")" \
    "$(val "$shape.pfb")" "$(ratio "$shape.fb" "$shape.pfb")" \
    "$(val "$shape.cfb")" "$(ratio "$shape.fb" "$shape.cfb")" "$(val "$shape.backend")"
done
for shape in "${SHAPE_LIST[@]}"; do
  if [ -n "${ROW[$shape.ours_error]:-}" ]; then printf -- '- %s: %s\n' "$shape" "${ROW[$shape.ours_error]:0:200}"; fi
  if [ -n "${ROW[$shape.peer_error]:-}" ]; then printf -- '- %s: %s\n' "$shape" "${ROW[$shape.peer_error]:0:200}"; fi
  if [ -n "${ROW[$shape.cudnn_note]:-}" ]; then printf -- '- %s: %s\n' "$shape" "${ROW[$shape.cudnn_note]:0:200}"; fi
done
exit $failed
