// test_cpu.cpp — ctest harness for the CPU backend through the public C ABI: hand-computed
// advantages, invariance to row order (the blocked and the general path must agree), exact
// zeros for constant segments, every documented error with its message and untouched
// outputs, broadcast, loss identities, the fused LM head (against an fp64 reference and
// bit for bit against the clipped-loss kernel; its bf16 ops bit for bit against the fp32 ones), and
// the CPU decoding step's attention, RMSNorm, SwiGLU and sampler (each against a plain composition).
// The exhaustive comparisons against an independent reference and LibTorch live in the Java test suite.
#include <ctype.h>
#include <dlfcn.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <omp.h>

#include "align_cases.h"  // the misaligned-pointer cases, shared with test_cuda.cpp
#include "drmas.h"
#include "drmas_math.h"  // token_loss: the scalar formula the vectorised loss must match bit for bit

static int g_pass = 0, g_fail = 0;

#define CHECK(cond, ...)                                              \
    do {                                                              \
        if (cond) {                                                   \
            ++g_pass;                                                 \
        } else {                                                      \
            ++g_fail;                                                 \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);               \
            printf(__VA_ARGS__);                                      \
            printf("\n");                                             \
        }                                                             \
    } while (0)

static bool close(double a, double e, double atol, double rtol) { return fabs(a - e) <= atol + rtol * fabs(e); }

// The library has no table of named modes: a mode is a descriptor (mean_from, std_from,
// numerator). The tests run every one of the 8, numbered d = mean_from + 2 std_from + 4 numerator.
constexpr int kDescriptors = 8;
constexpr int kDrmas = DRMAS_FROM_AGENT + 2 * DRMAS_FROM_AGENT + 4 * DRMAS_NUMERATOR_ROW;    // Dr. MAS
constexpr int kGrpo = DRMAS_FROM_GROUP + 2 * DRMAS_FROM_GROUP + 4 * DRMAS_NUMERATOR_TRAJECTORY;  // GRPO

static drmas_norm_config cfg_of(int d) {
    drmas_norm_config c;
    memset(&c, 0, sizeof c);
    c.mean_from = d & 1;
    c.std_from = (d >> 1) & 1;
    c.numerator = (d >> 2) & 1;
    c.global_pooling = DRMAS_POOL_TRAJECTORIES;
    c.singleton = DRMAS_SINGLETON_FALLBACK;
    c.ddof = 1;
    c.scale_by_std = 1;
    c.eps = 1e-6;
    return c;
}

static void test_hand_example() {
    // One uid, three trajectories, each: solver (agent 0) then verifier (agent 1).
    const float s[] = {1, 0, 1, 1, 0, 0};
    const int32_t uid[] = {0, 0, 0, 0, 0, 0}, traj[] = {0, 0, 1, 1, 2, 2}, ag[] = {0, 1, 0, 1, 0, 1};
    float a[6];
    drmas_norm_config c = cfg_of(kDrmas);
    CHECK(drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 6, s, uid, traj, ag, 1, 3, 2, a, nullptr, nullptr) == 0, "drmas: %s", drmas_last_error());
    // solver scores {1,1,0}: mean 2/3, std 0.57735; verifier {0,1,0}: mean 1/3, std 0.57735
    const double drmas_expect[] = {0.5773493, -0.5773493, 0.5773493, 1.1546985, -1.1546985, -0.5773493};
    for (int i = 0; i < 6; ++i) CHECK(close(a[i], drmas_expect[i], 1e-6, 1e-6), "drmas row %d: %g vs %g", i, a[i], drmas_expect[i]);
    // GRPO with trajectory pooling: S = {0.5, 1, 0}, mean 0.5, std 0.5
    c = cfg_of(kGrpo);
    CHECK(drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 6, s, uid, traj, ag, 1, 3, 2, a, nullptr, nullptr) == 0, "grpo: %s", drmas_last_error());
    const double grpo_expect[] = {0, 0, 0.999998, 0.999998, -0.999998, -0.999998};
    for (int i = 0; i < 6; ++i) CHECK(close(a[i], grpo_expect[i], 1e-6, 1e-6), "grpo row %d: %g vs %g", i, a[i], grpo_expect[i]);
    CHECK(a[0] == 0.0f && a[1] == 0.0f, "grpo rows at the group mean must be exactly 0");
}

// Lemma 4.2's inflation is the agent's mean of A² under the group baseline over the group's, so a
// ratio of population variances. One task, 8 trajectories, 4 succeed (1, else 0); agent 0 acts in
// every trajectory, agent 1 in trajectories 0 and 4 only (one success, one failure). Under GRPO
// both agents' rows have E[A²] = 0.25/σ_u², so both factors are exactly 1, with either pooling and
// either ddof: trajectories {1,1,1,1,0,0,0,0} (mean 0.5, M2 2, variance 2/8); rows add agent 1's
// {1, 0} (M2 2.5 over 10); agent 1 {1, 0}: mean 0.5, M2 0.5, variance 0.5/2. With n − 1 agent 1's
// factor was 0.5 / (2/7) = 1.75.
static void test_inflation_population() {
    const float s[] = {1, 1, 1, 1, 1, 0, 0, 0, 0, 0};
    const int32_t uid[] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    const int32_t traj[] = {0, 0, 1, 2, 3, 4, 4, 5, 6, 7};
    const int32_t ag[] = {0, 1, 0, 0, 0, 0, 1, 0, 0, 0};
    const int64_t n = 10, S = 2;
    for (int pool : {DRMAS_POOL_TRAJECTORIES, DRMAS_POOL_ROWS})
        for (int ddof : {1, 0}) {
            drmas_norm_config c = cfg_of(kGrpo);
            c.global_pooling = pool;
            c.ddof = ddof;
            float a[10];
            double d[DRMAS_DIAG_FIELDS * 2];
            const int st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, s, uid, traj, ag, 1, 8, 2, a, d, nullptr);
            CHECK(st == 0, "pool %d ddof %d: %s", pool, ddof, drmas_last_error());
            if (st != 0) continue;
            double sq[2] = {0, 0}, cnt[2] = {0, 0};
            for (int64_t i = 0; i < n; ++i) {
                sq[ag[i]] += (double)a[i] * a[i];
                cnt[ag[i]] += 1;
            }
            CHECK(close(sq[1] / cnt[1], sq[0] / cnt[0], 1e-6, 1e-6), "pool %d ddof %d: the premise, equal E[A²]: %g vs %g", pool, ddof,
                  sq[1] / cnt[1], sq[0] / cnt[0]);
            for (int k = 0; k < 2; ++k)
                CHECK(d[DRMAS_DIAG_INFLATION * S + k] == 1.0, "pool %d ddof %d agent %d: inflation %.17g, want exactly 1", pool, ddof, k,
                      d[DRMAS_DIAG_INFLATION * S + k]);
        }
    // A factor other than 1: four trajectories, agent 0 in each, agent 1 in the first two only;
    // trajectory scores S = {1, 0, 1, 1} (agent 1 scores 1 and 0 with them): mean 3/4, variance 3/16.
    // Agent 0 {1, 0, 1, 1}: its group's statistics, factor 1. Agent 1 {1, 0}: mean 1/2, variance
    // 1/4, shift 1/4: (1/4 + 1/16) / (3/16) = 5/3, its mean of (S − 3/4)² (5/16) over the
    // trajectories' (3/16). With n − 1: (1/2 + 1/16) / (1/4) = 2.25.
    {
        const float s2[] = {1, 1, 0, 0, 1, 1};
        const int32_t u2[] = {0, 0, 0, 0, 0, 0}, t2[] = {0, 0, 1, 1, 2, 3}, a2[] = {0, 1, 0, 1, 0, 0};
        drmas_norm_config c = cfg_of(kGrpo);
        float a[6];
        double d[DRMAS_DIAG_FIELDS * 2];
        CHECK(drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 6, s2, u2, t2, a2, 1, 4, 2, a, d, nullptr) == 0, "%s", drmas_last_error());
        CHECK(d[DRMAS_DIAG_INFLATION * S + 0] == 1.0 && close(d[DRMAS_DIAG_INFLATION * S + 1], 5.0 / 3, 0, 1e-15),
              "inflation %.17g %.17g, want 1 and 5/3", d[DRMAS_DIAG_INFLATION * S + 0], d[DRMAS_DIAG_INFLATION * S + 1]);
    }
}

struct Rows {
    std::vector<float> s;
    std::vector<int32_t> uid, traj, agent;
    int64_t U, T, K;
};

// Rollout layout: uid-major, N trajectories per uid, `turns` rounds of K agents each.
static Rows rollout_rows(int64_t U, int64_t N, int64_t K, int turns, std::mt19937_64& rng) {
    Rows r{{}, {}, {}, {}, U, U * N, K};
    std::bernoulli_distribution coin(0.6);
    std::uniform_int_distribution<int> t(1, turns);
    for (int64_t u = 0; u < U; ++u)
        for (int64_t j = 0; j < N; ++j) {
            const int nturns = t(rng);
            const float reward = coin(rng) ? 1.0f : 0.0f;
            for (int tt = 0; tt < nturns; ++tt)
                for (int64_t k = 0; k < K; ++k) {
                    r.s.push_back(reward - (coin(rng) ? 0.0f : 0.1f));
                    r.uid.push_back((int32_t)u);
                    r.traj.push_back((int32_t)(u * N + j));
                    r.agent.push_back((int32_t)k);
                }
        }
    return r;
}

// Rows of r in the order perm (out[i] = r[perm[i]]).
static Rows permuted(const Rows& r, const std::vector<int64_t>& perm) {
    Rows p = r;
    for (size_t i = 0; i < perm.size(); ++i) {
        p.s[i] = r.s[perm[i]];
        p.uid[i] = r.uid[perm[i]];
        p.traj[i] = r.traj[perm[i]];
        p.agent[i] = r.agent[perm[i]];
    }
    return p;
}

static void test_layout_invariance() {
    std::mt19937_64 rng(7);
    Rows r = rollout_rows(257, 8, 3, 2, rng);
    const int64_t n = (int64_t)r.s.size();
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Rows p = permuted(r, perm);
    for (int mode = 0; mode < kDescriptors; ++mode)
        for (int pool = 0; pool < 2; ++pool)
            for (int single = 0; single < 3; ++single) {
                drmas_norm_config c = cfg_of(mode);
                c.global_pooling = pool;
                c.singleton = single;
                std::vector<float> a(n), b(n);
                const int64_t S = r.U * r.K;
                std::vector<double> da(DRMAS_DIAG_FIELDS * S), db(DRMAS_DIAG_FIELDS * S);
                int st1 = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(), r.U, r.T, r.K, a.data(), da.data(), nullptr);
                int st2 = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, p.s.data(), p.uid.data(), p.traj.data(), p.agent.data(), p.U, p.T, p.K, b.data(), db.data(), nullptr);
                CHECK(st1 == 0 && st2 == 0, "mode %d: %s", mode, drmas_last_error());
                int bad = 0;
                for (int64_t i = 0; i < n && bad < 5; ++i)
                    if (!close(b[i], a[perm[i]], 1e-6, 1e-6)) {
                        ++bad;
                        printf("  mode %d pool %d single %d row %lld: shuffled %g vs grouped %g\n", mode, pool, single, (long long)i, b[i], a[perm[i]]);
                    }
                CHECK(bad == 0, "shuffled rows (general path) must match grouped rows (blocked path)");
                bool diag_same = true;
                for (int64_t j = 0; j < DRMAS_DIAG_FIELDS * S; ++j)
                    if (!(close(da[j], db[j], 1e-9, 1e-9) || (isnan(da[j]) && isnan(db[j])))) diag_same = false;
                CHECK(diag_same, "diagnostics must not depend on the row order (mode %d)", mode);
            }
}

static void test_threads_agree() {
    std::mt19937_64 rng(11);
    Rows r = rollout_rows(20000, 8, 2, 2, rng);  // > 300K rows: the parallel paths run
    const int64_t n = (int64_t)r.s.size();
    drmas_norm_config c = cfg_of(kDrmas);
    std::vector<float> a(n), b(n);
    drmas_set_num_threads(1);
    drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(), r.U, r.T, r.K, a.data(), nullptr, nullptr);
    drmas_set_num_threads(4);
    drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(), r.U, r.T, r.K, b.data(), nullptr, nullptr);
    drmas_set_num_threads(0);
    CHECK(memcmp(a.data(), b.data(), n * sizeof(float)) == 0, "1 and 4 threads must give identical advantages");
}

static void test_constant_segments() {
    // Every agent segment constant (0.3f, not exactly representable in binary): exactly 0.
    const int64_t U = 3, N = 5, K = 2;
    std::vector<float> s;
    std::vector<int32_t> uid, traj, ag;
    for (int64_t u = 0; u < U; ++u)
        for (int64_t j = 0; j < N; ++j)
            for (int64_t k = 0; k < K; ++k) {
                s.push_back(k == 0 ? 0.3f : 0.7f);
                uid.push_back((int32_t)u);
                traj.push_back((int32_t)(u * N + j));
                ag.push_back((int32_t)k);
            }
    std::vector<float> a(s.size(), 99.0f);
    drmas_norm_config c = cfg_of(kDrmas);
    CHECK(drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, (int64_t)s.size(), s.data(), uid.data(), traj.data(), ag.data(), U, U * N, K, a.data(), nullptr, nullptr) == 0, "%s", drmas_last_error());
    bool zero = true;
    for (float v : a) zero = zero && v == 0.0f;
    CHECK(zero, "constant agent segments must give exactly 0");
    std::vector<int64_t> cnt(2);
    std::vector<double> mean(2), m2(2), sd(2);
    std::vector<int32_t> seg(s.size());
    for (size_t i = 0; i < s.size(); ++i) seg[i] = ag[i];
    CHECK(drmas_segment_stats_f32(DRMAS_DEVICE_CPU, (int64_t)s.size(), s.data(), seg.data(), 2, 1, cnt.data(), mean.data(), m2.data(), sd.data(), nullptr) == 0, "%s", drmas_last_error());
    CHECK(mean[0] == (double)0.3f && m2[0] == 0.0 && sd[0] == 0.0, "constant segment: mean %.17g m2 %g std %g", mean[0], m2[0], sd[0]);
    CHECK(cnt[0] == 15 && cnt[1] == 15, "counts %lld %lld", (long long)cnt[0], (long long)cnt[1]);
}

static bool contains(const char* hay, const char* needle) { return strstr(hay, needle) != nullptr; }

static void test_errors() {
    const float s[] = {1, 0, NAN, 1};
    const int32_t uid[] = {0, 0, 1, 1}, traj[] = {0, 0, 1, 1}, ag[] = {0, 1, 0, 1};
    float out[4] = {-7, -7, -7, -7};
    drmas_norm_config c = cfg_of(kDrmas);
    int st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, s, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "scores[2]"), "NaN score: %d %s", st, drmas_last_error());
    const int32_t bad_uid[] = {0, 0, 1, 5};
    const float ok[] = {1, 0, 1, 1};
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, ok, bad_uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "uid[3] = 5"), "uid out of range: %d %s", st, drmas_last_error());
    const int32_t bad_ag[] = {0, -1, 0, 1};
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, ok, uid, traj, bad_ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "agent[1] = -1"), "agent out of range: %d %s", st, drmas_last_error());
    const int32_t split_traj[] = {0, 0, 0, 1};  // trajectory 0 in uid 0 and uid 1
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, ok, uid, split_traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_INCONSISTENT && contains(drmas_last_error(), "traj[2] = 0"), "split trajectory: %d %s", st, drmas_last_error());
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, ok, uid, nullptr, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_NULL && contains(drmas_last_error(), "traj is NULL"), "null traj: %d %s", st, drmas_last_error());
    drmas_norm_config bad = c;
    bad.mean_from = 2;
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &bad, 4, ok, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "cfg.mean_from"), "bad mean_from: %d %s", st, drmas_last_error());
    bad = c;
    bad.std_from = -1;
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &bad, 4, ok, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "cfg.std_from"), "bad std_from: %d %s", st, drmas_last_error());
    bad = c;
    bad.numerator = 3;
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &bad, 4, ok, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "cfg.numerator"), "bad numerator: %d %s", st, drmas_last_error());
    st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, -1, ok, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_SIZE, "negative n: %d %s", st, drmas_last_error());
    CHECK(out[0] == -7 && out[1] == -7 && out[2] == -7 && out[3] == -7, "outputs must be untouched after errors");
    // outputs sharing memory with the inputs or with each other (in place would give wrong results);
    // every array inside one arena, so that which overlap is found first never depends on the stack
    {
        alignas(8) unsigned char arena[2048];
        memset(arena, 0, sizeof arena);
        float* sc = (float*)(void*)arena;                  // [0, 16)
        int32_t* ud = (int32_t*)(void*)(arena + 64);        // [64, 80)
        int32_t* ag2 = (int32_t*)(void*)(arena + 128);      // [128, 144)
        float* adv = (float*)(void*)(arena + 192);          // [192, 208)
        double* dg = (double*)(void*)(arena + 1024);        // [1024, 1312)
        const float sv[4] = {1, 0, 1, 1};
        const int32_t uv[4] = {0, 0, 1, 1}, av[4] = {0, 1, 0, 1};
        memcpy(sc, sv, sizeof sv);
        memcpy(ud, uv, sizeof uv);
        memcpy(ag2, av, sizeof av);
        struct Case {
            const char* what;
            float* adv;
            double* dg;
            const char* message;
        } cases[] = {
            {"advantages = scores", sc, nullptr, "advantages overlaps scores"},
            {"advantages one row into the scores", sc + 3, nullptr, "advantages overlaps scores"},
            {"advantages on the agents", (float*)(void*)(ag2 + 2), nullptr, "advantages overlaps agent"},
            {"diagnostics on the uids", adv, (double*)(void*)ud, "diagnostics overlaps uid"},
            {"advantages inside the diagnostics", (float*)(void*)(dg + 2), dg, "advantages and diagnostics overlap"},
        };
        unsigned char before[sizeof arena];
        memcpy(before, arena, sizeof arena);
        for (const Case& k : cases)
            for (int trusted = 0; trusted < 2; ++trusted) {
                st = (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(DRMAS_DEVICE_CPU, &c, 4, sc, ud, traj, ag2, 2, 2, 2,
                                                                                    k.adv, k.dg, nullptr);
                CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), k.message), "%s (%s): %d %s", k.what,
                      trusted ? "trusted" : "validated", st, drmas_last_error());
                CHECK(memcmp(before, arena, sizeof arena) == 0, "%s: memory written", k.what);
            }
        // adjacent, not overlapping: accepted
        st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 4, sc, ud, traj, ag2, 2, 2, 2, sc + 4, dg, nullptr);
        CHECK(st == DRMAS_OK, "advantages right after the scores: %d %s", st, drmas_last_error());
    }

    int64_t cnt[2] = {-1, -1};
    double mean[2] = {-1, -1}, m2[2] = {-1, -1};
    const int32_t seg[] = {0, 1, 2, 0};
    st = drmas_segment_stats_f32(DRMAS_DEVICE_CPU, 4, ok, seg, 2, 1, cnt, mean, m2, nullptr, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "segment_ids[2] = 2"), "segment id: %d %s", st, drmas_last_error());
    CHECK(cnt[0] == -1 && mean[0] == -1 && m2[0] == -1, "stats outputs untouched");

    const int64_t offs[] = {0, 3, 2};
    float tok[4] = {-7, -7, -7, -7};
    const float rv[] = {1, 2};
    st = drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, 2, rv, offs, 4, tok, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "row_offsets[2] = 2"), "offsets: %d %s", st, drmas_last_error());
    const int64_t past[] = {0, 2, 5};
    st = drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, 2, rv, past, 4, tok, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "num_tokens"), "past end: %d %s", st, drmas_last_error());
    CHECK(tok[0] == -7 && tok[3] == -7, "token outputs untouched");

    drmas_loss_config lc{0.2, 0.2, 3.0, 0.0, 0.0, DRMAS_KL_NONE, 0};
    double sums[DRMAS_LOSS_SUMS];
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, past, 4, ok, ok, ok, nullptr, nullptr, tok, sums, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "normalizer"), "zero normalizer: %d %s", st, drmas_last_error());
    lc.normalizer = 4;
    lc.kl_type = DRMAS_KL_K3;
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, past, 4, ok, ok, ok, nullptr, nullptr, tok, sums, nullptr);
    CHECK(st == DRMAS_ERR_NULL && contains(drmas_last_error(), "ref_logp"), "kl without ref: %d %s", st, drmas_last_error());
    lc.kl_type = DRMAS_KL_NONE;
    lc.per_row_mean = 2;
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, past, 4, ok, ok, ok, nullptr, nullptr, tok, sums, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "per_row_mean"), "bad per_row_mean: %d %s", st, drmas_last_error());
    CHECK(tok[0] == -7 && tok[3] == -7, "grad untouched");
    lc.per_row_mean = 0;
    // grad and sums sharing memory with the inputs or with each other: refused by name, nothing written
    // (one arena, so that which overlap is found first never depends on the stack)
    {
        alignas(8) unsigned char arena[1024];
        memset(arena, 0, sizeof arena);
        float* lp = (float*)(void*)arena;                 // [0, 16)
        float* olp = (float*)(void*)(arena + 64);          // [64, 80)
        float* av = (float*)(void*)(arena + 128);          // [128, 144): 4 tokens, or 2 rows
        uint8_t* mk = arena + 192;                         // [192, 196)
        int64_t* of = (int64_t*)(void*)(arena + 256);      // [256, 280)
        float* g = (float*)(void*)(arena + 320);           // [320, 336)
        double* sm = (double*)(void*)(arena + 512);        // [512, 512 + 8 * DRMAS_LOSS_SUMS)
        const int64_t ov[3] = {0, 2, 4};
        memcpy(of, ov, sizeof ov);
        memset(mk, 1, 4);
        struct Case {
            const char* what;
            float* grad;
            double* sums;
            const char* message;
        } cases[] = {
            {"grad = logp", lp, sm, "grad overlaps logp"},
            {"grad one token into old_logp", olp + 3, sm, "grad overlaps old_logp"},
            {"grad on the mask", (float*)(void*)mk, sm, "grad overlaps mask"},
            {"grad on the row offsets", (float*)(void*)(of + 1), sm, "grad overlaps row_offsets"},
            {"sums on the advantages", g, (double*)(void*)av, "sums overlaps advantages"},
            {"sums inside grad", g, (double*)(void*)(g + 2), "grad and sums overlap"},
        };
        unsigned char before[sizeof arena];
        memcpy(before, arena, sizeof arena);
        for (const Case& k : cases) {
            st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, of, 4, lp, olp, av, nullptr, mk, k.grad, k.sums, nullptr);
            CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), k.message), "%s: %d %s", k.what, st, drmas_last_error());
            CHECK(memcmp(before, arena, sizeof arena) == 0, "%s: memory written", k.what);
        }
        st = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &lc, 2, of, of, 4, lp, olp, av, nullptr, mk, av + 1, sm, nullptr);
        CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "grad overlaps row_advantages"), "grad on the row advantages: %d %s",
              st, drmas_last_error());
        CHECK(memcmp(before, arena, sizeof arena) == 0, "grad on the row advantages: memory written");
        // adjacent, not overlapping: accepted
        st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, of, 4, lp, olp, av, nullptr, mk, lp + 4, sm, nullptr);
        CHECK(st == DRMAS_OK, "grad right after logp: %d %s", st, drmas_last_error());
    }

    st = drmas_advantage_f32(DRMAS_DEVICE_CUDA, &c, 4, ok, uid, traj, ag, 2, 2, 2, out, nullptr, nullptr);
    if (!drmas_cuda_available())
        CHECK(st == DRMAS_ERR_UNSUPPORTED && strlen(drmas_last_error()) > 0, "CUDA without a GPU: %d %s", st, drmas_last_error());
    // the trainer's check at start: a library without CUDA says so (the GPU cases: test_cuda.cpp)
    if (!drmas_cuda_compiled()) {
        st = drmas_cuda_check_device(0);
        CHECK(st == DRMAS_ERR_UNSUPPORTED && strcmp(drmas_last_error(), "drmas_cuda_check_device: this libdrmas was built without "
                                                                         "CUDA (nvcc was not found at build time)") == 0,
              "check_device without CUDA: %d %s", st, drmas_last_error());
    }
}

static void test_broadcast() {
    const int64_t offs[] = {1, 3, 3, 6};
    const float rv[] = {2, 5, -1};
    float tok[8];
    for (float& v : tok) v = 9;
    CHECK(drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, 3, rv, offs, 8, tok, nullptr) == 0, "%s", drmas_last_error());
    const float expect[] = {0, 2, 2, -1, -1, -1, 0, 0};
    CHECK(memcmp(tok, expect, sizeof tok) == 0, "broadcast values");
}

