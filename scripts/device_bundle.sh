#!/usr/bin/env bash
# Packs what scripts/device_check.sh needs on a GPU machine that has CUDA but no MPICH,
# HDF5, Boost or OpenBLAS (the lent H200 of the development workplace): the stripped CUDA
# build's binaries, the Debian packages their shared libraries come from, and the PyTorch
# peer. Everything goes to .rt/ (ignored by git), carried as one path:
#   scripts/device_bundle.sh [BUILD_DIR]     # default build/, configured with CUDA
# then, on the GPU machine:  bash scripts/device_check.sh   (results under $OUT)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rt=$root/.rt
targets="gpt_pretrain test_backend_cuda test_cuda_wgmma test_cuda_training bench_train_gpu bench_attention bench_gemm"
cmake --build "$build" --target $targets
rm -rf "$rt/bin" && mkdir -p "$rt/bin" "$rt/debs" "$rt/peers"
for t in $targets; do
    bin=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [ -n "$bin" ] || { echo "device_bundle: $t not built in $build" >&2; exit 1; }
    strip -o "$rt/bin/$t" "$bin"
done
# Debian packages of every shared library they load (CUDA, NCCL and glibc come from the
# GPU machine's own installation).
if [ -z "$(ls "$rt/debs" 2>/dev/null)" ]; then
    bash "$root/../shared/tools/bundle-runtime.sh" "$rt/debs" "$rt"/bin/*
fi
cp "$root"/../shared/peers/*.py "$rt/peers/" 2>/dev/null || echo "device_bundle: no peers found next to the repo" >&2
du -sh "$rt" >&2
