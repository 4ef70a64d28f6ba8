// fuzz_abi.cpp — a seeded random driver of every drmas_* entry point, built with the CPU backend
// under AddressSanitizer and UndefinedBehaviorSanitizer (gcc has no libFuzzer, and clang is not
// on the build machines; the driver needs neither). Each call gets random sizes (0, 1, small,
// prime, negative, near INT32/INT64 limits), ids in and out of range, NaN/Inf/denormal/huge
// values, NULL pointers, invalid config fields, broken offsets, outputs that alias inputs or each
// other, and (rarely) 1-3 byte misaligned buffers. Buffers always have the length the sizes promise
// (the ABI cannot check a caller that lies about them); what it must check it is asked to check.
// Asserted for every call:
//   - the status is DRMAS_OK or a documented DRMAS_ERR_*; no crash, no sanitizer report;
//   - on error, drmas_last_error() names the function, and no output byte changed;
//   - on success with finite inputs of moderate size (|x| <= 1e4: no product can overflow float),
//     every output is finite;
//   - a call handed a pointer off its element type's alignment (on the CPU device; a refused device is
//     named first) is DRMAS_ERR_CONFIG saying so, whatever else it holds, and writes nothing: each call
//     is repeated on copies of its buffers moved 1-5 bytes off, which must be refused so (or, where no
//     misaligned pointer reached the call, give the same status and bits);
//   - a call repeated gives the same bits (the CPU backend is deterministic);
//   - drmas_decode_attention_f32, drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32: valid shapes
//     are accepted, each broken argument refused; drawn tokens lie in the vocabulary;
//   - LM head ops (fp32 and bf16 logits): nothing is written outside the buffers (guard bytes around each), and a call
//     whose arguments are all valid has the status its data decides (the first bad target, else
//     the first non-finite logit of a valid token, each named in the message, else success), with
//     invalid tokens' rows of dL/dz, logp and entropy 0 and the token count of the valid ones.
// Usage: drmas_fuzz_abi [--seconds S] [--seed N] [--max-iterations N]; prints the executions.
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "drmas.h"

// Sizes that are valid but huge (num_trajs = 2^31 - 1 with ten rows) make the library allocate
// scratch for them; its std::bad_alloc becomes DRMAS_ERR_ALLOC, but ASan's operator new aborts
// instead of throwing, so such sizes stay below 2^20 here (the limit checks above them are fuzzed).
extern "C" const char* __asan_default_options() { return "detect_leaks=1"; }

namespace {

std::mt19937_64 rng;
long long g_calls = 0, g_ok = 0, g_err = 0, g_failures = 0;
long long g_status[16] = {0};
// LM head calls whose status the data decides (all arguments valid): [op][0 ok, 1 bad target, 2 non-finite logit]
long long g_head_decided[2][3] = {{0}};

uint64_t u64() { return rng(); }
int64_t below(int64_t n) { return n <= 0 ? 0 : (int64_t)(rng() % (uint64_t)n); }
bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng) < p; }

#define FAIL(...)                                          \
    do {                                                   \
        ++g_failures;                                      \
        fprintf(stderr, "FAIL (call %lld) ", g_calls);     \
        fprintf(stderr, __VA_ARGS__);                      \
        fprintf(stderr, "\n");                             \
        if (g_failures > 20) exit(1);                      \
    } while (0)

// A size: mostly small (the shapes that break indexing), sometimes large, rarely invalid.
int64_t size(int64_t small_max = 64) {
    switch (below(12)) {
        case 0: return 0;
        case 1: return 1;
        case 2: return 2 + below(3);
        case 3: { static const int64_t primes[] = {7, 13, 31, 127, 257, 1021}; return primes[below(6)]; }
        case 4: return below(5000);
        case 5: return chance(0.1) ? 70000 + below(70000) : below(small_max);  // past the one-thread cut (64K)
        default: return below(small_max);
    }
}

// A count argument: the buffers' own, or one the library must reject before it reads anything
// (negative; with `past_int32`, beyond the 2^31 that id-indexed sizes are limited to).
int64_t count_arg(int64_t valid, bool past_int32 = false) {
    if (!chance(0.08)) return valid;
    static const int64_t negative[] = {-1, -2, INT64_MIN};
    if (past_int32 && chance(0.5)) return chance(0.5) ? (int64_t)INT32_MAX + 1 : INT64_MAX;
    return negative[below(3)];
}

float value() {
    switch (below(16)) {
        case 0: return NAN;
        case 1: return INFINITY;
        case 2: return -INFINITY;
        case 3: return 1e-42f;  // denormal
        case 4: return -0.0f;
        case 5: return 3e38f;
        case 6: return -3e38f;
        case 7: return (float)below(3);  // ties and constant segments
        default: return std::uniform_real_distribution<float>(-4, 4)(rng);
    }
}

// finite and small enough that sums, squares and products of a few stay finite in float32
bool moderate(float v) { return isfinite(v) && fabsf(v) <= 1e4f; }

float finite_value() {
    float v;
    do v = value(); while (!isfinite(v));
    return v;
}

// Set by Buf::ptr() when it hands out a non-NULL pointer off its element type's alignment (see tracked).
bool g_misaligned = false;

// A buffer of n elements of T at a chosen byte offset (0 = aligned; 1-3 misaligned).
template <class T>
struct Buf {
    std::vector<unsigned char> bytes;
    size_t off = 0;
    int64_t n = 0;
    bool null = false;
    Buf() = default;
    Buf(int64_t n_, size_t off_ = 0) : bytes((size_t)std::max<int64_t>(n_, 0) * sizeof(T) + 8), off(off_), n(n_) {}
    T* ptr() {
        if (null) return nullptr;
        T* p = reinterpret_cast<T*>(bytes.data() + off);
        if ((uintptr_t)p % alignof(T) != 0) g_misaligned = true;
        return p;
    }
    // element access through memcpy: the driver itself never dereferences a misaligned T*
    void set(int64_t i, T v) { memcpy(bytes.data() + off + (size_t)i * sizeof(T), &v, sizeof(T)); }
    T get(int64_t i) const {
        T v;
        memcpy(&v, bytes.data() + off + (size_t)i * sizeof(T), sizeof(T));
        return v;
    }
    void poison() { for (auto& b : bytes) b = 0xA5; }
    // the same contents at another byte offset
    Buf<T> moved(size_t to) const {
        Buf<T> b(n, to);
        b.null = null;
        if (n > 0) memcpy(b.bytes.data() + to, bytes.data() + off, (size_t)n * sizeof(T));
        return b;
    }
    bool same_bytes(const Buf<T>& o) const {
        if (null != o.null || n != o.n) return false;
        return n <= 0 || memcmp(bytes.data() + off, o.bytes.data() + o.off, (size_t)n * sizeof(T)) == 0;
    }
};

// Rarely misaligned: such a call is refused whatever else it holds, so that most calls reach the other checks.
size_t misalign() { return chance(0.02) ? 1 + below(3) : 0; }

void count_status(int32_t st) {
    ++g_calls;
    if (st < 0 || st > 9) {
        FAIL("status %d is not a documented code", st);
        return;
    }
    ++g_status[st];
    if (st == 0) ++g_ok; else ++g_err;
}

// Runs `call` (one entry point's call, its Buf pointers taken inside) and says in `misaligned` whether
// any of them was off its alignment.
template <class F>
int32_t tracked(bool& misaligned, F call) {
    g_misaligned = false;
    const int32_t st = call();
    misaligned = g_misaligned;
    return st;
}

// drmas.h's rule: on a device the call accepts (the device is checked first; the CPU is the only one
// this driver's calls are accepted on), a non-NULL pointer off its type's alignment is DRMAS_ERR_CONFIG
// saying so, whatever else is wrong. Returns whether the call was such a refusal, after which the
// checks of the data do not apply.
bool refused_misaligned(int32_t dev, bool misaligned, int32_t st, const char* fn) {
    if (dev != DRMAS_DEVICE_CPU || !misaligned) return false;
    const char* m = drmas_last_error();
    if (st != DRMAS_ERR_CONFIG || !strstr(m, fn) || !strstr(m, "is not aligned to"))
        FAIL("%s was handed a misaligned pointer but gave %d, not the alignment error: '%s'", fn, st, m);
    return true;
}

// The repeat on misaligned copies: refused by the rule with its outputs `untouched`, or, where no
// misaligned pointer reached it (all NULL, or its device refused first), the first call's status and
// (`same`) bits.
void check_moved(int32_t dev, bool misaligned, int32_t st, int32_t st2, bool untouched, bool same, const char* fn) {
    if (refused_misaligned(dev, misaligned, st2, fn)) {
        if (!untouched) FAIL("%s refused a misaligned pointer but wrote its outputs", fn);
    } else if (st2 != st || (st == 0 && !same)) {
        FAIL("%s: status %d, then %d on copies whose pointers are aligned or NULL, or other bits", fn, st, st2);
    }
}

void check_error_message(int32_t st, const char* fn) {
    if (st == 0) return;
    const char* m = drmas_last_error();
    if (m == nullptr || strstr(m, fn) == nullptr) FAIL("%s failed with %d but its message does not name it: '%s'", fn, st, m ? m : "(null)");
}

// The CUDA backend takes device pointers, which this driver does not make: it is asked only where
// it must refuse (a build or a machine without a GPU). Any other device number is always refused.
bool g_cuda = false;
int32_t device() {
    if (!chance(0.03)) return DRMAS_DEVICE_CPU;
    return chance(0.5) && !g_cuda ? DRMAS_DEVICE_CUDA : (int32_t)(2 + u64() % 1000);
}