static void test_loss_identities() {
    // ratio 1 (logp == old): pg = -A, d pg/d logp = -A; token-mean over 4 valid tokens.
    const int64_t offs[] = {0, 3, 6};
    const float lp[] = {-1, -2, -3, -1, -2, NAN};
    const float adv[] = {1, 1, 1, -2, -2, -2};
    const uint8_t mask[] = {1, 1, 0, 1, 1, 0};
    drmas_loss_config lc{0.2, 0.2, 3.0, 0.0, 4.0, DRMAS_KL_NONE, 0};
    float g[6];
    double sums[DRMAS_LOSS_SUMS];
    CHECK(drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 2, offs, 6, lp, lp, adv, nullptr, mask, g, sums, nullptr) == 0, "%s", drmas_last_error());
    const float eg[] = {-0.25f, -0.25f, 0, 0.5f, 0.5f, 0};
    for (int t = 0; t < 6; ++t) CHECK(g[t] == eg[t], "grad[%d] = %g, expected %g", t, g[t], eg[t]);
    CHECK(close(sums[DRMAS_LOSS_LOSS], (-1 - 1 + 2 + 2) / 4.0, 1e-12, 0), "loss %g", sums[DRMAS_LOSS_LOSS]);
    CHECK(sums[DRMAS_LOSS_TOKENS] == 4 && sums[DRMAS_LOSS_CLIPPED] == 0, "tokens %g clipped %g", sums[DRMAS_LOSS_TOKENS], sums[DRMAS_LOSS_CLIPPED]);
    // far outside the clip range with A > 0 and ratio > 1 + eps: clipped, no gradient.
    const float lp2[] = {0.5f}, old2[] = {0.0f}, a2[] = {1.0f};
    const int64_t o2[] = {0, 1};
    lc.normalizer = 1;
    CHECK(drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, o2, 1, lp2, old2, a2, nullptr, nullptr, g, sums, nullptr) == 0, "%s", drmas_last_error());
    CHECK(g[0] == 0.0f && sums[DRMAS_LOSS_CLIPPED] == 1 && close(sums[DRMAS_LOSS_LOSS], -1.2, 1e-6, 0), "clipped: grad %g loss %g", g[0], sums[DRMAS_LOSS_LOSS]);
    // A < 0 and a huge ratio: the dual clip caps the loss at -A c = 3 and kills the gradient.
    const float a3[] = {-1.0f}, lp3[] = {5.0f};
    CHECK(drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, o2, 1, lp3, old2, a3, nullptr, nullptr, g, sums, nullptr) == 0, "%s", drmas_last_error());
    CHECK(g[0] == 0.0f && sums[DRMAS_LOSS_CLIPPED_LOWER] == 1 && close(sums[DRMAS_LOSS_LOSS], 3.0, 1e-6, 0), "dual clip: grad %g loss %g", g[0], sums[DRMAS_LOSS_LOSS]);
}

// Errors found by the parallel, blocked validation: the message names the first bad row in
// row order whatever the thread count, and the outputs stay untouched.
static void test_parallel_errors() {
    std::mt19937_64 rng(5);
    const Rows r = rollout_rows(20000, 8, 2, 2, rng);  // > 300K rows
    const int64_t n = (int64_t)r.s.size();
    drmas_norm_config c = cfg_of(kDrmas);
    for (int threads : {1, 4}) {
        drmas_set_num_threads(threads);
        std::vector<float> out(n, -7.0f);
        auto untouched = [&] {
            for (float v : out)
                if (v != -7.0f) return false;
            return true;
        };
        char want[96];
        // trajectory 0 (uid 0) shows up again near the end, in the last uid: another thread's chunk
        Rows split = r;
        const int64_t late = n - 3;
        split.traj[late] = 0;
        int st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, split.s.data(), split.uid.data(), split.traj.data(), split.agent.data(), r.U, r.T, r.K, out.data(), nullptr, nullptr);
        snprintf(want, sizeof want, "traj[%lld] = 0 has uid %d", (long long)late, split.uid[late]);
        CHECK(st == DRMAS_ERR_INCONSISTENT && contains(drmas_last_error(), want), "%d threads, split trajectory: %d %s", threads, st, drmas_last_error());
        CHECK(untouched(), "%d threads: outputs untouched after a split trajectory", threads);
        // a bad agent in the middle of a block, and a NaN later: the agent is reported
        Rows bad = r;
        const int64_t row = n / 2 + 517;
        bad.agent[row] = 2;
        bad.s[n - 10] = NAN;
        st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, bad.s.data(), bad.uid.data(), bad.traj.data(), bad.agent.data(), r.U, r.T, r.K, out.data(), nullptr, nullptr);
        snprintf(want, sizeof want, "agent[%lld] = 2", (long long)row);
        CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), want), "%d threads, bad agent: %d %s", threads, st, drmas_last_error());
        // a split trajectory before a bad row is reported first
        bad.traj[row - 1] = 0;
        st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, bad.s.data(), bad.uid.data(), bad.traj.data(), bad.agent.data(), r.U, r.T, r.K, out.data(), nullptr, nullptr);
        snprintf(want, sizeof want, "traj[%lld] = 0", (long long)(row - 1));
        CHECK(st == DRMAS_ERR_INCONSISTENT && contains(drmas_last_error(), want), "%d threads, split before bad: %d %s", threads, st, drmas_last_error());
        CHECK(untouched(), "%d threads: outputs untouched after bad rows", threads);
    }
    drmas_set_num_threads(0);
}

// A team smaller than the threads asked for: OpenMP gives one when OMP_THREAD_LIMIT or OMP_DYNAMIC says
// so, or, as here, to a call made from inside the caller's own parallel region (nested regions are
// inactive: one thread). Every entry that splits its work into parts must still do every part, with the
// bits of a full team, and its errors must still be reported. (Handing the parts the team's size left
// parts unrun: sorted rows fell through to the general validation, whose owner merge read the unrun
// parts' empty maps — a segfault, i.e. a dead JVM — found by review.) Two outer threads call at once,
// each with its own outputs.
struct TeamResults {
    std::vector<float> sorted, shuffled, trusted, trusted_shuffled, huge_u, loss_grad, rows_grad, lmhead_lp, lmhead_h;
    std::vector<double> diag, loss_sums, rows_sums;
    int32_t st[10] = {0};
    std::string bad_message;
    std::vector<float> bad_out;
};

static void test_small_team() {
    std::mt19937_64 rng(23);
    const Rows r = rollout_rows(20000, 8, 2, 2, rng);  // > 300K rows: every advantage path splits
    const int64_t n = (int64_t)r.s.size();
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    const Rows sh = permuted(r, perm);
    Rows bad = sh;  // unsorted with a bad agent: the partition declines, the general validation names it
    const int64_t bad_row = n / 2 + 99;
    bad.agent[bad_row] = 5;
    const int64_t huge_u = 4 * n + 5000;  // so many uids that the general path runs on valid rows
    const drmas_norm_config c = cfg_of(kDrmas);
    // the loss: 4000 rows of 0..400 tokens, 10% masked
    std::vector<int64_t> off{0};
    for (int j = 0; j < 4000; ++j) off.push_back(off.back() + (int64_t)(rng() % 401));
    const int64_t R = (int64_t)off.size() - 1, T = off.back();
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> lp(T), old(T), adv_row(R), adv_tok(T);
    std::vector<uint8_t> mask(T);
    for (int64_t t = 0; t < T; ++t) {
        lp[t] = -fabsf(nd(rng));
        old[t] = lp[t] + 0.3f * nd(rng);
        mask[t] = rng() % 10 != 0;
    }
    for (int64_t q = 0; q < R; ++q) {
        adv_row[q] = nd(rng);
        for (int64_t t = off[q]; t < off[q + 1]; ++t) adv_tok[t] = adv_row[q];
    }
    const drmas_loss_config lc{0.2, 0.28, 3.0, 0.0, 37.0, DRMAS_KL_NONE, 0};
    // the LM head's log-probs: 300 tokens of a 5000-word vocabulary
    const int64_t NT = 300, V = 5000;
    std::vector<float> logits(NT * V);
    std::vector<int64_t> targets(NT);
    for (float& z : logits) z = 3.0f * nd(rng);
    for (int64_t& y : targets) y = (int64_t)(rng() % V);

    auto run_all = [&](TeamResults& o) {
        const int64_t S = r.U * r.K;
        o.sorted.assign(n, 0.0f);
        o.shuffled.assign(n, 0.0f);
        o.trusted.assign(n, 0.0f);
        o.trusted_shuffled.assign(n, 0.0f);
        o.huge_u.assign(n, 0.0f);
        o.diag.assign(DRMAS_DIAG_FIELDS * S, 0.0);
        o.st[0] = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(), r.U, r.T,
                                      r.K, o.sorted.data(), o.diag.data(), nullptr);
        o.st[1] = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, sh.s.data(), sh.uid.data(), sh.traj.data(), sh.agent.data(), r.U,
                                      r.T, r.K, o.shuffled.data(), nullptr, nullptr);
        o.st[2] = drmas_advantage_trusted_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(),
                                              r.U, r.T, r.K, o.trusted.data(), nullptr, nullptr);
        o.st[3] = drmas_advantage_trusted_f32(DRMAS_DEVICE_CPU, &c, n, sh.s.data(), sh.uid.data(), sh.traj.data(),
                                              sh.agent.data(), r.U, r.T, r.K, o.trusted_shuffled.data(), nullptr, nullptr);
        o.st[4] = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, sh.s.data(), sh.uid.data(), sh.traj.data(), sh.agent.data(),
                                      huge_u, r.T, r.K, o.huge_u.data(), nullptr, nullptr);
        o.bad_out.assign(n, -7.0f);
        o.st[5] = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, bad.s.data(), bad.uid.data(), bad.traj.data(), bad.agent.data(),
                                      r.U, r.T, r.K, o.bad_out.data(), nullptr, nullptr);
        o.bad_message = drmas_last_error();  // (the library's last error is per thread)
        o.loss_grad.assign(T, 0.0f);
        o.rows_grad.assign(T, 0.0f);
        o.loss_sums.assign(DRMAS_LOSS_SUMS, 0.0);
        o.rows_sums.assign(DRMAS_LOSS_SUMS, 0.0);
        o.st[6] = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, R, off.data(), T, lp.data(), old.data(), adv_tok.data(), nullptr,
                                         mask.data(), o.loss_grad.data(), o.loss_sums.data(), nullptr);
        o.st[7] = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &lc, R, off.data(), off.data(), T, lp.data(), old.data(),
                                              adv_row.data(), nullptr, mask.data(), o.rows_grad.data(), o.rows_sums.data(), nullptr);
        o.lmhead_lp.assign(NT, 0.0f);
        o.lmhead_h.assign(NT, 0.0f);
        o.st[8] = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, NT, V, logits.data(), targets.data(), o.lmhead_lp.data(),
                                            o.lmhead_h.data(), nullptr);
    };
    drmas_set_num_threads(4);
    TeamResults full;
    run_all(full);
    for (int k = 0; k < 9; ++k) CHECK(full.st[k] == (k == 5 ? DRMAS_ERR_RANGE : DRMAS_OK), "full team, call %d: status %d", k, full.st[k]);
    TeamResults inner[2];
    int inner_team[2] = {0, 0};
    const int saved_levels = omp_get_max_active_levels();
    omp_set_max_active_levels(1);
#pragma omp parallel num_threads(2)
    {
        const int me = omp_get_thread_num();
        if (me < 2) {
#pragma omp parallel num_threads(4)
            {
                if (omp_get_thread_num() == 0) inner_team[me] = omp_get_num_threads();
            }
            run_all(inner[me]);
        }
    }
    omp_set_max_active_levels(saved_levels);
    char want[64];
    snprintf(want, sizeof want, "agent[%lld] = 5", (long long)bad_row);
    CHECK(contains(full.bad_message.c_str(), want), "full team: %s", full.bad_message.c_str());
    for (int me = 0; me < 2; ++me) {
        const TeamResults& o = inner[me];
        CHECK(inner_team[me] == 1, "outer thread %d: a nested region has %d threads (the test needs 1)", me, inner_team[me]);
        for (int k = 0; k < 9; ++k) CHECK(o.st[k] == full.st[k], "team of 1, thread %d, call %d: status %d, not %d", me, k, o.st[k], full.st[k]);
        CHECK(contains(o.bad_message.c_str(), want), "team of 1, thread %d: bad agent: %s", me, o.bad_message.c_str());
        CHECK(std::all_of(o.bad_out.begin(), o.bad_out.end(), [](float v) { return v == -7.0f; }), "team of 1, thread %d: outputs touched by a refused call", me);
        auto same = [&](const char* what, const auto& x, const auto& y) {
            CHECK(x.size() == y.size() && memcmp(x.data(), y.data(), x.size() * sizeof x[0]) == 0,
                  "team of 1, thread %d: %s differ from a full team's", me, what);
        };
        same("sorted advantages", o.sorted, full.sorted);
        same("diagnostics", o.diag, full.diag);
        same("shuffled advantages", o.shuffled, full.shuffled);
        same("trusted advantages", o.trusted, full.trusted);
        same("trusted shuffled advantages", o.trusted_shuffled, full.trusted_shuffled);
        same("advantages with 4n uids", o.huge_u, full.huge_u);
        same("loss gradients", o.loss_grad, full.loss_grad);
        same("loss sums", o.loss_sums, full.loss_sums);
        same("per-row loss gradients", o.rows_grad, full.rows_grad);
        same("per-row loss sums", o.rows_sums, full.rows_sums);
        same("LM-head log-probs", o.lmhead_lp, full.lmhead_lp);
        same("LM-head entropies", o.lmhead_h, full.lmhead_h);
    }
    // the shuffled rows' advantages are the sorted rows' (as the other tests check at full team)
    bool perm_ok = true;
    for (int64_t i = 0; i < n && perm_ok; ++i) perm_ok = inner[0].shuffled[i] == full.sorted[perm[i]];
    CHECK(perm_ok, "team of 1: shuffled rows' advantages are not the sorted rows' permuted");
    drmas_set_num_threads(0);
}

// An allocation that fails inside a parallel part: the exception must not leave the OpenMP region
// (std::terminate, a dead JVM) but come back as DRMAS_ERR_ALLOC with the outputs untouched. Made to
// fail here by lowering the address-space limit for the call: the general validation's per-part
// trajectory map of T = 2^31 - 1 entries (8 GB a part) for shuffled rows with a uid out of range.
static void test_parallel_bad_alloc() {
    std::mt19937_64 rng(29);
    const Rows r = rollout_rows(12000, 8, 2, 2, rng);  // ~200K rows: two parts
    const int64_t n = (int64_t)r.s.size();
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    Rows bad = permuted(r, perm);
    bad.uid[n / 3] = (int32_t)r.U;  // out of range: the partition declines, the general path validates
    const drmas_norm_config c = cfg_of(kDrmas);
    std::vector<float> out(n, -7.0f);
    long pages = 0;
    FILE* f = fopen("/proc/self/statm", "r");
    const bool have_vm = f != nullptr && fscanf(f, "%ld", &pages) == 1;
    if (f) fclose(f);
    struct rlimit saved;
    if (!have_vm || getrlimit(RLIMIT_AS, &saved) != 0) {
        printf("  parallel bad_alloc: skipped (no /proc/self/statm or RLIMIT_AS)\n");
        return;
    }
    drmas_set_num_threads(2);
    struct rlimit low = saved;
    low.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + ((rlim_t)2 << 30);  // 2 GB more than now
    CHECK(setrlimit(RLIMIT_AS, &low) == 0, "setrlimit");
    const int st = drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, n, bad.s.data(), bad.uid.data(), bad.traj.data(), bad.agent.data(),
                                       r.U, INT32_MAX, r.K, out.data(), nullptr, nullptr);
    const std::string msg = drmas_last_error();
    CHECK(setrlimit(RLIMIT_AS, &saved) == 0, "restoring RLIMIT_AS");
    drmas_set_num_threads(0);
    CHECK(st == DRMAS_ERR_ALLOC && contains(msg.c_str(), "out of memory"), "bad_alloc in a parallel part: status %d: %s", st, msg.c_str());
    CHECK(std::all_of(out.begin(), out.end(), [](float v) { return v == -7.0f; }), "bad_alloc in a parallel part: outputs touched");
}

// Config values that overflow the kernels' floats are refused (kl_coef or entropy_coef past FLT_MAX,
// a normalizer whose inverse is): they made every valid token's gradient inf * 0 = NaN. And the
// target's dL/dz entry is flushed below FLT_MIN like the others (it was added after the flush):
// one token, vocabulary {0, -16}, target 0, old log-prob = log-prob, advantage 1e-32, so that
// g (1 - p) ~ -1.1e-39 at the target and -g p ~ 1.1e-39 at the other entry.
static void test_loss_float_range() {
    const int64_t off[] = {0, 2};
    const float lp[] = {-0.5f, -1.0f}, adv[] = {1.0f, 1.0f};
    float grad[2] = {-7, -7};
    double sums[DRMAS_LOSS_SUMS];
    const drmas_loss_config base{0.2, 0.28, 0.0, 0.0, 2.0, DRMAS_KL_NONE, 0};
    drmas_loss_config lc = base;
    lc.kl_coef = 1e39;
    int st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, off, 2, lp, lp, adv, nullptr, nullptr, grad, sums, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "kl_coef"), "kl_coef 1e39: %d %s", st, drmas_last_error());
    lc.kl_coef = -3.4e38;  // (a float)
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, off, 2, lp, lp, adv, nullptr, nullptr, grad, sums, nullptr);
    CHECK(st == DRMAS_OK && std::isfinite(grad[0]) && std::isfinite(grad[1]), "kl_coef -3.4e38 without KL: %d %s, grads %g %g", st,
          drmas_last_error(), grad[0], grad[1]);
    lc = base;
    lc.normalizer = 1e-39;
    grad[0] = grad[1] = -7;
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, off, 2, lp, lp, adv, nullptr, nullptr, grad, sums, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "normalizer") && grad[0] == -7, "normalizer 1e-39: %d %s", st,
          drmas_last_error());
    lc.normalizer = 1e-38;  // 1e38 is a float
    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 1, off, 2, lp, lp, adv, nullptr, nullptr, grad, sums, nullptr);
    CHECK(st == DRMAS_OK, "normalizer 1e-38: %d %s", st, drmas_last_error());

    const float z0[] = {0.0f, -16.0f};
    const int64_t y[] = {0}, one[] = {0, 1};
    float logp = 0;
    st = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, 1, 2, z0, y, &logp, nullptr, nullptr);
    CHECK(st == DRMAS_OK, "lmhead logprobs: %d %s", st, drmas_last_error());
    drmas_lmhead_config hc{0.2, 0.28, 0.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
    const float tiny_adv[] = {1e-32f};
    float z[2] = {z0[0], z0[1]};
    double hs[DRMAS_LMHEAD_SUMS];
    hc.entropy_coef = 1e39;
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 1, one, 1, 0, 1, 2, z, y, &logp, tiny_adv, nullptr, nullptr, nullptr, nullptr, hs,
                                nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "entropy_coef") && z[0] == z0[0], "entropy_coef 1e39: %d %s", st,
          drmas_last_error());
    hc.entropy_coef = 0.0;
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 1, one, 1, 0, 1, 2, z, y, &logp, tiny_adv, nullptr, nullptr, nullptr, nullptr, hs,
                                nullptr);
    CHECK(st == DRMAS_OK, "lmhead chunk: %d %s", st, drmas_last_error());
    CHECK(z[0] == 0.0f && z[1] == 0.0f, "dL/dz below FLT_MIN must be 0: target %g (%a), other %g", z[0], z[0], z[1]);
}

// -0 and +0 scores in one agent segment: the mean is +0 and every advantage exactly +0.
static void test_signed_zero() {
    const float s[] = {-0.0f, 0.0f, -0.0f, 0.5f, 0.0f, 0.25f};
    const int32_t uid[] = {0, 0, 0, 0, 0, 0}, traj[] = {0, 0, 1, 1, 2, 2}, ag[] = {0, 1, 0, 1, 0, 1};
    float out[6];
    drmas_norm_config c = cfg_of(kDrmas);
    CHECK(drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, 6, s, uid, traj, ag, 1, 3, 2, out, nullptr, nullptr) == 0, "%s", drmas_last_error());
    for (int i = 0; i < 6; i += 2) CHECK(out[i] == 0.0f && !signbit(out[i]), "row %d: %g must be +0", i, out[i]);
}

// ---- the sorted-rows fast path (native/src/cpu_adv_kernels.inc) ----

static int call_adv(const drmas_norm_config& c, const Rows& r, std::vector<float>& out, std::vector<double>* diag) {
    out.assign(r.s.size(), -7.0f);
    if (diag) diag->assign(DRMAS_DIAG_FIELDS * r.U * r.K, -7.0);
    return drmas_advantage_f32(DRMAS_DEVICE_CPU, &c, (int64_t)r.s.size(), r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(),
                               r.U, r.T, r.K, out.data(), diag ? diag->data() : nullptr, nullptr);
}

static bool same_bits(const void* a, const void* b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

// Rows in rollout order, then renumbered so that uids (and trajectories) appear in decreasing
// order: each uid's rows stay contiguous and in the same order, but the rows are no longer
// sorted, so the full validation (trajectory map, run list) runs and then the same per-run
// kernels. Results must be bit-identical to the sorted fast path's.
static Rows reversed_ids(const Rows& r) {
    Rows p = r;
    for (size_t i = 0; i < r.s.size(); ++i) {
        p.uid[i] = (int32_t)(r.U - 1 - r.uid[i]);
        p.traj[i] = (int32_t)(r.T - 1 - r.traj[i]);
    }
    return p;
}

static void test_sorted_path_matches_other_paths() {
    std::mt19937_64 rng(3);
    for (int64_t K = 1; K <= 5; ++K) {  // 1-4: vectorised kernels; 5: the generic scalar one
        Rows r = rollout_rows(61, 8, K, 2, rng);
        // awkward: some single-row agent segments, a -0 score, a constant uid, and a uid of -0 scores
        // (their mean is +0, so each difference is -0 - +0 = -0: still +0 once divided)
        r.agent[5] = 0;
        r.s[3] = -0.0f;
        for (size_t i = 0; i < r.s.size(); ++i) {
            if (r.uid[i] == 7) r.s[i] = 0.3f;
            if (r.uid[i] == 9) r.s[i] = -0.0f;
        }
        const Rows rev = reversed_ids(r);
        const int64_t n = (int64_t)r.s.size(), S = r.U * r.K;
        std::vector<int64_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        Rows sh = permuted(r, perm);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool < 2; ++pool)
                for (int single = 0; single < 3; ++single)
                    for (int scale = 0; scale < 2; ++scale) {
                        drmas_norm_config c = cfg_of(mode);
                        c.global_pooling = pool;
                        c.singleton = single;
                        c.scale_by_std = scale;
                        std::vector<float> a, b, g;
                        std::vector<double> da, db, dg;
                        const int st1 = call_adv(c, r, a, &da), st2 = call_adv(c, rev, b, &db), st3 = call_adv(c, sh, g, &dg);
                        CHECK(st1 == 0 && st2 == 0 && st3 == 0, "K %lld mode %d: %s", (long long)K, mode, drmas_last_error());
                        // reversed ids: uid u of r is uid U-1-u of rev, same rows in the same order
                        CHECK(same_bits(a.data(), b.data(), n * sizeof(float)),
                              "K %lld mode %d pool %d single %d scale %d: sorted and grouped-unsorted rows must give identical advantages",
                              (long long)K, mode, pool, single, scale);
                        // without diagnostics (the sorted loop then takes four runs at a time in Dr. MAS's modes)
                        std::vector<float> a0, b0;
                        CHECK(call_adv(c, r, a0, nullptr) == 0 && call_adv(c, rev, b0, nullptr) == 0, "%s", drmas_last_error());
                        CHECK(same_bits(a.data(), a0.data(), n * sizeof(float)) && same_bits(b.data(), b0.data(), n * sizeof(float)),
                              "K %lld mode %d pool %d single %d scale %d: the advantages must not depend on whether diagnostics are asked for",
                              (long long)K, mode, pool, single, scale);
                        bool diag_same = true;
                        for (int f = 0; f < DRMAS_DIAG_FIELDS; ++f)
                            for (int64_t u = 0; u < r.U; ++u)
                                for (int64_t k = 0; k < r.K; ++k) {
                                    const double x = da[f * S + u * r.K + k], y = db[f * S + (r.U - 1 - u) * r.K + k];
                                    if (!(same_bits(&x, &y, 8) || (isnan(x) && isnan(y)))) diag_same = false;
                                }
                        CHECK(diag_same, "K %lld mode %d: diagnostics of sorted and grouped-unsorted rows must be identical", (long long)K, mode);
                        int bad = 0;
                        for (int64_t i = 0; i < n; ++i)
                            if (!close(g[i], a[perm[i]], 1e-6, 1e-6)) ++bad;
                        CHECK(bad == 0, "K %lld mode %d pool %d single %d scale %d: general path differs in %d rows", (long long)K, mode, pool, single, scale, bad);
                        for (size_t i = 0; i < r.s.size(); ++i)
                            if ((r.uid[i] == 7 || r.uid[i] == 9) && c.numerator == DRMAS_NUMERATOR_ROW && scale &&
                                !(a[i] == 0.0f && !signbit(a[i])))
                                bad = 1;
                        CHECK(bad == 0, "K %lld mode %d: a constant uid (0.3 or -0) must give exactly +0", (long long)K, mode);
                    }
    }
}

