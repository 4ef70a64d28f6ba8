// api.cpp — the exported C entry points of libdrmas: argument checks shared by every backend
// (NULL pointers, sizes, config values), then dispatch to the CPU or CUDA backend. No C++
// exception crosses the ABI: each entry point catches everything and turns it into a status.
#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include <new>
#include <string>

#include "backend.h"
#include "drmas.h"

#ifndef DRMAS_VERSION
#define DRMAS_VERSION "0.1.0"
#endif

namespace drmas {

static thread_local std::string g_last_error;

int32_t fail(int32_t code, const char* fmt, ...) {
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_last_error = buf;
    return code;
}

void clear_error() { g_last_error.clear(); }

}  // namespace drmas

using namespace drmas;

namespace {

// Runs `body` with the exception firewall that keeps C++ exceptions out of the JVM.
template <class F>
int32_t guarded(const char* fn, F body) {
    try {
        clear_error();
        return body();
    } catch (const std::bad_alloc&) {
        return fail(DRMAS_ERR_ALLOC, "%s: out of memory", fn);
    } catch (const std::exception& e) {
        return fail(DRMAS_ERR_CUDA, "%s: internal error: %s", fn, e.what());
    } catch (...) {
        return fail(DRMAS_ERR_CUDA, "%s: internal error", fn);
    }
}

int32_t check_device(const char* fn, int32_t device) {
    if (device == DRMAS_DEVICE_CPU) return DRMAS_OK;
    if (device == DRMAS_DEVICE_CUDA) {
        if (!cuda_compiled())
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: this libdrmas was built without CUDA (nvcc was not found at build time)", fn);
        if (!cuda_available())
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: no usable CUDA device (no GPU or no driver; CUDA says: %s)", fn,
                        cuda_unavailable_reason());
        return DRMAS_OK;
    }
    return fail(DRMAS_ERR_CONFIG, "%s: device must be %d (CPU) or %d (CUDA), got %d", fn,
                DRMAS_DEVICE_CPU, DRMAS_DEVICE_CUDA, device);
}

#define DRMAS_REQUIRE(cond, code, ...) \
    do {                               \
        if (!(cond)) return fail(code, __VA_ARGS__); \
    } while (0)

// What an array of each element type is called in the alignment message.
const char* what_of(const float*) { return "a float array"; }
const char* what_of(const double*) { return "a double array"; }
const char* what_of(const int32_t*) { return "an int32_t array"; }
const char* what_of(const int64_t*) { return "an int64_t array"; }
const char* what_of(const uint64_t*) { return "a uint64_t array"; }
const char* what_of(const uint16_t*) { return "a bf16 (uint16_t) array"; }
const char* what_of(const uint8_t*) { return "a uint8_t array"; }
const char* what_of(void* const*) { return "a pointer (void*)"; }
const char* what_of(const drmas_norm_config*) { return "a drmas_norm_config"; }
const char* what_of(const drmas_loss_config*) { return "a drmas_loss_config"; }
const char* what_of(const drmas_lmhead_config*) { return "a drmas_lmhead_config"; }

// A pointer that is not a multiple of its element type's alignment is undefined behaviour on the
// host (the compiler may assume the alignment: vectorised loops, atomics; x86 forgives only most of
// it) and, on CUDA, a "misaligned address" fault, which is sticky: it ends the process's CUDA context.
// NULL passes (the NULL checks are separate, and know when NULL is allowed).
template <class T>
int32_t require_aligned(const char* fn, const char* name, const T* p) {
    if ((uintptr_t)(const void*)p % alignof(T) == 0) return DRMAS_OK;
    return fail(DRMAS_ERR_CONFIG, "%s: %s (%p) is not aligned to %zu bytes (%s must start on a multiple of %zu)", fn, name,
                (const void*)p, alignof(T), what_of(p), alignof(T));
}

// Every entry point checks each of its non-NULL data pointers right after the device, before
// anything reads through them; `fn` is the entry point's name in scope.
#define DRMAS_REQUIRE_ALIGNED(ptr, name) \
    do {                                 \
        if (int32_t st_ = require_aligned(fn, name, ptr)) return st_; \
    } while (0)

int32_t check_offsets_args(const char* fn, int64_t num_rows, const int64_t* row_offsets,
                           int64_t num_tokens) {
    DRMAS_REQUIRE(num_rows >= 0, DRMAS_ERR_SIZE, "%s: num_rows must be >= 0, got %lld", fn, (long long)num_rows);
    DRMAS_REQUIRE(num_tokens >= 0, DRMAS_ERR_SIZE, "%s: num_tokens must be >= 0, got %lld", fn, (long long)num_tokens);
    // num_rows + 1 in unsigned arithmetic: num_rows = INT64_MAX is a valid argument to reject, not an overflow
    DRMAS_REQUIRE(row_offsets != nullptr, DRMAS_ERR_NULL, "%s: row_offsets is NULL (it needs num_rows + 1 = %llu entries)", fn,
                  (unsigned long long)num_rows + 1);
    return DRMAS_OK;
}

// The loss fields shared by drmas_loss_config and drmas_lmhead_config.
template <class C>
int32_t check_loss_config(const char* fn, const C& c) {
    DRMAS_REQUIRE(isfinite(c.clip_low) && c.clip_low >= 0 && c.clip_low < 1, DRMAS_ERR_CONFIG,
                  "%s: cfg.clip_low must be in [0, 1), got %g", fn, c.clip_low);
    DRMAS_REQUIRE(isfinite(c.clip_high) && c.clip_high >= 0, DRMAS_ERR_CONFIG,
                  "%s: cfg.clip_high must be finite and >= 0, got %g", fn, c.clip_high);
    DRMAS_REQUIRE(c.dual_clip == 0 || (isfinite(c.dual_clip) && c.dual_clip > 1), DRMAS_ERR_CONFIG,
                  "%s: cfg.dual_clip must be 0 (off) or > 1, got %g", fn, c.dual_clip);
    // The kernels take kl_coef and 1 / normalizer as floats: a value that overflows float would make
    // inf * 0 = NaN gradients (even with the KL term off), so it is refused here.
    DRMAS_REQUIRE(isfinite(c.kl_coef) && fabs(c.kl_coef) <= FLT_MAX, DRMAS_ERR_CONFIG,
                  "%s: cfg.kl_coef must be a finite float (|x| <= 3.4e38), got %g", fn, c.kl_coef);
    DRMAS_REQUIRE(isfinite(c.normalizer) && c.normalizer > 0 && 1.0 / c.normalizer <= FLT_MAX, DRMAS_ERR_CONFIG,
                  "%s: cfg.normalizer must be finite and >= 1 / FLT_MAX (its inverse is a float), got %g", fn, c.normalizer);
    DRMAS_REQUIRE(c.kl_type >= DRMAS_KL_NONE && c.kl_type <= DRMAS_KL_K3, DRMAS_ERR_CONFIG,
                  "%s: cfg.kl_type must be 0..3 (none, k1, k2, k3), got %d", fn, c.kl_type);
    DRMAS_REQUIRE(c.per_row_mean == 0 || c.per_row_mean == 1, DRMAS_ERR_CONFIG,
                  "%s: cfg.per_row_mean must be 0 or 1, got %d", fn, c.per_row_mean);
    return DRMAS_OK;
}

}  // namespace

