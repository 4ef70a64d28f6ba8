// cpu.cpp — the CPU backend of libdrmas and the oracle that CUDA results are compared with:
// segment_stats_cpu, advantage_cpu, broadcast_rows_cpu, clipped_loss_cpu, lmhead_logprobs_cpu,
// lmhead_chunk_cpu, and the CPU-only decoding step's decode_attention_cpu, rms_norm_cpu, swiglu_cpu,
// sample_cpu.
// Every function validates all of its input before it writes any output, so that a bad
// call leaves the caller's buffers untouched. Statistics are two-pass in fp64.
//
// advantage_cpu has three paths. Rollouts produce rows sorted by uid, each trajectory's rows
// together; a branch-free vectorised pass checks exactly that (with the ranges and the
// finiteness) and, when it holds, each uid run is normalised on its own while it is hot in L1
// by the kernels of cpu_adv_kernels.inc: two streaming reads of the input, one write, and no
// per-trajectory or per-uid table. Otherwise the full validation below finds the first bad row
// (for the message), or the uid runs of rows that are grouped but not sorted (then the same
// per-run kernels), or falls back to the general path: global per-segment arrays and full
// passes, for any order.
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

#include <pthread.h>
#include <sched.h>
#include <sys/mman.h>

#include <immintrin.h>
#include <omp.h>

#include "backend.h"
#include "cpu_adv.h"
#include "cpu_decode.h"
#include "cpu_lmhead.h"
#include "cpu_loss.h"
#include "cpu_step.h"
#include "drmas_math.h"

namespace drmas {

// ---------------------------------------------------------------------------------------
// threads

static int32_t g_threads = 0;  // 0: default

// The default is OpenMP's own: OMP_NUM_THREADS when set, else the processors available.
int32_t cpu_threads() { return g_threads > 0 ? g_threads : (int32_t)omp_get_max_threads(); }

// Runs fn(tid, nthreads) on `nthreads` threads, tid 0 on the caller's, on OpenMP's persistent
// team. Spawning std::threads per call made two threads slower than one (measured on the
// 2-core VM, 1M rows: 14.5 ms per call with fresh threads or with a hand-written pool, 9.5 ms
// with libgomp's team), so the CPU backend uses OpenMP for its threads. Concurrent calls from
// several Java threads each get their own team, which is correct if oversubscribed.
//
// Every part tid = 0 .. nthreads-1 runs exactly once, and fn is always told nthreads: OpenMP may
// give a smaller team (OMP_THREAD_LIMIT, OMP_DYNAMIC, a call from inside the caller's own parallel
// region), and then its threads take the missing parts in turn. Callers size per-part state by the
// count they asked for and split rows by it, so a smaller team changes neither their bookkeeping nor
// the bits (passing the team's size instead left parts unrun: a segfault in the owner merge, found
// by review). No fn waits on another part, so parts may run one after another. An exception (say
// bad_alloc) must not leave the parallel region (std::terminate): the first one is kept and
// rethrown after it, for guarded() to turn into a status.
template <class F>
static void run_parallel(int nthreads, F fn) {
    if (nthreads <= 1) {
        fn(0, 1);
        return;
    }
    std::exception_ptr error;
    std::atomic<bool> failed{false};
#pragma omp parallel num_threads(nthreads)
    {
        const int team = omp_get_num_threads();
        for (int tid = omp_get_thread_num(); tid < nthreads; tid += team) {
            if (failed.load(std::memory_order_relaxed)) break;
            try {
                fn(tid, nthreads);
            } catch (...) {
#pragma omp critical(drmas_run_parallel_error)
                if (!error) error = std::current_exception();
                failed.store(true, std::memory_order_relaxed);
            }
        }
    }
    if (error) std::rethrow_exception(error);
}

static int threads_for(int64_t work) {
    const int64_t per_thread_min = 1 << 16;  // below ~64K elements one thread is faster
    int64_t t = std::min<int64_t>(cpu_threads(), std::max<int64_t>(1, work / per_thread_min));
    return (int)std::max<int64_t>(1, t);
}

// Threads for a pass over n rows in which each thread fills a table of `entries` ids (a uid
// histogram, a trajectory -> uid map): threads_for(n), but no more than keep the tables beyond
// the first to 4 entries a row, so that their memory and the serial work that merges them grow
// with the rows, not with threads x ids (64 threads over 25M uids would be 6.4 GB of histograms).
static int threads_with_tables(int64_t n, int64_t entries) {
    const int nt = threads_for(n);
    if (entries <= 0) return nt;
    return (int)std::min<int64_t>(nt, 1 + 4 * n / entries);
}

// ---------------------------------------------------------------------------------------
// workspace

// Scratch memory that the advantage paths need for a call (the run-start map of sorted rows, the
// partition of unsorted ones: up to 36 B a row) comes from one block kept between calls, because
// fresh memory is not free: every 4 KB page of a new allocation faults on first touch and is
// zeroed by the kernel, which costs more than the kernel's own pass over the rows (on the
// development VM, ~15 us a page: bench/README.md). The block grows to the largest call's need up
// to DRMAS_CPU_WORKSPACE_MB (default 1024; 0: never kept) and is held until the process ends. One
// call uses it at a time; a concurrent call, or one that needs more than the limit, allocates its
// own scratch and frees it, as before.
namespace {
struct WorkspaceCache {
    std::mutex m;
    void* block = nullptr;
    size_t bytes = 0;
};
WorkspaceCache& workspace_cache() {
    static WorkspaceCache c;
    return c;
}
// Read at each call (a getenv is nothing beside a call's pass over its rows), so that tests and
// callers can change it; a value that is not a whole number >= 0 means the default.
size_t workspace_limit() {
    const char* v = getenv("DRMAS_CPU_WORKSPACE_MB");
    if (!v || !*v) return (size_t)1024 << 20;
    char* end = nullptr;
    const long long mb = strtoll(v, &end, 10);
    return *end != 0 || mb < 0 || mb > (1ll << 30) ? (size_t)1024 << 20 : (size_t)mb << 20;
}
void* map_block(size_t bytes) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    madvise(p, bytes, MADV_HUGEPAGE);  // a hint: fewer faults where the kernel has huge pages to give
    return p;
}
}  // namespace

