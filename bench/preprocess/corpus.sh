# Sourced by bench/preprocess/*.sh: the checks and the corpus both benchmarks share.
#   . bench/preprocess/corpus.sh; bench_corpus   # sets PRE, WORK, CORPUS (and removes WORK at exit)
# env: BUILD_DIR (default build), BENCH_MB (default 20), BENCH_WORK (keep the files there).
bench_corpus() {
  BUILD_DIR=${BUILD_DIR:-build}
  PRE="$BUILD_DIR/app/preprocess_data"
  [ -x "$PRE" ] || { echo "bench: $PRE not found; run scripts/setup.sh first" >&2; exit 1; }
  command -v bible >/dev/null || { echo "bench: 'bible' not found; install bible-kjv (scripts/setup.sh does)" >&2; exit 1; }
  [ -d tests/peers/node_modules/tiktoken ] || { echo "bench: tiktoken missing; run scripts/setup.sh" >&2; exit 1; }
  local want have
  want=$(sed -n 's/.*"tiktoken": "\([^"]*\)".*/\1/p' tests/peers/package.json)
  have=$(sed -n 's/^  "version": "\([^"]*\)".*/\1/p' tests/peers/node_modules/tiktoken/package.json)
  [ "$want" = "$have" ] || { echo "bench: tests/peers has tiktoken $have installed, package.json pins $want: (cd tests/peers && npm install)" >&2; exit 1; }
  TIKTOKEN_VERSION=$have
  WORK=${BENCH_WORK:-$(mktemp -d)}
  trap '[ -z "${BENCH_WORK:-}" ] && rm -rf "$WORK"' EXIT
  CORPUS=$WORK/corpus.json
  echo "corpus (distinct documents, no text repeated):"
  bible Gen1:1-Rev22:21 | node bench/preprocess/make_corpus.js "${BENCH_MB:-20}" > "$CORPUS"
  CORPUS_BYTES=$(stat -c %s "$CORPUS")
  CORPUS_DOCS=$(wc -l < "$CORPUS")
  echo "  $CORPUS: $CORPUS_DOCS documents, $CORPUS_BYTES bytes, sha256 $(sha256sum "$CORPUS" | cut -c1-16)"
  echo "  npm tiktoken $TIKTOKEN_VERSION, node $(node --version), $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)"
}

# bench_summary NAME TOKENS_FILE: one table row from lines "tokens seconds" of several runs:
# median, min and max seconds and the median tokens/s.
bench_summary() {
  sort -k2 -g "$2" | awk -v name="$1" '
    { tok = $1; s[NR] = $2 }
    END { med = NR % 2 ? s[(NR + 1) / 2] : (s[NR / 2] + s[NR / 2 + 1]) / 2
          printf "%-46s %10d %9.3f %8.3f %8.3f %11.0f\n", name, tok, med, s[1], s[NR], tok / med }'
}

# bench_ratio OURS_FILE TIK_FILE LABEL: tiktoken's seconds / ours, per alternating run pair
# (lines "tokens seconds" in both files): median and min-max.
bench_ratio() {
  paste -d' ' "$1" "$2" | awk '{ print $4 / $2 }' | sort -g | awk -v name="$3" '
    { r[NR] = $1 } END { m = NR % 2 ? r[(NR + 1) / 2] : (r[NR / 2] + r[NR / 2 + 1]) / 2
      printf "%-46s median %6.2fx   min-max %.2f-%.2fx\n", name, m, r[1], r[NR] }'
}
