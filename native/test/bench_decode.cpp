// bench_decode.cpp — a driver for timing drmas_decode_attention_f32 outside the JVM, as a generate
// call drives it: every layer of every decoding step, the slots growing by one a step, the rows' left
// padding masked. With --base it loads a second libdrmas (say, a build of the previous commit) and
// times both in this process, taking turns call by call, each on its own copy of the caches, so that
// the ratio survives the VM's drift; an untimed first pass compares their outputs. Not a test (no
// ctest entry); for callgrind:
//
//   bench_decode [--base OLD/libdrmas.so [--base-threads N]] [--only new|base]
//                [--shapes b64,toy32,toy4,one] [--threads 1,2] [--rounds 7]
//   valgrind --tool=callgrind --collect-atstart=no --toggle-collect=drmas_decode_attention_f32 \
//       build/bench_decode --shapes b64 --threads 1 --rounds 1
//
// (callgrind's count covers 2 x the calls a pass that it prints: the untimed pass and one round.)
//
// Shapes (the workloads of bench/README.md, "The decoding attention in libdrmas"):
//   b64    GenerationBench's batch 64: 64 rows, 8 heads / 4 kv, head_dim 32, prompts of 29-32 tokens
//          left-padded to 32, 128 new tokens (slots 33..160), 4 layers, Qwen3 q/k norms
//   toy32  the search toy's turn: 32 rows, 4 / 2 heads, head_dim 24, prompts of 150-450 tokens padded
//          to 450, 20 new tokens (slots 451..470), 2 layers
//   toy4   the same with 4 rows
//   one    one row of b64's model, no mask
//   b64long  (not in the default list) b64 with prompts of 381-384 tokens: slots 385..512
// --base-threads N runs the base side on N threads whatever --threads says (the same library as base
// and new: what a second thread buys). Prints per shape and thread count the mean time a call (median
// over rounds), GFLOP/s (4 flops a query head, slot and element: the scores and the weighted sum) and
// GB/s of keys and values read, both counted over every slot, padding included (the shape's work, not
// what the kernel skips). --threads sets drmas_set_num_threads; the kernel may use fewer.
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "drmas.h"

namespace {

using AttnFn = decltype(&drmas_decode_attention_f32);
using ThreadsFn = decltype(&drmas_set_num_threads);

struct Lib {
    const char* name;
    AttnFn attn;
    ThreadsFn set_threads;
};

struct Shape {
    const char* name;
    int64_t rows, heads, kv, d, capacity, layers, prompt, steps, pad_min, pad_max;
    bool mask;
};

const Shape kShapes[] = {
    {"b64", 64, 8, 4, 32, 160, 4, 32, 128, 0, 3, true},
    {"toy32", 32, 4, 2, 24, 470, 2, 450, 20, 0, 300, true},
    {"toy4", 4, 4, 2, 24, 470, 2, 450, 20, 0, 300, true},
    {"one", 1, 8, 4, 32, 160, 4, 32, 128, 0, 0, false},
    {"b64long", 64, 8, 4, 32, 512, 4, 384, 128, 0, 3, true},
};

// One side's state: its own caches (the calls write the new slot), so that both sides read the same.
struct Run {
    std::vector<float> kc, vc, qkv, out;
};

struct Workload {
    const Shape& s;
    int64_t width, cache_row;
    std::vector<float> kc0, vc0, qn, kn;
    std::vector<std::vector<float>> qkv_pool;  // a few step inputs, cycled
    std::vector<float> cos, sin;               // [steps][rows][d]
    std::vector<int64_t> pad;                  // per row

    explicit Workload(const Shape& shape) : s(shape) {
        std::mt19937_64 rng(17);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        width = (s.heads + 2 * s.kv) * s.d;
        cache_row = s.kv * s.capacity * s.d;
        const size_t cache = (size_t)(s.layers * s.rows * cache_row);
        kc0.resize(cache);
        vc0.resize(cache);
        for (size_t i = 0; i < cache; ++i) {
            kc0[i] = nd(rng);
            vc0[i] = nd(rng);
        }
        qn.resize((size_t)s.d);
        kn.resize((size_t)s.d);
        for (int64_t e = 0; e < s.d; ++e) {
            qn[(size_t)e] = 1.0f + 0.1f * nd(rng);
            kn[(size_t)e] = 1.0f + 0.1f * nd(rng);
        }
        for (int k = 0; k < 7; ++k) {
            std::vector<float> q((size_t)(s.rows * width));
            for (float& x : q) x = 2.0f * nd(rng);
            qkv_pool.push_back(std::move(q));
        }
        pad.resize((size_t)s.rows);
        for (int64_t r = 0; r < s.rows; ++r) pad[(size_t)r] = s.pad_min + (int64_t)(rng() % (uint64_t)(s.pad_max - s.pad_min + 1));
        cos.resize((size_t)(s.steps * s.rows * s.d));
        sin.resize(cos.size());
        for (int64_t t = 0; t < s.steps; ++t)
            for (int64_t r = 0; r < s.rows; ++r)
                for (int64_t e = 0; e < s.d / 2; ++e) {
                    const double a = (double)(s.prompt + t - pad[(size_t)r]) * pow(10000.0, -2.0 * (double)e / (double)s.d);
                    float* c = &cos[(size_t)((t * s.rows + r) * s.d)];
                    float* n = &sin[(size_t)((t * s.rows + r) * s.d)];
                    c[e] = c[e + s.d / 2] = (float)::cos(a);
                    n[e] = -(float)::sin(a);
                    n[e + s.d / 2] = (float)::sin(a);
                }
    }

