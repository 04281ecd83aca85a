// The emulated CUDA runtime: device memory arena, streams and events, errors, device
// properties (see include/cuda_runtime.h and include/gpt_emu/memory.hpp).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gpt_emu/memory.hpp"
#include "runtime_internal.hpp"

namespace gpt_emu {

namespace {

// ---- errors ----------------------------------------------------------------------------

thread_local cudaError_t t_last = cudaSuccess;
thread_local std::string t_message;

const char* base_message(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorInvalidDevicePointer: return "invalid device pointer";
        case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidResourceHandle: return "invalid resource handle";
        case cudaErrorNotReady: return "device not ready";
        case cudaErrorLaunchFailure: return "unspecified launch failure";
    }
    return "unknown error";
}

cudaError_t fail(cudaError_t e, const std::string& message) {
    set_error(e, message.c_str());
    return e;
}

// ---- the arena -------------------------------------------------------------------------

constexpr std::size_t kAlign = 256;  // cudaMalloc's alignment
// Bytes after each allocation's end kept at 0xff, and checked after every kernel: a write
// past the end of a buffer fails the launch (compute-sanitizer's memcheck, for writes).
constexpr std::size_t kRedZone = 256;
constexpr unsigned char kGarbage = 0xff;  // new memory and red zones: NaN in every float type

struct Alloc {
    std::size_t rounded;    // the block, red zone included
    std::size_t requested;  // what the caller may touch (checked when work is issued)
    std::size_t zone;       // where the red zone starts (moves in stream order: set_extent)
};

struct Arena {
    std::mutex mu;
    char* base = nullptr;
    std::size_t size = 0;
    std::size_t top = 0;        // bump pointer
    std::size_t open_end = 0;   // bytes currently readable/writable
    int depth = 0;              // DeviceAccess nesting
    int pending = 0;            // asynchronous operations in flight
    std::map<char*, Alloc> live;
    std::multimap<std::size_t, char*> free_blocks;  // exact-size reuse
};

Arena& arena();

// The arena is opened and closed around every kernel and copy. With 4 KiB pages each
// mprotect rewrites one page-table entry per page in use, which was most of the emulator's
// system time; the arena is therefore 2 MiB aligned, asks for transparent huge pages, and
// changes protection in whole 2 MiB units, so the kernel flips one entry per 2 MiB instead.
constexpr std::size_t kHugePage = std::size_t{2} << 20;
std::size_t page_up(std::size_t n) { return (n + kHugePage - 1) / kHugePage * kHugePage; }

void set_open(Arena& a, bool open) {
    const std::size_t end = open ? page_up(a.top) : a.open_end;
    if (end == 0) return;
    mprotect(a.base, end, open ? PROT_READ | PROT_WRITE : PROT_NONE);
    a.open_end = open ? end : 0;
}

void on_segv(int sig, siginfo_t* info, void*) {
    Arena& a = arena();
    char* addr = static_cast<char*>(info->si_addr);
    char msg[256];
    int len = 0;
    if (addr >= a.base && addr < a.base + a.size)
        len = std::snprintf(msg, sizeof msg,
                            "gpt_emu: host code accessed emulated device memory at %p "
                            "(a device pointer dereferenced on the host)\n", static_cast<void*>(addr));
    else
        len = std::snprintf(msg, sizeof msg, "gpt_emu: segmentation fault at %p (a fiber stack "
                            "overflow shows here too)\n", static_cast<void*>(addr));
    if (len > 0) (void)!write(2, msg, static_cast<std::size_t>(len));
    signal(sig, SIG_DFL);
    raise(sig);
}

Arena& arena() {
    static Arena* a = [] {
        auto* x = new Arena;  // never destroyed: kernels may run from static destructors
        const char* gb = std::getenv("GPT_EMU_DEVICE_MEMORY_GB");
        x->size = static_cast<std::size_t>((gb ? std::atof(gb) : 16.0) * double(std::size_t{1} << 30));
        x->size = page_up(x->size);
        void* m = mmap(nullptr, x->size + kHugePage, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) {
            std::fprintf(stderr, "gpt_emu: cannot reserve %zu bytes for device memory\n", x->size);
            std::abort();
        }
        x->base = reinterpret_cast<char*>(page_up(reinterpret_cast<std::uintptr_t>(m)));
        (void)madvise(x->base, x->size, MADV_HUGEPAGE);  // a hint: without THP only speed differs
        struct sigaction sa {};
        sa.sa_sigaction = on_segv;
        sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGSEGV, &sa, nullptr);
        return x;
    }();
    return *a;
}

