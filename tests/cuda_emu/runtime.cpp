// The emulated CUDA runtime: device memory arena, streams and events, errors, device
// properties (see include/cuda_runtime.h and include/gpt_emu/memory.hpp).
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
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
    std::size_t requested;  // what the caller may touch
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

struct Stream {
    bool blocking = true;
    std::uint64_t added = 0, completed = 0;
    std::deque<std::pair<std::uint64_t, std::function<void()>>> pending;
};
struct Event {
    Stream* stream = nullptr;
    std::uint64_t seq = 0;
    std::chrono::steady_clock::time_point when{};
};

std::recursive_mutex g_streams_mu;
Stream g_legacy;
std::set<Stream*> g_streams;
std::set<Event*> g_events;
std::map<const void*, std::size_t> g_smem_limits;
int g_device = 0;

Stream* find_stream(cudaStream_t s) {
    if (s == nullptr || s == cudaStreamLegacy || s == cudaStreamPerThread) return &g_legacy;
    auto* p = reinterpret_cast<Stream*>(s);
    return g_streams.count(p) ? p : nullptr;
}

void complete_upto(Stream& s, std::uint64_t seq) {
    while (!s.pending.empty() && s.pending.front().first <= seq) {
        auto fn = std::move(s.pending.front().second);
        s.pending.pop_front();
        fn();
        s.completed = std::max(s.completed, seq);
        std::lock_guard lock(arena().mu);
        Arena& a = arena();
        if (--a.pending == 0 && a.depth == 0) set_open(a, false);
    }
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
    a.live[p] = Alloc{rounded, bytes};
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
    DeviceAccess open;
    std::memset(static_cast<char*>(p) + bytes, kGarbage, kRedZone);
}

std::string red_zone_violation() {
    Arena& a = arena();
    std::lock_guard lock(a.mu);
    static const std::vector<unsigned char> garbage(kRedZone, kGarbage);
    for (auto& [p, blk] : a.live) {
        unsigned char* zone = reinterpret_cast<unsigned char*>(p) + blk.requested;
        const std::size_t n = kRedZone;  // always inside the block (see device_alloc)
        if (std::memcmp(zone, garbage.data(), n) == 0) continue;
        std::size_t first = 0, last = n;
        while (zone[first] == kGarbage) ++first;
        while (zone[last - 1] == kGarbage) --last;
        std::ostringstream m;
        m << "bytes " << first << ".." << last - 1 << " past the end of the " << blk.requested
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
    s->pending.emplace_back(++s->added, std::move(complete));
}

void stream_complete(cudaStream_t stream) {
    std::lock_guard lock(g_streams_mu);
    if (Stream* s = find_stream(stream)) complete_upto(*s, s->added);
}

void complete_all() {
    std::lock_guard lock(g_streams_mu);
    complete_upto(g_legacy, g_legacy.added);
    for (Stream* s : g_streams) complete_upto(*s, s->added);
}

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
    complete_upto(*s, s->added);
    if (s == &g_legacy)  // the legacy stream waits for every blocking stream
        for (Stream* o : g_streams)
            if (o->blocking) complete_upto(*o, o->added);
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
    prop->sharedMemPerBlockOptin = kMaxOptinSmem;
    prop->major = 8;
    prop->minor = 0;
    prop->multiProcessorCount = 1;
    prop->warpSize = 32;
    prop->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
    complete_all();
    return cudaSuccess;
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

namespace {
cudaError_t copy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                 cudaStream_t stream, const char* what) {
    if (!stream_before_work(stream)) return cudaGetLastError();
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
    DeviceAccess access;
    std::memmove(dst, src, bytes);
    return cudaSuccess;
}
cudaError_t set(void* p, int value, std::size_t bytes, cudaStream_t stream, const char* what) {
    if (!stream_before_work(stream)) return cudaGetLastError();
    if (bytes == 0) return cudaSuccess;
    if (!is_device(p, bytes))
        return fail(cudaErrorInvalidValue, std::string(what) + " of " + std::to_string(bytes) +
                                               " bytes outside device memory");
    DeviceAccess access;
    std::memset(p, value, bytes);
    return cudaSuccess;
}
}  // namespace

cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
    return copy(dst, src, bytes, kind, nullptr, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
    return copy(dst, src, bytes, kind, stream, "cudaMemcpyAsync");
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
    *s = reinterpret_cast<cudaStream_t>(st);
    return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) {
    std::lock_guard lock(g_streams_mu);
    Stream* st = find_stream(s);
    if (!st || st == &g_legacy) return fail(cudaErrorInvalidResourceHandle, "cudaStreamDestroy");
    complete_upto(*st, st->added);
    g_streams.erase(st);
    delete st;
    return cudaSuccess;
}
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    std::lock_guard lock(g_streams_mu);
    Stream* st = find_stream(s);
    if (!st) return fail(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize");
    complete_upto(*st, st->added);
    return cudaSuccess;
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
    if (ev->stream && g_streams.count(ev->stream) + (ev->stream == &g_legacy) > 0)
        complete_upto(*ev->stream, ev->seq);
    return cudaSuccess;
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
    if (!ev->stream || ev->stream == st || ev->stream->completed >= ev->seq ||
        ev->stream->pending.empty())
        return cudaSuccess;
    // Later work on s runs after what the event captured.
    Stream* src = ev->stream;
    const std::uint64_t seq = ev->seq;
    stream_add_pending(s, [src, seq] { complete_upto(*src, seq); });
    return cudaSuccess;
}

cudaError_t cudaFuncSetAttribute(const void* func, cudaFuncAttribute attr, int value) {
    if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: attribute not emulated");
    if (value < 0 || static_cast<std::size_t>(value) > kMaxOptinSmem)
        return fail(cudaErrorInvalidValue, "cudaFuncSetAttribute: " + std::to_string(value) +
                                               " bytes of dynamic shared memory exceed sm_80's " +
                                               std::to_string(kMaxOptinSmem));
    std::lock_guard lock(g_streams_mu);
    g_smem_limits[func] = static_cast<std::size_t>(value);
    return cudaSuccess;
}