extern "C" {

const char* drmas_last_error(void) { return g_last_error.c_str(); }
const char* drmas_version(void) { return DRMAS_VERSION; }
int32_t drmas_cuda_compiled(void) { return cuda_compiled(); }
int32_t drmas_cuda_available(void) {
    try {
        return cuda_available();
    } catch (...) {
        return 0;
    }
}

int32_t drmas_segment_stats_f32(int32_t device, int64_t n, const float* values,
                                const int32_t* segment_ids, int64_t num_segments, int32_t ddof,
                                int64_t* count, double* mean, double* m2, double* std,
                                void* stream) {
    const char* fn = "drmas_segment_stats_f32";
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(values, "values");
        DRMAS_REQUIRE_ALIGNED(segment_ids, "segment_ids");
        DRMAS_REQUIRE_ALIGNED(count, "count");
        DRMAS_REQUIRE_ALIGNED(mean, "mean");
        DRMAS_REQUIRE_ALIGNED(m2, "m2");
        DRMAS_REQUIRE_ALIGNED(std, "std");
        DRMAS_REQUIRE(n >= 0, DRMAS_ERR_SIZE, "%s: n must be >= 0, got %lld", fn, (long long)n);
        DRMAS_REQUIRE(num_segments >= 0 && num_segments <= INT32_MAX, DRMAS_ERR_SIZE,
                      "%s: num_segments must be in [0, 2^31), got %lld", fn, (long long)num_segments);
        DRMAS_REQUIRE(ddof == 0 || ddof == 1, DRMAS_ERR_CONFIG, "%s: ddof must be 0 (biased) or 1 (unbiased), got %d", fn, ddof);
        DRMAS_REQUIRE(n == 0 || values, DRMAS_ERR_NULL, "%s: values is NULL", fn);
        DRMAS_REQUIRE(n == 0 || segment_ids, DRMAS_ERR_NULL, "%s: segment_ids is NULL", fn);
        DRMAS_REQUIRE(n == 0 || num_segments > 0, DRMAS_ERR_RANGE, "%s: %lld values but num_segments is 0", fn, (long long)n);
        DRMAS_REQUIRE(num_segments == 0 || count, DRMAS_ERR_NULL, "%s: count is NULL", fn);
        DRMAS_REQUIRE(num_segments == 0 || mean, DRMAS_ERR_NULL, "%s: mean is NULL", fn);
        DRMAS_REQUIRE(num_segments == 0 || m2, DRMAS_ERR_NULL, "%s: m2 is NULL", fn);
        if (device == DRMAS_DEVICE_CUDA)
            return segment_stats_cuda(n, values, segment_ids, num_segments, ddof, count, mean, m2, std, stream);
        return segment_stats_cpu(n, values, segment_ids, num_segments, ddof, count, mean, m2, std);
    });
}

}  // extern "C"

// Whether [a, a + abytes) and [b, b + bbytes) share a byte (host or device addresses alike: CUDA's
// address space is unified).
static bool overlaps(const void* a, uint64_t abytes, const void* b, uint64_t bbytes) {
    if (!a || !b || abytes == 0 || bbytes == 0) return false;
    const uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return x < y + bbytes && y < x + abytes;
}

// The bytes that `rows` rows of `width` elements of `elem` bytes, `stride` elements apart, span from
// the first (the last row needs only its width), for overlaps(). Capped at 2^62: no buffer is that
// large, and the cap keeps overlaps()'s address sums from wrapping.
static uint64_t span_bytes(int64_t rows, int64_t stride, int64_t width, uint64_t elem) {
    if (rows <= 0 || width <= 0) return 0;
    const unsigned __int128 b = ((unsigned __int128)(rows - 1) * (uint64_t)stride + (uint64_t)width) * elem;
    return b > ((uint64_t)1 << 62) ? (uint64_t)1 << 62 : (uint64_t)b;
}

// An array's name, start and extent in bytes, for the overlap checks.
struct Extent {
    const char* name;
    const void* p;
    uint64_t bytes;
};

// Two outputs that are written while the inputs are still read: neither may share memory with an input,
// nor with the other (in place would be wrong results, not a speed-up).
template <size_t N>
static int32_t outputs_apart(const char* fn, Extent a, Extent b, const Extent (&in)[N]) {
    for (const Extent& x : in) {
        DRMAS_REQUIRE(!overlaps(a.p, a.bytes, x.p, x.bytes), DRMAS_ERR_CONFIG,
                      "%s: %s overlaps %s (the outputs must not share memory with the inputs)", fn, a.name, x.name);
        DRMAS_REQUIRE(!overlaps(b.p, b.bytes, x.p, x.bytes), DRMAS_ERR_CONFIG,
                      "%s: %s overlaps %s (the outputs must not share memory with the inputs)", fn, b.name, x.name);
    }
    DRMAS_REQUIRE(!overlaps(a.p, a.bytes, b.p, b.bytes), DRMAS_ERR_CONFIG, "%s: %s and %s overlap", fn, a.name, b.name);
    return DRMAS_OK;
}

