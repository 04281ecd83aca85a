#!/usr/bin/env bash
# FP8 training's loss against bf16 on a real corpus (issue 34): gpt-tiny and llama-tiny as
# shipped (configs/), on the King James Bible (the demo's corpus, from Debian's bible-kjv),
# each trained from the same seed on the same batches in bf16 and in FP8 (--fp8-format
# hybrid, Megatron's default delayed scaling), on the CPU backend, whose FP8 arithmetic is the
# GPU's (round to nearest even, saturating, fp32 accumulation). Prints the lm loss of both
# every LOG iterations, the relative difference, and the largest one over the run; and the
# validation loss at the end.
#   bench/fp8_loss/run.sh                    # ITERS=200, both configs
#   ITERS=100 CONFIGS=gpt-tiny bench/fp8_loss/run.sh
# Environment: BUILD_DIR (build), WORK (build/fp8-loss), ITERS (200), LOG (20), CONFIGS
# ("gpt-tiny llama-tiny"), RANKS (1), OMP_NUM_THREADS (the cores).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${BUILD_DIR:-build}
WORK=${WORK:-$BUILD_DIR/fp8-loss}
ITERS=${ITERS:-200}
LOG=${LOG:-20}
RANKS=${RANKS:-1}
read -r -a CONFIG_LIST <<<"${CONFIGS:-gpt-tiny llama-tiny}"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-$(( $(nproc) / RANKS ))}
mkdir -p "$WORK"

CORPUS=$WORK/kjv.json
if [ ! -s "$CORPUS" ]; then
  bible -f "gen1:1-rev22:21" | awk '
    function flush() { if (text != "") printf "{\"text\": \"%s\"}\n", text; text = "" }
    { ref = $1; sub(/:.*/, "", ref); line = $0; sub(/^[^ ]+ /, "", line)
      gsub(/\\/, "\\\\", line); gsub(/"/, "\\\"", line); gsub(/\t/, " ", line)
      if (ref != chapter) { flush(); chapter = ref; text = line } else text = text " " line }
    END { flush() }' > "$CORPUS.tmp"
  mv "$CORPUS.tmp" "$CORPUS"
fi
PREFIX=$WORK/kjv
[ -s "${PREFIX}_text_document.idx" ] || "$BUILD_DIR/app/preprocess_data" --input "$CORPUS" --output-prefix "$PREFIX" \
  --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers 2 >/dev/null

run() {  # run CONFIG NAME FLAGS...: metrics in $WORK/CONFIG-NAME.jsonl
  local config=$1 name=$2; shift 2
  local m=$WORK/$config-$name.jsonl
  rm -f "$m"
  mpiexec -n "$RANKS" "$BUILD_DIR/app/gpt_pretrain" --config "configs/$config.ini" --bf16 \
    --data-path "${PREFIX}_text_document" --data-cache-path "$WORK/cache" --tokenizer-type GPT2BPETokenizer \
    --vocab-file data/gpt2/gpt2-vocab.json --merge-file data/gpt2/gpt2-merges.txt \
    --train-iters "$ITERS" --lr-warmup-iters $(( ITERS / 10 )) --eval-interval "$ITERS" --eval-iters 5 \
    --log-interval "$LOG" --metrics-file "$m" "$@" > "$WORK/$config-$name.log" 2>&1 ||
    { echo "fp8_loss: $config $name failed; see $WORK/$config-$name.log" >&2; tail -5 "$WORK/$config-$name.log" >&2; exit 1; }
}
for c in "${CONFIG_LIST[@]}"; do
  t0=$SECONDS; run "$c" bf16; t1=$SECONDS; run "$c" fp8 --fp8-format hybrid; t2=$SECONDS
  echo "fp8_loss: $c: bf16 $((t1 - t0)) s, fp8 $((t2 - t1)) s ($ITERS iterations, $RANKS rank(s) x $OMP_NUM_THREADS thread(s))"
done
/usr/bin/python3 - "$WORK" "$LOG" "${CONFIG_LIST[@]}" <<'PY'
import json, sys
work, log, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def read(path):
    train, valid = {}, None
    for line in open(path):
        r = json.loads(line)
        if r.get("split"):
            if r["split"].startswith("valid"): valid = r["lm_loss"]
        else:
            train[r["iteration"]] = r["lm_loss"]
    return train, valid
for c in configs:
    (a, va), (b, vb) = read(f"{work}/{c}-bf16.jsonl"), read(f"{work}/{c}-fp8.jsonl")
    print(f"\n{c} (lm loss; relative difference = |fp8 - bf16| / bf16)\n")
    print("| iteration | bf16 | fp8 | relative difference |\n|---|---|---|---|")
    worst = (0.0, 0)
    for it in sorted(a):
        if it not in b: continue
        d = abs(b[it] - a[it]) / a[it]
        worst = max(worst, (d, it))
        if it == 1 or it % log == 0: print(f"| {it} | {a[it]:.4f} | {b[it]:.4f} | {100 * d:.2f}% |")
    print(f"| validation | {va:.4f} | {vb:.4f} | {100 * abs(vb - va) / va:.2f}% |")
    print(f"\nlargest difference: {100 * worst[0]:.2f}% at iteration {worst[1]}")
PY