// Odd shapes through the fast path against the general path on the same rows in another
// order: n = 1, primes, runs shorter than a vector, the last run ending mid-vector at the end
// of the arrays, agents without rows, uids without rows (first, middle, last), K up to 5. Two
// reorderings: all rows reversed, and only the last row of the first uid moved to the end (a
// uid run split by rows of other uids).
static void test_sorted_path_shapes() {
    std::mt19937_64 rng(17);
    for (int64_t n : {1, 2, 3, 5, 7, 13, 31, 97, 1009}) {
        for (int64_t K : {1, 2, 3, 4, 5}) {
            Rows r;
            r.K = K;
            int32_t u = 1, t = 0;  // uid 0 has no rows
            std::uniform_int_distribution<int> run_len(1, 11), agent_of(0, (int)K - 1), gap(0, 3);
            while ((int64_t)r.s.size() < n) {
                const int len = run_len(rng);
                for (int j = 0; j < len && (int64_t)r.s.size() < n; ++j) {
                    if (j % 3 == 0 && j > 0) ++t;
                    r.s.push_back((float)(rng() % 1000) / 997.0f);
                    r.uid.push_back(u);
                    r.traj.push_back(t);
                    const int k = agent_of(rng);
                    r.agent.push_back(K > 1 && k == (int)K - 1 && agent_of(rng) != 0 ? (int32_t)K - 2 : k);  // agent K-1 rare
                }
                ++t;
                u += 1 + (gap(rng) == 0);  // some uids without rows
            }
            r.U = u + 2;  // and a few at the end
            r.T = t + 1;
            std::vector<int64_t> rev(n), split(n);
            for (int64_t i = 0; i < n; ++i) rev[i] = n - 1 - i;
            int64_t first_end = 0;
            while (first_end < n && r.uid[first_end] == r.uid[0]) ++first_end;
            std::iota(split.begin(), split.end(), 0);
            std::rotate(split.begin() + (first_end - 1), split.begin() + first_end, split.end());
            // Dr. MAS; GRPO (group statistics, the trajectory numerator); the group's statistics with the row's own score
            constexpr int kGroupRow = DRMAS_FROM_GROUP + 2 * DRMAS_FROM_GROUP + 4 * DRMAS_NUMERATOR_ROW;
            for (int mode : {kDrmas, kGrpo, kGroupRow})
            for (int pool = 0; pool < 2; ++pool) {
                drmas_norm_config c = cfg_of(mode);
                c.global_pooling = pool;
                std::vector<float> a;
                std::vector<double> da;
                CHECK(call_adv(c, r, a, &da) == 0, "n %lld K %lld: %s", (long long)n, (long long)K, drmas_last_error());
                {  // without diagnostics the sorted loop takes Dr. MAS's runs four at a time (single-row agents fall back
                   // to the group) and GRPO's without the agents' statistics
                    std::vector<float> a0;
                    CHECK(call_adv(c, r, a0, nullptr) == 0, "%s", drmas_last_error());
                    CHECK(same_bits(a.data(), a0.data(), n * sizeof(float)),
                          "n %lld K %lld mode %d pool %d: the advantages must not depend on whether diagnostics are asked for",
                          (long long)n, (long long)K, mode, pool);
                }
                for (const auto* perm : {&rev, &split}) {
                    std::vector<float> g;
                    std::vector<double> dg;
                    CHECK(call_adv(c, permuted(r, *perm), g, &dg) == 0, "%s", drmas_last_error());
                    int bad = 0;
                    for (int64_t i = 0; i < n; ++i)
                        if (!close(g[i], a[(*perm)[i]], 1e-6, 1e-6)) ++bad;
                    for (size_t j = 0; j < da.size(); ++j)
                        if (!(close(da[j], dg[j], 1e-9, 1e-9) || (isnan(da[j]) && isnan(dg[j])))) ++bad;
                    CHECK(bad == 0, "n %lld K %lld mode %d pool %d %s: %d values differ from the general path", (long long)n, (long long)K,
                          mode, pool, perm == &rev ? "reversed" : "split run", bad);
                }
                // uids without rows get empty diagnostics (count 0, NaN inflation), and every entry is written
                const int64_t S = r.U * r.K;
                CHECK(da[DRMAS_DIAG_AGENT_COUNT * S] == 0 && isnan(da[DRMAS_DIAG_INFLATION * S]) &&
                          da[DRMAS_DIAG_GROUP_COUNT * S + (r.U - 1) * r.K] == 0,
                      "n %lld K %lld: uids without rows must get empty diagnostics", (long long)n, (long long)K);
                bool written = true;
                for (double v : da) written = written && v != -7.0;
                CHECK(written, "n %lld K %lld: every diagnostic must be written", (long long)n, (long long)K);
            }
        }
    }
}

// The AVX2 kernels and the baseline (x86-64-v2) ones give bit-identical results; the library
// picks one per call from the CPU and DRMAS_CPU_ISA.
static void test_isa_identical() {
    std::mt19937_64 rng(23);
    for (int64_t K : {1, 2, 3, 4}) {
        Rows r = rollout_rows(701, 8, K, 2, rng);
        for (float& v : r.s) v = v * 0.37f + (float)(rng() % 100) * 1e-3f;
        for (int mode = 0; mode < kDescriptors; ++mode) {
            drmas_norm_config c = cfg_of(mode);
            std::vector<float> a, b;
            std::vector<double> da, db;
            unsetenv("DRMAS_CPU_ISA");
            const int st1 = call_adv(c, r, a, &da);
            setenv("DRMAS_CPU_ISA", "v2", 1);
            const int st2 = call_adv(c, r, b, &db);
            unsetenv("DRMAS_CPU_ISA");
            CHECK(st1 == 0 && st2 == 0, "%s", drmas_last_error());
            CHECK(same_bits(a.data(), b.data(), a.size() * sizeof(float)), "K %lld mode %d: v2 and v3 kernels must agree bit for bit", (long long)K, mode);
            bool same = true;
            for (size_t j = 0; j < da.size(); ++j) same = same && (same_bits(&da[j], &db[j], 8) || (isnan(da[j]) && isnan(db[j])));
            CHECK(same, "K %lld mode %d: v2 and v3 diagnostics must agree bit for bit", (long long)K, mode);
        }
    }
}

// Sorted rows cut to a multiple of 8 (so that their end lies inside the check's vector blocks) with
// the last uid run's uid = U (by_uid) or the last trajectory's id = T: the rows stay in order, so
// only the range check can see it. *first = the first row changed.
static Rows past_the_range(const Rows& r, bool by_uid, int64_t* first) {
    Rows bad = r;
    const int64_t m = (int64_t)r.s.size() & ~(int64_t)7;
    bad.s.resize(m);
    bad.uid.resize(m);
    bad.traj.resize(m);
    bad.agent.resize(m);
    std::vector<int32_t>& ids = by_uid ? bad.uid : bad.traj;
    int64_t f = m - 1;
    while (f > 0 && ids[f - 1] == ids[m - 1]) --f;
    for (int64_t i = f; i < m; ++i) ids[i] = (int32_t)(by_uid ? bad.U : bad.T);
    *first = f;
    return bad;
}

// Many threads on sorted rows: runs split at chunk boundaries, uids without rows at the
// boundaries; identical results and diagnostics for 1 and 4 threads, and errors in the middle
// of a run leave every output untouched.
static void test_sorted_threads() {
    std::mt19937_64 rng(29);
    Rows r = rollout_rows(12000, 8, 3, 2, rng);  // ~250K rows
    for (auto& u : r.uid) u = u * 2 + 1;          // every other uid has no rows
    r.U = r.U * 2 + 1;
    drmas_norm_config c = cfg_of(kDrmas);
    std::vector<float> a, b;
    std::vector<double> da, db;
    drmas_set_num_threads(1);
    const int st1 = call_adv(c, r, a, &da);
    drmas_set_num_threads(4);
    const int st2 = call_adv(c, r, b, &db);
    CHECK(st1 == 0 && st2 == 0, "%s", drmas_last_error());
    CHECK(same_bits(a.data(), b.data(), a.size() * 4), "1 and 4 threads must agree on sorted rows");
    bool same = true;
    for (size_t j = 0; j < da.size(); ++j) same = same && (same_bits(&da[j], &db[j], 8) || (isnan(da[j]) && isnan(db[j])));
    CHECK(same, "1 and 4 threads must give the same diagnostics on sorted rows");
    const int64_t n = (int64_t)r.s.size();
    for (int threads : {1, 4}) {
        drmas_set_num_threads(threads);
        for (int what = 0; what < 4; ++what) {
            Rows bad = r;
            const int64_t row = n / 2 + 3;  // inside a run, in the middle of a vector block
            if (what == 0) bad.s[row] = INFINITY;
            if (what == 1) bad.uid[row] = (int32_t)r.U;
            if (what == 2) bad.traj[row] = -3;
            if (what == 3) bad.agent[row] = 3;
            std::vector<float> out;
            std::vector<double> dg;
            const int st = call_adv(c, bad, out, &dg);
            char want[64];
            const char* names[] = {"scores", "uid", "traj", "agent"};
            snprintf(want, sizeof want, "%s[%lld]", names[what], (long long)row);
            CHECK(st != 0 && contains(drmas_last_error(), want), "%d threads, bad %s: %d %s", threads, names[what], st, drmas_last_error());
            bool untouched = true;
            for (float v : out) untouched = untouched && v == -7.0f;
            for (double v : dg) untouched = untouched && v == -7.0;
            CHECK(untouched, "%d threads, bad %s: outputs must be untouched", threads, names[what]);
        }
        for (int id = 0; id < 2; ++id) {  // only the range check can see these (the rows stay in order)
            int64_t first = 0;
            const Rows bad = past_the_range(r, id == 0, &first);
            std::vector<float> out;
            std::vector<double> dg;
            const int st = call_adv(c, bad, out, &dg);
            char want[64];
            snprintf(want, sizeof want, "%s[%lld]", id == 0 ? "uid" : "traj", (long long)first);
            bool untouched = true;
            for (float v : out) untouched = untouched && v == -7.0f;
            for (double v : dg) untouched = untouched && v == -7.0;
            CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), want) && untouched,
                  "%d threads, %s one past the range at the end: %d %s", threads, id == 0 ? "uid = U" : "traj = T", st,
                  drmas_last_error());
        }
    }
    drmas_set_num_threads(0);
}

// The sorted path without diagnostics finds its runs in the run-start map that the check
// writes (no uid is read again): runs of 1 to 700 rows, some longer than the map's 64-row
// words and some across the threads' chunk boundaries (multiples of 64 rows). 1, 3 and 4
// threads must agree bit for bit with each other and with the same rows under reversed ids
// (the full validation, then the same per-run kernels).
static void test_sorted_run_map() {
    std::mt19937_64 rng(31);
    const int lengths[] = {1, 2, 3, 63, 64, 65, 127, 128, 129, 700, 5, 31};
    Rows r{{}, {}, {}, {}, 0, 0, 2};
    std::uniform_real_distribution<float> score(-1.0f, 1.0f);
    int64_t t = 0;
    while (r.s.size() < 300000) {
        const int len = lengths[r.U % 12];
        for (int i = 0; i < len; ++i) {
            if (i % 4 == 0) ++t;  // trajectories of up to 4 rows, inside the uid
            r.s.push_back(score(rng));
            r.uid.push_back((int32_t)r.U);
            r.traj.push_back((int32_t)(t - 1));
            r.agent.push_back(i % 2);
        }
        ++r.U;
    }
    r.T = t;
    const Rows rev = reversed_ids(r);
    const int64_t n = (int64_t)r.s.size();
    for (int mode : {kDrmas, kGrpo}) {
        drmas_norm_config c = cfg_of(mode);
        std::vector<float> one, other;
        drmas_set_num_threads(1);
        CHECK(call_adv(c, r, one, nullptr) == 0, "%s", drmas_last_error());
        for (int threads : {3, 4}) {
            drmas_set_num_threads(threads);
            CHECK(call_adv(c, r, other, nullptr) == 0, "%s", drmas_last_error());
            CHECK(same_bits(one.data(), other.data(), n * 4), "mode %d: 1 and %d threads must agree on sorted rows", mode, threads);
            CHECK(call_adv(c, rev, other, nullptr) == 0, "%s", drmas_last_error());
            CHECK(same_bits(one.data(), other.data(), n * 4), "mode %d, %d threads: sorted and reversed ids must agree", mode, threads);
        }
        int written = 0;
        for (float v : one) written += v != -7.0f;
        CHECK(written == n, "mode %d: every row must get its advantage (%d of %lld)", mode, written, (long long)n);
    }
    drmas_set_num_threads(0);
}

// drmas_abi_value knows every constant and every struct field of drmas.h (read from the header
// file itself, so that a new #define or field without an entry in abi.cpp fails here), with the
// values this test was compiled with, and answers -1 for anything else. Every DRMAS_API function
// of the header is exported by the library (a binding looks each one up by name).
static void test_abi_table() {
    FILE* f = fopen(DRMAS_HEADER_PATH, "r");
    CHECK(f != nullptr, "cannot read %s", DRMAS_HEADER_PATH);
    if (!f) return;
    char line[512];
    std::string in_struct;  // the struct whose fields are being read, "" outside one
    int constants = 0, fields = 0, functions = 0;
    while (fgets(line, sizeof line, f)) {
        char name[128];
        const char* paren = strncmp(line, "DRMAS_API ", 10) == 0 ? strchr(line, '(') : nullptr;
        if (paren != nullptr) {
            const char* begin = paren;
            while (begin > line && (isalnum((unsigned char)begin[-1]) || begin[-1] == '_')) --begin;
            const std::string fn(begin, paren);
            ++functions;
            CHECK(dlsym(RTLD_DEFAULT, fn.c_str()) != nullptr, "libdrmas does not export %s", fn.c_str());
        } else if (sscanf(line, "#define %127[A-Z0-9_]", name) == 1 && strncmp(name, "DRMAS_", 6) == 0 &&
            strcmp(name, "DRMAS_H") != 0 && strcmp(name, "DRMAS_API") != 0) {
            ++constants;
            CHECK(drmas_abi_value(name) != -1, "drmas_abi_value does not know %s", name);
        } else if (sscanf(line, "typedef struct %127[a-z0-9_] {", name) == 1) {
            in_struct = name;
            CHECK(drmas_abi_value(name) > 0, "drmas_abi_value does not know the size of %s", name);
        } else if (!in_struct.empty() && line[0] == '}') {
            in_struct.clear();
        } else if (!in_struct.empty()) {
            char type[64];
            if (sscanf(line, " %63s %127[a-z0-9_];", type, name) == 2) {
                ++fields;
                const std::string key = in_struct + "." + name;
                CHECK(drmas_abi_value(key.c_str()) >= 0, "drmas_abi_value does not know the offset of %s", key.c_str());
            }
        }
    }
    fclose(f);
    CHECK(constants > 40 && fields >= 16 && functions >= 19, "read %d constants, %d fields and %d functions from drmas.h",
          constants, fields, functions);
    CHECK(drmas_abi_value("drmas_norm_config") == (int64_t)sizeof(drmas_norm_config), "sizeof(drmas_norm_config)");
    CHECK(drmas_abi_value("drmas_norm_config.eps") == (int64_t)offsetof(drmas_norm_config, eps), "offsetof eps");
    CHECK(drmas_abi_value("drmas_loss_config.per_row_mean") == (int64_t)offsetof(drmas_loss_config, per_row_mean), "offsetof per_row_mean");
    CHECK(drmas_abi_value("DRMAS_LOSS_SUMS") == DRMAS_LOSS_SUMS && drmas_abi_value("DRMAS_DIAG_INFLATION") == DRMAS_DIAG_INFLATION,
          "constant values");
    CHECK(drmas_abi_value("DRMAS_NO_SUCH_THING") == -1 && drmas_abi_value("drmas_norm_config.mode") == -1 &&
              drmas_abi_value(nullptr) == -1,
          "unknown names must give -1");
}


// ---- fused LM head ------------------------------------------------------------------
// A plain fp64 reference of one token's softmax statistics.
static void ref_row(const float* z, int64_t V, double* lse, double* ent) {
    double m = -INFINITY;
    for (int64_t v = 0; v < V; ++v) m = std::max(m, (double)z[v]);
    double s = 0;
    for (int64_t v = 0; v < V; ++v) s += exp((double)z[v] - m);
    *lse = m + log(s);
    double h = 0;
    for (int64_t v = 0; v < V; ++v) {
        const double lp = (double)z[v] - *lse;
        h -= exp(lp) * lp;
    }
    *ent = h;
}

struct HeadCase {
    int64_t V, T;
    std::vector<int64_t> off;
    std::vector<float> z, old, adv_row, adv_tok, ref;
    std::vector<int64_t> y;
    std::vector<uint8_t> mask;
};

// Rows that do not start at token 0 nor end at the last one, a masked token, logits whose maximum
// grows along the vocabulary (the running max rescales) and a few large ones.
static HeadCase head_case(int64_t V, std::mt19937_64& rng) {
    HeadCase h;
    h.V = V;
    h.T = 23;
    h.off = {1, 6, 6, 13, 21};
    std::normal_distribution<float> nd(0.0f, 2.0f);
    std::uniform_int_distribution<int64_t> yd(0, V - 1);
    h.z.resize((size_t)(h.T * V));
    for (int64_t t = 0; t < h.T; ++t)
        for (int64_t v = 0; v < V; ++v) h.z[(size_t)(t * V + v)] = nd(rng) + 6.0f * (float)v / (float)V + (v % 97 == 3 ? 9.0f : 0.0f);
    for (int64_t t = 0; t < h.T; ++t) h.y.push_back(yd(rng));
    h.y[0] = -5;  // outside every row: never read
    h.mask.assign((size_t)h.T, 1);
    h.mask[8] = 0;
    h.y[8] = V + 3;  // masked: never read
    const float ra[] = {1.3f, -0.7f, 0.0f, -2.1f};
    h.adv_row.assign(ra, ra + 4);
    h.adv_tok.assign((size_t)h.T, 0.0f);
    for (int r = 0; r < 4; ++r)
        for (int64_t t = h.off[r]; t < h.off[r + 1]; ++t) h.adv_tok[(size_t)t] = ra[r];
    std::vector<float> lp((size_t)h.T);
    std::vector<int64_t> y_ok(h.y);
    for (int64_t& v : y_ok) v = std::min(std::max<int64_t>(v, 0), V - 1);
    drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, h.T, V, h.z.data(), y_ok.data(), lp.data(), nullptr, nullptr);
    std::normal_distribution<float> dd(0.0f, 0.3f);
    for (int64_t t = 0; t < h.T; ++t) {
        h.old.push_back(lp[(size_t)t] + dd(rng));
        h.ref.push_back(lp[(size_t)t] + dd(rng));
    }
    return h;
}

static void test_lmhead() {
    std::mt19937_64 rng(11);
    for (int64_t V : {37, 1300}) {
        HeadCase h = head_case(V, rng);
        // forward only, against the fp64 reference (all targets in range here)
        std::vector<int64_t> y_ok(h.y);
        for (int64_t& v : y_ok) v = std::min(std::max<int64_t>(v, 0), V - 1);
        std::vector<float> lp((size_t)h.T), ent((size_t)h.T);
        CHECK(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, h.T, V, h.z.data(), y_ok.data(), lp.data(), ent.data(), nullptr) == 0, "%s",
              drmas_last_error());
        for (int64_t t = 0; t < h.T; ++t) {
            double lse, e;
            ref_row(&h.z[(size_t)(t * V)], V, &lse, &e);
            CHECK(close(lp[(size_t)t], h.z[(size_t)(t * V + y_ok[(size_t)t])] - lse, 1e-5, 1e-5), "V %lld logp[%lld] %g vs %g",
                  (long long)V, (long long)t, lp[(size_t)t], h.z[(size_t)(t * V + y_ok[(size_t)t])] - lse);
            CHECK(close(ent[(size_t)t], e, 1e-5, 1e-5), "V %lld entropy[%lld] %g vs %g", (long long)V, (long long)t, ent[(size_t)t], e);
        }
        for (int kl = DRMAS_KL_NONE; kl <= DRMAS_KL_K3; ++kl)
            for (int prm = 0; prm <= 1; ++prm)
                for (double dual : {0.0, 3.0}) {
                    const double ec = kl == DRMAS_KL_K2 ? 0.01 : 0.0;
                    const drmas_lmhead_config hc{0.2, 0.28, dual, 0.05, 7.0, ec, kl, prm};
                    const drmas_loss_config lc{0.2, 0.28, dual, 0.05, 7.0, kl, prm};
                    // the existing fused loss kernel on the same log-probs
                    std::vector<float> g((size_t)h.T);
                    double ls[DRMAS_LOSS_SUMS];
                    CHECK(drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &lc, 4, h.off.data(), h.T, lp.data(), h.old.data(), h.adv_tok.data(),
                                                 h.ref.data(), h.mask.data(), g.data(), ls, nullptr) == 0, "%s", drmas_last_error());
                    // one chunk of all tokens: the same sums, bit for bit
                    std::vector<float> dz(h.z);
                    std::vector<float> clp((size_t)h.T), cent((size_t)h.T);
                    double hs[DRMAS_LMHEAD_SUMS];
                    CHECK(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 0, h.T, V, dz.data(), h.y.data(), h.old.data(),
                                                 h.adv_row.data(), h.ref.data(), h.mask.data(), clp.data(), cent.data(), hs, nullptr) == 0,
                          "%s", drmas_last_error());
                    CHECK(memcmp(hs, ls, sizeof ls) == 0, "V %lld kl %d per_row_mean %d dual %g: sums differ from drmas_clipped_loss_f32 "
                          "(loss %.17g vs %.17g)", (long long)V, kl, prm, dual, hs[0], ls[0]);
                    double ent_ref = 0;
                    bool dz_ok = true;
                    for (int64_t t = 0; t < h.T; ++t) {
                        const bool valid = t >= h.off[0] && t < h.off[4] && h.mask[(size_t)t];
                        CHECK(clp[(size_t)t] == (valid ? lp[(size_t)t] : 0.0f) && cent[(size_t)t] == (valid ? ent[(size_t)t] : 0.0f),
                              "chunk logp/entropy of token %lld", (long long)t);
                        if (valid) ent_ref += ent[(size_t)t];
                        double lse, e;
                        ref_row(&h.z[(size_t)(t * V)], V, &lse, &e);
                        for (int64_t v = 0; v < V; ++v) {
                            double want = 0;
                            if (valid) {
                                const double lpv = (double)h.z[(size_t)(t * V + v)] - lse, p = exp(lpv);
                                want = (double)g[(size_t)t] * ((v == h.y[(size_t)t] ? 1.0 : 0.0) - p) + ec * p * (lpv + e);
                            }
                            if (!close(dz[(size_t)(t * V + v)], want, 1e-6, 1e-4)) dz_ok = false;
                        }
                    }
                    CHECK(dz_ok, "V %lld kl %d per_row_mean %d dual %g: dL/dz differs from the reference", (long long)V, kl, prm, dual);
                    CHECK(close(hs[DRMAS_LMHEAD_ENTROPY], ent_ref, 1e-9, 1e-9), "entropy sum %g vs %g", hs[DRMAS_LMHEAD_ENTROPY], ent_ref);
                    // chunks of 7 (not dividing 23) and 1, and one chunk larger than a row: per token the same bits, sums close
                    for (int64_t cs : {7, 1, 23}) {
                        std::vector<float> dz2(h.z);
                        double tot[DRMAS_LMHEAD_SUMS] = {0};
                        bool same = true;
                        for (int64_t c0 = 0; c0 < h.T; c0 += cs) {
                            const int64_t n = std::min(cs, h.T - c0);
                            double part[DRMAS_LMHEAD_SUMS];
                            std::vector<float> lp2((size_t)n);
                            CHECK(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, c0, n, V, &dz2[(size_t)(c0 * V)],
                                                         h.y.data(), h.old.data(), h.adv_row.data(), h.ref.data(), h.mask.data(), lp2.data(),
                                                         nullptr, part, nullptr) == 0, "%s", drmas_last_error());
                            for (int j = 0; j < DRMAS_LMHEAD_SUMS; ++j) tot[j] += part[j];
                            for (int64_t i = 0; i < n; ++i) same &= lp2[(size_t)i] == clp[(size_t)(c0 + i)];
                        }
                        CHECK(same && memcmp(dz2.data(), dz.data(), dz.size() * sizeof(float)) == 0, "chunk size %lld: other logp or dL/dz bits",
                              (long long)cs);
                        for (int j = 0; j < DRMAS_LMHEAD_SUMS; ++j)
                            CHECK(close(tot[j], hs[j], 1e-12, 1e-12), "chunk size %lld: sums[%d] %.17g vs %.17g", (long long)cs, j, tot[j], hs[j]);
                    }
                }
    }
    // errors name the first bad token and leave every output, the logits included, untouched
    HeadCase h = head_case(37, rng);
    const drmas_lmhead_config hc{0.2, 0.2, 3.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
    std::vector<float> dz(h.z), lp((size_t)h.T, 5.0f);
    double sums[DRMAS_LMHEAD_SUMS];
    for (double& v : sums) v = 9;
    auto untouched = [&]() {
        bool ok = memcmp(dz.data(), h.z.data(), dz.size() * sizeof(float)) == 0;
        for (float v : lp) ok &= v == 5.0f;
        for (double v : sums) ok &= v == 9;
        return ok;
    };
    h.y[14] = 37;
    int st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 0, h.T, 37, dz.data(), h.y.data(), h.old.data(),
                                    h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "targets[14] = 37") && untouched(), "bad target: %d %s", st, drmas_last_error());
    h.y[14] = 2;
    dz[(size_t)(17 * 37 + 30)] = NAN;
    h.z[(size_t)(17 * 37 + 30)] = NAN;
    dz[(size_t)(8 * 37 + 1)] = h.z[(size_t)(8 * 37 + 1)] = INFINITY;  // a masked token's logits are never read
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 0, h.T, 37, dz.data(), h.y.data(), h.old.data(),
                                h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "token 17, vocabulary index 30") && untouched(), "NaN logit: %d %s", st,
          drmas_last_error());
    // the same logit seen from a chunk starting at token 10: row 7 of the chunk, token 17
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 10, 13, 37, &dz[(size_t)(10 * 37)], h.y.data(), h.old.data(),
                                h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "logits[7][30] (token 17") && untouched(), "NaN logit in a chunk: %s",
          drmas_last_error());
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 20, 4, 37, dz.data(), h.y.data(), h.old.data(),
                                h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "chunk") && untouched(), "chunk past the end: %s", drmas_last_error());
    drmas_lmhead_config bad = hc;
    bad.entropy_coef = NAN;
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &bad, 4, h.off.data(), h.T, 0, 5, 37, dz.data(), h.y.data(), h.old.data(),
                                h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "entropy_coef") && untouched(), "entropy_coef NaN: %s", drmas_last_error());
    bad = hc;
    bad.kl_type = DRMAS_KL_K3;
    st = drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &bad, 4, h.off.data(), h.T, 0, 5, 37, dz.data(), h.y.data(), h.old.data(),
                                h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_NULL && contains(drmas_last_error(), "ref_logp") && untouched(), "KL without ref: %s", drmas_last_error());
    std::vector<int64_t> y_ok(h.y);
    for (int64_t& v : y_ok) v = std::min(std::max<int64_t>(v, 0), (int64_t)36);
    y_ok[3] = -1;
    st = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, h.T, 37, h.z.data(), y_ok.data(), lp.data(), nullptr, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "targets[3] = -1") && untouched(), "logprobs bad target: %s", drmas_last_error());
    y_ok[3] = 0;
    st = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, h.T, 37, h.z.data(), y_ok.data(), lp.data(), nullptr, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "token 8, vocabulary index 1") && untouched(), "logprobs inf: %s",
          drmas_last_error());
    if (!drmas_cuda_available()) {
        st = drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CUDA, 0, 37, nullptr, nullptr, nullptr, nullptr, nullptr);
        CHECK(st == DRMAS_ERR_UNSUPPORTED, "CUDA without a GPU: %d", st);
    }
}

