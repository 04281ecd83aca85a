#!/usr/bin/env bash
# Checkpoint save/load throughput against the raw speed of the same disk, at 1, 2 and 4 ranks.
#   [IO_MODE=auto|collective|independent] bench/checkpoint/run.sh [BUILD_DIR] [SCRATCH_DIR] [LAYERS] [HIDDEN]
# Prints the throughput table (dd beside it), then the per-phase profile of save and load
# (ckpt/profile.hpp) and the async save's stall and memory, at 1, 2 and 4 ranks.
# Defaults: build-ckpt, BUILD_DIR/bench-scratch/checkpoint, 6 layers of hidden 1024
# (fp16 weights + fp32 main params + 2 fp32 Adam moments = 1.06 GB per checkpoint).
# Raw write: dd from /dev/zero with conv=fsync (the checkpoint save also fsyncs before it
# publishes). Raw read: dd of that file after evicting it from the page cache with
# `dd iflag=nocache count=0` (fadvise DONTNEED; drop_caches needs privileges we may lack);
# ckpt_bench evicts its file the same way before each load, and fincore shows the eviction.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-ckpt}
scratch=${2:-$build/bench-scratch/checkpoint}
layers=${3:-6}
hidden=${4:-1024}
io_mode=${IO_MODE:-auto}
mkdir -p "$scratch"
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")

bench=$build/bench/checkpoint/ckpt_bench
if ! cmake --build "$build" --target ckpt_bench > "$scratch/build.log" 2>&1; then
    # bench/CMakeLists.txt does not add bench/checkpoint (yet): link against the build's libraries.
    cmake --build "$build" --target gpt_ckpt > "$scratch/build.log" 2>&1
    hdf5=$(sed -n 's/^HDF5_C_LIBRARY_hdf5:FILEPATH=//p' "$build/CMakeCache.txt")
    bench=$scratch/ckpt_bench
    mpicxx -std=c++20 -O2 -I"$root/lib" "$root/bench/checkpoint/ckpt_bench.cpp" \
        "$build/lib/ckpt/libgpt_ckpt.a" "$build/lib/core/libgpt_core.a" "$hdf5" -o "$bench"
fi

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }
dd_seconds() { sed -n 's/.* copied, \([0-9.]*\) s,.*/\1/p'; }

raw=$scratch/raw.bin
bytes=$((1024 * 1024 * 1024))
# dd of 1 GiB through the page cache (write, evict, read) and with O_DIRECT (write, read):
# prints "best_write best_read cached_pages_before_read buffered_w buffered_r direct_w direct_r"
# in MB/s. The save and load use O_DIRECT for whole pages, so the disk's speed is the faster
# of the two ways dd gets (buffered dd is faster only when it gets recently freed pages).
max() { echo $(( $1 > $2 ? $1 : $2 )); }
raw_speeds() {
    local w_s r_s pages wd_s rd_s w r wd rd
    w_s=$(dd if=/dev/zero of="$raw" bs=4M count=256 conv=fsync 2>&1 | dd_seconds)
    dd if="$raw" iflag=nocache count=0 status=none
    pages=$(fincore --noheadings --output PAGES "$raw" 2>/dev/null | tr -d ' ' || echo "?")
    r_s=$(dd if="$raw" of=/dev/null bs=4M 2>&1 | dd_seconds)
    rm -f "$raw"
    wd_s=$(dd if=/dev/zero of="$raw" bs=4M count=256 oflag=direct conv=fsync 2>&1 | dd_seconds)
    rd_s=$(dd if="$raw" of=/dev/null bs=4M iflag=direct 2>&1 | dd_seconds)
    rm -f "$raw"
    w=$(mbps $bytes "$w_s"); r=$(mbps $bytes "$r_s"); wd=$(mbps $bytes "$wd_s"); rd=$(mbps $bytes "$rd_s")
    echo "$(max $w $wd) $(max $r $rd) $pages $w $r $wd $rd"
}
read -r raw_w raw_r pages1 bw1 br1 dw1 dr1 <<< "$(raw_speeds)"

# N dd streams into one file (each its 1/N, fsync): what the disk gives N concurrent writers.
dd_streams() {
    local n=$1 per=$((256 / $1)) f=$scratch/streams.bin t0 t1
    rm -f "$f"; t0=$(date +%s.%N)
    for i in $(seq 0 $((n - 1))); do
        dd if=/dev/zero of="$f" bs=4M count=$per seek=$((i * per)) conv=notrunc,fsync status=none &
    done
    wait; t1=$(date +%s.%N); rm -f "$f"
    awk -v b=$bytes -v s="$t0" -v e="$t1" 'BEGIN { printf "%.0f", b / (e - s) / 1e6 }'
}

