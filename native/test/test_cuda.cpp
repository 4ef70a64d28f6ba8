// test_cuda.cpp — ctest harness for the CUDA backend: every operation runs on CUDA and on the
// CPU backend (the oracle) over awkward shapes and every config, and each element is compared
// with |cuda - cpu| <= atol + rtol |cpu|; bad data must give the CPU's status and message and
// leave guard-filled outputs untouched. Plain C++ over drmas.h only, so it builds without
// CUDA too, and links against the emulated backend (libdrmas_emu) as well. Without a usable
// device it exits 77 (ctest: skipped), or fails when DRMAS_REQUIRE_GPU=1 (a GPU check).
// DRMAS_TEST_SCALE=small shrinks the large cases (for the emulator, ~1000x slower than a GPU).
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "align_cases.h"  // the misaligned-pointer cases, shared with test_cpu.cpp
#include "drmas.h"

static int g_pass = 0, g_fail = 0;

// DRMAS_TEST_SCALE=small: the large cases at a size the SIMT emulator runs in seconds; the
// awkward shapes (1, primes, 65537, empty segments, one huge segment) stay as they are.
static bool g_small = false;
static int64_t scaled(int64_t full, int64_t small) { return g_small ? small : full; }

// One named check: counts a pass, or prints the failure and counts it.
static void check(bool ok, const char* fmt, ...) {
    if (ok) {
        ++g_pass;
        return;
    }
    ++g_fail;
    printf("FAIL ");
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
}

static std::string format(const char* fmt, ...) {
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return buf;
}

// ---- device memory through the library's own helpers -------------------------------

template <class T>
class DeviceArray {
public:
    explicit DeviceArray(size_t n) : n_(n) {
        if (n_ == 0) return;
        void* p = nullptr;
        if (drmas_cuda_malloc(n_ * sizeof(T), &p) != DRMAS_OK) {
            printf("FATAL drmas_cuda_malloc(%zu bytes): %s\n", n_ * sizeof(T), drmas_last_error());
            exit(1);
        }
        ptr_ = static_cast<T*>(p);
    }
    explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) { upload(host); }
    ~DeviceArray() {
        if (ptr_) drmas_cuda_free(ptr_);
    }
    DeviceArray(const DeviceArray&) = delete;
    DeviceArray& operator=(const DeviceArray&) = delete;

    T* get() const { return ptr_; }
    void upload(const std::vector<T>& host) {
        if (host.size() != n_) {
            printf("FATAL upload of %zu values into %zu\n", host.size(), n_);
            exit(1);
        }
        if (n_ && drmas_cuda_memcpy(ptr_, host.data(), n_ * sizeof(T), DRMAS_COPY_HOST_TO_DEVICE) != DRMAS_OK) {
            printf("FATAL drmas_cuda_memcpy to device: %s\n", drmas_last_error());
            exit(1);
        }
    }
    std::vector<T> download() const {
        std::vector<T> host(n_);
        if (n_ && drmas_cuda_memcpy(host.data(), ptr_, n_ * sizeof(T), DRMAS_COPY_DEVICE_TO_HOST) != DRMAS_OK) {
            printf("FATAL drmas_cuda_memcpy to host: %s\n", drmas_last_error());
            exit(1);
        }
        return host;
    }

private:
    size_t n_ = 0;
    T* ptr_ = nullptr;
};

// Waits for the queued work and checks that it ran (a kernel fault surfaces here).
static bool sync_ok(const std::string& what) {
    const int32_t st = drmas_cuda_synchronize(nullptr);
    check(st == DRMAS_OK, "%s: drmas_cuda_synchronize -> %d: %s", what.c_str(), st, drmas_last_error());
    return st == DRMAS_OK;
}

// ---- element-wise comparison ---------------------------------------------------------

// |cuda - cpu| <= atol + rtol |cpu| for every element (NaN matches NaN only); prints the
// first mismatches with their index and stops printing after ten.
template <class T>
static bool compare(const std::string& what, const std::vector<T>& cuda, const std::vector<T>& cpu,
                    double atol, double rtol) {
    if (cuda.size() != cpu.size()) {
        check(false, "%s: %zu values from CUDA, %zu from the CPU", what.c_str(), cuda.size(), cpu.size());
        return false;
    }
    int64_t bad = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
        const double g = (double)cuda[i], e = (double)cpu[i];
        const bool ok = (isnan(g) || isnan(e)) ? (isnan(g) && isnan(e)) : fabs(g - e) <= atol + rtol * fabs(e);
        if (ok) continue;
        if (bad < 10) printf("  mismatch %s[%zu]: cuda %.17g cpu %.17g (diff %.3g)\n", what.c_str(), i, g, e, g - e);
        ++bad;
    }
    check(bad == 0, "%s: %lld of %zu elements differ (atol %g, rtol %g)", what.c_str(), (long long)bad,
          cpu.size(), atol, rtol);
    return bad == 0;
}

template <class T>
static bool all_equal(const std::vector<T>& v, T value) {
    for (const T& x : v)
        if (!(x == value)) return false;
    return true;
}

// ---- 1. segment statistics -----------------------------------------------------------

struct StatsResult {
    int32_t status = -1;
    std::string message;
    std::vector<int64_t> count;
    std::vector<double> mean, m2, std;
};

static StatsResult stats_cpu(const std::vector<float>& v, const std::vector<int32_t>& ids, int64_t S,
                             int ddof, bool with_std) {
    StatsResult r;
    r.count.assign(S, 0);
    r.mean.assign(S, 0);
    r.m2.assign(S, 0);
    r.std.assign(S, 0);
    r.status = drmas_segment_stats_f32(DRMAS_DEVICE_CPU, (int64_t)v.size(), v.data(), ids.data(), S, ddof,
                                       r.count.data(), r.mean.data(), r.m2.data(),
                                       with_std ? r.std.data() : nullptr, nullptr);
    r.message = drmas_last_error();
    return r;
}

static StatsResult stats_cuda(const std::vector<float>& v, const std::vector<int32_t>& ids, int64_t S,
                              int ddof, bool with_std) {
    StatsResult r;
    DeviceArray<float> dv(v);
    DeviceArray<int32_t> di(ids);
    DeviceArray<int64_t> dc(S);
    DeviceArray<double> dm(S), d2(S), ds(S);
    ds.upload(std::vector<double>(S, 0.0));
    r.status = drmas_segment_stats_f32(DRMAS_DEVICE_CUDA, (int64_t)v.size(), dv.get(), di.get(), S, ddof,
                                       dc.get(), dm.get(), d2.get(), with_std ? ds.get() : nullptr, nullptr);
    r.message = drmas_last_error();
    if (r.status == DRMAS_OK && sync_ok("segment_stats")) {
        r.count = dc.download();
        r.mean = dm.download();
        r.m2 = d2.download();
        r.std = ds.download();
    }
    return r;
}

static void compare_stats(const std::string& name, const std::vector<float>& v, const std::vector<int32_t>& ids,
                          int64_t S, int ddof, bool with_std) {
    const std::string what = format("segment_stats %s ddof=%d std=%s", name.c_str(), ddof, with_std ? "yes" : "NULL");
    const StatsResult cpu = stats_cpu(v, ids, S, ddof, with_std);
    const StatsResult gpu = stats_cuda(v, ids, S, ddof, with_std);
    check(cpu.status == DRMAS_OK, "%s: CPU status %d: %s", what.c_str(), cpu.status, cpu.message.c_str());
    check(gpu.status == DRMAS_OK, "%s: CUDA status %d: %s", what.c_str(), gpu.status, gpu.message.c_str());
    if (cpu.status != DRMAS_OK || gpu.status != DRMAS_OK || gpu.count.size() != (size_t)S) return;
    compare(what + " count", gpu.count, cpu.count, 0, 0);
    compare(what + " mean", gpu.mean, cpu.mean, 1e-9, 1e-9);
    compare(what + " m2", gpu.m2, cpu.m2, 1e-9, 1e-9);
    compare(what + " std", gpu.std, cpu.std, 1e-9, 1e-9);
}

static void test_segment_stats(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(3.0f, 10.0f);
    auto values = [&](int64_t n) {
        std::vector<float> v(n);
        for (auto& x : v) x = normal(rng);
        return v;
    };
    auto random_ids = [&](int64_t n, int64_t S) {
        std::uniform_int_distribution<int32_t> id(0, (int32_t)S - 1);
        std::vector<int32_t> ids(n);
        for (auto& x : ids) x = id(rng);
        return ids;
    };
    auto sorted = [](std::vector<int32_t> ids) {
        std::sort(ids.begin(), ids.end());
        return ids;
    };

    struct Case {
        std::string name;
        std::vector<float> v;
        std::vector<int32_t> ids;
        int64_t S;
    };
    std::vector<Case> cases;
    cases.push_back({"n=1", {2.5f}, {0}, 1});
    cases.push_back({"n=0 S=3", {}, {}, 3});
    cases.push_back({"n=1009 S=17 unsorted", values(1009), random_ids(1009, 17), 17});
    cases.push_back({"n=65537 one huge segment", values(65537), std::vector<int32_t>(65537, 0), 1});
    cases.push_back({"n=65537 S=1009 sorted", values(65537), sorted(random_ids(65537, 1009)), 1009});
    cases.push_back({"n=100 S=10007 mostly empty", values(100), random_ids(100, 10007), 10007});
    {
        const int64_t n = scaled(1000000, 30011), S = scaled(10000, 307);
        std::vector<int32_t> ids = sorted(random_ids(n, S));
        std::vector<float> v = values(n);
        cases.push_back({format("n=%lld S=%lld sorted", (long long)n, (long long)S), v, ids, S});
        std::shuffle(ids.begin(), ids.end(), rng);
        cases.push_back({format("n=%lld S=%lld unsorted", (long long)n, (long long)S), v, ids, S});
    }
    for (size_t c = 0; c < cases.size(); ++c)
        for (int ddof = 0; ddof <= 1; ++ddof)
            compare_stats(cases[c].name, cases[c].v, cases[c].ids, cases[c].S, ddof, (c + ddof) % 3 != 2);

    // Constant segments: the mean is exactly the value and M2 and std are exactly 0,
    // whatever order the atomics add in (inexact decimals on purpose).
    {
        const int64_t n = scaled(100003, 20011), S = 1009;
        std::vector<int32_t> ids = random_ids(n, S);
        std::vector<float> v(n);
        for (int64_t i = 0; i < n; ++i) v[i] = 0.1f * (float)(ids[i] % 37) - 1.3f;
        const StatsResult gpu = stats_cuda(v, ids, S, 1, true);
        check(gpu.status == DRMAS_OK, "constant segments: CUDA status %d: %s", gpu.status, gpu.message.c_str());
        if (gpu.status == DRMAS_OK && gpu.count.size() == (size_t)S) {
            int64_t bad = 0;
            for (int64_t s = 0; s < S; ++s) {
                const double want = gpu.count[s] ? (double)(0.1f * (float)(s % 37) - 1.3f) : 0.0;
                if (gpu.mean[s] != want || gpu.m2[s] != 0.0 || gpu.std[s] != 0.0) {
                    if (bad < 10)
                        printf("  constant segment %lld: mean %.17g (want %.17g) m2 %g std %g\n", (long long)s,
                               gpu.mean[s], want, gpu.m2[s], gpu.std[s]);
                    ++bad;
                }
            }
            check(bad == 0, "constant segments: %lld segments not exact", (long long)bad);
        }
        compare_stats("constant segments", v, ids, S, 1, true);
    }
}

// ---- 2. advantages -------------------------------------------------------------------

struct Rows {
    std::vector<float> s;
    std::vector<int32_t> uid, traj, agent;
    int64_t U = 0, T = 0, K = 0;
};

// Rollout layout, uid-major: N trajectories per uid, 1..turns rounds in which each of the K
// agents acts with probability 0.8 (so some agent segments are empty or single). Scores are
// the trajectory's reward (0/1) minus a 0.1 format penalty, or continuous. extra_uids and
// extra_trajs add ids that no row uses (empty groups and trajectories).
static Rows rollout_rows(int64_t U, int64_t N, int64_t K, int turns, bool continuous, int64_t extra_uids,
                         int64_t extra_trajs, std::mt19937_64& rng) {
    Rows r;
    r.U = U + extra_uids;
    r.T = U * N + extra_trajs;
    r.K = K;
    std::bernoulli_distribution coin(0.6), acts(0.8), penalty(0.1);
    std::uniform_int_distribution<int> nturns(1, turns);
    std::uniform_real_distribution<float> uniform(-1.0f, 2.0f);
    for (int64_t u = 0; u < U; ++u)
        for (int64_t j = 0; j < N; ++j) {
            const float reward = continuous ? uniform(rng) : (coin(rng) ? 1.0f : 0.0f);
            const int rounds = nturns(rng);
            bool any = false;
            for (int t = 0; t < rounds; ++t)
                for (int64_t k = 0; k < K; ++k) {
                    if (!acts(rng) && !(t == rounds - 1 && k == K - 1 && !any)) continue;
                    any = true;
                    r.s.push_back(penalty(rng) ? reward - 0.1f : reward);
                    r.uid.push_back((int32_t)u);
                    r.traj.push_back((int32_t)(u * N + j));
                    r.agent.push_back((int32_t)k);
                }
        }
    return r;
}

static Rows shuffled(const Rows& in, std::mt19937_64& rng) {
    std::vector<size_t> p(in.s.size());
    for (size_t i = 0; i < p.size(); ++i) p[i] = i;
    std::shuffle(p.begin(), p.end(), rng);
    Rows r = in;
    for (size_t i = 0; i < p.size(); ++i) {
        r.s[i] = in.s[p[i]];
        r.uid[i] = in.uid[p[i]];
        r.traj[i] = in.traj[p[i]];
        r.agent[i] = in.agent[p[i]];
    }
    return r;
}

// A mode is a descriptor (drmas.h): d = mean_from + 2 std_from + 4 numerator, all 8 of them.
constexpr int kDescriptors = 8;
constexpr int kDrmas = DRMAS_FROM_AGENT + 2 * DRMAS_FROM_AGENT + 4 * DRMAS_NUMERATOR_ROW;

static drmas_norm_config norm_config(int mode, int pooling, int singleton, int ddof, int scale) {
    drmas_norm_config c;
    memset(&c, 0, sizeof c);
    c.mean_from = mode & 1;
    c.std_from = (mode >> 1) & 1;
    c.numerator = (mode >> 2) & 1;
    c.global_pooling = pooling;
    c.singleton = singleton;
    c.ddof = ddof;
    c.scale_by_std = scale;
    c.eps = 1e-6;
    return c;
}

static std::string describe(const drmas_norm_config& c) {
    static const char* from[] = {"group", "agent"};
    static const char* singles[] = {"fallback", "zero", "raw"};
    return format("mean=%s std=%s numerator=%s pool=%s single=%s ddof=%d scale=%d", from[c.mean_from], from[c.std_from],
                  c.numerator == DRMAS_NUMERATOR_TRAJECTORY ? "traj" : "row",
                  c.global_pooling == DRMAS_POOL_TRAJECTORIES ? "traj" : "rows", singles[c.singleton], c.ddof,
                  c.scale_by_std);
}

struct AdvResult {
    int32_t status = -1;
    std::string message;
    std::vector<float> adv;
    std::vector<double> diag;
};

static AdvResult advantage_cpu(const drmas_norm_config& c, const Rows& r, bool with_diag) {
    AdvResult a;
    a.adv.assign(r.s.size(), -777.0f);
    a.diag.assign(with_diag ? DRMAS_DIAG_FIELDS * r.U * r.K : 0, -777.0);
    a.status = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, (int64_t)r.s.size(), r.s.data(), r.uid.data(),
                                   r.traj.data(), r.agent.data(), r.U, r.T, r.K, a.adv.data(),
                                   with_diag ? a.diag.data() : nullptr, nullptr);
    a.message = drmas_last_error();
    return a;
}

struct DeviceRows {
    DeviceArray<float> s;
    DeviceArray<int32_t> uid, traj, agent;
    explicit DeviceRows(const Rows& r) : s(r.s), uid(r.uid), traj(r.traj), agent(r.agent) {}
};

// Outputs are guard-filled first, so that an error path can be checked to leave them alone.
static AdvResult advantage_cuda(const drmas_norm_config& c, const Rows& r, const DeviceRows& d, bool with_diag) {
    AdvResult a;
    const size_t nd = with_diag ? DRMAS_DIAG_FIELDS * r.U * r.K : 0;
    DeviceArray<float> adv(std::vector<float>(r.s.size(), -777.0f));
    DeviceArray<double> diag(std::vector<double>(nd, -777.0));
    a.status = drmas_advantage_f32(DRMAS_DEVICE_CUDA, &c, (int64_t)r.s.size(), d.s.get(), d.uid.get(), d.traj.get(),
                                   d.agent.get(), r.U, r.T, r.K, adv.get(), with_diag ? diag.get() : nullptr, nullptr);
    a.message = drmas_last_error();
    if (sync_ok("advantage")) {
        a.adv = adv.download();
        a.diag = diag.download();
    }
    return a;
}

static void compare_advantage(const std::string& name, const drmas_norm_config& c, const Rows& r,
                              const DeviceRows& d) {
    const std::string what = "advantage " + name + " " + describe(c);
    const AdvResult cpu = advantage_cpu(c, r, true);
    const AdvResult gpu = advantage_cuda(c, r, d, true);
    check(cpu.status == DRMAS_OK, "%s: CPU status %d: %s", what.c_str(), cpu.status, cpu.message.c_str());
    check(gpu.status == DRMAS_OK, "%s: CUDA status %d: %s", what.c_str(), gpu.status, gpu.message.c_str());
    if (cpu.status != DRMAS_OK || gpu.status != DRMAS_OK) return;
    compare(what + " advantages", gpu.adv, cpu.adv, 1e-5, 1e-5);
    const int64_t S = r.U * r.K;
    static const char* fields[] = {"agent_count", "agent_mean", "agent_m2",  "agent_std", "group_count",
                                   "group_mean",  "group_m2",   "group_std", "inflation"};
    for (int f = 0; f < DRMAS_DIAG_FIELDS; ++f) {
        std::vector<double> g(gpu.diag.begin() + f * S, gpu.diag.begin() + (f + 1) * S);
        std::vector<double> e(cpu.diag.begin() + f * S, cpu.diag.begin() + (f + 1) * S);
        const bool count = f == DRMAS_DIAG_AGENT_COUNT || f == DRMAS_DIAG_GROUP_COUNT;
        compare(what + " diag." + fields[f], g, e, count ? 0.0 : 1e-9, count ? 0.0 : 1e-9);
    }
}

// One row: uid 0, trajectory 0, agent 0, score 0.75.
static Rows one_row() {
    Rows one;
    one.s = {0.75f};
    one.uid = {0};
    one.traj = {0};
    one.agent = {0};
    one.U = one.T = one.K = 1;
    return one;
}