// The scratch of one call: `bytes` (rounded up to 2 MB) from the cache when it is free, else its
// own mapping; released by the destructor. take() gives NULL when memory ran out.
class Workspace {
public:
    explicit Workspace(size_t bytes) {
        need_ = (std::max<size_t>(bytes, 1) + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
        WorkspaceCache& c = workspace_cache();
        // (a thread that holds the block already must not try_lock it again: undefined for a mutex)
        if (need_ <= workspace_limit() && !holds_cache() && c.m.try_lock()) {
            cached_ = true;
            holds_cache() = true;
            if (c.bytes < need_) {
                if (c.block) munmap(c.block, c.bytes);
                c.block = map_block(need_);
                c.bytes = c.block ? need_ : 0;
            }
            p_ = c.block;
        } else {
            p_ = map_block(need_);
        }
    }
    ~Workspace() {
        if (cached_) {
            holds_cache() = false;
            workspace_cache().m.unlock();
        } else if (p_) {
            munmap(p_, need_);
        }
    }
    Workspace(const Workspace&) = delete;
    Workspace& operator=(const Workspace&) = delete;
    // Carves `count` objects of T (64-byte aligned) off the front of what is left.
    // NULL when the workspace is smaller than what was taken (a sizing mistake never writes past it).
    template <class T>
    T* take(int64_t count) {
        const size_t at = (used_ + 63) & ~(size_t)63, size = sizeof(T) * (size_t)std::max<int64_t>(count, 0);
        if (!p_ || at > need_ || size > need_ - at) return nullptr;
        used_ = at + size;
#if defined(__SANITIZE_ADDRESS__)
        // Under AddressSanitizer each piece is its own allocation, so that an access past one
        // is reported (inside one mapping it would not be).
        pieces_.emplace_back(new char[std::max<size_t>(size, 1)]);
        return reinterpret_cast<T*>(pieces_.back().get());
#else
        return reinterpret_cast<T*>(static_cast<char*>(p_) + at);
#endif
    }
    // The bytes that take() of these counts of T asks for, alignment included (for sizing).
    template <class T>
    static size_t bytes_for(int64_t count) { return ((sizeof(T) * (size_t)std::max<int64_t>(count, 0)) + 63) & ~(size_t)63; }

private:
    static bool& holds_cache() {
        static thread_local bool held = false;
        return held;
    }
    void* p_ = nullptr;
    size_t need_ = 0, used_ = 0;
    bool cached_ = false;
#if defined(__SANITIZE_ADDRESS__)
    std::vector<std::unique_ptr<char[]>> pieces_;
#endif
};

static const char* finite_name(float v) { return isnan(v) ? "nan" : (v > 0 ? "+inf" : "-inf"); }

// ---------------------------------------------------------------------------------------
// 1. segment statistics

int32_t segment_stats_cpu(int64_t n, const float* values, const int32_t* ids, int64_t num_segments,
                          int32_t ddof, int64_t* count, double* mean, double* m2, double* std) {
    const char* fn = "drmas_segment_stats_f32";
    for (int64_t i = 0; i < n; ++i) {
        const int32_t s = ids[i];
        if (s < 0 || s >= num_segments)
            return fail(DRMAS_ERR_RANGE, "%s: segment_ids[%lld] = %d is outside [0, %lld)", fn,
                        (long long)i, s, (long long)num_segments);
        if (!isfinite(values[i]))
            return fail(DRMAS_ERR_NONFINITE, "%s: values[%lld] is not finite (%s)", fn, (long long)i,
                        finite_name(values[i]));
    }
    std::vector<int64_t> cnt(num_segments, 0);
    std::vector<double> sum(num_segments, 0.0), sq(num_segments, 0.0);
    for (int64_t i = 0; i < n; ++i) {
        cnt[ids[i]] += 1;
        sum[ids[i]] += values[i];
    }
    for (int64_t s = 0; s < num_segments; ++s) sum[s] = cnt[s] ? sum[s] / (double)cnt[s] : 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double d = (double)values[i] - sum[ids[i]];
        sq[ids[i]] += d * d;
    }
    for (int64_t s = 0; s < num_segments; ++s) {
        count[s] = cnt[s];
        mean[s] = sum[s];
        m2[s] = sq[s];
        if (std) std[s] = std_from_m2((double)cnt[s], sq[s], ddof);
    }
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 2. advantages

namespace {

struct Run {
    int64_t begin;
    int32_t uid;
};

struct Problem {  // first problem found in a chunk of rows
    int64_t row = -1;
    int kind = 0;  // 1 uid, 2 traj, 3 agent, 4 score
};

const double kNaN = __builtin_nan("");

}  // namespace

void write_diag(const AdvArgs& a, int64_t u, int64_t k, double acount, double amean,
                       double am2, double gcount, double gmean, double gm2) {
    const int64_t S = a.U * a.K, s = u * a.K + k;
    const int ddof = a.c->ddof;
    const double astd = std_from_m2(acount, am2, ddof), gstd = std_from_m2(gcount, gm2, ddof);
    double* d = a.diag;
    d[DRMAS_DIAG_AGENT_COUNT * S + s] = acount;
    d[DRMAS_DIAG_AGENT_MEAN * S + s] = amean;
    d[DRMAS_DIAG_AGENT_M2 * S + s] = am2;
    d[DRMAS_DIAG_AGENT_STD * S + s] = astd;
    d[DRMAS_DIAG_GROUP_COUNT * S + s] = gcount;
    d[DRMAS_DIAG_GROUP_MEAN * S + s] = gmean;
    d[DRMAS_DIAG_GROUP_M2 * S + s] = gm2;
    d[DRMAS_DIAG_GROUP_STD * S + s] = gstd;
    // Lemma 4.2 bounds the agent's mean of A² under the group baseline relative to the group's:
    // means over the rows (or pooled trajectories), so population variances (n, not n − 1) whatever
    // ddof the normalisation uses; with n − 1 an agent of few rows showed a factor above 1 where its
    // E[A²] equals the group's. Defined where the normalisation's group std is not 0.
    const double dm = amean - gmean;
    d[DRMAS_DIAG_INFLATION * S + s] =
        (acount > 0 && gstd > 0) ? (am2 / acount + dm * dm) / (gm2 / gcount) : kNaN;
}

// Pass 3 of a run, specialised so that the per-row loop has no mode or pooling branch.
template <bool kTrajX>
static inline void write_run(const AdvArgs& a, int64_t b, int64_t e, const Resolved* res, const RunScratch& w) {
    const drmas_norm_config& c = *a.c;
    const float* sc = a.scores;
    const int32_t* ag = a.agent;
    float* out = a.adv;
    for (int64_t i = b; i < e; ++i) {
        const double s = sc[i];
        out[i] = apply_advantage(c, res[ag[i]], s, kTrajX ? w.tsum[w.slot[i - b]] : s);
    }
}

void write_run_scalar(const AdvArgs& a, int64_t b, int64_t e, const Resolved* res, const RunScratch& w, bool kTrajX) {
    if (kTrajX)
        write_run<true>(a, b, e, res, w);
    else
        write_run<false>(a, b, e, res, w);
}

SegStat group_of_run(const AdvArgs& a, int64_t b, int64_t e, RunScratch& w, int32_t* tslot, double& gm2) {
    const float* sc = a.scores;
    const int64_t len = e - b;
    if (a.traj == nullptr) {
        double gsum = 0;
        for (int64_t i = b; i < e; ++i) gsum += sc[i];
        const double gmean = gsum / (double)len;
        gm2 = 0;
        for (int64_t i = b; i < e; ++i) gm2 += ((double)sc[i] - gmean) * ((double)sc[i] - gmean);
        return SegStat{(double)len, gmean, 0.0};
    }
    if ((int64_t)w.slot.size() < len) {
        w.slot.resize(len);
        w.tcnt.resize(len);
        w.tsum.resize(len);
    }
    int32_t* slot = w.slot.data();
    double* tcnt = w.tcnt.data();
    double* tsum = w.tsum.data();
    const int32_t* tr = a.traj;
    int64_t ntraj = 0;
    if (tslot == nullptr && b < e) {  // each trajectory's rows are contiguous
        // The current trajectory's count and sum in registers, stored when it ends: added through
        // tcnt/tsum, each row waited on the previous row's store. The sums' order is the rows'.
        double cnt = 0, sum = 0;
        int32_t cur = tr[b];
        for (int64_t i = b; i < e; ++i) {
            if (tr[i] != cur) {
                tcnt[ntraj] = cnt;
                tsum[ntraj] = sum;
                ++ntraj;
                cnt = 0;
                sum = 0;
                cur = tr[i];
            }
            slot[i - b] = (int32_t)ntraj;
            cnt += 1;
            sum += sc[i];
        }
        tcnt[ntraj] = cnt;
        tsum[ntraj] = sum;
        ++ntraj;
    }
    for (int64_t i = b; i < e && tslot != nullptr; ++i) {  // slots in order of first appearance
        int32_t* v = &tslot[tr[i]];
        if (*v >= 0) {
            *v = -(int32_t)(ntraj + 2);
            tcnt[ntraj] = 0;
            tsum[ntraj] = 0;
            ++ntraj;
        }
        const int32_t j = -*v - 2;
        slot[i - b] = j;
        tcnt[j] += 1;
        tsum[j] += sc[i];
    }
    double gsum = 0;
    for (int64_t j = 0; j < ntraj; ++j) {
        tsum[j] /= tcnt[j];  // now the trajectory's mean score S_t
        gsum += tsum[j];
    }
    const double gmean = gsum / (double)ntraj;
    gm2 = 0;
    for (int64_t j = 0; j < ntraj; ++j) gm2 += (tsum[j] - gmean) * (tsum[j] - gmean);
    return SegStat{(double)ntraj, gmean, 0.0};
}

namespace {

// The generic per-run kernel (any number of agents; the vectorised ones of
// cpu_adv_kernels.inc cover up to 4). Normalises rows [b, e), all of uid u (and nothing else of
// u anywhere), while they are hot in L1: agent sums, then (only if the mode, the singleton policy or the diagnostics need
// them) the group's statistics, then agent second moments, then the advantages. A mode with
// its mean and std from the agent (Dr. MAS) and no diagnostics usually needs no group
// statistics at all, so it skips that work.
void normalise_run(const AdvArgs& a, int64_t b, int64_t e, int32_t u, RunScratch& w, int32_t* tslot) {
    const drmas_norm_config& c = *a.c;
    const int64_t K = a.K;
    double* sum = w.acc.data();
    double* m2 = sum + K;
    double* mean = m2 + K;
    int64_t* cnt = w.acnt.data();
    std::fill_n(sum, 2 * K, 0.0);
    std::fill_n(cnt, K, 0);
    const float* sc = a.scores;
    const int32_t* ag = a.agent;

    // Pass 1: agent sums.
    for (int64_t i = b; i < e; ++i) {
        const int32_t k = ag[i];
        cnt[k] += 1;
        sum[k] += sc[i];
    }
    bool single = false;
    for (int64_t k = 0; k < K; ++k) {
        mean[k] = cnt[k] > 0 ? sum[k] / (double)cnt[k] : 0.0;
        single |= cnt[k] == 1;
    }

    // Group statistics, where anything reads them.
    const bool need_group = w.mode.need_group || (single && c.singleton == DRMAS_SINGLETON_FALLBACK);
    double gm2 = 0;
    SegStat group{0.0, 0.0, 0.0};
    if (need_group) {
        group = group_of_run(a, b, e, w, tslot, gm2);
        group.std = std_from_m2(group.count, gm2, c.ddof);
    }

    // Pass 2: agent second moments about the means.
    for (int64_t i = b; i < e; ++i) {
        const int32_t k = ag[i];
        const double d = (double)sc[i] - mean[k];
        m2[k] += d * d;
    }

    // Resolve each (uid, agent) segment once; pass 3 writes the advantages.
    const int ddof = c.ddof;
    Resolved* res = w.res.data();
    for (int64_t k = 0; k < K; ++k) {
        const double n_k = (double)cnt[k];
        res[k] = resolve_segments(c, SegStat{n_k, mean[k], std_from_m2(n_k, m2[k], ddof)}, group);
    }
    bool any_zero = false;
    for (int64_t k = 0; k < K; ++k) any_zero |= res[k].zero != 0;
    if (w.mode.traj_x) {
        write_run<true>(a, b, e, res, w);
    } else if (c.scale_by_std && !any_zero) {
        // The common case (the numerator is the row's own score), with apply_advantage's
        // selects folded away: no segment is zeroed, denom = std + eps > 0 (eps > 0 is checked
        // when scaling), and adding +0 turns the one zero difference that is -0 (a -0 score
        // minus a +0 mean) into +0, so a zero difference divides to exactly +0 as specified.
        const float* sc = a.scores;
        float* out = a.adv;
        for (int64_t i = b; i < e; ++i) {
            const Resolved& r = res[ag[i]];
            out[i] = (float)((((double)sc[i] - r.mean) + 0.0) / r.denom);
        }
    } else {
        write_run<false>(a, b, e, res, w);
    }
    if (a.diag)
        for (int64_t k = 0; k < K; ++k)
            write_diag(a, u, k, (double)cnt[k], mean[k], m2[k], group.count, group.mean, gm2);
}

// General path for any row order: global per-segment arrays, full passes. `owner` maps each
// trajectory to its uid (-1 for empty trajectories).
void normalise_general(const AdvArgs& a, const std::vector<int32_t>& owner) {
    const drmas_norm_config& c = *a.c;
    const int64_t U = a.U, K = a.K, S = U * K, T = a.T, n = a.n;
    const bool by_traj = a.traj != nullptr;
    std::vector<double> acnt(S, 0.0), amean(S, 0.0), am2(S, 0.0);
    std::vector<double> gcnt(U, 0.0), gmean(U, 0.0), gm2(U, 0.0);
    std::vector<double> tcnt(by_traj ? T : 0, 0.0), tmean(by_traj ? T : 0, 0.0);
    for (int64_t i = 0; i < n; ++i) {
        const double s = a.scores[i];
        const int64_t seg = (int64_t)a.uid[i] * K + a.agent[i];
        acnt[seg] += 1;
        amean[seg] += s;
        if (by_traj) {
            tcnt[a.traj[i]] += 1;
            tmean[a.traj[i]] += s;
        } else {
            gcnt[a.uid[i]] += 1;
            gmean[a.uid[i]] += s;
        }
    }
    for (int64_t s = 0; s < S; ++s) amean[s] = acnt[s] > 0 ? amean[s] / acnt[s] : 0.0;
    if (by_traj) {
        for (int64_t t = 0; t < T; ++t) {
            if (tcnt[t] == 0) continue;
            tmean[t] /= tcnt[t];
            gcnt[owner[t]] += 1;
            gmean[owner[t]] += tmean[t];
        }
    }
    for (int64_t u = 0; u < U; ++u) gmean[u] = gcnt[u] > 0 ? gmean[u] / gcnt[u] : 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const double s = a.scores[i];
        const int64_t seg = (int64_t)a.uid[i] * K + a.agent[i];
        am2[seg] += (s - amean[seg]) * (s - amean[seg]);
        if (!by_traj) gm2[a.uid[i]] += (s - gmean[a.uid[i]]) * (s - gmean[a.uid[i]]);
    }
    if (by_traj)
        for (int64_t t = 0; t < T; ++t)
            if (tcnt[t] > 0) gm2[owner[t]] += (tmean[t] - gmean[owner[t]]) * (tmean[t] - gmean[owner[t]]);
    std::vector<Resolved> res(S);
    for (int64_t u = 0; u < U; ++u) {
        const SegStat gr{gcnt[u], gmean[u], std_from_m2(gcnt[u], gm2[u], c.ddof)};
        for (int64_t k = 0; k < K; ++k) {
            const int64_t seg = u * K + k;
            res[seg] = resolve_segments(c, SegStat{acnt[seg], amean[seg], std_from_m2(acnt[seg], am2[seg], c.ddof)}, gr);
        }
    }
    for (int64_t i = 0; i < n; ++i) {
        const double s = a.scores[i];
        const double x = by_traj ? tmean[a.traj[i]] : s;
        a.adv[i] = apply_advantage(c, res[(int64_t)a.uid[i] * K + a.agent[i]], s, x);
    }
    if (a.diag)
        for (int64_t u = 0; u < U; ++u)
            for (int64_t k = 0; k < K; ++k)
                write_diag(a, u, k, acnt[u * K + k], amean[u * K + k], am2[u * K + k], gcnt[u],
                           gmean[u], gm2[u]);
}

}  // namespace