// ------------------------------------------------------------------ segment statistics

struct StatsCall {
    int32_t dev;
    int64_t n, num_segments;
    int32_t ddof;
    Buf<float> values;
    Buf<int32_t> ids;
    Buf<int64_t> count;
    Buf<double> mean, m2, std;
    bool alias_mean_m2 = false;

    int32_t run() {
        double* m2p = alias_mean_m2 ? mean.ptr() : m2.ptr();
        return drmas_segment_stats_f32(dev, n, values.ptr(), ids.ptr(), num_segments, ddof, count.ptr(), mean.ptr(), m2p,
                                       std.ptr(), nullptr);
    }
    StatsCall moved() const {
        StatsCall c = *this;
        c.values = values.moved(misalign() | 1);
        c.ids = ids.moved(2);
        c.count = count.moved(4);
        c.mean = mean.moved(3);
        c.m2 = m2.moved(1);
        c.std = std.moved(2);
        return c;
    }
    bool same_outputs(const StatsCall& o) const {
        return count.same_bytes(o.count) && mean.same_bytes(o.mean) && m2.same_bytes(o.m2) && std.same_bytes(o.std);
    }
};

void fuzz_segment_stats() {
    StatsCall c;
    c.dev = device();
    int64_t n = size(), segs = chance(0.05) ? 0 : 1 + size(16);
    c.n = count_arg(n);
    c.num_segments = count_arg(segs, true);
    c.ddof = chance(0.05) ? (int32_t)u64() : (int32_t)below(2);
    bool finite = true;
    c.values = Buf<float>(n, misalign());
    c.ids = Buf<int32_t>(n, misalign());
    for (int64_t i = 0; i < n; ++i) {
        float v = chance(0.02) ? value() : finite_value();
        c.values.set(i, v);
        finite &= moderate(v);
        c.ids.set(i, chance(0.01) ? (int32_t)(chance(0.5) ? -1 - below(3) : segs + below(3)) : (int32_t)below(segs));
    }
    c.count = Buf<int64_t>(segs, misalign());
    c.mean = Buf<double>(segs, misalign());
    c.m2 = Buf<double>(segs, misalign());
    c.std = Buf<double>(segs, misalign());
    c.std.null = chance(0.3);
    if (chance(0.02)) c.values.null = true;
    if (chance(0.02)) c.ids.null = true;
    if (chance(0.02)) c.count.null = true;
    if (chance(0.02)) c.mean.null = true;
    c.alias_mean_m2 = chance(0.03);
    c.count.poison(), c.mean.poison(), c.m2.poison(), c.std.poison();
    StatsCall before = c;
    bool mis;
    int32_t st = tracked(mis, [&] { return c.run(); });
    count_status(st);
    check_error_message(st, "drmas_segment_stats_f32");
    if (st != 0 && !c.same_outputs(before)) FAIL("drmas_segment_stats_f32 failed (%d) but wrote its outputs", st);
    if (refused_misaligned(c.dev, mis, st, "drmas_segment_stats_f32")) return;
    if (st == 0 && finite && !c.alias_mean_m2) {
        for (int64_t s = 0; s < segs; ++s) {
            if (!isfinite(c.mean.get(s)) || !isfinite(c.m2.get(s)) || (!c.std.null && !isfinite(c.std.get(s))))
            {
                FAIL("drmas_segment_stats_f32: segment %lld not finite (n %lld)", (long long)s, (long long)n);
                break;
            }
        }
    }
    if (c.alias_mean_m2) return;
    StatsCall m = before.moved();
    const StatsCall m0 = m;
    int32_t st2 = tracked(mis, [&] { return m.run(); });
    count_status(st2);
    check_moved(c.dev, mis, st, st2, m.same_outputs(m0), m.same_outputs(c), "drmas_segment_stats_f32");
}

// ------------------------------------------------------------------ advantages

struct AdvCall {
    int32_t dev;
    drmas_norm_config cfg;
    bool cfg_null = false;
    int64_t n, U, T, K;
    Buf<float> scores, adv;
    Buf<int32_t> uid, traj, agent;
    Buf<double> diag;
    bool in_place = false;  // advantages written over the scores

    int32_t run() {
        float* out = in_place ? scores.ptr() : adv.ptr();
        return drmas_advantage_f32(dev, cfg_null ? nullptr : &cfg, n, scores.ptr(), uid.ptr(), traj.ptr(), agent.ptr(), U, T, K,
                                   out, diag.ptr(), nullptr);
    }
    AdvCall moved() const {
        AdvCall c = *this;
        c.scores = scores.moved(1);
        c.adv = adv.moved(3);
        c.uid = uid.moved(2);
        c.traj = traj.moved(1);
        c.agent = agent.moved(3);
        c.diag = diag.moved(5);
        return c;
    }
    bool same_outputs(const AdvCall& o) const { return adv.same_bytes(o.adv) && diag.same_bytes(o.diag) && scores.same_bytes(o.scores); }
};

void fuzz_advantage() {
    AdvCall c;
    c.dev = device();
    memset(&c.cfg, 0, sizeof c.cfg);
    c.cfg.mean_from = (int32_t)below(2);
    c.cfg.std_from = (int32_t)below(2);
    c.cfg.numerator = (int32_t)below(2);
    c.cfg.global_pooling = (int32_t)below(2);
    c.cfg.singleton = (int32_t)below(3);
    c.cfg.ddof = (int32_t)below(2);
    c.cfg.scale_by_std = chance(0.8) ? 1 : 0;
    c.cfg.eps = chance(0.9) ? 1e-6 : (double)value();
    if (chance(0.02)) c.cfg.mean_from = (int32_t)u64();
    if (chance(0.02)) c.cfg.std_from = -1;
    if (chance(0.02)) c.cfg.numerator = 2;
    if (chance(0.02)) c.cfg.global_pooling = -1;
    if (chance(0.02)) c.cfg.singleton = 3;
    if (chance(0.02)) c.cfg.ddof = 2;
    if (chance(0.02)) c.cfg.scale_by_std = 7;
    if (chance(0.02)) c.cfg.reserved = 1;
    c.cfg_null = chance(0.01);
    // groups of N rollouts, each trajectory a few agent turns, in rollout order or shuffled
    int64_t U = 1 + size(12), N = 1 + below(6), K = 1 + below(4);
    std::vector<float> sc;
    std::vector<int32_t> u, t, a;
    int64_t T = 0;
    for (int64_t g = 0; g < U; ++g) {
        for (int64_t r = 0; r < N; ++r, ++T) {
            int64_t turns = 1 + below(2 * K);
            for (int64_t j = 0; j < turns; ++j) {
                u.push_back((int32_t)g);
                t.push_back((int32_t)T);
                a.push_back((int32_t)(chance(0.7) ? j % K : below(K)));
                sc.push_back(chance(0.3) ? (float)below(2) : (chance(0.01) ? value() : finite_value()));
            }
        }
    }
    int64_t n = (int64_t)sc.size();
    if (chance(0.3)) {  // any order is correct, through the general path
        for (int64_t i = n - 1; i > 0; --i) {
            int64_t j = below(i + 1);
            std::swap(sc[i], sc[j]), std::swap(u[i], u[j]), std::swap(t[i], t[j]), std::swap(a[i], a[j]);
        }
    }
    if (chance(0.03) && n > 1) t[below(n)] = t[0] + 0, u[0] = (int32_t)((u[0] + 1) % U);  // a trajectory in two groups
    for (int64_t i = 0; i < n; ++i) {
        if (chance(0.003)) u[i] = chance(0.5) ? -1 : (int32_t)U;
        if (chance(0.003)) t[i] = chance(0.5) ? INT32_MIN : (int32_t)T;
        if (chance(0.003)) a[i] = (int32_t)(K + below(3));
    }
    bool finite = true;
    for (float v : sc) finite &= moderate(v);
    c.n = count_arg(n);
    // other counts than the rows' own: larger (valid, ids still in range), past the limits, negative
    c.U = chance(0.02) ? (chance(0.5) ? U + below(1 << 20) : (chance(0.5) ? (int64_t)INT32_MAX + 1 : -3)) : U;
    c.T = chance(0.02) ? (chance(0.5) ? T + below(1 << 20) : (chance(0.5) ? INT64_MAX : -1)) : T;
    c.K = chance(0.02) ? (chance(0.5) ? K + below(1 << 12) : (int64_t)INT32_MAX + 5) : K;
    if (chance(0.01)) c.U = (int64_t)1 << 30, c.K = (int64_t)1 << 11;  // U x K past the 2^40 segments limit
    c.scores = Buf<float>(n, misalign());
    c.uid = Buf<int32_t>(n, misalign());
    c.traj = Buf<int32_t>(n, misalign());
    c.agent = Buf<int32_t>(n, misalign());
    for (int64_t i = 0; i < n; ++i) c.scores.set(i, sc[i]), c.uid.set(i, u[i]), c.traj.set(i, t[i]), c.agent.set(i, a[i]);
    c.adv = Buf<float>(n, misalign());
    // the diagnostics array is sized by the sizes actually passed, when they fit in memory
    int64_t diag_len = c.U > 0 && c.K > 0 && c.U <= (1 << 20) && c.K <= (1 << 20) && c.U * c.K <= (1 << 22)
                           ? DRMAS_DIAG_FIELDS * c.U * c.K : -1;
    c.diag = Buf<double>(std::max<int64_t>(diag_len, 0), misalign());
    c.diag.null = diag_len < 0 || chance(0.4);
    if (chance(0.02)) c.scores.null = true;
    if (chance(0.02)) c.uid.null = true;
    if (chance(0.02)) c.agent.null = true;
    if (chance(0.05)) c.traj.null = true;
    if (chance(0.02)) c.adv.null = true;
    c.in_place = chance(0.05);
    c.adv.poison(), c.diag.poison();
    AdvCall before = c;
    bool mis;
    int32_t st = tracked(mis, [&] { return c.run(); });
    count_status(st);
    check_error_message(st, "drmas_advantage_f32");
    if (st != 0 && !c.same_outputs(before)) FAIL("drmas_advantage_f32 failed (%d) but wrote its outputs: %s", st, drmas_last_error());
    if (refused_misaligned(c.dev, mis, st, "drmas_advantage_f32")) return;
    if (st == 0 && finite) {
        const Buf<float>& out = c.in_place ? c.scores : c.adv;
        for (int64_t i = 0; i < n && !out.null; ++i)
            if (!isfinite(out.get(i))) {
                FAIL("drmas_advantage_f32: row %lld advantage %g from finite scores (mean %d std %d numerator %d pooling %d singleton %d eps %g scale %d)",
                     (long long)i, out.get(i), c.cfg.mean_from, c.cfg.std_from, c.cfg.numerator, c.cfg.global_pooling, c.cfg.singleton, c.cfg.eps, c.cfg.scale_by_std);
                break;
            }
    }
    AdvCall again = before;
    int32_t st1 = again.run();
    count_status(st1);
    if (st1 != st || (st == 0 && !again.same_outputs(c))) FAIL("drmas_advantage_f32: a repeated call gave another result");
    AdvCall m = before.moved();
    const AdvCall m0 = m;
    int32_t st2 = tracked(mis, [&] { return m.run(); });
    count_status(st2);
    check_moved(c.dev, mis, st, st2, m.same_outputs(m0), m.same_outputs(c), "drmas_advantage_f32");
}

