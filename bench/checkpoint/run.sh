#!/usr/bin/env bash
# Checkpoint save/load throughput against the raw speed of the same disk, at 1, 2 and 4 ranks.
#   [IO_MODE=auto|collective|independent] [REPS=3] [RANKS="1 2 4"] bench/checkpoint/run.sh [BUILD_DIR] [SCRATCH_DIR] [LAYERS] [HIDDEN]
# Prints the throughput table (dd beside it), then the per-phase profile of save and load
# (ckpt/profile.hpp), where the saved bytes went, and the async save's stall and memory.
# Defaults: build-ckpt, BUILD_DIR/bench-scratch/checkpoint, 6 layers of hidden 1024
# (fp16 weights + fp32 main params + 2 fp32 Adam moments = 1.06 GB per checkpoint).
# The peer is dd on the same disk, run by ckpt_bench's rank 0 right before and right after
# every save and load, REPS times per rank count (bench/checkpoint/raw_disk.hpp): each save
# is compared with the faster of four dd writes around it (buffered with conv=fsync, and
# oflag=direct), each load with the faster of four dd reads of the checkpoint file itself
# (buffered after fadvise eviction, and iflag=direct). The disk of our VMs drifts by 2x within
# a minute, so a dd measured once for the whole table would credit or blame the drift to us.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-ckpt}
scratch=${2:-$build/bench-scratch/checkpoint}
layers=${3:-6}
hidden=${4:-1024}
io_mode=${IO_MODE:-auto}
reps=${REPS:-3}
ranks_list=${RANKS:-1 2 4}
mkdir -p "$scratch"
mpiexec=$(sed -n 's/^MPIEXEC_EXECUTABLE:FILEPATH=//p' "$build/CMakeCache.txt")
cmake --build "$build" --target ckpt_bench > "$scratch/build.log" 2>&1 || { cat "$scratch/build.log"; exit 1; }
bench=$build/bench/checkpoint/ckpt_bench

mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / s / 1e6 }'; }
dd_seconds() { sed -n 's/.* copied, \([0-9.]*\) s,.*/\1/p'; }

fmt() { awk -v m="$1" -v lo="$2" -v hi="$3" 'BEGIN { printf "%s (%s-%s)", m, lo, hi }'; }
printf "%-6s %6s %-22s %-17s %-21s %7s %-22s %-17s %-21s %7s %6s %7s %7s %7s %8s %8s\n" ranks GB "save s" "% of dd write" "dd write MB/s" \
    "med%" "load s" "% of dd read" "dd read MB/s" "med%" "load*%" "loadH5%" "cpu s" "cksum%" "stall s" "async s"
declare -A lines profiles
field() { sed "s/.* $1=\([0-9.]*\).*/\1/" <<< "$2"; }
for n in $ranks_list; do
    rm -rf "$scratch/ckpt" "$scratch/ckpt.dd"
    out=$("$mpiexec" -n $n "$bench" "$scratch/ckpt" "$layers" "$hidden" "$io_mode" "$reps")
    line=$(grep '^RESULT' <<< "$out")
    lines[$n]=$line
    profiles[$n]=$(grep '^PROFILE' <<< "$out")
    grep '^REP ' <<< "$out" >> "$scratch/reps.log"
    f() { field "$1" "$line"; }
    b=$(f bytes); rr=$(f raw_r_once)
    printf "%-6s %6.2f %-22s %-17s %-21s %6s%% %-22s %-17s %-21s %6s%% %5s%% %6s%% %7s %6s%% %8s %8s\n" "$n" "$(awk -v b="$b" 'BEGIN{print b/1e9}')" \
        "$(fmt "$(f save_s)" "$(f save_min_s)" "$(f save_max_s)")" "$(fmt "$(f save_pct)" "$(f save_pct_min)" "$(f save_pct_max)")" \
        "$(fmt "$(f raw_w)" "$(f raw_w_min)" "$(f raw_w_max)")" "$(f save_pct_med)" \
        "$(fmt "$(f load_s)" "$(f load_min_s)" "$(f load_max_s)")" "$(fmt "$(f load_pct)" "$(f load_pct_min)" "$(f load_pct_max)")" \
        "$(fmt "$(f raw_r)" "$(f raw_r_min)" "$(f raw_r_max)")" "$(f load_pct_med)" \
        "$(awk -v b="$b" -v s="$(f load_noverify_s)" -v r="$rr" 'BEGIN { printf "%.0f", 100 * b / s / 1e6 / r }')" \
        "$(awk -v b="$b" -v s="$(f load_h5_s)" -v r="$rr" 'BEGIN { printf "%.0f", 100 * b / s / 1e6 / r }')" \
        "$(f save_cpu_s)" "$(awk -v c="$(f checksum_s)" -v s="$(f save_s)" 'BEGIN { printf "%.1f", 100 * c / s }')" \
        "$(f async_stall_s)" "$(f async_total_s)"
