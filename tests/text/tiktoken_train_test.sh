#!/usr/bin/env bash
# TikTokenizer end to end: preprocess_data with cl100k_base's ranks writes 32-bit tokens
# (Megatron's dtype code 4; ids above 65535 occur), Megatron's .idx layout read back by numpy
# holds npm tiktoken's ids + --tiktoken-num-special-tokens, gpt_pretrain sizes its vocabulary
# from the rank file and trains on it, and a checkpoint saved under TikTokenizer refuses a
# GPT-2 run.   tiktoken_train_test.sh BUILD_DIR MPIEXEC SOURCE_DIR SCRATCH
set -euo pipefail
build=$1; mpiexec=$2; src=$3; work=$4
rm -rf "$work"; mkdir -p "$work"; cd "$src"
ranks=$work/cl100k_base.tiktoken
node tests/peers/tiktoken_ranks.js cl100k_base "$ranks"

# Documents: paragraphs of the GPL (Debian's base-files), plus text whose cl100k ranks are
# above 64535 (ids above 65535 once the 1000 special tokens come first).
node -e '
const fs = require("fs");
const paras = fs.readFileSync("/usr/share/common-licenses/GPL-3", "utf8").split(/\n\s*\n/).filter((p) => p.trim());
const extra = ["Unicode: Ελληνικά, Кириллица, 中文字符, 日本語 — emoji 👍🏽 and 🇫🇷.", " accomplishment reimbursement"];
process.stdout.write(paras.concat(extra).map((p) => JSON.stringify({ text: p })).join("\n") + "\n");
' > "$work/corpus.jsonl"

"$build/app/preprocess_data" --input "$work/corpus.jsonl" --output-prefix "$work/gpl" \
  --tokenizer-type TikTokenizer --tokenizer-model "$ranks" --tiktoken-pattern cl100k_base --append-eod --workers 2 \
  > "$work/preprocess.log"
grep -q "Vocab size: 101256" "$work/preprocess.log" || { echo "FAIL: vocab size"; cat "$work/preprocess.log"; exit 1; }

# npm tiktoken's ids of the same documents.
node -e '
const fs = require("fs");
const lines = fs.readFileSync(process.argv[1], "utf8").split("\n").filter((l) => l);
process.stdout.write(lines.map((l) => JSON.stringify(JSON.parse(l).text)).join("\n") + "\n");
' "$work/corpus.jsonl" > "$work/texts.jsonl"
node tests/peers/tiktoken_encode.js "$work/texts.jsonl" cl100k_base > "$work/ids.jsonl"

# Megatron's .idx layout, read independently of our reader.
/usr/bin/python3 - "$work/gpl_text_document" "$work/ids.jsonl" <<'PY'
import json, struct, sys
import numpy as np
prefix, ids_path = sys.argv[1], sys.argv[2]
with open(prefix + ".idx", "rb") as f:
    assert f.read(9) == b"MMIDIDX\x00\x00", "magic"
    version, = struct.unpack("<Q", f.read(8)); assert version == 1
    code, = struct.unpack("<B", f.read(1))
    assert code == 4, f"dtype code {code}, want 4 (int32)"
    n_seq, = struct.unpack("<Q", f.read(8)); n_doc, = struct.unpack("<Q", f.read(8))
    lengths = np.frombuffer(f.read(4 * n_seq), dtype="<i4")
    offsets = np.frombuffer(f.read(8 * n_seq), dtype="<i8")
    docs = np.frombuffer(f.read(8 * n_doc), dtype="<i8")