static void test_advantage(std::mt19937_64& rng) {
    struct Case {
        std::string name;
        Rows rows;
        bool all_configs;
    };
    std::vector<Case> cases;
    cases.push_back({"n=1", one_row(), true});
    const Rows small = rollout_rows(7, 4, 3, 3, false, 0, 0, rng);
    cases.push_back({format("rollout n=%zu", small.s.size()), small, true});
    const Rows holes = rollout_rows(13, 5, 4, 3, false, 3, 11, rng);
    cases.push_back({format("unsorted with empty uids/trajs n=%zu", holes.s.size()), shuffled(holes, rng), true});
    const Rows cont = rollout_rows(101, 5, 2, 4, true, 0, 0, rng);
    cases.push_back({format("continuous n=%zu", cont.s.size()), cont, true});
    // ~10^6 rows in 10^4 groups, once sorted (the CPU's blocked path) and once shuffled.
    const Rows big = rollout_rows(scaled(10000, 307), 10, 3, 5, false, 0, 0, rng);
    cases.push_back({format("big n=%zu", big.s.size()), big, false});
    cases.push_back({format("big unsorted n=%zu", big.s.size()), shuffled(big, rng), false});

    for (const Case& cs : cases) {
        const DeviceRows d(cs.rows);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool <= 1; ++pool)
                for (int single = 0; single <= 2; ++single)
                    for (int ddof = 0; ddof <= 1; ++ddof)
                        for (int scale = 0; scale <= 1; ++scale) {
                            if (!cs.all_configs && (single != 0 || ddof != 1 || scale != 1)) continue;
                            compare_advantage(cs.name, norm_config(mode, pool, single, ddof, scale), cs.rows, d);
                        }
    }

    // Constant scores: every segment's mean is its value and its std 0, so with the
    // fallback and zero policies every advantage is exactly 0 on CUDA too.
    {
        Rows r = rollout_rows(50, 6, 3, 3, false, 0, 0, rng);
        for (auto& s : r.s) s = 0.3f;
        const DeviceRows d(r);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool <= 1; ++pool)
                for (int single = 0; single <= 1; ++single)
                    for (int scale = 0; scale <= 1; ++scale) {
                        const drmas_norm_config c = norm_config(mode, pool, single, 1, scale);
                        const AdvResult gpu = advantage_cuda(c, r, d, false);
                        check(gpu.status == DRMAS_OK && all_equal(gpu.adv, 0.0f),
                              "constant scores %s: advantages not all exactly 0 (status %d %s)", describe(c).c_str(),
                              gpu.status, gpu.message.c_str());
                    }
        // Scores of -0: every mean is +0, so each row's difference is -0 - +0 = -0, and dividing it by
        // the std must still give +0 (apply_advantage's zero-difference rule), as on the CPU.
        for (auto& s : r.s) s = -0.0f;
        const DeviceRows dz(r);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool <= 1; ++pool)
                for (int single = 0; single <= 1; ++single) {
                    const drmas_norm_config c = norm_config(mode, pool, single, 1, 1);
                    const AdvResult gpu = advantage_cuda(c, r, dz, false);
                    bool plus_zero = gpu.status == DRMAS_OK;
                    for (float v : gpu.adv) plus_zero = plus_zero && v == 0.0f && !std::signbit(v);
                    check(plus_zero, "scores of -0 %s: advantages not all exactly +0 (status %d %s)", describe(c).c_str(), gpu.status,
                          gpu.message.c_str());
                }
    }

    // No rows: the diagnostics of every (empty) segment are still written.
    {
        Rows r;
        r.U = 3;
        r.T = 0;
        r.K = 2;
        const DeviceRows d(r);
        compare_advantage("n=0", norm_config(kDrmas, DRMAS_POOL_ROWS, 0, 1, 1), r, d);
    }
}

// ---- 2b. trusted advantages ------------------------------------------------------------

// libdrmas_emu's host-API counters (native/emu/cuda_runtime.h); NULL against the real libdrmas.
extern "C" __attribute__((weak)) void drmas_emu_counters(uint64_t* out);
extern "C" __attribute__((weak)) uint32_t drmas_emu_contexts(int forget);
enum { kEmuLaunches = 0, kEmuMemsets = 1, kEmuToHost = 2, kEmuSyncs = 3, kEmuCounters = 4 };
struct EmuCounts {
    uint64_t c[kEmuCounters] = {0, 0, 0, 0};
};
static EmuCounts emu_counts() {
    EmuCounts e;
    if (drmas_emu_counters != nullptr) drmas_emu_counters(e.c);
    return e;
}

// drmas_advantage_trusted_f32 on CUDA into outputs with `guard` sentinel entries on each side;
// `waits` gets the synchronisations + copies to the host the call made (emulation only, else 0).
struct TrustedResult {
    int32_t status = -1;
    std::string message;
    std::vector<float> adv;     // with the guards
    std::vector<double> diag;   // with the guards
    uint64_t waits = 0;
};
constexpr int64_t kGuard = 64;
static TrustedResult advantage_trusted(const drmas_norm_config& c, const Rows& r, const DeviceRows& d, bool with_diag) {
    TrustedResult a;
    const int64_t n = (int64_t)r.s.size();
    const int64_t nd = with_diag ? DRMAS_DIAG_FIELDS * r.U * r.K : 0;
    DeviceArray<float> adv(std::vector<float>(n + 2 * kGuard, -777.0f));
    DeviceArray<double> diag(std::vector<double>(nd + 2 * kGuard, -777.0));
    const EmuCounts before = emu_counts();
    a.status = drmas_advantage_trusted_f32(DRMAS_DEVICE_CUDA, &c, n, d.s.get(), d.uid.get(), d.traj.get(), d.agent.get(),
                                           r.U, r.T, r.K, adv.get() + kGuard, with_diag ? diag.get() + kGuard : nullptr,
                                           nullptr);
    const EmuCounts after = emu_counts();
    a.message = drmas_last_error();
    a.waits = (after.c[kEmuSyncs] - before.c[kEmuSyncs]) + (after.c[kEmuToHost] - before.c[kEmuToHost]);
    if (sync_ok("trusted advantage")) {
        a.adv = adv.download();
        a.diag = diag.download();
    }
    return a;
}

static bool guards_untouched(const TrustedResult& a) {
    if (a.adv.size() < 2 * kGuard || a.diag.size() < 2 * kGuard) return false;
    for (int64_t k = 0; k < kGuard; ++k)
        if (a.adv[k] != -777.0f || a.adv[a.adv.size() - 1 - k] != -777.0f || a.diag[k] != -777.0 ||
            a.diag[a.diag.size() - 1 - k] != -777.0)
            return false;
    return true;
}

template <class T>
static bool same_bits(const T* a, const T* b, size_t count) {
    return count == 0 || memcmp(a, b, count * sizeof(T)) == 0;
}

// Valid input: the trusted call gives the validated call's advantages and diagnostics (up to
// the order of fp64 atomics) and counts exactly, and waits for nothing. Bad input (ids out of range either way, NaN scores, a trajectory in
// two uids): status OK, nothing written outside the outputs (guards and the emulator's guard
// pages), no wait.
static void test_advantage_trusted(std::mt19937_64& rng) {
    const bool counting = drmas_emu_counters != nullptr;
    std::vector<std::pair<std::string, Rows>> valid;
    valid.push_back({"n=1", one_row()});
    valid.push_back({"rollout", rollout_rows(7, 4, 3, 3, false, 0, 0, rng)});
    valid.push_back({"unsorted with empty uids/trajs", shuffled(rollout_rows(13, 5, 4, 3, false, 3, 11, rng), rng)});
    valid.push_back({"continuous", rollout_rows(101, 5, 2, 4, true, 0, 0, rng)});
    valid.push_back({"big unsorted", shuffled(rollout_rows(scaled(3000, 200), 10, 3, 5, false, 0, 0, rng), rng)});
    for (const auto& v : valid) {
        const DeviceRows d(v.second);
        const size_t n = v.second.s.size();
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool <= 1; ++pool)
                for (int single = 0; single <= 2; single += 2) {
                    const drmas_norm_config c = norm_config(mode, pool, single, 1, 1);
                    const std::string what = format("trusted advantage %s n=%zu %s", v.first.c_str(), n, describe(c).c_str());
                    const EmuCounts before = emu_counts();
                    const AdvResult ref = advantage_cuda(c, v.second, d, true);
                    const EmuCounts after = emu_counts();
                    const TrustedResult t = advantage_trusted(c, v.second, d, true);
                    check(ref.status == DRMAS_OK && t.status == DRMAS_OK, "%s: status %d / %d: %s", what.c_str(),
                          ref.status, t.status, t.message.c_str());
                    if (ref.status != DRMAS_OK || t.status != DRMAS_OK || t.adv.size() != n + 2 * kGuard) continue;
                    // The same kernels on the same rows; only the order of the fp64 atomics may differ (the
                    // emulator draws each launch's block order, a GPU schedules as it likes), which moves the
                    // last bits of sums and M2 even between two validated calls. Counts are exact.
                    compare(what + " advantages", std::vector<float>(t.adv.begin() + kGuard, t.adv.end() - kGuard), ref.adv,
                            1e-6, 1e-6);
                    const std::vector<double> td(t.diag.begin() + kGuard, t.diag.end() - kGuard);
                    compare(what + " diagnostics", td, ref.diag, 1e-12, 1e-12);
                    const int64_t S = v.second.U * v.second.K;
                    check(same_bits(td.data() + DRMAS_DIAG_AGENT_COUNT * S, ref.diag.data() + DRMAS_DIAG_AGENT_COUNT * S, S) &&
                              same_bits(td.data() + DRMAS_DIAG_GROUP_COUNT * S, ref.diag.data() + DRMAS_DIAG_GROUP_COUNT * S, S),
                          "%s: counts differ from the validated call's", what.c_str());
                    check(guards_untouched(t), "%s: wrote outside its outputs", what.c_str());
                    if (counting) {
                        check(after.c[kEmuSyncs] > before.c[kEmuSyncs], "%s: the validated call did not synchronise (counter broken?)",
                              what.c_str());
                        check(t.waits == 0, "%s: the trusted call waited for the device %llu times", what.c_str(),
                              (unsigned long long)t.waits);
                    }
                }
    }

    // Bad input: each corruption at a few rows (the first, one inside, the last) of rows that span three
    // of the one-pass kernel's 256-row tiles (so the bad row lies in its first, a middle and its last); with and
    // without diagnostics (without them sorted rows go to the one-pass kernel first, whose own checks
    // must hand bad rows to the multi-kernel path; with them the multi-kernel path runs alone).
    const Rows base = rollout_rows(30, 4, 3, 3, false, 0, 0, rng);
    const int64_t n = (int64_t)base.s.size();
    check(n > 2 * 256, "trusted bad input: %lld rows do not reach a third 256-row tile", (long long)n);
    const float nan = std::numeric_limits<float>::quiet_NaN();
    struct Bad {
        const char* name;
        void (*apply)(Rows&, int64_t, float);
    };
    const Bad bads[] = {
        {"uid = num_uids", [](Rows& r, int64_t i, float) { r.uid[i] = (int32_t)r.U; }},
        {"uid = -1", [](Rows& r, int64_t i, float) { r.uid[i] = -1; }},
        {"uid = INT32_MAX", [](Rows& r, int64_t i, float) { r.uid[i] = INT32_MAX; }},
        {"uid = INT32_MIN", [](Rows& r, int64_t i, float) { r.uid[i] = INT32_MIN; }},
        {"agent = num_agents", [](Rows& r, int64_t i, float) { r.agent[i] = (int32_t)r.K; }},
        {"agent = -3", [](Rows& r, int64_t i, float) { r.agent[i] = -3; }},
        {"agent = INT32_MAX", [](Rows& r, int64_t i, float) { r.agent[i] = INT32_MAX; }},
        {"traj = num_trajs", [](Rows& r, int64_t i, float) { r.traj[i] = (int32_t)r.T; }},
        {"traj = -2", [](Rows& r, int64_t i, float) { r.traj[i] = -2; }},
        {"traj = INT32_MIN", [](Rows& r, int64_t i, float) { r.traj[i] = INT32_MIN; }},
        {"score NaN", [](Rows& r, int64_t i, float nan_v) { r.s[i] = nan_v; }},
        {"score -inf", [](Rows& r, int64_t i, float) { r.s[i] = -std::numeric_limits<float>::infinity(); }},
        {"trajectory in two uids", [](Rows& r, int64_t i, float) { r.uid[i] = (r.uid[i] + 1) % (int32_t)r.U; }},
        {"first row's uid bad", [](Rows& r, int64_t i, float) {
             for (int64_t j = 0; j < (int64_t)r.s.size(); ++j)
                 if (r.traj[j] == r.traj[i]) {
                     r.uid[j] = -5;  // the trajectory's first row: every other kernel must skip it too
                     break;
                 }
         }},
    };
    const int64_t rows[] = {0, n / 2, n - 1};
    for (const Bad& b : bads)
        for (int64_t i : rows)
            for (int pool = 0; pool <= 1; ++pool)
                for (int variant = 0; variant < 4; ++variant) {
                    const int sorted = variant & 1, with_diag = variant >> 1;
                    Rows r = base;
                    b.apply(r, i, nan);
                    if (!sorted) r = shuffled(r, rng);
                    const DeviceRows d(r);
                    const drmas_norm_config c = norm_config(kDrmas, pool, 0, 1, 1);
                    const std::string what = format("trusted advantage, bad input %s at row %lld of %lld, pool %d, %s, %s",
                                                    b.name, (long long)i, (long long)n, pool, sorted ? "sorted" : "shuffled",
                                                    with_diag ? "diagnostics" : "no diagnostics");
                    const TrustedResult t = advantage_trusted(c, r, d, with_diag != 0);
                    check(t.status == DRMAS_OK, "%s: status %d: %s", what.c_str(), t.status, t.message.c_str());
                    check(guards_untouched(t), "%s: wrote outside its outputs", what.c_str());
                    check(t.waits == 0, "%s: waited for the device %llu times", what.c_str(), (unsigned long long)t.waits);
                    // as drmas.h says: a row with an id out of range gets NaN (the one-pass kernel hands such
                    // input to the multi-kernel path, which skips those rows)
                    if (t.adv.size() == (size_t)n + 2 * kGuard) {
                        int64_t not_nan = 0, bad_rows = 0;
                        for (int64_t j = 0; j < n; ++j) {
                            const bool bad_id = r.uid[j] < 0 || r.uid[j] >= r.U || r.agent[j] < 0 || r.agent[j] >= r.K ||
                                                (pool == DRMAS_POOL_TRAJECTORIES && (r.traj[j] < 0 || r.traj[j] >= r.T));
                            bad_rows += bad_id;
                            if (bad_id && !std::isnan(t.adv[kGuard + j])) ++not_nan;
                        }
                        check(not_nan == 0, "%s: %lld of %lld rows with a bad id are not NaN", what.c_str(), (long long)not_nan,
                              (long long)bad_rows);
                    }
                    // the validated call still names the bad row (and writes nothing)
                    const bool traj_only = strncmp(b.name, "traj ", 5) == 0 || strncmp(b.name, "trajectory", 10) == 0;
                    if (strncmp(b.name, "first row", 9) != 0 && !(traj_only && pool == DRMAS_POOL_ROWS)) {
                        const AdvResult v = advantage_cuda(c, r, d, false);
                        check(v.status != DRMAS_OK, "%s: the validated call accepted it", what.c_str());
                    }
                }
}

// ---- 2c. sorted rows: the one-pass kernel ----------------------------------------------

// Sorted rows (uid never decreases, each trajectory's rows together, traj ids increasing) in runs
// of the given lengths: each run cut into trajectories of 1..max_traj rows (so that trajectories
// cross the kernel's 32-row chunks and its 256-row tiles), agents drawn in [0, K). Runs whose
// index is in `constant` get one score throughout (every segment in them is constant).
static Rows sorted_runs(const std::vector<int64_t>& lengths, int64_t K, int64_t max_traj, int every_constant,
                        std::mt19937_64& rng, std::vector<char>* constant_rows) {
    Rows r;
    r.K = K;
    std::uniform_int_distribution<int64_t> tlen(1, max_traj), ag(0, K - 1);
    std::uniform_real_distribution<float> uniform(-1.0f, 2.0f);
    std::bernoulli_distribution coin(0.5);
    int32_t t = 0;
    for (size_t u = 0; u < lengths.size(); ++u) {
        const bool constant = every_constant > 0 && u % every_constant == 0;
        const float value = uniform(rng);
        for (int64_t done = 0; done < lengths[u];) {
            const int64_t len = std::min(tlen(rng), lengths[u] - done);
            // binary rewards (many exact ties, as rollouts give) or continuous ones
            const float reward = coin(rng) ? (coin(rng) ? 1.0f : 0.0f) : uniform(rng);
            for (int64_t j = 0; j < len; ++j) {
                r.s.push_back(constant ? value : (j % 3 == 2 ? reward - 0.1f : reward));
                r.uid.push_back((int32_t)u);
                r.traj.push_back(t);
                r.agent.push_back((int32_t)ag(rng));
                if (constant_rows) constant_rows->push_back(constant);
            }
            done += len;
            t += 1 + (int32_t)(coin(rng) ? 0 : 2);  // unused trajectory ids between some
        }
    }
    r.U = (int64_t)lengths.size() + 2;  // two uids without rows at the end
    r.T = t + 3;
    return r;
}

