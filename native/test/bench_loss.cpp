// bench_loss.cpp — a driver for measuring the CPU clipped-loss kernel outside the JVM, mainly under
// `valgrind --tool=callgrind`, whose instruction counts are repeatable on a shared, noisy machine
// where wall time is not. Not a test (no ctest entry): it builds tokens as
// bench/.../ClippedLossBench does (rows of 1-512 tokens, 10% masked, logp = -|N(0, 1.5^2)|, old logp
// = logp + N(0, 0.2^2), one N(0, 1) advantage a row, token-mean) and calls drmas_clipped_loss_f32
// (or, with `rows`, drmas_clipped_loss_rows_f32).
//
//   bench_loss [tokens=1048576] [threads=1] [calls=1] [tokens|rows]
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=drmas_clipped_loss_f32 \
//       build/bench_loss 1048576 1 1
// Prints the wall time per call (min and mean over calls) and the loss.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <vector>

#include "drmas.h"

int main(int argc, char** argv) {
    const int64_t n = argc > 1 ? atoll(argv[1]) : 1 << 20;
    const int threads = argc > 2 ? atoi(argv[2]) : 1;
    const int calls = argc > 3 ? atoi(argv[3]) : 1;
    const bool per_row = argc > 4 && strcmp(argv[4], "rows") == 0;
    drmas_set_num_threads(threads);
    std::mt19937_64 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<int64_t> off{0};
    while (off.back() < n) off.push_back(std::min<int64_t>(n, off.back() + 1 + (int64_t)(rng() % 512)));
    const int64_t R = (int64_t)off.size() - 1;
    std::vector<float> lp(n), old(n), adv(n), grad(n), row_adv(R);
    std::vector<uint8_t> mask(n);
    int64_t valid = 0;
    for (int64_t r = 0; r < R; ++r) {
        row_adv[r] = nd(rng);
        for (int64_t t = off[r]; t < off[r + 1]; ++t) adv[t] = row_adv[r];
    }
    for (int64_t t = 0; t < n; ++t) {
        lp[t] = -fabsf(1.5f * nd(rng));
        old[t] = lp[t] + 0.2f * nd(rng);
        mask[t] = rng() % 10 != 0;
        valid += mask[t];
    }
    const drmas_loss_config c{0.2, 0.28, 0.0, 0.0, (double)std::max<int64_t>(1, valid), DRMAS_KL_NONE, 0};
    double sums[DRMAS_LOSS_SUMS];
    double best = 1e300, total = 0;
    for (int k = 0; k < calls; ++k) {
        const auto t0 = std::chrono::steady_clock::now();
        const int st = per_row ? drmas_clipped_loss_rows_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), off.data(), n, lp.data(), old.data(),
                                                             row_adv.data(), nullptr, mask.data(), grad.data(), sums, nullptr)
                               : drmas_clipped_loss_f32(DRMAS_DEVICE_CPU, &c, R, off.data(), n, lp.data(), old.data(), adv.data(),
                                                        nullptr, mask.data(), grad.data(), sums, nullptr);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (st != 0) {
            fprintf(stderr, "bench_loss: %s\n", drmas_last_error());
            return 1;
        }
        best = std::min(best, ms);
        total += ms;
    }
    printf("%lld tokens, %d threads: %.3f ms a call (min of %d; mean %.3f), %.2f ns a token per thread; loss %.9g\n", (long long)n,
           threads, best, calls, total / calls, best * 1e6 / (double)n * threads, sums[DRMAS_LOSS_LOSS]);
    return 0;
}
