// The SIMT emulator's scheduler: blocks run one at a time in an order the schedule picks, a block's threads are fibers that
// switch at barriers (see include/gpt_emu/simt.hpp for the model and its limits).
#include "gpt_emu/simt.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "gpt_emu/memory.hpp"
#include "runtime_internal.hpp"

// Fiber switch: saves the callee-saved registers, MXCSR and the x87 control word on the
// current stack, stores the stack pointer in *save and continues on `load`'s stack.
// ucontext's swapcontext also saves the signal mask with a system call on every switch,
// which made it most of the emulator's run time.
#if !defined(__x86_64__)
#error "tests/cuda_emu: the fiber switch is written for x86-64"
#endif
extern "C" void gpt_emu_switch(void** save, void* load);
asm(R"(
    .text
    .globl gpt_emu_switch
    .type gpt_emu_switch, @function
gpt_emu_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size gpt_emu_switch, .-gpt_emu_switch
)");

namespace gpt_emu {

uint3 g_thread_idx{0, 0, 0};
uint3 g_block_idx{0, 0, 0};
dim3 g_block_dim;
dim3 g_grid_dim;
unsigned char* g_dynamic_smem = nullptr;
namespace {
std::size_t g_smem_bytes = 0;  // the running launch's dynamic shared memory
}  // namespace

namespace {

// Fiber stacks: generous, since our kernels keep per-thread arrays of up to 128 floats and
// flash attention keeps ~200 accumulators per thread; a guard page below each turns an overflow
// into a fault instead of silent corruption.
constexpr std::size_t kStackBytes = std::size_t{256} << 10;
constexpr int kMaxThreads = 1024;

enum class Wait { None, Block, Warp, Group, Named, Wgmma, Yield, Spin, Done };

struct Barrier {
    int live = 0, arrived = 0;
    unsigned gen = 0;
};

struct Fiber {
    void* sp = nullptr;  // saved stack pointer while suspended
    uint3 tid;
    int warp = 0, lane = 0;
    Wait wait = Wait::None;
    unsigned gen = 0;  // generation of the barrier this fiber waits on
    int named = 0;     // the named barrier it waits at (Wait::Named)
    std::uint64_t wgmma_seq = 0;  // Wait::Wgmma: the warpgroup operation all four warps must issue
    AsyncCopies copies;  // cp.async (ptx.cpp)
    WgmmaState wgmma;    // wgmma.mma_async in flight (wgmma.cpp)
    BulkReduces reduces; // cp.reduce.async.bulk not yet waited for (tma.cpp)
};

struct LaneMask {
    std::uint32_t lanes = 0;
    unsigned gen = 0;  // the warp generation the lanes offered at, + 1
    void offer(unsigned g, int lane) {
        if (gen != g + 1) {
            gen = g + 1;
            lanes = 0;
        }
        lanes |= std::uint32_t{1} << lane;
    }
    std::uint32_t at(unsigned g) const { return gen == g + 1 ? lanes : 0; }
};

struct BlockRun {
    std::vector<Fiber> fibers;
    Barrier block;
    std::vector<Barrier> warps;
    std::vector<Barrier> groups;  // warpgroups (128 threads: wgmma.cpp)
    std::vector<std::uint64_t> slots;  // warp exchange: two sets of one per thread
    // Which lanes wrote a set of a warp's slots at a warp generation: per (set, warp), the
    // lane mask and the generation (+ 1) it belongs to (the first writer of a new
    // generation clears it). One mask test per shuffle instead of 32 per-slot tags.
    std::vector<LaneMask> slot_lanes;
    // Warp gather: two sets of kWarpGatherMax bytes per thread (kept across the blocks of a
    // launch: absent lanes' bytes are stale either way), and its lane masks as above.
    std::vector<unsigned char> gather;
    std::vector<LaneMask> gather_lanes;
    // Warpgroup gather, the same way (setmaxnreg).
    std::vector<unsigned char> group_gather;
    std::vector<unsigned> group_gather_gen;
    std::vector<BulkCopy> bulk;  // TMA copies not yet landed (tma.cpp)
    std::vector<WgmmaIssues> wgmma_issues;  // per warpgroup (wgmma.cpp)
    // Named barriers 1..15 (bar.sync / bar.arrive id, count): arrivals so far, the count the
    // current round of arrivals expects (0 while none arrived), and the generation.
    struct Named {
        int arrived = 0, expected = 0;
        unsigned gen = 0;
    };
    Named named[16];
    int idle_rounds = 0;         // rounds in which only threads spinning at an mbarrier ran
    Fiber* cur = nullptr;
    // Where the running round is in the schedule's order (run_round, next_fiber): a fiber
    // that suspends picks the next runnable fiber itself and switches straight to it, one
    // switch per suspension instead of two through the scheduler.
    struct Round {
        int k = 0;          // forward / reverse: the next position in the order
        int w = 0, t = 0;   // warps: the warp, and the next lane to try (downwards)
        bool more = false;  // warps: a fiber of warp w ran in this pass
        bool ran = false;   // some fiber ran in this round
        bool progress = false;  // a thread did more than spin at an mbarrier once
        bool warps = false, reverse = false;  // the schedule (read once per round)
        unsigned block_gen = 0;  // the __syncthreads generation when the round began
    } round;
    void* sched_sp = nullptr;
    const std::function<void()>* body = nullptr;
    std::string failure;
    // Where the block lives while other blocks of its grid run too (interleaved schedules).
    uint3 idx{0, 0, 0};
    unsigned char* smem = nullptr;  // its dynamic shared memory
    // Its static __shared__ variables (function statics, one per kernel): their bytes are
    // kept here while another block runs, and put back when this one resumes.
    struct Static {
        void* p;
        std::size_t bytes;
        std::vector<unsigned char> saved;
    };
    std::vector<Static> statics;
};

BlockRun* g_run = nullptr;
std::mutex g_launch_mutex;

class StackPool {
public:
    void* get(std::size_t i) {
        const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
        while (stacks_.size() <= i) {
            void* m = mmap(nullptr, kStackBytes + page, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (m == MAP_FAILED) return nullptr;
            mprotect(m, page, PROT_NONE);  // guard page: stacks grow down
            stacks_.push_back(static_cast<char*>(m) + page);
        }
        return stacks_[i];
    }

private:
    std::vector<void*> stacks_;
};
StackPool g_stacks;

// GPT_EMU_SCHEDULE: the order fibers run in between barriers (all are orders CUDA allows).
//  forward (default): thread 0 first; warps advance in step, one warp barrier at a time.
//  reverse:           the last thread first.
//  warps:             each warp runs as far as it can (to a __syncthreads or its end) before
//                     the next starts, lanes last-to-first, and a warp that a later one
//                     releases (named barrier, wgmma issue) goes on before any later warp:
//                     one warp, and the lowest warpgroup, gets far ahead of the others, as
//                     when a GPU schedules warps unevenly, so a missing barrier between
//                     warps or warpgroups that share memory shows.
// Under reverse and warps, kLiveBlocks blocks of a grid are alive at once and take turns,
// one round each (every thread runs to its next barrier, shuffle or atomic), so a block
// that reads what another block of the grid writes, or a read-modify-write that blocks race
// on without an atomic, sees the other block half done.
enum class Schedule { Forward, Reverse, Warps };

Schedule schedule() {
    static const Schedule s = [] {
        const char* e = std::getenv("GPT_EMU_SCHEDULE");
        const std::string v = e ? e : "forward";
        if (v == "reverse") return Schedule::Reverse;
        if (v == "warps") return Schedule::Warps;
        if (v != "forward") {
            std::fprintf(stderr, "gpt_emu: GPT_EMU_SCHEDULE=%s is not forward, reverse or warps\n", v.c_str());
            std::abort();
        }
        return Schedule::Forward;
    }();
    return s;
}

void try_release(Barrier& b) {
    if (b.arrived > 0 && b.arrived >= b.live) {
        b.arrived = 0;
        ++b.gen;
    }
}

constexpr int kLiveBlocks = 4;
bool interleaved() { return schedule() != Schedule::Forward; }

bool runnable(const BlockRun& r, const Fiber& f);

// The next fiber of the running round, in the schedule's order (the order run_round's
// loops visited them in when the scheduler resumed each fiber itself), tested for
// runnability when the order reaches it; nullptr at the round's end.
Fiber* next_fiber(BlockRun& r) {
    BlockRun::Round& c = r.round;
    const int n = static_cast<int>(r.fibers.size());
    if (c.warps) {
        // Each warp, lanes last to first, pass after pass until a pass runs none of them;
        // then the lowest warp with a thread that can run, so a warp that a later one
        // released (a named barrier, a wgmma its warpgroup finished issuing) goes on before
        // any later warp: the lowest warpgroup runs as far ahead of the others as the
        // kernel's own synchronisation lets it (a missing barrier between two warpgroups'
        // uses of the same shared memory shows). Threads released by a __syncthreads wait
        // for the next round, so other blocks of the grid run between its two sides.
        for (;;) {
            const int first = 32 * c.w;
            while (c.t >= first) {
                Fiber& f = r.fibers[static_cast<std::size_t>(c.t--)];
                if (runnable(r, f)) {
                    c.more = c.ran = true;
                    return &f;
                }
            }
            if (c.more) {
                c.more = false;
                c.t = std::min(n, first + 32) - 1;
                continue;
            }
            int next = -1;
            for (int t = 0; t < n && next < 0; ++t) {
                const Fiber& f = r.fibers[static_cast<std::size_t>(t)];
                const bool released_now = f.wait == Wait::Block && f.gen == c.block_gen;
                if (!released_now && runnable(r, f)) next = t / 32;
            }
            if (next < 0) return nullptr;
            c.w = next;
            c.t = std::min(n, 32 * next + 32) - 1;
        }
    }
    while (c.k < n) {
        const int t = c.reverse ? n - 1 - c.k : c.k;
        ++c.k;
        Fiber& f = r.fibers[static_cast<std::size_t>(t)];
        if (runnable(r, f)) {
            c.ran = true;
            return &f;
        }
    }
    return nullptr;
}

// Makes f the running fiber (the switch to it follows).
void make_current(BlockRun& r, Fiber& f) {
    f.wait = Wait::None;
    r.cur = &f;
    g_thread_idx = f.tid;
}

// Ends the running fiber's turn (its wait already set): the next runnable fiber of the
// round continues, or the scheduler at the round's end.
void suspend(Fiber& f) {
    BlockRun& r = *g_run;
    r.round.progress |= f.wait != Wait::Spin;
    Fiber* next = next_fiber(r);
    if (!next) {
        gpt_emu_switch(&f.sp, r.sched_sp);
        return;
    }
    make_current(r, *next);
    if (next != &f) gpt_emu_switch(&f.sp, next->sp);
}

void arrive(Barrier& b, Wait kind) {
    Fiber& f = *g_run->cur;
    const unsigned gen = b.gen;
    if (++b.arrived >= b.live) {  // the last one releases the others and goes on
        b.arrived = 0;
        ++b.gen;
        // Under the interleaved schedules a __syncthreads ends the block's turn for every
        // thread, the last to arrive too, so other blocks run between its two sides.
        if (kind == Wait::Block && interleaved()) {
            f.wait = Wait::Yield;
            suspend(f);
        }
        return;
    }
    f.wait = kind;
    f.gen = gen;
    suspend(f);
}

// No cp.async and no wgmma in flight: as AsyncCopies{} and WgmmaState{}, keeping the
// vectors' memory for the next thread.
void clear_async(Fiber& f) {
    f.copies.copies.clear();
    f.copies.committed = 0;
    f.wgmma.ops.clear();
    f.wgmma.committed = 0;
    f.wgmma.issued = 0;
    f.wgmma.fence_due = WgmmaState{}.fence_due;
    f.reduces.ops.clear();
    f.reduces.committed = 0;
}

[[noreturn]] void fiber_entry() {
    BlockRun& r = *g_run;
    clear_async(*r.cur);  // a thread starts with no cp.async or wgmma in flight
    try {
        (*r.body)();
    } catch (const std::exception& e) {
        if (r.failure.empty()) r.failure = std::string("exception in a kernel thread: ") + e.what();
    } catch (...) {
        if (r.failure.empty()) r.failure = "exception in a kernel thread";
    }
    Fiber& f = *r.cur;
    // A wgmma whose wait the thread never reached writes its registers after the thread is
    // gone: undefined on the GPU (the results are lost), a missing commit_group or
    // wait_group here.
    if (!f.wgmma.ops.empty() && r.failure.empty()) {
        std::size_t uncommitted = 0;
        for (const WgmmaOp& op : f.wgmma.ops) uncommitted += op.group >= f.wgmma.committed;
        r.failure = "a thread exited with " + std::to_string(f.wgmma.ops.size()) +
                    " wgmma.mma_async still in flight (" + std::to_string(uncommitted) +
                    " never committed): a wgmma.commit_group or wgmma.wait_group is missing";
    }
    // A bulk reduction still reading shared memory when its thread (and perhaps its block)
    // is gone: the kernel must wait for its bulk groups (cp.async.bulk.wait_group) first.
    if (!f.reduces.ops.empty() && r.failure.empty())
        r.failure = "a thread exited with " + std::to_string(f.reduces.ops.size()) +
                    " bulk reductions (cp.reduce.async.bulk) never waited for: a cp.async.bulk.wait_group is missing";
    // cp.async copies the thread never waited for are dropped, not landed: no thread may
    // read them (another thread sees them only after this one's wait and a barrier), so
    // a kernel that relies on them reads the stale (or NaN-poisoned) destination here.
    // Pending wgmma are dropped too (reported above).
    clear_async(f);
    f.wait = Wait::Done;
    --r.block.live;
    --r.warps[static_cast<std::size_t>(f.warp)].live;
    --r.groups[static_cast<std::size_t>(f.warp / 4)].live;
    try_release(r.block);
    try_release(r.warps[static_cast<std::size_t>(f.warp)]);
    try_release(r.groups[static_cast<std::size_t>(f.warp / 4)]);
    suspend(f);  // never resumed (a Done fiber is not runnable)
    __builtin_unreachable();
}

// A fiber as Fiber{} makes it, but keeping its queues' memory.
void reset_fiber(Fiber& f) {
    f.sp = nullptr;
    f.tid = uint3{0, 0, 0};
    f.warp = f.lane = 0;
    f.wait = Wait::None;
    f.gen = 0;
    f.named = 0;
    f.wgmma_seq = 0;
    clear_async(f);
}

// A fresh fiber's stack, laid out as gpt_emu_switch leaves a suspended one: control words,
// six zeroed registers, then fiber_entry as the return address (and a null one above it,
// so fiber_entry starts with the stack alignment of a called function).
void* initial_stack(void* stack_base) {
    auto top = (reinterpret_cast<std::uintptr_t>(stack_base) + kStackBytes) & ~std::uintptr_t{15};
    auto* sp = reinterpret_cast<std::uint64_t*>(top);
    *--sp = 0;
    *--sp = reinterpret_cast<std::uint64_t>(&fiber_entry);
    for (int i = 0; i < 6; ++i) *--sp = 0;
    *--sp = std::uint64_t{0x1f80} | (std::uint64_t{0x037f} << 32);  // default MXCSR, x87 CW
    return sp;
}

bool runnable(const BlockRun& r, const Fiber& f) {
    switch (f.wait) {
        case Wait::None: return true;
        case Wait::Block: return r.block.gen != f.gen;
        case Wait::Warp: return r.warps[static_cast<std::size_t>(f.warp)].gen != f.gen;
        case Wait::Group: return r.groups[static_cast<std::size_t>(f.warp / 4)].gen != f.gen;
        case Wait::Named: return r.named[f.named].gen != f.gen;
        case Wait::Wgmma: return r.wgmma_issues[static_cast<std::size_t>(f.warp / 4)].issued_by_all(f.wgmma_seq);
        case Wait::Yield: return false;  // until the next round
        case Wait::Spin: return false;   // likewise
        case Wait::Done: return false;
    }
    return false;
}

std::string describe_deadlock(const BlockRun& r) {
    int at_block = 0, at_group = 0, spinning = 0, at_named = 0, at_wgmma = 0;
    std::ostringstream warps;
    for (const Fiber& f : r.fibers) {
        if (f.wait == Wait::Block) ++at_block;
        if (f.wait == Wait::Spin) ++spinning;
        if (f.wait == Wait::Wgmma) ++at_wgmma;
        if (f.wait == Wait::Named) ++at_named;
        if (f.wait == Wait::Group) ++at_group;
        if (f.wait == Wait::Warp && f.lane == 0) warps << " " << f.warp;
    }
    std::ostringstream m;
    m << "barrier deadlock in block (" << g_block_idx.x << "," << g_block_idx.y << ","
      << g_block_idx.z << "): " << at_block << " of " << r.block.live
      << " live threads wait at __syncthreads while others wait at a warp-level barrier "
         "(__syncwarp, shuffle, mma.sync or ldmatrix) their warp cannot complete";
    if (!warps.str().empty()) m << " (warps" << warps.str() << ")";
    if (at_group > 0) m << "; " << at_group << " wait at a setmaxnreg their warpgroup cannot complete";
    if (at_wgmma > 0)
        m << "; " << at_wgmma << " wait at a wgmma.wait_group for a wgmma.mma_async that other warps of their "
          << "warpgroup never issue (exited or elsewhere: the instruction needs all four warps)";
    if (at_named > 0)
        m << "; " << at_named << " wait at a named barrier (bar.sync) that too few threads reach";
    if (spinning > 0)
        m << "; " << spinning << " spin at an mbarrier wait whose phase can never complete "
          << "(arrivals or transaction bytes missing)";
    return m.str();
}

// Prepares block `idx`'s fibers on the stacks from `stack_base` on; an error message or "".
std::string start_block(BlockRun& r, const dim3 block, uint3 idx, const std::function<void()>& body,
                        std::size_t stack_base) {
    const int n = static_cast<int>(block.x * block.y * block.z);
    r.body = &body;
    r.idx = idx;
    // Fibers are reset in place (their cp.async and wgmma queues keep their capacity):
    // destroying and rebuilding them was a few percent of a launch.
    r.fibers.resize(static_cast<std::size_t>(n));
    for (Fiber& f : r.fibers) reset_fiber(f);
    const int nwarps = (n + 31) / 32;
    r.warps.assign(static_cast<std::size_t>(nwarps), Barrier{});
    r.slots.assign(static_cast<std::size_t>(nwarps) * 64, 0);
    r.slot_lanes.assign(static_cast<std::size_t>(nwarps) * 2, LaneMask{});
    r.gather.resize(static_cast<std::size_t>(nwarps) * 64 * kWarpGatherMax);
    r.gather_lanes.assign(static_cast<std::size_t>(nwarps) * 2, LaneMask{});
    r.group_gather.clear();
    r.group_gather_gen.clear();
    r.bulk.clear();
    r.idle_rounds = 0;
    for (auto& nb : r.named) nb = BlockRun::Named{};
    const int ngroups = (n + 127) / 128;
    r.groups.assign(static_cast<std::size_t>(ngroups), Barrier{});
    r.wgmma_issues.resize(static_cast<std::size_t>(ngroups));
    for (WgmmaIssues& w : r.wgmma_issues) {
        w.base = 0;
        w.pending.clear();  // keeps its capacity for the next block
    }
    for (int g = 0; g < ngroups; ++g) r.groups[static_cast<std::size_t>(g)].live = std::min(128, n - 128 * g);
    r.statics.clear();
    r.failure.clear();
    r.block = Barrier{};
    r.block.live = n;
    for (int w = 0; w < nwarps; ++w) r.warps[static_cast<std::size_t>(w)].live = std::min(32, n - 32 * w);
    for (int t = 0; t < n; ++t) {
        Fiber& f = r.fibers[static_cast<std::size_t>(t)];
        const unsigned ut = static_cast<unsigned>(t);
        f.tid = uint3{ut % block.x, ut / block.x % block.y, ut / (block.x * block.y)};
        f.warp = t / 32;
        f.lane = t % 32;
        void* stack = g_stacks.get(stack_base + static_cast<std::size_t>(t));
        if (!stack) return "cannot map a fiber stack";
        f.sp = initial_stack(stack);
    }
    return {};
}

// Makes r the running block (its index, shared memory and static __shared__ bytes).
void enter_block(BlockRun& r) {
    g_run = &r;
    g_block_idx = r.idx;
    g_dynamic_smem = r.smem;
    for (auto& st : r.statics) std::memcpy(st.p, st.saved.data(), st.bytes);
}
void leave_block(BlockRun& r) {
    for (auto& st : r.statics) std::memcpy(st.saved.data(), st.p, st.bytes);
    g_run = nullptr;
}

// Resumes every fiber of the running block that can run, once, in the schedule's order
// (under warps: each warp until it blocks); false when none could (a deadlock).
bool run_round(BlockRun& r) {
    for (Fiber& f : r.fibers)
        if (f.wait == Wait::Yield || f.wait == Wait::Spin) f.wait = Wait::None;
    r.round = BlockRun::Round{};
    r.round.warps = schedule() == Schedule::Warps;
    r.round.reverse = schedule() == Schedule::Reverse;
    r.round.block_gen = r.block.gen;
    r.round.t = std::min(static_cast<int>(r.fibers.size()), 32) - 1;
    // The first runnable fiber runs; each that suspends hands over to the next (suspend),
    // the last back here.
    if (Fiber* first = next_fiber(r)) {
        make_current(r, *first);
        gpt_emu_switch(&r.sched_sp, first->sp);
    }
    const bool ran = r.round.ran, progress = r.round.progress;
    // A spinning thread's try_wait lands the copies it waits for, so a round in which only
    // spinners ran changed nothing they wait for: the next would be the same (a GPU hangs).
    r.idle_rounds = progress ? 0 : r.idle_rounds + 1;
    return ran && r.idle_rounds < 2;
}

}  // namespace

void block_barrier() { arrive(g_run->block, Wait::Block); }
void warp_barrier() { arrive(g_run->warps[static_cast<std::size_t>(g_run->cur->warp)], Wait::Warp); }
int lane_id() { return g_run->cur->lane; }

// Two slot sets used alternately: a lane writing exchange k+2's slot has passed exchange
// k+1's barrier, so every lane has read exchange k by then, and one barrier per exchange
// suffices. The set follows the warp barrier's generation, the same for every lane.
std::uint64_t warp_exchange(std::uint64_t v, int src_lane, std::uint32_t mask) {
    BlockRun& r = *g_run;
    const std::size_t warp = static_cast<std::size_t>(r.cur->warp);
    const unsigned gen = r.warps[warp].gen;
    const std::size_t base = ((gen & 1u) * r.warps.size() + warp) * 32;
    const int lane = r.cur->lane;
    r.slots[base + static_cast<std::size_t>(lane)] = v;
    LaneMask& offered = r.slot_lanes[(gen & 1u) * r.warps.size() + warp];
    offered.offer(gen, lane);
    warp_barrier();  // every lane has written
    // The mask must name the calling lane and only lanes that execute this same shuffle: a
    // lane that exited, lies past a partial warp's end or waits elsewhere makes the
    // shuffle undefined on a GPU (a hang or garbage), and here a stale slot.
    // Checked before any message is built: an ostringstream per shuffle is not free.
    const std::uint32_t missing = mask & ~offered.at(gen);
    const int absent = missing ? __builtin_ctz(missing) : -1;
    if (!(mask >> lane & 1u) || absent >= 0) {
        std::ostringstream m;
        m << "__shfl_*_sync(0x" << std::hex << mask << std::dec << ") in warp " << warp << ": ";
        if (!(mask >> lane & 1u))
            m << "lane " << lane << " is not in its own mask";
        else
            m << "the mask names lane " << absent
              << ", which does not take part (exited, past the warp's end, or at a __syncwarp)";
        throw std::runtime_error(m.str());
    }
    if (src_lane < 0 || src_lane >= 32) return v;
    return r.slots[base + static_cast<std::size_t>(src_lane)];
}

void check_launch_bounds(unsigned max_threads) {
    const unsigned threads = g_block_dim.x * g_block_dim.y * g_block_dim.z;
    if (threads > max_threads)
        throw std::runtime_error("block of " + std::to_string(threads) +
                                 " threads exceeds the kernel's __launch_bounds__(" +
                                 std::to_string(max_threads) + ")");
}

bool check_kernel_pointer(int index, const void* p) {
    const auto* b = static_cast<const unsigned char*>(p);
    if (is_device(b, 1) || is_device(b - 1, 1)) return true;
    std::ostringstream m;
    m << "kernel argument " << index << " (" << p << ") is "
      << (in_arena(p) ? "device memory outside every live allocation (freed?)" : "not device memory (a host pointer?)");
    set_error(cudaErrorInvalidValue, m.str().c_str());
    return false;
}

void poison_static_shared(void* p, std::size_t bytes) {
    // Static shared memory is a function static shared by all blocks; on a GPU each block's
    // starts as garbage. The first thread of a block to pass the declaration fills it with
    // 0xff (NaN), before any thread of the block can have written it (writers pass the
    // declaration first, and a block's fibers run one at a time). The block then keeps the
    // variable's bytes while other blocks run (enter_block, leave_block).
    std::vector<BlockRun::Static>& statics = g_run->statics;
    for (const auto& st : statics)
        if (st.p == p) return;
    statics.push_back(BlockRun::Static{p, bytes, std::vector<unsigned char>(bytes)});
    std::memset(p, 0xff, bytes);
}

void atomic_point() {
    // Under the interleaved schedules an atomic ends the thread's round: other blocks'
    // threads run (and their atomics land) before it goes on.
    if (!g_run || !interleaved()) return;
    Fiber& f = *g_run->cur;
    f.wait = Wait::Yield;
    suspend(f);
}

// The gather's sets alternate by warp generation for the reason warp_exchange's do. A slot's
// generation tag tells which lanes wrote at this barrier: a stale slot has an older tag.
std::uint32_t warp_gather_view(const void* mine, std::size_t bytes, const unsigned char** all) {
    if (bytes > kWarpGatherMax) throw std::logic_error("gpt_emu::warp_gather: more than kWarpGatherMax bytes");
    BlockRun& r = *g_run;
    const std::size_t nwarps = r.warps.size();
    const std::size_t warp = static_cast<std::size_t>(r.cur->warp);
    const unsigned gen = r.warps[warp].gen;
    const std::size_t base = ((gen & 1u) * nwarps + warp) * 32;
    const std::size_t me = base + static_cast<std::size_t>(r.cur->lane);
    std::memcpy(&r.gather[me * kWarpGatherMax], mine, bytes);
    LaneMask& offered = r.gather_lanes[(gen & 1u) * nwarps + warp];
    offered.offer(gen, r.cur->lane);
    warp_barrier();  // every lane has written
    *all = &r.gather[base * kWarpGatherMax];
    return offered.at(gen);
}

std::uint32_t warp_gather(const void* mine, std::size_t bytes, void* all) {
    const unsigned char* view = nullptr;
    const std::uint32_t mask = warp_gather_view(mine, bytes, &view);
    auto* out = static_cast<unsigned char*>(all);
    for (std::size_t l = 0; l < 32; ++l) std::memcpy(out + l * bytes, view + l * kWarpGatherMax, bytes);
    return mask;
}

AsyncCopies& current_async_copies() { return g_run->cur->copies; }
BulkReduces& current_bulk_reduces() { return g_run->cur->reduces; }
std::vector<BulkCopy>& current_bulk_copies() { return g_run->bulk; }

// bar.sync / bar.arrive with a barrier id and a thread count: the barrier completes when
// `count` threads have arrived (exited threads do not count, as on the GPU, where a
// barrier short of arrivals hangs: here the launch fails). Every arrival of one round must
// name the same count.
void named_barrier(int id, int count, bool wait) {
    BlockRun& r = *g_run;
    if (id < 1 || id > 15)
        throw std::runtime_error("bar.sync/bar.arrive: barrier " + std::to_string(id) +
                                 " is not 1..15 (0 is __syncthreads')");
    const int threads = static_cast<int>(r.fibers.size());
    if (count <= 0 || count % 32 != 0 || count > (threads + 31) / 32 * 32)
        throw std::runtime_error("bar.sync/bar.arrive: thread count " + std::to_string(count) +
                                 " is not a multiple of 32 within the block's " + std::to_string(threads));
    BlockRun::Named& b = r.named[id];
    if (b.arrived > 0 && b.expected != count)
        throw std::runtime_error("bar.sync/bar.arrive " + std::to_string(id) + ": arrivals name thread counts " +
                                 std::to_string(b.expected) + " and " + std::to_string(count));
    b.expected = count;
    const unsigned gen = b.gen;
    if (++b.arrived == count) {
        b.arrived = 0;
        ++b.gen;
        return;
    }
    if (!wait) return;
    Fiber& f = *r.cur;
    f.wait = Wait::Named;
    f.named = id;
    f.gen = gen;
    suspend(f);
}

void spin_point() {
    Fiber& f = *g_run->cur;
    f.wait = Wait::Spin;
    suspend(f);
}
WgmmaState& current_wgmma() { return g_run->cur->wgmma; }
WgmmaIssues& current_wgmma_issues() { return g_run->wgmma_issues[static_cast<std::size_t>(g_run->cur->warp / 4)]; }
bool warpgroup_complete() {
    return static_cast<int>(g_run->fibers.size()) >= (g_run->cur->warp / 4 + 1) * 128;
}
void wgmma_wait_issued(std::uint64_t seq) {
    BlockRun& r = *g_run;
    Fiber& f = *r.cur;
    f.wgmma_seq = seq;
    f.wait = Wait::Wgmma;
    if (runnable(r, f)) {
        f.wait = Wait::None;
        return;
    }
    suspend(f);  // resumed once the other warps have issued it (runnable)
}
std::size_t dynamic_smem_bytes() { return g_smem_bytes; }
int warpgroup_thread() { return (g_run->cur->warp % 4) * 32 + g_run->cur->lane; }

// As warp_gather, over the caller's warpgroup and its barrier.
void warpgroup_gather(const void* mine, std::size_t bytes, void* all, unsigned long long (&mask)[2]) {
    if (bytes > kWarpgroupGatherMax)
        throw std::logic_error("gpt_emu::warpgroup_gather: more than kWarpgroupGatherMax bytes");
    BlockRun& r = *g_run;
    const std::size_t ngroups = r.groups.size();
    if (r.group_gather.empty()) {
        r.group_gather.resize(ngroups * 256 * kWarpgroupGatherMax);
        r.group_gather_gen.assign(ngroups * 256, 0);
    }
    const std::size_t group = static_cast<std::size_t>(r.cur->warp / 4);
    Barrier& b = r.groups[group];
    const unsigned gen = b.gen;
    const std::size_t base = ((gen & 1u) * ngroups + group) * 128;
    const std::size_t me = base + static_cast<std::size_t>(warpgroup_thread());
    std::memcpy(&r.group_gather[me * kWarpgroupGatherMax], mine, bytes);
    r.group_gather_gen[me] = gen + 1;
    arrive(b, Wait::Group);  // every thread of the warpgroup has written
    auto* out = static_cast<unsigned char*>(all);
    mask[0] = mask[1] = 0;
    for (std::size_t t = 0; t < 128; ++t) {
        std::memcpy(out + t * bytes, &r.group_gather[(base + t) * kWarpgroupGatherMax], bytes);
        if (r.group_gather_gen[base + t] == gen + 1) mask[t / 64] |= 1ull << (t % 64);
    }
}
bool async_copies_land_at_issue() { return schedule() == Schedule::Warps; }
bool tma_loads_land_at_issue() { return schedule() != Schedule::Reverse; }
bool random_drain() { return schedule() == Schedule::Warps; }

// The order a grid's blocks run in (each runs to completion before the next starts; CUDA
// promises no order): in index order under the forward schedule, last to first under
// reverse, and under warps a permutation k -> (a k + c) mod n that changes with every
// launch, so a kernel that reads what another block of the same launch writes, without an
// atomic handshake (a "last block" reduction that assumes the highest index runs last),
// computes a different result.
class BlockOrder {
public:
    explicit BlockOrder(std::uint64_t n) : n_(n) {
        static std::uint64_t launches = 0;
        ++launches;
        if (schedule() != Schedule::Warps || n < 2) return;
        // a: a prime that does not divide n (a prime below 2^31 divides it or is coprime).
        for (std::uint64_t p : {2654435761u, 2246822519u, 3266489917u, 668265263u, 374761393u})
            if (n % p != 0) {
                a_ = p;
                break;
            }
        c_ = (launches * 40503u) % n;
    }
    std::uint64_t operator()(std::uint64_t k) const {
        if (schedule() == Schedule::Reverse) return n_ - 1 - k;
        if (a_ == 0) return k;
        return static_cast<std::uint64_t>((static_cast<unsigned __int128>(a_) * k + c_) % n_);
    }

private:
    std::uint64_t n_, a_ = 0, c_ = 0;
};

namespace {

// Runs a launch's blocks (stream work, with device memory open).
void run_grid(dim3 grid, dim3 block, std::size_t smem, const std::function<void()>& body) {
    std::lock_guard lock(g_launch_mutex);
    DeviceAccess access;
    // Dynamic shared memory starts as garbage on a GPU: 0xff bytes read as NaN. A red zone
    // of 0xff after it shows a block that wrote past the size it was launched with.
    constexpr std::size_t kSmemRedZone = 256;
    g_grid_dim = grid;
    g_block_dim = block;
    g_smem_bytes = smem;
    const std::uint64_t nblocks = std::uint64_t{grid.x} * grid.y * grid.z;
    const BlockOrder order(nblocks);
    // Blocks alive at once (one under forward), each with its own dynamic shared memory.
    const int nlive = static_cast<int>(std::min<std::uint64_t>(interleaved() ? kLiveBlocks : 1, nblocks));
    std::vector<std::unique_ptr<BlockRun>> live(static_cast<std::size_t>(nlive));
    std::vector<unsigned char*> slot_smem(static_cast<std::size_t>(nlive));
    std::vector<std::vector<unsigned char>> slot_buf(static_cast<std::size_t>(nlive));
    for (int s = 0; s < nlive; ++s) {
        auto& buf = slot_buf[static_cast<std::size_t>(s)];
        // 1024-byte aligned, as `extern __shared__ __align__(1024)` asks (rewrite_cu.pl drops
        // the attribute): the 128-byte swizzle of wgmma tiles repeats every 1024 bytes.
        buf.assign(smem + 1024 + kSmemRedZone, 0xff);
        slot_smem[static_cast<std::size_t>(s)] = reinterpret_cast<unsigned char*>(
            (reinterpret_cast<std::uintptr_t>(buf.data()) + 1023) & ~std::uintptr_t{1023});
    }
    std::uint64_t next = 0;
    const std::size_t nthreads = std::size_t{block.x} * block.y * block.z;
    auto admit = [&](int s) -> std::string {
        auto& r = live[static_cast<std::size_t>(s)];
        if (next == nblocks) {
            r.reset();
            return {};
        }
        const std::uint64_t b = order(next++);
        const unsigned x = static_cast<unsigned>(b % grid.x), y = static_cast<unsigned>(b / grid.x % grid.y),
                       z = static_cast<unsigned>(b / (std::uint64_t{grid.x} * grid.y));
        if (!r) r = std::make_unique<BlockRun>();
        r->smem = slot_smem[static_cast<std::size_t>(s)];
        if (smem) std::fill(r->smem, r->smem + smem, static_cast<unsigned char>(0xff));
        return start_block(*r, block, uint3{x, y, z}, body, static_cast<std::size_t>(s) * nthreads);
    };
    for (int s = 0; s < nlive; ++s) {
        const std::string err = admit(s);
        if (!err.empty()) {
            set_error(cudaErrorLaunchFailure, ("kernel failed: " + err).c_str());
            return;
        }
    }
    for (bool any = true; any;) {
        any = false;
        for (int s = 0; s < nlive; ++s) {
            BlockRun* r = live[static_cast<std::size_t>(s)].get();
            if (!r) continue;
            any = true;
            enter_block(*r);
            const bool ran = run_round(*r);
            // A thread's exception is the cause of whatever deadlock its absence leaves.
            std::string err = !r->failure.empty() ? r->failure : ran ? std::string{} : describe_deadlock(*r);
            leave_block(*r);
            if (err.empty() && r->block.live > 0) continue;
            if (err.empty()) err = r->failure;
            if (!err.empty()) {
                set_error(cudaErrorLaunchFailure, ("kernel failed: " + err).c_str());
                return;
            }
            if (!r->bulk.empty()) {
                std::ostringstream m;
                m << "kernel failed: block " << r->idx.x << "," << r->idx.y << "," << r->idx.z << " finished with "
                  << r->bulk.size() << " TMA copies never waited for (their mbarrier phase was not awaited)";
                set_error(cudaErrorLaunchFailure, m.str().c_str());
                return;
            }
            // Arrivals no bar.sync completed: a bar.arrive too many (a producer's or a
            // ping-pong's turn passed once more than it is taken), whose count would carry
            // into the barrier's next use if the block went on.
            for (int id = 1; id < 16; ++id)
                if (r->named[id].arrived > 0) {
                    std::ostringstream m;
                    m << "kernel failed: block " << r->idx.x << "," << r->idx.y << "," << r->idx.z << " finished with "
                      << r->named[id].arrived << " of " << r->named[id].expected << " arrivals at named barrier " << id
                      << " that no bar.sync completed (a bar.arrive or bar.sync too many)";
                    set_error(cudaErrorLaunchFailure, m.str().c_str());
                    return;
                }
            const unsigned char* zone = r->smem + smem;
            for (std::size_t i = 0; i < kSmemRedZone; ++i)
                if (zone[i] != 0xff) {
                    std::ostringstream m;
                    m << "kernel wrote out of bounds: byte " << i << " past the end of its " << smem
                      << " bytes of dynamic shared memory (block " << r->idx.x << "," << r->idx.y << ","
                      << r->idx.z << ")";
                    set_error(cudaErrorLaunchFailure, m.str().c_str());
                    return;
                }
            err = admit(s);
            if (!err.empty()) {
                set_error(cudaErrorLaunchFailure, ("kernel failed: " + err).c_str());
                return;
            }
        }
    }
    const std::string overflow = red_zone_violation();
    if (!overflow.empty())
        set_error(cudaErrorLaunchFailure, ("kernel wrote out of bounds: " + overflow).c_str());
}


}  // namespace

void launch_kernel(const void* kernel, dim3 grid, dim3 block, std::size_t smem, cudaStream_t stream,
                   const std::function<void()>& body) {
    const std::uint64_t threads = std::uint64_t{block.x} * block.y * block.z;
    std::ostringstream bad;
    if (threads == 0 || threads > kMaxThreads || block.z > 64)
        bad << "block of " << block.x << "x" << block.y << "x" << block.z << " threads";
    else if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.y > 65535 || grid.z > 65535 ||
             grid.x > 2147483647u)
        bad << "grid of " << grid.x << "x" << grid.y << "x" << grid.z << " blocks";
    if (!bad.str().empty()) {
        set_error(cudaErrorInvalidConfiguration, ("invalid launch configuration: " + bad.str()).c_str());
        return;
    }
    const std::size_t smem_limit = max_dynamic_smem(kernel);
    if (smem > smem_limit) {
        std::ostringstream m;
        m << "kernel launched with " << smem << " bytes of dynamic shared memory; its limit is "
          << smem_limit << " (cudaFuncSetAttribute(MaxDynamicSharedMemorySize) raises the 48 KiB "
          << "default up to " << max_optin_smem() << " on the emulated device)";
        set_error(cudaErrorInvalidValue, m.str().c_str());
        return;
    }
    // The grid runs when its stream is forced (runtime.cpp); a failure then becomes the
    // error the synchronisation returns, as a GPU reports it.
    if (!stream_enqueue(stream, [grid, block, smem, body] { run_grid(grid, block, smem, body); })) return;
}

}  // namespace gpt_emu
