#!/usr/bin/env bash
# prepare_cache runs on login nodes before sbatch, and its process start is part of every cold
# index-cache start-up (bench/data_startup). It resolves a run but reads no checkpoint and
# trains nothing, so it must not load HDF5 (with its ~40 shared libraries: about a tenth of a
# cold start-up) nor OpenBLAS (whose start-up threads cost 25 ms on 2 cores): see
# lib/train/run/run_config_steps.hpp and run_device.cpp. A change that pulls either in again
# through a shared object file fails here.
#   prepare_cache_links_test.sh BUILD_DIR
set -euo pipefail
bin=$1/app/prepare_cache
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
[ -n "$needed" ] || { echo "FAIL: readelf found no NEEDED entries in $bin"; exit 1; }
bad=$(grep -E '^lib(hdf5|openblas|blas)' <<<"$needed" || true)
if [ -n "$bad" ]; then
    echo "FAIL: $bin loads $(echo $bad): a tool that reads no checkpoint and trains nothing"
    exit 1
fi
echo "ok: $bin loads $(echo $needed)"