// drmas_advantage_f32 or _trusted_f32 on CUDA without diagnostics (the one-pass kernel's calls).
static AdvResult advantage_cuda_plain(const drmas_norm_config& c, const Rows& r, const DeviceRows& d, bool trusted) {
    AdvResult a;
    DeviceArray<float> adv(std::vector<float>(r.s.size(), -777.0f));
    a.status = (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(
        DRMAS_DEVICE_CUDA, &c, (int64_t)r.s.size(), d.s.get(), d.uid.get(), d.traj.get(), d.agent.get(), r.U, r.T, r.K,
        adv.get(), nullptr, nullptr);
    a.message = drmas_last_error();
    if (sync_ok("advantage (plain)")) a.adv = adv.download();
    return a;
}

// Sorted rows on both entries against the CPU, every mode descriptor, both poolings, every singleton
// policy, with and without the std: runs of 1..700 rows (across the 256-row tiles), single-row and
// single-trajectory groups, trajectories longer than a chunk; constant runs give exactly 0 wherever
// the policy does not make a single segment's statistics up (raw). 33 agents: sorted rows that the
// one-pass kernel cannot hold (its lanes are its agents) take the multi-kernel path.
static void test_advantage_sorted(std::mt19937_64& rng) {
    std::vector<int64_t> lengths = {1, 2, 700, 31, 32, 33, 1, 255, 256, 257, 3, 1, 64, 65, 1};
    std::uniform_int_distribution<int64_t> len(1, 90);
    for (int j = 0; j < scaled(60, 20); ++j) lengths.push_back(len(rng));
    lengths.push_back(511);
    struct Case {
        std::string name;
        Rows rows;
        std::vector<char> constant;
        bool some_modes = false;  // descriptors 0, Dr. MAS and 7 only (a large case: the emulator's time)
    };
    std::vector<Case> cases;
    {
        Case c;
        c.rows = sorted_runs(lengths, 3, 80, 4, rng, &c.constant);
        c.name = format("sorted runs 1..700, 3 agents, n=%zu", c.rows.s.size());
        cases.push_back(std::move(c));
    }
    {
        Case c;
        c.rows = sorted_runs(std::vector<int64_t>(lengths.begin(), lengths.begin() + 20), 1, 5, 3, rng, &c.constant);
        c.name = format("sorted runs, 1 agent, short trajectories, n=%zu", c.rows.s.size());
        cases.push_back(std::move(c));
    }
    {
        Case c;
        c.rows = sorted_runs(std::vector<int64_t>(lengths.begin(), lengths.begin() + 12), 32, 40, 5, rng, &c.constant);
        c.name = format("sorted runs, 32 agents, n=%zu", c.rows.s.size());
        cases.push_back(std::move(c));
    }
    {
        // not sorted: the trusted entry's one-pass kernel must see it and open its fallback
        Case c;
        c.rows = shuffled(sorted_runs(std::vector<int64_t>(lengths.begin(), lengths.begin() + 12), 3, 40, 0, rng, nullptr), rng);
        c.name = format("shuffled runs, n=%zu", c.rows.s.size());
        cases.push_back(std::move(c));
    }
    {
        Case c;
        c.rows = sorted_runs({5, 40, 300, 2}, 33, 20, 0, rng, &c.constant);
        c.name = format("sorted runs, 33 agents (multi-kernel path), n=%zu", c.rows.s.size());
        cases.push_back(std::move(c));
    }
    {
        // runs at and past kSortedLongRun (4096 rows): the longer ones go to the multi-kernel path,
        // one starting inside a tile, one at the last row's tile
        Case c;
        c.rows = sorted_runs({3, 4096, 70, 4097, 1, 9000, 2}, 3, 300, 2, rng, &c.constant);
        c.name = format("sorted runs of 4096, 4097 and 9000 rows, n=%zu", c.rows.s.size());
        c.some_modes = true;
        cases.push_back(std::move(c));
    }
    for (const Case& cs : cases) {
        const DeviceRows d(cs.rows);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool <= 1; ++pool)
                for (int single = 0; single <= 2; ++single)
                    for (int scale = 0; scale <= 1; ++scale) {
                        if (cs.some_modes && mode != kDrmas && mode != 0 && mode != kDescriptors - 1) continue;
                        const int ddof = (mode + single) % 2;  // both over the descriptors
                        const drmas_norm_config c = norm_config(mode, pool, single, ddof, scale);
                        const AdvResult cpu = advantage_cpu(c, cs.rows, false);
                        for (int trusted = 0; trusted <= 1; ++trusted) {
                            const std::string what = format("%s advantage %s %s", trusted ? "trusted" : "validated",
                                                            cs.name.c_str(), describe(c).c_str());
                            const AdvResult gpu = advantage_cuda_plain(c, cs.rows, d, trusted != 0);
                            check(cpu.status == DRMAS_OK && gpu.status == DRMAS_OK, "%s: status %d / %d: %s %s",
                                  what.c_str(), cpu.status, gpu.status, cpu.message.c_str(), gpu.message.c_str());
                            if (cpu.status != DRMAS_OK || gpu.status != DRMAS_OK || gpu.adv.size() != cpu.adv.size()) continue;
                            compare(what, gpu.adv, cpu.adv, 1e-5, 1e-5);
                            if (single == DRMAS_SINGLETON_RAW) continue;  // a single segment has mean 0 there
                            int64_t off = 0;
                            for (size_t i = 0; i < cs.constant.size(); ++i)
                                if (cs.constant[i] && gpu.adv[i] != 0.0f) ++off;
                            check(off == 0, "%s: %lld rows of constant runs are not exactly 0", what.c_str(), (long long)off);
                        }
                    }
    }
}

// ---- 3. broadcast --------------------------------------------------------------------

// Row lengths in [0, max_len] (zeros included), tokens before row 0 and after the last row.
static std::vector<int64_t> random_offsets(int64_t rows, int64_t max_len, int64_t head, std::mt19937_64& rng) {
    std::uniform_int_distribution<int64_t> len(0, max_len);
    std::vector<int64_t> off(rows + 1);
    off[0] = head;
    for (int64_t r = 0; r < rows; ++r) off[r + 1] = off[r] + len(rng);
    return off;
}

static void compare_broadcast(const std::string& name, const std::vector<float>& values,
                              const std::vector<int64_t>& off, int64_t num_tokens) {
    const std::string what = "broadcast " + name;
    const int64_t rows = (int64_t)values.size();
    std::vector<float> cpu(num_tokens, 12345.0f);
    const int32_t cst = drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, rows, values.data(), off.data(), num_tokens,
                                                 cpu.data(), nullptr);
    check(cst == DRMAS_OK, "%s: CPU status %d: %s", what.c_str(), cst, drmas_last_error());
    DeviceArray<float> dv(values), out(std::vector<float>(num_tokens, 12345.0f));
    DeviceArray<int64_t> doff(off);
    const int32_t gst = drmas_broadcast_rows_f32(DRMAS_DEVICE_CUDA, rows, dv.get(), doff.get(), num_tokens, out.get(),
                                                 nullptr);
    check(gst == DRMAS_OK, "%s: CUDA status %d: %s", what.c_str(), gst, drmas_last_error());
    if (cst == DRMAS_OK && gst == DRMAS_OK && sync_ok(what)) compare(what, out.download(), cpu, 0, 0);
}

static void test_broadcast(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    auto values = [&](int64_t n) {
        std::vector<float> v(n);
        for (auto& x : v) x = normal(rng);
        return v;
    };
    compare_broadcast("no rows", {}, {0}, 5);
    compare_broadcast("no rows, tokens after an offset", {}, {3}, 5);
    compare_broadcast("1 row 1 token", values(1), {0, 1}, 1);
    compare_broadcast("1 row 65537 tokens", values(1), {0, 65537}, 65537);
    compare_broadcast("empty rows only", values(4), {2, 2, 2, 2, 2}, 3);
    {
        const std::vector<int64_t> off = random_offsets(1009, 13, 3, rng);
        compare_broadcast("1009 rows with gaps", values(1009), off, off.back() + 7);
    }
    {
        const std::vector<int64_t> off = random_offsets(10000, 199, 0, rng);
        compare_broadcast("1e4 rows ~1e6 tokens", values(10000), off, off.back());
    }
}

// ---- 4. clipped loss -----------------------------------------------------------------

constexpr double kClipLow = 0.2, kClipHigh = 0.28, kDualClip = 3.0, kKlCoef = 0.05;

struct Tokens {
    std::vector<int64_t> off;
    int64_t num_tokens = 0;
    std::vector<float> logp, old_logp, adv, ref;
    std::vector<uint8_t> mask;  // empty: no mask
};

static float nan_f() { return std::numeric_limits<float>::quiet_NaN(); }

// Token data for `off`. Ratios are kept away from the clip bounds (1 - eps_low, 1 + eps_high,
// the dual clip) and the k3 estimator away from its +-10 clamp, where a rounding difference
// would flip a branch and fail the tolerances; test_clip_bounds puts tokens on them on purpose
// and compares exactly. The exactly computed +-20 clamps of logp - old_logp and ref - logp are
// crossed on purpose.
// Masked tokens and tokens outside every row hold NaN.
static Tokens make_tokens(std::vector<int64_t> off, int64_t num_tokens, bool with_mask, std::mt19937_64& rng) {
    Tokens tk;
    tk.off = std::move(off);
    tk.num_tokens = num_tokens;
    tk.logp.assign(num_tokens, nan_f());
    tk.old_logp.assign(num_tokens, nan_f());
    tk.adv.assign(num_tokens, nan_f());
    tk.ref.assign(num_tokens, nan_f());
    if (with_mask) tk.mask.assign(num_tokens, 0);
    std::uniform_real_distribution<float> u01(0.0f, 1.0f), adv(-2.0f, 2.0f), old(-5.0f, 0.0f);
    std::normal_distribution<float> small(0.0f, 0.3f);
    std::bernoulli_distribution masked(0.25);
    const double bounds[] = {1.0 - kClipLow, 1.0 + kClipHigh, kDualClip};
    const int64_t rows = (int64_t)tk.off.size() - 1;
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t t = tk.off[r]; t < tk.off[r + 1]; ++t) {
            if (with_mask && masked(rng)) continue;  // stays NaN, mask 0
            // any byte but 0 is valid (drmas.h): mostly 1, some 2..255 (a kernel testing == 1 must fail)
            if (with_mask) tk.mask[t] = (uint8_t)(u01(rng) < 0.2f ? 2 + (int)(253.0f * u01(rng)) : 1);
            const float a = u01(rng) < 0.05f ? 0.0f : adv(rng);
            float o = 0, l = 0;
            for (;;) {
                o = old(rng);
                const float p = u01(rng);
                const float d = p < 0.85f ? small(rng) : p < 0.95f ? 6.0f * u01(rng) - 3.0f : 60.0f * u01(rng) - 30.0f;
                l = o + d;
                const float dd = l - o;  // as the kernels compute it
                const double ratio = exp(std::min(20.0, std::max(-20.0, (double)dd)));
                bool near = false;
                for (double b : bounds) near = near || fabs(ratio - b) < 1e-4 * b;
                if (!near) break;
            }
            // ref - logp: mostly in [-2.5, 1.8] (k3 well inside its clamp), else far outside.
            const float p = u01(rng);
            const float e = p < 0.9f ? -2.5f + 4.3f * u01(rng) : p < 0.95f ? 5.0f + 25.0f * u01(rng) : -30.0f + 17.0f * u01(rng);
            tk.adv[t] = a;
            tk.old_logp[t] = o;
            tk.logp[t] = l;
            tk.ref[t] = l + e;
        }
    return tk;
}

static int64_t valid_tokens(const Tokens& tk) {
    int64_t v = 0;
    for (int64_t t = tk.off.front(); t < tk.off.back(); ++t) v += tk.mask.empty() || tk.mask[t] != 0;
    return v;
}

// verl's aggregations as drmas.h describes them (the trainer's table is Java's LossAggregation).
enum Aggregation { kTokenMean, kSeqMeanTokenSum, kSeqMeanTokenMean, kSeqMeanTokenSumNorm };

static drmas_loss_config loss_config(int aggregation, int kl, bool dual, const Tokens& tk) {
    drmas_loss_config c;
    memset(&c, 0, sizeof c);
    c.clip_low = kClipLow;
    c.clip_high = kClipHigh;
    c.dual_clip = dual ? kDualClip : 0.0;
    c.kl_coef = kKlCoef;
    c.kl_type = kl;
    c.per_row_mean = aggregation == kSeqMeanTokenMean;
    const int64_t rows = (int64_t)tk.off.size() - 1;
    c.normalizer = aggregation == kTokenMean ? (double)std::max<int64_t>(1, valid_tokens(tk))
                   : aggregation == kSeqMeanTokenSumNorm ? 512.0
                                                         : (double)std::max<int64_t>(1, rows);
    return c;
}

// Bounds on sum |term| of each sum field, from the inputs: the scale of the rounding
// differences that an ulp of fp32 exp per token can add up to.
static std::vector<double> sum_magnitudes(const drmas_loss_config& c, const Tokens& tk, bool with_ref) {
    std::vector<double> mag(DRMAS_LOSS_SUMS, 0.0);
    const int64_t rows = (int64_t)tk.off.size() - 1;
    for (int64_t r = 0; r < rows; ++r) {
        int64_t nv = 0;
        for (int64_t t = tk.off[r]; t < tk.off[r + 1]; ++t) nv += tk.mask.empty() || tk.mask[t] != 0;
        if (nv == 0) continue;
        const double w = c.per_row_mean ? 1.0 / c.normalizer / (double)nv : 1.0 / c.normalizer;
        for (int64_t t = tk.off[r]; t < tk.off[r + 1]; ++t) {
            if (!tk.mask.empty() && tk.mask[t] == 0) continue;
            const double d = std::min(20.0, std::max(-20.0, (double)tk.logp[t] - (double)tk.old_logp[t]));
            const double pg = fabs((double)tk.adv[t]) * std::max(exp(d), 1.0 + c.clip_high);
            const double e = (double)tk.logp[t] - (double)tk.ref[t];
            const double kl = with_ref ? fabs(e) + 0.5 * e * e + 10.0 : 0.0;
            mag[DRMAS_LOSS_LOSS] += w * (pg + fabs(c.kl_coef) * kl);
            mag[DRMAS_LOSS_PG_LOSS] += w * pg;
            mag[DRMAS_LOSS_KL_LOSS] += w * kl;
            mag[DRMAS_LOSS_PPO_KL] += fabs(d);
            mag[DRMAS_LOSS_KL] += kl;
        }
    }
    return mag;
}

struct LossResult {
    int32_t status = -1;
    std::string message;
    std::vector<float> grad;
    std::vector<double> sums;
};

static LossResult loss_cpu(const drmas_loss_config& c, const Tokens& tk, bool with_ref) {
    LossResult r;
    r.grad.assign(tk.num_tokens, 12345.0f);
    r.sums.assign(DRMAS_LOSS_SUMS, -777.0);
    r.status = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, (int64_t)tk.off.size() - 1, tk.off.data(), tk.num_tokens,
                                      tk.logp.data(), tk.old_logp.data(), tk.adv.data(),
                                      with_ref ? tk.ref.data() : nullptr, tk.mask.empty() ? nullptr : tk.mask.data(),
                                      r.grad.data(), r.sums.data(), nullptr);
    r.message = drmas_last_error();
    return r;
}

struct DeviceTokens {
    DeviceArray<int64_t> off;
    DeviceArray<float> logp, old_logp, adv, ref;
    DeviceArray<uint8_t> mask;
    explicit DeviceTokens(const Tokens& tk)
        : off(tk.off), logp(tk.logp), old_logp(tk.old_logp), adv(tk.adv), ref(tk.ref), mask(tk.mask) {}
};

static LossResult loss_cuda(const drmas_loss_config& c, const Tokens& tk, const DeviceTokens& d, bool with_ref) {
    LossResult r;
    DeviceArray<float> grad(std::vector<float>(tk.num_tokens, 12345.0f));
    DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, -777.0));
    r.status = drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &c, (int64_t)tk.off.size() - 1, d.off.get(), tk.num_tokens,
                                      d.logp.get(), d.old_logp.get(), d.adv.get(), with_ref ? d.ref.get() : nullptr,
                                      tk.mask.empty() ? nullptr : d.mask.get(), grad.get(), sums.get(), nullptr);
    r.message = drmas_last_error();
    if (sync_ok("clipped_loss")) {
        r.grad = grad.download();
        r.sums = sums.download();
    }
    return r;
}

static void compare_loss(const std::string& name, const drmas_loss_config& c, const Tokens& tk,
                         const DeviceTokens& d, bool with_ref, bool check_determinism) {
    static const char* kls[] = {"none", "k1", "k2", "k3"};
    const std::string what = format("clipped_loss %s per_row_mean=%d normalizer=%g kl=%s%s dual=%g", name.c_str(),
                                    c.per_row_mean, c.normalizer, kls[c.kl_type], with_ref ? "" : "(no ref)", c.dual_clip);
    const LossResult cpu = loss_cpu(c, tk, with_ref);
    const LossResult gpu = loss_cuda(c, tk, d, with_ref);
    check(cpu.status == DRMAS_OK, "%s: CPU status %d: %s", what.c_str(), cpu.status, cpu.message.c_str());
    check(gpu.status == DRMAS_OK, "%s: CUDA status %d: %s", what.c_str(), gpu.status, gpu.message.c_str());
    if (cpu.status != DRMAS_OK || gpu.status != DRMAS_OK || gpu.sums.size() != DRMAS_LOSS_SUMS) return;
    compare(what + " grad", gpu.grad, cpu.grad, 1e-5, 1e-5);

    // Masked tokens and tokens outside every row get exactly 0, NaN padding or not.
    int64_t nonzero = 0;
    for (int64_t t = 0; t < tk.num_tokens; ++t) {
        const bool in_rows = t >= tk.off.front() && t < tk.off.back();
        const bool valid = in_rows && (tk.mask.empty() || tk.mask[t] != 0);
        if (!valid && gpu.grad[t] != 0.0f) ++nonzero;
    }
    check(nonzero == 0, "%s: %lld masked or row-less tokens have a nonzero CUDA grad", what.c_str(), (long long)nonzero);

    static const char* fields[] = {"loss", "pg_loss", "kl_loss", "tokens", "clipped", "clipped_lower", "ppo_kl", "kl"};
    const std::vector<double> mag = sum_magnitudes(c, tk, with_ref);
    for (int k = 0; k < DRMAS_LOSS_SUMS; ++k) {
        const bool count = k == DRMAS_LOSS_TOKENS || k == DRMAS_LOSS_CLIPPED || k == DRMAS_LOSS_CLIPPED_LOWER;
        compare(what + " sums." + fields[k], std::vector<double>{gpu.sums[k]}, std::vector<double>{cpu.sums[k]},
                count ? 0.0 : 1e-12 + 1e-5 * mag[k], count ? 0.0 : 1e-9);
    }
    if (check_determinism) {
        const LossResult again = loss_cuda(c, tk, d, with_ref);
        check(again.status == DRMAS_OK && again.sums.size() == gpu.sums.size() &&
                  memcmp(again.sums.data(), gpu.sums.data(), gpu.sums.size() * sizeof(double)) == 0 &&
                  again.grad.size() == gpu.grad.size() &&
                  memcmp(again.grad.data(), gpu.grad.data(), gpu.grad.size() * sizeof(float)) == 0,
              "%s: a second CUDA run is not bitwise identical", what.c_str());
    }
}