// Both advantage entry points: the same checks of what can be checked without the data.
static int32_t advantage_entry(const char* fn, bool trusted, int32_t device, const drmas_norm_config* cfg, int64_t n,
                               const float* scores, const int32_t* uid, const int32_t* traj, const int32_t* agent,
                               int64_t num_uids, int64_t num_trajs, int64_t num_agents, float* advantages,
                               double* diagnostics, void* stream) {
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(cfg, "cfg");
        DRMAS_REQUIRE_ALIGNED(scores, "scores");
        DRMAS_REQUIRE_ALIGNED(uid, "uid");
        DRMAS_REQUIRE_ALIGNED(traj, "traj");
        DRMAS_REQUIRE_ALIGNED(agent, "agent");
        DRMAS_REQUIRE_ALIGNED(advantages, "advantages");
        DRMAS_REQUIRE_ALIGNED(diagnostics, "diagnostics");
        DRMAS_REQUIRE(cfg, DRMAS_ERR_NULL, "%s: cfg is NULL", fn);
        const drmas_norm_config& c = *cfg;
        DRMAS_REQUIRE(c.mean_from == DRMAS_FROM_GROUP || c.mean_from == DRMAS_FROM_AGENT, DRMAS_ERR_CONFIG,
                      "%s: cfg.mean_from must be 0 (group) or 1 (agent), got %d", fn, c.mean_from);
        DRMAS_REQUIRE(c.std_from == DRMAS_FROM_GROUP || c.std_from == DRMAS_FROM_AGENT, DRMAS_ERR_CONFIG,
                      "%s: cfg.std_from must be 0 (group) or 1 (agent), got %d", fn, c.std_from);
        DRMAS_REQUIRE(c.numerator == DRMAS_NUMERATOR_ROW || c.numerator == DRMAS_NUMERATOR_TRAJECTORY, DRMAS_ERR_CONFIG,
                      "%s: cfg.numerator must be 0 (row) or 1 (trajectory), got %d", fn, c.numerator);
        DRMAS_REQUIRE(c.global_pooling == DRMAS_POOL_TRAJECTORIES || c.global_pooling == DRMAS_POOL_ROWS, DRMAS_ERR_CONFIG,
                      "%s: cfg.global_pooling must be 0 (trajectories) or 1 (rows), got %d", fn, c.global_pooling);
        DRMAS_REQUIRE(c.singleton >= DRMAS_SINGLETON_FALLBACK && c.singleton <= DRMAS_SINGLETON_RAW, DRMAS_ERR_CONFIG,
                      "%s: cfg.singleton must be 0 (fallback), 1 (zero) or 2 (raw), got %d", fn, c.singleton);
        DRMAS_REQUIRE(c.ddof == 0 || c.ddof == 1, DRMAS_ERR_CONFIG, "%s: cfg.ddof must be 0 or 1, got %d", fn, c.ddof);
        DRMAS_REQUIRE(c.scale_by_std == 0 || c.scale_by_std == 1, DRMAS_ERR_CONFIG, "%s: cfg.scale_by_std must be 0 or 1, got %d", fn, c.scale_by_std);
        DRMAS_REQUIRE(c.reserved == 0, DRMAS_ERR_CONFIG, "%s: cfg.reserved must be 0, got %d", fn, c.reserved);
        DRMAS_REQUIRE(isfinite(c.eps) && (c.eps > 0 || (c.eps == 0 && !c.scale_by_std)), DRMAS_ERR_CONFIG,
                      "%s: cfg.eps must be finite and > 0 when dividing by the std, got %g", fn, c.eps);
        DRMAS_REQUIRE(n >= 0, DRMAS_ERR_SIZE, "%s: n must be >= 0, got %lld", fn, (long long)n);
        DRMAS_REQUIRE(num_uids >= 0 && num_agents >= 0 && num_trajs >= 0, DRMAS_ERR_SIZE,
                      "%s: num_uids, num_trajs and num_agents must be >= 0, got %lld, %lld, %lld", fn,
                      (long long)num_uids, (long long)num_trajs, (long long)num_agents);
        DRMAS_REQUIRE(num_uids <= INT32_MAX && num_trajs <= INT32_MAX && num_agents <= INT32_MAX &&
                          num_uids * num_agents <= (int64_t)1 << 40, DRMAS_ERR_SIZE,
                      "%s: num_uids x num_agents too large (%lld x %lld)", fn, (long long)num_uids, (long long)num_agents);
        const bool need_traj = c.global_pooling == DRMAS_POOL_TRAJECTORIES;
        if (n > 0) {
            DRMAS_REQUIRE(scores, DRMAS_ERR_NULL, "%s: scores is NULL", fn);
            DRMAS_REQUIRE(uid, DRMAS_ERR_NULL, "%s: uid is NULL", fn);
            DRMAS_REQUIRE(agent, DRMAS_ERR_NULL, "%s: agent is NULL", fn);
            DRMAS_REQUIRE(!need_traj || traj, DRMAS_ERR_NULL, "%s: traj is NULL (needed with global_pooling = trajectories)", fn);
            DRMAS_REQUIRE(advantages, DRMAS_ERR_NULL, "%s: advantages is NULL", fn);
            DRMAS_REQUIRE(num_uids > 0, DRMAS_ERR_RANGE, "%s: %lld rows but num_uids is 0", fn, (long long)n);
            DRMAS_REQUIRE(num_agents > 0, DRMAS_ERR_RANGE, "%s: %lld rows but num_agents is 0", fn, (long long)n);
            DRMAS_REQUIRE(!need_traj || num_trajs > 0, DRMAS_ERR_RANGE, "%s: %lld rows but num_trajs is 0", fn, (long long)n);
        }
        if (!need_traj) traj = nullptr;
        // The outputs may not share memory with the inputs or with each other: every path reads the
        // scores and ids after it has begun to write (the CUDA trusted entry's fallback reads them
        // all again), so in place would be wrong results, not a speed-up.
        const uint64_t row_bytes = 4 * (uint64_t)n, diag_bytes = diagnostics ? 8 * DRMAS_DIAG_FIELDS * (uint64_t)(num_uids * num_agents) : 0;
        const Extent inputs[] = {{"scores", scores, row_bytes}, {"uid", uid, row_bytes}, {"traj", traj, row_bytes},
                                 {"agent", agent, row_bytes}};
        if (int32_t st = outputs_apart(fn, {"advantages", advantages, row_bytes}, {"diagnostics", diagnostics, diag_bytes}, inputs))
            return st;
        if (device == DRMAS_DEVICE_CUDA)
            return advantage_cuda(c, n, scores, uid, traj, agent, num_uids, num_trajs, num_agents,
                                  advantages, diagnostics, stream, trusted);
        return advantage_cpu(c, n, scores, uid, traj, agent, num_uids, num_trajs, num_agents,
                             advantages, diagnostics, trusted);
    });
}

extern "C" {

int32_t drmas_advantage_f32(int32_t device, const drmas_norm_config* cfg, int64_t n,
                            const float* scores, const int32_t* uid, const int32_t* traj,
                            const int32_t* agent, int64_t num_uids, int64_t num_trajs,
                            int64_t num_agents, float* advantages, double* diagnostics,
                            void* stream) {
    return advantage_entry("drmas_advantage_f32", false, device, cfg, n, scores, uid, traj, agent, num_uids, num_trajs,
                           num_agents, advantages, diagnostics, stream);
}

int32_t drmas_advantage_trusted_f32(int32_t device, const drmas_norm_config* cfg, int64_t n,
                                    const float* scores, const int32_t* uid, const int32_t* traj,
                                    const int32_t* agent, int64_t num_uids, int64_t num_trajs,
                                    int64_t num_agents, float* advantages, double* diagnostics,
                                    void* stream) {
    return advantage_entry("drmas_advantage_trusted_f32", true, device, cfg, n, scores, uid, traj, agent, num_uids,
                           num_trajs, num_agents, advantages, diagnostics, stream);
}

int32_t drmas_broadcast_rows_f32(int32_t device, int64_t num_rows, const float* row_values,
                                 const int64_t* row_offsets, int64_t num_tokens,
                                 float* token_values, void* stream) {
    const char* fn = "drmas_broadcast_rows_f32";
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(row_values, "row_values");
        DRMAS_REQUIRE_ALIGNED(row_offsets, "row_offsets");
        DRMAS_REQUIRE_ALIGNED(token_values, "token_values");
        if (int32_t st = check_offsets_args(fn, num_rows, row_offsets, num_tokens)) return st;
        DRMAS_REQUIRE(num_rows == 0 || row_values, DRMAS_ERR_NULL, "%s: row_values is NULL", fn);
        DRMAS_REQUIRE(num_tokens == 0 || token_values, DRMAS_ERR_NULL, "%s: token_values is NULL", fn);
        if (device == DRMAS_DEVICE_CUDA)
            return broadcast_rows_cuda(num_rows, row_values, row_offsets, num_tokens, token_values, stream);
        return broadcast_rows_cpu(num_rows, row_values, row_offsets, num_tokens, token_values);
    });
}

