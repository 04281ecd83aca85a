#!/bin/bash
# scripts/plot_metrics: a PNG from two metrics files (a fixture in our --metrics-file format),
# and one clear failure for a file without iteration records.
#   plot_metrics_test.sh SOURCE_DIR SCRATCH
set -uo pipefail
src=$1 tmp=$2
fail() { echo "FAIL: $*"; exit 1; }
rm -rf "$tmp" && mkdir -p "$tmp" || fail "cannot use $tmp"
fixture=$src/tests/app/metrics_fixture.jsonl
"$src/scripts/plot_metrics" -o "$tmp/plot.png" "$fixture" "$fixture" > "$tmp/out.log" 2>&1 \
  || { cat "$tmp/out.log"; fail "plot_metrics failed"; }
[ "$(head -c 8 "$tmp/plot.png" | od -An -tx1 | tr -d ' ')" = 89504e470d0a1a0a ] || fail "plot.png is not a PNG"
(($(stat -c %s "$tmp/plot.png") > 10000)) || fail "plot.png is implausibly small ($(stat -c %s "$tmp/plot.png") bytes)"
grep '"split"' "$fixture" > "$tmp/eval_only.jsonl"
if "$src/scripts/plot_metrics" -o "$tmp/bad.png" "$tmp/eval_only.jsonl" > "$tmp/bad.log" 2>&1; then
  fail "no error for a file without iteration records"
fi
grep -q "has no iteration records" "$tmp/bad.log" || { cat "$tmp/bad.log"; fail "unclear error"; }
echo "PASS: plot_metrics wrote a $(stat -c %s "$tmp/plot.png")-byte PNG; rejects a file without iterations"
