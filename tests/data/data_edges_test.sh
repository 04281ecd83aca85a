#!/bin/bash
# The edges of the data path on real preprocessed text (KJV chapters, GPT-2 BPE), 1 rank,
# gpt-tiny shrunk. Each case either trains as Megatron does (with the warning it deserves) or
# stops before the first iteration with one line naming the split and its numbers:
#   splits asked for no samples; fewer tokens than one sequence; exactly one sequence; a
#   corpus of one document; a document many sequences long; --split 100,0,0 with evaluation;
#   a blend part far smaller than its weight asks; --eval-iters beyond the validation split;
#   an empty dataset; --split abc at --dry-run; a prefix with a space; --mock-data against a
#   config file's data path; a run whose every iteration was skipped.
#   data_edges_test.sh BUILD_DIR SOURCE_DIR SCRATCH
set -uo pipefail
build=$1 src=$2 tmp=$3
bin=$build/app/gpt_pretrain pre=$build/app/preprocess_data
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"

# corpus NAME: NAME.json (one document per line) -> NAME_text_document.{bin,idx}
corpus() {
  "$pre" --input "$1.json" --output-prefix "$1" --vocab-file data/gpt2/gpt2-vocab.json \
      --merge-file data/gpt2/gpt2-merges.txt --append-eod --log-interval 0 > "$1.log" 2>&1 \
    || { cat "$1.log"; fail "preprocessing $1"; }
}
json() { sed -E 's/^[^ ]+ //; s/\\/\\\\/g; s/"/\\"/g; s/^/{"text": "/; s/$/"}/'; }
bible -f "gen1:1-ex40:38" | json > kjv.json             # 2746 documents (verses)
bible -f "gen1:1-gen1:3" | json > three.json            # 3 documents
bible -f "gen1:1" | json > one.json                     # 1 document
bible -f "gen1:1-gen10:32" | sed -E 's/^[^ ]+ //' | tr '\n' ' ' | json > long.json  # 1 document, ~8000 tokens
: > empty.json
for c in kjv three one long empty; do corpus $c; done

ARGS=(--config configs/gpt-tiny.ini --num-layers 1 --hidden-size 64 --num-attention-heads 2 --seq-length 64
      --max-position-embeddings 64 --micro-batch-size 1 --global-batch-size 2 --train-iters 3 --log-interval 1
      --lr-warmup-iters 0 --device cpu --data-cache-path cache)
# run NAME ARGS...: one training run; its exit code in $rc, its output in NAME.log
run() { local name=$1; shift; "$bin" "${ARGS[@]}" "$@" > "$name.log" 2>&1; rc=$?; }
trained() {  # trained NAME: exit 0 and all 3 iterations
  [ "$rc" = 0 ] && grep -qE "iteration +3/ +3 " "$1.log" || { cat "$1.log"; fail "$1: did not train (rc $rc)"; }
}
stopped() {  # stopped NAME TEXT: exit != 0 before any iteration, one error line containing TEXT
  [ "$rc" != 0 ] || { cat "$1.log"; fail "$1: exit 0, expected a stop"; }
  ! grep -qE "iteration +1/" "$1.log" || { cat "$1.log"; fail "$1: stopped only after training began"; }
  [ "$(grep -c "error: " "$1.log")" = 1 ] && grep -F "error: " "$1.log" | grep -qF -- "$2" \
    || { cat "$1.log"; fail "$1: expected one error line with: $2"; }
}
says() { grep -qF -- "$2" "$1.log" || { cat "$1.log"; fail "$1: no line with: $2"; }; }