// ---- streams and events ----------------------------------------------------------------
//
// Work is deferred per stream: a kernel, copy, memset, matmul or a collective's landing is
// queued on its stream and runs, in stream order, only when something forces it (a stream,
// event or device synchronisation, a blocking copy, an event query, an NCCL operation that
// reads its buffers, work on another stream ordered after it by cudaStreamWaitEvent or the
// legacy default stream). Work a program forgot to order after its producer therefore runs
// before the producer whenever the forcing order allows, and reads stale bytes, as a GPU
// may when the two streams overlap. cudaDeviceSynchronize drains all streams newest work
// first (GPT_EMU_SCHEDULE=warps: in a pseudo-random interleaving), respecting only stream
// order and the dependencies recorded between streams.

struct Stream;
struct Item {
    std::uint64_t seq;            // position on its stream
    std::uint64_t issued;         // position among all streams' work
    bool holds_arena;             // stream_add_pending: the arena stays open until it runs
    std::function<void()> fn;
    bool send = false;            // a posted send's completion: may be parked
};
struct Stream {
    bool blocking = true;
    std::uint64_t added = 0, completed = 0;
    std::deque<Item> pending;
    std::deque<Item> parked;  // send completions passed by stream_complete_work, in order
};
struct Event {
    Stream* stream = nullptr;
    std::uint64_t seq = 0;
    std::chrono::steady_clock::time_point when{};
};

std::recursive_mutex g_streams_mu;
Stream g_legacy;
std::set<Stream*> g_streams;
std::vector<Stream*> g_stream_order;  // creation order, for a reproducible drain
std::set<Event*> g_events;
std::map<const void*, std::size_t> g_smem_limits;
int g_device = 0;
bool g_sm90 = false;  // emulate_sm90
std::uint64_t g_issued = 0;
// The first error deferred work reported since the last synchronisation returned one.
cudaError_t g_deferred_error = cudaSuccess;

Stream* find_stream(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &g_legacy;
    auto* p = reinterpret_cast<Stream*>(s);
    return g_streams.count(p) ? p : nullptr;
}
bool alive(const Stream* s) { return s == &g_legacy || g_streams.count(const_cast<Stream*>(s)) > 0; }

void run_item(Stream& s, Item it) {
    const cudaError_t before = t_last;
    t_last = cudaSuccess;
    it.fn();
    if (t_last != cudaSuccess && g_deferred_error == cudaSuccess) g_deferred_error = t_last;
    if (t_last == cudaSuccess) t_last = before;
    s.completed = std::max(s.completed, it.seq);
    if (it.holds_arena) {
        std::lock_guard lock(arena().mu);
        Arena& a = arena();
        if (--a.pending == 0 && a.depth == 0) set_open(a, false);
    }
}

void run_front(Stream& s) {
    Item it = std::move(s.pending.front());
    s.pending.pop_front();
    run_item(s, std::move(it));
}

bool g_parking = false;  // inside stream_complete_work

// A run of queued work keeps device memory open from its first item to its last (each
// kernel, copy and matmul opened and closed it itself: two mprotect calls and a TLB
// shootdown per item). No host code of the program runs in between: only queued work.
void complete_upto(Stream& s, std::uint64_t seq) {
    std::optional<DeviceAccess> open;
    while (!g_parking && !s.parked.empty() && s.parked.front().seq <= seq) {
        Item it = std::move(s.parked.front());
        s.parked.pop_front();
        if (!open) open.emplace();
        run_item(s, std::move(it));
    }
    while (!s.pending.empty() && s.pending.front().seq <= seq) {
        if (g_parking && s.pending.front().send) {
            s.parked.push_back(std::move(s.pending.front()));
            s.pending.pop_front();
            continue;
        }
        if (!open) open.emplace();
        run_front(s);
    }
}