static void test_clipped_loss(std::mt19937_64& rng) {
    struct Case {
        std::string name;
        Tokens tk;
        bool all_configs;
    };
    std::vector<Case> cases;
    cases.push_back({"1 row 1 token", make_tokens({0, 1}, 1, false, rng), true});
    cases.push_back({"no rows", make_tokens({2}, 5, false, rng), true});
    {
        // Every config on these: a prime row count (211 at the small scale, still > 3 blocks of rows).
        const int64_t rows = scaled(1009, 211);
        const std::vector<int64_t> off = random_offsets(rows, 13, 3, rng);
        cases.push_back({format("%lld rows, gaps, NaN-padded mask", (long long)rows), make_tokens(off, off.back() + 7, true, rng), true});
        cases.push_back({format("%lld rows, gaps, no mask", (long long)rows), make_tokens(off, off.back() + 7, false, rng), true});
    }
    cases.push_back({"1 row 65537 tokens", make_tokens({0, 65537}, 65537, false, rng), true});
    {
        // rows from token 0 and tokens after the last row (their gradient is 0: zeroed by the call)
        const std::vector<int64_t> off = random_offsets(37, 20, 0, rng);
        cases.push_back({"rows from token 0, tokens after them, mask", make_tokens(off, off.back() + 5, true, rng), true});
    }
    cases.push_back({"rows of masked tokens only", make_tokens({0, 3, 3, 9}, 9, true, rng), true});
    for (auto& m : cases.back().tk.mask) m = 0;
    {
        const int64_t rows = scaled(10000, 307);
        const std::vector<int64_t> off = random_offsets(rows, 199, 0, rng);
        cases.push_back({format("%lld rows %lld tokens, mask", (long long)rows, (long long)off.back()),
                         make_tokens(off, off.back(), true, rng), false});
    }
    {
        // rows on both sides of the warp's limit (2048 tokens) and of the 256-token chunks, in one
        // group of 8 rows and across groups: warp rows and block rows in one launch
        const std::vector<int64_t> lens = {0, 1, 255, 256, 257, 2047, 2048, 2049, 3, 5000, 700, 2};
        std::vector<int64_t> off = {4};
        for (int64_t l : lens) off.push_back(off.back() + l);
        cases.push_back({"rows around the warp and chunk sizes, mask", make_tokens(off, off.back() + 3, true, rng), false});
    }
    for (const Case& cs : cases) {
        // "rows of masked tokens only": clear the NaN-free values that make_tokens wrote for
        // the now-masked tokens, so that padding is NaN there too.
        Tokens tk = cs.tk;
        if (!tk.mask.empty())
            for (int64_t t = 0; t < tk.num_tokens; ++t)
                if (tk.mask[t] == 0) tk.logp[t] = tk.old_logp[t] = tk.adv[t] = tk.ref[t] = nan_f();
        const DeviceTokens d(tk);
        for (int agg = kTokenMean; agg <= kSeqMeanTokenSumNorm; ++agg)
            for (int kl = 0; kl <= 3; ++kl)
                for (int dual = 0; dual <= 1; ++dual) {
                    if (!cs.all_configs && kl != DRMAS_KL_K3 && kl != DRMAS_KL_NONE) continue;
                    const drmas_loss_config c = loss_config(agg, kl, dual != 0, tk);
                    // a second run bit for bit: the last block's reduction must not depend on which block is last
                    compare_loss(cs.name, c, tk, d, true, agg == kSeqMeanTokenMean || (agg == 0 && dual == 1));
                    if (kl == DRMAS_KL_NONE) compare_loss(cs.name, c, tk, d, false, false);
                }
    }
}

// Ratios on the clip bounds: logp - old_logp chosen so that the fp32 ratio is each bound (1 -
// eps_low, 1 + eps_high, the dual clip c) or 1-3 ulp either side, and also k3's e^x next to its
// +-10 clamp. Both backends round an fp64 exponential to fp32 (drmas_math.h), so the gradient
// and the clip counts must agree exactly; with fp32 expf they differed wherever an ulp moved a
// ratio across a bound. (Emulation uses the host's exp on both sides and cannot show this; a GPU can.)
static void test_clip_bounds() {
    const float lo = (float)(1.0 - kClipLow), hi = (float)(1.0 + kClipHigh), dual = (float)kDualClip;
    // x* with e^x - x - 1 = 10 (k3's clamp), by Newton's method; ref - logp steps across it by ulps
    double xs = 2.6;
    for (int it = 0; it < 50; ++it) xs -= (exp(xs) - xs - 11.0) / (exp(xs) - 1.0);
    const float xstar = (float)xs, xulp = nextafterf(xstar, INFINITY) - xstar;
    std::vector<float> logp, old, adv, ref;
    for (float bound : {lo, hi, dual}) {
        // every float d near log(bound) whose ratio lands within 3 ulp of the bound
        const float d0 = logf(bound);
        float d = d0;
        for (int k = 0; k < 400; ++k) d = nextafterf(d, -INFINITY);
        for (int k = 0; k < 800; ++k, d = nextafterf(d, INFINITY)) {
            const float ratio = (float)exp((double)d);
            float below = bound, above = bound;
            bool near = ratio == bound;
            for (int u = 0; u < 3 && !near; ++u) {
                below = nextafterf(below, 0.0f);
                above = nextafterf(above, INFINITY);
                near = ratio == below || ratio == above;
            }
            if (!near) continue;
            for (float a : {1.0f, -1.0f, 0.37f, -2.5f}) {
                logp.push_back(d);  // old_logp 0: logp - old_logp is d exactly
                old.push_back(0.0f);
                adv.push_back(a);
                ref.push_back(d + (xstar + (float)((int)(ref.size() % 9) - 4) * xulp));
            }
        }
    }
    const int64_t n = (int64_t)logp.size();
    Tokens tk;
    tk.num_tokens = n;
    for (int64_t t = 0; t <= n; t += 7) tk.off.push_back(t);
    if (tk.off.back() != n) tk.off.push_back(n);
    tk.logp = logp;
    tk.old_logp = old;
    tk.adv = adv;
    tk.ref = ref;
    const DeviceTokens dt(tk);
    for (int kl : {DRMAS_KL_NONE, DRMAS_KL_K3})
        for (int dual_on = 0; dual_on <= 1; ++dual_on) {
            const drmas_loss_config c = loss_config(kTokenMean, kl, dual_on != 0, tk);
            const std::string what = format("clip bounds (%lld tokens) kl=%s dual=%d", (long long)n,
                                            kl == DRMAS_KL_K3 ? "k3" : "none", dual_on);
            const LossResult cpu = loss_cpu(c, tk, kl != DRMAS_KL_NONE);
            const LossResult gpu = loss_cuda(c, tk, dt, kl != DRMAS_KL_NONE);
            check(cpu.status == DRMAS_OK && gpu.status == DRMAS_OK, "%s: status %d / %d", what.c_str(), cpu.status,
                  gpu.status);
            if (cpu.status != DRMAS_OK || gpu.status != DRMAS_OK || gpu.sums.size() != DRMAS_LOSS_SUMS) continue;
            compare(what + " grad (exact)", gpu.grad, cpu.grad, 0, 0);
            for (int k : {DRMAS_LOSS_TOKENS, DRMAS_LOSS_CLIPPED, DRMAS_LOSS_CLIPPED_LOWER})
                compare(what + format(" sums[%d] (exact)", k), std::vector<double>{gpu.sums[k]},
                        std::vector<double>{cpu.sums[k]}, 0, 0);
        }
    check(n > 100, "clip bounds: only %lld tokens near the bounds", (long long)n);
}

// ---- 5. errors: same status and message as the CPU, outputs untouched ----------------

static void expect_error(const std::string& what, int32_t want, int32_t cpu_st, const std::string& cpu_msg,
                         int32_t gpu_st, const std::string& gpu_msg, bool untouched) {
    check(cpu_st == want, "%s: CPU status %d, expected %d (%s)", what.c_str(), cpu_st, want, cpu_msg.c_str());
    check(gpu_st == want, "%s: CUDA status %d, expected %d (%s)", what.c_str(), gpu_st, want, gpu_msg.c_str());
    check(!gpu_msg.empty() && gpu_msg == cpu_msg, "%s: CUDA message \"%s\" differs from the CPU's \"%s\"", what.c_str(),
          gpu_msg.c_str(), cpu_msg.c_str());
    check(untouched, "%s: CUDA wrote to an output buffer before failing", what.c_str());
}

static void stats_error(const std::string& what, int32_t want, const std::vector<float>& v,
                        const std::vector<int32_t>& ids, int64_t S) {
    std::vector<int64_t> c(S, -777);
    std::vector<double> m(S, -777.0), m2(S, -777.0), sd(S, -777.0);
    const int32_t cst = drmas_segment_stats_f32(DRMAS_DEVICE_CPU, (int64_t)v.size(), v.data(), ids.data(), S, 1,
                                                c.data(), m.data(), m2.data(), sd.data(), nullptr);
    const std::string cmsg = drmas_last_error();
    DeviceArray<float> dv(v);
    DeviceArray<int32_t> di(ids);
    DeviceArray<int64_t> dc(c);
    DeviceArray<double> dm(m), d2(m2), ds(sd);
    const int32_t gst = drmas_segment_stats_f32(DRMAS_DEVICE_CUDA, (int64_t)v.size(), dv.get(), di.get(), S, 1,
                                                dc.get(), dm.get(), d2.get(), ds.get(), nullptr);
    const std::string gmsg = drmas_last_error();
    sync_ok(what);
    const bool untouched = all_equal(dc.download(), (int64_t)-777) && all_equal(dm.download(), -777.0) &&
                           all_equal(d2.download(), -777.0) && all_equal(ds.download(), -777.0);
    expect_error("segment_stats " + what, want, cst, cmsg, gst, gmsg, untouched);
}

static void advantage_error(const std::string& what, int32_t want, const Rows& r, int pooling) {
    const drmas_norm_config c = norm_config(kDrmas, pooling, 0, 1, 1);
    const AdvResult cpu = advantage_cpu(c, r, true);
    const DeviceRows d(r);
    const AdvResult gpu = advantage_cuda(c, r, d, true);
    const bool untouched = all_equal(gpu.adv, -777.0f) && all_equal(gpu.diag, -777.0) &&
                           gpu.adv.size() == r.s.size();
    expect_error("advantage " + what, want, cpu.status, cpu.message, gpu.status, gpu.message, untouched);
}

static void offsets_error(const std::string& what, int32_t want, const std::vector<int64_t>& off, int64_t num_tokens) {
    const int64_t rows = (int64_t)off.size() - 1;
    const std::vector<float> values(rows, 1.0f);
    // broadcast
    {
        std::vector<float> out(num_tokens, -777.0f);
        const int32_t cst = drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, rows, values.data(), off.data(), num_tokens,
                                                     out.data(), nullptr);
        const std::string cmsg = drmas_last_error();
        DeviceArray<float> dv(values), dout(out);
        DeviceArray<int64_t> doff(off);
        const int32_t gst = drmas_broadcast_rows_f32(DRMAS_DEVICE_CUDA, rows, dv.get(), doff.get(), num_tokens,
                                                     dout.get(), nullptr);
        const std::string gmsg = drmas_last_error();
        sync_ok(what);
        expect_error("broadcast " + what, want, cst, cmsg, gst, gmsg, all_equal(dout.download(), -777.0f));
    }
    // clipped loss
    {
        Tokens tk;
        tk.off = off;
        tk.num_tokens = num_tokens;
        tk.logp.assign(num_tokens, 0.0f);
        tk.old_logp.assign(num_tokens, 0.0f);
        tk.adv.assign(num_tokens, 1.0f);
        tk.ref.assign(num_tokens, 0.0f);
        drmas_loss_config c = loss_config(kTokenMean, DRMAS_KL_K3, true, tk);
        c.normalizer = 1.0;
        const LossResult cpu = loss_cpu(c, tk, true);
        const DeviceTokens d(tk);
        const LossResult gpu = loss_cuda(c, tk, d, true);
        const bool untouched = all_equal(gpu.grad, 12345.0f) && all_equal(gpu.sums, -777.0) &&
                               gpu.sums.size() == DRMAS_LOSS_SUMS;
        expect_error("clipped_loss " + what, want, cpu.status, cpu.message, gpu.status, gpu.message, untouched);
    }
}

static void test_errors(std::mt19937_64& rng) {
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(1009);
    for (auto& x : v) x = normal(rng);
    std::vector<int32_t> ids(1009);
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = (int32_t)(i % 17);
    const float inf = std::numeric_limits<float>::infinity();
    {
        auto bad = ids;
        bad[700] = -1;
        bad[500] = 17;
        stats_error("id out of range", DRMAS_ERR_RANGE, v, bad, 17);
        // Two bad rows in one warp (rows 32..63): the lower one is reported.
        bad = ids;
        bad[45] = 17;
        bad[40] = -1;
        stats_error("two bad ids in one warp", DRMAS_ERR_RANGE, v, bad, 17);
        auto badv = v;
        badv[62] = nan_f();
        badv[33] = inf;
        stats_error("two non-finite values in one warp", DRMAS_ERR_NONFINITE, badv, ids, 17);
    }
    {
        auto badv = v;
        auto badi = ids;
        badv[300] = nan_f();
        badi[500] = 99;
        stats_error("NaN value before a bad id", DRMAS_ERR_NONFINITE, badv, badi, 17);
        badv[300] = -inf;
        stats_error("-inf value", DRMAS_ERR_NONFINITE, badv, badi, 17);
        badi[300] = 17;
        stats_error("bad id and NaN in one row", DRMAS_ERR_RANGE, badv, badi, 17);
    }

    const Rows r = rollout_rows(20, 4, 3, 3, false, 0, 0, rng);
    const int64_t n = (int64_t)r.s.size();
    {
        // advantages in place of the device scores: refused before any launch, the scores kept
        const DeviceRows d(r);
        const drmas_norm_config c = norm_config(0, 0, 0, 1, 1);
        for (int trusted = 0; trusted <= 1; ++trusted) {
            const int32_t st = (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(
                DRMAS_DEVICE_CUDA, &c, n, d.s.get(), d.uid.get(), d.traj.get(), d.agent.get(), r.U, r.T, r.K,
                d.s.get(), nullptr, nullptr);
            check(st == DRMAS_ERR_CONFIG && strstr(drmas_last_error(), "advantages overlaps scores") != nullptr,
                  "%s advantages in place of the scores: status %d: %s", trusted ? "trusted" : "validated", st, drmas_last_error());
            if (sync_ok("in place")) compare("scores after a refused in-place call", d.s.download(), r.s, 0, 0);
        }
    }
    for (int pool = 0; pool <= 1; ++pool) {
        const std::string p = pool == DRMAS_POOL_TRAJECTORIES ? " (traj pooling)" : " (row pooling)";
        Rows b = r;
        b.uid[n / 2] = (int32_t)r.U;
        b.uid[n - 1] = -3;
        advantage_error("uid out of range" + p, DRMAS_ERR_RANGE, b, pool);
        b = r;  // one row bad three ways: named as the CPU names it (its uid first, then agent, then score)
        b.s[n / 2] = nan_f();
        b.agent[n / 2] = (int32_t)r.K;
        b.uid[n / 2] = (int32_t)r.U;
        advantage_error("uid, agent and score bad in one row" + p, DRMAS_ERR_RANGE, b, pool);
        b.uid[n / 2] = 0;
        advantage_error("agent and score bad in one row" + p, DRMAS_ERR_RANGE, b, pool);
        b = r;
        b.agent[n / 3] = (int32_t)r.K;
        advantage_error("agent out of range" + p, DRMAS_ERR_RANGE, b, pool);
        b = r;
        b.s[n / 4] = nan_f();
        b.agent[n / 3] = -1;
        advantage_error("NaN score" + p, DRMAS_ERR_NONFINITE, b, pool);
        b.s[n / 4] = inf;
        advantage_error("+inf score" + p, DRMAS_ERR_NONFINITE, b, pool);
        b = r;
        b.agent[70] = -2;
        b.uid[66] = (int32_t)r.U + 5;
        b.s[68] = nan_f();
        advantage_error("three bad rows in one warp" + p, DRMAS_ERR_RANGE, b, pool);
    }
    {
        Rows b = r;
        b.traj[n / 2] = (int32_t)r.T;
        advantage_error("traj out of range", DRMAS_ERR_RANGE, b, DRMAS_POOL_TRAJECTORIES);
        // Row pooling ignores traj.
        const drmas_norm_config c = norm_config(kDrmas, DRMAS_POOL_ROWS, 0, 1, 1);
        const DeviceRows d(b);
        const AdvResult gpu = advantage_cuda(c, b, d, false);
        check(gpu.status == DRMAS_OK, "advantage: row pooling must ignore traj: %d %s", gpu.status, gpu.message.c_str());
    }
    {
        // Row 9 of uid 1 claims trajectory 2, which rows of uid 0 put in uid 0 first.
        Rows b = r;
        const int64_t i = std::find(b.uid.begin(), b.uid.end(), 1) - b.uid.begin() + 1;
        b.traj[i] = b.traj[0];
        advantage_error("trajectory in two uids", DRMAS_ERR_INCONSISTENT, b, DRMAS_POOL_TRAJECTORIES);
        b.s[i + 1] = nan_f();
        advantage_error("trajectory in two uids before a NaN", DRMAS_ERR_INCONSISTENT, b, DRMAS_POOL_TRAJECTORIES);
        b.s[i - 1] = nan_f();
        advantage_error("NaN before a trajectory in two uids", DRMAS_ERR_NONFINITE, b, DRMAS_POOL_TRAJECTORIES);
        // Shuffled: the last row takes the trajectory of an earlier row of another uid.
        Rows sh = shuffled(r, rng);
        int64_t j = 0;
        while (sh.uid[j] == sh.uid[n - 1]) ++j;
        sh.traj[n - 1] = sh.traj[j];
        advantage_error("trajectory in two uids, unsorted", DRMAS_ERR_INCONSISTENT, sh, DRMAS_POOL_TRAJECTORIES);
    }

    offsets_error("decreasing offsets", DRMAS_ERR_RANGE, {0, 4, 9, 7, 12}, 12);
    offsets_error("decreasing at the first pair", DRMAS_ERR_RANGE, {5, 4, 9}, 12);
    offsets_error("negative first offset", DRMAS_ERR_RANGE, {-1, 4, 9}, 12);
    offsets_error("offsets past num_tokens", DRMAS_ERR_RANGE, {0, 4, 13}, 12);
    offsets_error("decrease and past the end", DRMAS_ERR_RANGE, {0, 40, 9}, 12);

    // A host pointer passed to the CUDA backend is refused before anything runs.
    {
        DeviceArray<int32_t> di(ids);
        DeviceArray<int64_t> dc(std::vector<int64_t>(17, -777));
        DeviceArray<double> dm(17), d2(17);
        const int32_t st = drmas_segment_stats_f32(DRMAS_DEVICE_CUDA, (int64_t)v.size(), v.data(), di.get(), 17, 1,
                                                   dc.get(), dm.get(), d2.get(), nullptr, nullptr);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_CONFIG && msg.find("argument 'values' is not a device pointer") != std::string::npos,
              "segment_stats with host values: status %d, message \"%s\"", st, msg.c_str());
        check(all_equal(dc.download(), (int64_t)-777), "segment_stats with host values wrote its output");
    }
    {
        const Tokens tk = make_tokens({0, 3, 5}, 5, false, rng);
        const DeviceTokens d(tk);
        DeviceArray<float> grad(std::vector<float>(5, 12345.0f));
        std::vector<double> host_sums(DRMAS_LOSS_SUMS, -777.0);
        const drmas_loss_config c = loss_config(kTokenMean, DRMAS_KL_NONE, false, tk);
        const int32_t st = drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &c, 2, d.off.get(), 5, d.logp.get(),
                                                  d.old_logp.get(), d.adv.get(), nullptr, nullptr, grad.get(),
                                                  host_sums.data(), nullptr);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_CONFIG && msg.find("argument 'sums' is not a device pointer") != std::string::npos,
              "clipped_loss with host sums: status %d, message \"%s\"", st, msg.c_str());
        check(all_equal(grad.download(), 12345.0f) && all_equal(host_sums, -777.0),
              "clipped_loss with host sums wrote an output");
    }
    {
        const std::vector<int64_t> off = {0, 2};
        std::vector<float> out(2, -777.0f);
        DeviceArray<float> dv(std::vector<float>{1.0f});
        const int32_t st = drmas_broadcast_rows_f32(DRMAS_DEVICE_CUDA, 1, dv.get(), off.data(), 2, out.data(), nullptr);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_CONFIG && msg.find("argument 'row_offsets' is not a device pointer") != std::string::npos,
              "broadcast with host offsets: status %d, message \"%s\"", st, msg.c_str());
    }
}

