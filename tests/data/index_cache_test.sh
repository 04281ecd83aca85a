#!/bin/bash
# A shared index cache never corrupts (prepare_cache processes stand for the jobs' builders,
# one folder for all, as on a shared file system):
#  1. four builders of the same cache at the same time all succeed, and the cache equals one
#     built alone (byte for byte); no temporary file stays;
#  2. a builder killed (SIGKILL) in the middle of writing leaves no cache file, only its
#     temporary; the next builder removes that and builds the same bytes;
#  3. a truncated and a foreign cache file are rebuilt, with a warning naming the file and why;
#  4. gpt_pretrain on 2 ranks maps the cache prepare_cache built (and builds nothing).
# The request is large (seq 8, ~5M samples: an 80 MB sample index) so a write takes long
# enough to be caught mid-way.
#   index_cache_test.sh BUILD_DIR MPIEXEC SOURCE_DIR SCRATCH
set -uo pipefail
build=$1 mpiexec=$2 src=$3 tmp=$4
fail() { echo "FAIL: $*"; exit 1; }
source "$src/tests/common/tiny_job.sh"
tiny_job_setup "$tmp" "$src"
bible -f "gen1:1-rev22:21" | sed -E 's/^[^ ]+ //; s/\\/\\\\/g; s/"/\\"/g; s/^/{"text": "/; s/$/"}/' > kjv.json
"$build/app/preprocess_data" --input kjv.json --output-prefix kjv --vocab-file data/gpt2/gpt2-vocab.json \
    --merge-file data/gpt2/gpt2-merges.txt --append-eod --workers 2 --log-interval 0 > pre.log 2>&1 \
  || { cat pre.log; fail "preprocessing"; }
RUN=(--config configs/gpt-tiny.ini --data-path kjv_text_document --seq-length 8 --max-position-embeddings 8
     --micro-batch-size 1 --global-batch-size 1000 --train-iters 5000 --eval-iters 0 --split 100,0,0)
prep() { "$build/app/prepare_cache" "${RUN[@]}" --data-cache-path "$@"; }
file_in() { ls "$1"/*-GPTDataset-train-indices.bin 2>/dev/null; }

prep ref > ref.log 2>&1 || { cat ref.log; fail "reference build"; }
grep -q "prepare_cache: 1 index caches ready in .* (1 built, 0 found)" ref.log || { cat ref.log; fail "reference: no summary"; }
ref=$(file_in ref)
[ -n "$ref" ] && [ "$(stat -c %s "$ref")" -gt 50000000 ] || fail "reference cache missing or small: $ref"

# 1. Four concurrent builders of one cache.
pids=()
for i in 1 2 3 4; do prep shared > "c$i.log" 2>&1 & pids+=($!); done
for i in 1 2 3 4; do wait "${pids[$((i - 1))]}" || { cat "c$i.log"; fail "concurrent builder $i failed"; }; done
cmp -s "$ref" "$(file_in shared)" || fail "the concurrently built cache differs from the reference"
ls shared | grep -q "\.tmp\." && { ls -l shared; fail "a temporary file stayed after the concurrent builds"; }
built=$(cat c?.log | grep -c "index cache built")
echo "concurrent builders: $built of 4 built the file, the rest found it"

# 2. A builder killed while it writes (caught by its temporary file; a few tries, since the
#    write may also finish before the poll sees it).
caught=0
for try in 1 2 3 4 5; do
  rm -rf killed
  # exec: $! must be prepare_cache itself. A backgrounded shell function is a subshell that
  # may fork the tool as its child, and SIGKILL to the subshell leaves the tool writing (seen
  # in CI: the "killed" builder finished and renamed its cache).
  ( exec "$build/app/prepare_cache" "${RUN[@]}" --data-cache-path killed ) > killed.log 2>&1 & pid=$!
  while kill -0 "$pid" 2>/dev/null; do
    if ls killed 2>/dev/null | grep -q "\.tmp\."; then kill -9 "$pid"; caught=1; break; fi
    sleep 0.005
  done
  wait "$pid" 2>/dev/null
  [ $caught = 1 ] && break
done
[ $caught = 1 ] || fail "never caught the builder mid-write in 5 tries"
[ -z "$(file_in killed)" ] || fail "a builder killed mid-write left a cache file: $(ls -l killed)"
ls killed | grep -q "\.tmp\." || fail "the killed builder's temporary file is gone (was it killed mid-write?)"
prep killed > after.log 2>&1 || { cat after.log; fail "the builder after the kill failed"; }
grep -q "(1 built, 0 found)" after.log || { cat after.log; fail "the builder after the kill did not build"; }
cmp -s "$ref" "$(file_in killed)" || fail "the cache built after the kill differs from the reference"
ls killed | grep -q "\.tmp\." && fail "the killed builder's temporary file was not removed"

# 3. Truncated and foreign files are rebuilt, and the warning names the file and the reason.
f=$(file_in killed)
truncate -s 1000 "$f"
prep killed > trunc.log 2>&1 || { cat trunc.log; fail "rebuilding a truncated cache failed"; }
grep -qF "warning: index cache file '$f' is truncated or corrupt" trunc.log && grep -q "; rebuilding it" trunc.log \
  || { cat trunc.log; fail "no warning naming the truncated file"; }
cmp -s "$ref" "$f" || fail "the rebuilt truncated cache differs"
"$build/app/prepare_cache" "${RUN[@]}" --seed 7 --data-cache-path other > other.log 2>&1 || { cat other.log; fail "other seed"; }
cp "$(file_in other)" "$f"
prep killed > foreign.log 2>&1 || { cat foreign.log; fail "rebuilding a foreign cache failed"; }
grep -qF "warning: index cache file '$f' is foreign: it was built for other dataset parameters" foreign.log \
  || { cat foreign.log; fail "no warning naming the foreign file"; }
cmp -s "$ref" "$f" || fail "the rebuilt foreign cache differs"

# 4. A 2-rank training job finds what prepare_cache built.
"$mpiexec" -n 2 "$build/app/gpt_pretrain" "${RUN[@]}" --num-layers 1 --hidden-size 64 --num-attention-heads 2 \
    --micro-batch-size 50 --exit-interval 1 --device cpu --distributed-backend mpi \
    --data-cache-path killed > train.log 2>&1 || { cat train.log; fail "training on the prepared cache"; }
grep -q "index cache found" train.log && ! grep -q "index cache built" train.log || { cat train.log; fail "training rebuilt the prepared cache"; }
echo "PASS index_cache_test"
