// Emulated sm_90a warpgroup MMA (include/gpt_emu/wgmma.hpp): wgmma.fence, commit_group,
// wait_group and mma_async m64nNk16 with fp32 accumulators and fp16/bf16 inputs.
//
// Operands are read from the block's dynamic shared memory through the 64-bit matrix
// descriptor exactly as the PTX ISA defines it ("Matrix Descriptor Format", "Canonical
// Layouts"), swizzle included, so a wrong descriptor, stride or swizzle reads other elements,
// as on the GPU. The instruction is asynchronous: the accumulator registers read as NaN from
// the issue until the thread's wait_group that covers the operation, which writes the result.
// The shared-memory operands are read at the issue (the earliest the hardware may) and again
// at the wait (the latest): a read of the accumulators before the wait, a tile not yet loaded
// at the issue, or one overwritten before the wait, shows.
#include "gpt_emu/wgmma.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstring>
#include <limits>
#include <sstream>
#include <stdexcept>
#include <string>

#include "gpt_emu/simt.hpp"
#include "runtime_internal.hpp"

namespace gpt_emu {

namespace {

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

// The descriptor's fields (PTX ISA, "Matrix Descriptor Format"): start address, leading and
// stride dimension byte offsets, each encoded as (x & 0x3FFFF) >> 4 in 14 bits; the matrix
// base offset in bits 49-51; the swizzle mode in bits 62-63 (0 none, 1 128B, 2 64B, 3 32B).
struct Desc {
    std::uint32_t start, lbo, sbo, base_offset;
    int swizzle_bytes;  // 0 (none: the "interleave" layout), 128, 64 or 32
};
Desc decode_desc(std::uint64_t d) {
    static constexpr int kSwizzle[4] = {0, 128, 64, 32};
    return Desc{static_cast<std::uint32_t>(d & 0x3FFF) << 4, static_cast<std::uint32_t>(d >> 16 & 0x3FFF) << 4,
                static_cast<std::uint32_t>(d >> 32 & 0x3FFF) << 4, static_cast<std::uint32_t>(d >> 49 & 7),
                kSwizzle[d >> 62 & 3]};
}

// The shared-memory byte address of element (mn, k) of a 16-bit operand tile (mn: the row
// of A or the column of B; k < 16), from the ISA's canonical layouts in CuTe notation, with
// T = 8 elements (16 bytes) and W = swizzle bytes / 16:
//   K-major  none:    ((8,m),(T,2k)):((1T,SBO),(1,LBO))   swizzled: ((8,m),(T,2k)):((W T,SBO),(1,T))
//   MN-major none:    ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO)) swizzled: ((T,W,m),(8,k)):((1,T,LBO),(W T,SBO))
// then the swizzle of the absolute byte address: bits [4, 4+log2 W) ^= bits [7, 7+log2 W).
std::uint32_t element_address(const Desc& d, bool mn_major, int mn, int k) {
    const auto umn = static_cast<std::uint32_t>(mn), uk = static_cast<std::uint32_t>(k);
    const auto s = static_cast<std::uint32_t>(d.swizzle_bytes);
    std::uint32_t off;
    if (!mn_major) {
        if (s == 0)
            off = umn % 8 * 16 + umn / 8 * d.sbo + uk % 8 * 2 + uk / 8 * d.lbo;
        else
            off = umn % 8 * s + umn / 8 * d.sbo + uk * 2;
    } else {
        if (s == 0) {
            off = umn % 8 * 2 + umn / 8 * d.sbo + uk % 8 * 16 + uk / 8 * d.lbo;
        } else {
            // per_row = s / 2 elements of MN in one swizzle row: a power of two (s is 32, 64
            // or 128), so a mask and a shift instead of a division per element.
            const std::uint32_t per_row = s / 2, shift = static_cast<std::uint32_t>(__builtin_ctz(per_row));
            off = (umn & (per_row - 1)) * 2 + (umn >> shift) * d.lbo + uk % 8 * s + uk / 8 * d.sbo;
        }
    }
    std::uint32_t addr = d.start + off;
    if (s != 0) addr ^= (addr >> 7 & (s / 16 - 1)) << 4;
    return addr;
}

// The parts of the descriptor the emulator does not model are refused (every element's
// address is checked where it is read: smem_element).
void check_tile(const char* which, const Desc& d, bool mn_major) {
    std::ostringstream m;
    if (d.base_offset != 0)
        m << "matrix base offset " << d.base_offset
          << " is not emulated (tiles must start their swizzle pattern on its boundary)";
    else if (!mn_major && d.swizzle_bytes != 0 && d.start % d.swizzle_bytes + 32 > static_cast<unsigned>(d.swizzle_bytes))
        m << "start address " << d.start << " puts the instruction's 32 bytes of K across a " << d.swizzle_bytes
          << "-byte swizzle row";
    if (!m.str().empty()) fail(std::string("wgmma.mma_async: operand ") + which + ": " + m.str());
}

// fp16 through half_table() (ptx.cpp: built from __half2float, so the same bits).
float decode(std::uint16_t bits, bool bf16, const float* halves) {
    return bf16 ? __bfloat162float(__nv_bfloat16{bits}) : halves[bits];
}
// Element (mn, k) of operand `which` must lie inside dynamic shared memory (the emulator's
// whole .shared window: `limit` = dynamic_smem_bytes()).
float smem_element(std::uint32_t addr, bool bf16, char which, int mn, int k, std::size_t limit,
                   const float* halves) {
    if (addr + 2 > limit) {
        std::ostringstream m;
        m << "wgmma.mma_async: operand " << which << ": element (" << mn << ", k " << k << ") is at shared address "
          << addr << ", past the " << limit << " bytes of dynamic shared memory";
        fail(m.str());
    }
    std::uint16_t bits;
    std::memcpy(&bits, g_dynamic_smem + addr, 2);
    return decode(bits, bf16, halves);
}

// The operand values this thread's accumulators need: its two rows of A (2 x 16), then
// the 16 k of each of its n / 4 columns of B, in the D fragment's order (warp w of the
// warpgroup holds rows 16w..16w+15; register i is row 16w + lane/4 + 8 * (i/2 % 2), column
// 8 * (i/4) + 2 * (lane%4) + i%2).
std::vector<float> operands(const WgmmaOp& op) {
    const int t = warpgroup_thread(), warp = t / 32, lane = t % 32, g = lane / 4, q = lane % 4;
    const Desc da = decode_desc(op.desc_a), db = decode_desc(op.desc_b);
    const std::size_t limit = dynamic_smem_bytes();
    const float* halves = half_table();
    // Written through a pointer into a vector sized once (push_back's capacity test per
    // element was a tenth of the emulated wgmma's time).
    std::vector<float> v(32 + static_cast<std::size_t>(op.n / 4) * 16);
    float* out = v.data();
    for (int h = 0; h < 2; ++h) {
        const int rl = g + 8 * h;  // row within the warp's 16
        for (int k = 0; k < 16; ++k) {
            if (op.a_in_regs) {  // mma.m16n8k16's A layout: lane 4 (r%8) + (k%8)/2, register r/8 + 2 (k/8)
                const std::uint32_t reg = op.a_warp[4 * (rl % 8) + k % 8 / 2][rl / 8 + 2 * (k / 8)];
                *out++ = decode(static_cast<std::uint16_t>(reg >> (16 * (k % 2))), op.bf16, halves);
            } else {
                const int row = 16 * warp + rl;
                *out++ = smem_element(element_address(da, op.trans_a, row, k), op.bf16, 'A', row, k, limit, halves);
            }
        }
    }
    for (int j = 0; j < op.n / 8; ++j)
        for (int c = 0; c < 2; ++c)
            for (int k = 0; k < 16; ++k) {
                const int col = 8 * j + 2 * q + c;
                *out++ = smem_element(element_address(db, op.trans_b, col, k), op.bf16, 'B', col, k, limit, halves);
            }
    return v;
}

// This thread's accumulators of `op` from the operand values (as `operands` orders them).
std::vector<float> compute(const WgmmaOp& op, const std::vector<float>& v) {
    const float* arow = v.data();
    std::vector<float> out(static_cast<std::size_t>(op.n / 2));
    for (int j = 0; j < op.n / 8; ++j)
        for (int c = 0; c < 2; ++c) {
            const float* bcol = v.data() + 32 + (2 * j + c) * 16;
            for (int h = 0; h < 2; ++h) {
                const std::size_t i = static_cast<std::size_t>(4 * j + 2 * h + c);
                // Products of 16-bit inputs are exact in fp32; the sum is the CPU's, in k order.
                float acc = op.accumulate ? op.d_in[i] : 0.0f;
                for (int k = 0; k < 16; ++k) acc += arow[16 * h + k] * bcol[k];
                out[i] = acc;
            }
        }
    return out;
}

}  // namespace

std::uint32_t wgmma_smem_address(const void* p) {
    const auto* b = static_cast<const unsigned char*>(p);
    const std::size_t bytes = dynamic_smem_bytes();
    std::ostringstream m;
    if (g_dynamic_smem == nullptr || b < g_dynamic_smem || b >= g_dynamic_smem + bytes)
        m << p << " is not in the block's " << bytes
          << " bytes of dynamic shared memory (the emulator's wgmma reads only that)";
    else if ((b - g_dynamic_smem) % 16 != 0)
        m << "shared address " << (b - g_dynamic_smem) << " is not 16-byte aligned (a descriptor drops the low 4 bits)";
    if (!m.str().empty()) fail("wgmma matrix descriptor: " + m.str());
    return static_cast<std::uint32_t>(b - g_dynamic_smem);
}

// setmaxnreg.{inc,dec}.sync.aligned: every thread of the warpgroup, one count.
void setmaxnreg(int count) {
    if (count < 24 || count > 256 || count % 8 != 0)
        fail("setmaxnreg: " + std::to_string(count) + " registers is not a multiple of 8 from 24 to 256");
    int all[128];
    unsigned long long mask[2];
    warpgroup_gather(&count, sizeof count, all, mask);
    for (int t = 0; t < 128; ++t) {
        if (!(mask[t / 64] >> (t % 64) & 1))
            fail("setmaxnreg: thread " + std::to_string(t) + " of the warpgroup did not take part");
        if (all[t] != count)
            fail("setmaxnreg: warpgroup threads ask for " + std::to_string(all[t]) + " and " + std::to_string(count) +
                 " registers");
    }
}

void wgmma_fence() { current_wgmma().fence_due = false; }

void wgmma_commit_group() { ++current_wgmma().committed; }

void wgmma_mma(float* d, int n, bool bf16, std::uint64_t desc_a, const std::uint32_t* a_regs, std::uint64_t desc_b,
               bool trans_a, bool trans_b, bool accumulate) {
    if (n < 8 || n > 256 || n % 8 != 0)
        fail("wgmma.mma_async: N = " + std::to_string(n) + " is not a multiple of 8 from 8 to 256");
    if (a_regs && trans_a) fail("wgmma.mma_async: A from registers has no transpose");
    const std::uint32_t flags = static_cast<std::uint32_t>(n) | (bf16 ? 1u << 16 : 0) | (trans_a ? 1u << 17 : 0) |
                                (trans_b ? 1u << 18 : 0) | (accumulate ? 1u << 19 : 0) | (a_regs ? 1u << 20 : 0);
    const int me = warpgroup_thread();
    const auto missing = [](int t, const char* why) {
        fail("wgmma.mma_async: thread " + std::to_string(t) + " of the warpgroup did not take part (" + why +
             "); the instruction needs all 128 threads of four consecutive warps");
    };
    if (!warpgroup_complete()) missing(static_cast<int>(g_block_dim.x * g_block_dim.y * g_block_dim.z) % 128, "past the block's end");
    // .sync.aligned over the warp: its lanes meet (and exchange A's registers); the other
    // warps of the warpgroup issue when they get here, and the operation completes when the
    // last has (wgmma_wait_group waits for it). A barrier over the warpgroup here would order
    // every warp's earlier shared-memory stores before any warp's issue, which the GPU does
    // not: a kernel that needs that order must have a barrier of its own.
    struct Offer {
        std::uint32_t a[4];
    };
    Offer mine{};
    if (a_regs) std::memcpy(mine.a, a_regs, sizeof mine.a);
    static_assert(sizeof(Offer) <= kWarpGatherMax);
    const unsigned char* all = nullptr;
    const std::uint32_t lanes = warp_gather_view(&mine, sizeof mine, &all);
    if (lanes != 0xffffffffu)
        missing(me / 32 * 32 + __builtin_ctz(~lanes), "exited, past the block's end, or at another barrier");
    WgmmaState& st = current_wgmma();
    // The warpgroup's k-th operation: the first thread to issue it records what it gave.
    WgmmaIssues& issues = current_wgmma_issues();
    const std::uint64_t seq = st.issued++;
    const std::uint64_t desc_a_given = a_regs ? 0 : desc_a;
    if (seq - issues.base == issues.pending.size()) issues.pending.push_back({desc_a_given, desc_b, flags, me, 0});
    WgmmaIssue& rec = issues.pending[static_cast<std::size_t>(seq - issues.base)];
    if (rec.desc_a != desc_a_given || rec.desc_b != desc_b || rec.flags != flags)
        fail("wgmma.mma_async: warpgroup threads " + std::to_string(rec.first) + " and " + std::to_string(me) +
             " give different descriptors, shape, types, transposes or scale-d");
    ++rec.threads;
    while (!issues.pending.empty() && issues.pending.front().threads == 128) {
        issues.pending.erase(issues.pending.begin());
        ++issues.base;
    }
    if (st.fence_due)
        fail("wgmma.mma_async without a wgmma.fence since the thread's start or its last wgmma.wait_group "
             "(the accumulator and A registers are not ordered with the thread's own accesses)");
    if (!a_regs) check_tile("A", decode_desc(desc_a), trans_a);
    check_tile("B", decode_desc(desc_b), trans_b);
    WgmmaOp op;
    op.d = d;
    op.n = n;
    op.bf16 = bf16;
    op.trans_a = trans_a;
    op.trans_b = trans_b;
    op.accumulate = accumulate;
    op.a_in_regs = a_regs != nullptr;
    op.desc_a = desc_a_given;
    op.desc_b = desc_b;
    op.group = st.committed;
    op.seq = seq;
    if (a_regs) {
        for (int l = 0; l < 32; ++l) std::memcpy(op.a_warp[l], all + l * kWarpGatherMax, sizeof op.a_warp[l]);
        op.a_ptr = a_regs;
        std::memcpy(op.a_mine, a_regs, sizeof op.a_mine);
    }
    // The hardware reads the shared-memory operands at some time between the issue and the
    // wait: the emulator reads them at both ends (computing with the first), so operands
    // not yet there at the issue (a TMA load not waited for, another warp's stores not yet
    // made) and operands overwritten before the wait both show.
    op.operands = operands(op);
    for (const WgmmaOp& prev : st.ops)
        if (prev.d == d) op.chained = true;
    if (accumulate && !op.chained) op.d_in.assign(d, d + n / 2);
    // The registers belong to the asynchronous operation until its wait.
    for (int i = 0; i < n / 2; ++i) d[i] = std::numeric_limits<float>::quiet_NaN();
    st.ops.push_back(std::move(op));
}

// Completes, in order, the operations of all but the newest `pending` committed groups.
void wgmma_wait_group(int pending) {
    if (pending < 0 || pending > 7) fail("wgmma.wait_group: group count " + std::to_string(pending) + " is not 0..7");
    WgmmaState& st = current_wgmma();
    st.fence_due = true;
    const auto keep = static_cast<unsigned>(pending);
    if (st.committed <= keep) return;
    const unsigned done = st.committed - keep;
    // An operation completes only when every warp of the warpgroup has issued it: until
    // then the thread waits (a warp that never issues it is a deadlock, as on the GPU).
    const WgmmaIssues& issues = current_wgmma_issues();
    for (std::size_t i = 0; i < st.ops.size() && st.ops[i].group < done; ++i)
        if (!issues.issued_by_all(st.ops[i].seq)) wgmma_wait_issued(st.ops[i].seq);
    std::size_t n = 0;
    for (; n < st.ops.size() && st.ops[n].group < done; ++n) {
        WgmmaOp& op = st.ops[n];
        if (op.a_in_regs && std::memcmp(op.a_ptr, op.a_mine, sizeof op.a_mine) != 0)
            fail("wgmma.mma_async: its A-fragment registers changed before the wgmma.wait_group that completes it");
        const std::vector<float> now = operands(op);
        if (std::memcmp(now.data(), op.operands.data(), now.size() * sizeof(float)) != 0)
            fail("wgmma.mma_async: its shared-memory operands changed between the issue and the wgmma.wait_group "
                 "that completes it (written while the instruction may still read them)");
        std::vector<float> out = compute(op, op.operands);
        // A later operation on the same accumulators takes this result as its input; the
        // registers stay in flight (NaN) until the last of them completes.
        WgmmaOp* next = nullptr;
        for (std::size_t j = n + 1; j < st.ops.size() && !next; ++j)
            if (st.ops[j].d == op.d) next = &st.ops[j];
        if (next) {
            next->chained = false;
            if (next->accumulate) next->d_in = std::move(out);
        } else {
            std::memcpy(op.d, out.data(), out.size() * sizeof(float));
        }
    }
    st.ops.erase(st.ops.begin(), st.ops.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace gpt_emu