// Queues fn on s; `deps` first make s wait for other streams' work issued so far.
void enqueue(Stream& s, std::function<void()> fn, bool holds_arena) {
    // The legacy default stream waits for every blocking stream, and they wait for it.
    auto wait_for = [&s](Stream* o) {
        if (o == &s || (o->pending.empty() && o->parked.empty())) return;
        const std::uint64_t seq = o->added;
        s.pending.push_back(Item{++s.added, ++g_issued, false, [o, seq] {
                                     if (alive(o)) complete_upto(*o, seq);
                                 }});
    };
    if (&s == &g_legacy) {
        for (Stream* o : g_stream_order)
            if (o->blocking) wait_for(o);
    } else if (s.blocking) {
        wait_for(&g_legacy);
    }
    s.pending.push_back(Item{++s.added, ++g_issued, holds_arena, std::move(fn)});
}

// Runs everything pending: the stream whose next item was issued last goes first (or a
// pseudo-random one), one item at a time, so work not ordered after its producer runs
// before it.
void drain_all() {
    static std::uint64_t rng = 0x9e3779b97f4a7c15ull;
    std::optional<DeviceAccess> open;  // as in complete_upto
    for (;;) {
        std::vector<Stream*> ready;
        auto flush_parked = [](Stream& o) { complete_upto(o, o.parked.empty() ? 0 : o.parked.back().seq); };
        flush_parked(g_legacy);
        for (Stream* o : g_stream_order) flush_parked(*o);
        if (!g_legacy.pending.empty()) ready.push_back(&g_legacy);
        for (Stream* o : g_stream_order)
            if (!o->pending.empty()) ready.push_back(o);
        if (ready.empty()) return;
        Stream* pick = ready.front();
        if (random_drain()) {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            pick = ready[rng % ready.size()];
        } else {
            for (Stream* o : ready)
                if (o->pending.front().issued > pick->pending.front().issued) pick = o;
        }
        if (!open) open.emplace();
        run_front(*pick);
    }
}

cudaError_t take_deferred_error() {
    const cudaError_t e = g_deferred_error;
    g_deferred_error = cudaSuccess;
    return e;
}

int device_count() {
    const char* e = std::getenv("GPT_EMU_DEVICES");
    return e ? std::atoi(e) : 1;
}

}  // namespace

void set_error(cudaError_t err, const char* message) {
    t_last = err;
    t_message = std::string(base_message(err)) + ": " + message;
}

void* device_alloc(std::size_t bytes) {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    const std::size_t rounded = (bytes + kRedZone + kAlign - 1) / kAlign * kAlign;
    char* p = nullptr;
    auto it = a.free_blocks.find(rounded);
    if (it != a.free_blocks.end()) {
        p = it->second;
        a.free_blocks.erase(it);
    } else {
        if (a.top + rounded > a.size) return nullptr;
        p = a.base + a.top;
        a.top += rounded;
    }
    a.live[p] = Alloc{rounded, bytes, bytes};
    // New memory holds garbage on a GPU: 0xff bytes are NaN in every float type.
    mprotect(a.base, page_up(a.top), PROT_READ | PROT_WRITE);
    std::memset(p, kGarbage, rounded);
    if (a.depth == 0 && a.pending == 0) {
        mprotect(a.base, page_up(a.top), PROT_NONE);
        a.open_end = 0;
    } else {
        a.open_end = page_up(a.top);
    }
    return p;
}

bool device_free(void* p) {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    auto it = a.live.find(static_cast<char*>(p));
    if (it == a.live.end()) return false;
    a.free_blocks.emplace(it->second.rounded, it->first);
    a.live.erase(it);
    return true;
}

bool in_arena(const void* p) {
    Arena& a = arena();
    auto* c = static_cast<const char*>(p);
    return c >= a.base && c < a.base + a.size;
}

ArenaRange arena_range() {
    Arena& a = arena();
    return ArenaRange{a.base, a.base + a.size};
}

bool is_device(const void* p, std::size_t bytes) {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    auto* c = const_cast<char*>(static_cast<const char*>(p));
    auto it = a.live.upper_bound(c);
    if (it == a.live.begin()) return false;
    --it;
    return c + bytes <= it->first + it->second.requested;
}