// The range and finiteness checks of rows [b, e) folded into one flag: a loop without
// branches or stores, which the compiler vectorises.
template <bool kTraj>
inline bool block_has_bad_row(const AdvArgs& a, int64_t b, int64_t e) {
    const uint32_t U = (uint32_t)a.U, T = (uint32_t)a.T, K = (uint32_t)a.K;
    uint32_t bad = 0;
    for (int64_t i = b; i < e; ++i) {
        uint32_t bits;
        memcpy(&bits, &a.scores[i], 4);
        bad |= (uint32_t)((uint32_t)a.uid[i] >= U) | (uint32_t)(kTraj && (uint32_t)a.traj[i] >= T) |
               (uint32_t)((uint32_t)a.agent[i] >= K) | (uint32_t)((bits & 0x7f800000u) == 0x7f800000u);
    }
    return bad != 0;
}

// Validates rows [b, e): ids in range (one 32-bit compare each: all counts are < 2^31),
// finite scores, and, with trajectories, that each trajectory stays in one uid within the
// chunk: `own` is this thread's own trajectory -> uid map (-1: not seen), read and overwritten
// at every row without a branch, so the check costs no misprediction when trajectories change
// every few rows. Chunks are reconciled afterwards (merge_owners). Records where each uid run
// starts. Returns the first bad row of the chunk, if any. Works in blocks that stay in L1: the
// vectorised range checks first, then the trajectory and run bookkeeping.
template <bool kTraj>
Problem validate_rows(const AdvArgs& a, int64_t b, int64_t e, int32_t* own, std::vector<Run>& runs,
                      bool& inconsistent) {
    constexpr int64_t kBlock = 1024;
    const uint32_t U = (uint32_t)a.U, T = (uint32_t)a.T, K = (uint32_t)a.K;
    const int32_t* uid = a.uid;
    const int32_t* traj = a.traj;
    if (b < e) runs.push_back({b, uid[b]});
    int32_t prev = b < e ? uid[b] : 0;
    bool incons = false;
    for (int64_t bb = b; bb < e; bb += kBlock) {
        const int64_t be = std::min(e, bb + kBlock);
        if (block_has_bad_row<kTraj>(a, bb, be)) {
            inconsistent = incons;  // rows before the bad one are rechecked in order by the caller
            for (int64_t i = bb; i < be; ++i) {
                if ((uint32_t)uid[i] >= U) return {i, 1};
                if (kTraj && (uint32_t)traj[i] >= T) return {i, 2};
                if ((uint32_t)a.agent[i] >= K) return {i, 3};
                if (!isfinite(a.scores[i])) return {i, 4};
            }
        }
        for (int64_t i = bb; i < be; ++i) {
            const int32_t u = uid[i];
            if (u != prev) {
                runs.push_back({i, u});
                prev = u;
            }
            if (kTraj) {
                const int32_t t = traj[i];
                const int32_t o = own[t];
                incons |= (o != -1) & (o != u);
                own[t] = u;
            }
        }
    }
    inconsistent = incons;
    return {};
}

// Reconciles the threads' trajectory maps into owner[t] (the uid of trajectory t, -1 if it
// has no rows). Returns false if some trajectory was given different uids by two chunks.
bool merge_owners(const std::vector<std::vector<int32_t>>& own, int64_t T, int32_t* owner) {
    const int nt = threads_for(T);
    std::vector<char> bad(nt, 0);
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = T * tid / nth, hi = T * (tid + 1) / nth;
        bool incons = false;
        for (int64_t t = lo; t < hi; ++t) {
            int32_t v = -1;
            for (const auto& m : own) {
                const int32_t o = m[t];
                incons |= (o != -1) & (v != -1) & (o != v);
                v = o != -1 ? o : v;
            }
            owner[t] = v;
        }
        bad[tid] = incons;
    });
    return std::find(bad.begin(), bad.end(), 1) == bad.end();
}

// The environment is read at every call (a few tens of ns) so that a test can compare both
// kernels in one process.
const AdvIsa& adv_isa() {
    static const bool v3 = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("x86-64-v3") != 0;
    }();
    const char* want = getenv("DRMAS_CPU_ISA");
    if (!v3 || (want != nullptr && strcmp(want, "v2") == 0)) return kAdvIsaV2;
    return kAdvIsaV3;
}

const LossIsa& loss_isa() {
    static const bool v4 = [] {
        __builtin_cpu_init();
        return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
               __builtin_cpu_supports("avx512vl");
    }();
    if (&adv_isa() != &kAdvIsaV3) return kLossIsaV2;
    const char* want = getenv("DRMAS_CPU_ISA");
    return v4 && (want == nullptr || strcmp(want, "v3") != 0) ? kLossIsaV4 : kLossIsaV3;
}

const LmheadIsa& lmhead_isa() {
    return &adv_isa() == &kAdvIsaV3 ? kLmheadIsaV3 : kLmheadIsaV2;
}

const DecodeIsa& decode_isa() {
    return &adv_isa() == &kAdvIsaV3 ? kDecodeIsaV3 : kDecodeIsaV2;
}

const StepIsa& step_isa() {
    return &adv_isa() == &kAdvIsaV3 ? kStepIsaV3 : kStepIsaV2;
}

// The largest run start in (p, ce) of the run-start map, or p if there is none; reads only the
// map's words that hold rows below ce.
static int64_t last_start(const uint8_t* starts, int64_t p, int64_t ce) {
    const int64_t lo = p + 1;
    for (int64_t w = (ce - 1) >> 6; lo < ce && w >= (lo >> 6); --w) {
        uint64_t word;
        memcpy(&word, starts + 8 * w, 8);
        const int64_t base = w << 6;
        if (ce - base < 64) word &= (1ull << (ce - base)) - 1;
        if (lo > base) word &= ~0ull << (lo - base);
        if (word) return base + 63 - __builtin_clzll(word);
    }
    return p;
}

// drmas_advantage_trusted_f32 on sorted rows: each thread checks a block of its rows (in L1) and
// normalises the runs that end inside what it has checked, so every row is read from memory once;
// the run that a thread's last block leaves open (it ends in the next thread's rows, or at n) is
// normalised after all threads have checked theirs. False (some outputs may be written) when a
// block is not sorted or not valid: the caller then takes the validating path, which reports the
// error or handles the order.
static bool advantage_trusted_sorted(const AdvArgs& a, const AdvIsa& isa) {
    const int64_t n = a.n;
    const int nt = threads_for(n);
    auto split = [n](int tid, int nth) { return tid >= nth ? n : (n * tid / nth) & ~(int64_t)63; };
    const int64_t words = (n + 63) / 64;
    Workspace ws(Workspace::bytes_for<uint64_t>(words));
    uint64_t* map = ws.take<uint64_t>(words);
    if (!map) return false;
    map[words - 1] = 0;
    uint8_t* starts = reinterpret_cast<uint8_t*>(map);
    std::vector<char> ok(nt, 0);
    std::vector<int64_t> open(nt, 0);
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = split(tid, nth), hi = split(tid + 1, nth);
        constexpr int64_t kBlock = 2048;  // 32 KB of rows: checked, then normalised from L1
        RunScratch w(a);
        int64_t p = lo;  // the runs from p on are not normalised yet
        for (int64_t cb = lo; cb < hi; cb += kBlock) {
            const int64_t ce = std::min(hi, cb + kBlock);
            if (!isa.sorted_and_valid(a, cb, ce, starts)) return;
            const int64_t q = last_start(starts, p, ce);  // the runs in [p, q) end at or before q
            if (q > p) {
                isa.sorted_runs(a, p, q, starts, w, &normalise_run, nullptr);
                p = q;
            }
        }
        open[tid] = p;
        ok[tid] = 1;
    });
    if (std::find(ok.begin(), ok.end(), 0) != ok.end()) return false;
    RunScratch w(a);
    for (int tid = 0; tid < nt; ++tid) isa.sorted_runs(a, open[tid], split(tid + 1, nt), starts, w, &normalise_run, nullptr);
    return true;
}