// The fused LM head's AVX2 loops and the baseline ones agree bit for bit (vocabularies around the
// 8-lane width and the 512-logit blocks, logits down to e^-200 that underflow to 0 and some whose
// dL/dz would be denormal), and their e^x keeps the log-probs and entropies at fp32 accuracy against fp64 (test_lmhead checks dL/dz).
static void test_lmhead_isa_identical() {
    std::mt19937_64 rng(31);
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int64_t V : {1, 7, 8, 9, 511, 512, 513, 1300, 4099}) {
        const int64_t T = 5;
        std::vector<float> z((size_t)(T * V));
        for (int64_t t = 0; t < T; ++t)
            for (int64_t v = 0; v < V; ++v)
                z[(size_t)(t * V + v)] = nd(rng) + (v % 13 == 5 ? -200.0f : v % 13 == 7 ? -78.0f : 0.0f) + (t == 3 ? 40.0f * (float)v / (float)V : 0.0f);
        std::vector<int64_t> y((size_t)T);
        for (int64_t t = 0; t < T; ++t) y[(size_t)t] = (int64_t)(rng() % (uint64_t)V);
        const std::vector<int64_t> off = {0, 2, 5};
        std::vector<float> old((size_t)T, -1.0f), adv = {0.8f, -1.1f};
        const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.0, 5.0, 1e-6, DRMAS_KL_NONE, 0};  // a small bonus: denormal products
        std::vector<float> lp[2], ent[2], dz[2];
        double sums[2][DRMAS_LMHEAD_SUMS];
        for (int k = 0; k < 2; ++k) {
            if (k == 1) setenv("DRMAS_CPU_ISA", "v2", 1);
            lp[k].resize((size_t)T);
            ent[k].resize((size_t)T);
            dz[k] = z;
            CHECK(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, T, V, z.data(), y.data(), lp[k].data(), ent[k].data(), nullptr) == 0, "%s",
                  drmas_last_error());
            CHECK(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 2, off.data(), T, 0, T, V, dz[k].data(), y.data(), old.data(), adv.data(),
                                         nullptr, nullptr, nullptr, nullptr, sums[k], nullptr) == 0,
                  "%s", drmas_last_error());
            unsetenv("DRMAS_CPU_ISA");
        }
        CHECK(same_bits(lp[0].data(), lp[1].data(), (size_t)T * 4) && same_bits(ent[0].data(), ent[1].data(), (size_t)T * 4) &&
                  same_bits(dz[0].data(), dz[1].data(), dz[0].size() * 4) && same_bits(sums[0], sums[1], sizeof sums[0]),
              "V %lld: the v2 and v3 LM-head loops must agree bit for bit", (long long)V);
        bool normal = true;
        for (float d : dz[0]) normal = normal && (d == 0.0f || fabsf(d) >= 1.17549435e-38f);
        CHECK(normal, "V %lld: dL/dz must have no denormals (they slow the products that read it)", (long long)V);
        double worst_stat = 0;
        for (int64_t t = 0; t < T; ++t) {
            double lse, h;
            ref_row(&z[(size_t)(t * V)], V, &lse, &h);
            const double want_lp = (double)z[(size_t)(t * V + y[(size_t)t])] - lse;
            worst_stat = std::max(worst_stat, fabs(lp[0][(size_t)t] - want_lp) / (1e-6 + 1e-6 * fabs(want_lp)));
            worst_stat = std::max(worst_stat, fabs(ent[0][(size_t)t] - h) / (1e-6 + 1e-6 * fabs(h)));
        }
        CHECK(worst_stat <= 1.0, "V %lld: log-probs and entropies within 1e-6 + 1e-6|ref| of fp64 (worst %.3g of the tolerance)",
              (long long)V, worst_stat);
    }
}

// ---- fused LM head on bf16 logits ---------------------------------------------------
// bf16 as the ABI carries it, written here independently of the library: widening by the bits,
// rounding by comparing the two neighbours in double (ties to the even one).
static float bf16_widen(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
static uint16_t bf16_round(float f) {
    if (isnan(f)) return 0x7FC0;
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint16_t lo = (uint16_t)(u >> 16);  // toward zero
    const uint16_t hi = (uint16_t)(lo + 1);   // away from zero (the next magnitude; inf after the largest)
    const double dl = fabs((double)f - (double)bf16_widen(lo)), dh = fabs((double)bf16_widen(hi) - (double)f);
    if ((u & 0xFFFF) == 0) return lo;
    if (dl < dh) return lo;
    if (dh < dl) return hi;
    return (lo & 1) ? hi : lo;
}

static std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
    std::vector<uint16_t> b(v.size());
    for (size_t i = 0; i < v.size(); ++i) b[i] = bf16_round(v[i]);
    return b;
}
static std::vector<float> widened(const std::vector<uint16_t>& b) {
    std::vector<float> v(b.size());
    for (size_t i = 0; i < b.size(); ++i) v[i] = bf16_widen(b[i]);
    return v;
}

// The bf16 ops against the fp32 ones on the widened logits: log-probs, entropies and sums bit for
// bit, dL/dz the fp32 one rounded to bf16, for every chunking; the errors name the bf16 op and leave
// the bf16 logits and every output untouched.
static void test_lmhead_bf16() {
    CHECK(bf16_round(1.0f) == 0x3F80 && bf16_round(-2.0f) == 0xC000 && bf16_round(bf16_widen(0x3F81)) == 0x3F81,
          "bf16 rounding of exact values");
    CHECK(bf16_round(bf16_widen(0x3F80) + ldexpf(1.0f, -8)) == 0x3F80 && bf16_round(bf16_widen(0x3F81) + ldexpf(1.0f, -8)) == 0x3F82,
          "bf16 rounding: ties go to the even neighbour");
    std::mt19937_64 rng(12);
    for (int64_t V : {37, 1300}) {
        HeadCase h = head_case(V, rng);
        const std::vector<uint16_t> zb = to_bf16(h.z);
        const std::vector<float> zw = widened(zb);
        std::vector<int64_t> y_ok(h.y);
        for (int64_t& v : y_ok) v = std::min(std::max<int64_t>(v, 0), V - 1);
        std::vector<float> lp((size_t)h.T), ent((size_t)h.T), lpb((size_t)h.T), entb((size_t)h.T);
        CHECK(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, h.T, V, zw.data(), y_ok.data(), lp.data(), ent.data(), nullptr) == 0, "%s",
              drmas_last_error());
        CHECK(drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CPU, h.T, V, zb.data(), y_ok.data(), lpb.data(), entb.data(), nullptr) == 0, "%s",
              drmas_last_error());
        CHECK(lp == lpb && ent == entb, "V %lld: bf16 log-probs/entropies differ from the fp32 op's on the widened logits", (long long)V);
        for (int kl : {DRMAS_KL_NONE, DRMAS_KL_K3})
            for (int prm = 0; prm <= 1; ++prm)
                for (double ec : {0.0, 0.01}) {
                    const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.05, 7.0, ec, kl, prm};
                    for (int64_t cs : {7, 23}) {
                        std::vector<float> dzf(zw), lpf((size_t)h.T), entf((size_t)h.T), lpg((size_t)h.T), entg((size_t)h.T);
                        std::vector<uint16_t> dzb(zb);
                        bool same_sums = true;
                        for (int64_t c0 = 0; c0 < h.T; c0 += cs) {
                            const int64_t n = std::min(cs, h.T - c0);
                            double sf[DRMAS_LMHEAD_SUMS], sb[DRMAS_LMHEAD_SUMS];
                            CHECK(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, c0, n, V, &dzf[(size_t)(c0 * V)],
                                                         h.y.data(), h.old.data(), h.adv_row.data(), h.ref.data(), h.mask.data(),
                                                         &lpf[(size_t)c0], &entf[(size_t)c0], sf, nullptr) == 0, "%s", drmas_last_error());
                            CHECK(drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, c0, n, V, &dzb[(size_t)(c0 * V)],
                                                          h.y.data(), h.old.data(), h.adv_row.data(), h.ref.data(), h.mask.data(),
                                                          &lpg[(size_t)c0], &entg[(size_t)c0], sb, nullptr) == 0, "%s", drmas_last_error());
                            same_sums &= memcmp(sf, sb, sizeof sf) == 0;
                        }
                        int64_t bad = 0, nonzero = 0;
                        for (size_t i = 0; i < dzf.size(); ++i) {
                            bad += dzb[i] != bf16_round(dzf[i]);
                            nonzero += (dzb[i] & 0x7FFF) != 0;  // -0 is zero (a clipped token's row, an invalid one's)
                        }
                        CHECK(same_sums && lpf == lpg && entf == entg, "V %lld kl %d prm %d ec %g chunk %lld: bf16 logp/entropy/sums differ",
                              (long long)V, kl, prm, ec, (long long)cs);
                        CHECK(bad == 0 && nonzero > (int64_t)dzf.size() / 4,
                              "V %lld kl %d prm %d ec %g chunk %lld: %lld dL/dz values are not the fp32 ones rounded to bf16 (%lld non-zero)",
                              (long long)V, kl, prm, ec, (long long)cs, (long long)bad, (long long)nonzero);
                    }
                }
    }
    // dL/dz exactly halfway between two bf16 values goes to the even one: two tokens of V = 2 with
    // logits {0, -200} (p = {1, 0} exactly, lse = entropy = 0), target 1 and old_logp = logp, so the
    // ratio is 1 and dz = {-g, g} with g = -A; A = -(1 + 2^-8) and -(1 + 3 2^-8) are ties
    {
        const std::vector<uint16_t> z2 = {bf16_round(0.0f), bf16_round(-200.0f), bf16_round(0.0f), bf16_round(-200.0f)};
        std::vector<uint16_t> dz2(z2);
        const std::vector<int64_t> off2 = {0, 1, 2}, y2 = {1, 1};
        const std::vector<float> old2 = {-200.0f, -200.0f}, adv2 = {-(1.0f + ldexpf(1.0f, -8)), -(1.0f + 3 * ldexpf(1.0f, -8))};
        const drmas_lmhead_config tc{0.2, 0.28, 0.0, 0.0, 1.0, 0.01, DRMAS_KL_NONE, 0};
        double ts[DRMAS_LMHEAD_SUMS];
        std::vector<float> tlp(2);
        CHECK(drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &tc, 2, off2.data(), 2, 0, 2, 2, dz2.data(), y2.data(), old2.data(), adv2.data(),
                                      nullptr, nullptr, tlp.data(), nullptr, ts, nullptr) == 0, "%s", drmas_last_error());
        CHECK(tlp[0] == -200.0f && tlp[1] == -200.0f, "tie case: logp %g %g", tlp[0], tlp[1]);
        CHECK(dz2[0] == 0xBF80 && dz2[1] == 0x3F80 && dz2[2] == 0xBF82 && dz2[3] == 0x3F82,
              "dL/dz at bf16 ties: %04x %04x %04x %04x, expected bf80 3f80 bf82 3f82 (to even)", dz2[0], dz2[1], dz2[2], dz2[3]);
    }
    // errors: the bf16 op's name, the first bad token, nothing written (bits compared: NaN logits)
    HeadCase h = head_case(37, rng);
    const drmas_lmhead_config hc{0.2, 0.2, 3.0, 0.0, 1.0, 0.0, DRMAS_KL_NONE, 0};
    std::vector<uint16_t> zb = to_bf16(h.z);
    std::vector<uint16_t> dz(zb);
    std::vector<float> lp((size_t)h.T, 5.0f);
    double sums[DRMAS_LMHEAD_SUMS];
    for (double& v : sums) v = 9;
    auto untouched = [&]() {
        bool ok = dz == zb;
        for (float v : lp) ok &= v == 5.0f;
        for (double v : sums) ok &= v == 9;
        return ok;
    };
    h.y[14] = 37;
    int st = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 0, h.T, 37, dz.data(), h.y.data(), h.old.data(),
                                     h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "drmas_lmhead_chunk_bf16: targets[14] = 37") && untouched(),
          "bf16 bad target: %d %s", st, drmas_last_error());
    h.y[14] = 2;
    dz[(size_t)(17 * 37 + 30)] = zb[(size_t)(17 * 37 + 30)] = 0x7FC0;  // NaN
    dz[(size_t)(8 * 37 + 1)] = zb[(size_t)(8 * 37 + 1)] = 0x7F80;      // +inf in a masked token: never read
    st = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 10, 13, 37, &dz[(size_t)(10 * 37)], h.y.data(),
                                 h.old.data(), h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "drmas_lmhead_chunk_bf16: logits[7][30] (token 17, vocabulary index 30) is nan") &&
              untouched(), "bf16 NaN logit in a chunk: %d %s", st, drmas_last_error());
    st = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CPU, &hc, 4, h.off.data(), h.T, 0, 5, 37, nullptr, h.y.data(), h.old.data(),
                                 h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
    CHECK(st == DRMAS_ERR_NULL && contains(drmas_last_error(), "drmas_lmhead_chunk_bf16: logits is NULL") && untouched(),
          "bf16 NULL logits: %s", drmas_last_error());
    std::vector<int64_t> y_ok(h.y);
    for (int64_t& v : y_ok) v = std::min(std::max<int64_t>(v, 0), (int64_t)36);
    st = drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CPU, h.T, 37, zb.data(), y_ok.data(), lp.data(), nullptr, nullptr);
    CHECK(st == DRMAS_ERR_NONFINITE && contains(drmas_last_error(), "drmas_lmhead_logprobs_bf16: logits[8][1] (token 8, vocabulary index 1) is +inf") &&
              untouched(), "bf16 logprobs inf: %d %s", st, drmas_last_error());
    y_ok[3] = 37;
    st = drmas_lmhead_logprobs_bf16(DRMAS_DEVICE_CPU, h.T, 37, zb.data(), y_ok.data(), lp.data(), nullptr, nullptr);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "drmas_lmhead_logprobs_bf16: targets[3] = 37") && untouched(),
          "bf16 logprobs bad target: %s", drmas_last_error());
    if (!drmas_cuda_available()) {
        st = drmas_lmhead_chunk_bf16(DRMAS_DEVICE_CUDA, &hc, 4, h.off.data(), h.T, 0, 5, 37, dz.data(), h.y.data(), h.old.data(),
                                     h.adv_row.data(), nullptr, h.mask.data(), lp.data(), nullptr, sums, nullptr);
        CHECK(st == DRMAS_ERR_UNSUPPORTED && contains(drmas_last_error(), "drmas_lmhead_chunk_bf16") && untouched(),
              "bf16 on CUDA without a GPU: %d %s", st, drmas_last_error());
    }
}

// Finite logits more than FLT_MAX apart: z - max overflows to -inf, whose e^x is 0; the entropy and
// dL/dz must stay finite (0 * -inf would make them NaN with status OK).
static void test_lmhead_extreme_logits() {
    for (int64_t V : {2, 13, 600}) {
        std::vector<float> z((size_t)V, 1.0f);
        z[0] = 3.0e38f;
        z[(size_t)V - 1] = -3.0e38f;
        const std::vector<int64_t> y = {0}, off = {0, 1};
        const std::vector<float> old = {-0.1f}, adv = {1.0f};
        float lp = 7, ent = 7;
        CHECK(drmas_lmhead_logprobs_f32(DRMAS_DEVICE_CPU, 1, V, z.data(), y.data(), &lp, &ent, nullptr) == 0, "%s", drmas_last_error());
        CHECK(lp == 0.0f && ent == 0.0f, "V %lld: one logit dominates: log-prob 0 and entropy 0, got %g and %g", (long long)V, lp, ent);
        const drmas_lmhead_config hc{0.2, 0.28, 3.0, 0.0, 1.0, 0.01, DRMAS_KL_NONE, 0};
        double sums[DRMAS_LMHEAD_SUMS];
        CHECK(drmas_lmhead_chunk_f32(DRMAS_DEVICE_CPU, &hc, 1, off.data(), 1, 0, 1, V, z.data(), y.data(), old.data(), adv.data(),
                                     nullptr, nullptr, nullptr, nullptr, sums, nullptr) == 0,
              "%s", drmas_last_error());
        bool finite = true;
        for (float d : z) finite = finite && std::isfinite(d);
        for (double v : sums) finite = finite && std::isfinite(v);
        CHECK(finite, "V %lld: dL/dz and the sums must be finite", (long long)V);
    }
}

// Rows in random order take the partition path: bit for bit the advantages and diagnostics of the
// same rows sorted stably by uid (the sorted path), for every mode, both poolings, 1 and 4 threads
// and sizes on both sides of the threads' split; a trajectory in two uids or a bad row among
// shuffled rows is still the validating path's error with every output untouched.
static void test_partition_path() {
    std::mt19937_64 rng(61);
    for (int64_t U : {37, 9000}) {
        Rows r = rollout_rows(U, 8, 3, 2, rng);
        for (float& v : r.s) v = v * 0.37f + (float)(rng() % 100) * 1e-3f;
        const int64_t n = (int64_t)r.s.size();
        std::vector<int64_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        Rows p = permuted(r, perm);
        // the shuffled rows sorted stably by uid: what the partition builds
        std::vector<int64_t> order(n);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return p.uid[x] < p.uid[y]; });
        Rows q = permuted(p, order);
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool < 2; ++pool)
                for (int threads : {1, 4}) {
                    if (U < 100 && threads != 1) continue;
                    drmas_set_num_threads(threads);
                    drmas_norm_config c = cfg_of(mode);
                    c.global_pooling = pool;
                    std::vector<float> a, b;
                    std::vector<double> da, db;
                    CHECK(call_adv(c, p, a, &da) == 0 && call_adv(c, q, b, &db) == 0, "%s", drmas_last_error());
                    bool same = true;
                    for (int64_t i = 0; i < n; ++i) same = same && same_bits(&b[i], &a[order[i]], 4);
                    for (size_t j = 0; j < da.size(); ++j) same = same && (same_bits(&da[j], &db[j], 8) || (isnan(da[j]) && isnan(db[j])));
                    CHECK(same, "U %lld mode %d pool %d threads %d: the partition must give the stably sorted rows' bits", (long long)U,
                          mode, pool, threads);
                }
        drmas_set_num_threads(0);
        if (U < 100) continue;
        for (int what = 0; what < 4; ++what) {
            Rows bad = p;
            int64_t row = n / 3;
            if (what == 0) bad.traj[row] = bad.traj[row] == 0 ? 1 : 0;  // (a trajectory of another uid; uids 0 and 1 differ)
            if (what == 0) bad.uid[row] = bad.uid[row] == 5 ? 6 : 5;
            if (what == 1) bad.agent[row] = -2;
            if (what == 2) bad.s[row] = -INFINITY;
            if (what == 3) {  // a row of uid 0 moved to the last uid: its trajectory in the first and the last thread's uids
                row = 0;
                while (p.uid[row] != 0) ++row;
                bad.uid[row] = (int32_t)(U - 1);
            }
            for (int threads : {1, 2, 4}) {
                drmas_set_num_threads(threads);
                std::vector<float> out;
                std::vector<double> dg;
                const int st = call_adv(cfg_of(kGrpo), bad, out, &dg);
                const int want = what == 0 || what == 3 ? DRMAS_ERR_INCONSISTENT : what == 1 ? DRMAS_ERR_RANGE : DRMAS_ERR_NONFINITE;
                CHECK(st == want, "shuffled rows, bad %d, %d threads: status %d (%s), want %d", what, threads, st, drmas_last_error(),
                      want);
                bool untouched = true;
                for (float v : out) untouched = untouched && v == -7.0f;
                for (double v : dg) untouched = untouched && v == -7.0;
                CHECK(untouched, "shuffled rows, bad %d, %d threads: outputs must be untouched", what, threads);
            }
            drmas_set_num_threads(0);
        }
    }
}

// Rows in random order without diagnostics go through the sorted path's loop over the runs of the
// partition (Dr. MAS's four runs at a time, the kernels inlined; the trajectory map passed for group_of_run);
// with diagnostics, through a kernel call a uid. The two must give the same bits, in every mode, both
// poolings, every singleton policy, 1 and 4 threads, 2 and 5 agents (5: the scalar kernel), with
// agents of a single row and uids without rows; and both must be close to the grouped rows' results
// (another order of the sums, through the sorted path).
static void test_partition_run_loop() {
    std::mt19937_64 rng(67);
    for (int64_t K : {2, 5}) {
        const Rows full = rollout_rows(K == 2 ? 40000 : 16000, 3, K, 2, rng);
        Rows r = full;
        r.s.clear();
        r.uid.clear();
        r.traj.clear();
        r.agent.clear();
        std::bernoulli_distribution keep(0.55);  // many agents of one row, some uids and trajectories without rows
        for (size_t i = 0; i < full.s.size(); ++i)
            if (keep(rng)) {
                r.s.push_back(full.s[i] + (float)(rng() % 1000) * 1e-4f);
                r.uid.push_back(full.uid[i]);
                r.traj.push_back(full.traj[i]);
                r.agent.push_back(full.agent[i]);
            }
        const int64_t n = (int64_t)r.s.size();
        std::vector<int64_t> perm(n);
        std::iota(perm.begin(), perm.end(), 0);
        std::shuffle(perm.begin(), perm.end(), rng);
        const Rows p = permuted(r, perm);
        int checked = 0;
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool < 2; ++pool)
                for (int single = 0; single < 3; ++single)
                    for (int threads : {1, 4}) {
                        drmas_set_num_threads(threads);
                        drmas_norm_config c = cfg_of(mode);
                        c.global_pooling = pool;
                        c.singleton = single;
                        std::vector<float> a, b, g;
                        std::vector<double> db;
                        CHECK(call_adv(c, p, a, nullptr) == 0 && call_adv(c, p, b, &db) == 0 && call_adv(c, r, g, nullptr) == 0, "%s",
                              drmas_last_error());
                        int differ = 0, far = 0;
                        for (int64_t i = 0; i < n; ++i) {
                            differ += !same_bits(&a[i], &b[i], 4);
                            far += !(close(a[i], g[perm[i]], 1e-5, 1e-5) || (isnan(a[i]) && isnan(g[perm[i]])));
                        }
                        CHECK(differ == 0, "K %lld mode %d pool %d singleton %d threads %d: %d rows differ with and without diagnostics",
                              (long long)K, mode, pool, single, threads, differ);
                        CHECK(far == 0, "K %lld mode %d pool %d singleton %d threads %d: %d shuffled rows far from the grouped rows'",
                              (long long)K, mode, pool, single, threads, far);
                        ++checked;
                    }
        drmas_set_num_threads(0);
        CHECK(checked == kDescriptors * 2 * 3 * 2, "every case ran");
    }
}

// The workspace kept between calls (cpu.cpp): advantages from concurrent callers (one holds the
// cached block, the others allocate their own) are the same bits as one caller's; so are those of a
// call with the cache turned off (DRMAS_CPU_WORKSPACE_MB=0) after calls that left other rows' data in
// the block, and of a call after a larger one.
// Per-thread id tables stay bounded by the rows, not threads x ids: the partition's uid histograms
// and the validation's trajectory -> uid maps. 1M rows in random order, 2 a uid, with sparse ids
// declared up to 4M (U = T = 4n, the most the partition takes): on 16 threads each table of 4M
// ids is 16 MB, so a table a thread was ~256 MB of histograms (and again of maps, for the message
// about one NaN). Measured as the growth of the peak resident size over the call (Linux resets it
// through /proc/self/clear_refs), the workspace freed after each call; the results are those of one
// thread, bit for bit, and not all 0.
static long status_kb(const char* field) {
    FILE* f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    const size_t len = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':') v = atol(line + len + 1);
    fclose(f);
    return v;
}

