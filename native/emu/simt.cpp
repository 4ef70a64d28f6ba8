// simt.cpp — the SIMT emulator behind native/emu/cuda_runtime.h: runs CUDA kernels on one host
// thread, each CUDA thread a fiber (a minimal x86-64 context switch, far cheaper than ucontext,
// which saves the signal mask with a system call), and emulates the runtime calls of
// cuda_backend.cu with checks a GPU would only show as a hang, a fault or a wrong number:
//  - warp collectives and __syncthreads are barriers that abort, naming the collective, its
//    source line and the lanes, when a lane waits elsewhere, has exited, or the mask is partial;
//  - warps resume after every barrier, and blocks run, in a seeded random order, and shared memory
//    is refilled with NaN bytes at each block start, so a missing __syncthreads gives wrong sums;
//  - device memory is registered (cudaPointerGetAttributes answers from the registry), filled
//    with garbage on allocation, inaccessible to host code outside launches and copies (a host
//    dereference faults), followed by a guard page; each copy checks its direction and range;
//    pointer kernel arguments must be NULL or memory of the current device.
// Test-only code: misuse aborts with a message (as a sanitizer does), it never returns an error.
// Knobs: DRMAS_EMU_DEVICES (emulated devices, default 2), DRMAS_EMU_DRIVER_TOO_OLD (set: no device, and
// cudaGetDeviceCount says the driver is too old), DRMAS_EMU_SEED (schedule seed),
// DRMAS_EMU_REPORT_SEGV=1 (print which allocation a host access faulted on; not in a JVM); and, called by
// a test, drmas_emu_fail_next_mallocs(n) (the next n cudaMallocAsync fail as on a full device).
#include "cuda_runtime.h"

#include <atomic>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define DRMAS_EMU_ASAN 1
#endif

#if !defined(__x86_64__)
#error "the SIMT emulator's context switch is written for x86-64"
#endif

// ---- context switch ----------------------------------------------------------------------
// drmas_emu_switch(save, load): pushes the callee-saved registers (System V: rbx, rbp, r12-r15),
// stores the stack pointer in *save, loads `load` and pops the same frame from there. A new
// fiber's stack holds such a frame whose return address is drmas_emu_fiber_start, with the lane
// pointer in rbx. MXCSR and the x87 control word are not switched (saving them made a switch 3x
// dearer): every fiber runs with the launching thread's, and no kernel changes them.
extern "C" void drmas_emu_switch(void** save_sp, void* load_sp);
extern "C" void drmas_emu_fiber_start();
asm(R"(
    .text
    .p2align 4
    .globl drmas_emu_switch
    .hidden drmas_emu_switch
    .type drmas_emu_switch, @function
drmas_emu_switch:
    .cfi_startproc
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .cfi_endproc
    .size drmas_emu_switch, .-drmas_emu_switch

    .p2align 4
    .globl drmas_emu_fiber_start
    .hidden drmas_emu_fiber_start
    .type drmas_emu_fiber_start, @function
drmas_emu_fiber_start:
    .cfi_startproc
    .cfi_undefined rip
    movq %rbx, %rdi
    call drmas_emu_fiber_main
    ud2
    .cfi_endproc
    .size drmas_emu_fiber_start, .-drmas_emu_fiber_start
)");

// Shared memory of all kernels (see __shared__ in cuda_runtime.h); weak: there may be none.
extern char __start_drmas_emu_shared[] __attribute__((weak, visibility("hidden")));
extern char __stop_drmas_emu_shared[] __attribute__((weak, visibility("hidden")));

