// bench_adv.cpp — a driver for measuring the CPU advantage kernel outside the JVM, mainly
// under `valgrind --tool=callgrind`, whose instruction counts are repeatable on a shared,
// noisy machine where wall time is not. Not a test (no ctest entry): it builds rows as
// bench/.../AdvantageBench does (grouped by uid, 8 trajectories per uid of 1 or 2 turns
// (2 with probability 3/4), solver and verifier interleaved, scores uniform in [0, 1)) and
// calls drmas_advantage_f32 in mode drmas with trajectory pooling.
//
//   bench_adv [rows=1048576] [grouped|random|fixed] [threads=1] [calls=1] [validating|trusted] [drmas|grpo]
// (fixed: grouped, every trajectory of 2 turns, so every uid run has 32 rows: branch-predictable)
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=drmas_advantage_f32 \
//       build/bench_adv 1048576 grouped 1 1
// (trusted: drmas_advantage_trusted_f32, toggled as such under callgrind; grpo: vanilla GRPO, the
// paper's baseline — the group's mean and std over trajectory mean scores, the trajectory's mean
// score as the numerator)
// Prints the wall time per call (min and mean over calls) and a checksum of the advantages.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "drmas.h"

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 1 << 20;
    const std::string layout = argc > 2 ? argv[2] : "grouped";
    const int threads = argc > 3 ? atoi(argv[3]) : 1;
    const int calls = argc > 4 ? atoi(argv[4]) : 1;
    const bool trusted = argc > 5 && strcmp(argv[5], "trusted") == 0;
    const bool grpo = argc > 6 && strcmp(argv[6], "grpo") == 0;
    if (argc > 6 && !grpo && strcmp(argv[6], "drmas") != 0) {
        fprintf(stderr, "bench_adv: mode '%s' is not one of drmas, grpo\n", argv[6]);
        return 2;
    }
    std::vector<float> s(n);
    std::vector<int32_t> uid(n), traj(n), agent(n);
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<float> score(0.0f, 1.0f);
    std::uniform_int_distribution<int> four(0, 3);
    int64_t i = 0;
    int32_t u = 0, t = 0;
    while (i < n) {
        for (int j = 0; j < 8 && i < n; ++j, ++t) {
            const int turns = layout == "fixed" ? 2 : four(rng) == 0 ? 1 : 2;
            for (int turn = 0; turn < turns; ++turn)
                for (int k = 0; k < 2 && i < n; ++k, ++i) {
                    uid[i] = u;
                    traj[i] = t;
                    agent[i] = k;
                    s[i] = score(rng);
                }
        }
        ++u;
    }
    if (layout == "random") {
        for (int64_t a = n - 1; a > 0; --a) {
            const int64_t b = std::uniform_int_distribution<int64_t>(0, a)(rng);
            std::swap(s[a], s[b]);
            std::swap(uid[a], uid[b]);
            std::swap(traj[a], traj[b]);
            std::swap(agent[a], agent[b]);
        }
    }
    const int32_t U = *std::max_element(uid.begin(), uid.end()) + 1;
    const int32_t T = *std::max_element(traj.begin(), traj.end()) + 1;
    drmas_norm_config c;
    memset(&c, 0, sizeof c);
    c.mean_from = grpo ? DRMAS_FROM_GROUP : DRMAS_FROM_AGENT;
    c.std_from = grpo ? DRMAS_FROM_GROUP : DRMAS_FROM_AGENT;
    c.numerator = grpo ? DRMAS_NUMERATOR_TRAJECTORY : DRMAS_NUMERATOR_ROW;
    c.global_pooling = DRMAS_POOL_TRAJECTORIES;
    c.singleton = DRMAS_SINGLETON_FALLBACK;
    c.ddof = 1;
    c.scale_by_std = 1;
    c.eps = 1e-6;
    drmas_set_num_threads(threads);
    std::vector<float> out(n, 0.0f);
    double best = 1e30, total = 0;
    for (int r = 0; r < calls; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        const int st = (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(
            DRMAS_DEVICE_CPU, &c, n, s.data(), uid.data(), traj.data(), agent.data(), U, T, 2, out.data(), nullptr, nullptr);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (st != 0) {
            fprintf(stderr, "error %d: %s\n", st, drmas_last_error());
            return 1;
        }
        best = std::min(best, ms);
        total += ms;
    }
    double sum = 0;
    for (float v : out) sum += v * v;
    printf("%s rows %lld %s threads %d: %.3f ms/call (min of %d; mean %.3f), %.2f GB/s at 20 B/row, checksum %.6f\n",
           grpo ? "grpo" : "drmas", (long long)n, layout.c_str(), threads, best, calls, total / calls, 20.0 * n / best / 1e6, sum);
    return 0;
}