static bool reset_peak_rss() {
    FILE* f = fopen("/proc/self/clear_refs", "w");
    if (!f) return false;
    const bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static void test_thread_tables_memory() {
    if (!reset_peak_rss() || status_kb("VmHWM") < 0) {
        printf("SKIP test_thread_tables_memory: cannot reset the peak resident size (/proc/self/clear_refs)\n");
        return;
    }
    const int64_t n = 1 << 20, ids = 4 * n;
    Rows r{std::vector<float>(n), std::vector<int32_t>(n), std::vector<int32_t>(n), std::vector<int32_t>(n, 0), ids, ids, 1};
    std::mt19937_64 rng(83);
    std::uniform_real_distribution<float> score(0.0f, 1.0f);
    for (int64_t i = 0; i < n; ++i) {
        r.s[i] = score(rng);
        r.uid[i] = (int32_t)(8 * (i / 2) + (i / 2) % 7);  // distinct per pair, below 4n
        r.traj[i] = (int32_t)(4 * i + i % 3);              // a trajectory a row
    }
    std::vector<int64_t> perm(n);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    r = permuted(r, perm);
    const drmas_norm_config c = cfg_of(kDrmas);
    setenv("DRMAS_CPU_WORKSPACE_MB", "0", 1);
    drmas_set_num_threads(1);
    std::vector<float> one, many;
    CHECK(call_adv(c, r, one, nullptr) == 0, "one thread: %s", drmas_last_error());
    drmas_set_num_threads(64);
    const long limit_kb = 192 << 10;  // the rest of the scratch is ~110 MB here
    reset_peak_rss();
    long before = status_kb("VmRSS");
    CHECK(call_adv(c, r, many, nullptr) == 0, "64 threads: %s", drmas_last_error());
    long grew = status_kb("VmHWM") - before;
    CHECK(grew <= limit_kb, "the partitioned call's peak grew by %ld MB (bound %ld MB)", grew >> 10, limit_kb >> 10);
    CHECK(same_bits(one.data(), many.data(), 4 * (size_t)n), "64 threads: not one thread's bits");
    int64_t nonzero = 0;
    for (float v : one) nonzero += v != 0.0f;
    CHECK(nonzero > n / 2, "only %lld of %lld advantages are not 0", (long long)nonzero, (long long)n);
    // one NaN: the partition declines the block, the validation names the row
    const int64_t badrow = n - 5;
    r.s[badrow] = NAN;
    reset_peak_rss();
    before = status_kb("VmRSS");
    const int st = call_adv(c, r, many, nullptr);
    grew = status_kb("VmHWM") - before;
    char want[64];
    snprintf(want, sizeof want, "scores[%lld] is not finite", (long long)badrow);
    CHECK(st == DRMAS_ERR_NONFINITE && strstr(drmas_last_error(), want), "one NaN: status %d, %s", st, drmas_last_error());
    CHECK(grew <= limit_kb, "the call that reports one NaN grew the peak by %ld MB (bound %ld MB)", grew >> 10, limit_kb >> 10);
    unsetenv("DRMAS_CPU_WORKSPACE_MB");
    drmas_set_num_threads(0);
}

static void test_workspace() {
    std::mt19937_64 rng(71);
    std::vector<Rows> sets;
    for (int64_t U : {3000, 5000, 700, 9000}) {
        Rows r = rollout_rows(U, 8, 2, 2, rng);
        if (sets.size() % 2 == 1) {  // every other set in random order: the partitioned path
            std::vector<int64_t> perm(r.s.size());
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            r = permuted(r, perm);
        }
        sets.push_back(r);
    }
    drmas_set_num_threads(2);
    const drmas_norm_config c = cfg_of(0);
    std::vector<std::vector<float>> want(sets.size());
    for (size_t j = 0; j < sets.size(); ++j) CHECK(call_adv(c, sets[j], want[j], nullptr) == 0, "%s", drmas_last_error());
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
        callers.emplace_back([&, t] {
            for (int it = 0; it < 6; ++it) {
                const size_t j = (size_t)(t + it) % sets.size();
                std::vector<float> got;
                if (call_adv(c, sets[j], got, nullptr) != 0 || memcmp(got.data(), want[j].data(), got.size() * 4) != 0) ++mismatches[t];
            }
        });
    for (auto& th : callers) th.join();
    for (int t = 0; t < 4; ++t) CHECK(mismatches[t] == 0, "concurrent caller %d: %d calls differ from one caller's", t, mismatches[t]);
    for (const char* limit : {"0", "1", "x"}) {  // off; too small for these calls; not a number (the default)
        setenv("DRMAS_CPU_WORKSPACE_MB", limit, 1);
        for (size_t j = sets.size(); j-- > 0;) {
            std::vector<float> got;
            CHECK(call_adv(c, sets[j], got, nullptr) == 0 && memcmp(got.data(), want[j].data(), got.size() * 4) == 0,
                  "DRMAS_CPU_WORKSPACE_MB=%s, set %zu: not the same bits", limit, j);
        }
    }
    unsetenv("DRMAS_CPU_WORKSPACE_MB");
    drmas_set_num_threads(0);
}

// drmas_advantage_trusted_f32: bit for bit the validating call's advantages and diagnostics on
// sorted rows (runs of 1 to ~60 rows, empty uids, runs across the threads' chunks and the 2048-row
// blocks), on rows in another order, for every mode and 1, 3 and 4 threads; on bad rows the error
// (naming the function and the row) and nothing written outside the outputs (guard values around
// them).
static int call_trusted(const drmas_norm_config& c, const Rows& r, std::vector<float>& out, std::vector<double>* diag) {
    const int64_t n = (int64_t)r.s.size(), guard = 16;
    out.assign(n + 2 * guard, -7.0f);
    if (diag) diag->assign(DRMAS_DIAG_FIELDS * r.U * r.K + 2 * guard, -7.0);
    const int st = drmas_advantage_trusted_f32(DRMAS_DEVICE_CPU, &c, n, r.s.data(), r.uid.data(), r.traj.data(), r.agent.data(),
                                               r.U, r.T, r.K, out.data() + guard, diag ? diag->data() + guard : nullptr, nullptr);
    bool guards = true;
    for (int64_t j = 0; j < guard; ++j) {
        guards = guards && out[j] == -7.0f && out[n + guard + j] == -7.0f;
        if (diag) guards = guards && (*diag)[j] == -7.0 && (*diag)[diag->size() - 1 - j] == -7.0;
    }
    CHECK(guards, "drmas_advantage_trusted_f32 wrote outside its outputs");
    out.erase(out.begin(), out.begin() + guard);
    out.resize(n);
    if (diag) {
        diag->erase(diag->begin(), diag->begin() + guard);
        diag->resize(DRMAS_DIAG_FIELDS * r.U * r.K);
    }
    return st;
}

static void test_trusted_entry() {
    std::mt19937_64 rng(53);
    for (int64_t K : {1, 2, 3, 5}) {
        Rows r = rollout_rows(K == 2 ? 9000 : 700, 8, K, 2, rng);  // K = 2: ~200K rows, several threads
        for (auto& u : r.uid) u = u * 2 + 1;                       // every other uid has no rows
        r.U = r.U * 2 + 1;
        for (float& v : r.s) v = v * 0.37f + (float)(rng() % 100) * 1e-3f;
        for (int mode = 0; mode < kDescriptors; ++mode)
            for (int pool = 0; pool < 2; ++pool)
                for (int threads : {1, 3, 4}) {
                    if (K != 2 && threads != 1) continue;
                    drmas_set_num_threads(threads);
                    drmas_norm_config c = cfg_of(mode);
                    c.global_pooling = pool;
                    std::vector<float> a, b;
                    std::vector<double> da, db;
                    const int st1 = call_adv(c, r, a, &da);
                    const int st2 = call_trusted(c, r, b, &db);
                    CHECK(st1 == 0 && st2 == 0, "%s", drmas_last_error());
                    bool same = same_bits(a.data(), b.data(), a.size() * 4);
                    for (size_t j = 0; j < da.size(); ++j) same = same && (same_bits(&da[j], &db[j], 8) || (isnan(da[j]) && isnan(db[j])));
                    CHECK(same, "K %lld mode %d pool %d threads %d: the trusted entry must give the validating one's bits", (long long)K,
                          mode, pool, threads);
                    const int st3 = call_trusted(c, r, b, nullptr);
                    const int st4 = call_adv(c, r, a, nullptr);
                    CHECK(st3 == 0 && st4 == 0 && same_bits(a.data(), b.data(), a.size() * 4), "K %lld mode %d: without diagnostics too",
                          (long long)K, mode);
                }
    }
    // rows in another order (uids reversed, then shuffled): the validating path's answer
    Rows r = rollout_rows(300, 8, 2, 2, rng);
    const int64_t n = (int64_t)r.s.size();
    drmas_norm_config c = cfg_of(kGrpo);
    for (int layout = 0; layout < 2; ++layout) {
        Rows p = r;
        if (layout == 0) {
            for (auto& u : p.uid) u = (int32_t)(r.U - 1 - u);
        } else {
            std::vector<int64_t> perm(n);
            std::iota(perm.begin(), perm.end(), 0);
            std::shuffle(perm.begin(), perm.end(), rng);
            p = permuted(r, perm);
        }
        std::vector<float> a, b;
        std::vector<double> da, db;
        CHECK(call_adv(c, p, a, &da) == 0 && call_trusted(c, p, b, &db) == 0, "%s", drmas_last_error());
        CHECK(same_bits(a.data(), b.data(), a.size() * 4), "layout %d: unsorted rows through the trusted entry", layout);
    }
    // bad rows: the error names the function and the row; writes stay inside the outputs
    for (int threads : {1, 4}) {
        drmas_set_num_threads(threads);
        for (int what = 0; what < 5; ++what) {
            Rows bad = rollout_rows(9000, 8, 2, 2, rng);
            const int64_t row = (int64_t)bad.s.size() / 2 + 3;
            if (what == 0) bad.s[row] = NAN;
            if (what == 1) bad.uid[row] = (int32_t)bad.U + 1000000;
            if (what == 2) bad.traj[row] = -3;
            if (what == 3) bad.agent[row] = 1 << 30;
            if (what == 4) bad.uid[row] = -1;
            std::vector<float> out;
            std::vector<double> dg;
            const int st = call_trusted(cfg_of(kDrmas), bad, out, &dg);
            const char* names[] = {"scores", "uid", "traj", "agent", "uid"};
            char want[96];
            snprintf(want, sizeof want, "drmas_advantage_trusted_f32: %s[%lld]", names[what], (long long)row);
            CHECK(st != 0 && contains(drmas_last_error(), want), "%d threads, bad %s: %d %s", threads, names[what], st,
                  drmas_last_error());
        }
        const Rows sorted = rollout_rows(9000, 8, 2, 2, rng);
        for (int id = 0; id < 2; ++id) {  // ids one past the range that keep the rows in order
            int64_t first = 0;
            const Rows bad = past_the_range(sorted, id == 0, &first);
            std::vector<float> out;
            std::vector<double> dg;
            const int st = call_trusted(cfg_of(kDrmas), bad, out, &dg);
            char want[96];
            snprintf(want, sizeof want, "drmas_advantage_trusted_f32: %s[%lld]", id == 0 ? "uid" : "traj", (long long)first);
            CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), want), "%d threads, %s one past the range at the end: %d %s",
                  threads, id == 0 ? "uid = U" : "traj = T", st, drmas_last_error());
        }
    }
    drmas_set_num_threads(0);
}

// The sorted check takes rows eight at a time from row 8 on; the first eight rows and the n % 8 at
// the end it checks one by one (row_ok): every check must hold there too. Rows built so that the
// first uid (5 rows) lies in the first block and the last uid (5 rows) is the whole tail: each
// trajectory P, P, P, Q, Q. Then (a) a score of +inf, -inf or NaN at rows of the first block and
// the tail must be an error naming the row, through both entries (outputs untouched through the
// validating one); (b) a trajectory interrupted inside its uid there (P, P, Q, Q, P: valid rows,
// not sorted) must be declined by the sorted path: the advantages are the in-order rows' permuted
// (a trajectory counted twice would move the group's statistics under trajectory pooling).
static void test_sorted_scalar_rows() {
    std::mt19937_64 rng(41);
    Rows mid = rollout_rows(40, 8, 2, 2, rng);
    Rows r{{}, {}, {}, {}, 0, 0, 2};
    auto five = [&r](int32_t u, int32_t t, float base) {
        const int32_t tr[] = {t, t, t, t + 1, t + 1};
        for (int j = 0; j < 5; ++j) {
            r.s.push_back(base + 0.25f * (float)j * (float)j);  // P's mean and Q's differ
            r.uid.push_back(u);
            r.traj.push_back(tr[j]);
            r.agent.push_back(j % 2);
        }
    };
    five(0, 0, 0.5f);
    int64_t m = (int64_t)mid.s.size();
    while ((10 + m) % 8 != 5) --m;  // (cuts the middle's last uid short: its rows stay in order)
    for (int64_t i = 0; i < m; ++i) {
        r.s.push_back(mid.s[i]);
        r.uid.push_back(mid.uid[i] + 1);
        r.traj.push_back(mid.traj[i] + 2);
        r.agent.push_back(mid.agent[i]);
    }
    five((int32_t)mid.U + 1, (int32_t)mid.T + 2, -0.75f);
    r.U = mid.U + 2;
    r.T = mid.T + 4;
    const int64_t n = (int64_t)r.s.size();
    CHECK(n % 8 == 5, "the tail must be the last uid's 5 rows (n = %lld)", (long long)n);
    for (int threads : {1, 4}) {
        drmas_set_num_threads(threads);
        for (int64_t row : {(int64_t)0, (int64_t)3, (int64_t)4, n - 5, n - 2, n - 1})
            for (float v : {INFINITY, -INFINITY, NAN}) {
                Rows bad = r;
                bad.s[row] = v;
                std::vector<float> out;
                std::vector<double> dg;
                char want[96];
                snprintf(want, sizeof want, "scores[%lld]", (long long)row);
                const int st = call_adv(cfg_of(kDrmas), bad, out, &dg);
                bool untouched = true;
                for (float x : out) untouched = untouched && x == -7.0f;
                for (double x : dg) untouched = untouched && x == -7.0;
                CHECK(st != 0 && contains(drmas_last_error(), want) && untouched, "%d threads, score %g at row %lld: %d %s",
                      threads, v, (long long)row, st, drmas_last_error());
                const int stt = call_trusted(cfg_of(kDrmas), bad, out, nullptr);
                CHECK(stt != 0 && contains(drmas_last_error(), want), "%d threads, trusted, score %g at row %lld: %d %s", threads, v,
                      (long long)row, stt, drmas_last_error());
            }
        for (int64_t at : {(int64_t)0, n - 5}) {  // P, P, P, Q, Q -> P, P, Q, Q, P
            std::vector<int64_t> perm(n);
            std::iota(perm.begin(), perm.end(), 0);
            std::swap(perm[at + 2], perm[at + 4]);
            const Rows x = permuted(r, perm);
            for (int mode = 0; mode < kDescriptors; ++mode)
                for (int pool = 0; pool < 2; ++pool) {
                    drmas_norm_config c = cfg_of(mode);
                    c.global_pooling = pool;
                    std::vector<float> want, got, got_t;
                    CHECK(call_adv(c, r, want, nullptr) == 0 && call_adv(c, x, got, nullptr) == 0 &&
                              call_trusted(c, x, got_t, nullptr) == 0,
                          "%s", drmas_last_error());
                    int bad = 0;
                    for (int64_t i = 0; i < n; ++i)
                        bad += !close(got[i], want[perm[i]], 1e-6, 1e-6) || !close(got_t[i], want[perm[i]], 1e-6, 1e-6);
                    CHECK(bad == 0, "%d threads, a trajectory interrupted at rows %lld..%lld, mode %d pool %d: %d rows differ",
                          threads, (long long)at, (long long)at + 4, mode, pool, bad);
                }
        }
    }
    drmas_set_num_threads(0);
}

// ---- the vectorised clipped loss (cpu_loss_kernels.inc) ------------------------------------

// Token-by-token reference: drmas::token_loss (the scalar formula, also the CUDA kernel's) and the
// aggregation of drmas.h with per-row sums added one token at a time.
static void loss_reference(const drmas_loss_config& c, int64_t R, const int64_t* off, const float* lp, const float* old,
                           const float* adv_tok, const float* ref, const uint8_t* mask, float* grad, double* sums) {
    for (int j = 0; j < DRMAS_LOSS_SUMS; ++j) sums[j] = 0;
    for (int64_t t = 0; t < off[0]; ++t) grad[t] = 0;
    for (int64_t r = 0; r < R; ++r) {
        int64_t nv = 0;
        for (int64_t t = off[r]; t < off[r + 1]; ++t) nv += !mask || mask[t];
        const double w = c.per_row_mean ? (nv ? 1.0 / c.normalizer / (double)nv : 0.0) : 1.0 / c.normalizer;
        double l = 0, pg = 0, kl = 0;
        for (int64_t t = off[r]; t < off[r + 1]; ++t) {
            if (mask && !mask[t]) {
                grad[t] = 0;
                continue;
            }
            const drmas::TokenLoss tl = drmas::token_loss(c, lp[t], old[t], adv_tok[t], ref != nullptr, ref ? ref[t] : 0.0f);
            grad[t] = (float)w * (tl.dpg + (float)c.kl_coef * tl.dkl);
            l += (double)tl.pg + (double)(float)c.kl_coef * tl.kl;
            pg += tl.pg;
            kl += tl.kl;
            sums[DRMAS_LOSS_TOKENS] += 1;
            sums[DRMAS_LOSS_CLIPPED] += tl.clipped;
            sums[DRMAS_LOSS_CLIPPED_LOWER] += tl.clipped_lower;
            sums[DRMAS_LOSS_PPO_KL] += tl.neg_kl;
        }
        sums[DRMAS_LOSS_LOSS] += w * l;
        sums[DRMAS_LOSS_PG_LOSS] += w * pg;
        sums[DRMAS_LOSS_KL_LOSS] += w * kl;
        sums[DRMAS_LOSS_KL] += kl;
    }
}

// Rows of awkward lengths (0 to 13 tokens, then longer ones), log-probs that put ratios on both
// sides of the clip range and past the +-20 clamp, NaN in masked tokens; every KL estimator, dual
// clip on and off, both aggregations, masks and none: each token's grad is bit for bit the scalar
// formula's, the sums agree to fp64 rounding (the kernel adds in lanes), the per-row entry gives bit
// for bit the per-token one, and the v2, v3 and (on AVX-512 CPUs) v4 builds agree bit for bit.
static void test_loss_vector_matches_scalar() {
    std::mt19937_64 rng(41);
    std::vector<int64_t> off{3};  // tokens [0, 3) belong to no row
    for (int64_t len = 0; len <= 13; ++len) off.push_back(off.back() + len);
    for (int j = 0; j < 20; ++j) off.push_back(off.back() + (int64_t)(rng() % 300));
    const int64_t R = (int64_t)off.size() - 1, T = off.back() + 5;  // and 5 past the last row
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> lp(T), old(T), ref(T), adv_row(R), adv_tok(T, 0.0f);
    std::vector<uint8_t> mask(T);
    for (int64_t t = 0; t < T; ++t) {
        lp[t] = -fabsf(1.5f * nd(rng));
        const int kind = (int)(rng() % 20);
        old[t] = kind == 0 ? lp[t] + 25.0f : kind == 1 ? lp[t] - 30.0f : kind == 2 ? lp[t] : lp[t] + 0.3f * nd(rng);
        // (ref - lp past +-20; and inside it, where k3's e^x - x - 1 passes its +-10 clamp: x = 5, -15)
        ref[t] = kind == 3 ? lp[t] + 22.0f : kind == 4 ? lp[t] + 5.0f : kind == 5 ? lp[t] - 15.0f : lp[t] + 0.5f * nd(rng);
        mask[t] = rng() % 10 != 0;
        if (!mask[t] && rng() % 2) lp[t] = old[t] = ref[t] = NAN;  // padding may hold anything
    }
    for (int64_t r = 0; r < R; ++r) {
        adv_row[r] = r % 7 == 0 ? 0.0f : nd(rng);
        for (int64_t t = off[r]; t < off[r + 1]; ++t) adv_tok[t] = adv_row[r];
    }
    for (int kl = DRMAS_KL_NONE; kl <= DRMAS_KL_K3; ++kl)
        for (double dual : {0.0, 3.0})
            for (int prm = 0; prm < 2; ++prm)
                for (int masked = 0; masked < 2; ++masked) {
                    const drmas_loss_config c{0.2, 0.28, dual, kl ? 0.05 : 0.0, 37.0, kl, prm};
                    const float* rf = kl ? ref.data() : nullptr;
                    const uint8_t* m = masked ? mask.data() : nullptr;
                    std::vector<float> g_ref(T, -1.0f), g(T, -1.0f), g_rows(T, -1.0f), g_v2(T, -1.0f), g_v3(T, -1.0f);
                    double s_ref[DRMAS_LOSS_SUMS], s[DRMAS_LOSS_SUMS], s_rows[DRMAS_LOSS_SUMS], s_v2[DRMAS_LOSS_SUMS],
                        s_v3[DRMAS_LOSS_SUMS];
                    std::vector<float> lpu = lp, oldu = old, refu = ref;
                    if (!masked)  // without a mask every token is valid: no NaN padding
                        for (int64_t t = 0; t < T; ++t)
                            if (std::isnan(lpu[t])) lpu[t] = oldu[t] = refu[t] = -1.0f;
                    const float* rfu = kl ? refu.data() : nullptr;
                    loss_reference(c, R, off.data(), lpu.data(), oldu.data(), adv_tok.data(), rfu, m, g_ref.data(), s_ref);
                    for (int64_t t = off[R]; t < T; ++t) g_ref[t] = 0;
                    unsetenv("DRMAS_CPU_ISA");
                    int st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), T, lpu.data(), oldu.data(), adv_tok.data(),
                                                    rfu, m, g.data(), s, nullptr);
                    CHECK(st == 0, "%s", drmas_last_error());
                    st = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), off.data(), T, lpu.data(), oldu.data(),
                                                     adv_row.data(), rfu, m, g_rows.data(), s_rows, nullptr);
                    CHECK(st == 0, "%s", drmas_last_error());
                    setenv("DRMAS_CPU_ISA", "v2", 1);
                    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), T, lpu.data(), oldu.data(), adv_tok.data(), rfu,
                                                m, g_v2.data(), s_v2, nullptr);
                    CHECK(st == 0, "%s", drmas_last_error());
                    setenv("DRMAS_CPU_ISA", "v3", 1);  // on an AVX-512 CPU the default is v4's sixteen-lane loop
                    st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), T, lpu.data(), oldu.data(), adv_tok.data(), rfu,
                                                m, g_v3.data(), s_v3, nullptr);
                    unsetenv("DRMAS_CPU_ISA");
                    CHECK(st == 0, "%s", drmas_last_error());
                    int64_t bad = -1;
                    for (int64_t t = 0; t < T && bad < 0; ++t)
                        if (memcmp(&g[t], &g_ref[t], 4) != 0) bad = t;
                    CHECK(bad < 0, "kl %d dual %g prm %d mask %d: grad[%lld] = %.9g, the scalar formula gives %.9g", kl, dual, prm,
                          masked, (long long)bad, bad >= 0 ? g[bad] : 0.0, bad >= 0 ? g_ref[bad] : 0.0);
                    bool sums_close = true;
                    for (int j = 0; j < DRMAS_LOSS_SUMS; ++j) sums_close &= close(s[j], s_ref[j], 1e-12, 1e-12);
                    CHECK(sums_close, "kl %d dual %g prm %d mask %d: sums differ from the scalar ones beyond rounding (loss %.17g vs %.17g)",
                          kl, dual, prm, masked, s[0], s_ref[0]);
                    CHECK(s[DRMAS_LOSS_TOKENS] == s_ref[DRMAS_LOSS_TOKENS] && s[DRMAS_LOSS_CLIPPED] == s_ref[DRMAS_LOSS_CLIPPED] &&
                              s[DRMAS_LOSS_CLIPPED_LOWER] == s_ref[DRMAS_LOSS_CLIPPED_LOWER],
                          "the counts are exact");
                    CHECK(memcmp(g.data(), g_rows.data(), T * 4) == 0 && memcmp(s, s_rows, sizeof s) == 0,
                          "kl %d: drmas_clipped_loss_rows_f32 must give bit for bit what the broadcast advantages give", kl);
                    CHECK(memcmp(g.data(), g_v2.data(), T * 4) == 0 && memcmp(s, s_v2, sizeof s) == 0,
                          "kl %d dual %g prm %d mask %d: the v2 and the default loss kernels must agree bit for bit", kl, dual, prm, masked);
                    CHECK(memcmp(g.data(), g_v3.data(), T * 4) == 0 && memcmp(s, s_v3, sizeof s) == 0,
                          "kl %d dual %g prm %d mask %d: the v3 and the default (v4 where the CPU has AVX-512) loss kernels must agree "
                          "bit for bit", kl, dual, prm, masked);
                }
    // the per-row entry's own argument check
    double sums[DRMAS_LOSS_SUMS];
    float g1[4];
    const drmas_loss_config c{0.2, 0.2, 0.0, 0.0, 1.0, DRMAS_KL_NONE, 0};
    const int64_t o1[2] = {0, 4};
    const float z[4] = {0, 0, 0, 0};
    const int st = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &c, 1, nullptr, o1, 4, z, z, nullptr, nullptr, nullptr, g1, sums, nullptr);
    CHECK(st == DRMAS_ERR_NULL && strstr(drmas_last_error(), "drmas_clipped_loss_rows_f32: row_advantages is NULL"),
          "a NULL row_advantages is named: %d %s", st, drmas_last_error());
}

// A NaN log-prob (or old log-prob) on a valid token goes through the clamps as NaN, as in the scalar
// formula (clampf_ keeps NaN): its grad is the scalar one (0: the ratio's derivative is cut outside
// [-20, 20], and NaN is outside), the loss and ppo_kl sums are NaN, the other tokens' grads are
// unaffected; on every build of the loop, with the NaN at each lane of a step and in the partial
// last step.
static void test_loss_nan_valid_token() {
    const int64_t R = 3;
    const int64_t off[R + 1] = {0, 16, 16 + 37, 16 + 37 + 5};
    const int64_t T = off[R];
    auto same = [](double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; };
    for (int64_t bad = 0; bad < T; ++bad) {
        std::vector<float> lp(T), old(T), adv(T, 0.5f), ref(T);
        for (int64_t t = 0; t < T; ++t) {
            lp[t] = -0.1f * (float)(t % 7) - 0.05f;
            old[t] = lp[t] + (t % 3 == 0 ? 0.4f : -0.02f);
            ref[t] = lp[t] + 0.1f;
        }
        (bad % 2 ? lp : old)[bad] = NAN;
        for (int kl : {DRMAS_KL_NONE, DRMAS_KL_K3}) {
            const drmas_loss_config c{0.2, 0.28, 0.0, kl ? 0.05 : 0.0, 37.0, kl, 0};
            std::vector<float> g_ref(T);
            double s_ref[DRMAS_LOSS_SUMS];
            loss_reference(c, R, off, lp.data(), old.data(), adv.data(), kl ? ref.data() : nullptr, nullptr, g_ref.data(), s_ref);
            CHECK(std::isnan(s_ref[DRMAS_LOSS_LOSS]) && std::isnan(s_ref[DRMAS_LOSS_PPO_KL]), "the reference's sums are NaN");
            for (const char* isa : {(const char*)nullptr, "v2", "v3"}) {
                if (isa) setenv("DRMAS_CPU_ISA", isa, 1); else unsetenv("DRMAS_CPU_ISA");
                std::vector<float> g(T, -1.0f);
                double s[DRMAS_LOSS_SUMS];
                const int st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, R, off, T, lp.data(), old.data(), adv.data(),
                                                      kl ? ref.data() : nullptr, nullptr, g.data(), s, nullptr);
                unsetenv("DRMAS_CPU_ISA");
                CHECK(st == 0, "%s", drmas_last_error());
                int64_t wrong = -1;
                for (int64_t t = 0; t < T && wrong < 0; ++t)
                    if (!same(g[t], g_ref[t])) wrong = t;
                CHECK(wrong < 0, "NaN at token %lld, kl %d, %s: grad[%lld] = %g, the scalar formula gives %g", (long long)bad, kl,
                      isa ? isa : "default", (long long)wrong, wrong >= 0 ? g[wrong] : 0.0, wrong >= 0 ? g_ref[wrong] : 0.0);
                bool sums = true;
                for (int j = 0; j < DRMAS_LOSS_SUMS; ++j)
                    sums &= std::isnan(s_ref[j]) ? std::isnan(s[j]) : close(s[j], s_ref[j], 1e-12, 1e-12);
                CHECK(sums, "NaN at token %lld, kl %d, %s: the sums must be the scalar ones (NaN where they are NaN)", (long long)bad, kl,
                      isa ? isa : "default");
            }
        }
    }
}