// ------------------------------------------------------------------ offsets (broadcast, loss)

std::vector<int64_t> offsets(int64_t rows, int64_t tokens, bool& valid, bool may_break = true) {
    std::vector<int64_t> off((size_t)rows + 1);
    valid = true;
    int64_t at = chance(0.2) ? below(3) : 0;
    for (int64_t r = 0; r <= rows; ++r) {
        off[(size_t)r] = std::min(at, tokens);
        at += below(tokens / std::max<int64_t>(rows, 1) + 3);
    }
    if (!may_break) return off;
    if (chance(0.05) && rows > 0) off[(size_t)below(rows + 1)] = -1 - below(3), valid = false;
    if (chance(0.05) && rows > 1) std::swap(off[0], off[(size_t)rows]), valid = off[0] == off[(size_t)rows];
    if (chance(0.03)) off[(size_t)rows] = chance(0.5) ? tokens + 1 : INT64_MAX, valid = false;
    return off;
}

void fuzz_broadcast() {
    int32_t dev = device();
    int64_t rows = size(40), tokens = size(300);
    bool valid;
    std::vector<int64_t> off = offsets(rows, tokens, valid);
    Buf<float> vals(rows, misalign()), out(tokens, misalign());
    Buf<int64_t> offb(rows + 1, misalign());
    for (int64_t r = 0; r < rows; ++r) vals.set(r, value());
    for (int64_t r = 0; r <= rows; ++r) offb.set(r, off[(size_t)r]);
    if (chance(0.02)) vals.null = true;
    if (chance(0.02)) out.null = true;
    int64_t rows_arg = count_arg(rows), tokens_arg = chance(0.1) ? below(tokens + 1) : count_arg(tokens);
    if (chance(0.03)) {  // no offsets: any row count must be refused, however large
        offb.null = true;
        rows_arg = chance(0.5) ? INT64_MAX : rows_arg;
    }
    out.poison();
    Buf<float> before = out;
    bool mis;
    int32_t st = tracked(mis, [&] { return drmas_broadcast_rows_f32(dev, rows_arg, vals.ptr(), offb.ptr(), tokens_arg, out.ptr(), nullptr); });
    count_status(st);
    check_error_message(st, "drmas_broadcast_rows_f32");
    if (st != 0 && !out.same_bytes(before)) FAIL("drmas_broadcast_rows_f32 failed (%d) but wrote its output", st);
    if (refused_misaligned(dev, mis, st, "drmas_broadcast_rows_f32")) return;
    if (st == 0 && !valid && rows_arg == rows && tokens_arg == tokens)
        FAIL("drmas_broadcast_rows_f32 accepted broken offsets");
    Buf<float> vm = vals.moved(1), om = before.moved(3);
    const Buf<float> om0 = om;
    Buf<int64_t> offm = offb.moved(5);
    int32_t st2 = tracked(mis, [&] { return drmas_broadcast_rows_f32(dev, rows_arg, vm.ptr(), offm.ptr(), tokens_arg, om.ptr(), nullptr); });
    count_status(st2);
    check_moved(dev, mis, st, st2, om.same_bytes(om0), om.same_bytes(out), "drmas_broadcast_rows_f32");
}

void fuzz_clipped_loss() {
    int32_t dev = device();
    drmas_loss_config c;
    memset(&c, 0, sizeof c);
    c.clip_low = chance(0.9) ? 0.2 : (double)value();
    c.clip_high = chance(0.9) ? 0.28 : (double)value();
    c.dual_clip = chance(0.7) ? 3.0 : (chance(0.5) ? 0.0 : (double)value());
    c.kl_coef = chance(0.8) ? 0.0 : (double)value();
    c.kl_type = chance(0.95) ? (int32_t)below(4) : (int32_t)u64();
    c.per_row_mean = chance(0.95) ? (int32_t)below(2) : -1;
    int64_t rows = size(30), tokens = size(400);
    c.normalizer = chance(0.9) ? (double)std::max<int64_t>(tokens, 1) : (double)value();
    bool valid;
    std::vector<int64_t> off = offsets(rows, tokens, valid);
    Buf<int64_t> offb(rows + 1, misalign());
    for (int64_t r = 0; r <= rows; ++r) offb.set(r, off[(size_t)r]);
    Buf<float> logp(tokens, misalign()), old(tokens, misalign()), adv(tokens, misalign()), ref(tokens, misalign()), grad(tokens, misalign());
    Buf<uint8_t> mask(tokens, misalign());
    bool finite = true;
    for (int64_t t = 0; t < tokens; ++t) {
        float lp = chance(0.01) ? value() : -fabsf(finite_value()), ol = chance(0.01) ? value() : -fabsf(finite_value());
        float ad = chance(0.01) ? value() : finite_value(), rf = chance(0.01) ? value() : -fabsf(finite_value());
        logp.set(t, lp), old.set(t, ol), adv.set(t, ad), ref.set(t, rf);
        mask.set(t, (uint8_t)(chance(0.8) ? 1 : (chance(0.5) ? 0 : u64())));
        finite &= moderate(lp) && moderate(ol) && moderate(ad) && moderate(rf);
    }
    mask.null = chance(0.3);
    ref.null = chance(0.3);
    if (chance(0.02)) logp.null = true;
    if (chance(0.02)) grad.null = true;
    Buf<double> sums(DRMAS_LOSS_SUMS, misalign());
    if (chance(0.02)) sums.null = true;
    bool grad_over_logp = chance(0.04);  // dL/dlogp written over logp
    grad.poison(), sums.poison();
    Buf<float> grad0 = grad, logp0 = logp;
    Buf<double> sums0 = sums;
    int64_t rows_arg = count_arg(rows), tokens_arg = count_arg(tokens);
    if (chance(0.03)) {  // no offsets: any row count must be refused, however large
        offb.null = true;
        rows_arg = chance(0.5) ? INT64_MAX : rows_arg;
    }
    auto call = [&](Buf<int64_t>& o, Buf<float>& lp, Buf<float>& ol, Buf<float>& ad, Buf<float>& rf, Buf<uint8_t>& mk, Buf<float>& g,
                    Buf<double>& s) {
        return drmas_clipped_loss_f32(dev, &c, rows_arg, o.ptr(), tokens_arg, lp.ptr(), ol.ptr(), ad.ptr(), rf.ptr(), mk.ptr(),
                                      grad_over_logp ? lp.ptr() : g.ptr(), s.ptr(), nullptr);
    };
    bool mis;
    int32_t st = tracked(mis, [&] { return call(offb, logp, old, adv, ref, mask, grad, sums); });
    count_status(st);
    check_error_message(st, "drmas_clipped_loss_f32");
    if (st != 0 && (!grad.same_bytes(grad0) || !sums.same_bytes(sums0) || !logp.same_bytes(logp0)))
        FAIL("drmas_clipped_loss_f32 failed (%d) but wrote its outputs", st);
    if (refused_misaligned(dev, mis, st, "drmas_clipped_loss_f32")) return;
    if (st == 0 && !valid && rows_arg == rows && tokens_arg == tokens) FAIL("drmas_clipped_loss_f32 accepted broken offsets");
    bool sane_cfg = isfinite(c.kl_coef) && fabs(c.kl_coef) < 1e30 && c.normalizer >= 1;
    if (st == 0 && finite && sane_cfg && !grad_over_logp) {
        for (int j = 0; j < DRMAS_LOSS_SUMS; ++j)
            if (!isfinite(sums.get(j))) {
                FAIL("drmas_clipped_loss_f32: sums[%d] = %g from finite inputs", j, sums.get(j));
                break;
            }
    }
    if (grad_over_logp) return;
    Buf<int64_t> o2 = offb.moved(3);
    Buf<float> lp2 = logp0.moved(1), ol2 = old.moved(2), ad2 = adv.moved(3), rf2 = ref.moved(1), g2 = grad0.moved(2);
    Buf<uint8_t> mk2 = mask.moved(3);
    Buf<double> s2 = sums0.moved(4);
    const Buf<float> g20 = g2;
    const Buf<double> s20 = s2;
    int32_t st2 = tracked(mis, [&] { return call(o2, lp2, ol2, ad2, rf2, mk2, g2, s2); });
    count_status(st2);
    check_moved(dev, mis, st, st2, g2.same_bytes(g20) && s2.same_bytes(s20), g2.same_bytes(grad) && s2.same_bytes(sums),
                "drmas_clipped_loss_f32");
}

