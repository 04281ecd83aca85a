#!/bin/bash
# convert_checkpoint end to end (lib/hf):
#  1. A gpt-tiny run on 2 ranks with TP 2 (GPT-2 vocabulary) saves; --to hf exports it from
#     one process (the resharding loader; also a DP 2 distributed-optimizer bf16 run, whose
#     export must be its fp32 main parameters) and an independent PyTorch GPT-2 written from Hugging
#     Face's conventions (gpt2_reference.py, reading the safetensors itself) gives our
#     model's logits (--dump-logits) within the fp32 error bound derived there.
#  2. --to megatron imports the export: every parameter dataset bit-identical to the original
#     checkpoint's (compare_checkpoints.py), Adam moments zero, iteration 0; exporting the
#     import gives a byte-identical model.safetensors; and gpt_pretrain --load it --finetune
#     trains.
#  3. Bad input: a missing, truncated or lying safetensors file, a config.json the weights
#     disagree with (exit 1), a config.json of another architecture or an option GPT-2 has and
#     we do not, an existing output folder (exit 2, usage): one line naming the fault, and no
#     output folder left behind.
#   hf_convert_test.sh GPT_PRETRAIN CONVERT MPIEXEC SCRATCH SOURCE_DIR
set -uo pipefail
bin=$1 conv=$2 mpiexec=$3 tmp=$4 src=$5
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
source "$src/tests/hf/hf_test_lib.sh"
tiny_job_setup "$tmp" "$src"
py=/usr/bin/python3
args=("${TINY_ARGS[@]}" --lr 3e-3 --lr-warmup-iters 1 --train-iters 3 --ffn-hidden-size 96 --init-method-std 0.2)
# "The quick brown fox jumps over the lazy dog." in GPT-2 BPE, and a few more ids.
tokens=464,2068,7586,21831,18045,625,262,16931,3290,13,50256,0,1000,40000

# 1. export and the reference forward
"$mpiexec" -n 2 "$bin" "${args[@]}" --tensor-model-parallel-size 2 --save a > train.log 2>&1 \
    || { cat train.log; fail "training failed"; }
"$conv" --to hf --load a --output hf1 > export.log 2>&1 || { cat export.log; fail "export failed"; }
for f in config.json generation_config.json model.safetensors vocab.json merges.txt tokenizer_config.json; do
    [ -s hf1/$f ] || fail "export lacks $f"
done
cmp -s hf1/vocab.json data/gpt2/gpt2-vocab.json || fail "vocab.json is not the run's vocab file"
grep -q '"n_inner": 96' hf1/config.json || fail "n_inner is not the run's ffn-hidden-size"
grep -q '"activation_function": "gelu_new"' hf1/config.json || fail "the default GELU is not gelu_new"
"$conv" --dump-logits ours.bin --load a --tokens $tokens > dump.log 2>&1 || { cat dump.log; fail "dump-logits failed"; }
$py "$src/tests/hf/gpt2_reference.py" hf1 ours.bin $tokens || fail "logits differ from the PyTorch reference"

# 1b. another layout: DP 2 with the distributed optimizer (sharded state) in bf16; the export
#     holds the fp32 main parameters, not their bf16 rounding.
"$mpiexec" -n 2 "$bin" "${args[@]}" --use-distributed-optimizer --bf16 --save c > train_c.log 2>&1 \
    || { cat train_c.log; fail "bf16 training failed"; }
"$conv" --to hf --load c --output hf3 > export3.log 2>&1 || { cat export3.log; fail "bf16 export failed"; }
$py - c hf3 <<'PY' || fail "the bf16 run's export is not its fp32 main parameters"
import json, struct, sys, h5py, numpy as np
it = int(open(sys.argv[1] + "/latest_checkpointed_iteration.txt").read())
f = h5py.File("%s/iter_%07d/model_optim.h5" % (sys.argv[1], it), "r")
blob = open(sys.argv[2] + "/model.safetensors", "rb").read()
(n,) = struct.unpack("<Q", blob[:8]); h = json.loads(blob[8:8 + n])
def hf(name):
    b, e = h[name]["data_offsets"]
    return np.frombuffer(blob[8 + n + b:8 + n + e], "<f4").reshape(h[name]["shape"])