void set_extent(void* p, std::size_t bytes) {
    Arena& a = arena();
    {
        std::lock_guard lock(a.mu);
        auto it = a.live.find(static_cast<char*>(p));
        if (it == a.live.end() || bytes + kRedZone > it->second.rounded) {
            set_error(cudaErrorInvalidValue, ("gpt_emu::set_extent: " + std::to_string(bytes) +
                                              " bytes is not inside the allocation at " +
                                              std::to_string(reinterpret_cast<std::uintptr_t>(p)))
                                                 .c_str());
            return;
        }
        it->second.requested = bytes;
    }
    // A caching allocator hands the block out again while work of its previous use may still
    // be queued: the red zone moves after that work, on the legacy stream, which the blocking
    // streams' later work waits for.
    stream_add_deferred(nullptr, [p, bytes] {
        Arena& ar = arena();
        {
            std::lock_guard lock(ar.mu);
            auto it = ar.live.find(static_cast<char*>(p));
            if (it == ar.live.end()) return;
            it->second.zone = bytes;
        }
        DeviceAccess open;
        std::memset(static_cast<char*>(p) + bytes, kGarbage, kRedZone);
    });
}

std::string red_zone_violation() {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    static const std::vector<unsigned char> garbage(kRedZone, kGarbage);
    for (auto& [p, blk] : a.live) {
        unsigned char* zone = reinterpret_cast<unsigned char*>(p) + blk.zone;
        const std::size_t n = kRedZone;  // always inside the block (see device_alloc)
        if (std::memcmp(zone, garbage.data(), n) == 0) continue;
        std::size_t first = 0, last = n;
        while (zone[first] == kGarbage) ++first;
        while (zone[last - 1] == kGarbage) --last;
        std::ostringstream m;
        m << "bytes " << first << ".." << last - 1 << " past the end of the " << blk.zone
          << "-byte allocation at " << static_cast<const void*>(p) << " were written";
        std::memset(zone, kGarbage, n);  // reported once
        return m.str();
    }
    return {};
}

DeviceAccess::DeviceAccess() {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    if (a.depth++ == 0 && a.pending == 0) set_open(a, true);
}
DeviceAccess::~DeviceAccess() {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    if (--a.depth == 0 && a.pending == 0) set_open(a, false);
}

void stream_add_pending(cudaStream_t stream, std::function<void()> complete) {
    std::lock_guard lock(g_streams_mu);
    Stream* s = find_stream(stream);
    if (!s) s = &g_legacy;
    {
        Arena& a = arena();
        std::lock_guard alock(a.mu);
        if (a.pending++ == 0 && a.depth == 0) set_open(a, true);
    }
    enqueue(*s, std::move(complete), true);
}

void stream_add_pending_send(cudaStream_t stream, std::function<void()> complete) {
    std::lock_guard lock(g_streams_mu);
    stream_add_pending(stream, std::move(complete));
    Stream* s = find_stream(stream);
    (s ? *s : g_legacy).pending.back().send = true;
}

void stream_complete_work(cudaStream_t stream) {
    std::lock_guard lock(g_streams_mu);
    Stream* s = find_stream(stream);
    if (!s) return;
    const bool outer = g_parking;
    g_parking = true;
    complete_upto(*s, s->added);
    g_parking = outer;
}

void stream_add_deferred(cudaStream_t stream, std::function<void()> work) {
    std::lock_guard lock(g_streams_mu);
    Stream* s = find_stream(stream);
    enqueue(s ? *s : g_legacy, std::move(work), false);
}

bool stream_enqueue(cudaStream_t stream, std::function<void()> work) {
    std::lock_guard lock(g_streams_mu);
    Stream* s = find_stream(stream);
    if (!s) {
        set_error(cudaErrorInvalidResourceHandle, "work issued to a stream that does not exist");
        return false;
    }
    enqueue(*s, std::move(work), false);
    return true;
}

void stream_complete(cudaStream_t stream) {
    std::lock_guard lock(g_streams_mu);
    if (Stream* s = find_stream(stream)) complete_upto(*s, s->added);
}

void complete_all() {
    std::lock_guard lock(g_streams_mu);
    drain_all();
}

std::size_t max_optin_smem() { return g_sm90 ? kMaxOptinSmemSm90 : kMaxOptinSmem; }
void emulate_sm90(bool on) { g_sm90 = on; }

std::size_t max_dynamic_smem(const void* kernel) {
    std::lock_guard lock(g_streams_mu);
    auto it = g_smem_limits.find(kernel);
    return it == g_smem_limits.end() ? kDefaultSmem : it->second;
}