// ------------------------------------------------------------------ fused LM head

// What the contract says of a drmas_lmhead_config (drmas.h §4-5), to know when a call must pass
// the argument checks and fail, if at all, on the data.
bool lmhead_config_ok(const drmas_lmhead_config& c) {
    return isfinite(c.clip_low) && c.clip_low >= 0 && c.clip_low < 1 && isfinite(c.clip_high) && c.clip_high >= 0 &&
           (c.dual_clip == 0 || (isfinite(c.dual_clip) && c.dual_clip > 1)) && isfinite(c.kl_coef) && fabs(c.kl_coef) <= FLT_MAX &&
           isfinite(c.normalizer) && c.normalizer > 0 && 1.0 / c.normalizer <= FLT_MAX && c.kl_type >= DRMAS_KL_NONE &&
           c.kl_type <= DRMAS_KL_K3 && (c.per_row_mean == 0 || c.per_row_mean == 1) && isfinite(c.entropy_coef) &&
           fabs(c.entropy_coef) <= FLT_MAX;
}

// A vocabulary: 1, a few, primes, a block (512) and past it; with `tokens` rows of logits kept
// under ~64K floats so that the sanitized driver stays fast.
int64_t vocab_size(int64_t tokens) {
    static const int64_t sizes[] = {1, 2, 3, 7, 37, 97, 511, 512, 513, 1031};
    int64_t v = chance(0.5) ? sizes[below(10)] : 1 + below(300);
    const int64_t cap = chance(0.1) ? (int64_t)1 << 18 : (int64_t)1 << 16;  // sometimes past the one-thread cut (64K)
    while (v > 1 && tokens * v > cap) v /= 2;
    return v;
}

// How often a call's data is bad: in a third of the calls, one to three bad items among `count`.
double bad_rate(int64_t count) { return chance(0.35) ? std::min(1.0, (double)(1 + below(3)) / (double)std::max<int64_t>(count, 1)) : 0.0; }

// A target: in [0, V), or (at `rate`) just outside it or far outside.
int64_t target(int64_t V, double rate) {
    if (!chance(rate)) return below(V);
    switch (below(5)) {
        case 0: case 1: return V;  // the off-by-one
        case 2: return V + 1 + below(2);
        case 3: return -1;
        default: return chance(0.5) ? INT64_MIN : INT64_MAX;
    }
}

// A logit: moderate, a few large ones, and (at `rate`) any value(): NaN, inf, huge, denormal.
float logit(bool& moderate_all, double rate) {
    const float v = chance(rate) ? value() : std::uniform_real_distribution<float>(-8, 8)(rng) + (chance(0.02) ? 30.0f : 0.0f);
    moderate_all &= moderate(v);
    return v;
}

// A vocabulary the library must refuse before it reads anything: below 1, or with rows x vocab past
// INT64_MAX (only with 2 rows or more: one row of 2^62 logits would be a caller lying about its buffer).
int64_t vocab_arg(int64_t V, int64_t rows) {
    if (!chance(0.04)) return V;
    static const int64_t bad[] = {0, -1, INT64_MIN, INT64_MAX, (int64_t)1 << 62};
    return bad[below(rows >= 2 ? 5 : 3)];
}

template <class T>
void guard_slack(Buf<T>& b) {  // the 8 bytes past the payload (and the misalignment bytes before it) hold 0xA5
    for (size_t i = 0; i < b.bytes.size(); ++i)
        if (i < b.off || i >= b.off + (size_t)std::max<int64_t>(b.n, 0) * sizeof(T)) b.bytes[i] = 0xA5;
}
template <class T>
bool slack_intact(const Buf<T>& b) {
    for (size_t i = 0; i < b.bytes.size(); ++i)
        if ((i < b.off || i >= b.off + (size_t)std::max<int64_t>(b.n, 0) * sizeof(T)) && b.bytes[i] != 0xA5) return false;
    return true;
}

