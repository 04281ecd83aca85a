#!/usr/bin/env bash
# Packs what scripts/device_check.sh needs on a GPU machine that has CUDA but no MPICH,
# HDF5, Boost or OpenBLAS (the lent H200 of the development workplace): the stripped CUDA
# build's binaries, the Debian packages their shared libraries come from - and those of
# mpiexec.hydra and hydra_pmi_proxy, which Debian links against libslurm (the 2-rank steps
# once failed on "libslurm.so.38: cannot open shared object file") - and the PyTorch peer.
# Everything goes to .rt/ (ignored by git), carried as one path. A call carries at most 64 MiB
# with the working tree (about 6 MiB), and the stripped binaries alone are about 120 MB (CUDA
# code for sm_80 and sm_90, the same library linked into each of 7 binaries), so they travel
# as .rt/bin.tar.xz (about 7 MB; device_check.sh unpacks it) beside the packages (about
# 25 MB); a bundle over 56 MiB is refused here.
#   scripts/device_bundle.sh [BUILD_DIR]     # default build/, configured with CUDA
# then ONE device call:  run(command "bash scripts/device_check.sh", carry [".rt"], timeout_s 570)
# (device_check.sh keeps inside DEVICE_BUDGET_S, 530 s by default, and writes 5 files to $OUT).
# BUNDLE_TARGETS: the binaries to pack instead of every one device_check.sh runs (a check of
# this script's library bookkeeping on a build without CUDA, e.g. the emulator's).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
rt=$root/.rt
targets="gpt_pretrain test_backend_cuda test_cuda_training bench_train_gpu bench_attention bench_gemm"
# Bundled when this build has them (device_check.sh skips a step whose binary is absent).
optional="test_cuda_wgmma"
if [ -n "${BUNDLE_TARGETS:-}" ]; then targets=$BUNDLE_TARGETS optional=""; fi
for t in $optional; do
    # (grep to /dev/null, not -q: under pipefail, an early exit would fail the pipeline by SIGPIPE)
    if cmake --build "$build" --target help | grep "^$t:" > /dev/null; then targets="$targets $t"; fi
done
# shellcheck disable=SC2086  # a list of targets
cmake --build "$build" --target $targets
rm -rf "${rt:?}/bin" "$rt/bin.tar.xz" && mkdir -p "$rt/debs" "$rt/peers"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/bin"
for t in $targets; do
    bin=$(find "$build" -type f -name "$t" -perm -u+x | head -1)
    [ -n "$bin" ] || { echo "device_bundle: $t not built in $build" >&2; exit 1; }
    strip -o "$stage/bin/$t" "$bin"
done

# Every shared library that the binaries, mpiexec.hydra and hydra_pmi_proxy load must come
# from a bundled package, except what the GPU machine provides itself: CUDA, NCCL, and the
# base packages bundle-runtime.sh leaves out (glibc, libstdc++, zlib, zstd, OpenSSL, udev).
launchers="$(readlink -f "$(command -v mpiexec.hydra)") $(readlink -f "$(command -v hydra_pmi_proxy)")"
provided='^(libc6|libgcc-s1|libstdc\+\+6|libzstd1|zlib1g|libssl3|libudev1)(:amd64)?$'
# Prints "package soname" for every library that must be bundled.
needed() {
    # shellcheck disable=SC2086  # a list of paths
    for b in "$stage"/bin/* $launchers; do ldd "$b" | awk '/=>/ { print $1, $3 }'; done | sort -u |
        while read -r soname path; do
            case "$path" in */cuda* | *libcuda* | *libnccl* | *libcublas*) continue ;; esac
            # dpkg knows a file by the path its package installed: /lib/... or /usr/lib/...
            # (merged /usr), so both are asked.
            pkg=$( (dpkg -S "$path" || dpkg -S "$(readlink -f "$path")") 2>/dev/null | grep -v '^diversion' |
                  cut -d: -f1 | head -1)
            if [ -z "$pkg" ]; then echo "device_bundle: no Debian package owns $path" >&2; continue; fi
            if [[ "$pkg" =~ $provided ]]; then continue; fi
            echo "$pkg $soname"
        done
}
# Sonames missing from the unpacked debs.
missing() {
    local tree
    tree=$(mktemp -d)
    for d in "$rt"/debs/*.deb; do [ -f "$d" ] && dpkg -x "$d" "$tree"; done
    needed | while read -r pkg soname; do
        if [ -z "$(find "$tree" -name "$soname" -print -quit)" ]; then echo "$soname ($pkg)"; fi
    done
    rm -rf "$tree"
}
if ! ls "$rt"/debs/*.deb >/dev/null 2>&1; then
    # shellcheck disable=SC2086  # a list of paths
    bash "$root/../shared/tools/bundle-runtime.sh" "$rt/debs" "$stage"/bin/* $launchers
fi
# What a bundle from before lacks (libslurm38 once), or that tool does not find (it asks dpkg
# by the resolved /usr path only): fetched one package at a time.
gaps=$(missing)
for p in $(echo "$gaps" | sed -n 's/.*(\(.*\))$/\1/p' | sort -u); do
    echo "device_bundle: fetching $p" >&2
    (cd "$rt/debs" && apt-get download "$p" >/dev/null 2>&1) || echo "device_bundle: could not download $p" >&2
done
gaps=$(missing)
if [ -n "$gaps" ]; then
    echo "device_bundle: libraries missing from .rt/debs: $(echo "$gaps" | tr '\n' ' ')" >&2
    exit 1
fi
echo "device_bundle: every library of $(find "$stage/bin" -type f | wc -l) binaries, mpiexec.hydra and hydra_pmi_proxy is in .rt/debs" >&2
# One xz block with a dictionary larger than the whole tar: each binary after the first is
# mostly the library's bytes again, which a window that still holds them encodes as matches
# (26 MiB with xz -6 -T2's 8 MiB windows and separate blocks, 6.4 MiB so, on 3d2edf6's build;
# about 50 s, 2-3 GiB of memory here, 192 MiB to unpack there).
tar -C "$stage" -cf - bin | xz -T1 --lzma2=preset=9,dict=192MiB >"$rt/bin.tar.xz"
cp "$root"/../shared/peers/*.py "$rt/peers/" 2>/dev/null || echo "device_bundle: no peers found next to the repo" >&2
du -sh "$rt"/* >&2
size=$(du -sb "$rt" | cut -f1)
if [ "$size" -gt $((56 << 20)) ]; then
    echo "device_bundle: .rt is $((size >> 20)) MiB: with the working tree over a call's 64 MiB" >&2
    exit 1
fi
