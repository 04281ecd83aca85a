// Emulated sm_80 PTX (include/gpt_emu/ptx.hpp): mma.sync.m16n8k16, ldmatrix and cp.async.
// They use the hardware's fragment layouts, since the kernels that call them build and read
// fragments element by element. The collective ones
// exchange only what the instruction itself moves between lanes (warp_gather), so a lane
// that passed the wrong register shows in other lanes' results as it would on the GPU.
#include "gpt_emu/ptx.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "gpt_emu/memory.hpp"
#include "gpt_emu/simt.hpp"
#include "runtime_internal.hpp"

namespace gpt_emu {

// Every fp16 value as __half2float decodes it (built from it, so the same bits): mma_m16n8k16
// decodes 64 inputs per lane, and the branchy conversion was most of its time.
const float* half_table() {
    static const std::vector<float> table = [] {
        std::vector<float> t(65536);
        for (std::uint32_t b = 0; b < 65536; ++b) t[b] = __half2float(__half{static_cast<std::uint16_t>(b)});
        return t;
    }();
    return table.data();
}

namespace {

// .sync.aligned: every lane of the warp executes the same instruction; on the GPU anything
// else is undefined, here it fails the launch.
void require_whole_warp(std::uint32_t mask, const char* what) {
    if (mask == 0xffffffffu) return;
    std::ostringstream m;
    m << what << ": not all 32 lanes of the warp took part (lane mask 0x" << std::hex << mask
      << "): lanes exited, the warp is partial, or they diverged";
    throw std::runtime_error(m.str());
}

float decode(std::uint32_t reg, int high, bool bf16, const float* halves) {
    const auto bits = static_cast<std::uint16_t>(reg >> (16 * high));
    return bf16 ? __bfloat162float(__nv_bfloat16{bits}) : halves[bits];
}

std::string hex_address(const void* p) {
    std::ostringstream m;
    m << p;
    return m.str();
}

}  // namespace

void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2], bool bf16) {
    struct Regs {
        std::uint32_t a[4], b[2];
    };
    const Regs mine{{a[0], a[1], a[2], a[3]}, {b[0], b[1]}};
    // Read in place (no copy of all 32 lanes' offers): register `reg` of lane `l`.
    const unsigned char* all = nullptr;
    require_whole_warp(warp_gather_view(&mine, sizeof mine, &all), "mma.sync.m16n8k16");
    auto reg = [all](int l, std::size_t offset) {
        std::uint32_t v;
        std::memcpy(&v, all + static_cast<std::size_t>(l) * kWarpGatherMax + offset, sizeof v);
        return v;
    };
    const int lane = lane_id(), g = lane / 4, t = lane % 4;
    const float* halves = half_table();
    // A (row, k) is in lane 4 * (row % 8) + (k % 8) / 2, register row / 8 + 2 * (k / 8),
    // half k % 2; B (k, n) in lane 4 * n + (k % 8) / 2, register k / 8, half k % 2.
    float arow[2][16], bcol[2][16];
    for (int i = 0; i < 2; ++i)  // rows g and g + 8
        for (int k = 0; k < 16; ++k)
            arow[i][k] = decode(reg(4 * g + k % 8 / 2, offsetof(Regs, a) + 4 * (i + 2 * (k / 8))), k % 2, bf16, halves);
    for (int j = 0; j < 2; ++j)  // columns 2t and 2t + 1
        for (int k = 0; k < 16; ++k)
            bcol[j][k] = decode(reg(4 * (2 * t + j) + k % 8 / 2, offsetof(Regs, b) + 4 * (k / 8)), k % 2, bf16, halves);
    // Products of 16-bit inputs are exact in fp32; the sum's rounding is the CPU's, in k order.
    for (int i = 0; i < 2; ++i)
        for (int j = 0; j < 2; ++j) {
            float acc = d[2 * i + j];
            for (int k = 0; k < 16; ++k) acc += arow[i][k] * bcol[j][k];
            d[2 * i + j] = acc;
        }
}

