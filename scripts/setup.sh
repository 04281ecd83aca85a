#!/usr/bin/env bash
# Installs every dependency that is missing (Debian packages, npm reference tokenizers),
# then configures and builds Release into build/. Idempotent: a second run only rebuilds
# what changed.  Usage: scripts/setup.sh [extra cmake -D options, e.g. -DGPT_CUDA=OFF]
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  ccache  # scripts/test.sh's emulator tree compiles most host sources exactly as build/ does:
          # with ccache those are cache hits (about 200 s less on 2 cores in a fresh clone)
  mpich libmpich-dev libhdf5-mpich-dev hdf5-tools
  libboost-program-options-dev libboost-log-dev
  libopenblas-dev googletest libgtest-dev
  bible-kjv environment-modules
  lua5.3 lua-filesystem lua-json lua-posix lua-term tcl
  slurmctld slurmd slurm-client munge
  python3-h5py python3-numpy  # tests/ckpt reads checkpoints back with h5py (system Python, tests only)
  python3-torch  # independent PyTorch references: tests/hf (GPT-2 export), tests/model (Llama-style options); tests only
  python3-protobuf  # tests/app/tensorboard_reader.py reads event files back (tests only)
  gnuplot-nox  # scripts/plot_metrics (optional tool; its test)
  # The sanitizer and fuzzing builds (scripts/test.sh): clang, its sanitizer and libFuzzer
  # run-times, its OpenMP runtime (with the Archer tool for TSan), llvm-symbolizer.
  clang libclang-rt-dev libomp-dev llvm
)

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Lmod: the install tests also load the modulefile under Lmod, but Debian's lmod conflicts
# with environment-modules, so only its .deb is fetched (its dependencies are in PACKAGES);
# tests/install/lmod_test.sh unpacks it into a temporary folder.
LMOD_CACHE=${GPT_LMOD_CACHE:-/var/cache/gpt-pretrain}
if ! ls "$LMOD_CACHE"/lmod_*.deb >/dev/null 2>&1; then
  echo "setup: downloading lmod into $LMOD_CACHE"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO mkdir -p "$LMOD_CACHE"
  $SUDO apt-get update -qq
  (cd "$LMOD_CACHE" && $SUDO apt-get download -qq lmod)
fi

# Node.js runs the reference GPT-2 tokenizers (tiktoken, gpt-3-encoder) in the tokenizer
# tests; use the one on PATH when there is one, else Debian's.
if ! command -v npm >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends nodejs npm
fi
if [ -f tests/peers/package.json ] && [ ! -d tests/peers/node_modules/tiktoken ]; then
  (cd tests/peers && npm install --no-audit --no-fund --loglevel=error)
fi

BUILD_DIR=${GPT_BUILD_DIR:-build}
# ccache (in PACKAGES; used when the machine has it) makes a rebuild in a fresh clone cost only
# what changed, and lets the other build trees reuse build/'s host objects.
LAUNCHER=()
if command -v ccache >/dev/null 2>&1; then
  LAUNCHER=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" "$@"
fi
cmake --build "$BUILD_DIR" -j "$(nproc)"
