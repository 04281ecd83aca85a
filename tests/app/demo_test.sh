#!/bin/bash
# The README's first command, end to end: scripts/demo.sh as a new user runs it (setup,
# corpus, preprocessing, two training phases with a resharded resume), on the binaries of
# this build tree (GPT_BUILD_DIR; setup.sh's build step finds them up to date). Checks what
# the README promises beyond the exit code: both metrics files, the lm loss of iteration 60
# below iteration 1's, phase 2 resuming at iteration 31, and the final checkpoint (the
# tracker naming iteration 60 and its folder).
#   demo_test.sh SOURCE_DIR BUILD_DIR SCRATCH
set -uo pipefail
src=$1 build=$2 tmp=$3
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$tmp" && mkdir -p "$tmp"
GPT_BUILD_DIR=$build DEMO_DIR=$tmp "$src/scripts/demo.sh" > "$tmp/demo.log" 2>&1
rc=$?
cat "$tmp/demo.log"
[ "$rc" = 0 ] || fail "scripts/demo.sh exited $rc"
for f in metrics-1.jsonl metrics-2.jsonl; do [ -s "$tmp/$f" ] || fail "no $tmp/$f"; done
# The training records (not the validation ones, which carry "split").
loss_of() { awk -v it="$2" '!/"split"/ && $0 ~ "\"iteration\": " it "[,}]"' "$1" \
              | sed 's/.*"lm_loss": \([^,}]*\).*/\1/'; }
first=$(loss_of "$tmp/metrics-1.jsonl" 1) last=$(loss_of "$tmp/metrics-2.jsonl" 60)
resumed=$(loss_of "$tmp/metrics-2.jsonl" 31) early=$(loss_of "$tmp/metrics-1.jsonl" 31)
[ -n "$first" ] && [ -n "$last" ] || fail "no lm loss for iteration 1 or 60 in the metrics files"
[ -n "$resumed" ] || fail "phase 2 logged no iteration 31"
[ -z "$early" ] || fail "phase 1 went past its exit interval (iteration 31 in metrics-1.jsonl)"
awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a) }' || fail "the lm loss did not fall: $first -> $last"
ck=$tmp/checkpoints
[ "$(cat "$ck/latest_checkpointed_iteration.txt" 2>/dev/null)" = 60 ] || fail "the checkpoint tracker does not name iteration 60"
[ -d "$ck/iter_0000060" ] || fail "no $ck/iter_0000060"
echo "demo: lm loss $first -> $last, resumed at 31, checkpoint iter_0000060"
