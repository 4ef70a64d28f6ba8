// test_memcount.c — libdrmas_memcount.so under LD_PRELOAD (ctest sets it): every allocator's
// blocks are counted by their usable size and taken off when freed or reallocated, failures and
// bad alignments count nothing, the high-water mark holds a freed peak until reset, and four
// threads allocating and freeing at once leave the live count where it was.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long long (*live)(void), (*peak)(void), (*reset)(void);
static int failures;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        if (!(cond)) {                                                     \
            fprintf(stderr, "test_memcount.c:%d: %s: ", __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                  \
            fputc('\n', stderr);                                           \
            failures++;                                                    \
        }                                                                  \
    } while (0)

// the compiler may drop a malloc/free pair whose block is never used
static void *volatile sink;

static void *worker(void *arg) {
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[64] = {0};
    for (int i = 0; i < 20000; i++) {
        int k = (int)(rand_r(&seed) % 64);
        if (held[k]) {
            free(held[k]);
            held[k] = NULL;
        } else {
            size_t n = 1 + rand_r(&seed) % (i % 7 == 0 ? 300000 : 2000);
            held[k] = (i % 3 == 0) ? calloc(1, n) : (i % 3 == 1) ? malloc(n) : realloc(malloc(16), n);
            memset(held[k], 1, n);
        }
    }
    for (int k = 0; k < 64; k++) free(held[k]);
    return NULL;
}

static void *idle(void *arg) { return arg; }

// sizes the compiler cannot see overflow
static volatile size_t huge = SIZE_MAX / 2;

int main(void) {
    live = (long long (*)(void))dlsym(RTLD_DEFAULT, "drmas_memcount_live");
    peak = (long long (*)(void))dlsym(RTLD_DEFAULT, "drmas_memcount_peak");
    reset = (long long (*)(void))dlsym(RTLD_DEFAULT, "drmas_memcount_reset_peak");
    if (!live || !peak || !reset) {
        fprintf(stderr, "test_memcount: libdrmas_memcount.so is not preloaded (LD_PRELOAD)\n");
        return 1;
    }
    long long base = live();

    void *p = malloc(1 << 20);
    sink = p;
    CHECK(live() - base == (long long)malloc_usable_size(p), "malloc: %lld", live() - base);
    CHECK(live() - base >= (1 << 20), "malloc: %lld", live() - base);
    p = realloc(p, 3 << 20);
    CHECK(live() - base == (long long)malloc_usable_size(p), "realloc up: %lld", live() - base);
    p = realloc(p, 100);
    CHECK(live() - base == (long long)malloc_usable_size(p), "realloc down: %lld", live() - base);
    CHECK(realloc(p, 0) == NULL, "realloc(p, 0) frees");
    CHECK(live() == base, "realloc(p, 0): %lld", live() - base);

    p = calloc(1000, 1000);
    CHECK(live() - base == (long long)malloc_usable_size(p), "calloc: %lld", live() - base);
    free(p);
    CHECK(live() == base, "free after calloc: %lld", live() - base);
    errno = 0;
    CHECK(calloc(huge, 4) == NULL && live() == base, "an overflowing calloc counts nothing");

    void *a = NULL;
    CHECK(posix_memalign(&a, 4096, 5000) == 0 && ((uintptr_t)a & 4095) == 0, "posix_memalign 4096");
    CHECK(live() - base == (long long)malloc_usable_size(a), "posix_memalign: %lld", live() - base);
    void *b = aligned_alloc(64, 640), *c = memalign(256, 70000);
    CHECK(b && c && ((uintptr_t)b & 63) == 0 && ((uintptr_t)c & 255) == 0, "aligned_alloc / memalign");
    CHECK(live() - base == (long long)(malloc_usable_size(a) + malloc_usable_size(b) + malloc_usable_size(c)),
          "three aligned blocks: %lld", live() - base);
    free(a), free(b), free(c);
    CHECK(live() == base, "aligned blocks freed: %lld", live() - base);
    void *bad = (void *)1;
    CHECK(posix_memalign(&bad, 24, 100) == EINVAL && bad == (void *)1 && live() == base, "posix_memalign(24) is EINVAL");
    errno = 0;
    CHECK(aligned_alloc(48, 96) == NULL && errno == EINVAL && live() == base, "aligned_alloc(48) is EINVAL");
    errno = 0;
    CHECK(reallocarray(NULL, huge, 3) == NULL && errno == ENOMEM && live() == base, "reallocarray overflow");
    free(NULL);
    CHECK(live() == base, "free(NULL)");

    // the high-water mark: 10 MiB allocated and freed stays in it until reset
    CHECK(reset() == base, "reset returns the live count");
    void *big = malloc(10 << 20);
    sink = big;
    free(big);
    CHECK(peak() - base >= (10 << 20), "peak after a freed 10 MiB: %lld", peak() - base);
    CHECK(live() == base, "live after it: %lld", live() - base);
    reset();
    CHECK(peak() == base, "peak after reset: %lld", peak() - base);

    // threads: glibc keeps a little per thread (its TLS vector) with the stacks it caches, so the
    // count is compared from after a first round of four idle threads
    pthread_t t[4];
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, idle, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    base = live();
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    CHECK(live() == base, "four threads' blocks all freed: %lld", live() - base);
    CHECK(peak() > base, "their peak: %lld", peak() - base);

    if (failures) {
        fprintf(stderr, "test_memcount: %d failures\n", failures);
        return 1;
    }
    printf("test_memcount: all passed\n");
    return 0;
}