namespace drmas_emu {

const uint3* g_thread_idx = nullptr;
uint3 g_block_idx = {0, 0, 0};
dim3 g_block_dim, g_grid_dim;

namespace {

[[noreturn]] void die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void die(const char* fmt, ...) {
    fflush(stdout);
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "drmas CUDA emulation: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fflush(stderr);
    abort();
}

const char* collective_name(Collective op) {
    switch (op) {
        case kShfl: return "__shfl_sync";
        case kShflUp: return "__shfl_up_sync";
        case kShflDown: return "__shfl_down_sync";
        case kShflXor: return "__shfl_xor_sync";
        case kBallot: return "__ballot_sync";
        case kAll: return "__all_sync";
        case kAny: return "__any_sync";
        case kSyncWarp: return "__syncwarp";
    }
    return "?";
}

// Everything below is serialised by one lock: launches, copies, allocations (a launch makes all
// device memory accessible for its duration, so nothing may re-protect it meanwhile).
std::recursive_mutex g_lock;

// ---- devices and errors -------------------------------------------------------------------
int device_count() {
    static const int count = [] {
        const char* s = getenv("DRMAS_EMU_DEVICES");
        const int n = s != nullptr ? atoi(s) : 2;
        return n < 0 ? 0 : n;
    }();
    return count;
}
// The emulated devices' compute capability (major * 10 + minor) and whether the library has a
// kernel image for it (cuda_runtime.h).
int compute_capability() {
    static const int cc = [] {
        const char* s = getenv("DRMAS_EMU_COMPUTE_CAPABILITY");
        int major = 9, minor = 0;
        if (s != nullptr && sscanf(s, "%d.%d", &major, &minor) != 2)
            die("DRMAS_EMU_COMPUTE_CAPABILITY=%s is not MAJOR.MINOR (e.g. 7.5)", s);
        return major * 10 + minor;
    }();
    return cc;
}
bool has_kernel_image() { return compute_capability() >= 80; }
thread_local int t_device = 0;
// The devices whose primary context exists (bit d): CUDA 12+ creates it when cudaSetDevice makes a
// device current, and on the first call that needs one (an allocation, a launch, a function's
// attributes). A stray context on GPU 0 costs every rank of a node hundreds of MiB there, which the
// tests look for (drmas_emu_contexts).
std::atomic<uint32_t> g_contexts{0};
void touch_context(int device) {
    if (device >= 0 && device < 32) g_contexts.fetch_or(1u << device);
}
thread_local cudaError_t t_last_error = cudaSuccess;

cudaError_t record(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

// ---- device memory ----------------------------------------------------------------------
// Each allocation is its own mapping: data pages (PROT_NONE while host code runs) whose last
// bytes hold the allocation, then a guard page, so an overrun past the end faults.
struct Allocation {
    char* map;
    size_t map_bytes;
    size_t data_bytes;  // the pages that hold the data
    size_t bytes;
    int device;
};
std::map<uintptr_t, Allocation> g_allocations;  // by user address
bool g_accessible = false;                     // all allocations readable and writable (in a launch)
const size_t kPage = (size_t)sysconf(_SC_PAGESIZE);
constexpr unsigned char kGarbage = 0xCD;        // a freshly allocated byte: -4.3e8 as float

void protect(const Allocation& a, bool accessible) {
    if (mprotect(a.map, a.data_bytes, accessible ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
        die("mprotect of a device allocation failed");
}

// The allocation holding [p, p + bytes), or NULL when p is not device memory; dies when p is
// device memory but the range runs past its end.
const Allocation* find(const void* p, size_t bytes, const char* what) {
    const uintptr_t a = (uintptr_t)p;
    auto it = g_allocations.upper_bound(a);
    if (it == g_allocations.begin()) return nullptr;
    --it;
    const Allocation& al = it->second;
    if (a >= it->first + al.bytes) return nullptr;
    if (bytes > it->first + al.bytes - a)
        die("%s: %zu bytes at offset %zu run past the end of a device allocation of %zu bytes", what, bytes,
            (size_t)(a - it->first), al.bytes);
    return &al;
}

// Makes the allocations of [p, p + bytes) accessible for one host-side copy.
class Access {
public:
    Access(const Allocation* a) : a_(a) {
        if (a_ != nullptr && !g_accessible) protect(*a_, true);
    }
    ~Access() {
        if (a_ != nullptr && !g_accessible) protect(*a_, false);
    }

private:
    const Allocation* a_;
};

void set_all_accessible(bool accessible) {
    for (auto& kv : g_allocations) protect(kv.second, accessible);
    g_accessible = accessible;
}

void report_segv(int sig, siginfo_t* info, void*) {
    const uintptr_t a = (uintptr_t)info->si_addr;
    for (const auto& kv : g_allocations) {
        const Allocation& al = kv.second;
        if (a >= (uintptr_t)al.map && a < (uintptr_t)al.map + al.map_bytes) {
            char msg[256];
            const bool guard = a >= (uintptr_t)al.map + al.data_bytes;
            const int len = snprintf(msg, sizeof msg,
                                     "drmas CUDA emulation: %s device allocation of %zu bytes (device %d) at %p\n",
                                     guard ? "access past the end of a" : "host code touched a", al.bytes,
                                     al.device, (void*)kv.first);
            if (len > 0) (void)!write(2, msg, (size_t)len);
            break;
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

void install_segv_report() {
    static bool done = false;
    if (done) return;
    done = true;
    const char* s = getenv("DRMAS_EMU_REPORT_SEGV");
    if (s == nullptr || strcmp(s, "1") != 0) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = report_segv;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, nullptr);
}

cudaError_t allocate(void** ptr, size_t bytes) {
    if (ptr == nullptr) return record(cudaErrorInvalidValue);
    *ptr = nullptr;
    if (t_device < 0 || t_device >= device_count()) return record(cudaErrorInvalidDevice);
    touch_context(t_device);
    if (bytes > ((size_t)1 << 40)) return record(cudaErrorMemoryAllocation);
    install_segv_report();
    const size_t user = (bytes + 15) / 16 * 16 + 16 * (bytes == 0);
    const size_t data = (user + kPage - 1) / kPage * kPage;
    char* map = (char*)mmap(nullptr, data + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (map == MAP_FAILED) return record(cudaErrorMemoryAllocation);
    if (mprotect(map + data, kPage, PROT_NONE) != 0) die("mprotect of a guard page failed");
    char* p = map + data - user;
    memset(p, kGarbage, user);
    Allocation a{map, data + kPage, data, bytes == 0 ? 1 : bytes, t_device};
    if (!g_accessible) protect(a, false);
    g_allocations[(uintptr_t)p] = a;
    *ptr = p;
    return cudaSuccess;
}

cudaError_t release(void* ptr) {
    if (ptr == nullptr) return cudaSuccess;
    auto it = g_allocations.find((uintptr_t)ptr);
    if (it == g_allocations.end()) {
        if (find(ptr, 1, "cudaFree") != nullptr) die("cudaFree(%p): not the start of a device allocation", ptr);
        die("cudaFree(%p): not device memory (a host pointer, or freed twice)", ptr);
    }
    munmap(it->second.map, it->second.map_bytes);
    g_allocations.erase(it);
    return cudaSuccess;
}

const char* kind_name(cudaMemcpyKind k) {
    switch (k) {
        case cudaMemcpyHostToHost: return "HostToHost";
        case cudaMemcpyHostToDevice: return "HostToDevice";
        case cudaMemcpyDeviceToHost: return "DeviceToHost";
        case cudaMemcpyDeviceToDevice: return "DeviceToDevice";
        case cudaMemcpyDefault: return "Default";
    }
    return "?";
}

cudaError_t copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    if (bytes == 0) return cudaSuccess;
    if (dst == nullptr || src == nullptr) return record(cudaErrorInvalidValue);
    const Allocation* d = find(dst, bytes, "cudaMemcpy destination");
    const Allocation* s = find(src, bytes, "cudaMemcpy source");
    const bool want_dst_device = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
    const bool want_src_device = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
    if (kind != cudaMemcpyDefault) {
        if (want_dst_device != (d != nullptr))
            die("cudaMemcpy(%s) of %zu bytes: the destination %p is %s memory", kind_name(kind), bytes, dst,
                d != nullptr ? "device" : "host");
        if (want_src_device != (s != nullptr))
            die("cudaMemcpy(%s) of %zu bytes: the source %p is %s memory", kind_name(kind), bytes, src,
                s != nullptr ? "device" : "host");
    } else if (d == nullptr && s == nullptr) {
        die("cudaMemcpy(Default) of %zu bytes from %p to %p: neither is device memory", bytes, src, dst);
    }
    Access ad(d), as(s != d ? s : nullptr);
    memmove(dst, src, bytes);
    return cudaSuccess;
}

cudaError_t fill(void* ptr, int value, size_t bytes) {
    if (bytes == 0) return cudaSuccess;
    const Allocation* a = find(ptr, bytes, "cudaMemset");
    if (a == nullptr) die("cudaMemset of %zu bytes: %p is not device memory", bytes, ptr);
    Access acc(a);
    memset(ptr, value, bytes);
    return cudaSuccess;
}

// ---- fibers ---------------------------------------------------------------------------
enum class State : uint8_t { Ready, AtWarp, AtBlock, Exited };

struct Lane {
    uint3 idx;
    State state;
    void* sp;           // saved stack pointer while suspended
    char* stack_lo;
    size_t stack_size;
    void* fake_stack;   // AddressSanitizer's per-fiber state
    // the collective the lane waits at
    Collective op;
    unsigned mask;
    int arg, width;
    uint64_t value, result;
    const char* file;
    int line;
    uint64_t warp_seq;  // collectives this lane has completed
    // the barrier the lane waits at
    const char* bar_file;
    int bar_line;
    uint64_t bar_seq;   // barriers this lane has passed
};

constexpr size_t kStackBytes = 256 * 1024;  // kernels use a few KiB; sanitizers much more
std::vector<char*> g_stacks;                 // reused across blocks and launches
std::vector<Lane> g_lanes;
void* g_scheduler_sp = nullptr;
[[maybe_unused]] const void* g_scheduler_stack_lo = nullptr;  // for AddressSanitizer
[[maybe_unused]] size_t g_scheduler_stack_size = 0;
Lane* g_lane = nullptr;                      // the running lane
void (*g_body)(void*) = nullptr;
void* g_ctx = nullptr;
const Launch* g_launch = nullptr;
uint64_t g_launch_id = 0;
uint64_t g_seed = 0;

char* stack_for(size_t i) {
    while (g_stacks.size() <= i) {
        // a guard page below each stack: an overflow faults instead of corrupting its neighbour
        char* m = (char*)mmap(nullptr, kStackBytes + kPage, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) die("cannot map a fiber stack");
        if (mprotect(m, kPage, PROT_NONE) != 0) die("mprotect of a stack guard page failed");
        g_stacks.push_back(m + kPage);
    }
    return g_stacks[i];
}

void prepare(Lane& l) {
#if defined(DRMAS_EMU_ASAN)
    // A fiber that exited left its frames' redzones poisoned.
    ASAN_UNPOISON_MEMORY_REGION(l.stack_lo, l.stack_size);
#endif
    // Stack tops staggered by lane (cache colouring): equally aligned tops would all fall in the
    // same L1 sets, and a warp's 32 lanes would evict each other at every switch.
    const uintptr_t colour = (uintptr_t)(l.idx.x % 61) * 64 + (uintptr_t)(l.idx.x / 61 % 16) * 4096;
    const uintptr_t top = ((uintptr_t)(l.stack_lo + l.stack_size) - colour) & ~(uintptr_t)15;
    uint64_t* sp = (uint64_t*)top - 7;  // after the ret, rsp = top: 16-byte aligned, as at a call
    sp[0] = sp[1] = sp[2] = sp[3] = 0;   // r15 r14 r13 r12
    sp[4] = (uint64_t)&l;                // rbx: the lane, for drmas_emu_fiber_start
    sp[5] = 0;                           // rbp: ends frame-pointer walks here
    sp[6] = (uint64_t)&drmas_emu_fiber_start;
    l.sp = sp;
}

void resume(Lane& l) {
    g_lane = &l;
    g_thread_idx = &l.idx;
#if defined(DRMAS_EMU_ASAN)
    void* fake = nullptr;
    __sanitizer_start_switch_fiber(&fake, l.stack_lo, l.stack_size);
    drmas_emu_switch(&g_scheduler_sp, l.sp);
    __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
    drmas_emu_switch(&g_scheduler_sp, l.sp);
#endif
}

// From a lane back to the scheduler; returns when the scheduler resumes the lane.
void yield(Lane& l) {
#if defined(DRMAS_EMU_ASAN)
    __sanitizer_start_switch_fiber(&l.fake_stack, g_scheduler_stack_lo, g_scheduler_stack_size);
    drmas_emu_switch(&l.sp, g_scheduler_sp);
    __sanitizer_finish_switch_fiber(l.fake_stack, nullptr, nullptr);
#else
    drmas_emu_switch(&l.sp, g_scheduler_sp);
#endif
}

// ---- the schedule ---------------------------------------------------------------------
uint64_t mix(uint64_t x) {  // splitmix64
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void shuffle(std::vector<unsigned>& v, uint64_t key) {
    for (size_t i = 0; i < v.size(); ++i) v[i] = (unsigned)i;
    for (size_t i = v.size(); i > 1; --i) {
        key = mix(key);
        const size_t j = key % i;
        std::swap(v[i - 1], v[j]);
    }
}

std::string where() {
    char buf[256];
    snprintf(buf, sizeof buf, "kernel %s (launch #%llu, block %u of %u, %u threads, DRMAS_EMU_SEED=%llu)",
             g_launch->name, (unsigned long long)g_launch_id, g_block_idx.x, g_grid_dim.x, g_block_dim.x,
             (unsigned long long)g_seed);
    return buf;
}

std::string describe(const Lane& l) {
    char buf[256];
    switch (l.state) {
        case State::Exited: return "has exited";
        case State::AtBlock:
            snprintf(buf, sizeof buf, "waits at __syncthreads (%s:%d)", l.bar_file, l.bar_line);
            return buf;
        case State::AtWarp:
            snprintf(buf, sizeof buf, "waits at %s (%s:%d) as its collective #%llu", collective_name(l.op), l.file,
                     l.line, (unsigned long long)l.warp_seq + 1);
            return buf;
        case State::Ready: return "is running";
    }
    return "?";
}

// All lanes of warp w are at the same collective: compute every lane's result.
void resolve(Lane* lanes, unsigned w) {
    Lane* warp = lanes + 32 * w;
    const Lane& a = warp[0];
    uint64_t bits = 0;
    for (int i = 0; i < 32; ++i) bits |= (uint64_t)(warp[i].value != 0) << i;
    for (int i = 0; i < 32; ++i) {
        Lane& l = warp[i];
        const int width = l.width;
        const int base = i & ~(width - 1);
        switch (a.op) {
            case kShfl: l.result = warp[base + (l.arg & (width - 1))].value; break;
            case kShflUp: l.result = (i - base) >= l.arg ? warp[i - l.arg].value : l.value; break;
            case kShflDown: l.result = (i - base) + l.arg < width ? warp[i + l.arg].value : l.value; break;
            case kShflXor: {
                const int src = i ^ l.arg;
                l.result = (src >= 0 && src < base + width) ? warp[src].value : l.value;
                break;
            }
            case kBallot: l.result = bits; break;
            case kAll: l.result = bits == 0xffffffffull; break;
            case kAny: l.result = bits != 0; break;
            case kSyncWarp: l.result = 0; break;
        }
        l.state = State::Ready;
        ++l.warp_seq;
    }
}

// Runs the lanes of warp w until each waits at __syncthreads or has exited, completing the
// warp's collectives on the way.
void run_warp(Lane* lanes, unsigned n, unsigned w) {
    const unsigned first = 32 * w, last = std::min(n, first + 32);
    for (;;) {
        for (unsigned i = first; i < last; ++i)
            if (lanes[i].state == State::Ready) resume(lanes[i]);
        const Lane* at = nullptr;
        for (unsigned i = first; i < last && at == nullptr; ++i)
            if (lanes[i].state == State::AtWarp) at = &lanes[i];
        if (at == nullptr) return;
        const unsigned a = (unsigned)(at - lanes);
        if (last - first < 32)
            die("%s: %s (%s:%d) in warp %u, which has only %u lanes (blockDim.x = %u is not a multiple of 32)",
                where().c_str(), collective_name(at->op), at->file, at->line, w, last - first, n);
        if (at->mask != 0xffffffffu)
            die("%s: %s (%s:%d) with mask 0x%08x in warp %u: only full-warp collectives are supported (and used by "
                "drmas)", where().c_str(), collective_name(at->op), at->file, at->line, at->mask, w);
        for (unsigned i = first; i < last; ++i) {
            const Lane& l = lanes[i];
            const bool same = l.state == State::AtWarp && l.op == at->op && l.line == at->line &&
                              l.warp_seq == at->warp_seq && l.mask == at->mask && l.width == at->width &&
                              (l.file == at->file || strcmp(l.file, at->file) == 0);
            if (!same)
                die("%s: divergent warp collective in warp %u: lane %u %s, but lane %u %s", where().c_str(), w,
                    a - first, describe(*at).c_str(), i - first, describe(l).c_str());
        }
        resolve(lanes, w);
    }
}

void run_block(unsigned block) {
    g_block_idx = uint3{block, 0, 0};
    if (__start_drmas_emu_shared != nullptr)
        memset(__start_drmas_emu_shared, 0xFF, (size_t)(__stop_drmas_emu_shared - __start_drmas_emu_shared));
    const unsigned n = g_block_dim.x;
    const unsigned warps = (n + 31) / 32;
    Lane* lanes = g_lanes.data();
    for (unsigned i = 0; i < n; ++i) {
        Lane& l = lanes[i];
        l.idx = uint3{i, 0, 0};
        l.state = State::Ready;
        l.stack_lo = stack_for(i);
        l.stack_size = kStackBytes;
        l.fake_stack = nullptr;
        l.warp_seq = l.bar_seq = 0;
        prepare(l);
    }
    std::vector<unsigned> order(warps);
    for (uint64_t phase = 0;; ++phase) {
        shuffle(order, mix(g_seed ^ mix(g_launch_id * 0x10001ull + block) ^ mix(phase + 1)));
        for (unsigned w : order) run_warp(lanes, n, w);
        const Lane* waiting = nullptr;
        const Lane* exited = nullptr;
        for (unsigned i = 0; i < n; ++i) {
            if (lanes[i].state == State::AtBlock && waiting == nullptr) waiting = &lanes[i];
            if (lanes[i].state == State::Exited && exited == nullptr) exited = &lanes[i];
        }
        if (waiting == nullptr) return;  // every thread has exited
        if (exited != nullptr)
            die("%s: thread %u %s (barrier #%llu), but thread %u has exited", where().c_str(), waiting->idx.x,
                describe(*waiting).c_str(), (unsigned long long)waiting->bar_seq + 1, exited->idx.x);
        for (unsigned i = 0; i < n; ++i) {
            const Lane& l = lanes[i];
            if (l.bar_line != waiting->bar_line || l.bar_seq != waiting->bar_seq ||
                (l.bar_file != waiting->bar_file && strcmp(l.bar_file, waiting->bar_file) != 0))
                die("%s: divergent __syncthreads: thread %u waits at %s:%d (its barrier #%llu), thread %u at %s:%d "
                    "(its barrier #%llu)", where().c_str(), waiting->idx.x, waiting->bar_file, waiting->bar_line,
                    (unsigned long long)waiting->bar_seq + 1, l.idx.x, l.bar_file, l.bar_line,
                    (unsigned long long)l.bar_seq + 1);
        }
        for (unsigned i = 0; i < n; ++i) {
            lanes[i].state = State::Ready;
            ++lanes[i].bar_seq;
        }
    }
}

uint64_t seed() {
    static const uint64_t s = [] {
        const char* v = getenv("DRMAS_EMU_SEED");
        return v != nullptr ? (uint64_t)strtoull(v, nullptr, 0) : 20260208ull;
    }();
    return s;
}

}  // namespace

// Entry of every fiber (from drmas_emu_fiber_start).
extern "C" __attribute__((used, visibility("hidden"))) void drmas_emu_fiber_main(void* lane) {
    Lane* l = static_cast<Lane*>(lane);
#if defined(DRMAS_EMU_ASAN)
    __sanitizer_finish_switch_fiber(nullptr, &g_scheduler_stack_lo, &g_scheduler_stack_size);
#endif
    g_body(g_ctx);
    l->state = State::Exited;
#if defined(DRMAS_EMU_ASAN)
    __sanitizer_start_switch_fiber(nullptr, g_scheduler_stack_lo, g_scheduler_stack_size);
#endif
    void* dead = nullptr;
    drmas_emu_switch(&dead, g_scheduler_sp);
    __builtin_unreachable();
}

uint64_t warp_collective(Collective op, unsigned mask, uint64_t bits, int arg, int width, const char* file, int line) {
    Lane* l = g_lane;
    if (l == nullptr) die("%s called outside a kernel", collective_name(op));
    if (width < 1 || width > 32 || (width & (width - 1)) != 0)
        die("%s: %s (%s:%d) with width %d (a power of 2 up to 32)", where().c_str(), collective_name(op), file, line,
            width);
    l->op = op;
    l->mask = mask;
    l->value = bits;
    l->arg = arg;
    l->width = width;
    l->file = file;
    l->line = line;
    l->state = State::AtWarp;
    yield(*l);
    return l->result;
}

void sync_threads(const char* file, int line) {
    Lane* l = g_lane;
    if (l == nullptr) die("__syncthreads called outside a kernel");
    l->bar_file = file;
    l->bar_line = line;
    l->state = State::AtBlock;
    yield(*l);
}

void check_kernel_pointer(const Launch& launch, int index, const void* p) {
    if (p == nullptr) return;
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    const Allocation* a = find(p, 1, launch.name);
    if (a == nullptr)
        die("kernel %s: argument %d (%p) is not device memory (a host pointer passed to a kernel)", launch.name,
            index, p);
    if (a->device != t_device)
        die("kernel %s launched on device %d: argument %d (%p) is memory of device %d", launch.name, t_device, index,
            p, a->device);
}

void run_kernel(const Launch& launch, void (*body)(void*), void* ctx) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (launch.block.x < 1 || launch.block.x > 1024 || launch.grid.x < 1 || launch.grid.x > 0x7fffffffu ||
        launch.shared_bytes > 48 * 1024 || t_device < 0 || t_device >= device_count()) {
        record(t_device < 0 || t_device >= device_count() ? cudaErrorInvalidDevice : cudaErrorInvalidConfiguration);
        return;
    }
    touch_context(t_device);
    if (!has_kernel_image()) {
        record(cudaErrorNoKernelImageForDevice);
        return;
    }
    if (launch.block.y != 1 || launch.block.z != 1 || launch.grid.y != 1 || launch.grid.z != 1)
        die("kernel %s: the emulator runs one-dimensional grids and blocks only", launch.name);
    if (g_lane != nullptr) die("kernel %s launched from inside a kernel", launch.name);
    g_launch = &launch;
    g_launch_id++;
    g_seed = seed();
    g_body = body;
    g_ctx = ctx;
    g_block_dim = launch.block;
    g_grid_dim = launch.grid;
    if (g_lanes.size() < launch.block.x) g_lanes.resize(launch.block.x);
    set_all_accessible(true);
    std::vector<unsigned> blocks(launch.grid.x);
    shuffle(blocks, mix(g_seed ^ mix(g_launch_id)));
    for (unsigned b : blocks) run_block(b);
    set_all_accessible(false);
    g_lane = nullptr;
    g_thread_idx = nullptr;
    g_launch = nullptr;
}

}  // namespace drmas_emu

// ---- the runtime API ------------------------------------------------------------------
using namespace drmas_emu;

namespace {
// What the host API was asked to do (drmas_emu_counters): tests assert, e.g., that a call
// never waits for the device.
uint64_t g_counters[DRMAS_EMU_COUNTERS] = {};
int g_failing_mallocs = 0;  // drmas_emu_fail_next_mallocs
}  // namespace

extern "C" __attribute__((visibility("default"))) void drmas_emu_fail_next_mallocs(int n) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    g_failing_mallocs = n > 0 ? n : 0;
}

extern "C" __attribute__((visibility("default"))) uint32_t drmas_emu_contexts(int forget) {
    return forget ? g_contexts.exchange(0) : g_contexts.load();
}

extern "C" __attribute__((visibility("default"))) void drmas_emu_counters(uint64_t* out) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    g_counters[DRMAS_EMU_LAUNCHES] = g_launch_id;
    for (int k = 0; k < DRMAS_EMU_COUNTERS; ++k) out[k] = g_counters[k];
}

cudaError_t cudaGetDeviceCount(int* count) {
    if (count == nullptr) return record(cudaErrorInvalidValue);
    if (getenv("DRMAS_EMU_DRIVER_TOO_OLD") != nullptr) {  // a driver older than the toolkit: what a user meets first
        *count = 0;
        return record(cudaErrorInsufficientDriver);
    }
    *count = device_count();
    return *count > 0 ? cudaSuccess : record(cudaErrorNoDevice);
}
cudaError_t cudaGetDevice(int* device) {
    if (device == nullptr) return record(cudaErrorInvalidValue);
    if (device_count() == 0) return record(cudaErrorNoDevice);
    *device = t_device;
    return cudaSuccess;
}
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
    if (value == nullptr) return record(cudaErrorInvalidValue);
    if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
    switch (attr) {
        case cudaDevAttrComputeCapabilityMajor: *value = compute_capability() / 10; return cudaSuccess;
        case cudaDevAttrComputeCapabilityMinor: *value = compute_capability() % 10; return cudaSuccess;
    }
    return record(cudaErrorInvalidValue);
}
cudaError_t drmas_emu::func_attributes(cudaFuncAttributes* attr) {
    if (attr == nullptr) return record(cudaErrorInvalidValue);
    if (device_count() == 0) return record(cudaErrorNoDevice);
    touch_context(t_device);
    if (!has_kernel_image()) return record(cudaErrorNoKernelImageForDevice);
    attr->numRegs = 0;
    return cudaSuccess;
}
cudaError_t cudaSetDevice(int device) {
    if (device < 0 || device >= device_count()) return record(cudaErrorInvalidDevice);
    t_device = device;
    touch_context(device);
    return cudaSuccess;
}
cudaError_t cudaGetLastError() {
    const cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}
cudaError_t cudaPeekAtLastError() { return t_last_error; }
const char* cudaGetErrorString(cudaError_t e) {
    switch (e) {
        case cudaSuccess: return "no error";
        case cudaErrorInvalidValue: return "invalid argument";
        case cudaErrorMemoryAllocation: return "out of memory";
        case cudaErrorInvalidConfiguration: return "invalid configuration argument";
        case cudaErrorNoDevice: return "no CUDA-capable device is detected";
        case cudaErrorInsufficientDriver: return "CUDA driver version is insufficient for CUDA runtime version";
        case cudaErrorInvalidDevice: return "invalid device ordinal";
        case cudaErrorInvalidDeviceFunction: return "invalid device function";
        case cudaErrorNoKernelImageForDevice: return "no kernel image is available for execution on the device";
    }
    return "unrecognized error code";
}
cudaError_t cudaMalloc(void** ptr, size_t bytes) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    return allocate(ptr, bytes);
}
cudaError_t cudaFree(void* ptr) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    return release(ptr);
}
cudaError_t cudaMallocAsync(void** ptr, size_t bytes, cudaStream_t) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (g_failing_mallocs > 0) {
        --g_failing_mallocs;
        return record(cudaErrorMemoryAllocation);  // not sticky: cudaGetLastError clears it, as CUDA's
    }
    return allocate(ptr, bytes);
}
cudaError_t cudaFreeAsync(void* ptr, cudaStream_t) { return cudaFree(ptr); }
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    if (bytes > 0 && find(dst, 1, "cudaMemcpy destination") == nullptr && find(src, 1, "cudaMemcpy source") != nullptr)
        g_counters[DRMAS_EMU_TO_HOST]++;
    return copy(dst, src, bytes, kind);
}
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t) {
    return cudaMemcpy(dst, src, bytes, kind);
}
cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    g_counters[DRMAS_EMU_MEMSETS]++;
    return fill(ptr, value, bytes);
}
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t) { return cudaMemset(ptr, value, bytes); }
// Every call completed when it returned: nothing to wait for, only counted.
cudaError_t cudaStreamSynchronize(cudaStream_t) {
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    g_counters[DRMAS_EMU_SYNCS]++;
    return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaStreamSynchronize(nullptr); }
cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* attr, const void* ptr) {
    if (attr == nullptr) return record(cudaErrorInvalidValue);
    std::lock_guard<std::recursive_mutex> hold(g_lock);
    const Allocation* a = find(ptr, 1, "cudaPointerGetAttributes");
    attr->type = a != nullptr ? cudaMemoryTypeDevice : cudaMemoryTypeUnregistered;
    attr->device = a != nullptr ? a->device : -2;
    attr->devicePointer = a != nullptr ? const_cast<void*>(ptr) : nullptr;
    attr->hostPointer = a != nullptr ? nullptr : const_cast<void*>(ptr);
    return cudaSuccess;
}
