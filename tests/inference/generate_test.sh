#!/usr/bin/env bash
# gpt_generate end to end: a tiny model trained (pipeline-parallel, 2 ranks) on a corpus that
# repeats one sentence must continue it greedily; the same checkpoint loads into one rank
# and into TP 2 with identical tokens; jsonl parses; seeded sampling repeats; a flag that
# contradicts the checkpoint and a bad --load are one clear line each.
#   generate_test.sh APP_DIR MPIEXEC SOURCE_DIR SCRATCH
set -u
app=$1 mpiexec=$2 src=$3 scratch=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$scratch" "$src"
gen() { "$app/gpt_generate" --device cpu "$@"; }

sentence="one two three four five six seven eight nine ten."
line="$sentence"
for _ in $(seq 19); do line="$line $sentence"; done
for _ in $(seq 20); do printf '{"text": "%s"}\n' "$line"; done > rep.json
"$app/preprocess_data" --input rep.json --output-prefix rep --vocab-file data/gpt2/gpt2-vocab.json \
  --merge-file data/gpt2/gpt2-merges.txt --tokenizer-type GPT2BPETokenizer --append-eod --workers 1 \
  > preprocess.log 2>&1 || { cat preprocess.log; fail "preprocess_data"; }
"$mpiexec" -n 2 "$app/gpt_pretrain" --config configs/gpt-tiny.ini --num-layers 2 --hidden-size 32 \
  --num-attention-heads 2 --seq-length 32 --max-position-embeddings 64 --micro-batch-size 2 \
  --global-batch-size 4 --pipeline-model-parallel-size 2 --train-iters 120 --lr 5e-3 --min-lr 5e-4 \
  --lr-warmup-iters 10 --log-interval 40 --eval-iters 0 --device cpu --distributed-backend mpi \
  --data-path rep_text_document --split 100,0,0 --save ck > train.log 2>&1 || { tail -20 train.log; fail "training"; }

# 1) It learned the sentence: greedy continues it (after 120 iterations the loss is ~0.1).
out=$(gen --load ck --prompt "one two three" --max-new-tokens 12 --greedy 2> gen1.err) || { cat gen1.err; fail "greedy run"; }
want="one two three four five six seven eight nine ten. one two three"
[[ "$out" == "$want"* ]] || fail "greedy continuation: got '$out', want '$want...'"
echo "ok: greedy reproduces the corpus"

# 2) Prompts of different lengths in one batch, jsonl: it parses, fields agree, and the PP2
#    checkpoint loads into TP 2 with the very tokens one rank chose.
printf 'six seven\none two three four five\n\n' > prompts.txt
gen --load ck --prompt-file prompts.txt --max-new-tokens 10 --greedy --output-format jsonl > tp1.jsonl 2> tp1.err \
  || { cat tp1.err; fail "jsonl run"; }
/usr/bin/python3 - tp1.jsonl <<'PY' || fail "jsonl output"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 3, rows
for r in rows:
    assert len(r["tokens"]) == len(r["log_probs"]) > 0, r
    assert all(lp <= 0 for lp in r["log_probs"]), r
    assert r["finish_reason"] in ("eod", "length"), r
    assert r["finish_reason"] == "eod" or len(r["tokens"]) == 10, r
assert rows[0]["prompt"] == "six seven" and rows[0]["completion"].startswith(" eight nine ten."), rows[0]
assert rows[1]["completion"].startswith(" six seven"), rows[1]
PY
"$mpiexec" -n 2 "$app/gpt_generate" --device cpu --load ck --prompt-file prompts.txt --max-new-tokens 10 --greedy \
  --output-format jsonl --tensor-model-parallel-size 2 > tp2.jsonl 2> tp2.err || { cat tp2.err; fail "TP 2 run"; }
tokens() { grep -o '"tokens":\[[0-9,]*\]' "$1"; }
[[ -n "$(tokens tp1.jsonl)" && "$(tokens tp1.jsonl)" == "$(tokens tp2.jsonl)" ]] || fail "TP 2 tokens differ from one rank's"
echo "ok: jsonl parses; TP 2 = TP 1"

# 3) Seeded sampling: the same seed gives the same text.
s1=$(gen --load ck --prompt "one" --max-new-tokens 16 --temperature 1.5 --top-k 40 --top-p 0.95 --seed 5 2>/dev/null)
s2=$(gen --load ck --prompt "one" --max-new-tokens 16 --temperature 1.5 --top-k 40 --top-p 0.95 --seed 5 2>/dev/null)
[[ -n "$s1" && "$s1" == "$s2" ]] || fail "seeded sampling not reproducible: '$s1' vs '$s2'"
echo "ok: seeded sampling reproducible"

# 4) Clear errors, exit code 2.
expect_error() {  # expect_error PATTERN ARGS...: exit 2 and PATTERN in the one error line
  local pattern=$1; shift
  "$@" > err.out 2> err.log && fail "no error for: $*"
  [[ $? -eq 2 ]] || { cat err.log; fail "exit code for: $*"; }
  grep -q -- "$pattern" err.log || { cat err.log; fail "message for: $* (want '$pattern')"; }
}
expect_error "--num-layers: 2 in the checkpoint .*, 4 given" gen --load ck --prompt x --num-layers 4
expect_error "--load nowhere: no such folder" gen --load nowhere --prompt x
mkdir -p empty
expect_error "--load empty holds no checkpoint" gen --load empty --prompt x
expect_error "tensor parallelism only" gen --load ck --prompt x --pipeline-model-parallel-size 2
echo "ok: errors"
# 5) Samples during training: the losses are bit-identical with and without them (the
#    sample reads a copy of the parameters and no training RNG); TP 2 samples too; PP 2 is
#    refused with the reason.
tiny=("${TINY_ARGS[@]}" --lr-warmup-iters 0 --train-iters 6 --hidden-dropout 0.1 --attention-dropout 0.1)
"$mpiexec" -n 1 "$app/gpt_pretrain" "${tiny[@]}" > plain.log 2>&1 || { tail plain.log; fail "training without samples"; }
"$mpiexec" -n 1 "$app/gpt_pretrain" "${tiny[@]}" --sample-interval 2 --sample-prompt "The" --sample-tokens 8 \
  > sampled.log 2>&1 || { tail sampled.log; fail "training with samples"; }
[[ $(grep -c "sample at iteration" sampled.log) -eq 3 ]] || { cat sampled.log; fail "3 samples expected (iterations 2, 4, 6)"; }
[[ -n "$(losses plain.log)" && "$(losses plain.log)" == "$(losses sampled.log)" ]] \
  || fail "losses differ with --sample-interval: $(losses plain.log) vs $(losses sampled.log)"
"$mpiexec" -n 2 "$app/gpt_pretrain" "${tiny[@]}" --tensor-model-parallel-size 2 --sample-interval 3 \
  --sample-tokens 4 > tp2_sampled.log 2>&1 || { tail tp2_sampled.log; fail "TP 2 training with samples"; }
[[ $(grep -c "sample at iteration" tp2_sampled.log) -eq 2 ]] || { cat tp2_sampled.log; fail "TP 2: 2 samples expected"; }
"$mpiexec" -n 2 "$app/gpt_pretrain" "${tiny[@]}" --pipeline-model-parallel-size 2 --sample-interval 3 > pp2.log 2>&1 \
  && fail "PP 2 with --sample-interval was accepted"
grep -q -- "--sample-interval needs --pipeline-model-parallel-size 1" pp2.log || { cat pp2.log; fail "PP 2 refusal message"; }
echo "ok: samples during training leave the losses bit-identical"
echo PASS