// Rows in any other order (unsorted rows were ~1% of copy bandwidth through the general path's
// random-access tables): a stable counting sort by uid into the workspace (one 16-byte record a row
// and each row's place in the partition, then the score, agent and traj arrays that the per-run
// kernels read, their advantages in the records' space: 32 B a row, plus a bit a row for the
// run-start map, 4 B a trajectory for its owner and a uid histogram for each thread that counts,
// as many as keep them to 4 B a row beyond the first), then the sorted path's per-run kernels on
// the uid runs, then each row's advantage read back from its place.
// Each uid's rows keep their order, so the result is bit for bit what the per-run kernels give for
// those rows sorted stably by uid. The trajectory -> uid map is built on the partitioned runs
// (every row writes its uid, then every row reads it back: a trajectory in two uids fails the
// read); group_of_run then claims it as in the blocked path. Returns false, having written no output,
// when a row is bad or a trajectory lies in two uids (the caller's full validation then names the
// row) or when the uids far outnumber the rows (the caller's general path then runs: the
// histograms grow with U). What bounds it on the development VM, and what did not help (a
// two-pass radix partition, a bucketed write-back, 2 MB pages): bench/README.md.
static bool advantage_partitioned(const AdvArgs& a, const AdvIsa& isa) {
    const int64_t n = a.n, U = a.U, K = a.K, T = a.T;
    if (n >= INT32_MAX || U > 4 * n + 4096) return false;
    const int nt = threads_for(n);
    const int nh = threads_with_tables(n, U);  // the counting and the scatter: a histogram of U a thread
    const bool by_traj = a.traj != nullptr;
    struct Rec {
        float score;
        int32_t agent, traj, unused;  // (16 bytes: one aligned vector store)
    };
    static_assert(sizeof(Rec) == 16, "the scatter writes a record as one 16-byte vector");
    // The scratch, from the workspace: per-thread histograms (a cache line apart), the uid offsets,
    // the records, the per-run kernels' arrays (their advantages reuse the records' space, which is
    // dead by then) and the trajectory owners.
    const int64_t Upad = (U + 15) & ~(int64_t)15;
    const int64_t words = (n + 63) / 64;
    Workspace ws(Workspace::bytes_for<int32_t>(Upad * nh) + Workspace::bytes_for<int64_t>(U + 1) +
                 Workspace::bytes_for<Rec>(n) + 3 * Workspace::bytes_for<int32_t>(n) +
                 Workspace::bytes_for<float>(n) + Workspace::bytes_for<int32_t>(by_traj ? T : 0) +
                 Workspace::bytes_for<uint64_t>(words));
    int32_t* hist = ws.take<int32_t>(Upad * nh);  // n < 2^31: counts and cursors fit
    int64_t* off = ws.take<int64_t>(U + 1);
    Rec* rec = ws.take<Rec>(n);
    float* ps = ws.take<float>(n);
    int32_t* pag = ws.take<int32_t>(n);
    int32_t* ptr = ws.take<int32_t>(by_traj ? n : 0);
    int32_t* pidx = ws.take<int32_t>(n);  // row i's place in the partition
    int32_t* owner = ws.take<int32_t>(by_traj ? T : 0);
    uint64_t* map = ws.take<uint64_t>(words);  // the partition's run-start map (1 bit a row)
    float* padv = reinterpret_cast<float*>(rec);
    if (!hist || !off || !rec || !ps || !pag || !ptr || !pidx || !owner || !map)
        return false;  // no memory: the caller's paths run (and report it if they fail too)
    // ---- check the rows and count each uid's rows, per thread ----
    std::vector<char> bad(nh, 0);
    run_parallel(nh, [&](int tid, int nth) {  // (nth is nh: run_parallel runs every part)
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        int32_t* h = hist + Upad * tid;
        std::fill(h, h + U, 0);  // first touched by its own thread
        constexpr int64_t kBlock = 2048;
        for (int64_t b = lo; b < hi; b += kBlock) {
            const int64_t e = std::min(hi, b + kBlock);
            if (by_traj ? block_has_bad_row<true>(a, b, e) : block_has_bad_row<false>(a, b, e)) {
                bad[tid] = 1;
                return;
            }
            for (int64_t i = b; i < e; ++i) ++h[a.uid[i]];
        }
    });
    if (std::find(bad.begin(), bad.end(), 1) != bad.end()) return false;
    // ---- offsets: off[u] is where uid u's rows start; thread t's rows of u follow threads < t ----
    int64_t pos = 0;
    for (int64_t u = 0; u < U; ++u) {
        off[u] = pos;
        for (int t = 0; t < nh; ++t) {
            const int64_t c = hist[Upad * t + u];
            hist[Upad * t + u] = (int32_t)pos;  // thread t's cursor for u
            pos += c;
        }
    }
    off[U] = pos;
    // ---- scatter: each row as one 16-byte record (one cache line touched a row, where four
    // ---- arrays touched four), then split into the arrays of the per-run kernels ----
    run_parallel(nh, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        int32_t* const cur = hist + Upad * tid;
        // One 16-byte store a record, built in a register: the stores miss the cache, and each
        // of the three that the compiler made of the struct held a store-queue entry until its line
        // came (bench/README.md, issue 17's fifth session). The pointers are locals (and the loop
        // one per pooling) because a vector store may alias anything: the compiler would reload
        // them from `a` at every row. The line that row i + kAhead will write is asked for
        // (for writing) when row i is written, from its uid's cursor now (each row of that uid in
        // between moves the cursor on by a record, rarely past the line), so that more misses are
        // in flight than the store queue holds.
        const float* const sc = a.scores;
        const int32_t *const ud = a.uid, *const ag = a.agent, *const tr = a.traj;
        char* const out = reinterpret_cast<char*>(rec);
        int32_t* const pos = pidx;
        auto scatter = [&](auto with_traj) {
            constexpr int64_t kAhead = 96;
            for (int64_t i = lo; i < hi; ++i) {
                if (i + kAhead < hi) __builtin_prefetch(out + (int64_t)16 * cur[ud[i + kAhead]], 1);
                int32_t sbits;
                memcpy(&sbits, &sc[i], 4);
                const __m128i r = _mm_setr_epi32(sbits, ag[i], with_traj ? tr[i] : 0, 0);
                const int32_t q = cur[ud[i]]++;
                _mm_storeu_si128(reinterpret_cast<__m128i*>(out + (int64_t)16 * q), r);
                pos[i] = q;  // where row i went: the write-back reads its advantage from there
            }
        };
        if (by_traj)
            scatter(std::true_type{});
        else
            scatter(std::false_type{});
    });
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        for (int64_t i = lo; i < hi; ++i) {
            ps[i] = rec[i].score;
            pag[i] = rec[i].agent;
            if (by_traj) ptr[i] = rec[i].traj;
        }
    });
    // the uids that begin in a thread's share of the partitioned rows are that thread's
    auto first_uid = [&](int64_t row) { return (int64_t)(std::lower_bound(off, off + U, row) - off); };
    auto uid_split = [&](int tid, int nth) { return tid >= nth ? U : tid == 0 ? 0 : first_uid(n * tid / nth); };
    // ---- every trajectory in one uid: each row writes its uid as its trajectory's owner, then,
    // ---- once all have, each row reads the owner back. A trajectory in two uids keeps one of
    // ---- them (threads may race on it: the atomics make that defined), so some of its rows read
    // ---- another uid than their own. No branch a row and no compare-and-swap a trajectory ----
    if (by_traj) {
        std::fill(owner, owner + T, -1);
        std::vector<char> incons(nt, 0);
        // (locals: through the closure's references the compiler would reload each array's
        // address at every row, as the atomics may touch any memory)
        auto rows_of = [&](int tid, int nth, auto per_row) {
            const int64_t* const of = off;
            const int32_t* const tr = ptr;
            int32_t* const ow = owner;
            const int64_t u1 = uid_split(tid + 1, nth);
            for (int64_t u = uid_split(tid, nth); u < u1; ++u)
                for (int64_t i = of[u], e = of[u + 1]; i < e; ++i) per_row(&ow[tr[i]], (int32_t)u);
        };
        run_parallel(nt, [&](int tid, int nth) {
            rows_of(tid, nth, [](int32_t* o, int32_t u) { __atomic_store_n(o, u, __ATOMIC_RELAXED); });
        });
        run_parallel(nt, [&](int tid, int nth) {
            bool x = false;
            rows_of(tid, nth, [&x](int32_t* o, int32_t u) { x |= __atomic_load_n(o, __ATOMIC_RELAXED) != u; });
            incons[tid] = x;
        });
        if (std::find(incons.begin(), incons.end(), 1) != incons.end()) return false;
    }
    // ---- everything is valid: the per-run kernels, then the advantages to their rows ----
    AdvArgs p = a;
    p.scores = ps;
    p.agent = pag;
    p.traj = by_traj ? ptr : nullptr;
    p.uid = nullptr;  // the runs' kernels take their uid as an argument
    p.adv = padv;
    if (!a.diag) {
        // The sorted path's loop over the runs (two at a time, the kernels inlined), from a run-start
        // map of the partition; each run's operations are those of the per-run kernel below, so are
        // its bits. (Without diagnostics: the loop would read the uids of the partition for them.)
        memset(map, 0, sizeof(uint64_t) * (size_t)words);
        for (int64_t u = 0; u < U; ++u)
            if (off[u] < off[u + 1]) map[off[u] >> 6] |= 1ull << (off[u] & 63);
        const uint8_t* starts = reinterpret_cast<const uint8_t*>(map);
        run_parallel(nt, [&](int tid, int nth) {
            RunScratch w(p);
            isa.sorted_runs(p, n * tid / nth, n * (tid + 1) / nth, starts, w, &normalise_run, by_traj ? owner : nullptr);
        });
    } else {  // a kernel call a uid, which names it in the diagnostics (and the uids without rows)
        const RunFn fn = isa.run_fn(K) ? isa.run_fn(K) : &normalise_run;
        run_parallel(nt, [&](int tid, int nth) {
            RunScratch w(p);
            const int64_t u1 = uid_split(tid + 1, nth);  // (a binary search: once, not a uid)
            for (int64_t u = uid_split(tid, nth); u < u1; ++u) {
                if (off[u] == off[u + 1]) {
                    for (int64_t k = 0; k < K; ++k) write_diag(a, u, k, 0, 0, 0, 0, 0, 0);
                    continue;
                }
                fn(p, off[u], off[u + 1], (int32_t)u, w, by_traj ? owner : nullptr);
            }
        });
    }
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        // Row i's advantage read from where the scatter put it: each thread writes its own rows,
        // in order. (Written from the partitioned side, every line of the output took stores from
        // both threads and moved between their caches: bench/README.md, issue 17's fifth session.)
        float* const adv = a.adv;
        const int32_t* const at = pidx;
        const float* const src = padv;
        for (int64_t i = lo; i < hi; ++i) adv[i] = src[at[i]];
    });
    return true;
}