// ---- 6. devices and the async loss -----------------------------------------------------

// Rows of explicit shapes: runs[u] lists the lengths of uid u's trajectories (ids 0, 1, 2, ... in row
// order), agents in turn over K, scores drawn in [-1, 2).
static Rows shaped_rows(const std::vector<std::vector<int>>& runs, int64_t K, std::mt19937_64& rng) {
    Rows r;
    r.K = K;
    std::uniform_real_distribution<float> score(-1.0f, 2.0f);
    int32_t t = 0;
    for (size_t u = 0; u < runs.size(); ++u)
        for (int len : runs[u]) {
            for (int j = 0; j < len; ++j) {
                r.s.push_back(score(rng));
                r.uid.push_back((int32_t)u);
                r.traj.push_back(t);
                r.agent.push_back((int32_t)(r.s.size() % (size_t)K));
            }
            ++t;
        }
    r.U = (int64_t)runs.size();
    r.T = t;
    return r;
}

// The validation kernel's order check decides whether the one-pass kernel runs, and gates the
// trajectory checks; each warp's lane 0 takes the row before it from memory. So: rows sorted but
// for one place, at a warp's first row (row 64) and inside a warp, (a) valid rows out of order — a
// uid run after a larger uid, a trajectory interrupted by another of its uid — must give the
// CPU's advantages through both entries, with and without diagnostics; (b) a trajectory that goes on
// across a uid change with the ids in order (only "same trajectory, new uid" sees it) must be an
// error of both backends, with and without diagnostics.
static void test_advantage_order_edges(std::mt19937_64& rng) {
    for (int at : {64, 62}) {
        const int lead = at - 32;  // run 1 ends at row `at`: runs 0 and 1 cover rows [0, at)
        // (a) uid labels of runs 1 and 2 swapped: the uid falls at row `at` only
        Rows byuid = shaped_rows({{10, 22}, {7, lead - 7}, {12, 12, 16}, {40}, {3, 5}}, 2, rng);
        for (int32_t& u : byuid.uid) u = u == 1 ? 2 : u == 2 ? 1 : u;
        // (a) uid 0's trajectory 0 goes on after trajectory 1: rows [0, 16) T0, [16, at) T1, [at, at + 16) T0
        // again (a trajectory counted twice would move the group's statistics)
        Rows bytraj = shaped_rows({{16, at - 16, 16, 20}, {9, 30}, {11}}, 2, rng);
        for (int32_t& t : bytraj.traj) t = t == 2 ? 0 : t;
        for (const Rows* r : {&byuid, &bytraj}) {
            const char* name = r == &byuid ? "a uid run after a larger uid" : "a trajectory interrupted inside its uid";
            const DeviceRows d(*r);
            for (int mode : {kDrmas, (int)kDescriptors - 1})
                for (int pool = 0; pool <= 1; ++pool) {
                    const drmas_norm_config c = norm_config(mode, pool, 0, 1, 1);
                    const AdvResult cpu = advantage_cpu(c, *r, false);
                    check(cpu.status == DRMAS_OK, "%s at row %d: CPU status %d: %s", name, at, cpu.status, cpu.message.c_str());
                    for (int variant = 0; variant < 3; ++variant) {
                        const std::string what = format("%s at row %d, %s, %s", name, at, describe(c).c_str(),
                                                        variant == 0 ? "validated" : variant == 1 ? "trusted" : "validated, diagnostics");
                        const AdvResult gpu = variant < 2 ? advantage_cuda_plain(c, *r, d, variant == 1) : advantage_cuda(c, *r, d, true);
                        check(gpu.status == DRMAS_OK, "%s: status %d: %s", what.c_str(), gpu.status, gpu.message.c_str());
                        if (gpu.status == DRMAS_OK && gpu.adv.size() == cpu.adv.size()) compare(what, gpu.adv, cpu.adv, 1e-5, 1e-5);
                    }
                }
        }
        // (b) uid 1's first trajectory takes uid 0's last trajectory id (uid 1 starts at row `at`)
        Rows across = shaped_rows({{10, at - 10}, {16, 16, 9}, {20, 21}}, 2, rng);
        for (size_t i = 0; i < across.s.size(); ++i)
            if (across.traj[i] >= 2) across.traj[i] -= 1;
        const std::string what = format("a trajectory across the uid change at row %d, ids in order", at);
        advantage_error(what, DRMAS_ERR_INCONSISTENT, across, DRMAS_POOL_TRAJECTORIES);
        const DeviceRows d(across);
        const AdvResult plain = advantage_cuda_plain(norm_config(kDrmas, DRMAS_POOL_TRAJECTORIES, 0, 1, 1), across, d, false);
        check(plain.status == DRMAS_ERR_INCONSISTENT, "%s, no diagnostics: status %d: %s", what.c_str(), plain.status,
              plain.message.c_str());
    }
}

// With several GPUs (two under emulation): arrays of device 1 while device 0 is current must run
// on device 1 (scratch and launches there; the emulator aborts a launch that mixes devices) and
// leave device 0 current; arrays of two devices in one call are an error naming both.
static void test_devices(std::mt19937_64& rng) {
    const int32_t count = drmas_cuda_device_count();
    if (count < 2) {
        printf("%d CUDA device(s): multi-device checks skipped\n", count);
        return;
    }
    const Rows r = rollout_rows(40, 4, 3, 3, false, 0, 0, rng);
    const int64_t n = (int64_t)r.s.size(), S = r.U * r.K;
    const drmas_norm_config c = norm_config(kDrmas, DRMAS_POOL_TRAJECTORIES, 0, 1, 1);
    const AdvResult cpu = advantage_cpu(c, r, true);
    const std::vector<int64_t> toff = random_offsets(50, 30, 2, rng);
    const Tokens t = make_tokens(toff, toff.back() + 3, false, rng);
    const drmas_loss_config lc = loss_config(kSeqMeanTokenMean, DRMAS_KL_K3, true, t);
    const LossResult lcpu = loss_cpu(lc, t, true);
    check(drmas_cuda_set_device(1) == DRMAS_OK, "set device 1: %s", drmas_last_error());
    {
        const DeviceRows d(r);
        DeviceArray<float> adv(std::vector<float>(n, -777.0f));
        DeviceArray<double> diag(std::vector<double>(DRMAS_DIAG_FIELDS * S, -777.0));
        const DeviceTokens dt(t);
        DeviceArray<float> grad(std::vector<float>(t.num_tokens, 12345.0f));
        DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, -777.0));
        check(drmas_cuda_set_device(0) == DRMAS_OK, "set device 0: %s", drmas_last_error());
        DeviceArray<int32_t> agent0(r.agent);  // device 0
        int32_t st = drmas_advantage_f32(DRMAS_DEVICE_CUDA, &c, n, d.s.get(), d.uid.get(), d.traj.get(), d.agent.get(),
                                         r.U, r.T, r.K, adv.get(), diag.get(), nullptr);
        check(st == DRMAS_OK, "advantage on device 1 from device 0: %d %s", st, drmas_last_error());
        int32_t cur = -1;
        check(drmas_cuda_get_device(&cur) == DRMAS_OK && cur == 0, "advantage left device %d current, not 0", cur);
        if (st == DRMAS_OK && sync_ok("advantage on device 1")) compare("advantage on device 1", adv.download(), cpu.adv, 1e-5, 1e-5);
        st = drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &lc, (int64_t)t.off.size() - 1, dt.off.get(), t.num_tokens,
                                    dt.logp.get(), dt.old_logp.get(), dt.adv.get(), dt.ref.get(), nullptr, grad.get(),
                                    sums.get(), nullptr);
        check(st == DRMAS_OK, "clipped loss on device 1 from device 0: %d %s", st, drmas_last_error());
        check(drmas_cuda_get_device(&cur) == DRMAS_OK && cur == 0, "clipped loss left device %d current, not 0", cur);
        if (st == DRMAS_OK && sync_ok("clipped loss on device 1")) compare("clipped loss on device 1", grad.download(), lcpu.grad, 1e-5, 1e-5);
        // one array on device 0, the others on device 1
        st = drmas_advantage_f32(DRMAS_DEVICE_CUDA, &c, n, d.s.get(), d.uid.get(), d.traj.get(), agent0.get(), r.U, r.T,
                                 r.K, adv.get(), nullptr, nullptr);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_CONFIG && msg.find("argument 'agent' is memory of device 0 but 'scores' is memory of device 1") != std::string::npos,
              "arrays of two devices: status %d, message \"%s\"", st, msg.c_str());
        check(drmas_cuda_get_device(&cur) == DRMAS_OK && cur == 0, "a refused call left device %d current", cur);
    }
    check(drmas_cuda_set_device(count) == DRMAS_ERR_RANGE, "set device %d (one past the last) must fail", count);
    check(drmas_cuda_set_device(0) == DRMAS_OK, "set device 0 back");
}

// drmas_cuda_check_device from a thread that has used no device yet (rank r's first CUDA call, whose
// thread's current device is 0 by default): it creates the checked device's context and no other. It
// used to make device 0 current again afterwards, which creates device 0's context: every rank of a
// node left one on GPU 0 (hundreds of MiB each). The emulator models CUDA 12's contexts; on a real
// GPU this part is skipped (a process's contexts cannot be forgotten).
static void test_check_device_contexts() {
    const int32_t count = drmas_cuda_device_count();
    if (drmas_emu_contexts == nullptr || count < 2) {
        printf("contexts: %s: skipped\n", drmas_emu_contexts == nullptr ? "not the emulator" : "one device");
        return;
    }
    uint32_t contexts = 0;
    int32_t st = -1, cur = -1;
    std::thread rank([&] {
        drmas_emu_contexts(1);  // as a fresh process: no context yet
        st = drmas_cuda_check_device(1);
        contexts = drmas_emu_contexts(0);
        (void)drmas_cuda_get_device(&cur);
    });
    rank.join();
    check(st == DRMAS_OK, "check of device 1: %s", drmas_last_error());
    check(contexts == 2u, "the check of device 1 from a fresh thread left contexts on devices 0x%x (want device 1 alone, 0x2)",
          contexts);
    check(cur == 0, "the check changed the thread's current device to %d", cur);
}

// drmas_cuda_check_device: every visible device passes (a GPU of an architecture libdrmas was
// compiled for), an ordinal outside [0, count) is DRMAS_ERR_RANGE, and the current device stays.
// With DRMAS_TEST_EXPECT_NO_IMAGE=1 (ctest cuda_emu_no_image: the emulator as a compute capability
// 7.5 GPU, which the default architectures do not cover) every device is refused, naming its
// compute capability, the compiled architectures and the one to add, and a kernel call fails.
static void test_check_device(bool expect_no_image) {
    const int32_t count = drmas_cuda_device_count();
    int32_t before = -1;
    check(drmas_cuda_get_device(&before) == DRMAS_OK, "get device: %s", drmas_last_error());
    const char* cc = getenv("DRMAS_EMU_COMPUTE_CAPABILITY");
    for (int32_t d = 0; d < count; ++d) {
        const int32_t st = drmas_cuda_check_device(d);
        const std::string msg = drmas_last_error();
        if (expect_no_image) {
            const std::string want = format("drmas_cuda_check_device: libdrmas has no CUDA kernel image for device %d "
                                            "(compute capability %s: no kernel image is available for execution on the device); "
                                            "it was compiled for the architectures ", d, cc != nullptr ? cc : "?");
            std::string arch = cc != nullptr ? cc : "";
            arch.erase(std::remove(arch.begin(), arch.end(), '.'), arch.end());
            check(st == DRMAS_ERR_UNSUPPORTED && msg.rfind(want, 0) == 0 && msg.find("rebuild it with " + arch + "-real added") != std::string::npos,
                  "check of device %d without a kernel image: status %d, message \"%s\"", d, st, msg.c_str());
        } else {
            check(st == DRMAS_OK, "check of device %d: status %d: %s", d, st, msg.c_str());
        }
        int32_t cur = -1;
        check(drmas_cuda_get_device(&cur) == DRMAS_OK && cur == before, "the check of device %d left device %d current, not %d",
              d, cur, before);
    }
    for (int32_t d : {count, -1}) {
        const int32_t st = drmas_cuda_check_device(d);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_RANGE && msg == format("drmas_cuda_check_device: device %d is not in [0, %d)", d, count),
              "check of device %d: status %d, message \"%s\"", d, st, msg.c_str());
    }
    if (expect_no_image) {
        // what a run met without the check: the first kernel call fails, with CUDA's words
        const std::vector<float> v = {1.0f, 2.0f, 3.0f};
        const std::vector<int32_t> ids = {0, 0, 1};
        DeviceArray<float> dv(v);
        DeviceArray<int32_t> di(ids);
        DeviceArray<int64_t> count2(2);
        DeviceArray<double> mean(2), m2(2);
        const int32_t st = drmas_segment_stats_f32(DRMAS_DEVICE_CUDA, 3, dv.get(), di.get(), 2, 1, count2.get(), mean.get(),
                                                   m2.get(), nullptr, nullptr);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_CUDA && msg.find("no kernel image is available for execution on the device") != std::string::npos,
              "a kernel call without a kernel image: status %d, message \"%s\"", st, msg.c_str());
    }
}

// drmas_clipped_loss_async_f32: the same results as the synchronous call, bit for bit, and the
// same refusals (host offsets checked with the CPU's messages) leaving the outputs untouched.
static void test_async_loss(std::mt19937_64& rng) {
    const std::vector<int64_t> off = random_offsets(scaled(3001, 97), 40, 3, rng);
    const Tokens tk = make_tokens(off, off.back() + 5, true, rng);
    const DeviceTokens d(tk);
    const int64_t rows = (int64_t)off.size() - 1;
    for (int agg = kTokenMean; agg <= kSeqMeanTokenSumNorm; ++agg) {
        const drmas_loss_config c = loss_config(agg, DRMAS_KL_K3, true, tk);
        const LossResult sync = loss_cuda(c, tk, d, true);
        DeviceArray<float> grad(std::vector<float>(tk.num_tokens, 12345.0f));
        DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, -777.0));
        const int32_t st = drmas_clipped_loss_async_f32(DRMAS_DEVICE_CUDA, &c, rows, off.data(), d.off.get(), tk.num_tokens,
                                                        d.logp.get(), d.old_logp.get(), d.adv.get(), d.ref.get(),
                                                        d.mask.get(), grad.get(), sums.get(), nullptr);
        check(st == DRMAS_OK, "async loss agg %d: %d %s", agg, st, drmas_last_error());
        if (st != DRMAS_OK || !sync_ok("async loss")) continue;
        const std::vector<float> g = grad.download();
        const std::vector<double> sm = sums.download();
        check(sync.grad.size() == g.size() && memcmp(g.data(), sync.grad.data(), g.size() * sizeof(float)) == 0 &&
                  memcmp(sm.data(), sync.sums.data(), sm.size() * sizeof(double)) == 0,
              "async loss agg %d: not bitwise the synchronous result", agg);
    }
    // bad host offsets: the CPU backend's verdict and message, nothing written
    const std::vector<std::vector<int64_t>> bad = {{0, 4, 9, 7, 12}, {-1, 4, 9}, {0, 4, 13}};
    for (const auto& b : bad) {
        Tokens t = make_tokens({0, 12}, 12, false, rng);
        const DeviceTokens dt(t);
        DeviceArray<int64_t> doff(b);
        const int64_t nr = (int64_t)b.size() - 1;
        const drmas_loss_config c = loss_config(kTokenMean, DRMAS_KL_NONE, true, t);
        std::vector<float> cg(12, 12345.0f);
        std::vector<double> cs(DRMAS_LOSS_SUMS, -777.0);
        const int32_t cst = drmas_clipped_loss_async_f32(DRMAS_DEVICE_CPU, &c, nr, b.data(), b.data(), 12, t.logp.data(),
                                                         t.old_logp.data(), t.adv.data(), nullptr, nullptr, cg.data(),
                                                         cs.data(), nullptr);
        const std::string cmsg = drmas_last_error();
        DeviceArray<float> grad(std::vector<float>(12, 12345.0f));
        DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, -777.0));
        const int32_t gst = drmas_clipped_loss_async_f32(DRMAS_DEVICE_CUDA, &c, nr, b.data(), doff.get(), 12, dt.logp.get(),
                                                         dt.old_logp.get(), dt.adv.get(), nullptr, nullptr, grad.get(),
                                                         sums.get(), nullptr);
        const std::string gmsg = drmas_last_error();
        sync_ok("async loss error");
        expect_error("async clipped_loss bad offsets", DRMAS_ERR_RANGE, cst, cmsg, gst, gmsg,
                     all_equal(grad.download(), 12345.0f) && all_equal(sums.download(), -777.0));
    }
    // device offsets that differ from the (valid) host copy, reaching far past the tokens or falling:
    // drmas.h says they must not; the kernel must still stay inside the arrays (the emulator faults on
    // a store past an allocation), treating such rows as empty
    {
        Tokens t = make_tokens({0, 5, 12}, 12, false, rng);
        const DeviceTokens dt(t);
        const std::vector<int64_t> host = {0, 5, 12};
        for (const std::vector<int64_t>& devoff : std::vector<std::vector<int64_t>>{{0, 5, 12 + 8192}, {0, 9, 4}, {-4096, 5, 12}}) {
            DeviceArray<int64_t> doff(devoff);
            const drmas_loss_config c = loss_config(kTokenMean, DRMAS_KL_NONE, true, t);
            DeviceArray<float> grad(std::vector<float>(12, 12345.0f));
            DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, -777.0));
            const int32_t gst = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CUDA, &c, 2, host.data(), doff.get(), 12, dt.logp.get(),
                                                            dt.old_logp.get(), dt.adv.get(), nullptr, nullptr, grad.get(), sums.get(),
                                                            nullptr);
            check(gst == DRMAS_OK && sync_ok("async loss, device offsets unlike the host's"),
                  "async loss, device offsets {%lld, %lld, %lld}: status %d %s", (long long)devoff[0], (long long)devoff[1],
                  (long long)devoff[2], gst, drmas_last_error());
        }
    }
    const int32_t st = drmas_clipped_loss_async_f32(DRMAS_DEVICE_CUDA, nullptr, 0, nullptr, d.off.get(), 0, nullptr,
                                                    nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr);
    check(st != DRMAS_OK, "async loss without a config must fail");
}

// ---- launches, memsets and waits of each path (emulation only) -------------------------

// The emulator's counters around one call: kernel launches, memsets, copies to the host and
// synchronisations (the test's own uploads and downloads are outside the window).
static EmuCounts count_delta(const EmuCounts& before, const EmuCounts& after) {
    EmuCounts d;
    for (int k = 0; k < kEmuCounters; ++k) d.c[k] = after.c[k] - before.c[k];
    return d;
}
static void print_counts(const char* path, const EmuCounts& d) {
    printf("  counts %-58s launches %llu, memsets %llu, to-host %llu, syncs %llu\n", path,
           (unsigned long long)d.c[kEmuLaunches], (unsigned long long)d.c[kEmuMemsets],
           (unsigned long long)d.c[kEmuToHost], (unsigned long long)d.c[kEmuSyncs]);
}