printf "%-6s %6s %8s %10s %6s %10s %6s %11s %6s %11s %6s %13s %7s %7s %8s %8s\n" ranks GB "save s" "save MB/s" "%raw" "load MB/s" "%raw" \
    "load* MB/s" "%raw" "loadH5 MB/s" "%raw" "dd N-stream W" "cpu s" "cksum%" "stall s" "async s"
declare -A results lines profiles
field() { sed "s/.* $1=\([0-9.]*\).*/\1/" <<< "$2"; }
for n in 1 2 4; do
    rm -rf "$scratch/ckpt"
    out=$("$mpiexec" -n $n "$bench" "$scratch/ckpt" "$layers" "$hidden" "$io_mode")
    line=$(grep '^RESULT' <<< "$out")
    lines[$n]=$line
    profiles[$n]=$(grep '^PROFILE' <<< "$out")
    b=$(field bytes "$line"); s=$(field save_s "$line"); l=$(field load_s "$line")
    lf=$(field load_noverify_s "$line"); lh=$(field load_h5_s "$line")
    cpu=$(field save_cpu_s "$line"); ck=$(field checksum_s "$line")
    st=$(field async_stall_s "$line"); at=$(field async_total_s "$line")
    sm=$(mbps "$b" "$s"); lm=$(mbps "$b" "$l"); lfm=$(mbps "$b" "$lf"); lhm=$(mbps "$b" "$lh")
    results[$n]="$sm $lm $lfm $lhm"
    printf "%-6s %6.2f %8s %10s %5s%% %10s %5s%% %11s %5s%% %11s %5s%% %13s %7s %6s%% %8s %8s\n" "$n" "$(awk -v b="$b" 'BEGIN{print b/1e9}')" "$s" \
        "$sm" $((100 * sm / raw_w)) "$lm" $((100 * lm / raw_r)) "$lfm" $((100 * lfm / raw_r)) "$lhm" $((100 * lhm / raw_r)) \
        "$(dd_streams $n)" "$cpu" "$(awk -v c="$ck" -v s="$s" 'BEGIN { printf "%.1f", 100 * c / s }')" "$st" "$at"
done
rm -rf "$scratch/ckpt"
# The disk's speed drifts (a shared VM disk): measure again and compare with the faster run.
read -r raw_w2 raw_r2 pages2 bw2 br2 dw2 dr2 <<< "$(raw_speeds)"
echo
echo "disk: $(df --output=source,fstype "$scratch" | tail -1)"
echo "raw write (dd bs=4M conv=fsync, 1 GiB): buffered $bw1 / oflag=direct $dw1 MB/s before, buffered $bw2 / direct $dw2 MB/s after the runs"
echo "raw read (dd bs=4M; buffered after fadvise eviction, pages left cached: $pages1, $pages2): buffered $br1 / iflag=direct $dr1 MB/s before, buffered $br2 / direct $dr2 MB/s after"
echo "raw = the faster of buffered and direct dd: write $raw_w before, $raw_w2 after; read $raw_r before, $raw_r2 after"
echo "%raw above used the first pair; against the faster of each pair:"
for n in 1 2 4; do
    set -- ${results[$n]}
    echo "  $n ranks: save $((100 * $1 / (raw_w > raw_w2 ? raw_w : raw_w2)))%," \
         "load $((100 * $2 / (raw_r > raw_r2 ? raw_r : raw_r2)))%, load* $((100 * $3 / (raw_r > raw_r2 ? raw_r : raw_r2)))%," \
         "loadH5 $((100 * $4 / (raw_r > raw_r2 ? raw_r : raw_r2)))%"
done