// The fp32 and bf16 (uint16_t bits) ops through one driver: a logit's value, and the call by type.
float as_float(float v) { return v; }
float as_float(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
template <class L>
L logit_of(float v);
template <>
float logit_of<float>(float v) { return v; }
template <>
uint16_t logit_of<uint16_t>(float v) {  // the upper half: any bits are a bf16 (NaN stays NaN, inf inf)
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return (uint16_t)(u >> 16);
}
const char* logprobs_name(const float*) { return "drmas_lmhead_logprobs_f32"; }
const char* logprobs_name(const uint16_t*) { return "drmas_lmhead_logprobs_bf16"; }
const char* chunk_name(const float*) { return "drmas_lmhead_chunk_f32"; }
const char* chunk_name(const uint16_t*) { return "drmas_lmhead_chunk_bf16"; }
int32_t lmhead_logprobs(int32_t dev, int64_t T, int64_t V, const float* z, const int64_t* y, float* lp, float* ent) {
    return drmas_lmhead_logprobs_f32(dev, T, V, z, y, lp, ent, nullptr);
}
int32_t lmhead_logprobs(int32_t dev, int64_t T, int64_t V, const uint16_t* z, const int64_t* y, float* lp, float* ent) {
    return drmas_lmhead_logprobs_bf16(dev, T, V, z, y, lp, ent, nullptr);
}
template <class L>
int32_t lmhead_chunk(int32_t dev, const drmas_lmhead_config* c, int64_t rows, const int64_t* off, int64_t tokens, int64_t c0,
                     int64_t n, int64_t V, L* z, const int64_t* y, const float* old, const float* adv, const float* ref,
                     const uint8_t* mask, float* lp, float* ent, double* sums) {
    if constexpr (sizeof(L) == 2)
        return drmas_lmhead_chunk_bf16(dev, c, rows, off, tokens, c0, n, V, z, y, old, adv, ref, mask, lp, ent, sums, nullptr);
    else
        return drmas_lmhead_chunk_f32(dev, c, rows, off, tokens, c0, n, V, z, y, old, adv, ref, mask, lp, ent, sums, nullptr);
}

template <class L>
void fuzz_lmhead_logprobs() {
    const char* fn = logprobs_name((const L*)nullptr);
    int32_t dev = device();
    int64_t T = size(40), V = vocab_size(T);
    bool moderate_all = true;
    Buf<L> z(T * V, misalign());
    Buf<int64_t> y(T, misalign());
    int64_t first_bad_target = -1, first_bad_logit = -1;
    const double bad_y = bad_rate(T), bad_z = bad_rate(T * V);
    for (int64_t t = 0; t < T; ++t) {
        y.set(t, target(V, bad_y));
        if (first_bad_target < 0 && (y.get(t) < 0 || y.get(t) >= V)) first_bad_target = t;
    }
    for (int64_t i = 0; i < T * V; ++i) {
        z.set(i, logit_of<L>(logit(moderate_all, bad_z)));
        if (first_bad_logit < 0 && !isfinite(as_float(z.get(i)))) first_bad_logit = i;
    }
    Buf<float> lp(T, misalign()), ent(T, misalign());
    ent.null = chance(0.3);
    if (chance(0.02)) z.null = true;
    if (chance(0.02)) y.null = true;
    if (chance(0.02)) lp.null = true;
    const int64_t T_arg = count_arg(T), V_arg = vocab_arg(V, T);
    lp.poison(), ent.poison();
    guard_slack(z), guard_slack(y);
    const Buf<L> z0 = z;
    const Buf<float> lp0 = lp, ent0 = ent;
    auto call = [&](Buf<L>& zz, Buf<int64_t>& yy, Buf<float>& l, Buf<float>& e) {
        return lmhead_logprobs(dev, T_arg, V_arg, zz.ptr(), yy.ptr(), l.ptr(), e.ptr());
    };
    bool mis;
    int32_t st = tracked(mis, [&] { return call(z, y, lp, ent); });
    count_status(st);
    check_error_message(st, fn);
    if (!z.same_bytes(z0) || !slack_intact(z) || !slack_intact(y)) FAIL("%s wrote to its inputs (status %d)", fn, st);
    if (!slack_intact(lp) || !slack_intact(ent)) FAIL("%s wrote outside logp/entropy (T %lld, status %d)", fn, (long long)T, st);
    if (st != 0 && (!lp.same_bytes(lp0) || !ent.same_bytes(ent0))) FAIL("%s failed (%d) but wrote its outputs", fn, st);
    if (refused_misaligned(dev, mis, st, fn)) return;
    // with the true sizes and every pointer there, the data decides: the first bad target, else the first non-finite logit
    const bool clean = dev == DRMAS_DEVICE_CPU && T_arg == T && V_arg == V && (T == 0 || (!z.null && !y.null && !lp.null));
    if (clean) {
        const int32_t want = first_bad_target >= 0 ? DRMAS_ERR_RANGE : first_bad_logit >= 0 ? DRMAS_ERR_NONFINITE : DRMAS_OK;
        ++g_head_decided[0][want == DRMAS_OK ? 0 : want == DRMAS_ERR_RANGE ? 1 : 2];
        if (st != want) FAIL("%s: status %d, the data says %d (%s)", fn, st, want, drmas_last_error());
        char needle[64];
        if (want == DRMAS_ERR_RANGE) snprintf(needle, sizeof needle, "targets[%lld]", (long long)first_bad_target);
        else snprintf(needle, sizeof needle, "token %lld, vocabulary index %lld", (long long)(first_bad_logit / std::max<int64_t>(V, 1)),
                      (long long)(first_bad_logit % std::max<int64_t>(V, 1)));
        if (want != DRMAS_OK && st == want && !strstr(drmas_last_error(), needle))
            FAIL("%s: the message does not name the first bad item (%s): %s", fn, needle, drmas_last_error());
    }
    if (st == 0 && moderate_all) {
        const double log_v = log((double)std::max<int64_t>(V, 1));
        for (int64_t t = 0; t < T; ++t) {
            const float l = lp.get(t), e = ent.null ? 0.0f : ent.get(t);
            if (!(isfinite(l) && l <= 1e-5f && isfinite(e) && e >= -1e-5f && e <= log_v + 1e-4)) {
                FAIL("%s: token %lld of %lld (V %lld): logp %g entropy %g from moderate logits", fn, (long long)t, (long long)T,
                     (long long)V, l, e);
                break;
            }
        }
    }
    Buf<L> z2 = z0.moved(misalign() | 2);
    Buf<float> lp2 = lp0.moved(1), ent2 = ent0.moved(3);
    Buf<int64_t> y2 = y.moved(5);
    const Buf<float> lp20 = lp2, ent20 = ent2;
    int32_t st2 = tracked(mis, [&] { return call(z2, y2, lp2, ent2); });
    count_status(st2);
    check_moved(dev, mis, st, st2, lp2.same_bytes(lp20) && ent2.same_bytes(ent20), lp2.same_bytes(lp) && ent2.same_bytes(ent), fn);
}

template <class L>
void fuzz_lmhead_chunk() {
    const char* fn = chunk_name((const L*)nullptr);
    int32_t dev = device();
    // half the calls have only valid arguments, so that their data decides; the others break things
    const bool perturb = chance(0.5);
    auto odd = [&](double p) { return perturb && chance(2 * p); };
    drmas_lmhead_config c;
    memset(&c, 0, sizeof c);
    c.clip_low = odd(0.1) ? (double)value() : 0.2;
    c.clip_high = odd(0.1) ? (double)value() : 0.28;
    c.dual_clip = chance(0.7) ? 3.0 : (odd(0.5) ? (double)value() : 0.0);
    c.kl_coef = chance(0.7) ? 0.0 : (odd(0.2) ? (double)value() : 0.05);
    c.entropy_coef = chance(0.5) ? 0.0 : (odd(0.1) ? (double)value() : 0.01);
    c.kl_type = odd(0.05) ? (int32_t)u64() : (int32_t)below(4);
    c.per_row_mean = odd(0.05) ? -1 : (int32_t)below(2);
    int64_t rows = size(12), tokens = size(80);
    if (tokens > 4000) tokens = 4000 + below(100);
    c.normalizer = odd(0.1) ? (double)value() : (double)std::max<int64_t>(tokens, 1);
    bool offsets_ok;
    std::vector<int64_t> off = offsets(rows, tokens, offsets_ok, perturb);
    // the chunk: inside the tokens, or (rarely) not
    int64_t c0 = below(tokens + 1), n = below(std::min<int64_t>(tokens - c0, 96) + 1);
    bool chunk_ok = true;
    if (odd(0.03)) {
        static const int64_t bad_c0[] = {-1, INT64_MIN};
        if (chance(0.5)) c0 = bad_c0[below(2)];
        else n = tokens - c0 + 1 + below(3);
        chunk_ok = false;
    }
    const int64_t n_buf = chunk_ok ? n : 0;  // a bad chunk gets an empty buffer: nothing may be read
    int64_t V = vocab_size(std::max<int64_t>(n_buf, 1));
    Buf<int64_t> offb(rows + 1, misalign());
    for (int64_t r = 0; r <= rows; ++r) offb.set(r, off[(size_t)r]);
    Buf<L> z(n_buf * V, misalign());
    Buf<float> old(tokens, misalign()), adv(rows, misalign()), ref(tokens, misalign());
    Buf<int64_t> y(tokens, misalign());
    Buf<uint8_t> mask(tokens, misalign());
    bool moderate_all = true;
    const double bad_y = bad_rate(n_buf), bad_v = odd(0.5) ? bad_rate(tokens) : 0.0, bad_z = bad_rate(n_buf * V);
    for (int64_t t = 0; t < tokens; ++t) {
        y.set(t, target(V, bad_y));
        float ol = chance(bad_v) ? value() : -fabsf(finite_value()), rf = chance(bad_v) ? value() : -fabsf(finite_value());
        old.set(t, ol), ref.set(t, rf);
        mask.set(t, (uint8_t)(chance(0.8) ? 1 : (chance(0.5) ? 0 : u64())));
        moderate_all &= moderate(ol) && moderate(rf);
    }
    for (int64_t r = 0; r < rows; ++r) {
        float a = chance(bad_v) ? value() : finite_value();
        adv.set(r, a);
        moderate_all &= moderate(a);
    }
    for (int64_t i = 0; i < n_buf * V; ++i) z.set(i, logit_of<L>(logit(moderate_all, bad_z)));
    mask.null = chance(0.3);
    ref.null = chance(0.3);
    if (odd(0.02)) z.null = true;
    if (odd(0.02)) y.null = true;
    if (odd(0.02)) old.null = true;
    if (odd(0.02)) adv.null = true;
    Buf<float> lp(n_buf, misalign()), ent(n_buf, misalign());
    lp.null = chance(0.2);
    ent.null = chance(0.3);
    Buf<double> sums(DRMAS_LMHEAD_SUMS, misalign());
    if (odd(0.02)) sums.null = true;
    int64_t rows_arg = perturb ? count_arg(rows) : rows, tokens_arg = perturb ? count_arg(tokens) : tokens;
    int64_t V_arg = perturb ? vocab_arg(V, n) : V;
    if (odd(0.03)) {  // no offsets: any row count must be refused, however large
        offb.null = true;
        rows_arg = chance(0.5) ? INT64_MAX : rows_arg;
    }
    lp.poison(), ent.poison(), sums.poison();
    guard_slack(z), guard_slack(y), guard_slack(old), guard_slack(adv), guard_slack(ref), guard_slack(mask), guard_slack(offb);
    const Buf<L> z0 = z;
    const Buf<float> lp0 = lp, ent0 = ent;
    const Buf<double> sums0 = sums;
    auto call = [&](Buf<int64_t>& o, Buf<L>& zz, Buf<int64_t>& yy, Buf<float>& ol, Buf<float>& ad, Buf<float>& rf,
                    Buf<uint8_t>& mk, Buf<float>& l, Buf<float>& e, Buf<double>& s) {
        return lmhead_chunk(dev, &c, rows_arg, o.ptr(), tokens_arg, c0, n, V_arg, zz.ptr(), yy.ptr(), ol.ptr(), ad.ptr(), rf.ptr(),
                            mk.ptr(), l.ptr(), e.ptr(), s.ptr());
    };
    bool mis;
    int32_t st = tracked(mis, [&] { return call(offb, z, y, old, adv, ref, mask, lp, ent, sums); });
    count_status(st);
    check_error_message(st, fn);
    if (!slack_intact(z) || !slack_intact(lp) || !slack_intact(ent) || !slack_intact(sums))
        FAIL("%s wrote outside its buffers (chunk [%lld, +%lld), V %lld, status %d)", fn, (long long)c0, (long long)n, (long long)V, st);
    if (!slack_intact(y) || !slack_intact(old) || !slack_intact(adv) || !slack_intact(ref) || !slack_intact(mask) || !slack_intact(offb))
        FAIL("%s wrote to its inputs (status %d)", fn, st);
    if (st != 0 && (!z.same_bytes(z0) || !lp.same_bytes(lp0) || !ent.same_bytes(ent0) || !sums.same_bytes(sums0)))
        FAIL("%s failed (%d) but wrote its outputs (logits included): %s", fn, st, drmas_last_error());
    if (refused_misaligned(dev, mis, st, fn)) return;
    if (st == 0 && !offsets_ok && rows_arg == rows && tokens_arg == tokens) FAIL("%s accepted broken offsets", fn);
    if (st == 0 && !chunk_ok) FAIL("%s accepted the chunk [%lld, %lld + %lld) of %lld tokens", fn, (long long)c0, (long long)c0,
                                   (long long)n, (long long)tokens);
    // With a valid config, offsets, chunk, sizes and pointers, the data decides: the chunk's first valid
    // token with a bad target, else its first non-finite logit of a valid token, else success.
    auto valid_token = [&](int64_t t) { return t >= off[0] && t < off[(size_t)rows] && (mask.null || mask.get(t) != 0); };
    const bool clean = dev == DRMAS_DEVICE_CPU && lmhead_config_ok(c) && offsets_ok && chunk_ok && rows_arg == rows &&
                       tokens_arg == tokens && V_arg == V && !offb.null && !sums.null && (c.kl_type == DRMAS_KL_NONE || !ref.null) &&
                       (tokens == 0 || (!y.null && !old.null)) && (rows == 0 || !adv.null) && (n == 0 || !z.null);
    if (clean) {
        int64_t bad_t = -1, bad_z = -1;
        for (int64_t i = 0; i < n && bad_t < 0; ++i)
            if (valid_token(c0 + i) && (y.get(c0 + i) < 0 || y.get(c0 + i) >= V)) bad_t = c0 + i;
        for (int64_t i = 0; i < n && bad_z < 0; ++i)
            if (valid_token(c0 + i))
                for (int64_t v = 0; v < V; ++v)
                    if (!isfinite(as_float(z0.get(i * V + v)))) {
                        bad_z = i * V + v;
                        break;
                    }
        const int32_t want = bad_t >= 0 ? DRMAS_ERR_RANGE : bad_z >= 0 ? DRMAS_ERR_NONFINITE : DRMAS_OK;
        ++g_head_decided[1][want == DRMAS_OK ? 0 : want == DRMAS_ERR_RANGE ? 1 : 2];
        if (st != want) FAIL("%s: status %d, the data says %d (%s)", fn, st, want, drmas_last_error());
        char needle[96];
        if (want == DRMAS_ERR_RANGE) snprintf(needle, sizeof needle, "targets[%lld]", (long long)bad_t);
        else snprintf(needle, sizeof needle, "logits[%lld][%lld] (token %lld,", (long long)(bad_z / V), (long long)(bad_z % V),
                      (long long)(c0 + bad_z / V));
        if (want != DRMAS_OK && st == want && !strstr(drmas_last_error(), needle))
            FAIL("%s: the message does not name the first bad item (%s): %s", fn, needle, drmas_last_error());
        if (st == 0) {
            // invalid tokens: dL/dz rows, logp and entropy 0; the token count is the chunk's valid tokens
            int64_t nv = 0;
            bool zeros = true, finite = true;
            for (int64_t i = 0; i < n; ++i) {
                const bool v_ok = valid_token(c0 + i);
                nv += v_ok;
                if (!v_ok) {
                    for (int64_t v = 0; v < V; ++v) zeros &= as_float(z.get(i * V + v)) == 0.0f;
                    zeros &= (lp.null || lp.get(i) == 0.0f) && (ent.null || ent.get(i) == 0.0f);
                } else if (moderate_all) {
                    for (int64_t v = 0; v < V; ++v) finite &= isfinite(as_float(z.get(i * V + v)));
                    finite &= (lp.null || isfinite(lp.get(i))) && (ent.null || isfinite(ent.get(i)));
                }
            }
            if (!zeros) FAIL("%s: an invalid token of the chunk has a non-zero dL/dz, logp or entropy", fn);
            if (sums.get(DRMAS_LOSS_TOKENS) != (double)nv) FAIL("%s: sums[TOKENS] %g, %lld valid tokens", fn, sums.get(DRMAS_LOSS_TOKENS), (long long)nv);
            const bool sane_cfg = fabs(c.kl_coef) < 1e30 && fabs(c.entropy_coef) < 1e30 && c.normalizer >= 1;
            if (moderate_all && sane_cfg) {
                for (int j = 0; j < DRMAS_LMHEAD_SUMS; ++j) finite &= isfinite(sums.get(j));
                if (!finite) FAIL("%s: a non-finite dL/dz, logp, entropy or sum from moderate inputs (V %lld, chunk %lld)", fn, (long long)V, (long long)n);
            }
        }
    }
    // the same call again, on misaligned copies: refused, nothing written
    Buf<int64_t> o2 = offb.moved(3), y2 = y.moved(1);
    Buf<L> z2 = z0.moved(misalign() | 1);
    Buf<float> ol2 = old.moved(2), ad2 = adv.moved(3), rf2 = ref.moved(1), l2 = lp0.moved(2), e2 = ent0.moved(1);
    Buf<uint8_t> mk2 = mask.moved(3);
    Buf<double> s2 = sums0.moved(4);
    const Buf<L> z20 = z2;
    const Buf<float> l20 = l2, e20 = e2;
    const Buf<double> s20 = s2;
    int32_t st2 = tracked(mis, [&] { return call(o2, z2, y2, ol2, ad2, rf2, mk2, l2, e2, s2); });
    count_status(st2);
    check_moved(dev, mis, st, st2, z2.same_bytes(z20) && l2.same_bytes(l20) && e2.same_bytes(e20) && s2.same_bytes(s20),
                z2.same_bytes(z) && l2.same_bytes(lp) && e2.same_bytes(ent) && s2.same_bytes(sums), fn);
}

// drmas_decode_attention_f32: shapes drawn valid and buffers sized by them (misaligned at times),
// then at times one argument broken in a way the ABI must refuse (each refusal leaves qkv, the
// caches and out as they were); values anywhere from ordinary to NaN/Inf/huge; masks with rows
// that attend to their own slot only; a repeat on misaligned copies is refused.
void fuzz_decode_attention() {
    const char* fn = "drmas_decode_attention_f32";
    int32_t dev = chance(0.03) ? DRMAS_DEVICE_CUDA : device();
    const int64_t rows = below(6), kv = 1 + below(3), heads = kv * (1 + below(3)), d = 2 * (1 + below(20));
    const int64_t cap = 1 + below(40), slots = 1 + below(cap), write = below(slots);
    const int64_t qs = (heads + 2 * kv) * d + below(3), cs = kv * cap * d + below(5);
    const bool norm = chance(0.5), use_mask = chance(0.8), wild = chance(0.1);
    auto fill = [&](Buf<float>& b) { for (int64_t i = 0; i < b.n; ++i) b.set(i, wild ? value() : (float)(below(2001) - 1000) / 500.0f); };
    Buf<float> qkv(rows * qs, misalign()), kc(rows * cs, misalign()), vc(rows * cs, misalign()), cosb(rows * d), sinb(rows * d),
        qn(d), kn(d), out(rows * heads * d, misalign());
    fill(qkv); fill(kc); fill(vc); fill(cosb); fill(sinb); fill(qn); fill(kn);
    Buf<uint8_t> mask(rows * slots);
    for (int64_t i = 0; i < mask.n; ++i) mask.set(i, (uint8_t)(chance(0.3) ? 0 : 1 + below(255)));
    if (!use_mask) mask.null = true;
    if (!norm) qn.null = kn.null = true;
    int64_t a_rows = rows, a_heads = heads, a_kv = kv, a_d = d, a_qs = qs, a_cs = cs, a_cap = cap, a_slots = slots, a_write = write;
    double eps = 1e-6, scale = 1.0 / sqrt((double)d);
    bool broken = chance(0.3);
    if (broken) {
        switch (below(12)) {
            case 0: a_write = slots + below(3); break;
            case 1: a_slots = cap + 1 + below(3); break;
            case 2: a_qs = (heads + 2 * kv) * d - 1 - below(2); break;
            case 3: a_cs = kv * cap * d - 1; break;
            case 4: a_d = d - 1; break;  // odd
            case 5: a_heads = kv >= 2 ? kv + 1 : 0; break;
            case 6: if (norm) kn.null = true; else qn.null = false; break;
            case 7: a_rows = -1 - below(5); break;
            case 8: scale = chance(0.5) ? NAN : INFINITY; break;
            case 9: if (rows > 0) { if (chance(0.5)) qkv.null = true; else out.null = true; } else broken = false; break;
            case 10: a_write = -1; break;
            default: dev = DRMAS_DEVICE_CUDA; break;
        }
    }
    out.poison();
    const Buf<float> qkv0 = qkv, kc0 = kc, vc0 = vc, out0 = out;
    auto call = [&](Buf<float>& q, Buf<float>& k, Buf<float>& v, Buf<float>& o) {
        return drmas_decode_attention_f32(dev, a_rows, a_heads, a_kv, a_d, q.ptr(), a_qs, qn.ptr(), kn.ptr(), eps, cosb.ptr(), sinb.ptr(),
                                          k.ptr(), v.ptr(), a_cs, a_cap, a_write, a_slots, mask.ptr(), scale, o.ptr());
    };
    bool mis;
    const int32_t st = tracked(mis, [&] { return call(qkv, kc, vc, out); });
    count_status(st);
    check_error_message(st, fn);
    if (st != 0 && !(qkv.same_bytes(qkv0) && kc.same_bytes(kc0) && vc.same_bytes(vc0) && out.same_bytes(out0)))
        FAIL("%s failed (%d) but wrote an output", fn, st);
    if (refused_misaligned(dev, mis, st, fn)) return;
    if (st == 0 && broken && rows > 0) FAIL("%s accepted a broken argument", fn);
    if (st != 0 && !broken && dev == DRMAS_DEVICE_CPU) FAIL("%s refused valid arguments (%d): %s", fn, st, drmas_last_error());
    if (st == 0 && !wild) {
        for (int64_t i = 0; i < out.n; ++i)
            if (!isfinite(out.get(i))) {
                FAIL("%s: out[%lld] is not finite for moderate inputs", fn, (long long)i);
                break;
            }
    }
    if (st == 0) {  // the same call on misaligned copies: refused, nothing written
        Buf<float> q2 = qkv0.moved(2), k2 = kc0.moved(1), v2 = vc0.moved(3), o2 = out0.moved(1);
        const Buf<float> q20 = q2, k20 = k2, v20 = v2, o20 = o2;
        const int32_t st2 = tracked(mis, [&] { return call(q2, k2, v2, o2); });
        count_status(st2);
        check_moved(dev, mis, st, st2, q2.same_bytes(q20) && k2.same_bytes(k20) && v2.same_bytes(v20) && o2.same_bytes(o20),
                    o2.same_bytes(out) && q2.same_bytes(qkv) && k2.same_bytes(kc), fn);
    }
}

// drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32 (the decoding step's other ops): shapes drawn
// valid and buffers sized by them (strides wider than the rows, misaligned, in place at times), then
// at times one argument broken in a way the ABI must refuse (each refusal leaves every output as it
// was), an output shifted into an input among them; values anywhere from ordinary to NaN/Inf/huge; a
// repeat on misaligned copies is refused.
float step_value(bool wild) { return wild ? value() : (float)(below(2001) - 1000) / 500.0f; }

void fuzz_rms_norm() {
    const char* fn = "drmas_rms_norm_f32";
    int32_t dev = chance(0.03) ? DRMAS_DEVICE_CUDA : device();
    const int64_t rows = below(7), H = 1 + (chance(0.1) ? below(3000) : below(40));
    const int64_t xs = H + below(3), rs = H + below(3), os = H + below(3);
    const bool use_res = chance(0.6), in_place = chance(0.4), wild = chance(0.1);
    Buf<float> x(rows * xs, misalign()), res(rows * rs, misalign()), w(H), out(rows * os, misalign());
    for (int64_t i = 0; i < x.n; ++i) x.set(i, step_value(wild));
    for (int64_t i = 0; i < res.n; ++i) res.set(i, step_value(wild));
    for (int64_t i = 0; i < w.n; ++i) w.set(i, step_value(wild));
    out.poison();
    int64_t a_rows = rows, a_h = H, a_xs = xs, a_rs = rs, a_os = in_place ? xs : os;
    double eps = chance(0.1) ? 0.0 : 1e-6;
    bool null_x = false, null_w = false, null_out = false;
    int res_alias = 0;  // 1 x, 2 out
    bool out_shifted = false;  // out one float into x, at x's stride: a partial overlap
    bool broken = chance(0.3);
    if (broken) {
        switch (below(11)) {
            case 0: a_rows = -1 - below(5); break;
            case 1: a_h = -below(3); break;
            case 2: a_xs = H - 1 - below(2); break;
            case 3: if (use_res) a_rs = H - 1; else broken = false; break;
            case 4: a_os = in_place ? xs + 1 : H - 1 - below(2); break;  // in place: another stride than x's
            case 5: eps = chance(0.5) ? NAN : (chance(0.5) ? -1e-6 : INFINITY); break;
            case 6: { const int64_t k = below(3); null_x = k == 0; null_w = k == 1; null_out = k == 2; break; }
            case 7: res_alias = 1 + (int)below(2); break;
            case 8: if (xs >= 2) a_rows = INT64_MAX / xs + 1; else broken = false; break;
            case 9: if (rows > 0) out_shifted = true, a_os = xs; else broken = false; break;
            default: dev = DRMAS_DEVICE_CUDA; break;
        }
    }
    const Buf<float> x0 = x, out0 = out;
    auto call = [&](Buf<float>& xb, Buf<float>& rb, Buf<float>& ob) {
        float* xp = null_x ? nullptr : xb.ptr();
        // (shifted: past x's last row by one float, inside the Buf's 8 bytes of slack, never written)
        float* op = null_out ? nullptr : out_shifted ? xb.ptr() + 1 : in_place ? xb.ptr() : ob.ptr();
        const float* rp = res_alias == 1 ? xb.ptr() : res_alias == 2 ? (in_place ? xb.ptr() : ob.ptr()) : use_res ? rb.ptr() : nullptr;
        return drmas_rms_norm_f32(dev, a_rows, a_h, xp, a_xs, rp, a_rs, null_w ? nullptr : w.ptr(), eps, op, a_os);
    };
    bool mis;
    const int32_t st = tracked(mis, [&] { return call(x, res, out); });
    count_status(st);
    check_error_message(st, fn);
    if (st != 0 && !(x.same_bytes(x0) && out.same_bytes(out0))) FAIL("%s failed (%d) but wrote an output", fn, st);
    if (refused_misaligned(dev, mis, st, fn)) return;
    if (st == 0 && broken && rows > 0) FAIL("%s accepted a broken argument", fn);
    if (st != 0 && !broken && dev == DRMAS_DEVICE_CPU) FAIL("%s refused valid arguments (%d): %s", fn, st, drmas_last_error());
    if (st == 0 && !wild && eps > 0) {
        const Buf<float>& o = in_place ? x : out;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < H; ++c)
                if (!isfinite(o.get(r * a_os + c))) {
                    FAIL("%s: out[%lld][%lld] is not finite for moderate inputs", fn, (long long)r, (long long)c);
                    r = rows;
                    break;
                }
    }
    if (st == 0) {  // the same call on misaligned copies: refused, nothing written
        Buf<float> x2 = x0.moved(misalign() | 2), r2 = res.moved(1), o2 = out0.moved(3);
        const Buf<float> x20 = x2, o20 = o2;
        const int32_t st2 = tracked(mis, [&] { return call(x2, r2, o2); });
        count_status(st2);
        check_moved(dev, mis, st, st2, x2.same_bytes(x20) && o2.same_bytes(o20), x2.same_bytes(x) && o2.same_bytes(out), fn);
    }
}

