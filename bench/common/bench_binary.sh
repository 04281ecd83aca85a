# Sourced by the benchmarks' run.sh: bench_binary TARGET PATH sets BIN to $BENCH_BIN (a
# prebuilt binary, as scripts/device_check.sh passes on a machine without a build) or builds
# TARGET in $BUILD_DIR and points BIN at $BUILD_DIR/PATH. Build logs go to $tmp.
bench_binary() {
  local target=$1 path=$2
  if [ -n "${BENCH_BIN:-}" ]; then
    BIN=$BENCH_BIN
    return
  fi
  if [ ! -f "$BUILD_DIR/build.ninja" ] && [ ! -f "$BUILD_DIR/Makefile" ]; then
    echo "run.sh: no build in $BUILD_DIR; run scripts/setup.sh first (or set GPT_BUILD_DIR)" >&2
    exit 1
  fi
  if ! cmake --build "$BUILD_DIR" --target "$target" >"$tmp/build.log" 2>&1; then
    tail -40 "$tmp/build.log" >&2
    echo "run.sh: building $target in $BUILD_DIR failed" >&2
    exit 1
  fi
  BIN=$BUILD_DIR/$path
}