// Both clipped-loss entry points; host_row_offsets (the async one's) is checked on the host.
static int32_t clipped_loss_entry(const char* fn, int32_t device, const drmas_loss_config* cfg, int64_t num_rows,
                                  const int64_t* host_row_offsets, const int64_t* row_offsets, int64_t num_tokens,
                                  const float* logp, const float* old_logp, const float* advantages,
                                  const float* ref_logp, const uint8_t* mask, float* grad, double* sums,
                                  void* stream, bool async, bool per_row) {
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(cfg, "cfg");
        DRMAS_REQUIRE_ALIGNED(host_row_offsets, "host_row_offsets");
        DRMAS_REQUIRE_ALIGNED(row_offsets, "row_offsets");
        DRMAS_REQUIRE_ALIGNED(logp, "logp");
        DRMAS_REQUIRE_ALIGNED(old_logp, "old_logp");
        DRMAS_REQUIRE_ALIGNED(advantages, per_row ? "row_advantages" : "advantages");
        DRMAS_REQUIRE_ALIGNED(ref_logp, "ref_logp");
        DRMAS_REQUIRE_ALIGNED(mask, "mask");
        DRMAS_REQUIRE_ALIGNED(grad, "grad");
        DRMAS_REQUIRE_ALIGNED(sums, "sums");
        DRMAS_REQUIRE(cfg, DRMAS_ERR_NULL, "%s: cfg is NULL", fn);
        const drmas_loss_config& c = *cfg;
        if (int32_t st = check_loss_config(fn, c)) return st;
        DRMAS_REQUIRE(c.kl_type == DRMAS_KL_NONE || ref_logp, DRMAS_ERR_NULL,
                      "%s: cfg.kl_type is set but ref_logp is NULL", fn);
        if (int32_t st = check_offsets_args(fn, num_rows, row_offsets, num_tokens)) return st;
        if (async) {
            DRMAS_REQUIRE(host_row_offsets != nullptr, DRMAS_ERR_NULL,
                          "%s: host_row_offsets is NULL (it needs num_rows + 1 = %llu entries)", fn,
                          (unsigned long long)num_rows + 1);  // (unsigned: as check_offsets_args)
            if (int32_t st = check_offsets(fn, num_rows, host_row_offsets, num_tokens)) return st;
        }
        if (num_tokens > 0) {
            DRMAS_REQUIRE(logp, DRMAS_ERR_NULL, "%s: logp is NULL", fn);
            DRMAS_REQUIRE(old_logp, DRMAS_ERR_NULL, "%s: old_logp is NULL", fn);
            if (!per_row) DRMAS_REQUIRE(advantages, DRMAS_ERR_NULL, "%s: advantages is NULL", fn);
            DRMAS_REQUIRE(grad, DRMAS_ERR_NULL, "%s: grad is NULL", fn);
        }
        if (per_row) DRMAS_REQUIRE(num_rows == 0 || advantages, DRMAS_ERR_NULL, "%s: row_advantages is NULL", fn);
        DRMAS_REQUIRE(sums, DRMAS_ERR_NULL, "%s: sums is NULL (it needs %d doubles)", fn, DRMAS_LOSS_SUMS);
        if (c.kl_type == DRMAS_KL_NONE) ref_logp = nullptr;
        {
            // the outputs may not share memory with the inputs or with each other: grad[t] is written while
            // later tokens' inputs are still to be read, and sums is read and written as the rows go
            const uint64_t tok4 = 4 * (uint64_t)num_tokens, sums_bytes = 8 * (uint64_t)DRMAS_LOSS_SUMS;
            const Extent inputs[] = {{"logp", logp, tok4},
                                     {"old_logp", old_logp, tok4},
                                     {per_row ? "row_advantages" : "advantages", advantages, per_row ? 4 * (uint64_t)num_rows : tok4},
                                     {"ref_logp", ref_logp, tok4},
                                     {"mask", mask, (uint64_t)num_tokens},
                                     {"row_offsets", row_offsets, 8 * ((uint64_t)num_rows + 1)},
                                     {"host_row_offsets", async ? host_row_offsets : nullptr, 8 * ((uint64_t)num_rows + 1)}};
            if (int32_t st = outputs_apart(fn, {"grad", grad, tok4}, {"sums", sums, sums_bytes}, inputs)) return st;
        }
        if (device == DRMAS_DEVICE_CUDA)
            return clipped_loss_cuda(c, num_rows, host_row_offsets, row_offsets, num_tokens, logp, old_logp, advantages,
                                     ref_logp, mask, grad, sums, stream, per_row);
        return clipped_loss_cpu(fn, c, num_rows, row_offsets, num_tokens, logp, old_logp, advantages,
                                ref_logp, mask, grad, sums, per_row);
    });
}

int32_t drmas_clipped_loss_f32(int32_t device, const drmas_loss_config* cfg, int64_t num_rows,
                               const int64_t* row_offsets, int64_t num_tokens, const float* logp,
                               const float* old_logp, const float* advantages,
                               const float* ref_logp, const uint8_t* mask, float* grad,
                               double* sums, void* stream) {
    return clipped_loss_entry("drmas_clipped_loss_f32", device, cfg, num_rows, nullptr, row_offsets, num_tokens, logp,
                              old_logp, advantages, ref_logp, mask, grad, sums, stream, false, false);
}

int32_t drmas_clipped_loss_async_f32(int32_t device, const drmas_loss_config* cfg, int64_t num_rows,
                                     const int64_t* host_row_offsets, const int64_t* row_offsets,
                                     int64_t num_tokens, const float* logp, const float* old_logp,
                                     const float* advantages, const float* ref_logp, const uint8_t* mask,
                                     float* grad, double* sums, void* stream) {
    return clipped_loss_entry("drmas_clipped_loss_async_f32", device, cfg, num_rows, host_row_offsets, row_offsets,
                              num_tokens, logp, old_logp, advantages, ref_logp, mask, grad, sums, stream, true, false);
}

int32_t drmas_clipped_loss_rows_f32(int32_t device, const drmas_loss_config* cfg, int64_t num_rows,
                                    const int64_t* host_row_offsets, const int64_t* row_offsets,
                                    int64_t num_tokens, const float* logp, const float* old_logp,
                                    const float* row_advantages, const float* ref_logp, const uint8_t* mask,
                                    float* grad, double* sums, void* stream) {
    return clipped_loss_entry("drmas_clipped_loss_rows_f32", device, cfg, num_rows, host_row_offsets, row_offsets,
                              num_tokens, logp, old_logp, row_advantages, ref_logp, mask, grad, sums, stream,
                              host_row_offsets != nullptr, true);
}

}  // extern "C"

// The LM head's entry points for logits of type L (float, or uint16_t holding bf16): the same checks,
// then the backend's overload for L.
template <class L>
static int32_t lmhead_logprobs_entry(const char* fn, int32_t device, int64_t num_tokens, int64_t vocab, const L* logits,
                                     const int64_t* targets, float* logp, float* entropy, uint64_t* errors, void* stream,
                                     bool async) {
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(logits, "logits");
        DRMAS_REQUIRE_ALIGNED(targets, "targets");
        DRMAS_REQUIRE_ALIGNED(logp, "logp");
        DRMAS_REQUIRE_ALIGNED(entropy, "entropy");
        DRMAS_REQUIRE_ALIGNED(errors, "errors");
        DRMAS_REQUIRE(num_tokens >= 0, DRMAS_ERR_SIZE, "%s: num_tokens must be >= 0, got %lld", fn, (long long)num_tokens);
        DRMAS_REQUIRE(vocab >= 1, DRMAS_ERR_SIZE, "%s: vocab must be >= 1, got %lld", fn, (long long)vocab);
        DRMAS_REQUIRE(num_tokens <= INT64_MAX / vocab, DRMAS_ERR_SIZE, "%s: num_tokens x vocab overflows (%lld x %lld)", fn,
                      (long long)num_tokens, (long long)vocab);
        if (num_tokens > 0) {
            DRMAS_REQUIRE(logits, DRMAS_ERR_NULL, "%s: logits is NULL", fn);
            DRMAS_REQUIRE(targets, DRMAS_ERR_NULL, "%s: targets is NULL", fn);
            DRMAS_REQUIRE(logp, DRMAS_ERR_NULL, "%s: logp is NULL", fn);
        }
        if (async) DRMAS_REQUIRE(errors != nullptr, DRMAS_ERR_NULL, "%s: errors is NULL (it needs 2 entries)", fn);
        if (device == DRMAS_DEVICE_CUDA)
            return lmhead_logprobs_cuda(num_tokens, vocab, logits, targets, logp, entropy, async ? errors : nullptr, stream);
        if (async) errors[0] = errors[1] = UINT64_MAX;  // the CPU reports data errors at once
        return lmhead_logprobs_cpu(num_tokens, vocab, logits, targets, logp, entropy);
    });
}