# 1. --eval-iters 0: validation and test are asked for nothing, so they are not built - even
#    where the test split is shorter than one sequence (the new user's failure on gpt-1.3b).
run no_eval --data-path kjv_text_document --eval-iters 0 --seq-length 2048 --max-position-embeddings 2048
trained no_eval
ls cache | grep -q -- "-valid-\|-test-" && fail "no_eval: built the index of a split asked for nothing"
rm -rf cache
# 2. A split of fewer tokens than one sequence, and --eval-iters far beyond the validation
#    split (valid: 82 verses of ~2400 tokens): repeated over epochs as in Megatron, said so.
run short --data-path kjv_text_document --eval-iters 20 --eval-interval 2 --seq-length 256 --max-position-embeddings 256
trained short
says short "warning: the valid split of 'kjv_text_document' gives"
says short "warning: the test split of 'kjv_text_document' gives 0 samples per epoch but the test draws 40"
grep -q "validation loss at iteration 2" short.log || fail "short: no validation"
# 3. Exactly one sequence in each split (3 documents, --split 1,1,1).
run one_each --data-path three_text_document --split 1,1,1 --eval-iters 1 --eval-interval 2
trained one_each
# 4. A corpus of one document: the default split leaves validation and test empty. Megatron
#    never ends its epoch loop there; we stop with the split and its numbers.
run one_doc --data-path one_text_document --eval-iters 1
stopped one_doc "the valid split of 'one_text_document' is empty (sequences [1, 1) of 1, 0 tokens) but must give"
run one_doc_train --data-path one_text_document --split 100,0,0 --eval-iters 1
trained one_doc_train
# 5. --split 100,0,0 with evaluation asked: no validation, as in Megatron, and a warning.
says one_doc_train "gives the valid split nothing, so the 2 valid samples asked are not drawn: the run has no validation"
grep -q "validation loss" one_doc_train.log && fail "one_doc_train: validated without a validation split"
# 6. One document many sequences long (~8000 tokens, seq 64).
run long --data-path long_text_document --split 100,0,0 --eval-iters 0
trained long
# 7. A blend part far smaller than its weight asks (3 documents at weight 0.5): it repeats.
run blend --data-path 0.5 kjv_text_document 0.5 three_text_document --split 100,0,0 --eval-iters 0 --train-iters 40 --log-interval 40
[ "$rc" = 0 ] || { cat blend.log; fail "blend: rc $rc"; }
says blend "warning: blend part 'three_text_document' (weight 0.5) is smaller than its share"
# 8. A dataset with no documents is named as empty.
run empty --data-path empty_text_document
stopped empty "dataset 'empty_text_document' (--data-path) is empty: its .idx lists 0 sequences"
run empty_blend --data-path 0.5 kjv_text_document 0.5 empty_text_document
stopped empty_blend "dataset 'empty_text_document' (--data-path) is empty"
# 9. A bad --split fails the dry run.
run bad_split --data-path kjv_text_document --split abc --dry-run
[ "$rc" = 2 ] || { cat bad_split.log; fail "bad_split: rc $rc, expected 2"; }
says bad_split "error: --split 'abc': 'abc' is not a non-negative number"
# 10. A prefix with a space: read as a blend (Megatron's syntax), and the message says so;
#     taken whole when that prefix exists.
mkdir -p "my data" && cp kjv_text_document.bin kjv_text_document.idx "my data/"
run space --data-path "my data/missing" --eval-iters 0
stopped space "(--data-path 'my data/missing' was read as a blend of 2 words"
run space_ok --data-path "my data/kjv_text_document" --eval-iters 0
trained space_ok
# 11. --mock-data on the command line wins over a config file's data path (gpt-1.3b.ini names
#     data/corpus/my-gpt2_text_document, which does not exist here).
"$bin" --config configs/gpt-1.3b.ini --num-layers 1 --hidden-size 64 --num-attention-heads 2 --micro-batch-size 1 \
  --global-batch-size 2 --train-iters 2 --eval-iters 0 --seq-length 64 --max-position-embeddings 64 --device cpu \
  --mock-data > mock.log 2>&1; rc=$?
[ "$rc" = 0 ] || { cat mock.log; fail "mock: rc $rc"; }
says mock "warning: --mock-data on the command line wins over the data paths (as in Megatron)"
# ... while a config file's mock-data = true yields to a command line's --data-path.
run ini_mock --data-path kjv_text_document --eval-iters 0
trained ini_mock
says ini_mock "> train split of 'kjv_text_document'"
# 12. Every iteration skipped: exit 0 as in Megatron, and the last word says so.
run skipped --mock-data --fp16 --loss-scale 1e30 --train-iters 8 --eval-iters 0
[ "$rc" = 0 ] || { cat skipped.log; fail "skipped: rc $rc"; }
says skipped "warning: the model was never updated: all 8 iterations were skipped"
echo "PASS data_edges_test"