int32_t advantage_cpu(const drmas_norm_config& cfg, int64_t n, const float* scores,
                      const int32_t* uid, const int32_t* traj, const int32_t* agent,
                      int64_t num_uids, int64_t num_trajs, int64_t num_agents, float* advantages,
                      double* diagnostics, bool trusted) {
    const char* fn = trusted ? "drmas_advantage_trusted_f32" : "drmas_advantage_f32";
    const int64_t U = num_uids, T = num_trajs, K = num_agents;
    AdvArgs a{&cfg, n, scores, uid, traj, agent, U, T, K, advantages, diagnostics};
    const AdvIsa& isa = adv_isa();

    // ---- trusted entry, sorted rows: each block checked, then its runs normalised while hot ----
    if (trusted && n > 0 && advantage_trusted_sorted(a, isa)) return DRMAS_OK;

    // ---- sorted rows (as rollouts write them): one cheap check, then the per-run kernels ----
    if (n > 0 && !trusted) {
        const int nt = threads_for(n);
        // Threads split the rows at multiples of 64, so that each writes whole words of the
        // run-start map (1 bit a row, written by the check, read by the kernels: 1/128 of the
        // rows' bytes, where reading the uids again would be 1/4).
        auto split = [n](int tid, int nth) { return tid >= nth ? n : (n * tid / nth) & ~(int64_t)63; };
        const int64_t words = (n + 63) / 64;
        Workspace ws(Workspace::bytes_for<uint64_t>(words));
        uint64_t* map = ws.take<uint64_t>(words);  // every byte below n / 8 is written
        if (!map) return fail(DRMAS_ERR_ALLOC, "%s: cannot allocate %lld bytes of scratch", fn, (long long)(words * 8));
        map[words - 1] = 0;                        // the bits past n stay 0
        uint8_t* starts = reinterpret_cast<uint8_t*>(map);
        std::vector<char> sorted(nt, 0);
        run_parallel(nt, [&](int tid, int nth) {
            sorted[tid] = isa.sorted_and_valid(a, split(tid, nth), split(tid + 1, nth), starts);
        });
        if (std::find(sorted.begin(), sorted.end(), 0) == sorted.end()) {
            run_parallel(nt, [&](int tid, int nth) {
                RunScratch w(a);
                isa.sorted_runs(a, split(tid, nth), split(tid + 1, nth), starts, w, &normalise_run, nullptr);
            });
            return DRMAS_OK;
        }
        // Not sorted, or a bad row somewhere: the full validation below tells which.
    }

    // ---- any other order: partitioned by uid, then the per-run kernels ----
    if (n > 0 && advantage_partitioned(a, isa)) return DRMAS_OK;

    // ---- validation (parallel): ranges, finiteness, trajectory owners, uid runs: for the rows
    // ---- that advantage_partitioned declined (a bad row, for its message; huge id spaces) ----
    const int nt = traj ? threads_with_tables(n, T) : threads_for(n);  // one map of T owners a thread
    std::vector<std::vector<int32_t>> own(traj ? nt : 0);
    std::vector<Problem> problems(nt);
    std::vector<char> inconsistent(nt, 0);
    std::vector<std::vector<Run>> runs(nt);
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t b = n * tid / nth, e = n * (tid + 1) / nth;
        // Thread-local lists, moved out at the end: vectors updated in place side by side in
        // `runs` would share a cache line between the threads on every push_back.
        std::vector<Run> r;
        r.reserve((e - b) / 16 + 1);
        bool incons = false;
        if (traj) {
            std::vector<int32_t> m(T, -1);  // first touched by its own thread
            problems[tid] = validate_rows<true>(a, b, e, m.data(), r, incons);
            own[tid] = std::move(m);
        } else {
            problems[tid] = validate_rows<false>(a, b, e, nullptr, r, incons);
        }
        inconsistent[tid] = incons;
        runs[tid] = std::move(r);
    });
    std::vector<int32_t> owner;
    if (traj) {
        if (nt == 1) {
            owner = std::move(own[0]);
        } else {
            owner.assign(T, -1);
            if (!merge_owners(own, T, owner.data())) inconsistent[0] = 1;
        }
        own.clear();
    }
    int64_t bad = -1;
    int kind = 0;
    for (const Problem& p : problems)
        if (p.row >= 0) {
            bad = p.row;
            kind = p.kind;
            break;
        }
    const bool any_inconsistent = std::find(inconsistent.begin(), inconsistent.end(), 1) != inconsistent.end();
    if (any_inconsistent || (bad >= 0 && traj)) {
        // Find the first row whose trajectory was first seen in another uid, scanning in
        // order so that the message does not depend on the thread schedule.
        const int64_t limit = bad >= 0 ? bad : n;
        std::fill(owner.begin(), owner.end(), -1);
        std::vector<int64_t> first_row(T, -1);
        for (int64_t i = 0; i < limit; ++i) {
            const int32_t t = traj[i];
            if (owner[t] == -1) {
                owner[t] = uid[i];
                first_row[t] = i;
            } else if (owner[t] != uid[i]) {
                return fail(DRMAS_ERR_INCONSISTENT,
                            "%s: traj[%lld] = %d has uid %d but its row %lld has uid %d (a trajectory must lie in one uid)",
                            fn, (long long)i, t, uid[i], (long long)first_row[t], owner[t]);
            }
        }
    }
    if (bad >= 0) {
        const long long i = (long long)bad;
        switch (kind) {
            case 1: return fail(DRMAS_ERR_RANGE, "%s: uid[%lld] = %d is outside [0, %lld)", fn, i, uid[bad], (long long)U);
            case 2: return fail(DRMAS_ERR_RANGE, "%s: traj[%lld] = %d is outside [0, %lld)", fn, i, traj[bad], (long long)T);
            case 3: return fail(DRMAS_ERR_RANGE, "%s: agent[%lld] = %d is outside [0, %lld)", fn, i, agent[bad], (long long)K);
            default: return fail(DRMAS_ERR_NONFINITE, "%s: scores[%lld] is not finite (%s)", fn, i, finite_name(scores[bad]));
        }
    }

    // ---- merge the runs of all chunks and check that each uid forms one run ----
    std::vector<Run> all;
    all.reserve(n / 16 + nt);
    for (const auto& r : runs)
        for (const Run& x : r)
            if (all.empty() || all.back().uid != x.uid) all.push_back(x);
    bool contiguous = true;
    {
        std::vector<char> seen(U, 0);
        for (const Run& x : all) {
            if (seen[x.uid]) {
                contiguous = false;
                break;
            }
            seen[x.uid] = 1;
        }
        // uids without rows still get their (empty) diagnostics
        if (diagnostics && contiguous)
            for (int64_t u = 0; u < U; ++u)
                if (!seen[u])
                    for (int64_t k = 0; k < K; ++k) write_diag(a, u, k, 0, 0, 0, 0, 0, 0);
    }
    if (!contiguous) {
        normalise_general(a, owner);
        return DRMAS_OK;
    }

    // ---- blocked path: runs split across threads by row count ----
    const int64_t R = (int64_t)all.size();
    const int nt2 = threads_for(n);
    run_parallel(nt2, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        // A thread takes the runs that begin in its row range.
        int64_t r0 = std::lower_bound(all.begin(), all.end(), lo, [](const Run& x, int64_t v) { return x.begin < v; }) - all.begin();
        int64_t r1 = std::lower_bound(all.begin(), all.end(), hi, [](const Run& x, int64_t v) { return x.begin < v; }) - all.begin();
        RunScratch w(a);
        const RunFn fn = isa.run_fn(K) ? isa.run_fn(K) : &normalise_run;
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t b = all[r].begin, e = r + 1 < R ? all[r + 1].begin : n;
            fn(a, b, e, all[r].uid, w, owner.data());
        }
    });
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 3. broadcast

int32_t check_offsets(const char* fn, int64_t num_rows, const int64_t* off, int64_t num_tokens) {
    if (off[0] < 0)
        return fail(DRMAS_ERR_RANGE, "%s: row_offsets[0] = %lld is negative", fn, (long long)off[0]);
    for (int64_t r = 0; r < num_rows; ++r)
        if (off[r + 1] < off[r])
            return fail(DRMAS_ERR_RANGE, "%s: row_offsets[%lld] = %lld < row_offsets[%lld] = %lld (offsets must not decrease)",
                        fn, (long long)r + 1, (long long)off[r + 1], (long long)r, (long long)off[r]);
    if (off[num_rows] > num_tokens)
        return fail(DRMAS_ERR_RANGE, "%s: row_offsets[%lld] = %lld is past num_tokens = %lld", fn,
                    (long long)num_rows, (long long)off[num_rows], (long long)num_tokens);
    return DRMAS_OK;
}

int32_t broadcast_rows_cpu(int64_t num_rows, const float* row_values, const int64_t* off,
                           int64_t num_tokens, float* out) {
    if (int32_t st = check_offsets("drmas_broadcast_rows_f32", num_rows, off, num_tokens)) return st;
    std::fill(out, out + off[0], 0.0f);
    for (int64_t r = 0; r < num_rows; ++r) std::fill(out + off[r], out + off[r + 1], row_values[r]);
    std::fill(out + off[num_rows], out + num_tokens, 0.0f);
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 4. fused clipped loss

// The loss of the rows' tokens inside the window [w0, w1): each row clamped to the window, its
// per_row_mean weight from its whole extent. logp[t - lp_base]; adv[t] is token t's advantage, or
// with adv_per_row adv[r] is row r's; grad[t - g_base] is written for the window's tokens that rows
// own. The threads split the window's row tokens, a row going to the thread that holds its first
// (clamped) token, and their partial sums are added in thread order: with the window [off[0],
// off[num_rows]) this is clipped_loss_cpu, and drmas_lmhead_chunk_f32 with one chunk of all tokens
// adds the same numbers in the same order. Each row's tokens go through the vectorised loop of
// cpu_loss_kernels.inc.
static void loss_window(const drmas_loss_config& c, int64_t num_rows, const int64_t* off, int64_t w0, int64_t w1,
                        const float* logp, int64_t lp_base, const float* old_logp, const float* adv, bool adv_per_row,
                        const float* ref, const uint8_t* mask, float* grad, int64_t g_base, double* sums) {
    const bool per_row_mean = c.per_row_mean != 0;
    const double inv_norm = 1.0 / c.normalizer;
    const LossIsa& isa = loss_isa();
    auto cb = [&](int64_t r) { return std::min(std::max(off[r], w0), w1); };  // clamped row begin
    const int64_t t0 = cb(0), span = cb(num_rows) - t0;
    const int nt = threads_for(span);
    std::vector<double> partial((size_t)nt * DRMAS_LOSS_SUMS, 0.0);
    run_parallel(nt, [&](int tid, int nth) {
        // rows split by token count, so that threads get equal work
        const int64_t lo = t0 + span * tid / nth, hi = t0 + span * (tid + 1) / nth;
        // a row belongs to the thread whose token range holds its first token
        auto first_at = [&](int64_t v) {  // first row whose clamped begin is >= v (clamped begins never decrease)
            int64_t a = 0, b = num_rows;
            while (a < b) {
                const int64_t m = a + (b - a) / 2;
                if (cb(m) < v) a = m + 1; else b = m;
            }
            return a;
        };
        const int64_t r0 = tid == 0 ? 0 : first_at(lo);
        const int64_t r1 = tid == nth - 1 ? num_rows : first_at(hi);
        double acc[DRMAS_LOSS_SUMS] = {0};
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t b = cb(r), e = std::min(std::max(off[r + 1], w0), w1);
            if (e <= b) continue;  // no token in the window (an empty row would add exact zeros)
            double w = inv_norm;
            if (per_row_mean) {
                int64_t nv = 0;
                if (mask) {
                    for (int64_t t = off[r]; t < off[r + 1]; ++t) nv += mask[t] != 0;
                } else {
                    nv = off[r + 1] - off[r];
                }
                w = nv > 0 ? inv_norm / (double)nv : 0.0;
            }
            const LossRow row{&c,
                              e - b,
                              logp + (b - lp_base),
                              old_logp + b,
                              adv_per_row ? nullptr : adv + b,
                              adv_per_row ? adv[r] : 0.0f,
                              ref ? ref + b : nullptr,
                              mask ? mask + b : nullptr,
                              grad + (b - g_base),
                              (float)w};
            const LossRowSums rs = isa.row(row);
            acc[DRMAS_LOSS_LOSS] += w * rs.loss;
            acc[DRMAS_LOSS_PG_LOSS] += w * rs.pg;
            acc[DRMAS_LOSS_KL_LOSS] += w * rs.kl;
            acc[DRMAS_LOSS_TOKENS] += (double)rs.tokens;
            acc[DRMAS_LOSS_CLIPPED] += (double)rs.clipped;
            acc[DRMAS_LOSS_CLIPPED_LOWER] += (double)rs.lower;
            acc[DRMAS_LOSS_PPO_KL] += rs.ppo;
            acc[DRMAS_LOSS_KL] += rs.kl;
        }
        for (int j = 0; j < DRMAS_LOSS_SUMS; ++j) partial[(size_t)tid * DRMAS_LOSS_SUMS + j] = acc[j];
    });
    for (int j = 0; j < DRMAS_LOSS_SUMS; ++j) {
        double s = 0;
        for (int t = 0; t < nt; ++t) s += partial[(size_t)t * DRMAS_LOSS_SUMS + j];  // fixed order
        sums[j] = s;
    }
}