void fuzz_swiglu() {
    const char* fn = "drmas_swiglu_f32";
    int32_t dev = chance(0.03) ? DRMAS_DEVICE_CUDA : device();
    const int64_t rows = below(7), W = 1 + (chance(0.1) ? below(3000) : below(40));
    const int64_t gs = W + below(3), us = W + below(3), os = W + below(3);
    const int alias = (int)below(3);  // out is 0 its own, 1 gate, 2 up
    const bool wild = chance(0.2);
    Buf<float> gate(rows * gs, misalign()), up(rows * us, misalign()), out(rows * os, misalign());
    for (int64_t i = 0; i < gate.n; ++i) gate.set(i, wild ? value() : 20.0f * step_value(false));
    for (int64_t i = 0; i < up.n; ++i) up.set(i, step_value(wild));
    out.poison();
    int64_t a_rows = rows, a_w = W, a_gs = gs, a_us = us, a_os = alias == 1 ? gs : alias == 2 ? us : os;
    int null_which = 0;  // 1 gate, 2 up, 3 out
    bool out_shifted = false;  // out one float into gate, at gate's stride: a partial overlap
    bool broken = chance(0.3);
    if (broken) {
        switch (below(9)) {
            case 0: a_rows = -1 - below(5); break;
            case 1: a_w = -below(3); break;
            case 2: a_gs = W - 1 - below(2); break;
            case 3: a_us = W - 1; break;
            case 4: a_os = alias != 0 ? a_os + 1 : W - 1 - below(2); break;  // in place: another stride
            case 5: null_which = 1 + (int)below(3); break;
            case 6: if (gs >= 2) a_rows = INT64_MAX / gs + 1; else broken = false; break;
            case 7: if (rows > 0) out_shifted = true, a_os = gs; else broken = false; break;
            default: dev = DRMAS_DEVICE_CUDA; break;
        }
    }
    const Buf<float> g0 = gate, u0 = up, out0 = out;
    auto call = [&](Buf<float>& gb, Buf<float>& ub, Buf<float>& ob) {
        // (shifted: past gate's last row by one float, inside the Buf's 8 bytes of slack, never written)
        float* op = null_which == 3 ? nullptr : out_shifted ? gb.ptr() + 1 : alias == 1 ? gb.ptr() : alias == 2 ? ub.ptr() : ob.ptr();
        return drmas_swiglu_f32(dev, a_rows, a_w, null_which == 1 ? nullptr : gb.ptr(), a_gs, null_which == 2 ? nullptr : ub.ptr(), a_us,
                                op, a_os);
    };
    bool mis;
    const int32_t st = tracked(mis, [&] { return call(gate, up, out); });
    count_status(st);
    check_error_message(st, fn);
    if (st != 0 && !(gate.same_bytes(g0) && up.same_bytes(u0) && out.same_bytes(out0))) FAIL("%s failed (%d) but wrote an output", fn, st);
    if (refused_misaligned(dev, mis, st, fn)) return;
    if (st == 0 && broken && rows > 0) FAIL("%s accepted a broken argument", fn);
    if (st != 0 && !broken && dev == DRMAS_DEVICE_CPU) FAIL("%s refused valid arguments (%d): %s", fn, st, drmas_last_error());
    if (st == 0 && !wild) {
        const Buf<float>& o = alias == 1 ? gate : alias == 2 ? up : out;
        for (int64_t r = 0; r < rows; ++r)
            for (int64_t c = 0; c < W; ++c)
                if (!isfinite(o.get(r * a_os + c))) {
                    FAIL("%s: out[%lld][%lld] is not finite for moderate inputs", fn, (long long)r, (long long)c);
                    r = rows;
                    break;
                }
    }
    if (st == 0) {
        Buf<float> g2 = g0.moved(misalign() | 1), u2 = u0.moved(2), o2 = out0.moved(3);
        const Buf<float> g20 = g2, u20 = u2, o20 = o2;
        const int32_t st2 = tracked(mis, [&] { return call(g2, u2, o2); });
        count_status(st2);
        check_moved(dev, mis, st, st2, g2.same_bytes(g20) && u2.same_bytes(u20) && o2.same_bytes(o20),
                    g2.same_bytes(gate) && u2.same_bytes(up) && o2.same_bytes(out), fn);
    }
}