bool stream_before_work(cudaStream_t stream) {
    std::lock_guard lock(g_streams_mu);
    Stream* s = find_stream(stream);
    if (!s) {
        set_error(cudaErrorInvalidResourceHandle, "work issued to a stream that does not exist");
        return false;
    }
    complete_upto(*s, s->added);  // with the streams it waits for (enqueue)
    if (s == &g_legacy) {  // the legacy stream waits for every blocking stream
        for (Stream* o : g_stream_order)
            if (o->blocking) complete_upto(*o, o->added);
    }
    return true;
}

}  // namespace gpt_emu

using namespace gpt_emu;

// ---- device management ---------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
    *count = device_count();
    return *count > 0 ? cudaSuccess : fail(cudaErrorNoDevice, "GPT_EMU_DEVICES is 0");
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count())
        return fail(cudaErrorInvalidDevice, "cudaSetDevice(" + std::to_string(device) + ")");
    g_device = device;
    return cudaSuccess;
}
cudaError_t cudaGetDevice(int* device) {
    *device = g_device;
    return cudaSuccess;
}
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
    if (device < 0 || device >= device_count())
        return fail(cudaErrorInvalidDevice, "cudaGetDeviceProperties(" + std::to_string(device) + ")");
    *prop = cudaDeviceProp{};
    std::snprintf(prop->name, sizeof prop->name, "gpt_emu SIMT emulator (CPU)");
    prop->totalGlobalMem = arena().size;
    prop->sharedMemPerBlock = kDefaultSmem;
    prop->sharedMemPerBlockOptin = max_optin_smem();
    prop->major = g_sm90 ? 9 : 8;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    std::lock_guard lock(g_streams_mu);
    drain_all();
    return take_deferred_error();
}
cudaError_t cudaGetLastError() {
    const cudaError_t e = t_last;
    t_last = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return t_last; }
const char* cudaGetErrorString(cudaError_t err) {
    // The detailed text of the most recent error of this code, else the generic one.
    if (err != cudaSuccess && t_message.rfind(base_message(err), 0) == 0) return t_message.c_str();
    return base_message(err);
}
const char* cudaGetErrorName(cudaError_t err) {
    switch (err) {
        case cudaSuccess: return "cudaSuccess";
        case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
        case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
        case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
        case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
        case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
        case cudaErrorNoDevice: return "cudaErrorNoDevice";
        case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
        case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
        case cudaErrorNotReady: return "cudaErrorNotReady";
        case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    }
    return "cudaErrorUnknown";
}

// ---- memory --------------------------------------------------------------------------------

cudaError_t cudaMalloc(void** p, std::size_t bytes) {
    *p = device_alloc(bytes);
    if (!*p) {
        *p = nullptr;
        return fail(cudaErrorMemoryAllocation, "cudaMalloc of " + std::to_string(bytes) +
                                                   " bytes exceeds the emulated device memory "
                                                   "(GPT_EMU_DEVICE_MEMORY_GB)");
    }
    return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
    if (!p) return cudaSuccess;
    complete_all();  // cudaFree synchronises the device
    return device_free(p) ? cudaSuccess
                          : fail(cudaErrorInvalidDevicePointer, "cudaFree of a pointer cudaMalloc did not return");
}
cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    std::size_t used = 0;
    for (auto& [p, blk] : a.live) used += blk.rounded;
    *total_bytes = a.size;
    *free_bytes = a.size - used;
    return cudaSuccess;
}

// ---- pinned host memory ----------------------------------------------------------------

namespace {
// cudaHostAlloc's blocks (start -> bytes). Ordinary host memory otherwise: the host reads and
// writes it freely; only copies into it from the device are deferred (see copy below).
std::mutex g_pinned_mu;
std::map<const char*, std::size_t> g_pinned;

bool is_pinned(const void* p, std::size_t bytes) {
    std::lock_guard lock(g_pinned_mu);
    const auto* c = static_cast<const char*>(p);
    auto it = g_pinned.upper_bound(c);
    if (it == g_pinned.begin()) return false;
    --it;
    return c + bytes <= it->first + it->second;
}
}  // namespace