main = f["optimizer/main_param/language_model/embedding/word_embeddings/weight"][...][:50257]
# The stored model weights are the bf16 rounding (kept in fp32 by HDF5): they must differ,
# or this check could not tell the two apart.
assert f["language_model/embedding/word_embeddings/weight"][...][:50257].tobytes() != main.tobytes()
assert hf("transformer.wte.weight").tobytes() == main.tobytes()
fc = f["optimizer/main_param/language_model/encoder/layers.1/mlp/dense_4h_to_h/weight"][...]
assert hf("transformer.h.1.mlp.c_proj.weight").tobytes() == np.ascontiguousarray(fc.T).tobytes()
PY

# 2. import, the round trip, continued training
round_trip a hf1 "${args[@]}" --ffn-hidden-size 96

# 3. bad input: one line, exit 1, nothing written
mkhf() { rm -rf "$1" && mkdir "$1" && cp hf1/config.json "$1"/; }
mkhf missing
expect_refused missing missing "cannot open missing/model.safetensors"
mkhf truncated; head -c 100000 hf1/model.safetensors > truncated/model.safetensors
expect_refused truncated truncated "past the end of the file"
mkhf shortheader; head -c 5 hf1/model.safetensors > shortheader/model.safetensors
expect_refused shortheader shortheader "shorter than the 8-byte header length"
mkhf hugeheader; { printf '\xff\xff\xff\xff\x00\x00\x00\x00'; tail -c +9 hf1/model.safetensors; } > hugeheader/model.safetensors
expect_refused hugeheader hugeheader "header length 4294967295 runs past the end"
# An offset past the end: the header rewritten so the last tensor ends beyond the data.
mkhf offset
$py - hf1/model.safetensors offset/model.safetensors <<'PY' || fail "cannot make the offset case"
import json, struct, sys
blob = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", blob[:8]); h = json.loads(blob[8:8 + n])
last = max((k for k in h if k != "__metadata__"), key=lambda k: h[k]["data_offsets"][1])
h[last]["data_offsets"] = [h[last]["data_offsets"][0] + 64, h[last]["data_offsets"][1] + 64]
t = json.dumps(h).encode(); t += b" " * ((8 - len(t) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + blob[8 + n:])
PY
expect_refused offset offset "past the end of the file's"
mkdir -p mistral && cp hf1/model.safetensors mistral/ && sed 's/"model_type": "gpt2"/"model_type": "mistral"/' hf1/config.json > mistral/config.json
expect_refused mistral mistral "model_type is 'mistral', not 'gpt2' or 'llama'" 2
mkdir -p shape && cp hf1/model.safetensors shape/ && sed 's/"n_inner": 96/"n_inner": 128/' hf1/config.json > shape/config.json
expect_refused shape shape "has shape \[64, 96\] but config.json says \[64, 128\]"
mkdir -p untied && cp hf1/model.safetensors untied/ && sed 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' hf1/config.json > untied/config.json
expect_refused untied untied "untied output embeddings cannot be expressed" 2
# A squared-ReLU run (Megatron's --squared-relu), a zero-centred-norm run
# (--apply-layernorm-1p) and a query-key-norm run (--qk-layernorm) train, and their exports
# are refused in one line each: neither GPT-2 nor Llama has them.
# train_then_refused FLAG DIR PATTERN: trains 2 iterations with FLAG into DIR; its export must
# exit 2 with one error line matching PATTERN and leave no folder.
train_then_refused() {
  "$mpiexec" -n 1 "$bin" "${args[@]}" "$1" --train-iters 2 --save "$2" > "train_$2.log" 2>&1 \
      || { cat "train_$2.log"; fail "$1 training failed"; }
  "$conv" --to hf --load "$2" --output "hf_$2" > "export_$2.log" 2>&1
  [ $? -eq 2 ] && [ "$(wc -l < "export_$2.log")" -eq 1 ] && grep -q -- "error: .*$3" "export_$2.log" \
      || { cat "export_$2.log"; fail "the $1 export was not refused in one error line"; }
  [ -e "hf_$2" ] && fail "refused export left hf_$2"
  return 0
}
train_then_refused --squared-relu e "the MLP is squared ReLU (--squared-relu)"
train_then_refused --apply-layernorm-1p f "(--apply-layernorm-1p)"
train_then_refused --qk-layernorm g "queries and keys are normalised (--qk-layernorm)"
"$conv" --to hf --load a --output hf1 > exists.log 2>&1
[ $? -eq 2 ] && grep -q "hf1 already exists: refusing to overwrite it" exists.log || { cat exists.log; fail "an existing output folder was not refused"; }
cmp -s hf1/model.safetensors hf2/model.safetensors || fail "the refused export touched hf1"
ls -d *.tmp.* > /dev/null 2>&1 && fail "staging folders left behind: $(ls -d *.tmp.*)"
echo "PASS"