tokens = np.fromfile(prefix + ".bin", dtype="<i4")
want = [json.loads(l) for l in open(ids_path) if l.strip()]
assert n_seq == len(want) and n_doc == len(want) + 1, (n_seq, n_doc, len(want))
for i, w in enumerate(want):
    got = tokens[offsets[i] // 4: offsets[i] // 4 + lengths[i]].tolist()
    assert got == [t + 1000 for t in w] + [2], f"document {i}: ids differ from npm tiktoken's + 1000, then </s> = 2"
assert tokens.max() > 65535, "no id above 65535: the test would not catch a 16-bit store"
print(f"ok   .idx dtype code 4, {n_seq} documents equal npm tiktoken + 1000, max id {tokens.max()}")
PY

common=(--config configs/gpt-tiny.ini --num-layers 2 --hidden-size 64 --num-attention-heads 2 --seq-length 64
  --max-position-embeddings 64 --micro-batch-size 2 --global-batch-size 4 --train-iters 3 --lr-warmup-iters 1
  --log-interval 1 --eval-iters 1 --eval-interval 3 --data-path "$work/gpl_text_document" --split "90,10,0"
  --data-cache-path "$work/cache" --save "$work/ckpt")
out=$(env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$build/app/gpt_pretrain" "${common[@]}" --tokenizer-type TikTokenizer \
  --tokenizer-model "$ranks" --tiktoken-pattern cl100k_base 2>&1) || { echo "FAIL: training"; echo "$out" | tail -30; exit 1; }
grep -qE "training done: 3 iterations" <<<"$out" || { echo "FAIL: no 'training done'"; echo "$out" | tail -30; exit 1; }
grep -qE "padded_vocab_size \.+ 101376|vocab_size \.+ 101256" <<<"$out" || { echo "FAIL: vocab size not 101256 (padded 101376)"; echo "$out" | grep -i vocab; exit 1; }
echo "ok   gpt_pretrain trained 3 iterations with TikTokenizer (vocab 101256 -> 101376)"

# The checkpoint records the tokenizer: a GPT-2 run must refuse it.
set +e
# --vocab-size gives the GPT-2 run the same padded vocabulary, so only the tokenizer differs.
out=$(env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$build/app/gpt_pretrain" "${common[@]}" --load "$work/ckpt" --train-iters 4 \
  --vocab-size 101256 2>&1)
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -qE "tokenizer-type: TikTokenizer in the checkpoint, GPT2BPETokenizer in this run" <<<"$out"; then
  echo "FAIL: a GPT-2 run loaded a TikTokenizer checkpoint (rc=$rc)"; { grep -E "error|Error|ERROR" <<<"$out" | head -20 || true; echo "$out" | tail -10; }; exit 1
fi
echo "ok   GPT2BPETokenizer run refuses the TikTokenizer checkpoint"
# Another split pattern maps the same text to other ids: refused too.
set +e
out=$(env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$build/app/gpt_pretrain" "${common[@]}" --load "$work/ckpt" --train-iters 4 \
  --tokenizer-type TikTokenizer --tokenizer-model "$ranks" --tiktoken-pattern o200k_base 2>&1)
rc=$?
set -e
if [ "$rc" -ne 2 ] || ! grep -qE "tiktoken-pattern: cl100k_base in the checkpoint, o200k_base in this run" <<<"$out"; then
  echo "FAIL: a run with another --tiktoken-pattern loaded the checkpoint (rc=$rc)"; { grep -E "error|Error|ERROR" <<<"$out" | head -20 || true; echo "$out" | tail -10; }; exit 1
fi
echo "ok   another --tiktoken-pattern refuses the checkpoint"
# Usage errors are one line on stderr and exit code 2, and write no dataset.
one_line() {  # one_line NAME PATTERN -- command...
  local name=$1 pattern=$2; shift 3
  local out rc
  set +e; out=$("$@" 2>&1 >/dev/null); rc=$?; set -e
  if [ "$rc" -ne 2 ] || [ "$(grep -c . <<<"$out")" -ne 1 ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc, want 2 and one line matching '$pattern':"; echo "$out"; exit 1
  fi
  echo "ok   $name: $out"
}
one_line no-pattern "--tiktoken-pattern is required" -- "$build/app/preprocess_data" --input "$work/corpus.jsonl" \
  --output-prefix "$work/x" --tokenizer-type TikTokenizer --tokenizer-model "$ranks"
one_line too-few-special "--tiktoken-num-special-tokens 2 is fewer than the 3 special tokens" -- "$build/app/preprocess_data" \
  --input "$work/corpus.jsonl" --output-prefix "$work/x" --tokenizer-type TikTokenizer --tokenizer-model "$ranks" \
  --tiktoken-pattern v2 --tiktoken-num-special-tokens 2
one_line train-no-model "needs --tokenizer-model" -- env OMP_NUM_THREADS=1 "$mpiexec" -n 1 "$build/app/gpt_pretrain" \
  "${common[@]}" --tokenizer-type TikTokenizer --tiktoken-pattern cl100k_base
[ ! -e "$work/x_text_document.idx" ] || { echo "FAIL: a refused run wrote a dataset"; exit 1; }
echo PASS
