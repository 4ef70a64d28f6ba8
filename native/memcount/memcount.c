// memcount.c — libdrmas_memcount.so, an LD_PRELOAD library that counts the live bytes of this
// process's heap and their high-water mark, exactly: every block from malloc, calloc, realloc and
// the aligned allocators adds its malloc_usable_size, free takes it off. PeakMemory reads it
// (drmas_memcount_*) when it is preloaded, instead of the kernel's resident-size counters, which
// read tens of MiB low on some Linux machines (per-CPU counter batches, reclaimed file pages, the
// JVM shrinking its heap) and so could not hold `drmas plan` to its 15% everywhere. It counts what
// was allocated, touched or not — what the plan predicts. glibc only (__libc_* are its own entry
// points); the JVM's heap, mmap'd directly, is not in it.
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern void __libc_free(void *);

#define EXPORT __attribute__((visibility("default")))

static _Atomic long long live_bytes, peak_bytes;

static void *counted(void *p) {
    if (!p) return p;
    long long n = (long long)malloc_usable_size(p);
    long long now = atomic_fetch_add_explicit(&live_bytes, n, memory_order_relaxed) + n;
    long long peak = atomic_load_explicit(&peak_bytes, memory_order_relaxed);
    while (now > peak && !atomic_compare_exchange_weak_explicit(&peak_bytes, &peak, now, memory_order_relaxed,
                                                                memory_order_relaxed)) {
    }
    return p;
}

static void uncounted(void *p) {
    if (p) atomic_fetch_sub_explicit(&live_bytes, (long long)malloc_usable_size(p), memory_order_relaxed);
}

EXPORT void *malloc(size_t n) { return counted(__libc_malloc(n)); }
EXPORT void *calloc(size_t n, size_t size) { return counted(__libc_calloc(n, size)); }
EXPORT void *memalign(size_t align, size_t n) { return counted(__libc_memalign(align, n)); }
EXPORT void *valloc(size_t n) { return counted(__libc_valloc(n)); }
EXPORT void *pvalloc(size_t n) { return counted(__libc_pvalloc(n)); }

EXPORT void free(void *p) {
    uncounted(p);
    __libc_free(p);
}

EXPORT void *realloc(void *p, size_t n) {
    long long old = p ? (long long)malloc_usable_size(p) : 0;
    void *q = __libc_realloc(p, n);
    // NULL back: either n was 0 and glibc freed p, or it failed and p is still there
    if (!q && !(p && n == 0)) return q;
    atomic_fetch_sub_explicit(&live_bytes, old, memory_order_relaxed);
    return counted(q);
}

EXPORT void *reallocarray(void *p, size_t n, size_t size) {
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(p, total);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (align < sizeof(void *) || (align & (align - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(align, n);
    if (!p) return ENOMEM;
    *out = counted(p);
    return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
    if (align == 0 || (align & (align - 1)) != 0) {
        errno = EINVAL;
        return NULL;
    }
    return counted(__libc_memalign(align, n));
}

/** The heap bytes live now (since the library loaded: blocks from before are not in it). */
EXPORT long long drmas_memcount_live(void) { return atomic_load(&live_bytes); }

/** The highest live count since the last reset (or the start). */
EXPORT long long drmas_memcount_peak(void) { return atomic_load(&peak_bytes); }

/** Starts a new high-water mark at the present live count; returns that count. */
EXPORT long long drmas_memcount_reset_peak(void) {
    long long now = atomic_load(&live_bytes);
    atomic_store(&peak_bytes, now);
    // a block counted between the two lines above would be lost from the new mark: count it again
    long long later = atomic_load(&live_bytes), peak = now;
    while (later > peak && !atomic_compare_exchange_weak(&peak_bytes, &peak, later)) {
    }
    return now;
}