static void test_launch_counts(std::mt19937_64& rng) {
    if (drmas_emu_counters == nullptr) return;
    const Rows sorted = rollout_rows(40, 4, 3, 3, false, 0, 0, rng);
    const Rows unsorted = shuffled(sorted, rng);
    const int64_t n = (int64_t)sorted.s.size();
    for (int shuffle = 0; shuffle <= 1; ++shuffle) {
        const Rows& r = shuffle ? unsorted : sorted;
        const DeviceRows d(r);
        DeviceArray<float> adv(std::vector<float>(n, 0.0f));
        for (int trusted = 0; trusted <= 1; ++trusted)
            for (int pool = 0; pool <= 1; ++pool) {
                const drmas_norm_config c = norm_config(kDrmas, pool, 0, 1, 1);
                const int32_t* traj = pool == DRMAS_POOL_ROWS ? nullptr : d.traj.get();
                const EmuCounts before = emu_counts();
                const int32_t st = (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(
                    DRMAS_DEVICE_CUDA, &c, n, d.s.get(), d.uid.get(), traj, d.agent.get(), r.U, r.T, r.K, adv.get(),
                    nullptr, nullptr);
                const EmuCounts delta = count_delta(before, emu_counts());
                check(st == DRMAS_OK, "counts: status %d %s", st, drmas_last_error());
                sync_ok("counts");
                print_counts(format("advantages %s, %s rows, %s pooling", trusted ? "trusted" : "validated",
                                    shuffle ? "shuffled" : "sorted", pool == DRMAS_POOL_ROWS ? "row" : "trajectory")
                                 .c_str(),
                             delta);
                // sorted rows, validated: the validation kernel and the one-pass kernel, after one wait
                if (!shuffle && !trusted && pool == DRMAS_POOL_ROWS)
                    check(delta.c[kEmuLaunches] == 2 && delta.c[kEmuSyncs] == 1, "counts: sorted rows took %llu launches",
                          (unsigned long long)delta.c[kEmuLaunches]);
                if (trusted)
                    check(delta.c[kEmuSyncs] + delta.c[kEmuToHost] == 0, "counts: the trusted entry waited");
            }
    }
    // a uid run of 4096 rows is the one-pass kernel's (validation and it: two launches under row
    // pooling), one of 4097 rows the multi-kernel path's
    for (int64_t longest : {4096, 4097}) {
        const Rows r = sorted_runs({30, longest, 30}, 2, 50, 0, rng, nullptr);
        const DeviceRows d(r);
        DeviceArray<float> adv(std::vector<float>(r.s.size(), 0.0f));
        const drmas_norm_config c = norm_config(kDrmas, DRMAS_POOL_ROWS, 0, 1, 1);
        const EmuCounts before = emu_counts();
        const int32_t st = drmas_advantage_f32(DRMAS_DEVICE_CUDA, &c, (int64_t)r.s.size(), d.s.get(), d.uid.get(), nullptr,
                                               d.agent.get(), r.U, r.T, r.K, adv.get(), nullptr, nullptr);
        const EmuCounts delta = count_delta(before, emu_counts());
        check(st == DRMAS_OK && sync_ok("counts long run"), "counts: long run status %d %s", st, drmas_last_error());
        print_counts(format("advantages validated, sorted, a run of %lld rows", (long long)longest).c_str(), delta);
        if (longest == 4096)
            check(delta.c[kEmuLaunches] == 2, "counts: a run of 4096 rows took %llu launches (one-pass: 2)",
                  (unsigned long long)delta.c[kEmuLaunches]);
        else
            check(delta.c[kEmuLaunches] > 2, "counts: a run of 4097 rows took %llu launches (the multi-kernel path)",
                  (unsigned long long)delta.c[kEmuLaunches]);
    }
    const std::vector<int64_t> off = random_offsets(300, 40, 0, rng);
    const Tokens tk = make_tokens(off, off.back(), true, rng);
    const DeviceTokens d(tk);
    const drmas_loss_config c = loss_config(kSeqMeanTokenMean, DRMAS_KL_K3, true, tk);
    DeviceArray<float> grad(std::vector<float>(tk.num_tokens, 0.0f));
    DeviceArray<double> sums(std::vector<double>(DRMAS_LOSS_SUMS, 0.0));
    const int64_t rows = (int64_t)off.size() - 1;
    EmuCounts before = emu_counts();
    int32_t st = drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &c, rows, d.off.get(), tk.num_tokens, d.logp.get(),
                                        d.old_logp.get(), d.adv.get(), d.ref.get(), d.mask.get(), grad.get(), sums.get(),
                                        nullptr);
    print_counts("loss, device offsets", count_delta(before, emu_counts()));
    check(st == DRMAS_OK && sync_ok("counts loss"), "counts: loss status %d", st);
    before = emu_counts();
    st = drmas_clipped_loss_async_f32(DRMAS_DEVICE_CUDA, &c, rows, off.data(), d.off.get(), tk.num_tokens, d.logp.get(),
                                      d.old_logp.get(), d.adv.get(), d.ref.get(), d.mask.get(), grad.get(), sums.get(),
                                      nullptr);
    print_counts("loss, host-validated offsets", count_delta(before, emu_counts()));
    check(st == DRMAS_OK && sync_ok("counts async loss"), "counts: async loss status %d", st);
}

// A GPU-sized case: more rows than one grid-stride pass covers (kMaxGrid x kBlockSize = 2^21),
// so that the row kernels take their second and third iterations with the real grid cap.
static void test_grid_stride(std::mt19937_64& rng) {
    if (g_small) return;  // emulated: cuda_emu_grid3 (DRMAS_CUDA_MAX_GRID=3) covers the loops
    const int64_t n = 2 * 8192 * 256 + 1009, S = 4099;
    std::vector<float> v(n);
    std::vector<int32_t> ids(n);
    std::normal_distribution<float> normal(1.0f, 3.0f);
    std::uniform_int_distribution<int32_t> id(0, (int32_t)S - 1);
    for (int64_t i = 0; i < n; ++i) {
        v[i] = normal(rng);
        ids[i] = id(rng);
    }
    compare_stats("n=2^22+1009 (3 grid-stride passes)", v, ids, S, 1, true);
    const Rows big = rollout_rows(120000, 6, 3, 3, false, 0, 0, rng);
    check((int64_t)big.s.size() > 2 * 8192 * 256, "grid-stride rollout has only %zu rows", big.s.size());
    const DeviceRows d(big);
    for (int mode = 0; mode < kDescriptors; ++mode)
        compare_advantage(format("rollout n=%zu (several grid-stride passes)", big.s.size()),
                          norm_config(mode, DRMAS_POOL_TRAJECTORIES, 0, 1, 1), big, d);
}


// ---- fused LM head: CUDA against the CPU ----------------------------------------------
// Rows that do not start at token 0 nor end at the last one, an empty row, a masked token with an
// invalid target, a vocabulary of one block's width and one of several, chunks that do not divide
// the tokens: log-probs, entropies, dL/dz and the sums agree with the CPU's to rounding (expf
// differs); one chunk of all tokens gives the CUDA clipped-loss kernel's sums bit for bit on the
// CUDA log-probs; the errors are the CPU's, with untouched outputs.
static void test_lmhead(std::mt19937_64& rng) {
    const int64_t T = 23;
    const std::vector<int64_t> off = {1, 6, 6, 13, 21};
    const std::vector<float> adv_row = {1.3f, -0.7f, 0.4f, -2.1f};
    for (int64_t V : {37, 700}) {
        std::normal_distribution<float> nd(0.0f, 2.0f);
        std::uniform_int_distribution<int64_t> yd(0, V - 1);
        std::vector<float> z((size_t)(T * V)), old((size_t)T), ref((size_t)T), adv_tok((size_t)T, 0.0f);
        for (int64_t i = 0; i < T * V; ++i) z[(size_t)i] = nd(rng) + 6.0f * (float)(i % V) / (float)V;
        std::vector<int64_t> y((size_t)T);
        for (auto& v : y) v = yd(rng);
        std::vector<uint8_t> mask((size_t)T, 1);
        mask[8] = 0;
        std::vector<float> lp_cpu((size_t)T);
        drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, T, V, z.data(), y.data(), lp_cpu.data(), nullptr, nullptr);
        std::normal_distribution<float> dd(0.0f, 0.3f);
        for (int64_t t = 0; t < T; ++t) {
            old[(size_t)t] = lp_cpu[(size_t)t] + dd(rng);
            ref[(size_t)t] = lp_cpu[(size_t)t] + dd(rng);
        }
        for (int r = 0; r < 4; ++r)
            for (int64_t t = off[(size_t)r]; t < off[(size_t)r + 1]; ++t) adv_tok[(size_t)t] = adv_row[(size_t)r];
        y[8] = V + 3;  // masked: never read
        y[0] = -1;     // outside every row
        DeviceArray<float> dz_all(z), dold(old), dref(ref), dadv(adv_row), dadv_tok(adv_tok);
        DeviceArray<int64_t> doff(off), dy(y);
        DeviceArray<uint8_t> dmask(mask);
        // forward only (all targets in range)
        std::vector<int64_t> y_ok(y);
        for (auto& v : y_ok) v = std::min<int64_t>(std::max<int64_t>(v, 0), V - 1);
        DeviceArray<int64_t> dy_ok(y_ok);
        std::vector<float> lpc((size_t)T), entc((size_t)T);
        check(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, T, V, z.data(), y_ok.data(), lpc.data(), entc.data(), nullptr) == 0, "cpu logprobs");
        DeviceArray<float> dlp((size_t)T), dent((size_t)T);
        const int32_t st0 = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CUDA, T, V, dz_all.get(), dy_ok.get(), dlp.get(), dent.get(), nullptr);
        check(st0 == 0, "cuda lmhead_logprobs V %lld: %d %s", (long long)V, st0, drmas_last_error());
        if (sync_ok("lmhead_logprobs")) {
            compare(format("lmhead_logprobs V %lld logp", (long long)V), dlp.download(), lpc, 1e-5, 1e-5);
            compare(format("lmhead_logprobs V %lld entropy", (long long)V), dent.download(), entc, 1e-5, 1e-5);
        }
        for (int kl = DRMAS_KL_NONE; kl <= DRMAS_KL_K3; kl += 3)
            for (int prm = 0; prm <= 1; ++prm) {
                const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.05, 7.0, 0.01, kl, prm};
                for (int64_t cs : {(int64_t)7, T}) {
                    std::vector<float> zc(z), lpo((size_t)T), ento((size_t)T);
                    DeviceArray<float> dzc(z), dlpo((size_t)T), dento((size_t)T);
                    std::vector<double> tot_c(DRMAS_LMHEAD_SUMS, 0.0), tot_g(DRMAS_LMHEAD_SUMS, 0.0);
                    for (int64_t c0 = 0; c0 < T; c0 += cs) {
                        const int64_t n = std::min(cs, T - c0);
                        double sc[DRMAS_LMHEAD_SUMS];
                        check(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, off.data(), T, c0, n, V, &zc[(size_t)(c0 * V)], y.data(),
                                                     old.data(), adv_row.data(), ref.data(), mask.data(), &lpo[(size_t)c0], &ento[(size_t)c0],
                                                     sc, nullptr) == 0, "cpu chunk: %s", drmas_last_error());
                        DeviceArray<double> dsums(DRMAS_LMHEAD_SUMS);
                        const int32_t st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CUDA, &hc, 4, doff.get(), T, c0, n, V, dzc.get() + c0 * V, dy.get(),
                                                                  dold.get(), dadv.get(), dref.get(), dmask.get(), dlpo.get() + c0, dento.get() + c0,
                                                                  dsums.get(), nullptr);
                        check(st == 0, "cuda lmhead_chunk: %d %s", st, drmas_last_error());
                        const std::vector<double> sg = dsums.download();
                        for (int k = 0; k < DRMAS_LMHEAD_SUMS; ++k) {
                            tot_c[(size_t)k] += sc[k];
                            tot_g[(size_t)k] += sg[(size_t)k];
                        }
                    }
                    if (!sync_ok("lmhead_chunk")) continue;
                    const std::string what = format("lmhead_chunk V %lld kl %d per_row_mean %d chunk %lld", (long long)V, kl, prm, (long long)cs);
                    compare(what + " logp", dlpo.download(), lpo, 1e-5, 1e-5);
                    compare(what + " entropy", dento.download(), ento, 1e-5, 1e-5);
                    compare(what + " dL/dz", dzc.download(), zc, 1e-6, 1e-4);
                    compare(what + " sums", tot_g, tot_c, 1e-6, 1e-5);
                    if (cs == T) {
                        // the CUDA clipped-loss kernel on the CUDA log-probs: the same sums, bit for bit
                        const drmas_loss_config lc{0.2, 0.28, 3.0, 0.05, 7.0, kl, prm};
                        DeviceArray<float> dg((size_t)T);
                        DeviceArray<double> ds(DRMAS_LOSS_SUMS);
                        check(drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &lc, 4, doff.get(), T, dlpo.get(), dold.get(), dadv_tok.get(), dref.get(),
                                                     dmask.get(), dg.get(), ds.get(), nullptr) == 0, "cuda clipped_loss: %s", drmas_last_error());
                        if (sync_ok("clipped_loss")) {
                            const std::vector<double> a = ds.download();
                            bool same = true;
                            for (int k = 0; k < DRMAS_LOSS_SUMS; ++k) same &= a[(size_t)k] == tot_g[(size_t)k];
                            check(same, "%s: sums differ from the CUDA clipped-loss kernel's (loss %.17g vs %.17g)", what.c_str(), tot_g[0], a[0]);
                        }
                    }
                }
            }
        // errors: the CPU's status and message; nothing written
        const drmas_lmhead_config hc{0.2, 0.2, 3.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
        for (int which = 0; which < 2; ++which) {
            std::vector<int64_t> yb(y);
            std::vector<float> zb(z);
            if (which == 0) yb[14] = V;
            else zb[(size_t)(17 * V + 5)] = nan_f();
            DeviceArray<int64_t> dyb(yb);
            DeviceArray<float> dzb(zb), dlpb((size_t)T);
            const std::vector<float> lp_before((size_t)T, 0.0f);
            dlpb.upload(lp_before);
            DeviceArray<double> dsb(DRMAS_LMHEAD_SUMS);
            const std::vector<double> sums_before(DRMAS_LMHEAD_SUMS, 7.0);
            dsb.upload(sums_before);
            std::vector<float> zc(zb), lpb((size_t)T);
            double sc[DRMAS_LMHEAD_SUMS];
            const int32_t cst = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, off.data(), T, 0, T, V, zc.data(), yb.data(), old.data(),
                                                       adv_row.data(), nullptr, mask.data(), lpb.data(), nullptr, sc, nullptr);
            const std::string cmsg = drmas_last_error();
            const int32_t gst = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CUDA, &hc, 4, doff.get(), T, 0, T, V, dzb.get(), dyb.get(), dold.get(),
                                                       dadv.get(), nullptr, dmask.get(), dlpb.get(), nullptr, dsb.get(), nullptr);
            const std::string gmsg = drmas_last_error();
            const bool untouched = dzb.download() == zb && dlpb.download() == lp_before && dsb.download() == sums_before;
            expect_error(format("lmhead_chunk V %lld %s", (long long)V, which == 0 ? "bad target" : "NaN logit"),
                         which == 0 ? DRMAS_ERR_RANGE : DRMAS_ERR_NONFINITE, cst, cmsg, gst, gmsg, untouched || which == 1);
            if (which == 1) {
                // a NaN logit compares unequal to itself: check the bits
                const std::vector<float> after = dzb.download();
                check(memcmp(after.data(), zb.data(), zb.size() * sizeof(float)) == 0 && dlpb.download() == lp_before &&
                          dsb.download() == sums_before, "lmhead_chunk NaN logit: CUDA wrote to an output before failing");
            }
        }
    }
}