template <class L>
static int32_t lmhead_chunk_entry(const char* fn, int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                  const int64_t* host_row_offsets, const int64_t* row_offsets, int64_t num_tokens,
                                  int64_t chunk_begin, int64_t chunk_tokens, int64_t vocab, L* logits, const int64_t* targets,
                                  const float* old_logp, const float* advantages, const float* ref_logp, const uint8_t* mask,
                                  float* logp, float* entropy, double* sums, uint64_t* errors, void* stream, bool async) {
    return guarded(fn, [&]() -> int32_t {
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(cfg, "cfg");
        DRMAS_REQUIRE_ALIGNED(host_row_offsets, "host_row_offsets");
        DRMAS_REQUIRE_ALIGNED(row_offsets, "row_offsets");
        DRMAS_REQUIRE_ALIGNED(logits, "logits");
        DRMAS_REQUIRE_ALIGNED(targets, "targets");
        DRMAS_REQUIRE_ALIGNED(old_logp, "old_logp");
        DRMAS_REQUIRE_ALIGNED(advantages, "advantages");
        DRMAS_REQUIRE_ALIGNED(ref_logp, "ref_logp");
        DRMAS_REQUIRE_ALIGNED(mask, "mask");
        DRMAS_REQUIRE_ALIGNED(logp, "logp");
        DRMAS_REQUIRE_ALIGNED(entropy, "entropy");
        DRMAS_REQUIRE_ALIGNED(sums, "sums");
        DRMAS_REQUIRE_ALIGNED(errors, "errors");
        DRMAS_REQUIRE(cfg, DRMAS_ERR_NULL, "%s: cfg is NULL", fn);
        const drmas_lmhead_config& c = *cfg;
        if (int32_t st = check_loss_config(fn, c)) return st;
        DRMAS_REQUIRE(isfinite(c.entropy_coef) && fabs(c.entropy_coef) <= FLT_MAX, DRMAS_ERR_CONFIG,
                      "%s: cfg.entropy_coef must be a finite float (|x| <= 3.4e38), got %g", fn, c.entropy_coef);
        DRMAS_REQUIRE(c.kl_type == DRMAS_KL_NONE || ref_logp, DRMAS_ERR_NULL, "%s: cfg.kl_type is set but ref_logp is NULL", fn);
        if (int32_t st = check_offsets_args(fn, num_rows, row_offsets, num_tokens)) return st;
        if (async) {
            DRMAS_REQUIRE(host_row_offsets != nullptr, DRMAS_ERR_NULL,
                          "%s: host_row_offsets is NULL (it needs num_rows + 1 = %llu entries)", fn,
                          (unsigned long long)num_rows + 1);  // (unsigned: as check_offsets_args)
            if (int32_t st = check_offsets(fn, num_rows, host_row_offsets, num_tokens)) return st;
            DRMAS_REQUIRE(errors != nullptr, DRMAS_ERR_NULL, "%s: errors is NULL (it needs 2 entries)", fn);
        }
        DRMAS_REQUIRE(vocab >= 1, DRMAS_ERR_SIZE, "%s: vocab must be >= 1, got %lld", fn, (long long)vocab);
        DRMAS_REQUIRE(chunk_begin >= 0 && chunk_tokens >= 0 && chunk_begin <= num_tokens && chunk_tokens <= num_tokens - chunk_begin,
                      DRMAS_ERR_RANGE, "%s: the chunk [%lld, %lld + %lld) is not inside the %lld tokens", fn, (long long)chunk_begin,
                      (long long)chunk_begin, (long long)chunk_tokens, (long long)num_tokens);
        DRMAS_REQUIRE(chunk_tokens <= INT64_MAX / vocab, DRMAS_ERR_SIZE, "%s: chunk_tokens x vocab overflows (%lld x %lld)", fn,
                      (long long)chunk_tokens, (long long)vocab);
        if (num_tokens > 0) {
            DRMAS_REQUIRE(targets, DRMAS_ERR_NULL, "%s: targets is NULL", fn);
            DRMAS_REQUIRE(old_logp, DRMAS_ERR_NULL, "%s: old_logp is NULL", fn);
        }
        DRMAS_REQUIRE(num_rows == 0 || advantages, DRMAS_ERR_NULL, "%s: advantages is NULL (it needs num_rows = %lld entries)", fn,
                      (long long)num_rows);
        DRMAS_REQUIRE(chunk_tokens == 0 || logits, DRMAS_ERR_NULL, "%s: logits is NULL", fn);
        DRMAS_REQUIRE(sums, DRMAS_ERR_NULL, "%s: sums is NULL (it needs %d doubles)", fn, DRMAS_LMHEAD_SUMS);
        if (c.kl_type == DRMAS_KL_NONE) ref_logp = nullptr;
        if (device == DRMAS_DEVICE_CUDA)
            return lmhead_chunk_cuda(c, num_rows, async ? host_row_offsets : nullptr, row_offsets, num_tokens, chunk_begin,
                                     chunk_tokens, vocab, logits, targets, old_logp, advantages, ref_logp, mask, logp, entropy,
                                     sums, async ? errors : nullptr, stream);
        // the CPU reports data errors as it finds them (nothing to wait for): the async form is the plain one
        if (async) errors[0] = errors[1] = UINT64_MAX;
        return lmhead_chunk_cpu(c, num_rows, row_offsets, num_tokens, chunk_begin, chunk_tokens, vocab, logits, targets, old_logp,
                                advantages, ref_logp, mask, logp, entropy, sums);
    });
}

extern "C" {

int32_t drmas_lmhead_logprobs_f32(int32_t device, int64_t num_tokens, int64_t vocab, const float* logits,
                                  const int64_t* targets, float* logp, float* entropy, void* stream) {
    return lmhead_logprobs_entry("drmas_lmhead_logprobs_f32", device, num_tokens, vocab, logits, targets, logp, entropy,
                                 nullptr, stream, false);
}

int32_t drmas_lmhead_logprobs_async_f32(int32_t device, int64_t num_tokens, int64_t vocab, const float* logits,
                                        const int64_t* targets, float* logp, float* entropy, uint64_t* errors, void* stream) {
    return lmhead_logprobs_entry("drmas_lmhead_logprobs_async_f32", device, num_tokens, vocab, logits, targets, logp, entropy,
                                 errors, stream, true);
}

int32_t drmas_lmhead_logprobs_bf16(int32_t device, int64_t num_tokens, int64_t vocab, const uint16_t* logits,
                                   const int64_t* targets, float* logp, float* entropy, void* stream) {
    return lmhead_logprobs_entry("drmas_lmhead_logprobs_bf16", device, num_tokens, vocab, logits, targets, logp, entropy,
                                 nullptr, stream, false);
}

int32_t drmas_lmhead_logprobs_async_bf16(int32_t device, int64_t num_tokens, int64_t vocab, const uint16_t* logits,
                                        const int64_t* targets, float* logp, float* entropy, uint64_t* errors, void* stream) {
    return lmhead_logprobs_entry("drmas_lmhead_logprobs_async_bf16", device, num_tokens, vocab, logits, targets, logp, entropy,
                                 errors, stream, true);
}

int32_t drmas_lmhead_chunk_f32(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                               const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                               int64_t vocab, float* logits, const int64_t* targets, const float* old_logp,
                               const float* advantages, const float* ref_logp, const uint8_t* mask, float* logp,
                               float* entropy, double* sums, void* stream) {
    return lmhead_chunk_entry("drmas_lmhead_chunk_f32", device, cfg, num_rows, nullptr, row_offsets, num_tokens, chunk_begin,
                              chunk_tokens, vocab, logits, targets, old_logp, advantages, ref_logp, mask, logp, entropy, sums,
                              nullptr, stream, false);
}

int32_t drmas_lmhead_chunk_async_f32(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                     const int64_t* host_row_offsets, const int64_t* row_offsets, int64_t num_tokens,
                                     int64_t chunk_begin, int64_t chunk_tokens, int64_t vocab, float* logits,
                                     const int64_t* targets, const float* old_logp, const float* advantages,
                                     const float* ref_logp, const uint8_t* mask, float* logp, float* entropy, double* sums,
                                     uint64_t* errors, void* stream) {
    return lmhead_chunk_entry("drmas_lmhead_chunk_async_f32", device, cfg, num_rows, host_row_offsets, row_offsets, num_tokens,
                              chunk_begin, chunk_tokens, vocab, logits, targets, old_logp, advantages, ref_logp, mask, logp,
                              entropy, sums, errors, stream, true);
}

int32_t drmas_lmhead_chunk_bf16(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                                int64_t vocab, uint16_t* logits, const int64_t* targets, const float* old_logp,
                                const float* advantages, const float* ref_logp, const uint8_t* mask, float* logp,
                                float* entropy, double* sums, void* stream) {
    return lmhead_chunk_entry("drmas_lmhead_chunk_bf16", device, cfg, num_rows, nullptr, row_offsets, num_tokens, chunk_begin,
                              chunk_tokens, vocab, logits, targets, old_logp, advantages, ref_logp, mask, logp, entropy, sums,
                              nullptr, stream, false);
}

int32_t drmas_lmhead_chunk_async_bf16(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                     const int64_t* host_row_offsets, const int64_t* row_offsets, int64_t num_tokens,
                                     int64_t chunk_begin, int64_t chunk_tokens, int64_t vocab, uint16_t* logits,
                                     const int64_t* targets, const float* old_logp, const float* advantages,
                                     const float* ref_logp, const uint8_t* mask, float* logp, float* entropy, double* sums,
                                     uint64_t* errors, void* stream) {
    return lmhead_chunk_entry("drmas_lmhead_chunk_async_bf16", device, cfg, num_rows, host_row_offsets, row_offsets, num_tokens,
                              chunk_begin, chunk_tokens, vocab, logits, targets, old_logp, advantages, ref_logp, mask, logp,
                              entropy, sums, errors, stream, true);
}

int32_t drmas_cuda_device_count(void) {
    try {
        return cuda_device_count();
    } catch (...) {
        return 0;
    }
}
int32_t drmas_cuda_set_device(int32_t device) {
    return guarded("drmas_cuda_set_device", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_set_device", DRMAS_DEVICE_CUDA)) return st;
        return cuda_set_device(device);
    });
}
int32_t drmas_cuda_check_device(int32_t device) {
    return guarded("drmas_cuda_check_device", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_check_device", DRMAS_DEVICE_CUDA)) return st;
        return cuda_check_device(device);
    });
}
int32_t drmas_cuda_get_device(int32_t* device) {
    return guarded("drmas_cuda_get_device", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_get_device", DRMAS_DEVICE_CUDA)) return st;
        if (!device) return fail(DRMAS_ERR_NULL, "drmas_cuda_get_device: device is NULL");
        const char* fn = "drmas_cuda_get_device";
        DRMAS_REQUIRE_ALIGNED(device, "device");
        return cuda_get_device(device);
    });
}