cudaError_t cudaHostAlloc(void** p, std::size_t bytes, unsigned flags) {
    *p = nullptr;
    if (flags != cudaHostAllocDefault) return fail(cudaErrorInvalidValue, "cudaHostAlloc: flags not emulated");
    // Page-aligned, as the driver's pinned blocks are (it locks whole pages).
    const std::size_t page = 4096;
    void* m = std::aligned_alloc(page, (std::max<std::size_t>(bytes, 1) + page - 1) / page * page);
    if (!m) return fail(cudaErrorMemoryAllocation, "cudaHostAlloc of " + std::to_string(bytes) + " bytes");
    std::lock_guard lock(g_pinned_mu);
    g_pinned[static_cast<const char*>(m)] = bytes;
    *p = m;
    return cudaSuccess;
}
cudaError_t cudaMallocHost(void** p, std::size_t bytes) { return cudaHostAlloc(p, bytes, cudaHostAllocDefault); }
cudaError_t cudaFreeHost(void* p) {
    if (!p) return cudaSuccess;
    complete_all();  // as cudaFree: synchronises the device, so no queued copy lands in freed memory
    {
        std::lock_guard lock(g_pinned_mu);
        auto it = g_pinned.find(static_cast<const char*>(p));
        if (it == g_pinned.end()) return fail(cudaErrorInvalidValue, "cudaFreeHost of a pointer cudaHostAlloc did not return");
        g_pinned.erase(it);
    }
    std::free(p);
    return cudaSuccess;
}

namespace {
// Copies are stream work: queued, except where the host must wait for them (cudaMemcpy, and
// a copy into pageable host memory: CUDA returns from those once copied). A device-to-host
// cudaMemcpyAsync into pinned memory (cudaHostAlloc) is queued like a kernel: the host sees
// the bytes only once it has synchronised with the stream (an event, the stream, the device).
// A host source is read when the copy is issued (staged, as CUDA does for pageable memory).
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                 cudaStream_t stream, const char* what, bool blocking) {
    {
        std::lock_guard lock(g_streams_mu);
        if (!find_stream(stream)) return fail(cudaErrorInvalidResourceHandle, std::string(what) + " to a stream that does not exist");
    }
    if (bytes == 0) return cudaSuccess;
    const bool dst_dev = is_device(dst, bytes), src_dev = is_device(src, bytes);
    bool ok = false;
    switch (kind) {
        case cudaMemcpyHostToHost: ok = !dst_dev && !src_dev && !in_arena(dst) && !in_arena(src); break;
        case cudaMemcpyHostToDevice: ok = dst_dev && !in_arena(src); break;
        case cudaMemcpyDeviceToHost: ok = src_dev && !in_arena(dst); break;
        case cudaMemcpyDeviceToDevice: ok = dst_dev && src_dev; break;
        case cudaMemcpyDefault: ok = (dst_dev || !in_arena(dst)) && (src_dev || !in_arena(src)); break;
    }
    if (!ok) {
        char m[256];
        std::snprintf(m, sizeof m, "%s of %zu bytes, kind %d: destination %p is %s, source %p is %s",
                      what, bytes, static_cast<int>(kind), dst,
                      dst_dev ? "device memory" : in_arena(dst) ? "outside any device allocation" : "host memory",
                      src, src_dev ? "device memory" : in_arena(src) ? "outside any device allocation" : "host memory");
        return fail(cudaErrorInvalidValue, m);
    }
    if (!blocking && src_dev && !dst_dev && is_pinned(dst, bytes)) {
        stream_enqueue(stream, [dst, src, bytes] {
            DeviceAccess access;
            std::memcpy(dst, src, bytes);
        });
        return cudaSuccess;
    }
    if (blocking || !dst_dev) {
        std::lock_guard lock(g_streams_mu);
        stream_before_work(stream);
        DeviceAccess access;
        std::memmove(dst, src, bytes);
        return take_deferred_error();
    }
    if (!src_dev) {
        auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                                   static_cast<const unsigned char*>(src) + bytes);
        stream_enqueue(stream, [dst, staged] {
            DeviceAccess access;
            std::memcpy(dst, staged->data(), staged->size());
        });
        return cudaSuccess;
    }
    stream_enqueue(stream, [dst, src, bytes] {
        DeviceAccess access;
        std::memmove(dst, src, bytes);
    });
    return cudaSuccess;
}
cudaError_t set(void* p, int value, std::size_t bytes, cudaStream_t stream, const char* what) {
    if (bytes == 0) return cudaSuccess;
    if (!is_device(p, bytes))
        return fail(cudaErrorInvalidValue, std::string(what) + " of " + std::to_string(bytes) +
                                               " bytes outside device memory");
    if (!stream_enqueue(stream, [p, value, bytes] {
            DeviceAccess access;
            std::memset(p, value, bytes);
        }))
        return cudaGetLastError();
    return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr, "cudaMemcpy", true);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return copy(dst, src, bytes, kind, stream, "cudaMemcpyAsync", false);
}
cudaError_t cudaMemset(void* p, int value, std::size_t bytes) { return set(p, value, bytes, nullptr, "cudaMemset"); }
cudaError_t cudaMemsetAsync(void* p, int value, std::size_t bytes, cudaStream_t stream) {
    return set(p, value, bytes, stream, "cudaMemsetAsync");
}