int32_t clipped_loss_cpu(const char* fn, const drmas_loss_config& c, int64_t num_rows, const int64_t* off,
                         int64_t num_tokens, const float* logp, const float* old_logp,
                         const float* adv, const float* ref, const uint8_t* mask, float* grad,
                         double* sums, bool per_row) {
    if (int32_t st = check_offsets(fn, num_rows, off, num_tokens)) return st;
    loss_window(c, num_rows, off, off[0], off[num_rows], logp, 0, old_logp, adv, per_row, ref, mask, grad, 0, sums);
    std::fill(grad, grad + off[0], 0.0f);
    std::fill(grad + off[num_rows], grad + num_tokens, 0.0f);
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 5. fused LM head

namespace {

int32_t threads_for_logits(int64_t tokens, int64_t vocab) {
    const int64_t work = tokens * vocab;  // callers bound tokens x vocab by the size of the logits
    int64_t t = std::min<int64_t>(cpu_threads(), std::max<int64_t>(1, work / (1 << 16)));
    return (int32_t)std::max<int64_t>(1, std::min<int64_t>(t, tokens));
}

// Statistics of tokens [0, n) of logits (rows of V) where valid(t); the first non-finite logit
// (token, index) in token order, or -1.
template <class Valid>
void all_row_stats(int64_t n, int64_t V, const float* logits, Valid valid, std::vector<RowStats>& out, int64_t* bad_t,
                   int64_t* bad_v) {
    out.assign((size_t)n, RowStats{0, 0, -1});
    const LmheadIsa& isa = lmhead_isa();
    const int nt = threads_for_logits(n, V);
    std::vector<int64_t> first((size_t)nt, -1);
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        for (int64_t t = lo; t < hi; ++t) {
            if (!valid(t)) continue;
            out[(size_t)t] = isa.row_stats(logits + t * V, V);
            if (out[(size_t)t].bad >= 0) {
                first[(size_t)tid] = t;
                return;
            }
        }
    });
    *bad_t = -1;
    *bad_v = -1;
    for (int64_t f : first)
        if (f >= 0) {  // threads hold increasing token ranges: the first one found is the first
            *bad_t = f;
            *bad_v = out[(size_t)f].bad;
            return;
        }
}

}  // namespace

int32_t lmhead_logprobs_cpu(int64_t n, int64_t V, const float* logits, const int64_t* targets, float* logp,
                            float* entropy) {
    const char* fn = "drmas_lmhead_logprobs_f32";
    for (int64_t t = 0; t < n; ++t)
        if (targets[t] < 0 || targets[t] >= V)
            return fail(DRMAS_ERR_RANGE, "%s: targets[%lld] = %lld is outside the vocabulary [0, %lld)", fn, (long long)t,
                        (long long)targets[t], (long long)V);
    std::vector<RowStats> st;
    int64_t bt, bv;
    all_row_stats(n, V, logits, [](int64_t) { return true; }, st, &bt, &bv);
    if (bt >= 0)
        return fail(DRMAS_ERR_NONFINITE, "%s: logits[%lld][%lld] (token %lld, vocabulary index %lld) is %s", fn, (long long)bt,
                    (long long)bv, (long long)bt, (long long)bv, finite_name(logits[bt * V + bv]));
    for (int64_t t = 0; t < n; ++t) {
        logp[t] = logits[t * V + targets[t]] - st[(size_t)t].lse;
        if (entropy) entropy[t] = st[(size_t)t].entropy;
    }
    return DRMAS_OK;
}