// Edge tokens through the vector loops, bit for bit against the scalar formula on every build: the dual
// clip's tie (d = 0x3f8c9f54, whose ratio is exactly 3.0f, against dual_clip 3 with A < 0: pg == pg3,
// half the gradient, not counted as clipped below), NaN log-probs in valid tokens (quiet, with a sign
// and payload, signalling: the scalar exp returns its argument, quieted: NaN grad and sums), d at exactly +-20 and one float past, infinite
// log-probs, the ratio exactly on the clip range's ends (0.8f and 1.28f), +-0 advantages; each edge
// alone among ordinary tokens, at every lane position of the widest step; every KL estimator, with a
// mask and without. (Before this test a loop without the tie's half or without the NaN select passed.)
static void test_loss_vector_edges() {
    auto f = [](uint32_t b) {
        float x;
        memcpy(&x, &b, 4);
        return x;
    };
    const float edges[] = {f(0x3f8c9f54u), NAN, f(0xffc12345u), f(0x7f800001u), 20.0f, nextafterf(20.0f, 30.0f), -20.0f, nextafterf(-20.0f, -30.0f),
                           -INFINITY, INFINITY, f(0xbe647fbbu), f(0x3e7cc8dfu)};
    const int E = (int)(sizeof edges / sizeof edges[0]);
    const float advs[] = {-1.5f, 1.0f, -1.0f, 0.0f, -0.0f};
    const int64_t T = (int64_t)E * 16 * 16;
    std::vector<float> lp(T, -0.3f), old(T, -0.25f), ref(T), adv(T);
    std::vector<uint8_t> mask(T, 1);
    for (int q = 0; q < E; ++q)
        for (int pos = 0; pos < 16; ++pos) {
            const int64_t t = 16 * (16 * (int64_t)q + pos) + pos;  // alone in its sixteen tokens, at lane pos
            lp[t] = edges[q];
            old[t] = 0.0f;
        }
    for (int64_t t = 0; t < T; ++t) {
        ref[t] = lp[t] + 0.3f;
        // the tie needs A < 0 (the first edge); the others see every advantage
        adv[t] = lp[t] == edges[0] ? -1.5f : advs[t % 5];
        if (t % 7 == 3) mask[t] = 0;
    }
    const int64_t off[2] = {0, T};
    for (int kl = DRMAS_KL_NONE; kl <= DRMAS_KL_K3; ++kl)
        for (int masked = 0; masked < 2; ++masked) {
            const drmas_loss_config c{0.2, 0.28, 3.0, kl ? 0.05 : 0.0, 1.0, kl, 0};
            const float* rf = kl ? ref.data() : nullptr;
            const uint8_t* m = masked ? mask.data() : nullptr;
            std::vector<float> g_ref(T);
            double s_ref[DRMAS_LOSS_SUMS];
            loss_reference(c, 1, off, lp.data(), old.data(), adv.data(), rf, m, g_ref.data(), s_ref);
            for (const char* isa : {"", "v2", "v3"}) {
                if (*isa)
                    setenv("DRMAS_CPU_ISA", isa, 1);
                else
                    unsetenv("DRMAS_CPU_ISA");
                std::vector<float> g(T, -7.0f);
                double s[DRMAS_LOSS_SUMS];
                const int st = drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, 1, off, T, lp.data(), old.data(), adv.data(), rf, m,
                                                      g.data(), s, nullptr);
                unsetenv("DRMAS_CPU_ISA");
                CHECK(st == 0, "%s", drmas_last_error());
                int64_t bad = -1;
                for (int64_t t = 0; t < T && bad < 0; ++t)
                    if (memcmp(&g[t], &g_ref[t], 4) != 0) bad = t;
                CHECK(bad < 0, "kl %d mask %d isa '%s': grad[%lld] (d = %g, A = %g) = %.9g, the scalar formula gives %.9g", kl, masked,
                      isa, (long long)bad, bad >= 0 ? (double)(lp[bad] - old[bad]) : 0.0, bad >= 0 ? (double)adv[bad] : 0.0,
                      bad >= 0 ? g[bad] : 0.0, bad >= 0 ? g_ref[bad] : 0.0);
                bool sums_ok = true;
                for (int j = 0; j < DRMAS_LOSS_SUMS; ++j)
                    sums_ok &= (std::isnan(s[j]) && std::isnan(s_ref[j])) || close(s[j], s_ref[j], 1e-12, 1e-12);
                CHECK(sums_ok && s[DRMAS_LOSS_CLIPPED_LOWER] == s_ref[DRMAS_LOSS_CLIPPED_LOWER] &&
                          s[DRMAS_LOSS_CLIPPED] == s_ref[DRMAS_LOSS_CLIPPED] && s[DRMAS_LOSS_TOKENS] == s_ref[DRMAS_LOSS_TOKENS],
                      "kl %d mask %d isa '%s': the sums differ from the scalar ones (clipped below %g vs %g)", kl, masked, isa,
                      s[DRMAS_LOSS_CLIPPED_LOWER], s_ref[DRMAS_LOSS_CLIPPED_LOWER]);
            }
        }
}

// The hardest arguments of the ratio's exponential: the 113 floats d in [-20, 20] whose exp((double)d)
// lies within 64 fp64 ulps of a float rounding midpoint (a scan of every float of the range with
// glibc's exp). There the kernel's polynomial alone could round to the wrong float, and only its
// boundary band (cpu_loss_kernels.inc's kNear) sends them to libm; the 61-step sweep below meets
// almost none of them (a band moved off the midpoint by 2^14 ulps passed it, not these).
static const uint32_t kHardExpArgs[] = {
    0x337ffffc, 0x337ffffd, 0x337ffffe, 0x337fffff, 0x33800000, 0x33800001, 0x343ffffe, 0x343fffff, 0x349ffffe,
    0x34dffffd, 0x352ffffc, 0x356ffff9, 0x35a7fff9, 0x35f7fff1, 0x3653ffea, 0x367bffe1, 0x3695ffea, 0x36fdffc1,
    0x3734ffc0, 0x377eff81, 0x37fe7f03, 0x37ff7f01, 0x383a3ef1, 0x38643e69, 0x387e3e07, 0x38ad9e29, 0x38e69cc1,
    0x39c6be5b, 0x39e5bb1d, 0x3a3ffa00, 0x3a4029f7, 0x3a7af53d, 0x3a7bcd08, 0x3a9f8125, 0x3b00ba9d, 0x3b18f346,
    0x3b8c972e, 0x3bb21c5b, 0x3c5dc4c8, 0x3c608a0e, 0x3c8442d2, 0x3c96e1f8, 0x3c971aaa, 0x3caffe2e, 0x3cb8389b,
    0x3d1a274e, 0x3d7010de, 0x3dfb09d6, 0x3e777fec, 0x3f5bc24c, 0x3fa1d683, 0x3fe67199, 0x4001b249, 0x40315b33,
    0x4034d02b, 0x4039cb53, 0x408b904b, 0x40a470e2, 0x40dd70cb, 0x4178966e, 0xb2fffffd, 0xb2fffffe, 0xb2ffffff,
    0xb3000000, 0xb3000001, 0xb3000002, 0xb3c00000, 0xb3c00001, 0xb4200001, 0xb4600002, 0xb4b00002, 0xb5480005,
    0xb59c0006, 0xb5d4000b, 0xb616000b, 0xb6b50020, 0xb6d9002e, 0xb7c9c09f, 0xb7f4c0ea, 0xb9584db6, 0xba525799,
    0xba7242a6, 0xbadd0ab0, 0xbae0e25c, 0xbb8d98f5, 0xbb9af86a, 0xbb9cbb8e, 0xbbb70ee8, 0xbbf0edf1, 0xbc2a461a,
    0xbcb8f40f, 0xbce017bb, 0xbda7d6c2, 0xbdb393eb, 0xbdf128eb, 0xbe5f667d, 0xbe67b559, 0xbe715290, 0xbee0e6cd,
    0xbeed01af, 0xbf157c82, 0xbf76fd92, 0xbf81eadf, 0xbfab7ce4, 0xbfbfa14b, 0xbffc842d, 0xc03359cb, 0xc0382e72,
    0xc0781533, 0xc13d6631, 0xc159fa1e, 0xc16912cd, 0xc1963bdb
};

// The ratio's exponential: exactly (float)exp((double)d) for d in [-20, 20], through the loss (logp =
// d, old = 0, A = -1, a clip range that never binds, weight 1: grad = ratio). Every 61st float of
// the range (about 36M values, both signs, every binade down to 2^-126) and kHardExpArgs;
// DRMAS_TEST_EXHAUSTIVE=1 runs every float of the range (2.1e9 values, minutes).
static void test_loss_exp_exact() {
    const bool all = getenv("DRMAS_TEST_EXHAUSTIVE") != nullptr;
    const uint32_t step = all ? 1 : 61;
    const int64_t chunk = 1 << 20;
    std::vector<float> x(chunk), zero(chunk, 0.0f), g(chunk);
    const drmas_loss_config c{1.0 - 1e-10, 1e9, 0.0, 0.0, 1.0, DRMAS_KL_NONE, 0};
    const float minus_one = -1.0f;
    int64_t checked = 0, bad = 0;
    uint32_t first_bad = 0;
    // x[0, k) as one row of k tokens, one advantage (-1), through the per-row entry: each grad
    // against (float)exp((double)x)
    auto run_row = [&](int64_t k) {
        const int64_t off[2] = {0, k};
        double sums[DRMAS_LOSS_SUMS];
        const int st = drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &c, 1, off, off, k, x.data(), zero.data(), &minus_one, nullptr,
                                                   nullptr, g.data(), sums, nullptr);
        CHECK(st == 0, "%s", drmas_last_error());
        for (int64_t i = 0; i < k; ++i) {
            const float want = (float)exp((double)x[i]);
            if (memcmp(&g[i], &want, 4) != 0 && bad++ == 0) memcpy(&first_bad, &x[i], 4);
        }
    };
    for (int isa = 0; isa < 3; ++isa) {  // the default (v4 on AVX-512 CPUs), v2, v3
        if (isa) setenv("DRMAS_CPU_ISA", isa == 1 ? "v2" : "v3", 1);
        for (int sign = 0; sign < 2; ++sign) {
            const uint32_t limit = 0x41A00000u;  // 20.0f
            uint32_t u = isa && !all ? 7 * isa : 0;  // v2 and v3 with other offsets: more distinct values
            while (u <= limit) {
                int64_t k = 0;
                for (; k < chunk && u <= limit; ++k, u += (isa && !all ? step * 3 : step)) {
                    const uint32_t b = u | (sign ? 0x80000000u : 0);
                    memcpy(&x[k], &b, 4);
                }
                run_row(k);
                checked += k;
            }
        }
        {  // the hard ones, in one row: each alone in its sixteen tokens (the widest vector step), at
           // lane i % 16, among zeros (e^0 = 1 is far from any boundary), so that no other lane of
           // its step sends the step down the exact path for it
            const int64_t h = (int64_t)(sizeof kHardExpArgs / sizeof kHardExpArgs[0]), k = 16 * h;
            for (int64_t i = 0; i < k; ++i) x[i] = 0.0f;
            for (int64_t i = 0; i < h; ++i) memcpy(&x[16 * i + i % 16], &kHardExpArgs[i], 4);
            run_row(k);
            checked += h;
        }
        unsetenv("DRMAS_CPU_ISA");
    }
    float fb;
    memcpy(&fb, &first_bad, 4);
    CHECK(bad == 0, "%lld of %lld ratios differ from (float)exp((double)d), the first at d = %.9g (bits %08x)", (long long)bad,
          (long long)checked, fb, first_bad);
    printf("  loss exp: %lld values checked (the default, v2 and v3), %lld differ\n", (long long)checked, (long long)bad);
}

// ---------------------------------------------------------------------------------------
// 6. decoding attention: against an fp64 composition of the same steps (per-head RMSNorm, the
// rotation, softmax attention), on awkward shapes (head_dim not a multiple of 8, slots with a
// tail, strides wider than the data, kv heads shared by several query heads); masked slots and
// slots past `slots` hold NaN, so reading them would show; the cache outside the written slot
// and the qkv padding must be untouched; v2 = v3 and 1 thread = 2 bit for bit; the errors.
struct DecodeCase {
    int64_t rows, heads, kv, d, capacity, slots, write;
    bool norm, mask;
};

static void decode_reference(const DecodeCase& c, const std::vector<float>& qkv0, int64_t qs, const std::vector<float>& qn,
                             const std::vector<float>& kn, double eps, const std::vector<float>& cos, const std::vector<float>& sin,
                             const std::vector<float>& kc0, const std::vector<float>& vc0, int64_t cs, const std::vector<uint8_t>& mask,
                             double scale, std::vector<double>& q_out, std::vector<double>& k_out, std::vector<double>& out) {
    const int64_t d = c.d, group = c.heads / c.kv, half = d / 2;
    q_out.assign((size_t)(c.rows * c.heads * d), 0.0);
    k_out.assign((size_t)(c.rows * c.kv * d), 0.0);
    out.assign((size_t)(c.rows * c.heads * d), 0.0);
    auto prep = [&](const float* x, const std::vector<float>& w, int64_t r, double* y) {
        std::vector<double> t((size_t)d);
        double ss = 0;
        for (int64_t e = 0; e < d; ++e) ss += (double)x[e] * x[e];
        const double f = c.norm ? 1.0 / sqrt(ss / (double)d + eps) : 1.0;
        for (int64_t e = 0; e < d; ++e) t[(size_t)e] = c.norm ? x[e] * f * w[(size_t)e] : x[e];
        for (int64_t e = 0; e < d; ++e) {
            const double rolled = e < half ? t[(size_t)(e + half)] : t[(size_t)(e - half)];
            y[e] = t[(size_t)e] * cos[(size_t)(r * d + e)] + rolled * sin[(size_t)(r * d + e)];
        }
    };
    for (int64_t r = 0; r < c.rows; ++r) {
        const float* row = qkv0.data() + r * qs;
        for (int64_t h = 0; h < c.heads; ++h) prep(row + h * d, qn, r, q_out.data() + (r * c.heads + h) * d);
        for (int64_t g = 0; g < c.kv; ++g) prep(row + (c.heads + g) * d, kn, r, k_out.data() + (r * c.kv + g) * d);
        for (int64_t h = 0; h < c.heads; ++h) {
            const int64_t g = h / group;
            const double* q = q_out.data() + (r * c.heads + h) * d;
            std::vector<double> sc((size_t)c.slots, -INFINITY);
            double m = -INFINITY;
            for (int64_t j = 0; j < c.slots; ++j) {
                if (j != c.write && c.mask && !mask[(size_t)(r * c.slots + j)]) continue;
                double dot = 0;
                for (int64_t e = 0; e < d; ++e) {
                    const double kv = j == c.write ? k_out[(size_t)((r * c.kv + g) * d + e)]
                                                   : (double)kc0[(size_t)(r * cs + (g * c.capacity + j) * d + e)];
                    dot += q[e] * kv;
                }
                sc[(size_t)j] = dot * scale;
                m = std::max(m, sc[(size_t)j]);
            }
            double sum = 0;
            for (int64_t j = 0; j < c.slots; ++j) sum += sc[(size_t)j] == -INFINITY ? 0.0 : exp(sc[(size_t)j] - m);
            for (int64_t j = 0; j < c.slots; ++j) {
                if (sc[(size_t)j] == -INFINITY) continue;
                const double p = exp(sc[(size_t)j] - m) / sum;
                for (int64_t e = 0; e < d; ++e) {
                    const double v = j == c.write ? (double)row[(c.heads + c.kv + g) * d + e]
                                                  : (double)vc0[(size_t)(r * cs + (g * c.capacity + j) * d + e)];
                    out[(size_t)((r * c.heads + h) * d + e)] += p * v;
                }
            }
        }
    }
}

static void test_decode_attention() {
    const DecodeCase cases[] = {
        {1, 1, 1, 2, 1, 1, 0, false, false},  {3, 6, 2, 10, 9, 7, 4, true, true},   {5, 8, 4, 32, 40, 37, 36, true, true},
        {2, 4, 4, 16, 20, 20, 0, false, true}, {4, 12, 3, 24, 70, 65, 13, true, false}, {7, 2, 1, 64, 33, 17, 16, true, true},
        // large enough (~10 MFLOP) for decode_threads to give the first two "2 threads" runs two threads
        {25, 8, 4, 32, 405, 401, 398, true, true},
    };
    std::mt19937_64 rng(61);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const DecodeCase& c : cases) {
        const int64_t d = c.d, width = (c.heads + 2 * c.kv) * d, qs = width + 3, cs = c.kv * c.capacity * d + 5;
        std::vector<float> qkv((size_t)(c.rows * qs)), qn((size_t)d), kn((size_t)d), cos((size_t)(c.rows * d)), sin((size_t)(c.rows * d));
        for (float& x : qkv) x = 2.0f * nd(rng);
        for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t e = width; e < qs; ++e) qkv[(size_t)(r * qs + e)] = 1234.5f;  // padding: must stay
        for (int64_t e = 0; e < d; ++e) {
            qn[(size_t)e] = 1.0f + 0.3f * nd(rng);
            kn[(size_t)e] = 1.0f + 0.3f * nd(rng);
        }
        for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t e = 0; e < d / 2; ++e) {
                const double a = (double)(r * 7 + 3) * pow(10000.0, -2.0 * (double)e / (double)d);
                cos[(size_t)(r * d + e)] = cos[(size_t)(r * d + e + d / 2)] = (float)::cos(a);
                sin[(size_t)(r * d + e)] = -(float)::sin(a);
                sin[(size_t)(r * d + e + d / 2)] = (float)::sin(a);
            }
        std::vector<uint8_t> mask((size_t)(c.rows * c.slots));
        for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t j = 0; j < c.slots; ++j) mask[(size_t)(r * c.slots + j)] = r == 1 ? 0 : (uint8_t)(rng() % 3 != 0);  // row 1: only its own slot
        std::vector<float> kc((size_t)(c.rows * cs)), vc((size_t)(c.rows * cs));
        for (size_t i = 0; i < kc.size(); ++i) {
            kc[i] = nd(rng);
            vc[i] = nd(rng);
        }
        for (int64_t r = 0; r < c.rows; ++r)
            for (int64_t g = 0; g < c.kv; ++g)
                for (int64_t j = 0; j < c.capacity; ++j) {
                    const bool unread = j >= c.slots || (j != c.write && c.mask && !mask[(size_t)(r * c.slots + j)]);
                    if (!unread) continue;
                    for (int64_t e = 0; e < d; ++e) kc[(size_t)(r * cs + (g * c.capacity + j) * d + e)] = vc[(size_t)(r * cs + (g * c.capacity + j) * d + e)] = NAN;
                }
        const double eps = 1e-6, scale = 1.0 / sqrt((double)d);
        std::vector<double> rq, rk, ro;
        decode_reference(c, qkv, qs, qn, kn, eps, cos, sin, kc, vc, cs, mask, scale, rq, rk, ro);
        std::vector<float> got_qkv[3], got_k[3], got_v[3], got_out[3];
        for (int k = 0; k < 3; ++k) {  // the default ISA on 2 threads, v2 on 2 threads, the default on 1
            if (k == 1) setenv("DRMAS_CPU_ISA", "v2", 1);
            const int32_t saved = drmas_get_num_threads();
            if (k == 2) drmas_set_num_threads(1);
            else drmas_set_num_threads(2);
            got_qkv[k] = qkv;
            got_k[k] = kc;
            got_v[k] = vc;
            got_out[k].assign((size_t)(c.rows * c.heads * d), -7.0f);
            const int32_t st = drmas_decode_attention_f32(DRMAS_DEVICE_CPU, c.rows, c.heads, c.kv, d, got_qkv[k].data(), qs,
                                                          c.norm ? qn.data() : nullptr, c.norm ? kn.data() : nullptr, eps, cos.data(),
                                                          sin.data(), got_k[k].data(), got_v[k].data(), cs, c.capacity, c.write, c.slots,
                                                          c.mask ? mask.data() : nullptr, scale, got_out[k].data());
            drmas_set_num_threads(saved);
            unsetenv("DRMAS_CPU_ISA");
            CHECK(st == 0, "decode attention: %s", drmas_last_error());
        }
        int bad_out = 0, bad_q = 0, bad_cache = 0, bad_pad = 0;
        for (size_t i = 0; i < ro.size(); ++i) bad_out += !close(got_out[0][i], ro[i], 2e-5, 2e-4);
        for (int64_t r = 0; r < c.rows; ++r) {
            for (int64_t e = 0; e < c.heads * d; ++e) bad_q += !close(got_qkv[0][(size_t)(r * qs + e)], rq[(size_t)(r * c.heads * d + e)], 2e-5, 2e-4);
            for (int64_t e = 0; e < c.kv * d; ++e) bad_q += !close(got_qkv[0][(size_t)(r * qs + c.heads * d + e)], rk[(size_t)(r * c.kv * d + e)], 2e-5, 2e-4);
            for (int64_t e = width; e < qs; ++e) bad_pad += got_qkv[0][(size_t)(r * qs + e)] != 1234.5f;
            for (int64_t i = 0; i < cs; ++i) {
                const int64_t slot = i < c.kv * c.capacity * d ? (i / d) % c.capacity : -1, g = i / (c.capacity * d), e = i % d;
                const size_t at = (size_t)(r * cs + i);
                if (slot == c.write) {
                    bad_cache += got_k[0][at] != got_qkv[0][(size_t)(r * qs + (c.heads + g) * d + e)];
                    bad_cache += got_v[0][at] != qkv[(size_t)(r * qs + (c.heads + c.kv + g) * d + e)];
                } else {
                    bad_cache += !same_bits(&got_k[0][at], &kc[at], 4) || !same_bits(&got_v[0][at], &vc[at], 4);
                }
            }
        }
        CHECK(bad_out == 0, "rows %lld heads %lld/%lld d %lld slots %lld: %d outputs differ from the fp64 reference", (long long)c.rows,
              (long long)c.heads, (long long)c.kv, (long long)d, (long long)c.slots, bad_out);
        CHECK(bad_q == 0, "d %lld: %d normed and rotated q/k entries differ from the reference", (long long)d, bad_q);
        CHECK(bad_cache == 0 && bad_pad == 0, "d %lld: %d cache entries and %d padding entries wrong", (long long)d, bad_cache, bad_pad);
        for (int k = 1; k < 3; ++k)
            CHECK(same_bits(got_out[0].data(), got_out[k].data(), got_out[0].size() * 4) &&
                      same_bits(got_qkv[0].data(), got_qkv[k].data(), got_qkv[0].size() * 4) &&
                      same_bits(got_k[0].data(), got_k[k].data(), got_k[0].size() * 4),
                  "d %lld: run %d (%s) must match the default bit for bit", (long long)d, k, k == 1 ? "v2" : "1 thread");
    }
    // errors: named, outputs untouched
    const int64_t d = 4, cap = 3;
    std::vector<float> qkv(2 * 3 * d, 1.0f), kc(2 * cap * d, 0.5f), vc(2 * cap * d, 0.5f), cs(2 * d, 1.0f), sn(2 * d, 0.0f), out(2 * d, -3.0f);
    const std::vector<float> qkv0 = qkv, kc0 = kc, out0 = out;
    auto call = [&](int32_t dev, int64_t heads, int64_t kv, int64_t write, int64_t slots, const float* qn, const float* kn, int64_t qs) {
        return drmas_decode_attention_f32(dev, 2, heads, kv, d, qkv.data(), qs, qn, kn, 1e-6, cs.data(), sn.data(), kc.data(), vc.data(),
                                          cap * d, cap, write, slots, nullptr, 0.5, out.data());
    };
    int32_t st = call(DRMAS_DEVICE_CUDA, 1, 1, 0, 1, nullptr, nullptr, 3 * d);
    CHECK(st == DRMAS_ERR_UNSUPPORTED && contains(drmas_last_error(), "CPU only"), "CUDA device: %d %s", st, drmas_last_error());
    st = call(DRMAS_DEVICE_CPU, 1, 1, 3, 3, nullptr, nullptr, 3 * d);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "write_slot (3)"), "write slot: %d %s", st, drmas_last_error());
    st = call(DRMAS_DEVICE_CPU, 1, 1, 0, 4, nullptr, nullptr, 3 * d);
    CHECK(st == DRMAS_ERR_RANGE && contains(drmas_last_error(), "slots (4)"), "slots past capacity: %d %s", st, drmas_last_error());
    st = call(DRMAS_DEVICE_CPU, 3, 2, 0, 1, nullptr, nullptr, 3 * d);
    CHECK(st == DRMAS_ERR_SIZE && contains(drmas_last_error(), "kv_heads (2)"), "heads: %d %s", st, drmas_last_error());
    st = call(DRMAS_DEVICE_CPU, 1, 1, 0, 1, cs.data(), nullptr, 3 * d);
    CHECK(st == DRMAS_ERR_NULL && contains(drmas_last_error(), "k_norm"), "one norm: %d %s", st, drmas_last_error());
    st = call(DRMAS_DEVICE_CPU, 1, 1, 0, 1, nullptr, nullptr, 3 * d - 1);
    CHECK(st == DRMAS_ERR_SIZE && contains(drmas_last_error(), "qkv_stride"), "stride: %d %s", st, drmas_last_error());
    CHECK(qkv == qkv0 && kc == kc0 && out == out0, "a failed call must leave its outputs untouched");
}

