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
#   DOC_LEN="512 2048" bench/attention_gpu/run.sh gpt-1.3b    # document masking (below)
#
# Environment: GPT_BUILD_DIR (default build), BENCH_BIN (a prebuilt bench_attention: no
# build), DEVICE (cuda), DTYPE (fp16 or bf16), REPS (20), DROPOUT (0: attention dropout,
# both sides; Megatron's GPT configs use 0.1), SHAPES, PEER (torch, or none to
# skip it), PYTHON (default: the first of /usr/bin/python3 and python3 that imports torch),
# DOC_LEN (0, the default: plain causal as above; one or more document lengths N > 0:
# bench_attention --doc-len N, every sample packed with documents of N tokens, a row per
# shape and length, TFLOP/s on the masked work (each document's causal half), the same
# shape unmasked beside it and the gain of skipping the masked tiles; the peer is then
# PyTorch's flex_attention with a document block mask, compiled, where the device's torch
# has it, else the table says why).
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
# Document lengths: 0 alone (plain causal, the table as it always was) or lengths > 0, each a
# row per shape; a 0 among them is refused, since each masked row times the unmasked call too.
read -r -a DOC_LENS <<<"${DOC_LEN:-0}"
[ ${#DOC_LENS[@]} -gt 0 ] || DOC_LENS=(0)
MASKED=0
for dl in "${DOC_LENS[@]}"; do
  case $dl in '' | *[!0-9]*) echo "run.sh: DOC_LEN='$DOC_LEN': whole numbers of tokens expected" >&2; exit 2 ;; esac
  if [ "$dl" -gt 0 ]; then MASKED=1; fi
done
if [ $MASKED = 1 ]; then
  for dl in "${DOC_LENS[@]}"; do
    if [ "$dl" -eq 0 ]; then
      echo "run.sh: DOC_LEN='$DOC_LEN': 0 (plain causal) among document lengths; each masked row times it anyway" >&2
      exit 2
    fi
  done
fi

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
  for dl in "${DOC_LENS[@]}"; do
    # A row: the shape (causal), or the shape and a document length; its flags for both sides.
    key=$shape doc_args=()
    if [ "$dl" -gt 0 ]; then
      key="$shape/$dl" doc_args=(--doc-len "$dl")
      echo "== $shape, documents of $dl" >&2
    else
      echo "== $shape" >&2
    fi
    rc=0
    "$BIN" --device "$DEVICE" --dtype "$DTYPE" --reps "$REPS" --dropout "$DROPOUT" --shape "$shape" "${doc_args[@]}" \
      >"$tmp/ours.out" 2>"$tmp/ours.err" || rc=$?
    grep -v '^#' "$tmp/ours.out" || true
    cat "$tmp/ours.err" >&2
    ours=$(shape_line "$tmp/ours.out" "$shape" ours)
    if [ -n "$ours" ] && [ -z "$(quoted "$ours" error)" ]; then
      ROW[$key.fwd]=$(field "$ours" fwd_tflops)
      ROW[$key.fb]=$(field "$ours" fwdbwd_tflops)
      if [ "$dl" -gt 0 ]; then  # the masked line's own fields: its FLOP share and the unmasked times
        for f in flop_fraction fwd_ms fwdbwd_ms unmasked_fwd_ms unmasked_fwdbwd_ms fwd_gain fwdbwd_gain; do
          ROW[$key.$f]=$(field "$ours" $f)
        done
      fi
      if [ "$(field "$ours" finite)" != 1 ]; then
        ROW[$key.ours_error]="ours: non-finite output or gradient"
        failed=1
      fi
    fi
    if [ $rc -ne 0 ] || [ -z "$ours" ] || [ -n "$(quoted "$ours" error)" ]; then
      failed=1
      msg=$(quoted "$ours" error)
      [ -n "$msg" ] || msg=$(grep -m1 'error' "$tmp/ours.err" || tail -1 "$tmp/ours.err" || true)
      ROW[$key.ours_error]="ours FAILED (rc $rc): ${msg:-no output}"
    fi

    if [ "$PEER" != "none" ] && [ "$dl" -gt 0 ]; then
      # flex_attention's row: its numbers, or why there are none (unavailable, or its error).
      prc=0
      "$PYTHON" "$here/peer_torch_attention.py" --device "$DEVICE" --dtype "$DTYPE" --reps "$REPS" \
        --dropout "$DROPOUT" --shape "$shape" "${doc_args[@]}" >"$tmp/peer.out" 2>"$tmp/peer.err" || prc=$?
      grep -v '^#' "$tmp/peer.out" || true
      flex=$(shape_line "$tmp/peer.out" "$shape" torch-flex)
      why=$(quoted "$flex" unavailable)
      [ -n "$why" ] || why=$(quoted "$flex" error)
      if [ -n "$flex" ] && [ -z "$why" ]; then
        ROW[$key.pfwd]=$(field "$flex" fwd_tflops)
        ROW[$key.pfb]=$(field "$flex" fwdbwd_tflops)
      else
        tail -5 "$tmp/peer.err" >&2
        ROW[$key.peer_error]="flex: ${why:-exit $prc: $(tail -1 "$tmp/peer.err")}"
      fi
    elif [ "$PEER" != "none" ]; then
      prc=0
      "$PYTHON" "$here/peer_torch_attention.py" --device "$DEVICE" --dtype "$DTYPE" --reps "$REPS" \
        --dropout "$DROPOUT" --shape "$shape" >"$tmp/peer.out" 2>"$tmp/peer.err" || prc=$?
      grep -v '^#' "$tmp/peer.out" || true
      peer=$(shape_line "$tmp/peer.out" "$shape" torch)
      perr=$(quoted "$peer" error)
      if [ -n "$peer" ] && [ -z "$perr" ]; then
        ROW[$key.pfwd]=$(field "$peer" fwd_tflops)
        ROW[$key.pfb]=$(field "$peer" fwdbwd_tflops)
        ROW[$key.backend]=$(field "$peer" backend)
        pnote=$(quoted "$peer" note)
        if [ -n "$pnote" ]; then ROW[$key.peer_error]="peer note: $pnote"; fi
      fi
      if [ $prc -ne 0 ] || [ -z "$peer" ] || [ -n "$perr" ]; then
        tail -5 "$tmp/peer.err" >&2
        ROW[$key.peer_error]="peer: ${perr:-exit $prc: $(tail -1 "$tmp/peer.err")}"
      fi
      # cuDNN's row: its numbers, or why there are none (unavailable, or its error).
      cud=$(shape_line "$tmp/peer.out" "$shape" torch-cudnn)
      if [ -n "$cud" ] && [ -z "$(quoted "$cud" error)" ] && [ -z "$(quoted "$cud" unavailable)" ]; then
        ROW[$key.cfwd]=$(field "$cud" fwd_tflops)
        ROW[$key.cfb]=$(field "$cud" fwdbwd_tflops)
      else
        why=$(quoted "$cud" unavailable)
        [ -n "$why" ] || why=$(quoted "$cud" error)
        ROW[$key.cudnn_note]="cuDNN: ${why:-no line from the peer}"
      fi
    fi
  done
done

val() { local v=${ROW[$1]:-}; echo "${v:--}"; }
ratio() {  # ours / torch, or - when either is missing
  if [ -n "${ROW[$1]:-}" ] && [ -n "${ROW[$2]:-}" ]; then
    awk -v a="${ROW[$1]}" -v b="${ROW[$2]}" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else print "-" }'
  else
    echo -
  fi
}
# pair A B: "A / B" of two row values, or - when either is missing.
pair() { if [ -n "${ROW[$1]:-}" ] && [ -n "${ROW[$2]:-}" ]; then echo "${ROW[$1]} / ${ROW[$2]}"; else echo -; fi; }
if [ $MASKED = 1 ]; then
  echo
  echo "device $DEVICE, $DTYPE, causal within documents (each sample packed with documents of the row's doc len," \
    "the last one shorter; doc_start as --reset-attention-mask), dropout $DROPOUT, median of $REPS;" \
    "TFLOP/s count the masked work only (flop=masked): each document's causal half, fwd 2*b*np*hn*(sum of L*L" \
    "over a sample's documents), fwd+bwd 3.5x fwd, its share of the causal count in the FLOPs column;" \
    "flex = torch flex_attention, compiled, with a document block mask, the same count; unmasked = ours on the" \
    "same shape without doc_start; gain = unmasked time / masked time (ideal: 1 / the share);" \
    "ours with GPT_CUDA_FLASH=${GPT_CUDA_FLASH:-(unset)}, GPT_CUDA_DROPOUT_DRAWS=${GPT_CUDA_DROPOUT_DRAWS:-(unset)}"
  echo
  echo "| shape | doc len | FLOPs counted | ours fwd TFLOP/s | flex fwd | ratio | ours fwd+bwd | flex fwd+bwd |" \
    "ratio | ms unmasked fwd / fwd+bwd | ms masked fwd / fwd+bwd | gain fwd / fwd+bwd |"
  echo "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
  for shape in "${SHAPE_LIST[@]}"; do
    for dl in "${DOC_LENS[@]}"; do
      k="$shape/$dl" flops=-
      if [ -n "${ROW[$k.flop_fraction]:-}" ]; then flops="masked: ${ROW[$k.flop_fraction]} x causal"; fi
      printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$shape" "$dl" "$flops" \
        "$(val "$k.fwd")" "$(val "$k.pfwd")" "$(ratio "$k.fwd" "$k.pfwd")" \
        "$(val "$k.fb")" "$(val "$k.pfb")" "$(ratio "$k.fb" "$k.pfb")" \
        "$(pair "$k.unmasked_fwd_ms" "$k.unmasked_fwdbwd_ms")" "$(pair "$k.fwd_ms" "$k.fwdbwd_ms")" \
        "$(pair "$k.fwd_gain" "$k.fwdbwd_gain")"
    done
  done
  for shape in "${SHAPE_LIST[@]}"; do
    for dl in "${DOC_LENS[@]}"; do
      for e in ours_error peer_error; do
        k="$shape/$dl.$e"
        if [ -n "${ROW[$k]:-}" ]; then printf -- '- %s, doc len %s: %s\n' "$shape" "$dl" "${ROW[$k]:0:200}"; fi
      done
    done
  done
  exit $failed
fi
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
