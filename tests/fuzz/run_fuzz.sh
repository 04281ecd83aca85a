#!/usr/bin/env bash
# A bounded libFuzzer run: run_fuzz.sh BINARY SECONDS WORKDIR CORPUS_DIR...
# New inputs go to WORKDIR/corpus (the committed corpus stays read-only); a crash leaves
# WORKDIR/crash-* and libFuzzer prints the input. To keep one as a regression, copy it to
# tests/fuzz/regressions/<name>/ (then every build replays it).
set -euo pipefail
bin=$1 seconds=$2 work=$3
shift 3
mkdir -p "$work/corpus"
# A dictionary of the format's tokens, where the target has one (dict/<target>.dict).
dict=$(dirname "$0")/dict/$(basename "$bin" | sed 's/^fuzz_//').dict
extra=()
[ -f "$dict" ] && extra=(-dict="$dict")
exec "$bin" "${extra[@]}" -max_total_time="$seconds" -timeout=20 -rss_limit_mb=2560 -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" "$@"