    int64_t calls() const { return s.steps * s.layers; }
    double flops() const {  // over the whole sequence
        double f = 0;
        for (int64_t t = 0; t < s.steps; ++t) f += 4.0 * (double)(s.rows * s.heads * s.d) * (double)(s.prompt + t + 1) * (double)s.layers;
        return f;
    }
    double kv_bytes() const {
        double b = 0;
        for (int64_t t = 0; t < s.steps; ++t) b += 8.0 * (double)(s.rows * s.kv * s.d) * (double)(s.prompt + t + 1) * (double)s.layers;
        return b;
    }

    void reset(Run& run) const {
        run.kc = kc0;
        run.vc = vc0;
        run.qkv.resize((size_t)(s.rows * width));
        run.out.resize((size_t)(s.rows * s.heads * s.d));
    }

    // The whole sequence, each call made by every side in turn (who goes first alternating from call to
    // call), each side on its own caches: the VM's drift hits the sides alike. Adds each side's seconds
    // in the calls to secs; with diff, compares the sides' outputs call by call (max |a - b| / (1 + |b|)).
    void sequence(const std::vector<Lib>& libs, std::vector<Run>& runs, double* secs, double* diff) const {
        std::vector<uint8_t> mask;
        const size_t n = libs.size();
        int64_t k = 0;
        for (int64_t t = 0; t < s.steps; ++t) {
            const int64_t slots = s.prompt + t + 1, write = slots - 1;
            mask.assign((size_t)(s.rows * slots), 1);
            for (int64_t r = 0; r < s.rows; ++r)
                for (int64_t j = 0; j < pad[(size_t)r]; ++j) mask[(size_t)(r * slots + j)] = 0;
            const float* cs = &cos[(size_t)(t * s.rows * s.d)];
            const float* sn = &sin[(size_t)(t * s.rows * s.d)];
            for (int64_t l = 0; l < s.layers; ++l, ++k) {
                const std::vector<float>& src = qkv_pool[(size_t)(k % (int64_t)qkv_pool.size())];
                const size_t at = (size_t)(l * s.rows * cache_row);
                for (size_t o = 0; o < n; ++o) {
                    const size_t i = (o + (size_t)k) % n;
                    Run& run = runs[i];
                    memcpy(run.qkv.data(), src.data(), src.size() * sizeof(float));
                    const auto t0 = std::chrono::steady_clock::now();
                    const int32_t st = libs[i].attn(DRMAS_DEVICE_CPU, s.rows, s.heads, s.kv, s.d, run.qkv.data(), width, qn.data(), kn.data(),
                                                    1e-6, cs, sn, run.kc.data() + at, run.vc.data() + at, cache_row, s.capacity, write,
                                                    slots, s.mask ? mask.data() : nullptr, 1.0 / sqrt((double)s.d), run.out.data());
                    secs[i] += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
                    if (st != 0) {
                        fprintf(stderr, "bench_decode: %s failed (%d)\n", libs[i].name, st);
                        exit(1);
                    }
                }
                if (diff && n == 2)
                    for (size_t i = 0; i < runs[0].out.size(); ++i)
                        *diff = std::max(*diff, (double)fabsf(runs[0].out[i] - runs[1].out[i]) / (1.0 + fabsf(runs[1].out[i])));
            }
        }
    }
};

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<std::string> split(const char* s) {
    std::vector<std::string> out;
    std::string cur;
    for (const char* p = s;; ++p) {
        if (*p == ',' || *p == 0) {
            if (!cur.empty()) out.push_back(cur);
            cur.clear();
            if (*p == 0) break;
        } else {
            cur += *p;
        }
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    const char* base_path = nullptr;
    const char* only = nullptr;
    std::vector<std::string> shapes{"b64", "toy32", "toy4", "one"};
    std::vector<int> threads{1, 2};
    int rounds = 7, base_threads = 0;
    for (int i = 1; i < argc; ++i) {
        const bool has = i + 1 < argc;
        if (!strcmp(argv[i], "--base") && has) base_path = argv[++i];
        else if (!strcmp(argv[i], "--only") && has) only = argv[++i];
        else if (!strcmp(argv[i], "--shapes") && has) shapes = split(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && has) {
            threads.clear();
            for (const std::string& t : split(argv[++i])) threads.push_back(atoi(t.c_str()));
        } else if (!strcmp(argv[i], "--base-threads") && has) base_threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--rounds") && has) rounds = std::max(1, atoi(argv[++i]));
        else {
            fprintf(stderr, "usage: bench_decode [--base LIB.so [--base-threads N]] [--only new|base] [--shapes b64,toy32,toy4,one] "
                            "[--threads 1,2] [--rounds N]\n");
            return 2;
        }
    }
    std::vector<Lib> libs;
    if (!only || !strcmp(only, "new")) libs.push_back({"new", &drmas_decode_attention_f32, &drmas_set_num_threads});
    if (base_path && (!only || !strcmp(only, "base"))) {
        // RTLD_LOCAL: the base library keeps its own symbols (and its own thread setting)
        void* h = dlopen(base_path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            fprintf(stderr, "bench_decode: cannot load %s: %s\n", base_path, dlerror());
            return 1;
        }
        Lib b{"base", (AttnFn)dlsym(h, "drmas_decode_attention_f32"), (ThreadsFn)dlsym(h, "drmas_set_num_threads")};
        if (!b.attn || !b.set_threads) {
            fprintf(stderr, "bench_decode: %s lacks drmas_decode_attention_f32\n", base_path);
            return 1;
        }
        libs.push_back(b);
    }
    if (libs.empty()) {
        fprintf(stderr, "bench_decode: --only base needs --base\n");
        return 2;
    }
    printf("libdrmas %s; %d round(s), the sides taking turns call by call; time = mean a call over the sequence, median of the rounds\n",
           drmas_version(), rounds);
    for (const std::string& name : shapes) {
        const Shape* sp = nullptr;
        for (const Shape& s : kShapes)
            if (name == s.name) sp = &s;
        if (!sp) {
            fprintf(stderr, "bench_decode: no shape %s\n", name.c_str());
            return 2;
        }
        const Workload w(*sp);
        printf("%s: %lld calls a pass (%lld steps x %lld layers)\n", sp->name, (long long)w.calls(), (long long)sp->steps,
               (long long)sp->layers);
        std::vector<Run> runs(libs.size());
        for (Run& r : runs) w.reset(r);
        for (int nt : threads) {
            for (const Lib& l : libs) l.set_threads(base_threads > 0 && !strcmp(l.name, "base") ? base_threads : nt);
            std::vector<std::vector<double>> us(libs.size());
            std::vector<double> ratio;
            double diff = 0;
            std::vector<double> secs(libs.size());
            w.sequence(libs, runs, secs.data(), &diff);  // untimed: warms up, compares the outputs
            for (int round = 0; round < rounds; ++round) {
                std::fill(secs.begin(), secs.end(), 0.0);
                w.sequence(libs, runs, secs.data(), nullptr);
                for (size_t i = 0; i < libs.size(); ++i) us[i].push_back(secs[i] * 1e6 / (double)w.calls());
                if (libs.size() == 2) ratio.push_back(secs[1] / secs[0]);
            }
            for (size_t i = 0; i < libs.size(); ++i) {
                const double u = median(us[i]);
                const int t = base_threads > 0 && !strcmp(libs[i].name, "base") ? base_threads : nt;
                printf("%-6s rows %3lld heads %lld/%lld d %lld slots %lld..%lld | %d thread%s | %-4s %8.1f us a call | %6.2f GFLOP/s | %6.2f GB/s KV\n",
                       sp->name, (long long)sp->rows, (long long)sp->heads, (long long)sp->kv, (long long)sp->d,
                       (long long)(sp->prompt + 1), (long long)(sp->prompt + sp->steps), t, t == 1 ? " " : "s", libs[i].name, u,
                       w.flops() / (u * 1e-6 * (double)w.calls()) * 1e-9, w.kv_bytes() / (u * 1e-6 * (double)w.calls()) * 1e-9);
            }
            if (libs.size() == 2)
                printf("%-6s %d thread%s: base / new = %.3fx (median of %d rounds' ratios; max |new - base| / (1 + |base|) = %.2e)\n",
                       sp->name, nt, nt == 1 ? " " : "s", median(ratio), rounds, diff);
        }
    }
    return 0;
}
