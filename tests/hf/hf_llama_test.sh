#!/bin/bash
# convert_checkpoint for Llama-style models (lib/hf/llama_*):
#  1. llama-tiny shrunk (rope, RMSNorm, SwiGLU, 4 heads in 2 K/V groups, untied output, no
#     biases) trained on 2 ranks with TP 2; --to hf writes LlamaForCausalLM; an independent
#     PyTorch Llama written from HF's conventions (llama_reference.py) gives our logits
#     (--dump-logits, and the generation path's KV-cached ones, --kv-cache) within the fp32
#     error bound derived there; the same export with gate
#     and up swapped, or k_proj's rows moved by a rope half, is refused by that reference.
#  2. --to megatron imports it: every parameter bit-identical (compare_checkpoints.py), the
#     re-export byte-identical, gpt_pretrain --finetune trains from it.
#  3. --rotary-interleaved with tied embeddings on 1 rank: the export permutes q/k rows to
#     rotate_half, the reference agrees (also with the KV cache); import -> export reproduces
#     the safetensors.
#  4. Refused: a partial-rotary checkpoint (exit 2, one error line naming --rotary-percent), a
#     config.json with rope_scaling or attention_bias (exit 2), a missing lm_head (exit 1).
#   hf_llama_test.sh GPT_PRETRAIN CONVERT MPIEXEC SCRATCH SOURCE_DIR
set -uo pipefail
bin=$1 conv=$2 mpiexec=$3 tmp=$4 src=$5
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
source "$src/tests/hf/hf_test_lib.sh"
tiny_job_setup "$tmp" "$src"
py=/usr/bin/python3
base=(--num-layers 2 --hidden-size 64 --ffn-hidden-size 96 --seq-length 32
      --max-position-embeddings 32 --micro-batch-size 2 --global-batch-size 4 --log-interval 1 --eval-iters 0
      --lr 3e-3 --lr-warmup-iters 1 --train-iters 3 --init-method-std 0.2 --rotary-base 500
      --distributed-backend mpi)
args=(--config configs/llama-tiny.ini "${base[@]}")
grep -v untie-embeddings configs/llama-tiny.ini > llama-tied.ini
tokens=464,2068,7586,21831,18045,625,262,16931,3290,13,50256,0,1000,40000,31,7,99,25000,4,12

# 1. export and the reference forward
"$mpiexec" -n 2 "$bin" "${args[@]}" --tensor-model-parallel-size 2 --save a > train.log 2>&1 \
    || { cat train.log; fail "training failed"; }
"$conv" --to hf --load a --output hf1 > export.log 2>&1 || { cat export.log; fail "export failed"; }
cat export.log
for f in config.json generation_config.json model.safetensors vocab.json merges.txt tokenizer_config.json; do
    [ -s hf1/$f ] || fail "export lacks $f"
done
for kv in '"architectures": \["LlamaForCausalLM"\]' '"num_key_value_heads": 2' '"intermediate_size": 96' \
          '"rope_theta": 500' '"rms_norm_eps": 1e-05' '"tie_word_embeddings": false' '"hidden_act": "silu"'; do
    grep -q "$kv" hf1/config.json || fail "config.json lacks $kv"