int32_t drmas_cuda_malloc(size_t bytes, void** ptr) {
    return guarded("drmas_cuda_malloc", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_malloc", DRMAS_DEVICE_CUDA)) return st;
        if (!ptr) return fail(DRMAS_ERR_NULL, "drmas_cuda_malloc: ptr is NULL");
        const char* fn = "drmas_cuda_malloc";
        DRMAS_REQUIRE_ALIGNED(ptr, "ptr");
        return cuda_malloc(bytes, ptr);
    });
}
int32_t drmas_cuda_free(void* ptr) {
    return guarded("drmas_cuda_free", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_free", DRMAS_DEVICE_CUDA)) return st;
        return cuda_free(ptr);
    });
}
int32_t drmas_cuda_memcpy(void* dst, const void* src, size_t bytes, int32_t kind) {
    return guarded("drmas_cuda_memcpy", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_memcpy", DRMAS_DEVICE_CUDA)) return st;
        if (bytes > 0 && (!dst || !src)) return fail(DRMAS_ERR_NULL, "drmas_cuda_memcpy: dst or src is NULL");
        if (kind < DRMAS_COPY_HOST_TO_DEVICE || kind > DRMAS_COPY_DEVICE_TO_DEVICE)
            return fail(DRMAS_ERR_CONFIG, "drmas_cuda_memcpy: kind must be 1, 2 or 3, got %d", kind);
        return cuda_memcpy(dst, src, bytes, kind);
    });
}
int32_t drmas_cuda_synchronize(void* stream) {
    return guarded("drmas_cuda_synchronize", [&]() -> int32_t {
        if (int32_t st = check_device("drmas_cuda_synchronize", DRMAS_DEVICE_CUDA)) return st;
        return cuda_synchronize(stream);
    });
}

int32_t drmas_decode_attention_f32(int32_t device, int64_t rows, int64_t heads, int64_t kv_heads, int64_t head_dim,
                                   float* qkv, int64_t qkv_stride, const float* q_norm, const float* k_norm, double norm_eps,
                                   const float* cos, const float* sin_signed, float* k_cache, float* v_cache,
                                   int64_t cache_row_stride, int64_t capacity, int64_t write_slot, int64_t slots,
                                   const uint8_t* mask, double scale, float* out) {
    const char* fn = "drmas_decode_attention_f32";
    return guarded(fn, [&]() -> int32_t {
        if (device == DRMAS_DEVICE_CUDA)
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: runs on the CPU only (GPU decoding uses LibTorch's attention)", fn);
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(qkv, "qkv");
        DRMAS_REQUIRE_ALIGNED(q_norm, "q_norm");
        DRMAS_REQUIRE_ALIGNED(k_norm, "k_norm");
        DRMAS_REQUIRE_ALIGNED(cos, "cos");
        DRMAS_REQUIRE_ALIGNED(sin_signed, "sin_signed");
        DRMAS_REQUIRE_ALIGNED(k_cache, "k_cache");
        DRMAS_REQUIRE_ALIGNED(v_cache, "v_cache");
        DRMAS_REQUIRE_ALIGNED(mask, "mask");
        DRMAS_REQUIRE_ALIGNED(out, "out");
        DRMAS_REQUIRE(rows >= 0, DRMAS_ERR_SIZE, "%s: rows must be >= 0, got %lld", fn, (long long)rows);
        DRMAS_REQUIRE(heads >= 1 && kv_heads >= 1 && heads % kv_heads == 0, DRMAS_ERR_SIZE,
                      "%s: heads (%lld) must be a positive multiple of kv_heads (%lld)", fn, (long long)heads, (long long)kv_heads);
        DRMAS_REQUIRE(head_dim >= 2 && head_dim % 2 == 0 && head_dim <= (1 << 16), DRMAS_ERR_SIZE,
                      "%s: head_dim must be even, in [2, 65536], got %lld", fn, (long long)head_dim);
        DRMAS_REQUIRE(heads <= (1 << 16), DRMAS_ERR_SIZE, "%s: heads must be <= 65536, got %lld", fn, (long long)heads);
        DRMAS_REQUIRE(capacity >= 1 && capacity <= INT32_MAX, DRMAS_ERR_SIZE, "%s: capacity must be in [1, 2^31 - 1], got %lld", fn,
                      (long long)capacity);
        DRMAS_REQUIRE(slots >= 1 && slots <= capacity, DRMAS_ERR_RANGE, "%s: slots (%lld) must be in [1, capacity = %lld]", fn,
                      (long long)slots, (long long)capacity);
        DRMAS_REQUIRE(write_slot >= 0 && write_slot < slots, DRMAS_ERR_RANGE, "%s: write_slot (%lld) must be in [0, slots = %lld)",
                      fn, (long long)write_slot, (long long)slots);
        const int64_t width = (heads + 2 * kv_heads) * head_dim, per_row = kv_heads * capacity * head_dim;
        DRMAS_REQUIRE(qkv_stride >= width, DRMAS_ERR_SIZE, "%s: qkv_stride (%lld) is less than a row's (heads + 2 kv_heads) x head_dim = %lld",
                      fn, (long long)qkv_stride, (long long)width);
        DRMAS_REQUIRE(cache_row_stride >= per_row, DRMAS_ERR_SIZE,
                      "%s: cache_row_stride (%lld) is less than a row's kv_heads x capacity x head_dim = %lld", fn,
                      (long long)cache_row_stride, (long long)per_row);
        DRMAS_REQUIRE(rows == 0 || (rows <= INT64_MAX / qkv_stride && rows <= INT64_MAX / cache_row_stride && rows <= INT64_MAX / slots),
                      DRMAS_ERR_SIZE, "%s: rows x strides overflows (rows %lld)", fn, (long long)rows);
        DRMAS_REQUIRE(!q_norm == !k_norm, DRMAS_ERR_NULL, "%s: q_norm and k_norm must both be given or both be NULL", fn);
        DRMAS_REQUIRE(!q_norm || (isfinite(norm_eps) && norm_eps >= 0), DRMAS_ERR_CONFIG, "%s: norm_eps must be finite and >= 0, got %g",
                      fn, norm_eps);
        DRMAS_REQUIRE(isfinite(scale), DRMAS_ERR_CONFIG, "%s: scale must be finite, got %g", fn, scale);
        if (rows == 0) return DRMAS_OK;
        DRMAS_REQUIRE(qkv, DRMAS_ERR_NULL, "%s: qkv is NULL", fn);
        DRMAS_REQUIRE(cos && sin_signed, DRMAS_ERR_NULL, "%s: cos or sin_signed is NULL", fn);
        DRMAS_REQUIRE(k_cache && v_cache, DRMAS_ERR_NULL, "%s: k_cache or v_cache is NULL", fn);
        DRMAS_REQUIRE(out, DRMAS_ERR_NULL, "%s: out is NULL", fn);
        // qkv (q and k rotated in place), the caches and out are written while the others are still read:
        // none of them may share memory with another array (the inputs may share memory among themselves).
        const struct {
            const char* name;
            const void* p;
            uint64_t bytes;
        } written[] = {{"qkv", qkv, span_bytes(rows, qkv_stride, width, 4)},
                       {"k_cache", k_cache, span_bytes(rows, cache_row_stride, per_row, 4)},
                       {"v_cache", v_cache, span_bytes(rows, cache_row_stride, per_row, 4)},
                       {"out", out, span_bytes(rows, heads * head_dim, heads * head_dim, 4)}},
          read[] = {{"q_norm", q_norm, q_norm ? 4 * (uint64_t)head_dim : 0},
                    {"k_norm", k_norm, k_norm ? 4 * (uint64_t)head_dim : 0},
                    {"cos", cos, span_bytes(rows, head_dim, head_dim, 4)},
                    {"sin_signed", sin_signed, span_bytes(rows, head_dim, head_dim, 4)},
                    {"mask", mask, mask ? span_bytes(rows, slots, slots, 1) : 0}};
        for (size_t i = 0; i < sizeof written / sizeof written[0]; ++i) {
            for (size_t j = i + 1; j < sizeof written / sizeof written[0]; ++j)
                DRMAS_REQUIRE(!overlaps(written[i].p, written[i].bytes, written[j].p, written[j].bytes), DRMAS_ERR_CONFIG,
                              "%s: %s and %s overlap (the arrays the call writes must not share memory)", fn, written[i].name,
                              written[j].name);
            for (const auto& in : read)
                DRMAS_REQUIRE(!overlaps(written[i].p, written[i].bytes, in.p, in.bytes), DRMAS_ERR_CONFIG,
                              "%s: %s overlaps %s (the arrays the call writes must not share memory with the others)", fn,
                              written[i].name, in.name);
        }
        return decode_attention_cpu(rows, heads, kv_heads, head_dim, qkv, qkv_stride, q_norm, k_norm, norm_eps, cos, sin_signed,
                                    k_cache, v_cache, cache_row_stride, capacity, write_slot, slots, mask, scale, out);
    });
}

}  // extern "C"