// A call that takes two threads runs on the caller and the helper thread (cpu.cpp, AttnHelper): the
// same bits as one thread for calls in quick succession (the helper awake), after a pause longer
// than it stays awake (woken from its sleep), and from four callers at once (one has the helper, the
// others run on OpenMP's team); a batch-64 shape of the toy model at 160 slots (~10 MFLOP a call).
static void test_decode_helper() {
    const int64_t rows = 64, heads = 8, kv = 4, d = 32, cap = 200, slots = 160, write = 159;
    const int64_t qs = (heads + 2 * kv) * d, cs = kv * cap * d;
    std::mt19937_64 rng(67);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> qkv((size_t)(rows * qs)), qn((size_t)d), kn((size_t)d), cos((size_t)(rows * d)), sin((size_t)(rows * d));
    std::vector<float> kc((size_t)(rows * cs)), vc((size_t)(rows * cs));
    for (auto* v : {&qkv, &qn, &kn, &cos, &sin, &kc, &vc})
        for (float& x : *v) x = nd(rng);
    std::vector<uint8_t> mask((size_t)(rows * slots));
    for (auto& m : mask) m = (uint8_t)(rng() % 4 != 0);
    struct Out {
        std::vector<float> qkv, k, v, out;
    };
    auto call = [&](Out& o) {
        o.qkv = qkv;
        o.k = kc;
        o.v = vc;
        o.out.assign((size_t)(rows * heads * d), -7.0f);
        return drmas_decode_attention_f32(DRMAS_DEVICE_CPU, rows, heads, kv, d, o.qkv.data(), qs, qn.data(), kn.data(), 1e-6, cos.data(),
                                          sin.data(), o.k.data(), o.v.data(), cs, cap, write, slots, mask.data(), 1.0 / sqrt((double)d),
                                          o.out.data());
    };
    auto same = [](const Out& a, const Out& b) {
        return a.out == b.out && memcmp(a.qkv.data(), b.qkv.data(), a.qkv.size() * 4) == 0 && a.k == b.k && a.v == b.v;
    };
    const int32_t saved = drmas_get_num_threads();
    drmas_set_num_threads(1);
    Out want;
    CHECK(call(want) == 0, "decode helper: %s", drmas_last_error());
    drmas_set_num_threads(2);
    int differ = 0;
    for (int it = 0; it < 40; ++it) {
        if (it == 20) std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the helper goes to sleep after 3 ms
        Out got;
        differ += call(got) != 0 || !same(got, want);
    }
    CHECK(differ == 0, "decode helper: %d of 40 two-thread calls differ from one thread's", differ);
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> callers;
    for (int t = 0; t < 4; ++t)
        callers.emplace_back([&, t] {
            for (int it = 0; it < 10; ++it) {
                Out got;
                if (call(got) != 0 || !same(got, want)) ++mismatches[(size_t)t];
            }
        });
    for (auto& th : callers) th.join();
    for (int t = 0; t < 4; ++t) CHECK(mismatches[(size_t)t] == 0, "decode helper: concurrent caller %d: %d calls differ", t, mismatches[(size_t)t]);
    drmas_set_num_threads(saved);
}

// ---------------------------------------------------------------------------------------
// 7. the decoding step's other ops: RMSNorm, SwiGLU, sampling. Each against a plain composition
// written here, on awkward shapes (widths not a multiple of 8, strides wider than the data whose
// padding must stay untouched, rows enough for two threads), bit for bit between the AVX2 and the
// baseline loops and between 1 and 2 threads, and every documented error with its message and
// untouched outputs.

// Runs call(k) three ways: k = 0 the default loops on 2 threads, 1 the baseline (v2) on 2, 2 the
// default on 1 (shapes of more than 2 x 64K elements use both threads).
template <class F>
static void three_ways(F call) {
    const int32_t saved = drmas_get_num_threads();
    for (int k = 0; k < 3; ++k) {
        if (k == 1) setenv("DRMAS_CPU_ISA", "v2", 1);
        drmas_set_num_threads(k == 2 ? 1 : 2);
        call(k);
        unsetenv("DRMAS_CPU_ISA");
    }
    drmas_set_num_threads(saved);
}

static void test_rms_norm() {
    struct Shape {
        int64_t rows, hidden;
    };
    const Shape shapes[] = {{1, 1}, {3, 7}, {5, 8}, {4, 13}, {2, 64}, {65, 33}, {7, 896}, {40, 4099}};
    std::mt19937_64 rng(71);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    int cases = 0;
    for (const Shape& sh : shapes)
        for (int with_res = 0; with_res < 2; ++with_res)
            for (int in_place = 0; in_place < 2; ++in_place) {
                const int64_t R = sh.rows, H = sh.hidden, xs = H + 3, rs = H + 1, os = in_place ? xs : H + 5;
                const double eps = 1e-6;
                std::vector<float> x((size_t)(R * xs), 1234.5f), res((size_t)(R * rs), 777.0f), w((size_t)H), out0((size_t)(R * os), -9.0f);
                for (int64_t r = 0; r < R; ++r) {
                    // row scales from tiny to huge: the fp64 sum of squares must neither underflow nor overflow
                    const float sc = r % 5 == 3 ? 1e-20f : r % 5 == 4 ? 1e18f : 2.0f;
                    for (int64_t c = 0; c < H; ++c) {
                        x[(size_t)(r * xs + c)] = sc * nd(rng);
                        res[(size_t)(r * rs + c)] = sc * nd(rng);
                    }
                }
                for (float& v : w) v = 1.0f + 0.3f * nd(rng);
                // the reference: the float add, the fp64 sum of squares in plain order, f rounded to float,
                // then (x f) w in float (bit for bit: a sum in another order rounds f alike unless it lies
                // within ~1e-16 of a float boundary), and an fp64 composition for the tolerance
                std::vector<float> xr = x, outr = out0;
                std::vector<double> exact((size_t)(R * H));
                for (int64_t r = 0; r < R; ++r) {
                    float* xrow = xr.data() + r * xs;
                    if (with_res)
                        for (int64_t c = 0; c < H; ++c) xrow[c] = xrow[c] + res[(size_t)(r * rs + c)];
                    double ss = 0;
                    for (int64_t c = 0; c < H; ++c) ss += (double)xrow[c] * (double)xrow[c];
                    const double fd = 1.0 / sqrt(ss / (double)H + eps);
                    const float f = (float)fd;
                    for (int64_t c = 0; c < H; ++c) exact[(size_t)(r * H + c)] = (double)xrow[c] * fd * (double)w[(size_t)c];
                    float* orow = (in_place ? xr.data() : outr.data()) + r * os;
                    for (int64_t c = 0; c < H; ++c) orow[c] = (xrow[c] * f) * w[(size_t)c];
                }
                std::vector<float> gx[3], gout[3];
                three_ways([&](int k) {
                    gx[k] = x;
                    gout[k] = out0;
                    float* o = in_place ? gx[k].data() : gout[k].data();
                    const int32_t st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, R, H, gx[k].data(), xs, with_res ? res.data() : nullptr, rs,
                                                          w.data(), eps, o, os);
                    CHECK(st == 0, "rms norm: %s", drmas_last_error());
                });
                int bad_bits = 0, bad_tol = 0;
                for (size_t i = 0; i < xr.size(); ++i) bad_bits += !same_bits(&gx[0][i], &xr[i], 4);  // x (added into, padding kept)
                for (size_t i = 0; i < outr.size(); ++i) bad_bits += !same_bits(&gout[0][i], &outr[i], 4);  // out (padding kept)
                for (int64_t r = 0; r < R; ++r)
                    for (int64_t c = 0; c < H; ++c) {
                        const float got = (in_place ? gx[0] : gout[0])[(size_t)(r * os + c)];
                        bad_tol += !close(got, exact[(size_t)(r * H + c)], 1e-30, 1e-6);
                    }
                CHECK(bad_bits == 0 && bad_tol == 0, "rms norm rows %lld hidden %lld residual %d in place %d: %d values differ from the float "
                      "composition, %d from the fp64 one", (long long)R, (long long)H, with_res, in_place, bad_bits, bad_tol);
                for (int k = 1; k < 3; ++k)
                    CHECK(gx[k] == gx[0] && same_bits(gx[k].data(), gx[0].data(), gx[0].size() * 4) &&
                              same_bits(gout[k].data(), gout[0].data(), gout[0].size() * 4),
                          "rms norm hidden %lld: run %d (%s) must match the default bit for bit", (long long)H, k, k == 1 ? "v2" : "1 thread");
                ++cases;
            }
    // eps 0 and a row of zeros: 0 * inf, NaN, as HF's
    {
        std::vector<float> x(5, 0.0f), w(5, 1.0f), out(5, 3.0f);
        const int32_t st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 1, 5, x.data(), 5, nullptr, 0, w.data(), 0.0, out.data(), 5);
        CHECK(st == 0 && isnan(out[0]) && isnan(out[4]), "eps 0 on zeros: %d %g", st, out[0]);
    }
    // errors: named, x and out untouched
    std::vector<float> x(2 * 6, 1.5f), res(2 * 6, 0.25f), w(6, 1.0f), out(2 * 6, -3.0f);
    const std::vector<float> x0 = x, out0 = out;
    struct Bad {
        int32_t dev;
        int64_t rows, hidden, xs, rs, os;
        bool res, null_x, null_w, null_out, out_is_x, res_is_x, res_is_out;
        double eps;
        int32_t code;
        const char* says;
    };
    const Bad bads[] = {
        {DRMAS_DEVICE_CUDA, 2, 6, 6, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_UNSUPPORTED, "CPU only"},
        {7, 2, 6, 6, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_CONFIG, "device"},
        {0, -1, 6, 6, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "rows must be >= 0"},
        {0, 2, 0, 6, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "hidden must be >= 1"},
        {0, 2, 6, 5, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "x_stride (5)"},
        {0, 2, 6, 6, 5, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "residual_stride (5)"},
        {0, 2, 6, 6, 6, 4, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "out_stride (4)"},
        {0, INT64_MAX / 3, 6, 6, 6, 6, true, false, false, false, false, false, false, 1e-6, DRMAS_ERR_SIZE, "overflows"},
        {0, 2, 6, 6, 6, 6, true, false, false, false, false, false, false, NAN, DRMAS_ERR_CONFIG, "eps"},
        {0, 2, 6, 6, 6, 6, true, false, false, false, false, false, false, -1e-6, DRMAS_ERR_CONFIG, "eps"},
        {0, 2, 6, 6, 6, 6, true, true, false, false, false, false, false, 1e-6, DRMAS_ERR_NULL, "x is NULL"},
        {0, 2, 6, 6, 6, 6, true, false, true, false, false, false, false, 1e-6, DRMAS_ERR_NULL, "weight is NULL"},
        {0, 2, 6, 6, 6, 6, true, false, false, true, false, false, false, 1e-6, DRMAS_ERR_NULL, "out is NULL"},
        {0, 2, 6, 6, 6, 7, false, false, false, false, true, false, false, 1e-6, DRMAS_ERR_SIZE, "out is x"},
        {0, 2, 6, 6, 6, 6, true, false, false, false, false, true, false, 1e-6, DRMAS_ERR_CONFIG, "residual must not be x"},
        {0, 2, 6, 6, 6, 6, true, false, false, false, false, false, true, 1e-6, DRMAS_ERR_CONFIG, "residual must not be x or out"},
    };
    for (const Bad& b : bads) {
        float* o = b.null_out ? nullptr : b.out_is_x ? x.data() : out.data();
        const float* r = !b.res ? nullptr : b.res_is_x ? x.data() : b.res_is_out ? out.data() : res.data();
        const int32_t st = drmas_rms_norm_f32(b.dev, b.rows, b.hidden, b.null_x ? nullptr : x.data(), b.xs, r, b.rs,
                                              b.null_w ? nullptr : w.data(), b.eps, o, b.os);
        CHECK(st == b.code && contains(drmas_last_error(), b.says) && contains(drmas_last_error(), "drmas_rms_norm_f32"),
              "rms norm error '%s': %d %s", b.says, st, drmas_last_error());
    }
    CHECK(x == x0 && out == out0, "a failed rms norm must leave x and out untouched");
    CHECK(drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 0, 6, nullptr, 6, nullptr, 0, nullptr, 1e-6, nullptr, 6) == 0, "0 rows are a no-op");
    printf("  rms norm: %d shape cases\n", cases);
}

// silu(g) u in fp64, but where e^-g overflows float (g < -88.7228, where |silu(g)| < 2.6e-37, and
// g = -inf) the documented limit: -0 times u, in float (so +-0 for a finite u, NaN for an infinite one)
static double swiglu_ref(float g, float u) {
    const double gd = g, ud = u;
    if (gd != gd || ud != ud) return NAN;
    if (exp(-gd) >= 3.4028235677973366e38) return -0.0f * u;  // FLT_MAX + half an ulp: rounds to +inf
    const double s = gd == INFINITY ? INFINITY : gd / (1.0 + exp(-gd));
    return s * ud;
}

static bool swiglu_ok(float got, double ref) {
    if (isnan(ref)) return isnan(got);
    if (ref == 0) return got == 0;
    if (fabs(ref) > 3.4028234663852886e38) return got == (float)ref;  // beyond float: the infinity of its sign
    return close(got, ref, 1e-30, 1e-6);
}

static void test_swiglu() {
    // awkward values: both sides of the overflow of e^-g (g = -88.72), denormals, signed zeros, infinities, NaN
    const float G[] = {0.0f, -0.0f, 1e-30f, -1e-30f, 1e-42f, -1e-42f, 1.0f, -1.0f, 0.5f, -0.5f, 5.0f, -5.0f, 16.6f, -16.6f, 20.0f, -20.0f,
                       87.0f, -87.0f, 88.7f, -88.7f, 88.72f, -88.72f, 88.73f, -88.73f, 100.0f, -100.0f, 103.9f, -103.9f, 104.5f, -104.5f,
                       1e10f, -1e10f, 3e38f, -3e38f, INFINITY, -INFINITY, NAN, 1e-3f, -1e-3f, 2.5e-8f};
    const float U[] = {1.0f, -1.0f, 0.5f, -2.0f, 1e-30f, 3e38f, -3e38f, 0.0f, -0.0f, 1e-42f, 7.25f, INFINITY, NAN};
    const int64_t nG = sizeof G / sizeof G[0], nU = sizeof U / sizeof U[0];
    {
        // every pair: row r is G[r] against every U, and the transposed shape
        std::vector<float> gate((size_t)(nG * nU)), up((size_t)(nG * nU)), out((size_t)(nG * nU), -7.0f);
        for (int64_t r = 0; r < nG; ++r)
            for (int64_t c = 0; c < nU; ++c) {
                gate[(size_t)(r * nU + c)] = G[r];
                up[(size_t)(r * nU + c)] = U[c];
            }
        int32_t st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, nG, nU, gate.data(), nU, up.data(), nU, out.data(), nU);
        CHECK(st == 0, "swiglu: %s", drmas_last_error());
        int bad = 0;
        for (size_t i = 0; i < out.size(); ++i)
            if (!swiglu_ok(out[i], swiglu_ref(gate[i], up[i]))) {
                if (++bad <= 5) printf("  swiglu(%g, %g) = %g, want %g\n", gate[i], up[i], out[i], swiglu_ref(gate[i], up[i]));
            }
        CHECK(bad == 0, "swiglu: %d awkward pairs differ from the fp64 composition", bad);
        std::vector<float> outT((size_t)(nG * nU), -7.0f), gT((size_t)(nG * nU)), uT((size_t)(nG * nU));
        for (int64_t r = 0; r < nU; ++r)
            for (int64_t c = 0; c < nG; ++c) {
                gT[(size_t)(r * nG + c)] = G[c];
                uT[(size_t)(r * nG + c)] = U[r];
            }
        st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, nU, nG, gT.data(), nG, uT.data(), nG, outT.data(), nG);
        bad = 0;
        for (int64_t r = 0; r < nU; ++r)
            for (int64_t c = 0; c < nG; ++c) bad += !same_bits(&outT[(size_t)(r * nG + c)], &out[(size_t)(c * nU + r)], 4);
        CHECK(st == 0 && bad == 0, "swiglu: an element's result must not depend on where in the row it lies (%d differ)", bad);
        const float neg_inf_gate = out[(size_t)(35 * nU + 0)];  // silu(-inf) * 1
        CHECK(neg_inf_gate == 0.0f && signbit(neg_inf_gate), "swiglu(-inf, 1) must be -0, got %g", neg_inf_gate);
    }
    // the worst error over a dense sweep of gate values, against the fp64 composition
    {
        const int64_t n = 1 << 16;
        std::vector<float> g((size_t)n), u((size_t)n, 1.0f), out((size_t)n);
        for (int64_t i = 0; i < n; ++i) g[(size_t)i] = -110.0f + 220.0f * (float)i / (float)n;
        drmas_swiglu_f32(DRMAS_DEVICE_CPU, 1, n, g.data(), n, u.data(), n, out.data(), n);
        double worst = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double ref = swiglu_ref(g[(size_t)i], 1.0f);
            if (fabs(ref) > 1e-30) worst = std::max(worst, fabs(out[(size_t)i] - ref) / fabs(ref));
        }
        CHECK(worst <= 1e-6, "swiglu: worst relative error %.3g over [-110, 110]", worst);
        printf("  swiglu: worst relative error %.3g (%.2f float ulps of 2^-24) over [-110, 110]\n", worst, worst * 16777216.0);
    }
    // shapes, strides, in place, v2 = v3, 1 thread = 2
    struct Shape {
        int64_t rows, width;
    };
    const Shape shapes[] = {{1, 1}, {3, 7}, {5, 8}, {4, 13}, {65, 33}, {2, 4099}, {40, 4099}};
    std::mt19937_64 rng(73);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (const Shape& sh : shapes) {
        const int64_t R = sh.rows, W = sh.width, gs = W + 2, us = W + 5, os = W + 1;
        std::vector<float> gate((size_t)(R * gs), 55.0f), up((size_t)(R * us), 66.0f), out0((size_t)(R * os), -7.0f);
        for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < W; ++c) {
                gate[(size_t)(r * gs + c)] = 4.0f * nd(rng);
                up[(size_t)(r * us + c)] = nd(rng);
            }
        std::vector<float> got[3];
        three_ways([&](int k) {
            got[k] = out0;
            const int32_t st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, R, W, gate.data(), gs, up.data(), us, got[k].data(), os);
            CHECK(st == 0, "swiglu: %s", drmas_last_error());
        });
        int bad = 0, pad = 0;
        for (int64_t r = 0; r < R; ++r) {
            for (int64_t c = 0; c < W; ++c)
                bad += !swiglu_ok(got[0][(size_t)(r * os + c)], swiglu_ref(gate[(size_t)(r * gs + c)], up[(size_t)(r * us + c)]));
            for (int64_t c = W; c < os; ++c) pad += got[0][(size_t)(r * os + c)] != -7.0f;
        }
        CHECK(bad == 0 && pad == 0, "swiglu rows %lld width %lld: %d values wrong, %d padding entries written", (long long)R, (long long)W, bad, pad);
        for (int k = 1; k < 3; ++k)
            CHECK(same_bits(got[k].data(), got[0].data(), got[0].size() * 4), "swiglu width %lld: run %d (%s) must match the default bit for bit",
                  (long long)W, k, k == 1 ? "v2" : "1 thread");
        // in place over gate, then over up (the same stride as out): the same bits
        std::vector<float> g2 = gate, u2 = up;
        int32_t st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, R, W, g2.data(), gs, up.data(), us, g2.data(), gs);
        st |= drmas_swiglu_f32(DRMAS_DEVICE_CPU, R, W, gate.data(), gs, u2.data(), us, u2.data(), us);
        int differ = 0;
        for (int64_t r = 0; r < R; ++r)
            for (int64_t c = 0; c < W; ++c)
                differ += !same_bits(&g2[(size_t)(r * gs + c)], &got[0][(size_t)(r * os + c)], 4) +
                          !same_bits(&u2[(size_t)(r * us + c)], &got[0][(size_t)(r * os + c)], 4);
        CHECK(st == 0 && differ == 0, "swiglu width %lld: in place must give the same bits (%d differ)", (long long)W, differ);
    }
    // errors: named, out untouched
    std::vector<float> gate(2 * 6, 1.5f), up(2 * 6, 0.25f), out(2 * 6, -3.0f);
    const std::vector<float> out0 = out, gate0 = gate;
    struct Bad {
        int32_t dev;
        int64_t rows, width, gs, us, os;
        int null_which;  // 1 gate, 2 up, 3 out
        int out_is;      // 1 gate, 2 up
        int32_t code;
        const char* says;
    };
    const Bad bads[] = {
        {DRMAS_DEVICE_CUDA, 2, 6, 6, 6, 6, 0, 0, DRMAS_ERR_UNSUPPORTED, "CPU only"},
        {-1, 2, 6, 6, 6, 6, 0, 0, DRMAS_ERR_CONFIG, "device"},
        {0, -2, 6, 6, 6, 6, 0, 0, DRMAS_ERR_SIZE, "rows must be >= 0"},
        {0, 2, 0, 6, 6, 6, 0, 0, DRMAS_ERR_SIZE, "width must be >= 1"},
        {0, 2, 6, 5, 6, 6, 0, 0, DRMAS_ERR_SIZE, "gate_stride (5)"},
        {0, 2, 6, 6, 3, 6, 0, 0, DRMAS_ERR_SIZE, "up_stride (3)"},
        {0, 2, 6, 6, 6, -6, 0, 0, DRMAS_ERR_SIZE, "out_stride (-6)"},
        {0, INT64_MAX / 4, 6, 6, 6, 6, 0, 0, DRMAS_ERR_SIZE, "overflows"},
        {0, 2, 6, 6, 6, 6, 1, 0, DRMAS_ERR_NULL, "gate is NULL"},
        {0, 2, 6, 6, 6, 6, 2, 0, DRMAS_ERR_NULL, "up is NULL"},
        {0, 2, 6, 6, 6, 6, 3, 0, DRMAS_ERR_NULL, "out is NULL"},
        {0, 1, 6, 6, 6, 7, 0, 1, DRMAS_ERR_SIZE, "out is gate"},
        {0, 1, 6, 6, 8, 7, 0, 2, DRMAS_ERR_SIZE, "out is up"},
    };
    for (const Bad& b : bads) {
        float* o = b.null_which == 3 ? nullptr : b.out_is == 1 ? gate.data() : b.out_is == 2 ? up.data() : out.data();
        const int32_t st = drmas_swiglu_f32(b.dev, b.rows, b.width, b.null_which == 1 ? nullptr : gate.data(), b.gs,
                                            b.null_which == 2 ? nullptr : up.data(), b.us, o, b.os);
        CHECK(st == b.code && contains(drmas_last_error(), b.says) && contains(drmas_last_error(), "drmas_swiglu_f32"),
              "swiglu error '%s': %d %s", b.says, st, drmas_last_error());
    }
    CHECK(out == out0 && gate == gate0, "a failed swiglu must leave its output untouched");
}

// ---- sampling: an independent fp64 reference (libm's exp, full sorts, a stable sort for top-p)
struct RefDraw {
    int64_t token;
    double logprob;  // NaN for a row that is no distribution
    bool near;       // the target or the top-p mass lies within 1e-12 (relative) of a boundary
};

static RefDraw ref_sample(const float* z, int64_t V, double T, int64_t K, double P, double u) {
    std::vector<float> s((size_t)V);
    for (int64_t j = 0; j < V; ++j) s[(size_t)j] = (T == 0 || T == 1) ? z[j] : z[j] / (float)T;
    float m = -INFINITY;
    bool nan = false;
    for (float v : s) {
        nan |= v != v;
        if (v > m) m = v;
    }
    int64_t first = 0;
    for (int64_t j = 0; j < V; ++j)
        if (s[(size_t)j] == m) {
            first = j;
            break;
        }
    if (nan || m == INFINITY || m == -INFINITY) return {first, NAN, false};
    std::vector<double> e((size_t)V);
    double sum = 0;
    for (int64_t j = 0; j < V; ++j) sum += (e[(size_t)j] = exp((double)s[(size_t)j] - (double)m));
    if (T == 0) return {first, -log(sum), false};
    std::vector<char> keep((size_t)V, 1);
    if (K > 0 && K < V) {
        std::vector<float> sorted = s;
        std::sort(sorted.begin(), sorted.end(), std::greater<float>());
        for (int64_t j = 0; j < V; ++j) keep[(size_t)j] = s[(size_t)j] >= sorted[(size_t)(K - 1)];
    }
    bool near = false;
    if (P < 1) {
        std::vector<int64_t> idx;
        double zk = 0;
        for (int64_t j = 0; j < V; ++j)
            if (keep[(size_t)j]) {
                idx.push_back(j);
                zk += e[(size_t)j];
            }
        std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) { return s[(size_t)a] > s[(size_t)b]; });
        double mass = 0;
        for (int64_t j : idx) {
            if (e[(size_t)j] > 0 && fabs(mass - P) <= 1e-12 * P) near = true;
            if (!(mass < P)) keep[(size_t)j] = 0;
            mass += e[(size_t)j] / zk;
        }
    }
    std::vector<double> cdf((size_t)V);
    double run = 0;
    for (int64_t j = 0; j < V; ++j) cdf[(size_t)j] = run += keep[(size_t)j] ? e[(size_t)j] : 0.0;
    const double total = run, target = u * total;
    int64_t t = -1;
    for (int64_t j = 0; j < V && t < 0; ++j)
        if (cdf[(size_t)j] > target) t = j;
    for (int64_t j = 0; j < V && t < 0; ++j)
        if (cdf[(size_t)j] >= total) t = j;
    // boundaries next to the target, other than the CDF's start (0) and end (the total), where the
    // choice is not in doubt
    for (int64_t j : {t - 1, t})
        if (j >= 0 && cdf[(size_t)j] > 0 && cdf[(size_t)j] < total && fabs(cdf[(size_t)j] - target) <= 1e-12 * total) near = true;
    return {t, ((double)s[(size_t)t] - (double)m) - log(sum), near};
}