void ldmatrix(std::uint32_t* r, int count, bool trans, const void* row) {
    if (count != 1 && count != 2 && count != 4)
        throw std::runtime_error("ldmatrix: count " + std::to_string(count) + " is not 1, 2 or 4");
    const auto* mine = static_cast<const unsigned char*>(row);
    const unsigned char* offers = nullptr;  // read in place, as mma_m16n8k16 does
    require_whole_warp(warp_gather_view(&mine, sizeof mine, &offers), "ldmatrix");
    const unsigned char* rows[32];
    for (int l = 0; l < 8 * count; ++l)  // only the lanes this count reads
        std::memcpy(&rows[l], offers + static_cast<std::size_t>(l) * kWarpGatherMax, sizeof rows[l]);
    const ArenaRange arena = arena_range();
    for (int l = 0; l < 8 * count; ++l) {
        // Every lane checks every address, so each reports the same (first) bad lane.
        if (reinterpret_cast<std::uintptr_t>(rows[l]) % 16 != 0)
            throw std::runtime_error("ldmatrix: lane " + std::to_string(l) + "'s row address " +
                                     hex_address(rows[l]) + " is not 16-byte aligned");
        if (arena.contains(rows[l]))
            throw std::runtime_error("ldmatrix: lane " + std::to_string(l) + "'s row address " +
                                     hex_address(rows[l]) + " is device (global) memory, not shared memory");
    }
    const int lane = lane_id(), g = lane / 4, t = lane % 4;
    for (int m = 0; m < count; ++m) {
        std::uint16_t lo, hi;
        if (!trans) {  // row g, columns 2t and 2t + 1
            std::memcpy(&lo, rows[8 * m + g] + 4 * t, 2);
            std::memcpy(&hi, rows[8 * m + g] + 4 * t + 2, 2);
        } else {  // rows 2t and 2t + 1, column g
            std::memcpy(&lo, rows[8 * m + 2 * t] + 2 * g, 2);
            std::memcpy(&hi, rows[8 * m + 2 * t + 1] + 2 * g, 2);
        }
        r[m] = static_cast<std::uint32_t>(lo) | (static_cast<std::uint32_t>(hi) << 16);
    }
}

namespace {
void land(const AsyncCopy& c) {
    if (c.src_bytes) std::memcpy(c.dst, c.src, c.src_bytes);
    std::memset(static_cast<unsigned char*>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
}
}  // namespace

void cp_async(void* dst, const void* src, std::size_t bytes, std::size_t src_bytes) {
    std::ostringstream bad;
    if (bytes != 4 && bytes != 8 && bytes != 16)
        bad << "size " << bytes << " is not 4, 8 or 16";
    else if (src_bytes > bytes)
        bad << "source size " << src_bytes << " exceeds the copy size " << bytes;
    else if (reinterpret_cast<std::uintptr_t>(dst) % bytes || reinterpret_cast<std::uintptr_t>(src) % bytes)
        bad << "destination " << dst << " or source " << src << " is not " << bytes << "-byte aligned";
    else if (in_arena(dst))
        bad << "destination " << dst << " is device (global) memory, not shared memory";
    else if (src_bytes > 0 && !is_device(src, src_bytes))  // .global: reads device memory, in bounds
        bad << "source [" << src << ", +" << src_bytes << ") is not inside a device allocation";
    if (!bad.str().empty()) throw std::runtime_error("cp.async: " + bad.str());
    if (async_copies_land_at_issue()) {
        land(AsyncCopy{dst, src, bytes, src_bytes, 0});
        return;
    }
    AsyncCopies& q = current_async_copies();
    q.copies.push_back(AsyncCopy{dst, src, bytes, src_bytes, q.committed});
}

void cp_async_commit() { ++current_async_copies().committed; }

// Both the read of the source and the write happen here, the latest the GPU may do them, so
// a reader that does not wait (or a source changed before the wait) shows (except under
// the warps schedule, where copies land at issue: see async_copies_land_at_issue).
void cp_async_wait(int pending) {
    if (pending < 0) throw std::runtime_error("cp.async.wait_group: negative group count");
    AsyncCopies& q = current_async_copies();
    const auto keep = static_cast<unsigned>(pending);
    if (q.committed <= keep) return;
    const unsigned done = q.committed - keep;  // groups 0 .. done-1 complete
    std::size_t n = 0;
    for (; n < q.copies.size() && q.copies[n].group < done; ++n) {
        land(q.copies[n]);
    }
    q.copies.erase(q.copies.begin(), q.copies.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace gpt_emu