done
"$conv" --dump-logits ours.bin --load a --tokens $tokens > dump.log 2>&1 || { cat dump.log; fail "dump-logits failed"; }
$py "$src/tests/hf/llama_reference.py" hf1 ours.bin $tokens || fail "logits differ from the PyTorch reference"
# The generation path: the second half of the positions from KV-cached steps (rope at the
# cached position, K/V per group), within the same bound.
"$conv" --dump-logits ours_kv.bin --kv-cache --load a --tokens $tokens > dump_kv.log 2>&1 || { cat dump_kv.log; fail "dump-logits --kv-cache failed"; }
$py "$src/tests/hf/llama_reference.py" hf1 ours_kv.bin $tokens || fail "KV-cached logits differ from the PyTorch reference"
# The reference must notice a wrong mapping: gate/up swapped, or k rows by half a head.
plant() {  # FOLDER PYTHON-EXPRESSION on the tensor dict t
    rm -rf "$1" && cp -r hf1 "$1"
    $py - "$1/model.safetensors" "$2" <<'PY'
import json, struct, sys, numpy as np
path, expr = sys.argv[1], sys.argv[2]
blob = bytearray(open(path, "rb").read())
(n,) = struct.unpack("<Q", blob[:8]); h = json.loads(blob[8:8 + n])
def view(name):
    b, e = h[name]["data_offsets"]
    return np.frombuffer(blob, "<f4", (e - b) // 4, 8 + n + b).reshape(h[name]["shape"]).copy()
def put(name, a):
    b, e = h[name]["data_offsets"]; blob[8 + n + b:8 + n + e] = a.astype("<f4").tobytes()
exec(expr)
open(path, "wb").write(blob)
PY
}
plant swapped 'g = view("model.layers.1.mlp.gate_proj.weight"); put("model.layers.1.mlp.gate_proj.weight", view("model.layers.1.mlp.up_proj.weight")); put("model.layers.1.mlp.up_proj.weight", g)'
$py "$src/tests/hf/llama_reference.py" swapped ours.bin $tokens > swapped.log 2>&1 && fail "the reference accepted gate/up swapped"
plant rolled 'k = view("model.layers.0.self_attn.k_proj.weight").reshape(2, 16, 64); put("model.layers.0.self_attn.k_proj.weight", np.roll(k, 8, axis=1).reshape(32, 64))'
$py "$src/tests/hf/llama_reference.py" rolled ours.bin $tokens > rolled.log 2>&1 && fail "the reference accepted k rows rotated by half a head"

# 2. import, the round trip, continued training
round_trip a hf1 "${args[@]}"

# 3. interleaved rope, tied embeddings
"$mpiexec" -n 1 "$bin" --config llama-tied.ini "${base[@]}" --rotary-interleaved --save c \
    > train_c.log 2>&1 || { cat train_c.log; fail "interleaved training failed"; }
"$conv" --to hf --load c --output hf3 > export3.log 2>&1 || { cat export3.log; fail "interleaved export failed"; }
grep -q "q/k rows permuted" export3.log || { cat export3.log; fail "interleaved export did not say it permuted"; }
grep -q '"tie_word_embeddings": true' hf3/config.json || fail "tied model not tie_word_embeddings true"
"$conv" --dump-logits ours3.bin --load c --tokens $tokens > dump3.log 2>&1 || { cat dump3.log; fail "dump-logits c failed"; }
$py "$src/tests/hf/llama_reference.py" hf3 ours3.bin $tokens || fail "interleaved logits differ from the reference"
"$conv" --dump-logits ours3_kv.bin --kv-cache --load c --tokens $tokens > dump3_kv.log 2>&1 || { cat dump3_kv.log; fail "dump-logits --kv-cache c failed"; }
$py "$src/tests/hf/llama_reference.py" hf3 ours3_kv.bin $tokens || fail "interleaved KV-cached logits differ from the reference"
"$conv" --to megatron --load-hf hf3 --save d > import3.log 2>&1 || { cat import3.log; fail "import of hf3 failed"; }
"$conv" --to hf --load d --output hf4 > export4.log 2>&1 || { cat export4.log; fail "re-export of d failed"; }
cmp hf3/model.safetensors hf4/model.safetensors || fail "interleaved: import -> export is not byte-identical"

# 4. refused
"$mpiexec" -n 1 "$bin" "${args[@]}" --rotary-percent 0.5 --train-iters 2 --save e > train_e.log 2>&1 \
    || { cat train_e.log; fail "partial-rotary training failed"; }
"$conv" --to hf --load e --output hf5 > partial.log 2>&1
# (one line: the load builds no trainer, so no learning-rate schedule warning precedes it)
[ $? -eq 2 ] && [ "$(wc -l < partial.log)" -eq 1 ] && grep -q -- "error: .*--rotary-percent is below 1" partial.log \
    || { cat partial.log; fail "partial rotary was not refused in one error line"; }
[ -e hf5 ] && fail "refused export left hf5"
mkdir -p scaled && cp hf1/model.safetensors scaled/ && sed 's/"rope_scaling": null/"rope_scaling": {"type": "linear", "factor": 2.0}/' hf1/config.json > scaled/config.json
expect_refused scaled scaled "rope_scaling .* cannot be expressed" 2
mkdir -p biased && cp hf1/model.safetensors biased/ && sed 's/"attention_bias": false/"attention_bias": true/' hf1/config.json > biased/config.json
expect_refused biased biased "attention_bias is true" 2
mkdir -p nohead && cp hf3/model.safetensors nohead/
sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' hf3/config.json > nohead/config.json
expect_refused nohead nohead "no tensor named lm_head.weight" 1
echo "PASS"