done
rm -rf "$scratch/ckpt" "$scratch/ckpt.dd"
echo
echo "disk: $(df --output=source,fstype "$scratch" | tail -1); each figure: median (min-max) of $reps saves/loads; % of dd:"
echo "  of the faster of the dd runs right before and after that save (write) or load (read of the checkpoint file);"
echo "med%: like for like, our median MB/s over the $reps repetitions as a % of dd's median over its $((2 * reps)) runs around"
echo "  them (the % of dd columns take the faster dd around each operation: on a disk that jumps between"
echo "  speeds from one second to the next, the best of two dd runs against one of ours favours dd)."
echo "  every repetition's seconds and dd speeds (buffered/direct, before,after): $scratch/reps.log"

# Where the time goes: ckpt/profile.hpp's seconds per phase (the slowest rank's) of the median
# save and of the load after it, beside the seconds dd takes for the same bytes at the median
# dd speed around them. Main-thread phases add up to the wall time with "other" (MPI set-up,
# tensor-list checks); checksum/verify run on a helper thread, overlapping write/read.
echo
echo "save phases, seconds (main thread: create exchange write writeback checksum_wait collective metadata fsync publish; helper: checksum):"
printf "%-6s %7s %7s %7s %9s %9s %9s %9s %10s %9s %7s %8s %7s %7s\n" ranks wall "dd s" create exchange write writeback checksum "ck_wait" metadata fsync publish other "coll"
for n in $ranks_list; do
    p=$(grep 'op=save' <<< "${profiles[$n]}"); line=${lines[$n]}
    w=$(field save_s "$line"); b=$(field bytes "$line")
    awk -v n="$n" -v w="$w" -v d="$(awk -v b="$b" -v s="$(field raw_w "$line")" 'BEGIN { printf "%.3f", b / (s * 1e6) }')" -v p="$p" 'BEGIN {
        m = split(p, kv, " "); for (i = 1; i <= m; ++i) { split(kv[i], x, "="); v[x[1]] = x[2] }
        main = v["create"] + v["exchange"] + v["write"] + v["writeback"] + v["checksum_wait"] + v["collective"] + v["metadata"] + v["fsync"] + v["publish"]
        printf "%-6s %7.3f %7.3f %7.3f %9.3f %9.3f %9.3f %9.3f %10.3f %9.3f %7.3f %8.3f %7.3f %7.3f\n", n, w, d, v["create"], v["exchange"], v["write"], v["writeback"], v["checksum"],
            v["checksum_wait"], v["metadata"], v["fsync"], v["publish"], w - main, v["collective"] }'
done
echo "where the median save's bytes went, MB over all ranks (O_DIRECT / page cache / of them received by the strided exchange):"
for n in $ranks_list; do
    line=${lines[$n]}
    echo "  $n ranks: $(awk -v a="$(field direct_bytes "$line")" -v b="$(field buffered_bytes "$line")" -v c="$(field exchanged_bytes "$line")" \
        'BEGIN { printf "%.1f / %.1f / %.1f", a / 1e6, b / 1e6, c / 1e6 }')"
done
echo "load phases, seconds (main thread: open read verify_wait exchange scatter agree close; helper: verify):"
printf "%-6s %7s %7s %7s %9s %9s %9s %9s %10s %9s %7s %8s\n" ranks wall "dd s" open read verify "v_wait" exchange scatter agree close other
for n in $ranks_list; do
    p=$(grep 'op=load' <<< "${profiles[$n]}"); line=${lines[$n]}
    w=$(field load_s "$line"); b=$(field bytes "$line")
    awk -v n="$n" -v w="$w" -v d="$(awk -v b="$b" -v s="$(field raw_r "$line")" 'BEGIN { printf "%.3f", b / (s * 1e6) }')" -v p="$p" 'BEGIN {
        m = split(p, kv, " "); for (i = 1; i <= m; ++i) { split(kv[i], x, "="); v[x[1]] = x[2] }
        main = v["open"] + v["read"] + v["verify_wait"] + v["exchange"] + v["scatter"] + v["agree"] + v["close"]
        printf "%-6s %7.3f %7.3f %7.3f %9.3f %9.3f %9.3f %9.3f %10.3f %9.3f %7.3f %8.3f\n", n, w, d, v["open"], v["read"], v["verify"],
            v["verify_wait"], v["exchange"], v["scatter"], v["agree"], v["close"], w - main }'
done
echo "async save (--async-save's writer): training stall = host copy + dataset creation; memory = the host copy,"
echo "  kept for the whole run and reused by every save (first save: the copy's pages are fresh; then reused)"
printf "%-6s %8s %12s %9s %14s %10s %14s %12s\n" ranks "stall s" "host copy s" "total s" "host copy GB" "stall/save" "1st stall s" "1st copy s"
for n in $ranks_list; do
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
echo "load*% / loadH5%: of the faster dd read of the checkpoint file right before and after those two loads."
echo "cpu s: user+sys CPU seconds of the save (getrusage, all threads, slowest rank): robust to a loaded machine."
echo "cksum%: one core's checksum of a rank's bytes (slowest rank) as a share of the save time."
echo "stall s / async s: the same checkpoint saved with --async-save's writer (CheckpointSaver): time until"
echo "  commit() returned (what training waits for) / until it was published while the caller polled each ms."
echo "Load average now: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (other jobs share this machine)."