void fuzz_sample() {
    const char* fn = "drmas_sample_f32";
    int32_t dev = chance(0.03) ? DRMAS_DEVICE_CUDA : device();
    const int64_t rows = below(6), V = 1 + (chance(0.1) ? below(5000) : below(40)), ls = V + below(3);
    const bool wild = chance(0.2);
    Buf<float> z(rows * ls, misalign());
    for (int64_t i = 0; i < z.n; ++i) z.set(i, wild ? value() : chance(0.1) ? -INFINITY : (float)(below(2001) - 1000) / 100.0f);
    for (int64_t r = 0; r < rows && !wild; ++r) z.set(r * ls + below(V), 0.0f);  // a finite logit in every row
    Buf<double> u(rows, misalign());
    for (int64_t r = 0; r < rows; ++r) u.set(r, chance(0.1) ? 0.0 : chance(0.1) ? 1.0 - 0x1p-53 : std::uniform_real_distribution<double>(0, 1)(rng));
    Buf<int64_t> tok(rows, misalign());
    Buf<float> lp(rows, misalign());
    tok.poison();
    lp.poison();
    static const double temps[] = {0.0, 0.6, 1.0, 1.7, 1e-3, 25.0};
    double T = temps[below(6)], P = chance(0.4) ? 1.0 : chance(0.5) ? std::uniform_real_distribution<double>(1e-12, 1.0)(rng) : 1e-9;
    int64_t K = chance(0.4) ? 0 : chance(0.3) ? V + below(3) : below(V + 1);
    int64_t a_rows = rows, a_v = V, a_ls = ls;
    int null_which = 0;  // 1 logits, 2 uniforms, 3 tokens, 4 logprobs
    bool broken = chance(0.3);
    if (broken) {
        switch (below(11)) {
            case 0: a_rows = -1 - below(5); break;
            case 1: a_v = chance(0.5) ? -below(3) : (int64_t)1 << 31; if (a_v > 0) a_ls = a_v; break;
            case 2: a_ls = V - 1 - below(2); break;
            case 3: T = chance(0.3) ? NAN : chance(0.5) ? -0.5 : INFINITY; break;
            case 4: K = -1 - below(3); break;
            case 5: P = chance(0.3) ? NAN : chance(0.5) ? 0.0 : 1.0 + 1e-9 + below(2); break;
            case 6: null_which = 1 + (int)below(4); if (null_which == 2 && T == 0) T = 0.6; break;
            case 7: if (rows > 0) u.set(below(rows), chance(0.3) ? NAN : chance(0.5) ? 1.0 : -1e-300); else broken = false; break;
            case 8: if (ls >= 2) a_rows = INT64_MAX / ls + 1; else broken = false; break;
            case 9: null_which = 2; if (T == 0) broken = false; break;  // greedy needs no uniforms
            default: dev = DRMAS_DEVICE_CUDA; break;
        }
    }
    const Buf<int64_t> tok0 = tok;
    const Buf<float> lp0 = lp;
    auto call = [&](Buf<float>& zb, Buf<double>& ub, Buf<int64_t>& tb, Buf<float>& lb) {
        return drmas_sample_f32(dev, a_rows, a_v, null_which == 1 ? nullptr : zb.ptr(), a_ls, T, K, P,
                                null_which == 2 ? nullptr : ub.ptr(), null_which == 3 ? nullptr : tb.ptr(),
                                null_which == 4 ? nullptr : lb.ptr());
    };
    bool mis;
    const int32_t st = tracked(mis, [&] { return call(z, u, tok, lp); });
    count_status(st);
    check_error_message(st, fn);
    if (st != 0 && !(tok.same_bytes(tok0) && lp.same_bytes(lp0))) FAIL("%s failed (%d) but wrote an output", fn, st);
    if (refused_misaligned(dev, mis, st, fn)) return;
    if (st == 0 && broken && rows > 0) FAIL("%s accepted a broken argument (T %g K %lld P %g)", fn, T, (long long)K, P);
    if (st != 0 && !broken && dev == DRMAS_DEVICE_CPU) FAIL("%s refused valid arguments (%d): %s", fn, st, drmas_last_error());
    if (st == 0) {
        for (int64_t r = 0; r < rows; ++r) {
            const int64_t t = tok.get(r);
            const float l = lp.get(r);
            if (t < 0 || t >= V) {
                FAIL("%s: token %lld of row %lld is outside [0, %lld)", fn, (long long)t, (long long)r, (long long)V);
                break;
            }
            // moderate logits with one finite one: a distribution, the token one of positive probability
            if (!wild && (!(l <= 1e-6f) || z.get(r * ls + t) == -INFINITY)) {
                FAIL("%s: row %lld drew token %lld (logit %g) at log-prob %g", fn, (long long)r, (long long)t, z.get(r * ls + t), l);
                break;
            }
        }
        Buf<float> z2 = z.moved(misalign() | 1);
        Buf<double> u2 = u.moved(3);
        Buf<int64_t> t2 = tok0.moved(2);
        Buf<float> l2 = lp0.moved(1);
        const Buf<int64_t> t20 = t2;
        const Buf<float> l20 = l2;
        const int32_t st2 = tracked(mis, [&] { return call(z2, u2, t2, l2); });
        count_status(st2);
        check_moved(dev, mis, st, st2, t2.same_bytes(t20) && l2.same_bytes(l20), t2.same_bytes(tok) && l2.same_bytes(lp), fn);
    }
}