# Where the time goes: ckpt/profile.hpp's seconds per phase (the slowest rank's), beside the
# seconds dd takes for the same bytes at the faster dd speed of each pair. Main-thread phases
# add up to the wall time with "other" (MPI set-up, tensor-list checks); checksum/verify run
# on a helper thread, overlapping write/read.
best_w=$((raw_w > raw_w2 ? raw_w : raw_w2)); best_r=$((raw_r > raw_r2 ? raw_r : raw_r2))
echo
echo "save phases, seconds (main thread: create write writeback checksum_wait collective metadata fsync publish; helper: checksum):"
printf "%-6s %7s %7s %7s %9s %9s %9s %10s %9s %7s %8s %7s %7s\n" ranks wall "dd s" create write writeback checksum "ck_wait" metadata fsync publish other "coll"
for n in 1 2 4; do
    p=$(grep 'op=save' <<< "${profiles[$n]}"); line=${lines[$n]}
    w=$(field save_s "$line"); b=$(field bytes "$line")
    awk -v n="$n" -v w="$w" -v d="$(awk -v b="$b" -v s="$best_w" 'BEGIN { printf "%.3f", b / (s * 1e6) }')" -v p="$p" 'BEGIN {
        m = split(p, kv, " "); for (i = 1; i <= m; ++i) { split(kv[i], x, "="); v[x[1]] = x[2] }
        main = v["create"] + v["write"] + v["writeback"] + v["checksum_wait"] + v["collective"] + v["metadata"] + v["fsync"] + v["publish"]
        printf "%-6s %7.3f %7.3f %7.3f %9.3f %9.3f %9.3f %10.3f %9.3f %7.3f %8.3f %7.3f %7.3f\n", n, w, d, v["create"], v["write"], v["writeback"], v["checksum"],
            v["checksum_wait"], v["metadata"], v["fsync"], v["publish"], w - main, v["collective"] }'
done
echo "load phases, seconds (main thread: open read verify_wait scatter agree close; helper: verify):"
printf "%-6s %7s %7s %7s %9s %9s %9s %10s %9s %7s %8s\n" ranks wall "dd s" open read verify "v_wait" scatter agree close other
for n in 1 2 4; do
    p=$(grep 'op=load' <<< "${profiles[$n]}"); line=${lines[$n]}
    w=$(field load_s "$line"); b=$(field bytes "$line")
    awk -v n="$n" -v w="$w" -v d="$(awk -v b="$b" -v s="$best_r" 'BEGIN { printf "%.3f", b / (s * 1e6) }')" -v p="$p" 'BEGIN {
        m = split(p, kv, " "); for (i = 1; i <= m; ++i) { split(kv[i], x, "="); v[x[1]] = x[2] }
        main = v["open"] + v["read"] + v["verify_wait"] + v["scatter"] + v["agree"] + v["close"]
        printf "%-6s %7.3f %7.3f %7.3f %9.3f %9.3f %9.3f %10.3f %9.3f %7.3f %8.3f\n", n, w, d, v["open"], v["read"], v["verify"],
            v["verify_wait"], v["scatter"], v["agree"], v["close"], w - main }'
done
echo "async save (--async-save's writer): training stall = host copy + dataset creation; memory = the host copy,"
echo "  kept for the whole run and reused by every save (first save: the copy's pages are fresh; then reused)"
printf "%-6s %8s %12s %9s %14s %10s %14s %12s\n" ranks "stall s" "host copy s" "total s" "host copy GB" "stall/save" "1st stall s" "1st copy s"
for n in 1 2 4; do
    line=${lines[$n]}
    printf "%-6s %8s %12s %9s %14.2f %9s%% %14s %12s\n" "$n" "$(field async_stall_s "$line")" "$(field host_copy_s "$line")" \
        "$(field async_total_s "$line")" "$(awk -v b="$(field host_copy_bytes "$line")" 'BEGIN { print b / 1e9 }')" \
        "$(awk -v a="$(field async_stall_s "$line")" -v s="$(field save_s "$line")" 'BEGIN { printf "%.1f", 100 * a / s }')" \
        "$(field async_first_stall_s "$line")" "$(field host_copy_first_s "$line")"
done
echo
echo "I/O mode: $io_mode (WriterOptions/ReaderOptions::io_mode)."
echo "save:  CheckpointWriter created -> commit() returned (data, checksums, close, fsync, rename, tracker)."
echo "load:  CheckpointReader opened (structure checks) + read() of every rank's slices, checksums verified."
echo "load*: the same with ReaderOptions::verify_checksums = false."
echo "loadH5: verified, with ReaderOptions::direct_reads = false (H5Dread instead of pread at HDF5's offsets)."
echo "dd N-stream W: N dd writers into one file (each 1/N, conv=fsync): the disk with N concurrent writers."
echo "cpu s: user+sys CPU seconds of the save (getrusage, all threads, slowest rank): robust to a loaded machine."
echo "cksum%: one core's checksum of a rank's bytes (slowest rank) as a share of the save time."
echo "stall s / async s: the same checkpoint saved with --async-save's writer (CheckpointSaver): time until"
echo "  commit() returned (what training waits for) / until it was published while the caller polled each ms."
echo "Load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (other jobs share this machine)."