int32_t lmhead_chunk_cpu(const drmas_lmhead_config& c, int64_t num_rows, const int64_t* off, int64_t num_tokens,
                         int64_t c0, int64_t n, int64_t V, float* logits, const int64_t* targets, const float* old_logp,
                         const float* adv, const float* ref, const uint8_t* mask, float* logp_out, float* ent_out,
                         double* sums) {
    const char* fn = "drmas_lmhead_chunk_f32";
    if (int32_t st = check_offsets(fn, num_rows, off, num_tokens)) return st;
    // validity of the chunk's tokens: owned by a row (rows are back to back from off[0]) and not masked
    std::vector<uint8_t> valid((size_t)n);
    for (int64_t i = 0; i < n; ++i) {
        const int64_t t = c0 + i;
        valid[(size_t)i] = t >= off[0] && t < off[num_rows] && (!mask || mask[t]);
    }
    for (int64_t i = 0; i < n; ++i)
        if (valid[(size_t)i] && (targets[c0 + i] < 0 || targets[c0 + i] >= V))
            return fail(DRMAS_ERR_RANGE, "%s: targets[%lld] = %lld (a valid token of the chunk) is outside the vocabulary [0, %lld)",
                        fn, (long long)(c0 + i), (long long)targets[c0 + i], (long long)V);
    std::vector<RowStats> st;
    int64_t bt, bv;
    all_row_stats(n, V, logits, [&](int64_t i) { return valid[(size_t)i] != 0; }, st, &bt, &bv);
    if (bt >= 0)
        return fail(DRMAS_ERR_NONFINITE, "%s: logits[%lld][%lld] (token %lld, vocabulary index %lld) is %s", fn, (long long)bt,
                    (long long)bv, (long long)(c0 + bt), (long long)bv, finite_name(logits[bt * V + bv]));
    // everything is valid from here on: nothing below fails
    std::vector<float> lp((size_t)n, 0.0f), g((size_t)n, 0.0f);
    for (int64_t i = 0; i < n; ++i)
        if (valid[(size_t)i]) lp[(size_t)i] = logits[i * V + targets[c0 + i]] - st[(size_t)i].lse;
    const drmas_loss_config lc{c.clip_low, c.clip_high, c.dual_clip, c.kl_coef, c.normalizer, c.kl_type, c.per_row_mean};
    double ls[DRMAS_LOSS_SUMS];
    loss_window(lc, num_rows, off, c0, c0 + n, lp.data(), c0, old_logp, adv, true, ref, mask, g.data(), c0, ls);
    const float ew = (float)c.entropy_coef;
    const LmheadIsa& isa = lmhead_isa();
    const int nt = threads_for_logits(n, V);
    run_parallel(nt, [&](int tid, int nth) {
        const int64_t lo = n * tid / nth, hi = n * (tid + 1) / nth;
        for (int64_t i = lo; i < hi; ++i) {
            float* z = logits + i * V;
            if (!valid[(size_t)i]) {
                std::fill(z, z + V, 0.0f);
                continue;
            }
            const float gi = g[(size_t)i];
            isa.dz_row(z, V, st[(size_t)i].lse, st[(size_t)i].entropy, gi, ew);
            // the target's g after dz_row's flush: flushed too (a tiny g, or g cancelling -g p)
            float& zt = z[targets[c0 + i]];
            zt += gi;
            if (fabsf(zt) < FLT_MIN) zt = 0.0f;
        }
    });
    double ent = 0;
    for (int64_t i = 0; i < n; ++i)
        if (valid[(size_t)i]) ent += (double)st[(size_t)i].entropy;
    for (int j = 0; j < DRMAS_LOSS_SUMS; ++j) sums[j] = ls[j];
    sums[DRMAS_LMHEAD_ENTROPY] = ent;
    if (logp_out) std::copy(lp.begin(), lp.end(), logp_out);
    if (ent_out)
        for (int64_t i = 0; i < n; ++i) ent_out[i] = valid[(size_t)i] ? st[(size_t)i].entropy : 0.0f;
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 6. decoding attention

// The attended slots of one row as runs [runs[2i], runs[2i + 1]) in increasing order: the slots j <
// slots with mask[j] != 0 (mask NULL: all of them) and write, always. runs: slots + 1 ints at most
// (alternate slots). Whole words of eight mask bytes at a time through the long runs of padding and
// of attended slots that rows have.
static int64_t decode_runs(const uint8_t* mask, int64_t slots, int64_t write, int32_t* runs) {
    if (!mask) {
        runs[0] = 0;
        runs[1] = (int32_t)slots;
        return 1;
    }
    const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
    int64_t n = 0, j = 0;
    while (j < slots) {
        uint64_t w;
        while (j + 8 <= slots && (uint64_t)(write - j) >= 8 && (memcpy(&w, mask + j, 8), w == 0)) j += 8;
        while (j < slots && j != write && mask[j] == 0) ++j;
        if (j == slots) break;
        const int64_t b = j;
        while (j + 8 <= slots && (memcpy(&w, mask + j, 8), ((w - ones) & ~w & highs) == 0)) j += 8;  // no zero byte
        while (j < slots && (j == write || mask[j] != 0)) ++j;
        runs[2 * n] = (int32_t)b;
        runs[2 * n + 1] = (int32_t)j;
        ++n;
    }
    return n;
}

// Threads for a call of `items` items (4 flops a query head, slot and element: the scores and the
// weighted sum). Two threads from 2 MFLOP a call (~0.1 ms of one thread at the speed the caches come
// from memory): the second is AttnHelper, awake through a decoding run, which joins without the
// caller waiting for it. More than two from 4 MFLOP a thread, on OpenMP's team: there the caller
// waits at the end for every thread, and waking OpenMP's sleeping threads (OMP_WAIT_POLICY=PASSIVE)
// costs about what a thread saves below that (bench_decode, same process, taking turns:
// bench/README.md, "Rollout engine").
static int decode_threads(int64_t items, int64_t group, int64_t slots, int64_t d) {
    const double flops = 4.0 * (double)items * (double)group * (double)slots * (double)d;  // in double: no overflow
    const double many = std::min<double>({flops / (double)(1 << 22), (double)cpu_threads(), (double)items});
    if (many >= 3.0) return (int)many;
    return flops >= (double)(1 << 21) && cpu_threads() >= 2 && items >= 2 ? 2 : 1;
}

namespace {

// The items of one decoding-attention call that two threads share: the caller takes them from the
// front, AttnHelper's thread from the back, each claim one compare-and-swap of [lo, hi) packed in
// one word, so that each thread's items are consecutive (it reads the next one's cache ahead).
struct AttnJob {
    std::atomic<uint64_t> range;  // lo << 32 | hi
    void (*run)(void* ctx, int64_t item, int64_t next, int side);  // next: -1 if none is known; side 0 caller, 1 helper
    void* ctx;
};

// One thread that helps the caller with a decoding-attention call that takes two threads. Why not
// OpenMP's team: on the 2-core VM waking a sleeping OpenMP thread (OMP_WAIT_POLICY=PASSIVE, which
// the launcher sets so that idle threads leave the cores to OpenBLAS's) took about as long as a
// batch-64 call's work, and the caller then waited for it at the team's barrier, so two threads
// were no faster than one; with ACTIVE, OpenMP's spinning threads took the cores from OpenBLAS's
// matrix products (5x slower). This thread stays awake for kSpin after each call, yielding its core
// to whatever else runs (a decoding step's matrix products come between its attention calls, a
// millisecond or two apart at batch 64), then sleeps; and the caller never waits for it to arrive:
// it takes items until none is left and then waits only for the item the helper is working on.
// One call at a time uses it (a concurrent caller runs its items alone); in a forked child, whose
// copy has no such thread, it is not used.
class AttnHelper {
public:
    static constexpr std::chrono::microseconds kSpin{3000};

    // The helper, or null when it cannot be used: in a forked child, or if its thread could not start.
    static AttnHelper* get() {
        static AttnHelper* h = make();  // never destroyed: its thread runs until the process ends
        return h && !forked().load(std::memory_order_relaxed) ? h : nullptr;
    }

    // Runs every item of `job`: the caller's share, and the helper's if it comes. False (nothing run)
    // when another call is using the helper.
    bool run(AttnJob& job) {
        std::unique_lock<std::mutex> caller(caller_, std::try_to_lock);
        if (!caller.owns_lock()) return false;
        {
            std::lock_guard<std::mutex> lk(m_);
            job_.store(&job, std::memory_order_seq_cst);
            gen_.fetch_add(1, std::memory_order_seq_cst);
            if (sleeping_) cv_.notify_one();
        }
        take(job, 0);
        // No new helper may enter once job_ is null; one that entered before has its users_ count
        // up (seq_cst on both sides: it sees null, or this sees its count) and finishes its item.
        job_.store(nullptr, std::memory_order_seq_cst);
        while (users_.load(std::memory_order_seq_cst) != 0) sched_yield();
        return true;
    }

private:
    static std::atomic<bool>& forked() {
        static std::atomic<bool> f{false};
        return f;
    }
    static AttnHelper* make() {
        pthread_atfork(nullptr, nullptr, [] { forked().store(true, std::memory_order_relaxed); });
        AttnHelper* h = new AttnHelper();
        try {
            std::thread([h] {
                pthread_setname_np(pthread_self(), "drmas-attn");
                h->loop();
            }).detach();
        } catch (...) {  // no thread (resource limits): callers run alone
            delete h;
            return nullptr;
        }
        return h;
    }

    // side 0 takes from the front, side 1 from the back, until no item is left
    static void take(AttnJob& job, int side) {
        for (;;) {
            uint64_t r = job.range.load(std::memory_order_relaxed);
            const int64_t lo = (int64_t)(r >> 32), hi = (int64_t)(uint32_t)r;
            if (lo >= hi) return;
            const uint64_t next = side == 0 ? ((uint64_t)(lo + 1) << 32) | (uint64_t)hi : ((uint64_t)lo << 32) | (uint64_t)(hi - 1);
            if (!job.range.compare_exchange_weak(r, next, std::memory_order_relaxed)) continue;
            if (side == 0) job.run(job.ctx, lo, lo + 1 < hi ? lo + 1 : -1, 0);
            else job.run(job.ctx, hi - 1, hi - 2 >= lo ? hi - 2 : -1, 1);
        }
    }

    void loop() {
        uint64_t seen = 0;
        for (;;) {
            const auto since = std::chrono::steady_clock::now();
            for (uint32_t spins = 1; gen_.load(std::memory_order_acquire) == seen; ++spins) {
                if (spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
                    __builtin_ia32_pause();
#endif
                    continue;
                }
                sched_yield();
                if (spins % 64 == 0 && std::chrono::steady_clock::now() - since > kSpin) {
                    std::unique_lock<std::mutex> lk(m_);
                    sleeping_ = true;
                    cv_.wait(lk, [&] { return gen_.load(std::memory_order_acquire) != seen; });
                    sleeping_ = false;
                }
            }
            seen = gen_.load(std::memory_order_acquire);
            users_.fetch_add(1, std::memory_order_seq_cst);
            if (AttnJob* j = job_.load(std::memory_order_seq_cst)) take(*j, 1);
            users_.fetch_sub(1, std::memory_order_seq_cst);
        }
    }

    std::mutex caller_;  // one call at a time
    std::mutex m_;       // sleeping_, and the wake-up
    std::condition_variable cv_;
    bool sleeping_ = false;
    std::atomic<AttnJob*> job_{nullptr};
    std::atomic<uint64_t> gen_{0};
    std::atomic<int> users_{0};
};

// A thread's scratch for decode_head: on the stack up to a few thousand slots (no allocation a call).
struct DecodeScratch {
    alignas(64) float small_f[4096];
    int32_t small_i[2048];
    std::unique_ptr<float[]> big_f;
    std::unique_ptr<int32_t[]> big_i;
    float* f;
    int32_t* i;
    int64_t runs_row = -1, nruns = 0;  // the runs of attended slots in i are row runs_row's
    DecodeScratch(int64_t nf, int64_t ni)
        : big_f(nf > 4096 ? new float[(size_t)nf] : nullptr), big_i(ni > 2048 ? new int32_t[(size_t)ni] : nullptr),
          f(big_f ? big_f.get() : small_f), i(big_i ? big_i.get() : small_i) {}
};

}  // namespace

// The arguments were checked by the entry point (api.cpp). Each (row, kv head) is one item: it owns
// its query heads, its new key and value and its cache, so items run on any thread in any order
// with the same result. The runs of attended slots are made once a row on each thread.
int32_t decode_attention_cpu(int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, float* qkv, int64_t qkv_stride,
                             const float* q_norm, const float* k_norm, double eps, const float* cos, const float* sin,
                             float* k_cache, float* v_cache, int64_t cache_row_stride, int64_t capacity, int64_t write_slot,
                             int64_t slots, const uint8_t* mask, double scale, float* out) {
    const DecodeIsa& isa = decode_isa();
    const int64_t group = heads / kv_heads, items = rows * kv_heads;
    const int nt = decode_threads(items, group, slots, d);
    const int64_t nf = decode_scratch(group, slots, d), ni = slots + 1;
    // item `it` on a thread with scratch `sc`; `next` (-1: none) is the item it takes after, whose
    // cache decode_head reads ahead
    auto item = [&](int64_t it, int64_t next, DecodeScratch& sc) {
        const int64_t r = it / kv_heads, g = it % kv_heads;
        if (r != sc.runs_row) {
            sc.nruns = decode_runs(mask ? mask + r * slots : nullptr, slots, write_slot, sc.i);
            sc.runs_row = r;
        }
        float* row = qkv + r * qkv_stride;
        DecodeHead h;
        h.q = row + g * group * d;
        h.k = row + (heads + g) * d;
        h.v = row + (heads + kv_heads + g) * d;
        h.q_norm = q_norm;
        h.k_norm = k_norm;
        h.eps = (float)eps;
        h.cos = cos + r * d;
        h.sin = sin + r * d;
        h.k_cache = k_cache + r * cache_row_stride + g * capacity * d;
        h.v_cache = v_cache + r * cache_row_stride + g * capacity * d;
        h.group = group;
        h.d = d;
        h.write = write_slot;
        h.slots = slots;
        h.capacity = capacity;
        h.mask = mask ? mask + r * slots : nullptr;
        h.runs = sc.i;
        h.nruns = sc.nruns;
        h.scale = (float)scale;
        h.out = out + r * heads * d + g * group * d;
        h.scratch = sc.f;
        h.next_k = h.next_v = nullptr;
        if (next >= 0) {
            const int64_t r1 = next / kv_heads, g1 = next % kv_heads;
            h.next_k = k_cache + r1 * cache_row_stride + g1 * capacity * d;
            h.next_v = v_cache + r1 * cache_row_stride + g1 * capacity * d;
        }
        isa.head(h);
    };
    if (nt == 2 && items < ((int64_t)1 << 31)) {  // (the claims pack [lo, hi) in 32 bits each)
        if (AttnHelper* helper = AttnHelper::get()) {
            struct Ctx {
                decltype(item)* fn;
                DecodeScratch* sc[2];
            };
            DecodeScratch caller(nf, ni), helped(nf, ni);
            Ctx ctx{&item, {&caller, &helped}};
            AttnJob job;
            job.range.store((uint64_t)items, std::memory_order_relaxed);  // [0, items)
            job.ctx = &ctx;
            job.run = [](void* c, int64_t it, int64_t next, int side) {
                Ctx& x = *(Ctx*)c;
                (*x.fn)(it, next, *x.sc[side]);
            };
            if (helper->run(job)) return DRMAS_OK;
        }
    }
    run_parallel(nt, [&](int tid, int n) {
        const int64_t b = items * tid / n, e = items * (tid + 1) / n;
        DecodeScratch sc(nf, ni);
        for (int64_t it = b; it < e; ++it) item(it, it + 1 < e ? it + 1 : -1, sc);
    });
    return DRMAS_OK;
}

// ---------------------------------------------------------------------------------------
// 7. a decoding step's other ops (CPU only): RMSNorm, SwiGLU, sampling

namespace {

// Threads for `rows` rows of `width` elements (threads_for's count, at most one per row) and the
// first row of thread tid of n: each row is one thread's, so no result depends on the thread count.
int step_threads(int64_t rows, int64_t width) {
    const double work = (double)rows * (double)width;  // in double: no overflow
    return (int)std::min<int64_t>(std::max<int64_t>(rows, 1), threads_for(work > 4e18 ? INT64_MAX : (int64_t)work));
}
int64_t first_row(int64_t rows, int tid, int n) { return rows / n * tid + rows % n * tid / n; }  // rows tid / n, no overflow

}  // namespace

// The arguments were checked by the entry point (api.cpp); nothing here can fail.
int32_t rms_norm_cpu(int64_t rows, int64_t hidden, float* x, int64_t x_stride, const float* residual, int64_t residual_stride,
                     const float* weight, double eps, float* out, int64_t out_stride) {
    const StepIsa& isa = step_isa();
    run_parallel(step_threads(rows, hidden), [&](int tid, int n) {
        for (int64_t r = first_row(rows, tid, n), e = first_row(rows, tid + 1, n); r < e; ++r)
            isa.rms_norm_row(x + r * x_stride, residual ? residual + r * residual_stride : nullptr, weight, hidden, eps,
                             out + r * out_stride);
    });
    return DRMAS_OK;
}

int32_t swiglu_cpu(int64_t rows, int64_t width, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                   float* out, int64_t out_stride) {
    const StepIsa& isa = step_isa();
    run_parallel(step_threads(rows, width), [&](int tid, int n) {
        for (int64_t r = first_row(rows, tid, n), e = first_row(rows, tid + 1, n); r < e; ++r)
            isa.swiglu_row(gate + r * gate_stride, up + r * up_stride, width, out + r * out_stride);
    });
    return DRMAS_OK;
}

namespace {

// One thread's scratch for sampling rows of V logits (NULL where the call's settings need none).
struct SampleScratch {
    float* scaled;     // V: the logits / temperature
    float* kth;        // V: top-k's heap (k of them) or copy for nth_element
    double* cdf;       // V: e^(s - m), then the CDF in place
    int32_t* order;    // V: top-p's candidates, the prefix of the order that it needs
};

// `count` T of scratch when needed, not zeroed (a std::vector writes every byte first: ~10% of a call
// at a 150K vocabulary), else none.
template <class T>
std::unique_ptr<T[]> scratch_of(bool needed, size_t count) {
    return std::unique_ptr<T[]>(needed ? new T[count] : nullptr);
}

// The first index of m in s (the first of equal maxima, as torch.argmax), 0 if m is not there (a row of NaN).
int64_t first_max(const float* s, int64_t V, float m) {
    for (int64_t j = 0; j < V; ++j)
        if (s[j] == m) return j;
    return 0;
}

// drmas_sample_f32 on one row of logits z with its uniform u (drmas.h §7 states the rules).
void sample_row(const StepIsa& isa, const float* z, int64_t V, double temperature, int64_t top_k, double top_p, double u,
                const SampleScratch& w, int64_t* token, float* logprob) {
    const bool greedy = temperature == 0.0;
    const bool scale = !greedy && temperature != 1.0;  // x / 1 is x: skip it, as Sampler.java does
    const StepMax mx = isa.scale_max_row(z, V, (float)temperature, scale ? w.scaled : nullptr);
    const float* s = scale ? w.scaled : z;
    if (mx.nan || mx.max == INFINITY || mx.max == -INFINITY) {
        // no distribution (log_softmax is NaN): the caller's NaN check reports it (Generator.Row.add)
        *token = first_max(s, V, mx.max);
        *logprob = __builtin_nanf("");
        return;
    }
    const double m = mx.max;
    if (greedy) {
        *token = first_max(s, V, mx.max);
        *logprob = (float)-log(isa.exp_row(s, V, m, nullptr));  // z[token] - m - log(sum) with z[token] = m
        return;
    }
    double* e = w.cdf;
    const double sum = isa.exp_row(s, V, m, e);  // every token's: the log-prob is before the filters
    if (top_k > 0 && top_k < V) {
        // the k-th largest with its duplicates counted (torch.topk's values); ties with it stay. For a
        // small k a min-heap of the k largest so far, in one pass (a value enters only when it beats the
        // least of them: rarely, for k << V), else nth_element
        float* h = w.kth;
        float kth;
        if (top_k <= 4096) {
            std::copy(s, s + top_k, h);
            std::make_heap(h, h + top_k, std::greater<float>());
            for (int64_t j = top_k; j < V; ++j)
                if (s[j] > h[0]) {
                    std::pop_heap(h, h + top_k, std::greater<float>());
                    h[top_k - 1] = s[j];
                    std::push_heap(h, h + top_k, std::greater<float>());
                }
            kth = h[0];
        } else {
            std::copy(s, s + V, h);
            std::nth_element(h, h + (top_k - 1), h + V, std::greater<float>());
            kth = h[top_k - 1];
        }
        for (int64_t j = 0; j < V; ++j)
            if (s[j] < kth) e[j] = 0.0;
    }
    if (top_p < 1.0) {
        // most likely first: scaled logit descending, equal logits by token index ascending (a total
        // order, so the result does not depend on how it is sorted; LibTorch's sort leaves ties
        // unspecified). The candidates are the kept tokens of positive probability (the others add no
        // mass and are never drawn), and only a prefix of the order holding top_p of their mass needs
        // sorting: a histogram of the mass over half-nat bins of max - s (each bin a range of the order)
        // finds one in a pass, with a margin for its own rounding; all candidates if it falls short.
        auto before = [s](int32_t a, int32_t b) { return s[a] > s[b] || (s[a] == s[b] && a < b); };
        constexpr int kBins = 1500;  // max - s < 750 for every candidate: e^-750 is 0 in fp64
        auto bin = [s, m](int64_t j) { return (int)std::min<double>(kBins - 1, (m - (double)s[j]) * 2.0); };
        double hist[kBins] = {};
        double zk = 0;  // the normaliser over the top-k set, in token order
        for (int64_t j = 0; j < V; ++j)
            if (e[j] > 0.0) {
                zk += e[j];
                hist[bin(j)] += e[j];
            }
        int limit = kBins - 1;
        double acc = 0;
        for (int b = 0; b < kBins; ++b)
            if ((acc += hist[b]) >= top_p * zk * (1 + 1e-6)) {
                limit = b;
                break;
            }
        int32_t* c = w.order;
        for (;;) {
            int64_t nc = 0;
            for (int64_t j = 0; j < V; ++j)
                if (e[j] > 0.0 && bin(j) <= limit) c[nc++] = (int32_t)j;
            std::sort(c, c + nc, before);
            double mass = 0;  // of the kept candidates before position i, renormalised over the top-k set
            int64_t cut = nc;  // the first position dropped
            for (int64_t i = 0; i < nc; ++i) {
                if (!(mass < top_p)) {
                    cut = i;
                    break;
                }
                mass += e[c[i]] / zk;
            }
            if (mass < top_p && limit < kBins - 1) {  // the prefix held less than top_p after all: every candidate
                limit = kBins - 1;
                continue;
            }
            if (cut > 0) {  // cut = 0 cannot be: the first token has 0 < top_p before it
                const int32_t last = c[cut - 1];
                for (int64_t j = 0; j < V; ++j)
                    if (e[j] > 0.0 && before(last, (int32_t)j)) e[j] = 0.0;
            }
            break;
        }
    }
    // the CDF over the kept tokens in token order (fp64), the first token whose CDF exceeds u times the
    // total: it has positive probability (its CDF rises past the target). u < 1 makes u total < total
    // in fp64, so there is one; should rounding ever put the target at the total, the guard takes the
    // token where the CDF reaches it (the last whose probability registers), as Sampler.java does
    double run = 0;
    for (int64_t j = 0; j < V; ++j) {
        run += e[j];
        e[j] = run;
    }
    const double total = e[V - 1], target = u * total;
    int64_t t = std::upper_bound(e, e + V, target) - e;
    if (t == V) t = std::lower_bound(e, e + V, total) - e;
    *token = t;
    *logprob = (float)(((double)s[t] - m) - log(sum));
}

}  // namespace

// The arguments were checked by the entry point (api.cpp); the uniforms are checked here, before any
// output is written. Scratch: per thread, what the call's settings need of four V-long arrays.
int32_t sample_cpu(int64_t rows, int64_t V, const float* logits, int64_t logits_stride, double temperature, int64_t top_k,
                   double top_p, const double* uniforms, int64_t* tokens, float* logprobs) {
    const char* fn = "drmas_sample_f32";
    if (uniforms)
        for (int64_t r = 0; r < rows; ++r)
            if (!(uniforms[r] >= 0.0 && uniforms[r] < 1.0))
                return fail(DRMAS_ERR_RANGE, "%s: uniforms[%lld] = %g (row %lld) is not in [0, 1)", fn, (long long)r, uniforms[r],
                            (long long)r);
    const bool greedy = temperature == 0.0;
    const int nt = step_threads(rows, V);
    const size_t n = (size_t)V;
    const auto scaled = scratch_of<float>(!greedy && temperature != 1.0, nt * n);
    const auto kth = scratch_of<float>(!greedy && top_k > 0 && top_k < V, nt * n);
    const auto cdf = scratch_of<double>(!greedy, nt * n);
    const auto order = scratch_of<int32_t>(!greedy && top_p < 1.0, nt * n);
    const StepIsa& isa = step_isa();
    run_parallel(nt, [&](int tid, int nth) {
        auto at = [&](const auto& v) { return v ? v.get() + (size_t)tid * n : nullptr; };
        const SampleScratch w{at(scaled), at(kth), at(cdf), at(order)};
        for (int64_t r = first_row(rows, tid, nth), e = first_row(rows, tid + 1, nth); r < e; ++r)
            sample_row(isa, logits + r * logits_stride, V, temperature, top_k, top_p, greedy ? 0.0 : uniforms[r], w, tokens + r,
                       logprobs + r);
    });
    return DRMAS_OK;
}

}  // namespace drmas

extern "C" {
int32_t drmas_set_num_threads(int32_t n) {
    drmas::g_threads = n > 0 ? n : 0;
    return drmas::cpu_threads();
}
int32_t drmas_get_num_threads(void) { return drmas::cpu_threads(); }
}