void fuzz_library() {
    switch (below(7)) {
        case 0: count_status(0); if (!drmas_version() || !*drmas_version()) FAIL("drmas_version is empty"); break;
        case 1: count_status(0); (void)drmas_cuda_compiled(); (void)drmas_cuda_available(); break;
        case 2: {
            int32_t n = chance(0.5) ? (int32_t)below(5) - 1 : (int32_t)u64();
            int32_t got = drmas_set_num_threads(n);
            count_status(0);
            if (got < 1) FAIL("drmas_set_num_threads(%d) returned %d", n, got);
            drmas_set_num_threads(chance(0.5) ? 0 : 2);
            break;
        }
        case 3: {  // the CUDA helpers refuse politely without a GPU
            void* p = reinterpret_cast<void*>(0x1);
            int32_t st = drmas_cuda_malloc((size_t)u64() % 4096, chance(0.5) ? &p : nullptr);
            count_status(st);
            if (!g_cuda && st == 0) FAIL("drmas_cuda_malloc succeeded without a device");
            if (st == 0) count_status(drmas_cuda_free(p));
            check_error_message(st, "drmas_cuda_malloc");
            break;
        }
        case 4: {
            if (g_cuda) {  // host buffers are no device buffers: only the argument checks
                count_status(drmas_cuda_memcpy(nullptr, nullptr, 8, DRMAS_COPY_HOST_TO_DEVICE));
                break;
            }
            unsigned char a[8], b[8] = {0};
            int32_t st = drmas_cuda_memcpy(chance(0.5) ? a : nullptr, b, (size_t)below(9), (int32_t)below(5));
            count_status(st);
            check_error_message(st, "drmas_cuda_memcpy");
            st = drmas_cuda_synchronize(nullptr);
            count_status(st);
            st = drmas_cuda_free(nullptr);
            count_status(st);
            break;
        }
        case 5: {  // any ordinal: a status and a message, never a crash (a device or not)
            const int32_t d = chance(0.5) ? (int32_t)below(4) - 1 : (int32_t)u64();
            const int32_t st = drmas_cuda_check_device(d);
            count_status(st);
            if (!g_cuda && st == 0) FAIL("drmas_cuda_check_device(%d) passed without a device", d);
            check_error_message(st, "drmas_cuda_check_device");
            break;
        }
        default: count_status(0); (void)drmas_get_num_threads(); (void)strlen(drmas_last_error()); break;
    }
}

}  // namespace

int main(int argc, char** argv) {
    double seconds = 10;
    uint64_t seed = 20;
    long long max_iter = -1;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = atof(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc) seed = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--max-iterations") && i + 1 < argc) max_iter = atoll(argv[++i]);
        else {
            fprintf(stderr, "usage: %s [--seconds S] [--seed N] [--max-iterations N]\n", argv[0]);
            return 2;
        }
    }
    rng.seed(seed);
    g_cuda = drmas_cuda_available() != 0;
    drmas_set_num_threads(2);
    auto t0 = std::chrono::steady_clock::now();
    long long iter = 0;
    for (; max_iter < 0 || iter < max_iter; ++iter) {
        if ((iter & 63) == 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() >= seconds) break;
        switch (below(17)) {
            case 0: case 1: fuzz_segment_stats(); break;
            case 13: fuzz_decode_attention(); break;
            case 14: fuzz_rms_norm(); break;
            case 15: fuzz_swiglu(); break;
            case 16: fuzz_sample(); break;
            case 2: case 3: case 4: fuzz_advantage(); break;
            case 5: fuzz_broadcast(); break;
            case 6: case 7: case 8: fuzz_clipped_loss(); break;
            case 9: if (chance(0.5)) fuzz_lmhead_logprobs<float>(); else fuzz_lmhead_logprobs<uint16_t>(); break;
            case 10: case 11: if (chance(0.5)) fuzz_lmhead_chunk<float>(); else fuzz_lmhead_chunk<uint16_t>(); break;
            default: fuzz_library(); break;
        }
    }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    printf("fuzz_abi: seed %llu, %lld iterations, %lld calls (%lld ok, %lld errors) in %.1f s; failures %lld\n",
           (unsigned long long)seed, iter, g_calls, g_ok, g_err, s, g_failures);
    printf("fuzz_abi: statuses");
    for (int k = 0; k < 10; ++k) printf(" %d:%lld", k, g_status[k]);
    printf("\n");
    printf("fuzz_abi: LM head calls decided by their data (ok / bad target / non-finite logit): logprobs %lld/%lld/%lld, chunk %lld/%lld/%lld\n",
           g_head_decided[0][0], g_head_decided[0][1], g_head_decided[0][2], g_head_decided[1][0], g_head_decided[1][1],
           g_head_decided[1][2]);
    return g_failures == 0 ? 0 : 1;
}