// ---- 7. a decoding step's other ops (CPU only) -------------------------------------------

// Whether a strided array of `rows` rows of stride `stride` can be indexed without overflow.
static bool rows_fit(int64_t rows, int64_t stride) { return rows == 0 || rows <= INT64_MAX / stride; }

extern "C" {

int32_t drmas_rms_norm_f32(int32_t device, int64_t rows, int64_t hidden, float* x, int64_t x_stride, const float* residual,
                           int64_t residual_stride, const float* weight, double eps, float* out, int64_t out_stride) {
    const char* fn = "drmas_rms_norm_f32";
    return guarded(fn, [&]() -> int32_t {
        if (device == DRMAS_DEVICE_CUDA)
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: runs on the CPU only (GPU decoding uses LibTorch's ops)", fn);
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(x, "x");
        DRMAS_REQUIRE_ALIGNED(residual, "residual");
        DRMAS_REQUIRE_ALIGNED(weight, "weight");
        DRMAS_REQUIRE_ALIGNED(out, "out");
        DRMAS_REQUIRE(rows >= 0, DRMAS_ERR_SIZE, "%s: rows must be >= 0, got %lld", fn, (long long)rows);
        DRMAS_REQUIRE(hidden >= 1, DRMAS_ERR_SIZE, "%s: hidden must be >= 1, got %lld", fn, (long long)hidden);
        DRMAS_REQUIRE(x_stride >= hidden, DRMAS_ERR_SIZE, "%s: x_stride (%lld) is less than hidden (%lld)", fn, (long long)x_stride,
                      (long long)hidden);
        DRMAS_REQUIRE(!residual || residual_stride >= hidden, DRMAS_ERR_SIZE, "%s: residual_stride (%lld) is less than hidden (%lld)",
                      fn, (long long)residual_stride, (long long)hidden);
        DRMAS_REQUIRE(out_stride >= hidden, DRMAS_ERR_SIZE, "%s: out_stride (%lld) is less than hidden (%lld)", fn,
                      (long long)out_stride, (long long)hidden);
        DRMAS_REQUIRE(rows_fit(rows, x_stride) && rows_fit(rows, out_stride) && (!residual || rows_fit(rows, residual_stride)),
                      DRMAS_ERR_SIZE, "%s: rows x strides overflows (rows %lld)", fn, (long long)rows);
        DRMAS_REQUIRE(isfinite(eps) && eps >= 0, DRMAS_ERR_CONFIG, "%s: eps must be finite and >= 0, got %g", fn, eps);
        if (rows == 0) return DRMAS_OK;
        DRMAS_REQUIRE(x, DRMAS_ERR_NULL, "%s: x is NULL", fn);
        DRMAS_REQUIRE(weight, DRMAS_ERR_NULL, "%s: weight is NULL", fn);
        DRMAS_REQUIRE(out, DRMAS_ERR_NULL, "%s: out is NULL", fn);
        DRMAS_REQUIRE(out != x || out_stride == x_stride, DRMAS_ERR_SIZE,
                      "%s: out is x (in place) but out_stride (%lld) differs from x_stride (%lld)", fn, (long long)out_stride,
                      (long long)x_stride);
        DRMAS_REQUIRE(residual != x && residual != out, DRMAS_ERR_CONFIG,
                      "%s: residual must not be x or out (it is added into x, which out may overwrite)", fn);
        // Exact in place (out == x, one stride) is safe: each element is read before it is written. Any
        // other sharing is not: rows run in parallel, and a shifted out overwrites x (or a residual,
        // or the weight) before it is read, so it would be wrong results, or a data race.
        const uint64_t x_bytes = span_bytes(rows, x_stride, hidden, 4), out_bytes = span_bytes(rows, out_stride, hidden, 4),
                       res_bytes = residual ? span_bytes(rows, residual_stride, hidden, 4) : 0, w_bytes = 4 * (uint64_t)hidden;
        DRMAS_REQUIRE(out == x || !overlaps(out, out_bytes, x, x_bytes), DRMAS_ERR_CONFIG,
                      "%s: out overlaps x without being x (out may be x itself, in place, or memory apart from it)", fn);
        DRMAS_REQUIRE(!overlaps(residual, res_bytes, x, x_bytes), DRMAS_ERR_CONFIG,
                      "%s: residual overlaps x (it is added into x: it must be memory apart from x and out)", fn);
        DRMAS_REQUIRE(!overlaps(residual, res_bytes, out, out_bytes), DRMAS_ERR_CONFIG,
                      "%s: residual overlaps out (it must be memory apart from x and out)", fn);
        DRMAS_REQUIRE(!overlaps(weight, w_bytes, out, out_bytes), DRMAS_ERR_CONFIG,
                      "%s: weight overlaps out (out is written while the weight is still read)", fn);
        DRMAS_REQUIRE(!residual || !overlaps(weight, w_bytes, x, x_bytes), DRMAS_ERR_CONFIG,
                      "%s: weight overlaps x, into which the residual is added", fn);
        return rms_norm_cpu(rows, hidden, x, x_stride, residual, residual_stride, weight, eps, out, out_stride);
    });
}

int32_t drmas_swiglu_f32(int32_t device, int64_t rows, int64_t width, const float* gate, int64_t gate_stride, const float* up,
                         int64_t up_stride, float* out, int64_t out_stride) {
    const char* fn = "drmas_swiglu_f32";
    return guarded(fn, [&]() -> int32_t {
        if (device == DRMAS_DEVICE_CUDA)
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: runs on the CPU only (GPU decoding uses LibTorch's ops)", fn);
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(gate, "gate");
        DRMAS_REQUIRE_ALIGNED(up, "up");
        DRMAS_REQUIRE_ALIGNED(out, "out");
        DRMAS_REQUIRE(rows >= 0, DRMAS_ERR_SIZE, "%s: rows must be >= 0, got %lld", fn, (long long)rows);
        DRMAS_REQUIRE(width >= 1, DRMAS_ERR_SIZE, "%s: width must be >= 1, got %lld", fn, (long long)width);
        DRMAS_REQUIRE(gate_stride >= width, DRMAS_ERR_SIZE, "%s: gate_stride (%lld) is less than width (%lld)", fn,
                      (long long)gate_stride, (long long)width);
        DRMAS_REQUIRE(up_stride >= width, DRMAS_ERR_SIZE, "%s: up_stride (%lld) is less than width (%lld)", fn, (long long)up_stride,
                      (long long)width);
        DRMAS_REQUIRE(out_stride >= width, DRMAS_ERR_SIZE, "%s: out_stride (%lld) is less than width (%lld)", fn,
                      (long long)out_stride, (long long)width);
        DRMAS_REQUIRE(rows_fit(rows, gate_stride) && rows_fit(rows, up_stride) && rows_fit(rows, out_stride), DRMAS_ERR_SIZE,
                      "%s: rows x strides overflows (rows %lld)", fn, (long long)rows);
        if (rows == 0) return DRMAS_OK;
        DRMAS_REQUIRE(gate, DRMAS_ERR_NULL, "%s: gate is NULL", fn);
        DRMAS_REQUIRE(up, DRMAS_ERR_NULL, "%s: up is NULL", fn);
        DRMAS_REQUIRE(out, DRMAS_ERR_NULL, "%s: out is NULL", fn);
        DRMAS_REQUIRE(out != gate || out_stride == gate_stride, DRMAS_ERR_SIZE,
                      "%s: out is gate (in place) but out_stride (%lld) differs from gate_stride (%lld)", fn, (long long)out_stride,
                      (long long)gate_stride);
        DRMAS_REQUIRE(out != up || out_stride == up_stride, DRMAS_ERR_SIZE,
                      "%s: out is up (in place) but out_stride (%lld) differs from up_stride (%lld)", fn, (long long)out_stride,
                      (long long)up_stride);
        // As drmas_rms_norm_f32: exact in place is safe, a partial overlap is wrong results (or a race).
        // gate and up are only read, so they may share memory with each other.
        const uint64_t gate_bytes = span_bytes(rows, gate_stride, width, 4), up_bytes = span_bytes(rows, up_stride, width, 4),
                       out_bytes = span_bytes(rows, out_stride, width, 4);
        DRMAS_REQUIRE(out == gate || !overlaps(out, out_bytes, gate, gate_bytes), DRMAS_ERR_CONFIG,
                      "%s: out overlaps gate without being gate (out may be gate or up itself, in place, or memory apart from both)",
                      fn);
        DRMAS_REQUIRE(out == up || !overlaps(out, out_bytes, up, up_bytes), DRMAS_ERR_CONFIG,
                      "%s: out overlaps up without being up (out may be gate or up itself, in place, or memory apart from both)", fn);
        return swiglu_cpu(rows, width, gate, gate_stride, up, up_stride, out, out_stride);
    });
}

int32_t drmas_sample_f32(int32_t device, int64_t rows, int64_t vocab, const float* logits, int64_t logits_stride,
                         double temperature, int64_t top_k, double top_p, const double* uniforms, int64_t* tokens,
                         float* logprobs) {
    const char* fn = "drmas_sample_f32";
    return guarded(fn, [&]() -> int32_t {
        if (device == DRMAS_DEVICE_CUDA)
            return fail(DRMAS_ERR_UNSUPPORTED, "%s: runs on the CPU only (GPU decoding samples with LibTorch)", fn);
        if (int32_t st = check_device(fn, device)) return st;
        DRMAS_REQUIRE_ALIGNED(logits, "logits");
        DRMAS_REQUIRE_ALIGNED(uniforms, "uniforms");
        DRMAS_REQUIRE_ALIGNED(tokens, "tokens");
        DRMAS_REQUIRE_ALIGNED(logprobs, "logprobs");
        DRMAS_REQUIRE(rows >= 0, DRMAS_ERR_SIZE, "%s: rows must be >= 0, got %lld", fn, (long long)rows);
        DRMAS_REQUIRE(vocab >= 1 && vocab <= INT32_MAX, DRMAS_ERR_SIZE, "%s: vocab must be in [1, 2^31 - 1], got %lld", fn,
                      (long long)vocab);
        DRMAS_REQUIRE(logits_stride >= vocab, DRMAS_ERR_SIZE, "%s: logits_stride (%lld) is less than vocab (%lld)", fn,
                      (long long)logits_stride, (long long)vocab);
        DRMAS_REQUIRE(rows_fit(rows, logits_stride), DRMAS_ERR_SIZE, "%s: rows x logits_stride overflows (rows %lld)", fn,
                      (long long)rows);
        DRMAS_REQUIRE(isfinite(temperature) && temperature >= 0, DRMAS_ERR_CONFIG,
                      "%s: temperature must be finite and >= 0 (0 = greedy), got %g", fn, temperature);
        DRMAS_REQUIRE(top_k >= 0, DRMAS_ERR_CONFIG, "%s: top_k must be >= 0 (0 = off), got %lld", fn, (long long)top_k);
        DRMAS_REQUIRE(top_p > 0 && top_p <= 1, DRMAS_ERR_CONFIG, "%s: top_p must be in (0, 1] (1 = off), got %g", fn, top_p);
        if (rows == 0) return DRMAS_OK;
        DRMAS_REQUIRE(logits, DRMAS_ERR_NULL, "%s: logits is NULL", fn);
        DRMAS_REQUIRE(uniforms || temperature == 0, DRMAS_ERR_NULL, "%s: uniforms is NULL (only greedy decoding, temperature 0, needs none)",
                      fn);
        DRMAS_REQUIRE(tokens, DRMAS_ERR_NULL, "%s: tokens is NULL", fn);
        DRMAS_REQUIRE(logprobs, DRMAS_ERR_NULL, "%s: logprobs is NULL", fn);
        // The outputs are written row by row while other rows' logits (and uniforms) are still to be read.
        const uint64_t logits_bytes = span_bytes(rows, logits_stride, vocab, 4), u_bytes = uniforms ? 8 * (uint64_t)rows : 0,
                       tok_bytes = 8 * (uint64_t)rows, lp_bytes = 4 * (uint64_t)rows;
        const Extent inputs[] = {{"logits", logits, logits_bytes}, {"uniforms", uniforms, u_bytes}};
        if (int32_t st = outputs_apart(fn, {"tokens", tokens, tok_bytes}, {"logprobs", logprobs, lp_bytes}, inputs)) return st;
        return sample_cpu(rows, vocab, logits, logits_stride, temperature, top_k, top_p, uniforms, tokens, logprobs);
    });
}

}  // extern "C"
