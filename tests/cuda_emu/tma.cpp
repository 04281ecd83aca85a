// Emulated sm_90 mbarrier and TMA (include/gpt_emu/tma.hpp).
//
// An mbarrier's state is its 64-bit word in shared memory, encoded here as
//   bits 0-19 pending arrivals, 20-39 expected arrivals, 40-60 transaction count (21-bit two's
//   complement), 61-62 the value 2 (an initialised barrier), 63 the phase,
// so a block's barriers follow it between turns like the rest of its shared memory, and an
// uninitialised (0xff-poisoned) word is recognised. A phase completes when no arrivals are
// pending and the transaction count is zero; then the phase bit flips and the arrivals are
// re-armed. TMA tile loads are queued with the block and land at a try_wait on their
// barrier (reading global memory then), writing the box row by row with the tensor map's
// swizzle applied to the absolute shared address, as wgmma's descriptors read it.
#include "gpt_emu/tma.hpp"

#include <cstring>
#include <sstream>
#include <stdexcept>
#include <string>

#include "gpt_emu/memory.hpp"
#include "gpt_emu/simt.hpp"
#include "gpt_emu/wgmma.hpp"
#include "runtime_internal.hpp"

namespace gpt_emu {

namespace {

constexpr std::uint64_t kMagic = 0x3141592653589793ull;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

struct Bar {
    std::uint32_t pending, expected;
    std::int32_t tx;
    unsigned phase;
};
std::uint64_t* word(void* bar, const char* what) {
    if (reinterpret_cast<std::uintptr_t>(bar) % 8 != 0 || in_arena(bar)) {
        std::ostringstream m;
        m << what << ": mbarrier " << bar << " is not an 8-byte aligned shared-memory address";
        fail(m.str());
    }
    return static_cast<std::uint64_t*>(bar);
}
Bar load(void* bar, const char* what) {
    const std::uint64_t w = *word(bar, what);
    if ((w >> 61 & 3) != 2) fail(std::string(what) + ": the mbarrier was not initialised (mbarrier.init)");
    std::int32_t tx = static_cast<std::int32_t>(w >> 40 & 0x1FFFFF);
    if (tx & 0x100000) tx -= 0x200000;
    return Bar{static_cast<std::uint32_t>(w & 0xFFFFF), static_cast<std::uint32_t>(w >> 20 & 0xFFFFF), tx,
               static_cast<unsigned>(w >> 63)};
}
void store(void* bar, Bar b) {
    if (b.pending == 0 && b.tx == 0) {  // the phase completes
        b.phase ^= 1u;
        b.pending = b.expected;
    }
    *static_cast<std::uint64_t*>(bar) = std::uint64_t{b.pending} | std::uint64_t{b.expected} << 20 |
                                        (static_cast<std::uint64_t>(static_cast<std::uint32_t>(b.tx)) & 0x1FFFFF) << 40 |
                                        std::uint64_t{2} << 61 | std::uint64_t{b.phase} << 63;
}

// Writes one TMA box into shared memory and completes its bytes on its barrier.
void land(const BulkCopy& c) {
    const std::uint32_t s = static_cast<std::uint32_t>(c.swizzle_bytes);
    for (unsigned r = 0; r < c.box_rows; ++r)
        for (unsigned e = 0; e < c.box_cols; ++e) {
            const long long gr = c.row0 + r, gc = c.col0 + e;
            unsigned char v[8] = {};
            if (gr >= 0 && gc >= 0 && static_cast<unsigned long long>(gr) < c.rows &&
                static_cast<unsigned long long>(gc) < c.cols)  // outside the tensor: zeros
                std::memcpy(v, c.global + static_cast<unsigned long long>(gr) * c.row_bytes +
                                   static_cast<unsigned long long>(gc) * c.elem_bytes, c.elem_bytes);
            std::uint32_t addr = c.dst_addr + (r * c.box_cols + e) * c.elem_bytes;
            if (s != 0) addr ^= (addr >> 7 & (s / 16 - 1)) << 4;
            std::memcpy(c.dst + (addr - c.dst_addr), v, c.elem_bytes);
        }
    Bar b = load(c.bar, "TMA completion");
    b.tx -= static_cast<std::int32_t>(c.box_rows * c.box_cols * c.elem_bytes);
    store(c.bar, b);
}

}  // namespace

cudaError_t encode_tensor_map_2d(TensorMap* map, const void* global, unsigned long long rows, unsigned long long cols,
                                 unsigned long long row_bytes, unsigned box_rows, unsigned box_cols, int swizzle_bytes) {
    const unsigned inner = box_cols * 2;
    const bool ok = map && rows >= 1 && cols >= 1 && is_device(global, (rows - 1) * row_bytes + cols * 2) && reinterpret_cast<std::uintptr_t>(global) % 16 == 0 &&
                    row_bytes % 16 == 0 && row_bytes >= cols * 2 && box_rows >= 1 && box_rows <= 256 &&
                    box_cols >= 1 && box_cols <= 256 && inner % 16 == 0 &&
                    (swizzle_bytes == 0 || swizzle_bytes == 32 || swizzle_bytes == 64 || swizzle_bytes == 128) &&
                    (swizzle_bytes == 0 || inner == static_cast<unsigned>(swizzle_bytes));
    if (!ok) return cudaErrorInvalidValue;
    *map = TensorMap{};
    map->magic = kMagic;
    map->global = global;
    map->rows = rows;
    map->cols = cols;
    map->row_bytes = row_bytes;
    map->box_rows = box_rows;
    map->box_cols = box_cols;
    map->elem_bytes = 2;
    map->swizzle_bytes = swizzle_bytes;
    return cudaSuccess;
}

void mbarrier_init(void* bar, unsigned count) {
    if (count == 0 || count >= (1u << 20)) fail("mbarrier.init: arrival count " + std::to_string(count) + " out of range");
    *word(bar, "mbarrier.init") = 0;
    store(bar, Bar{count, count, 0, 0});
}

void mbarrier_arrive(void* bar, unsigned tx_bytes) {
    Bar b = load(bar, "mbarrier.arrive");
    if (b.pending == 0) fail("mbarrier.arrive: no arrival is pending in the current phase");
    b.tx += static_cast<std::int32_t>(tx_bytes);
    --b.pending;
    store(bar, b);
}

bool mbarrier_try_wait(void* bar, unsigned parity) {
    load(bar, "mbarrier.try_wait");
    std::vector<BulkCopy>& q = current_bulk_copies();
    for (std::size_t i = 0; i < q.size();) {
        if (q[i].bar == bar) {
            const BulkCopy c = q[i];
            q.erase(q.begin() + static_cast<std::ptrdiff_t>(i));
            if (!c.landed) land(c);
        } else {
            ++i;
        }
    }
    return load(bar, "mbarrier.try_wait").phase != (parity & 1u);
}

void tma_load_2d(void* dst, const TensorMap* map, void* bar, int col, int row) {
    if (!map || map->magic != kMagic) fail("cp.async.bulk.tensor: not a tensor map made by make_tensor_map_2d");
    load(bar, "cp.async.bulk.tensor");
    const std::uint32_t addr = wgmma_smem_address(dst);
    const std::uint32_t align = map->swizzle_bytes ? 8u * static_cast<std::uint32_t>(map->swizzle_bytes) : 128u;
    const std::size_t bytes = std::size_t{map->box_rows} * map->box_cols * map->elem_bytes;
    if (addr % align != 0 || addr + bytes > dynamic_smem_bytes())
        fail("cp.async.bulk.tensor: destination at shared address " + std::to_string(addr) + " (" +
             std::to_string(bytes) + " bytes) is not " + std::to_string(align) +
             "-byte aligned or runs past dynamic shared memory");
    BulkCopy c{bar, static_cast<unsigned char*>(dst), addr, static_cast<const unsigned char*>(map->global), map->rows,
               map->cols, map->row_bytes, map->box_rows, map->box_cols, map->elem_bytes, map->swizzle_bytes, row, col,
               false};
    if (tma_loads_land_at_issue()) {  // still recorded: a block must wait for its loads
        land(c);
        c.landed = true;
    }
    current_bulk_copies().push_back(c);
}

namespace {
void reduce(const BulkReduce& r) {
    for (std::size_t i = 0; i < r.n; ++i) r.dst[i] += r.src[i];
}
}  // namespace

void bulk_reduce_add_f32(float* dst, const float* src, unsigned bytes) {
    std::ostringstream bad;
    if (bytes == 0 || bytes % 16 != 0)
        bad << "size " << bytes << " is not a positive multiple of 16";
    else if (reinterpret_cast<std::uintptr_t>(dst) % 16 || reinterpret_cast<std::uintptr_t>(src) % 16)
        bad << "destination " << dst << " or source " << src << " is not 16-byte aligned";
    else if (in_arena(src))
        bad << "source " << src << " is device (global) memory, not shared memory";
    else if (wgmma_smem_address(src) + bytes > dynamic_smem_bytes())
        bad << "source at shared address " << wgmma_smem_address(src) << " (" << bytes
            << " bytes) runs past dynamic shared memory";
    else if (!is_device(dst, bytes))
        bad << "destination [" << dst << ", +" << bytes << ") is not inside a device allocation";
    if (!bad.str().empty()) fail("cp.reduce.async.bulk: " + bad.str());
    BulkReduces& q = current_bulk_reduces();
    BulkReduce r{dst, src, bytes / 4, q.committed, false};
    if (async_copies_land_at_issue()) {  // still recorded: the thread must wait for it
        reduce(r);
        r.done = true;
    }
    q.ops.push_back(r);
}

void bulk_commit_group() { ++current_bulk_reduces().committed; }

void bulk_wait_group(int pending) {
    if (pending < 0) fail("cp.async.bulk.wait_group: negative group count");
    BulkReduces& q = current_bulk_reduces();
    const auto keep = static_cast<unsigned>(pending);
    if (q.committed <= keep) return;
    const unsigned done = q.committed - keep;  // groups 0 .. done-1 complete
    std::size_t n = 0;
    for (; n < q.ops.size() && q.ops[n].group < done; ++n)
        if (!q.ops[n].done) reduce(q.ops[n]);
    q.ops.erase(q.ops.begin(), q.ops.begin() + static_cast<std::ptrdiff_t>(n));
}

}  // namespace gpt_emu