// drmas_lmhead_chunk_async_*: host-validated offsets and the data errors left on the device. On data
// without errors, chunk by chunk, the bits of drmas_lmhead_chunk_* (dL/dz, logp, entropy, sums), and
// no wait for the device where the plain form waits twice per chunk (emulation counts them); a NaN
// logit or a bad target set errors (chunk-relative), the call still OK and not waiting; bad host
// offsets are refused with the plain form's message before anything is queued; on the CPU the plain
// form's bits and errors all UINT64_MAX.
template <class L>
static void lmhead_async_case(std::mt19937_64& rng, int64_t V) {
    const bool bf16 = sizeof(L) == 2;
    const char* name = bf16 ? "lmhead_async bf16" : "lmhead_async f32";
    const int64_t T = 23;
    const std::vector<int64_t> off = {1, 6, 6, 13, 21};
    const std::vector<float> adv_row = {1.3f, -0.7f, 0.4f, -2.1f};
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::uniform_int_distribution<int64_t> yd(0, V - 1);
    std::vector<L> z((size_t)(T * V));
    for (int64_t i = 0; i < T * V; ++i) {
        const float x = nd(rng) + 6.0f * (float)(i % V) / (float)V;
        if constexpr (sizeof(L) == 2) {
            uint32_t u;
            memcpy(&u, &x, 4);
            z[(size_t)i] = (uint16_t)(u >> 16);
        } else {
            z[(size_t)i] = x;
        }
    }
    std::vector<float> old((size_t)T), ref((size_t)T);
    std::normal_distribution<float> od(-3.0f, 1.0f);
    for (int64_t t = 0; t < T; ++t) old[(size_t)t] = od(rng), ref[(size_t)t] = od(rng);
    std::vector<int64_t> y((size_t)T);
    for (auto& v : y) v = yd(rng);
    std::vector<uint8_t> mask((size_t)T, 1);
    mask[8] = 0;
    y[8] = V + 3;  // masked: never read
    y[0] = -1;     // outside every row
    DeviceArray<float> dold(old), dref(ref), dadv(adv_row);
    DeviceArray<int64_t> doff(off), dy(y);
    DeviceArray<uint8_t> dmask(mask);
    const bool counting = drmas_emu_counters != nullptr;
    const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.05, 7.0, 0.01, DRMAS_KL_K3, 1};
    auto chunk = [&](bool async, int32_t device, const int64_t* doffp, int64_t c0, int64_t n, L* zc, const int64_t* yp,
                     const float* oldp, const float* advp, const float* refp, const uint8_t* maskp, float* lp, float* ent,
                     double* sums, uint64_t* errors) -> int32_t {
        if constexpr (sizeof(L) == 2) {
            return async ? drmas_lmhead_chunk_async_bf16(device, &hc, 4, off.data(), doffp, T, c0, n, V, zc, yp, oldp, advp, refp, maskp,
                                                         lp, ent, sums, errors, nullptr)
                         : drmas_lmhead_chunk_bf16(device, &hc, 4, doffp, T, c0, n, V, zc, yp, oldp, advp, refp, maskp, lp, ent, sums,
                                                   nullptr);
        } else {
            return async ? drmas_lmhead_chunk_async_f32(device, &hc, 4, off.data(), doffp, T, c0, n, V, zc, yp, oldp, advp, refp, maskp,
                                                        lp, ent, sums, errors, nullptr)
                         : drmas_lmhead_chunk_f32(device, &hc, 4, doffp, T, c0, n, V, zc, yp, oldp, advp, refp, maskp, lp, ent, sums,
                                                  nullptr);
        }
    };
    for (int64_t cs : {(int64_t)7, T}) {
        const int64_t chunks = (T + cs - 1) / cs;
        const std::string what = format("%s V %lld chunk %lld", name, (long long)V, (long long)cs);
        DeviceArray<L> dz_plain(z), dz_async(z);
        DeviceArray<float> lp_plain((size_t)T), lp_async((size_t)T), ent_plain((size_t)T), ent_async((size_t)T);
        DeviceArray<double> sums_plain((size_t)(chunks * DRMAS_LMHEAD_SUMS)), sums_async((size_t)(chunks * DRMAS_LMHEAD_SUMS));
        DeviceArray<uint64_t> errs((size_t)(2 * chunks));
        uint64_t plain_waits = 0, async_waits = 0;
        for (int64_t k = 0, c0 = 0; c0 < T; ++k, c0 += cs) {
            const int64_t n = std::min(cs, T - c0);
            EmuCounts before = emu_counts();
            int32_t st = chunk(false, DRMAS_DEVICE_CUDA, doff.get(), c0, n, dz_plain.get() + c0 * V, dy.get(), dold.get(), dadv.get(),
                               dref.get(), dmask.get(), lp_plain.get() + c0, ent_plain.get() + c0,
                               sums_plain.get() + k * DRMAS_LMHEAD_SUMS, nullptr);
            EmuCounts d = count_delta(before, emu_counts());
            check(st == DRMAS_OK, "%s: plain chunk %lld: %s", what.c_str(), (long long)k, drmas_last_error());
            plain_waits += d.c[kEmuSyncs];
            before = emu_counts();
            st = chunk(true, DRMAS_DEVICE_CUDA, doff.get(), c0, n, dz_async.get() + c0 * V, dy.get(), dold.get(), dadv.get(), dref.get(),
                       dmask.get(), lp_async.get() + c0, ent_async.get() + c0, sums_async.get() + k * DRMAS_LMHEAD_SUMS,
                       errs.get() + 2 * k);
            d = count_delta(before, emu_counts());
            check(st == DRMAS_OK, "%s: async chunk %lld: %s", what.c_str(), (long long)k, drmas_last_error());
            async_waits += d.c[kEmuSyncs] + d.c[kEmuToHost];
        }
        if (!sync_ok(what)) continue;
        if (counting) {
            check(plain_waits == (uint64_t)(2 * chunks), "%s: the plain form waited %llu times for %lld chunks (2 each expected)",
                  what.c_str(), (unsigned long long)plain_waits, (long long)chunks);
            check(async_waits == 0, "%s: the async form waited for the device %llu times", what.c_str(), (unsigned long long)async_waits);
        }
        const std::vector<L> za = dz_async.download(), zp = dz_plain.download();
        const std::vector<float> la = lp_async.download(), lpl = lp_plain.download(), ea = ent_async.download(), ep = ent_plain.download();
        const std::vector<double> sa = sums_async.download(), sp = sums_plain.download();
        check(same_bits(za.data(), zp.data(), za.size()), "%s: dL/dz differs from the plain form's", what.c_str());
        check(same_bits(la.data(), lpl.data(), la.size()) && same_bits(ea.data(), ep.data(), ea.size()),
              "%s: logp or entropy differs from the plain form's", what.c_str());
        check(same_bits(sa.data(), sp.data(), sa.size()), "%s: the sums differ from the plain form's", what.c_str());
        bool none = true;
        for (uint64_t e : errs.download()) none &= e == UINT64_MAX;
        check(none, "%s: errors set on data without errors", what.c_str());
    }
    // the forward-only op: drmas_lmhead_logprobs_async_* gives the plain op's bits without its wait
    {
        std::vector<int64_t> y_ok(y);
        for (auto& v : y_ok) v = std::min<int64_t>(std::max<int64_t>(v, 0), V - 1);
        DeviceArray<int64_t> dy_ok(y_ok);
        DeviceArray<L> dz(z);
        DeviceArray<float> lp1((size_t)T), lp2((size_t)T), e1((size_t)T), e2((size_t)T);
        DeviceArray<uint64_t> errs(std::vector<uint64_t>{0, 0});
        auto logprobs = [&](bool async, const int64_t* yp, float* lp, float* ent, uint64_t* e) -> int32_t {
            if constexpr (sizeof(L) == 2)
                return async ? drmas_lmhead_logprobs_async_bf16(DRMAS_DEVICE_CUDA, T, V, dz.get(), yp, lp, ent, e, nullptr)
                             : drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CUDA, T, V, dz.get(), yp, lp, ent, nullptr);
            else
                return async ? drmas_lmhead_logprobs_async_f32(DRMAS_DEVICE_CUDA, T, V, dz.get(), yp, lp, ent, e, nullptr)
                             : drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CUDA, T, V, dz.get(), yp, lp, ent, nullptr);
        };
        EmuCounts before = emu_counts();
        const int32_t a = logprobs(false, dy_ok.get(), lp1.get(), e1.get(), nullptr);
        const EmuCounts dp = count_delta(before, emu_counts());
        before = emu_counts();
        const int32_t b = logprobs(true, dy_ok.get(), lp2.get(), e2.get(), errs.get());
        const EmuCounts da = count_delta(before, emu_counts());
        const std::string what = format("%s V %lld logprobs", name, (long long)V);
        check(a == DRMAS_OK && b == DRMAS_OK, "%s: %d %d %s", what.c_str(), a, b, drmas_last_error());
        if (counting) {
            check(dp.c[kEmuSyncs] == 1, "%s: the plain op waited %llu times (1 expected)", what.c_str(), (unsigned long long)dp.c[kEmuSyncs]);
            check(da.c[kEmuSyncs] + da.c[kEmuToHost] == 0, "%s: the async op waited for the device", what.c_str());
        }
        if (sync_ok(what)) {
            const std::vector<float> l1 = lp1.download(), l2 = lp2.download(), h1 = e1.download(), h2 = e2.download();
            check(same_bits(l1.data(), l2.data(), l1.size()) && same_bits(h1.data(), h2.data(), h1.size()),
                  "%s: the async op's log-probs or entropies differ from the plain op's", what.c_str());
            check(errs.download() == std::vector<uint64_t>{UINT64_MAX, UINT64_MAX}, "%s: errors set on good data", what.c_str());
        }
        // a bad target (token 4) and a NaN logit (token 9, index 2): both flagged, no wait
        std::vector<int64_t> yb(y_ok);
        yb[4] = -2;
        std::vector<L> zb(z);
        if constexpr (sizeof(L) == 2) zb[(size_t)(9 * V + 2)] = 0x7FC0;
        else zb[(size_t)(9 * V + 2)] = nan_f();
        DeviceArray<int64_t> dyb(yb);
        dz.upload(zb);
        before = emu_counts();
        const int32_t c = logprobs(true, dyb.get(), lp2.get(), e2.get(), errs.get());
        const EmuCounts dc = count_delta(before, emu_counts());
        check(c == DRMAS_OK, "%s bad data: %d %s", what.c_str(), c, drmas_last_error());
        if (counting) check(dc.c[kEmuSyncs] + dc.c[kEmuToHost] == 0, "%s bad data: waited for the device", what.c_str());
        if (sync_ok(what))
            check(errs.download() == std::vector<uint64_t>{4, (uint64_t)(9 * V + 2)}, "%s bad data: errors %llx %llx", what.c_str(),
                  (unsigned long long)errs.download()[0], (unsigned long long)errs.download()[1]);
    }
    // data errors, left on the device: a NaN logit of token 17 (vocabulary index 5), a bad target of
    // token 14, both valid tokens of the chunk [14, 21)
    for (int which = 0; which < 2; ++which) {
        std::vector<int64_t> yb(y);
        std::vector<L> zb(z);
        if (which == 0) yb[14] = V;
        else if constexpr (sizeof(L) == 2) zb[(size_t)(17 * V + 5)] = 0x7FC0;  // a bf16 quiet NaN
        else zb[(size_t)(17 * V + 5)] = nan_f();
        DeviceArray<int64_t> dyb(yb);
        DeviceArray<L> dzb(zb);
        DeviceArray<float> dlp((size_t)T), dent((size_t)T);
        DeviceArray<double> dsums(DRMAS_LMHEAD_SUMS);
        DeviceArray<uint64_t> errs(std::vector<uint64_t>{0, 0});
        const EmuCounts before = emu_counts();
        const int32_t st = chunk(true, DRMAS_DEVICE_CUDA, doff.get(), 14, 7, dzb.get() + 14 * V, dyb.get(), dold.get(), dadv.get(),
                                 dref.get(), dmask.get(), dlp.get() + 14, dent.get() + 14, dsums.get(), errs.get());
        const EmuCounts d = count_delta(before, emu_counts());
        const std::string what = format("%s V %lld %s", name, (long long)V, which == 0 ? "bad target" : "NaN logit");
        check(st == DRMAS_OK, "%s: status %d %s (the error is the caller's to read)", what.c_str(), st, drmas_last_error());
        if (counting) check(d.c[kEmuSyncs] + d.c[kEmuToHost] == 0, "%s: waited for the device", what.c_str());
        if (!sync_ok(what)) continue;
        const std::vector<uint64_t> e = errs.download();
        const std::vector<uint64_t> want = which == 0 ? std::vector<uint64_t>{0, UINT64_MAX}
                                                      : std::vector<uint64_t>{UINT64_MAX, (uint64_t)(3 * V + 5)};
        check(e == want, "%s: errors %llx %llx", what.c_str(), (unsigned long long)e[0], (unsigned long long)e[1]);
    }
    // bad host offsets: refused as the plain form refuses them, before anything is queued
    {
        const std::vector<int64_t> bad = {1, 6, 6, 13, 40};
        DeviceArray<L> dzb(z);
        DeviceArray<double> dsums(std::vector<double>(DRMAS_LMHEAD_SUMS, 7.0));
        DeviceArray<uint64_t> errs(std::vector<uint64_t>{5, 5});
        const EmuCounts before = emu_counts();
        const int32_t st = bf16 ? drmas_lmhead_chunk_async_bf16(DRMAS_DEVICE_CUDA, &hc, 4, bad.data(), doff.get(), T, 0, 7, V,
                                                                (uint16_t*)(void*)dzb.get(), dy.get(), dold.get(), dadv.get(), dref.get(),
                                                                dmask.get(), nullptr, nullptr, dsums.get(), errs.get(), nullptr)
                                : drmas_lmhead_chunk_async_f32(DRMAS_DEVICE_CUDA, &hc, 4, bad.data(), doff.get(), T, 0, 7, V,
                                                               (float*)(void*)dzb.get(), dy.get(), dold.get(), dadv.get(), dref.get(),
                                                               dmask.get(), nullptr, nullptr, dsums.get(), errs.get(), nullptr);
        const EmuCounts d = count_delta(before, emu_counts());
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_RANGE && msg.find("row_offsets[4] = 40 is past num_tokens = 23") != std::string::npos,
              "%s: bad host offsets: %d %s", name, st, msg.c_str());
        if (counting) check(d.c[kEmuLaunches] + d.c[kEmuMemsets] + d.c[kEmuSyncs] + d.c[kEmuToHost] == 0, "%s: bad host offsets queued work", name);
        check(sync_ok(name) && errs.download() == std::vector<uint64_t>{5, 5} &&
                  dsums.download() == std::vector<double>(DRMAS_LMHEAD_SUMS, 7.0), "%s: bad host offsets wrote an output", name);
    }
    // device offsets unlike the (valid) host copy, reaching far past the tokens: drmas.h says they must not
    // differ, and that the kernels still stay inside the arrays; the per-row mean's count of a row's valid
    // tokens read the mask through the device offsets as they were (past its end: the emulator's guard page)
    {
        const std::vector<int64_t> far = {0, 6, 6, 13, T + 8192};
        DeviceArray<int64_t> dfar(far);
        DeviceArray<L> dzb(z);
        DeviceArray<float> dlp((size_t)T), dent((size_t)T);
        DeviceArray<double> dsums(DRMAS_LMHEAD_SUMS);
        DeviceArray<uint64_t> errs(std::vector<uint64_t>{0, 0});
        const int32_t st = chunk(true, DRMAS_DEVICE_CUDA, dfar.get(), 0, T, dzb.get(), dy.get(), dold.get(), dadv.get(), dref.get(),
                                 dmask.get(), dlp.get(), dent.get(), dsums.get(), errs.get());
        check(st == DRMAS_OK && sync_ok(name), "%s: device offsets unlike the host's: status %d %s", name, st, drmas_last_error());
    }
    // the CPU: the plain form's bits, errors UINT64_MAX
    {
        std::vector<L> zp(z), za(z);
        std::vector<float> lpp((size_t)T), lpa((size_t)T), ep((size_t)T), ea((size_t)T);
        double sp[DRMAS_LMHEAD_SUMS], sa[DRMAS_LMHEAD_SUMS];
        uint64_t e[2] = {0, 0};
        const int32_t a = chunk(false, DRMAS_DEVICE_CPU, off.data(), 0, T, zp.data(), y.data(), old.data(), adv_row.data(), ref.data(),
                                mask.data(), lpp.data(), ep.data(), sp, nullptr);
        const int32_t b = chunk(true, DRMAS_DEVICE_CPU, off.data(), 0, T, za.data(), y.data(), old.data(), adv_row.data(), ref.data(),
                                mask.data(), lpa.data(), ea.data(), sa, e);
        check(a == DRMAS_OK && b == DRMAS_OK && same_bits(zp.data(), za.data(), zp.size()) && same_bits(lpp.data(), lpa.data(), lpp.size()) &&
                  same_bits(ep.data(), ea.data(), ep.size()) && same_bits(sp, sa, DRMAS_LMHEAD_SUMS) && e[0] == UINT64_MAX && e[1] == UINT64_MAX,
              "%s: the CPU's async form differs from its plain form (%d %d)", name, a, b);
    }
}

static void test_lmhead_async(std::mt19937_64& rng) {
    for (int64_t V : {37, 700}) {
        lmhead_async_case<float>(rng, V);
        lmhead_async_case<uint16_t>(rng, V);
    }
}

// The target's dL/dz entry below FLT_MIN is 0, as every other entry's (it is g plus an entry already
// flushed): one token, vocabulary {0, -16}, target 0, old log-prob = log-prob, advantage 1e-32, so
// that g (1 - p) ~ -1.1e-39 at the target. As on the CPU (test_cpu's test_loss_float_range).
static void test_lmhead_denormal_target() {
    const std::vector<float> z0 = {0.0f, -16.0f}, adv = {1e-32f};
    const std::vector<int64_t> y = {0}, off = {0, 1};
    float logp = 0;
    check(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, 1, 2, z0.data(), y.data(), &logp, nullptr, nullptr) == DRMAS_OK,
          "lmhead denormal: logprobs %s", drmas_last_error());
    const drmas_lmhead_config hc{0.2, 0.28, 0.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
    DeviceArray<float> dz(z0), dold(std::vector<float>{logp}), dadv(adv);
    DeviceArray<int64_t> dy(y), doff(off);
    DeviceArray<double> dsums(DRMAS_LMHEAD_SUMS);
    const int32_t st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CUDA, &hc, 1, doff.get(), 1, 0, 1, 2, dz.get(), dy.get(), dold.get(),
                                              dadv.get(), nullptr, nullptr, nullptr, nullptr, dsums.get(), nullptr);
    check(st == DRMAS_OK, "lmhead denormal: status %d %s", st, drmas_last_error());
    if (st == DRMAS_OK && sync_ok("lmhead denormal")) {
        const std::vector<float> got = dz.download();
        check(got[0] == 0.0f && got[1] == 0.0f, "lmhead denormal: dL/dz %a (target) and %a must be 0", got[0], got[1]);
    }
}

// The loss's per-row sums do not depend on who adds them: a warp (rows of up to 2048 tokens in
// drmas_clipped_loss_f32) or the whole block (every row of the fused LM head's chunk kernel) add a
// row in one canonical order, so one chunk of all tokens gives the same sums bit for bit, here on
// rows of several 256-token chunks.
static void test_loss_split_order(std::mt19937_64& rng) {
    std::vector<int64_t> off = {0};
    for (int64_t len : {700, 800, 3, 2197, 1100, 1900, 600, 513, 1025, 2048}) off.push_back(off.back() + len);
    const int64_t T = off.back(), V = 3, R = (int64_t)off.size() - 1;
    std::normal_distribution<float> nd(0.0f, 1.0f), dd(0.0f, 0.3f);
    std::uniform_int_distribution<int64_t> yd(0, V - 1);
    std::bernoulli_distribution masked(0.1);
    std::vector<float> z((size_t)(T * V)), old((size_t)T), ref((size_t)T), adv_tok((size_t)T);
    std::vector<int64_t> y((size_t)T);
    std::vector<uint8_t> mask((size_t)T);
    for (auto& v : z) v = nd(rng);
    for (int64_t t = 0; t < T; ++t) {
        y[(size_t)t] = yd(rng);
        old[(size_t)t] = -1.1f + dd(rng);
        ref[(size_t)t] = -1.1f + dd(rng);
        mask[(size_t)t] = masked(rng) ? 0 : 1;
    }
    std::vector<float> adv_row((size_t)R);
    for (int64_t r = 0; r < R; ++r) {
        adv_row[(size_t)r] = nd(rng) * (r % 3 == 0 ? 100.0f : 1.0f);  // rows of unlike magnitudes
        for (int64_t t = off[(size_t)r]; t < off[(size_t)r + 1]; ++t) adv_tok[(size_t)t] = adv_row[(size_t)r];
    }
    DeviceArray<int64_t> doff(off), dy(y);
    DeviceArray<float> dz(z), dold(old), dref(ref), dadv(adv_row), dadv_tok(adv_tok), dlp((size_t)T), dent((size_t)T);
    DeviceArray<uint8_t> dmask(mask);
    // one row a call, so that the sums are the row's own (a sum over rows would round a last-bit
    // difference of one row away)
    int64_t differ = 0;
    for (int64_t r = 0; r < R; ++r)
        for (int prm = 0; prm <= 1; ++prm) {
            DeviceArray<int64_t> row_off(std::vector<int64_t>{off[(size_t)r], off[(size_t)r + 1]});
            const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.05, 9.0, 0.0, DRMAS_KL_K3, prm};
            DeviceArray<double> hs(DRMAS_LMHEAD_SUMS), ls(DRMAS_LOSS_SUMS);
            DeviceArray<float> dg((size_t)T);
            check(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CUDA, &hc, 1, row_off.get(), T, 0, T, V, dz.get(), dy.get(), dold.get(),
                                         dadv.get() + r, dref.get(), dmask.get(), dlp.get(), dent.get(), hs.get(), nullptr) == 0,
                  "split order: lmhead_chunk: %s", drmas_last_error());
            const drmas_loss_config lc{0.2, 0.28, 3.0, 0.05, 9.0, DRMAS_KL_K3, prm};
            check(drmas_clipped_loss_f32(DRMAS_DEVICE_CUDA, &lc, 1, row_off.get(), T, dlp.get(), dold.get(), dadv_tok.get(),
                                         dref.get(), dmask.get(), dg.get(), ls.get(), nullptr) == 0,
                  "split order: clipped_loss: %s", drmas_last_error());
            if (!sync_ok("split order")) continue;
            const std::vector<double> a = hs.download(), b = ls.download();
            differ += memcmp(a.data(), b.data(), DRMAS_LOSS_SUMS * sizeof(double)) != 0;
        }
    check(differ == 0, "split order: %lld of %lld rows' warp-added sums differ from their block-added ones", (long long)differ,
          (long long)(2 * R));
}

