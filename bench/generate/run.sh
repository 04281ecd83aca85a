#!/usr/bin/env bash
# Generation speed on the CPU: prefill (the prompts' one pass) and decode (one token per
# sequence per step, KV cache) tokens/s of gpt_generate beside a PyTorch KV-cache forward
# (torch_generate.py, /usr/bin/python3 with Debian's torch) on the same weights, read from
# the same checkpoint. Both greedy in fp32 on THREADS threads; RUNS runs each, interleaved,
# reported as median (min-max); the tokens both chose are compared.
#
#   bench/generate/run.sh                  # gpt-tiny shape (4 layers, hidden 256), batch 4, prompt 128, 64 new tokens
#   BATCH=1 PROMPT=32 NEW=128 RUNS=5 THREADS=2 bench/generate/run.sh
#
# Other processes on the machine distort both numbers alike only roughly: run it idle.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD_DIR=${GPT_BUILD_DIR:-build}
PYTHON=${PYTHON:-/usr/bin/python3}
THREADS=${THREADS:-2} RUNS=${RUNS:-3} BATCH=${BATCH:-4} PROMPT=${PROMPT:-128} NEW=${NEW:-64}
MODEL=${MODEL:-"--num-layers 4 --hidden-size 256 --num-attention-heads 4 --seq-length 256 --max-position-embeddings 256"}
cmake --build "$BUILD_DIR" --target gpt_pretrain gpt_generate >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=$THREADS OPENBLAS_NUM_THREADS=$THREADS

# A checkpoint of the model after one step (random-ish weights suffice for speed; the
# tokens are compared, not judged).
# shellcheck disable=SC2086
"$BUILD_DIR/app/gpt_pretrain" --config configs/gpt-tiny.ini $MODEL --micro-batch-size 1 --global-batch-size 1 \
  --train-iters 1 --lr-warmup-iters 0 --eval-iters 0 --mock-data --device cpu --distributed-backend mpi \
  --save "$tmp/ck" > "$tmp/train.log" 2>&1 || { tail "$tmp/train.log"; exit 1; }
# BATCH prompts of exactly PROMPT tokens: each of these words (and " x") is one GPT-2 token.
words=(The A In It He She We They)
for b in $(seq 0 $((BATCH - 1))); do
  printf '%s' "${words[b % 8]}"; for _ in $(seq $((PROMPT - 1))); do printf ' x'; done; echo
done > "$tmp/prompts.txt"

ours_pre=() ours_dec=() peer_pre=() peer_dec=()
for r in $(seq "$RUNS"); do
  "$BUILD_DIR/app/gpt_generate" --device cpu --load "$tmp/ck" --prompt-file "$tmp/prompts.txt" --greedy \
    --max-new-tokens "$NEW" --batch-size "$BATCH" --output-format jsonl > "$tmp/ours.jsonl" 2> "$tmp/ours.err"
  line=$(grep "prefill" "$tmp/ours.err")
  ours_pre+=("$(sed -E 's/.*prefill ([0-9]+) tokens in [^(]*\(([0-9.e+]+) tokens\/s.*/\2/' <<<"$line")")
  ours_dec+=("$(sed -E 's/.*decode ([0-9]+) tokens in [^(]*\(([0-9.e+]+) tokens\/s.*/\2/' <<<"$line")")
  prefill_tokens=$(sed -E 's/.*prefill ([0-9]+) tokens.*/\1/' <<<"$line")
  decode_tokens=$(sed -E 's/.*decode ([0-9]+) tokens.*/\1/' <<<"$line")
  [ "$prefill_tokens" -eq $((BATCH * PROMPT)) ] || { echo "prompts are $prefill_tokens tokens, not $((BATCH * PROMPT))"; exit 1; }
  "$PYTHON" -c "import json,sys; print(json.dumps([json.loads(l)['prompt_tokens'] for l in open(sys.argv[1])]))" \
    "$tmp/ours.jsonl" > "$tmp/prompts.json"
  "$PYTHON" bench/generate/torch_generate.py "$tmp/ck/iter_0000001/model_optim.h5" "$tmp/prompts.json" \
    $((decode_tokens / BATCH)) 1 "$THREADS" > "$tmp/peer.json"
  peer_pre+=("$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['prefill_tokens_per_s'])" "$tmp/peer.json")")
  peer_dec+=("$("$PYTHON" -c "import json,sys; print(json.load(open(sys.argv[1]))['decode_tokens_per_s'])" "$tmp/peer.json")")
done
same=$("$PYTHON" - "$tmp/ours.jsonl" "$tmp/peer.json" <<'PY'
import json, sys
ours = [json.loads(l)["tokens"] for l in open(sys.argv[1])]
peer = json.load(open(sys.argv[2]))["tokens"]
n = sum(len(o) for o in ours)
same = sum(a == b for o, p in zip(ours, peer) for a, b in zip(o, p))
print("%d/%d" % (same, n))
PY
)
stat() { printf '%s\n' "$@" | sort -g | awk '{v[NR]=$1} END {printf "%.0f (%.0f-%.0f)", v[int((NR+1)/2)], v[1], v[NR]}'; }
printf '\ngreedy generation, fp32, %s threads: batch %s, prompt %s tokens, %s new tokens, %s runs: median (min-max)\n' \
  "$THREADS" "$BATCH" "$PROMPT" "$NEW" "$RUNS"
printf 'model: %s\n' "$MODEL"
printf '%-30s %24s %24s\n' implementation "prefill tokens/s" "decode tokens/s"
printf '%-30s %24s %24s\n' "gpt_generate (C++, CPU)" "$(stat "${ours_pre[@]}")" "$(stat "${ours_dec[@]}")"
printf '%-30s %24s %24s\n' "PyTorch $("$PYTHON" -c 'import torch; print(torch.__version__)') KV cache" \
  "$(stat "${peer_pre[@]}")" "$(stat "${peer_dec[@]}")"
echo "greedy tokens identical: $same (last run)"
echo "load: $(uptime | sed 's/.*load/load/')"