// Logits of row r: kind 0 Gaussian, 1 with -inf entries, 2 exact ties (quantised, several maxima),
// 3 one finite logit among -inf
static void sample_logits(float* z, int64_t V, int kind, std::mt19937_64& rng) {
    std::normal_distribution<float> nd(0.0f, 3.0f);
    for (int64_t j = 0; j < V; ++j) {
        float v = nd(rng);
        if (kind == 1 && rng() % 4 == 0) v = -INFINITY;
        if (kind == 2) v = std::min(roundf(v), 4.0f);  // many ties, the maximum 4 several times in larger rows
        if (kind == 3) v = -INFINITY;
        z[j] = v;
    }
    if (kind == 3) z[(int64_t)(rng() % (uint64_t)V)] = 0.5f;
    if (kind == 2) {
        // a count of equal maxima that is a multiple of 10 would put top-p 0.3 and 0.9 exactly on a
        // boundary (3 of 10 equal probabilities): one fewer then
        int64_t n = 0, last = 0;
        for (int64_t j = 0; j < V; ++j)
            if (z[j] == 4.0f) ++n, last = j;
        if (n > 0 && n % 10 == 0) z[last] = 3.0f;
    }
}

static void test_sample() {
    const int64_t vocabs[] = {1, 2, 7, 513, 4099}, rowss[] = {1, 3, 65};
    const double temps[] = {0.0, 0.6, 1.0, 1.7}, tops_p[] = {1.0, 0.9, 0.3, 1e-9};
    std::mt19937_64 rng(79);
    std::uniform_real_distribution<double> ud(0.0, 1.0);
    long calls = 0, draws = 0, skipped = 0, bad_tok = 0, bad_lp = 0, not_same = 0;
    for (int64_t V : vocabs)
        for (int64_t R : rowss) {
            const int64_t ls = V + 3;  // a stride wider than the row
            std::vector<float> z((size_t)(R * ls), NAN);  // the padding is NaN: reading it would show
            std::vector<double> u((size_t)R);
            for (int64_t r = 0; r < R; ++r) {
                sample_logits(z.data() + r * ls, V, (int)(r % 4), rng);
                u[(size_t)r] = r % 5 == 0 ? 0.0 : r % 5 == 1 ? 1.0 - 0x1p-53 : ud(rng);
            }
            for (double T : temps)
                for (int64_t K : {(int64_t)0, (int64_t)1, (int64_t)5, V - 1, V, V + 3})  // V - 1 of 4099: nth_element, not the heap
                    for (double P : tops_p) {
                        if (T == 0 && (K != 0 || P != 1.0)) continue;  // greedy ignores the filters: once is enough
                        std::vector<int64_t> tok[3];
                        std::vector<float> lp[3];
                        three_ways([&](int k) {
                            tok[k].assign((size_t)R, -5);
                            lp[k].assign((size_t)R, -5.0f);
                            const int32_t st = drmas_sample_f32(DRMAS_DEVICE_CPU, R, V, z.data(), ls, T, K, P, u.data(), tok[k].data(),
                                                                lp[k].data());
                            CHECK(st == 0, "sample: %s", drmas_last_error());
                            ++calls;
                        });
                        for (int64_t r = 0; r < R; ++r) {
                            const RefDraw ref = ref_sample(z.data() + r * ls, V, T, K, P, u[(size_t)r]);
                            ++draws;
                            if (ref.near) {
                                ++skipped;
                                continue;
                            }
                            const int64_t t = tok[0][(size_t)r];
                            const float l = lp[0][(size_t)r];
                            if (t != ref.token && ++bad_tok <= 5)
                                printf("  V %lld T %g K %lld P %g row %lld (u %.17g): token %lld, want %lld\n", (long long)V, T, (long long)K, P,
                                       (long long)r, u[(size_t)r], (long long)t, (long long)ref.token);
                            const bool lp_ok = isnan(ref.logprob) ? isnan(l) : close(l, ref.logprob, 1e-6, 1e-6);
                            if (!lp_ok && ++bad_lp <= 5)
                                printf("  V %lld T %g K %lld P %g row %lld: logprob %.9g, want %.9g\n", (long long)V, T, (long long)K, P,
                                       (long long)r, l, ref.logprob);
                        }
                        for (int k = 1; k < 3; ++k)
                            not_same += tok[k] != tok[0] || !same_bits(lp[k].data(), lp[0].data(), lp[0].size() * 4);
                    }
        }
    CHECK(bad_tok == 0 && bad_lp == 0, "sample: %ld tokens and %ld log-probs of %ld draws differ from the fp64 reference", bad_tok, bad_lp, draws);
    CHECK(not_same == 0, "sample: %ld calls differ between the default loops, v2 and 1 thread", not_same);
    CHECK(skipped * 100 < draws, "sample: %ld of %ld draws were near-ties (the cases are built to have few)", skipped, draws);
    printf("  sample: %ld draws in %ld calls against the fp64 reference, %ld near-ties skipped\n", draws, calls, skipped);

    // rows that are no distribution: log-prob NaN, the first largest non-NaN value's index, status OK;
    // the finite row beside them is unaffected
    {
        const int64_t V = 9;
        const float N = NAN, I = INFINITY;
        const float rows[6][9] = {
            {0.5f, 1.0f, N, 3.0f, 0.0f, 3.0f, -1.0f, 2.0f, 0.0f},  // NaN: token 3
            {-I, -I, -I, -I, -I, -I, -I, -I, -I},                   // all -inf: token 0
            {1.0f, 2.0f, 0.0f, 0.0f, I, 0.0f, I, 0.0f, 0.0f},       // +inf: token 4
            {N, N, N, N, N, N, N, N, N},                            // all NaN: token 0
            {0.0f, 1.0f, 3e38f, 2.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f},  // finite, but / 0.6 overflows: token 2
            {0.0f, 1.0f, 2.0f, 0.0f, 0.5f, 0.0f, 0.0f, 0.0f, 0.0f},  // a distribution
        };
        const double uu[6] = {0.5, 0.5, 0.5, 0.5, 0.5, 0.5};
        for (double T : {0.0, 0.6}) {
            int64_t tok[6];
            float lp[6];
            const int32_t st = drmas_sample_f32(DRMAS_DEVICE_CPU, 6, V, &rows[0][0], V, T, 0, 1.0, uu, tok, lp);
            CHECK(st == 0 && tok[0] == 3 && isnan(lp[0]) && tok[1] == 0 && isnan(lp[1]) && tok[2] == 4 && isnan(lp[2]) && tok[3] == 0 &&
                      isnan(lp[3]),
                  "T %g: rows without a distribution: %d, tokens %lld %lld %lld %lld", T, st, (long long)tok[0], (long long)tok[1],
                  (long long)tok[2], (long long)tok[3]);
            CHECK(T == 0 ? (tok[4] == 2 && !isnan(lp[4])) : (tok[4] == 2 && isnan(lp[4])), "T %g: 3e38 row: token %lld logprob %g", T,
                  (long long)tok[4], lp[4]);
            const RefDraw ref = ref_sample(rows[5], V, T, 0, 1.0, 0.5);
            CHECK(tok[5] == ref.token && close(lp[5], ref.logprob, 1e-6, 1e-6), "T %g: the finite row: %lld %g", T, (long long)tok[5], lp[5]);
        }
    }
    // greedy takes no uniforms; ties at the maximum give the first; top-p 1e-9 keeps only the first maximum
    {
        const float z[6] = {1.0f, 3.0f, -INFINITY, 3.0f, 2.0f, 3.0f};
        int64_t tok = -1;
        float lp = 0;
        int32_t st = drmas_sample_f32(DRMAS_DEVICE_CPU, 1, 6, z, 6, 0.0, 0, 1.0, nullptr, &tok, &lp);
        CHECK(st == 0 && tok == 1, "greedy without uniforms: %d %lld %s", st, (long long)tok, drmas_last_error());
        for (double uu : {0.0, 0.5, 1.0 - 0x1p-53}) {
            st = drmas_sample_f32(DRMAS_DEVICE_CPU, 1, 6, z, 6, 1.0, 0, 1e-9, &uu, &tok, &lp);
            CHECK(st == 0 && tok == 1, "top-p 1e-9 among three equal maxima keeps the first: %lld", (long long)tok);
            st = drmas_sample_f32(DRMAS_DEVICE_CPU, 1, 6, z, 6, 1.0, 3, 1.0, &uu, &tok, &lp);
            CHECK(st == 0 && (tok == 1 || tok == 3 || tok == 5), "top-k 3: only the maxima: %lld", (long long)tok);
        }
        // u = 0 draws the first token of positive probability, never the -inf one before it
        const float z2[4] = {-INFINITY, -INFINITY, 0.0f, 1.0f};
        const double u0 = 0.0;
        st = drmas_sample_f32(DRMAS_DEVICE_CPU, 1, 4, z2, 4, 0.6, 0, 1.0, &u0, &tok, &lp);
        CHECK(st == 0 && tok == 2, "u = 0 skips zero-probability tokens: %lld", (long long)tok);
    }
    // errors: named, tokens and logprobs untouched
    const int64_t V = 5;
    std::vector<float> z(3 * V, 0.5f);
    std::vector<double> uu = {0.1, 0.2, 0.3};
    std::vector<int64_t> tok(3, -5);
    std::vector<float> lp(3, -5.0f);
    struct Bad {
        int32_t dev;
        int64_t rows, vocab, stride;
        double T;
        int64_t K;
        double P;
        int null_which;  // 1 logits, 2 uniforms, 3 tokens, 4 logprobs
        int bad_u;       // 1: uniforms[1] = 1, 2: uniforms[2] = -0.1, 3: uniforms[0] = NaN
        int32_t code;
        const char* says;
    };
    const Bad bads[] = {
        {DRMAS_DEVICE_CUDA, 3, V, V, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_UNSUPPORTED, "CPU only"},
        {2, 3, V, V, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_CONFIG, "device"},
        {0, -1, V, V, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_SIZE, "rows must be >= 0"},
        {0, 3, 0, V, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_SIZE, "vocab must be in [1, 2^31 - 1]"},
        {0, 3, (int64_t)1 << 31, (int64_t)1 << 31, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_SIZE, "vocab must be in [1, 2^31 - 1]"},
        {0, 3, V, V - 1, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_SIZE, "logits_stride (4)"},
        {0, INT64_MAX / 4, V, V, 1.0, 0, 1.0, 0, 0, DRMAS_ERR_SIZE, "overflows"},
        {0, 3, V, V, NAN, 0, 1.0, 0, 0, DRMAS_ERR_CONFIG, "temperature"},
        {0, 3, V, V, -0.5, 0, 1.0, 0, 0, DRMAS_ERR_CONFIG, "temperature"},
        {0, 3, V, V, INFINITY, 0, 1.0, 0, 0, DRMAS_ERR_CONFIG, "temperature"},
        {0, 3, V, V, 1.0, -1, 1.0, 0, 0, DRMAS_ERR_CONFIG, "top_k"},
        {0, 3, V, V, 1.0, 0, 0.0, 0, 0, DRMAS_ERR_CONFIG, "top_p"},
        {0, 3, V, V, 1.0, 0, 1.5, 0, 0, DRMAS_ERR_CONFIG, "top_p"},
        {0, 3, V, V, 1.0, 0, NAN, 0, 0, DRMAS_ERR_CONFIG, "top_p"},
        {0, 3, V, V, 1.0, 0, 1.0, 1, 0, DRMAS_ERR_NULL, "logits is NULL"},
        {0, 3, V, V, 0.7, 0, 1.0, 2, 0, DRMAS_ERR_NULL, "uniforms is NULL"},
        {0, 3, V, V, 1.0, 0, 1.0, 3, 0, DRMAS_ERR_NULL, "tokens is NULL"},
        {0, 3, V, V, 1.0, 0, 1.0, 4, 0, DRMAS_ERR_NULL, "logprobs is NULL"},
        {0, 3, V, V, 1.0, 0, 1.0, 0, 1, DRMAS_ERR_RANGE, "uniforms[1] = 1"},
        {0, 3, V, V, 0.5, 2, 0.9, 0, 2, DRMAS_ERR_RANGE, "uniforms[2] = -0.1"},
        {0, 3, V, V, 0.0, 0, 1.0, 0, 3, DRMAS_ERR_RANGE, "uniforms[0] = nan"},
    };
    for (const Bad& b : bads) {
        std::vector<double> ub = uu;
        if (b.bad_u == 1) ub[1] = 1.0;
        if (b.bad_u == 2) ub[2] = -0.1;
        if (b.bad_u == 3) ub[0] = NAN;
        const int32_t st = drmas_sample_f32(b.dev, b.rows, b.vocab, b.null_which == 1 ? nullptr : z.data(), b.stride, b.T, b.K, b.P,
                                            b.null_which == 2 ? nullptr : ub.data(), b.null_which == 3 ? nullptr : tok.data(),
                                            b.null_which == 4 ? nullptr : lp.data());
        CHECK(st == b.code && contains(drmas_last_error(), b.says) && contains(drmas_last_error(), "drmas_sample_f32"),
              "sample error '%s': %d %s", b.says, st, drmas_last_error());
    }
    CHECK(tok == std::vector<int64_t>(3, -5) && lp == std::vector<float>(3, -5.0f), "a failed sample must leave tokens and logprobs untouched");
    CHECK(drmas_sample_f32(DRMAS_DEVICE_CPU, 0, V, nullptr, V, 1.0, 0, 1.0, nullptr, nullptr, nullptr) == 0, "0 rows are a no-op");
}

// Every typed pointer argument of every entry point, 1 byte (and half its alignment) off: refused by
// name, nothing written (native/test/align_cases.h). Without the check the CPU would run them (x86
// loads misaligned floats; the compiler may not) and write the outputs.
static void test_alignment() {
    struct HostMemory {
        char* alloc(size_t n) { return (char*)aligned_alloc(64, (n + 63) / 64 * 64); }
        void put(char* d, const char* s, size_t n) { memcpy(d, s, n); }
        void get(char* d, const char* s, size_t n) { memcpy(d, s, n); }
        void release(char* p) { free(p); }
    } mem;
    const int calls = align_cases::run(DRMAS_DEVICE_CPU, mem, [](bool ok, const char* fmt, auto... a) { CHECK(ok, fmt, a...); });
    CHECK(calls > 100, "only %d misaligned calls made", calls);
    // the device comes first: a CUDA call without CUDA says so, whatever the pointers
    if (!drmas_cuda_available()) {
        alignas(8) float buf[8] = {0};
        int64_t cnt[1];
        double mean[1], m2[1];
        const int32_t ids[1] = {0};
        const int32_t st = drmas_segment_stats_f32(DRMAS_DEVICE_CUDA, 1, (const float*)(const void*)((const char*)buf + 1), ids, 1, 1, cnt,
                                                   mean, m2, nullptr, nullptr);
        CHECK(st == DRMAS_ERR_UNSUPPORTED, "CUDA without a device, misaligned values: %d %s", st, drmas_last_error());
    }
    // a misaligned array of no elements is refused too (the rule is on the pointer, not on what is read)
    {
        alignas(8) unsigned char raw[16] = {0};
        const int32_t st = drmas_broadcast_rows_f32(DRMAS_DEVICE_CPU, 0, (const float*)(const void*)(raw + 2),
                                                    (const int64_t*)(const void*)raw, 0, nullptr, nullptr);
        CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), "drmas_broadcast_rows_f32: row_values (0x") &&
                  contains(drmas_last_error(), "is not aligned to 4 bytes (a float array must start on a multiple of 4)"),
              "empty misaligned row_values: %d %s", st, drmas_last_error());
    }
    printf("  alignment: %d misaligned calls refused\n", calls);
}

// The decoding step's in-place rules: exact in place works, any other sharing between an array the call
// writes and another is refused by name (a shifted out would overwrite rows before they are read, and
// rows run in parallel), and nothing is written. Arrays share one arena so that the overlaps are exact.
static void test_step_overlaps() {
    alignas(64) float arena[512];
    auto reset = [&]() {
        for (int i = 0; i < 512; ++i) arena[i] = 0.125f * (float)(i % 13) - 0.5f;
    };
    auto refused = [&](int32_t st, const char* says, const char* what) {
        CHECK(st == DRMAS_ERR_CONFIG && contains(drmas_last_error(), says), "%s: %d %s", what, st, drmas_last_error());
    };
    float* const A = arena;
    // ---- RMSNorm: 2 rows of 6 at stride 6 (x spans 12 floats)
    {
        float* x = A;
        const float* w = A + 200;
        struct Case {
            const char* what;
            float* out;
            int64_t os;
            const float* res;
            const char* says;
        } cases[] = {
            {"out one float into x", x + 1, 6, nullptr, "out overlaps x without being x"},
            {"out on x's last float", x + 11, 6, nullptr, "out overlaps x without being x"},
            {"x and out interleaved row by row (extents share, elements do not)", x + 6, 12, nullptr, "out overlaps x without being x"},
            {"residual into x", A + 100, 6, x + 3, "residual overlaps x"},
            {"residual into out", A + 100, 6, A + 105, "residual overlaps out"},
            {"weight inside out", A + 195, 6, nullptr, "weight overlaps out"},
        };
        for (const Case& k : cases) {
            reset();
            float before[512];
            memcpy(before, arena, sizeof arena);
            const int64_t xs = k.os == 12 ? 12 : 6;
            const int32_t st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 2, 6, x, xs, k.res, 6, w, 1e-6, k.out, k.os);
            refused(st, k.says, k.what);
            CHECK(memcmp(before, arena, sizeof arena) == 0, "rms norm, %s: memory written", k.what);
        }
        // weight inside x: refused when the residual is added into x, accepted when x is only read
        reset();
        int32_t st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 2, 6, x, 6, A + 100, 6, x + 2, 1e-6, A + 150, 6);
        refused(st, "weight overlaps x", "rms norm weight inside x with a residual");
        reset();
        st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 2, 6, x, 6, nullptr, 6, x + 2, 1e-6, A + 150, 6);
        CHECK(st == DRMAS_OK, "rms norm weight inside x, no residual (x only read): %d %s", st, drmas_last_error());
        // adjacent is not overlapping; exact in place gives the separate output's bits
        reset();
        st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 2, 6, x, 6, A + 12, 6, w, 1e-6, A + 24, 6);
        CHECK(st == DRMAS_OK, "rms norm with residual and out right after x: %d %s", st, drmas_last_error());
        float sep[12];
        memcpy(sep, A + 24, sizeof sep);
        reset();
        st = drmas_rms_norm_f32(DRMAS_DEVICE_CPU, 2, 6, x, 6, A + 12, 6, w, 1e-6, x, 6);
        CHECK(st == DRMAS_OK && memcmp(sep, x, sizeof sep) == 0, "rms norm in place: %d %s", st, drmas_last_error());
    }
    // ---- SwiGLU: 2 rows of 6 at stride 6; gate and up only read, so they may share memory
    {
        float *g = A, *u = A + 32;
        struct Case {
            const char* what;
            const float *gate, *up;
            float* out;
            const char* says;
        } cases[] = {
            {"out one float into gate", g, u, g + 1, "out overlaps gate without being gate"},
            {"out three floats before up's end", g, u, u + 9, "out overlaps up without being up"},
            {"out is gate, up shifted into gate", g, g + 2, g, "out overlaps up without being up"},
        };
        for (const Case& k : cases) {
            reset();
            float before[512];
            memcpy(before, arena, sizeof arena);
            const int32_t st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, 2, 6, k.gate, 6, k.up, 6, k.out, 6);
            refused(st, k.says, k.what);
            CHECK(memcmp(before, arena, sizeof arena) == 0, "swiglu, %s: memory written", k.what);
        }
        reset();
        int32_t st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, 2, 6, g, 6, u, 6, A + 64, 6);
        float sep[12];
        memcpy(sep, A + 64, sizeof sep);
        CHECK(st == DRMAS_OK, "swiglu apart: %d %s", st, drmas_last_error());
        st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, 2, 6, g, 6, u, 6, g, 6);
        CHECK(st == DRMAS_OK && memcmp(sep, g, sizeof sep) == 0, "swiglu in place over gate: %d %s", st, drmas_last_error());
        reset();
        st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, 2, 6, g, 6, u, 6, u, 6);
        CHECK(st == DRMAS_OK && memcmp(sep, u, sizeof sep) == 0, "swiglu in place over up: %d %s", st, drmas_last_error());
        reset();
        st = drmas_swiglu_f32(DRMAS_DEVICE_CPU, 2, 6, g, 6, g + 3, 6, A + 64, 6);
        CHECK(st == DRMAS_OK, "swiglu with gate and up sharing memory: %d %s", st, drmas_last_error());
    }
    // ---- the sampler: 2 rows of 5 logits (10 floats); tokens are int64, so 8-byte multiples
    {
        const float* z = A;
        double* uni = (double*)(void*)(A + 160);
        auto tok_in = [&](int f) { return (int64_t*)(void*)(A + f); };
        struct Case {
            const char* what;
            const double* u;
            int64_t* tok;
            float* lp;
            const char* says;
        } cases[] = {
            {"tokens on the second row's logits", uni, tok_in(6), A + 100, "tokens overlaps logits"},
            {"logprobs on the last logit", uni, tok_in(100), A + 9, "logprobs overlaps logits"},
            {"tokens on the uniforms", uni, (int64_t*)(void*)(uni + 1), A + 100, "tokens overlaps uniforms"},
            {"tokens and logprobs", uni, tok_in(100), A + 102, "tokens and logprobs overlap"},
        };
        for (const Case& k : cases) {
            reset();
            uni[0] = 0.25, uni[1] = 0.75;
            float before[512];
            memcpy(before, arena, sizeof arena);
            const int32_t st = drmas_sample_f32(DRMAS_DEVICE_CPU, 2, 5, z, 5, 1.0, 0, 1.0, k.u, k.tok, k.lp);
            refused(st, k.says, k.what);
            CHECK(memcmp(before, arena, sizeof arena) == 0, "sample, %s: memory written", k.what);
        }
        reset();
        uni[0] = 0.25, uni[1] = 0.75;
        const int32_t st = drmas_sample_f32(DRMAS_DEVICE_CPU, 2, 5, z, 5, 1.0, 0, 1.0, uni, tok_in(10), A + 14);
        CHECK(st == DRMAS_OK, "sample with tokens and logprobs right after the logits: %d %s", st, drmas_last_error());
    }
    // ---- the attention: 2 rows, 2 heads on 1 kv head of 4; qkv [2 x 16], caches [2 x 16], out [2 x 8]
    {
        float *qkv = A, *kc = A + 32, *vc = A + 64, *out = A + 96, *cs = A + 112, *sn = A + 120, *qn = A + 128, *kn = A + 132;
        uint8_t* mask = (uint8_t*)(void*)(A + 140);  // any bytes are a mask
        auto call = [&](float* q, float* k, float* v, float* o, const float* c, const uint8_t* m) {
            return drmas_decode_attention_f32(DRMAS_DEVICE_CPU, 2, 2, 1, 4, q, 16, qn, kn, 1e-6, c, sn, k, v, 16, 4, 1, 2, m, 0.5, o);
        };
        struct Case {
            const char* what;
            float *q, *k, *v, *o;
            const float* c;
            const uint8_t* m;
            const char* says;
        } cases[] = {
            {"out inside qkv", qkv, kc, vc, qkv + 20, cs, mask, "qkv and out overlap"},
            {"the same cache for keys and values", qkv, kc, kc, out, cs, mask, "k_cache and v_cache overlap"},
            {"v_cache one float into k_cache", qkv, kc, kc + 31, out, cs, mask, "k_cache and v_cache overlap"},
            {"out on cos", qkv, kc, vc, cs - 4, cs, mask, "out overlaps cos"},
            {"k_cache on q_norm", qkv, qn - 2, vc, out, cs, mask, "k_cache overlaps q_norm"},
            {"qkv on the mask", (float*)(void*)mask, kc, vc, out, cs, mask, "qkv overlaps mask"},
        };
        for (const Case& k : cases) {
            reset();
            float before[512];
            memcpy(before, arena, sizeof arena);
            const int32_t st = call(k.q, k.k, k.v, k.o, k.c, k.m);
            refused(st, k.says, k.what);
            CHECK(memcmp(before, arena, sizeof arena) == 0, "decode attention, %s: memory written", k.what);
        }
        reset();
        for (int i = 0; i < 8; ++i) cs[i] = 1.0f, sn[i] = 0.0f;
        const int32_t st = call(qkv, kc, vc, out, cs, mask);
        CHECK(st == DRMAS_OK, "decode attention, arrays side by side: %d %s", st, drmas_last_error());
    }
}

int main() {
    printf("libdrmas %s, CUDA compiled %d, available %d, CPU threads %d\n", drmas_version(), drmas_cuda_compiled(), drmas_cuda_available(), drmas_get_num_threads());
    test_hand_example();
    test_inflation_population();
    test_layout_invariance();
    test_threads_agree();
    test_constant_segments();
    test_errors();
    test_parallel_errors();
    test_small_team();
    test_parallel_bad_alloc();
    test_signed_zero();
    test_sorted_path_matches_other_paths();
    test_sorted_run_map();
    test_sorted_path_shapes();
    test_isa_identical();
    test_sorted_threads();
    test_sorted_scalar_rows();
    test_trusted_entry();
    test_partition_path();
    test_partition_run_loop();
    test_workspace();
    test_thread_tables_memory();
    test_broadcast();
    test_loss_identities();
    test_loss_float_range();
    test_loss_vector_matches_scalar();
    test_loss_vector_edges();
    test_loss_nan_valid_token();
    test_loss_exp_exact();
    test_lmhead();
    test_lmhead_isa_identical();
    test_lmhead_extreme_logits();
    test_lmhead_bf16();
    test_decode_attention();
    test_decode_helper();
    test_rms_norm();
    test_swiglu();
    test_sample();
    test_abi_table();
    test_alignment();
    test_step_overlaps();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