// ---- fused LM head on bf16 logits: CUDA against the CPU, and against CUDA's own fp32 op -------
static uint16_t bf16_of(float f) {  // round to nearest even (finite inputs); the test's own, not the library's
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}
static float float_of(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static std::vector<float> floats_of(const std::vector<uint16_t>& b) {
    std::vector<float> v(b.size());
    for (size_t i = 0; i < b.size(); ++i) v[i] = float_of(b[i]);
    return v;
}

// The case of test_lmhead with its logits rounded to bf16: the CUDA bf16 ops give the CPU bf16 ops'
// log-probs, entropies and sums to rounding and dL/dz to one bf16 step; and bit for bit CUDA's own fp32
// op on the widened logits, its dL/dz rounded to bf16; the ties of V = 2 go to even; errors are the
// CPU's, outputs untouched.
static void test_lmhead_bf16(std::mt19937_64& rng) {
    const int64_t T = 23;
    const std::vector<int64_t> off = {1, 6, 6, 13, 21};
    const std::vector<float> adv_row = {1.3f, -0.7f, 0.4f, -2.1f};
    for (int64_t V : {37, 700}) {
        std::normal_distribution<float> nd(0.0f, 2.0f);
        std::uniform_int_distribution<int64_t> yd(0, V - 1);
        std::vector<uint16_t> zb((size_t)(T * V));
        for (int64_t i = 0; i < T * V; ++i) zb[(size_t)i] = bf16_of(nd(rng) + 6.0f * (float)(i % V) / (float)V);
        const std::vector<float> zw = floats_of(zb);
        std::vector<int64_t> y((size_t)T);
        for (auto& v : y) v = yd(rng);
        std::vector<uint8_t> mask((size_t)T, 1);
        mask[8] = 0;
        std::vector<float> lp0((size_t)T), old((size_t)T), ref((size_t)T);
        drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, T, V, zw.data(), y.data(), lp0.data(), nullptr, nullptr);
        std::normal_distribution<float> dd(0.0f, 0.3f);
        for (int64_t t = 0; t < T; ++t) {
            old[(size_t)t] = lp0[(size_t)t] + dd(rng);
            ref[(size_t)t] = lp0[(size_t)t] + dd(rng);
        }
        y[8] = V + 3;  // masked: never read
        y[0] = -1;     // outside every row
        DeviceArray<float> dold(old), dref(ref), dadv(adv_row);
        DeviceArray<int64_t> doff(off), dy(y);
        DeviceArray<uint8_t> dmask(mask);
        // forward only
        std::vector<int64_t> y_ok(y);
        for (auto& v : y_ok) v = std::min<int64_t>(std::max<int64_t>(v, 0), V - 1);
        DeviceArray<int64_t> dy_ok(y_ok);
        std::vector<float> lpc((size_t)T), entc((size_t)T);
        check(drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CPU, T, V, zb.data(), y_ok.data(), lpc.data(), entc.data(), nullptr) == 0,
              "cpu logprobs bf16: %s", drmas_last_error());
        DeviceArray<uint16_t> dzb(zb);
        DeviceArray<float> dzw(zw), dlp((size_t)T), dent((size_t)T), dlpf((size_t)T), dentf((size_t)T);
        const int32_t st0 = drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CUDA, T, V, dzb.get(), dy_ok.get(), dlp.get(), dent.get(), nullptr);
        check(st0 == 0, "cuda lmhead_logprobs_bf16 V %lld: %d %s", (long long)V, st0, drmas_last_error());
        check(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CUDA, T, V, dzw.get(), dy_ok.get(), dlpf.get(), dentf.get(), nullptr) == 0,
              "cuda lmhead_logprobs_f32: %s", drmas_last_error());
        if (sync_ok("lmhead_logprobs_bf16")) {
            compare(format("lmhead_logprobs_bf16 V %lld logp", (long long)V), dlp.download(), lpc, 1e-5, 1e-5);
            compare(format("lmhead_logprobs_bf16 V %lld entropy", (long long)V), dent.download(), entc, 1e-5, 1e-5);
            check(dlp.download() == dlpf.download() && dent.download() == dentf.download(),
                  "lmhead_logprobs_bf16 V %lld: CUDA bf16 differs from CUDA fp32 on the widened logits", (long long)V);
        }
        for (int kl = DRMAS_KL_NONE; kl <= DRMAS_KL_K3; kl += 3)
            for (int prm = 0; prm <= 1; ++prm) {
                const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.05, 7.0, 0.01, kl, prm};
                for (int64_t cs : {(int64_t)7, T}) {
                    std::vector<uint16_t> zc(zb);
                    std::vector<float> lpo((size_t)T), ento((size_t)T);
                    DeviceArray<uint16_t> dzc(zb);
                    DeviceArray<float> dzf(zw), dlpo((size_t)T), dento((size_t)T), dlpf2((size_t)T), dentf2((size_t)T);
                    std::vector<double> tot_c(DRMAS_LMHEAD_SUMS, 0.0), tot_g(DRMAS_LMHEAD_SUMS, 0.0), tot_f(DRMAS_LMHEAD_SUMS, 0.0);
                    for (int64_t c0 = 0; c0 < T; c0 += cs) {
                        const int64_t n = std::min(cs, T - c0);
                        double sc[DRMAS_LMHEAD_SUMS];
                        check(drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, off.data(), T, c0, n, V, &zc[(size_t)(c0 * V)], y.data(),
                                                      old.data(), adv_row.data(), ref.data(), mask.data(), &lpo[(size_t)c0], &ento[(size_t)c0],
                                                      sc, nullptr) == 0, "cpu chunk bf16: %s", drmas_last_error());
                        DeviceArray<double> dsums(DRMAS_LMHEAD_SUMS), dsf(DRMAS_LMHEAD_SUMS);
                        int32_t st = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CUDA, &hc, 4, doff.get(), T, c0, n, V, dzc.get() + c0 * V, dy.get(),
                                                             dold.get(), dadv.get(), dref.get(), dmask.get(), dlpo.get() + c0, dento.get() + c0,
                                                             dsums.get(), nullptr);
                        check(st == 0, "cuda lmhead_chunk_bf16: %d %s", st, drmas_last_error());
                        st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CUDA, &hc, 4, doff.get(), T, c0, n, V, dzf.get() + c0 * V, dy.get(),
                                                    dold.get(), dadv.get(), dref.get(), dmask.get(), dlpf2.get() + c0, dentf2.get() + c0,
                                                    dsf.get(), nullptr);
                        check(st == 0, "cuda lmhead_chunk_f32: %d %s", st, drmas_last_error());
                        const std::vector<double> sg = dsums.download(), sf = dsf.download();
                        for (int k = 0; k < DRMAS_LMHEAD_SUMS; ++k) {
                            tot_c[(size_t)k] += sc[k];
                            tot_g[(size_t)k] += sg[(size_t)k];
                            tot_f[(size_t)k] += sf[(size_t)k];
                        }
                    }
                    if (!sync_ok("lmhead_chunk_bf16")) continue;
                    const std::string what = format("lmhead_chunk_bf16 V %lld kl %d per_row_mean %d chunk %lld", (long long)V, kl, prm, (long long)cs);
                    compare(what + " logp", dlpo.download(), lpo, 1e-5, 1e-5);
                    compare(what + " entropy", dento.download(), ento, 1e-5, 1e-5);
                    // dL/dz: the CPU's and CUDA's fp32 values differ by rounding (expf), so their bf16 roundings by at most a step
                    compare(what + " dL/dz", floats_of(dzc.download()), floats_of(zc), 1e-6, 1.0 / 128);
                    compare(what + " sums", tot_g, tot_c, 1e-6, 1e-5);
                    // on one backend: bit for bit the fp32 op on the widened logits, dL/dz rounded to bf16
                    const std::vector<uint16_t> gb = dzc.download();
                    const std::vector<float> gf = dzf.download();
                    int64_t bad = 0;
                    for (size_t i = 0; i < gb.size(); ++i) bad += gb[i] != bf16_of(gf[i]);
                    check(bad == 0 && dlpo.download() == dlpf2.download() && dento.download() == dentf2.download() && tot_g == tot_f,
                          "%s: CUDA bf16 differs from CUDA fp32 on the widened logits (%lld dL/dz values)", what.c_str(), (long long)bad);
                }
            }
        // errors: the CPU's status and message, nothing written (the logits' bits compared)
        const drmas_lmhead_config hc{0.2, 0.2, 3.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
        for (int which = 0; which < 2; ++which) {
            std::vector<int64_t> yb(y);
            std::vector<uint16_t> zbad(zb);
            if (which == 0) yb[14] = V;
            else zbad[(size_t)(17 * V + 5)] = 0x7FC0;  // NaN
            DeviceArray<int64_t> dyb(yb);
            DeviceArray<uint16_t> dzbad(zbad);
            DeviceArray<float> dlpb((size_t)T);
            const std::vector<float> lp_before((size_t)T, 0.0f);
            dlpb.upload(lp_before);
            DeviceArray<double> dsb(DRMAS_LMHEAD_SUMS);
            const std::vector<double> sums_before(DRMAS_LMHEAD_SUMS, 7.0);
            dsb.upload(sums_before);
            std::vector<uint16_t> zc(zbad);
            std::vector<float> lpb((size_t)T);
            double sc[DRMAS_LMHEAD_SUMS];
            const int32_t cst = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, off.data(), T, 0, T, V, zc.data(), yb.data(), old.data(),
                                                        adv_row.data(), nullptr, mask.data(), lpb.data(), nullptr, sc, nullptr);
            const std::string cmsg = drmas_last_error();
            const int32_t gst = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CUDA, &hc, 4, doff.get(), T, 0, T, V, dzbad.get(), dyb.get(), dold.get(),
                                                        dadv.get(), nullptr, dmask.get(), dlpb.get(), nullptr, dsb.get(), nullptr);
            const std::string gmsg = drmas_last_error();
            const bool untouched = dzbad.download() == zbad && dlpb.download() == lp_before && dsb.download() == sums_before;
            expect_error(format("lmhead_chunk_bf16 V %lld %s", (long long)V, which == 0 ? "bad target" : "NaN logit"),
                         which == 0 ? DRMAS_ERR_RANGE : DRMAS_ERR_NONFINITE, cst, cmsg, gst, gmsg, untouched);
            check(gmsg.find("drmas_lmhead_chunk_bf16") == 0, "lmhead_chunk_bf16: the message names %s", gmsg.c_str());
        }
    }
    // ties: V = 2, logits {0, -200} (p = {1, 0} exactly), target 1, ratio 1: dz = {-g, g}, g = -A a bf16 tie
    const std::vector<uint16_t> z2 = {bf16_of(0.0f), bf16_of(-200.0f), bf16_of(0.0f), bf16_of(-200.0f)};
    const std::vector<int64_t> off2 = {0, 1, 2}, y2 = {1, 1};
    const std::vector<float> old2 = {-200.0f, -200.0f}, adv2 = {-(1.0f + ldexpf(1.0f, -8)), -(1.0f + 3 * ldexpf(1.0f, -8))};
    const drmas_lmhead_config tc{0.2, 0.28, 0.0, 0.0, 1.0, 0.01, DRMAS_KL_NONE, 0};
    DeviceArray<uint16_t> dz2(z2);
    DeviceArray<int64_t> doff2(off2), dy2(y2);
    DeviceArray<float> dold2(old2), dadv2(adv2);
    DeviceArray<double> ds2(DRMAS_LMHEAD_SUMS);
    check(drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CUDA, &tc, 2, doff2.get(), 2, 0, 2, 2, dz2.get(), dy2.get(), dold2.get(), dadv2.get(),
                                  nullptr, nullptr, nullptr, nullptr, ds2.get(), nullptr) == 0, "cuda bf16 ties: %s", drmas_last_error());
    if (sync_ok("lmhead_chunk_bf16 ties")) {
        const std::vector<uint16_t> got = dz2.download();
        check(got == std::vector<uint16_t>{0xBF80, 0x3F80, 0xBF82, 0x3F82}, "lmhead_chunk_bf16: dL/dz at bf16 ties %04x %04x %04x %04x, "
              "expected bf80 3f80 bf82 3f82 (to even)", got[0], got[1], got[2], got[3]);
    }
}

// Every typed device pointer of every CUDA entry point, 1 byte (and half its alignment) off: refused by
// name before any launch, no device byte written, and the context still usable after (on a GPU such a
// launch is a "misaligned address" fault, sticky: every later call of the process would fail with it).
static void test_alignment(std::mt19937_64&) {
    struct DeviceMemory {
        char* alloc(size_t n) {
            void* p = nullptr;
            if (drmas_cuda_malloc(n, &p) != DRMAS_OK) {
                printf("FATAL drmas_cuda_malloc(%zu bytes): %s\n", n, drmas_last_error());
                exit(1);
            }
            return (char*)p;
        }
        void put(char* d, const char* s, size_t n) {
            check(drmas_cuda_memcpy(d, s, n, DRMAS_COPY_HOST_TO_DEVICE) == DRMAS_OK, "upload: %s", drmas_last_error());
        }
        void get(char* d, const char* s, size_t n) {
            check(drmas_cuda_memcpy(d, s, n, DRMAS_COPY_DEVICE_TO_HOST) == DRMAS_OK, "download: %s", drmas_last_error());
        }
        void release(char* p) { drmas_cuda_free(p); }
    } mem;
    const int calls = align_cases::run(DRMAS_DEVICE_CUDA, mem, [](bool ok, const char* fmt, auto... a) { check(ok, fmt, a...); });
    check(calls > 100, "only %d misaligned calls made", calls);
    // the host pointers of the CUDA helpers
    alignas(8) unsigned char raw[32] = {0};
    int32_t st = drmas_cuda_get_device((int32_t*)(void*)(raw + 2));
    check(st == DRMAS_ERR_CONFIG && strstr(drmas_last_error(), "drmas_cuda_get_device: device (0x") != nullptr &&
              strstr(drmas_last_error(), "is not aligned to 4 bytes") != nullptr,
          "drmas_cuda_get_device on a misaligned int32_t: %d %s", st, drmas_last_error());
    st = drmas_cuda_malloc(64, (void**)(void*)(raw + 4));
    check(st == DRMAS_ERR_CONFIG && strstr(drmas_last_error(), "drmas_cuda_malloc: ptr (0x") != nullptr &&
              strstr(drmas_last_error(), "is not aligned to 8 bytes") != nullptr,
          "drmas_cuda_malloc into a misaligned void*: %d %s", st, drmas_last_error());
    check(std::all_of(raw, raw + sizeof raw, [](unsigned char b) { return b == 0; }), "the CUDA helpers wrote through a misaligned pointer");
    sync_ok("after the misaligned calls");
}

int main() {
    const char* scale = getenv("DRMAS_TEST_SCALE");
    g_small = scale != nullptr && strcmp(scale, "small") == 0;
    const char* require = getenv("DRMAS_REQUIRE_GPU");
    const bool required = require != nullptr && strcmp(require, "1") == 0;
    printf("libdrmas %s, CUDA compiled %d, available %d, test scale %s\n", drmas_version(), drmas_cuda_compiled(),
           drmas_cuda_available(), g_small ? "small" : "full");
    const char* old_driver = getenv("DRMAS_TEST_EXPECT_OLD_DRIVER");
    if (old_driver != nullptr && strcmp(old_driver, "1") == 0) {
        // (ctest cuda_emu_old_driver: the emulator as a driver older than the toolkit) no device, and why in CUDA's
        // words: a user whose LibTorch works and whose libdrmas, built with a newer nvcc, does not, reads what to update
        check(drmas_cuda_available() == 0, "a too-old driver must leave no usable device");
        const int32_t st = drmas_cuda_check_device(0);
        const std::string msg = drmas_last_error();
        check(st == DRMAS_ERR_UNSUPPORTED && msg == "drmas_cuda_check_device: no usable CUDA device (no GPU or no driver; CUDA says: "
                                                    "CUDA driver version is insufficient for CUDA runtime version)",
              "too-old driver: status %d, message \"%s\"", st, msg.c_str());
        printf("%d passed, %d failed\n", g_pass, g_fail);
        return g_fail ? 1 : 0;
    }
    if (drmas_cuda_available() == 0) {
        if (required) {
            printf("FAIL DRMAS_REQUIRE_GPU=1 but no CUDA device is usable (CUDA compiled %d)\n", drmas_cuda_compiled());
            return 1;
        }
        printf("no CUDA device: skipping CUDA tests\n");
        return 77;
    }
    const char* no_image = getenv("DRMAS_TEST_EXPECT_NO_IMAGE");
    if (no_image != nullptr && strcmp(no_image, "1") == 0) {
        // only the refusal: no kernel of the other parts can run
        test_check_device(true);
        printf("%d passed, %d failed\n", g_pass, g_fail);
        return g_fail ? 1 : 0;
    }
    std::mt19937_64 rng(20260208);
    // Each part's wall time, to see what the emulated suite spends its time on.
    auto timed = [&](const char* name, void (*part)(std::mt19937_64&)) {
        const auto t0 = std::chrono::steady_clock::now();
        part(rng);
        printf("%-14s %7.2f s\n", name, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        fflush(stdout);
    };
    timed("segment_stats", test_segment_stats);
    timed("advantage", test_advantage);
    timed("adv_trusted", test_advantage_trusted);
    timed("adv_sorted", test_advantage_sorted);
    timed("broadcast", test_broadcast);
    timed("clipped_loss", test_clipped_loss);
    timed("clip_bounds", [](std::mt19937_64&) { test_clip_bounds(); });
    timed("errors", test_errors);
    timed("order_edges", test_advantage_order_edges);
    timed("devices", test_devices);
    timed("check_device", [](std::mt19937_64&) { test_check_device(false); });
    timed("contexts", [](std::mt19937_64&) { test_check_device_contexts(); });
    timed("async_loss", test_async_loss);
    timed("lmhead", test_lmhead);
    timed("lmhead_denormal", [](std::mt19937_64&) { test_lmhead_denormal_target(); });
    timed("split_order", test_loss_split_order);
    timed("lmhead_bf16", test_lmhead_bf16);
    timed("lmhead_async", test_lmhead_async);
    timed("grid_stride", test_grid_stride);
    timed("counts", test_launch_counts);
    timed("alignment", test_alignment);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