// ---- streams and events --------------------------------------------------------------------

cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    std::lock_guard lock(g_streams_mu);
    auto* st = new Stream;
    st->blocking = (flags & cudaStreamNonBlocking) == 0;
    g_streams.insert(st);
    g_stream_order.push_back(st);
    *s = reinterpret_cast<cudaStream_t>(st);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard lock(g_streams_mu);
    Stream* st = find_stream(s);
    if (!st || st == &g_legacy) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
    complete_upto(*st, st->added);
    g_streams.erase(st);
    std::erase(g_stream_order, st);
    delete st;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    std::lock_guard lock(g_streams_mu);
    Stream* st = find_stream(s);
    if (!st) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize");
    stream_before_work(s);  // the legacy stream also waits for the blocking streams
    return take_deferred_error();
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) {
    std::lock_guard lock(g_streams_mu);
    auto* ev = new Event;
    g_events.insert(ev);
    *e = reinterpret_cast<cudaEvent_t>(ev);
    return cudaSuccess;
}
namespace {
Event* find_event(cudaEvent_t e) {
    auto* p = reinterpret_cast<Event*>(e);
    return g_events.count(p) ? p : nullptr;
}
}  // namespace
cudaError_t cudaEventDestroy(cudaEvent_t e) {
    std::lock_guard lock(g_streams_mu);
    Event* ev = find_event(e);
    if (!ev) return fail(cudaErrorInvalidResourceHandle, "cudaEventDestroy");
    g_events.erase(ev);
    delete ev;
    return cudaSuccess;
}
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    std::lock_guard lock(g_streams_mu);
    Event* ev = find_event(e);
    Stream* st = find_stream(s);
    if (!ev || !st) return fail(cudaErrorInvalidResourceHandle, "cudaEventRecord");
    ev->stream = st;
    ev->seq = st->added;
    ev->when = std::chrono::steady_clock::now();
    return cudaSuccess;
}
cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    std::lock_guard lock(g_streams_mu);
    Event* ev = find_event(e);
    if (!ev) return fail(cudaErrorInvalidResourceHandle, "cudaEventSynchronize");
    if (ev->stream && alive(ev->stream)) complete_upto(*ev->stream, ev->seq);
    return take_deferred_error();
}
cudaError_t cudaEventQuery(cudaEvent_t e) {
    // Pending work here is MPI traffic that only completes when waited for: a query waits.
    return cudaEventSynchronize(e);
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
    std::lock_guard lock(g_streams_mu);
    Event* a = find_event(start);
    Event* b = find_event(end);
    if (!a || !b) return fail(cudaErrorInvalidResourceHandle, "cudaEventElapsedTime");
    *ms = std::chrono::duration<float, std::milli>(b->when - a->when).count();
    return cudaSuccess;
}
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned) {
    std::lock_guard lock(g_streams_mu);
    Stream* st = find_stream(s);
    Event* ev = find_event(e);
    if (!st || !ev) return fail(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent");
    if (!ev->stream || ev->stream == st || (ev->stream->pending.empty() && ev->stream->parked.empty()))
        return cudaSuccess;
    // Later work on s runs after what the event captured.
    Stream* src = ev->stream;
    const std::uint64_t seq = ev->seq;
    enqueue(*st, [src, seq] {
        if (alive(src)) complete_upto(*src, seq);
    }, false);
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute not emulated");
    if (value < 0 || static_cast<std::size_t>(value) > max_optin_smem())
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                               " bytes of dynamic shared memory exceed " +
                                               (g_sm90 ? "sm_90" : "sm_80") + "'s " +
                                               std::to_string(max_optin_smem()));
    std::lock_guard lock(g_streams_mu);
    g_smem_limits[func] = static_cast<std::size_t>(value);
    return cudaSuccess;
}
