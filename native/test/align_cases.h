// align_cases.h — misaligned pointers, every entry point and every typed pointer argument, shared by
// test_cpu.cpp (host arrays) and test_cuda.cpp (device arrays, on a GPU or the SIMT emulator). Each
// entry point first runs once on valid, aligned arguments (so that a refusal below can only be the
// alignment's), then once per typed argument moved 1 byte (and half its alignment) off its slot:
// the status must be DRMAS_ERR_CONFIG, the message must name the entry point, the argument and the
// alignment, and no byte of any argument may change. On a GPU the call without the check would be a
// "misaligned address" fault that ends the process's CUDA context; on the host, undefined behaviour.
#ifndef DRMAS_TEST_ALIGN_CASES_H
#define DRMAS_TEST_ALIGN_CASES_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <string>
#include <vector>

#include "drmas.h"

namespace align_cases {

struct Arg {
    const char* name;
    size_t align;  // alignof the element type; 1 (mask bytes) is never misaligned and not moved
    bool host;     // host memory on every backend: the config structs and host_row_offsets
};

struct Entry {
    const char* fn;
    bool cpu_only;
    std::vector<Arg> args;
    std::function<void(void* const*)> init;                  // fills each argument's slot with valid data (host copies)
    std::function<int32_t(int32_t, void* const*)> call;      // the entry point on `device` with these argument pointers
};

// Each argument lives in its own slot of this many bytes (room for the largest case and for a pointer
// moved a few bytes on: without the check a misaligned call would still stay inside its slot).
constexpr size_t kSlot = 1024;

template <class T>
inline T* at(void* const* p, int k) {
    return static_cast<T*>(p[k]);
}

template <class T>
inline void fill(void* const* p, int k, std::vector<T> v) {
    memcpy(p[k], v.data(), v.size() * sizeof(T));
}

// A float as bf16 (truncated: the values below are exact in bf16).
inline uint16_t bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)(u >> 16);
}

inline std::vector<Entry> entries() {
    std::vector<Entry> e;
    const std::vector<float> tok6 = {-0.5f, -1.0f, -0.25f, -2.0f, -0.75f, -1.5f}, old6 = {-0.6f, -0.9f, -0.3f, -1.8f, -0.7f, -1.6f};
    const std::vector<int64_t> offs = {0, 3, 6};

    e.push_back({"drmas_segment_stats_f32", false,
                 {{"values", 4, false}, {"segment_ids", 4, false}, {"count", 8, false}, {"mean", 8, false}, {"m2", 8, false},
                  {"std", 8, false}},
                 [](void* const* p) {
                     fill<float>(p, 0, {1, 2, 3, 4, 5, 6});
                     fill<int32_t>(p, 1, {0, 1, 0, 1, 0, 1});
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_segment_stats_f32(dev, 6, at<float>(p, 0), at<int32_t>(p, 1), 2, 1, at<int64_t>(p, 2),
                                                    at<double>(p, 3), at<double>(p, 4), at<double>(p, 5), nullptr);
                 }});

    for (int trusted = 0; trusted < 2; ++trusted)
        e.push_back({trusted ? "drmas_advantage_trusted_f32" : "drmas_advantage_f32", false,
                     {{"cfg", 8, true}, {"scores", 4, false}, {"uid", 4, false}, {"traj", 4, false}, {"agent", 4, false},
                      {"advantages", 4, false}, {"diagnostics", 8, false}},
                     [](void* const* p) {
                         drmas_norm_config c;
                         memset(&c, 0, sizeof c);
                         c.mean_from = c.std_from = DRMAS_FROM_AGENT;
                         c.global_pooling = DRMAS_POOL_TRAJECTORIES;
                         c.ddof = 1;
                         c.scale_by_std = 1;
                         c.eps = 1e-6;
                         memcpy(p[0], &c, sizeof c);
                         fill<float>(p, 1, {1, 0, 1, 1, 0, 1, 0, 0});
                         fill<int32_t>(p, 2, {0, 0, 0, 0, 1, 1, 1, 1});
                         fill<int32_t>(p, 3, {0, 0, 1, 1, 2, 2, 3, 3});
                         fill<int32_t>(p, 4, {0, 1, 0, 1, 0, 1, 0, 1});
                     },
                     [trusted](int32_t dev, void* const* p) {
                         return (trusted ? drmas_advantage_trusted_f32 : drmas_advantage_f32)(
                             dev, at<drmas_norm_config>(p, 0), 8, at<float>(p, 1), at<int32_t>(p, 2), at<int32_t>(p, 3),
                             at<int32_t>(p, 4), 2, 4, 2, at<float>(p, 5), at<double>(p, 6), nullptr);
                     }});

    e.push_back({"drmas_broadcast_rows_f32", false, {{"row_values", 4, false}, {"row_offsets", 8, false}, {"token_values", 4, false}},
                 [offs](void* const* p) {
                     fill<float>(p, 0, {1.5f, -2.0f});
                     fill<int64_t>(p, 1, offs);
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_broadcast_rows_f32(dev, 2, at<float>(p, 0), at<int64_t>(p, 1), 6, at<float>(p, 2), nullptr);
                 }});

    // the three clipped losses: plain (per-token advantages, device offsets), async (host offsets too), per row
    for (int kind = 0; kind < 3; ++kind) {
        std::vector<Arg> args = {{"cfg", 8, true}, {"row_offsets", 8, false}, {"logp", 4, false}, {"old_logp", 4, false},
                                 {kind == 2 ? "row_advantages" : "advantages", 4, false}, {"ref_logp", 4, false}, {"mask", 1, false},
                                 {"grad", 4, false}, {"sums", 8, false}};
        if (kind > 0) args.push_back({"host_row_offsets", 8, true});
        e.push_back({kind == 0 ? "drmas_clipped_loss_f32" : kind == 1 ? "drmas_clipped_loss_async_f32" : "drmas_clipped_loss_rows_f32",
                     false, args,
                     [kind, tok6, old6, offs](void* const* p) {
                         const drmas_loss_config c{0.2, 0.28, 3.0, 0.1, 6.0, DRMAS_KL_K3, 0};
                         memcpy(p[0], &c, sizeof c);
                         fill<int64_t>(p, 1, offs);
                         fill<float>(p, 2, tok6);
                         fill<float>(p, 3, old6);
                         if (kind == 2) fill<float>(p, 4, {0.5f, -1.0f});
                         else fill<float>(p, 4, {0.5f, 0.5f, 0.5f, -1.0f, -1.0f, -1.0f});
                         fill<float>(p, 5, {-0.4f, -1.1f, -0.2f, -2.1f, -0.8f, -1.4f});
                         fill<uint8_t>(p, 6, {1, 1, 0, 1, 1, 1});
                         if (kind > 0) fill<int64_t>(p, 9, offs);
                     },
                     [kind](int32_t dev, void* const* p) {
                         const drmas_loss_config* c = at<drmas_loss_config>(p, 0);
                         if (kind == 0)
                             return drmas_clipped_loss_f32(dev, c, 2, at<int64_t>(p, 1), 6, at<float>(p, 2), at<float>(p, 3),
                                                           at<float>(p, 4), at<float>(p, 5), at<uint8_t>(p, 6), at<float>(p, 7),
                                                           at<double>(p, 8), nullptr);
                         return (kind == 1 ? drmas_clipped_loss_async_f32 : drmas_clipped_loss_rows_f32)(
                             dev, c, 2, at<int64_t>(p, 9), at<int64_t>(p, 1), 6, at<float>(p, 2), at<float>(p, 3), at<float>(p, 4),
                             at<float>(p, 5), at<uint8_t>(p, 6), at<float>(p, 7), at<double>(p, 8), nullptr);
                     }});
    }

    // the LM head's forward ops over 6 tokens of 5 logits, fp32 and bf16, plain and async
    for (int bf = 0; bf < 2; ++bf)
        for (int async = 0; async < 2; ++async) {
            std::vector<Arg> args = {{"logits", bf ? 2u : 4u, false}, {"targets", 8, false}, {"logp", 4, false}, {"entropy", 4, false}};
            if (async) args.push_back({"errors", 8, false});
            static const char* names[2][2] = {{"drmas_lmhead_logprobs_f32", "drmas_lmhead_logprobs_async_f32"},
                                              {"drmas_lmhead_logprobs_bf16", "drmas_lmhead_logprobs_async_bf16"}};
            e.push_back({names[bf][async], false, args,
                         [bf](void* const* p) {
                             for (int i = 0; i < 30; ++i) {
                                 const float z = 0.25f * (float)(i % 7) - 0.5f;
                                 if (bf) at<uint16_t>(p, 0)[i] = bf16(z);
                                 else at<float>(p, 0)[i] = z;
                             }
                             fill<int64_t>(p, 1, {0, 4, 2, 3, 1, 0});
                         },
                         [bf, async](int32_t dev, void* const* p) {
                             uint64_t* err = async ? at<uint64_t>(p, 4) : nullptr;
                             if (bf)
                                 return async ? drmas_lmhead_logprobs_async_bf16(dev, 6, 5, at<uint16_t>(p, 0), at<int64_t>(p, 1),
                                                                                 at<float>(p, 2), at<float>(p, 3), err, nullptr)
                                              : drmas_lmhead_logprobs_bf16(dev, 6, 5, at<uint16_t>(p, 0), at<int64_t>(p, 1),
                                                                           at<float>(p, 2), at<float>(p, 3), nullptr);
                             return async ? drmas_lmhead_logprobs_async_f32(dev, 6, 5, at<float>(p, 0), at<int64_t>(p, 1), at<float>(p, 2),
                                                                            at<float>(p, 3), err, nullptr)
                                          : drmas_lmhead_logprobs_f32(dev, 6, 5, at<float>(p, 0), at<int64_t>(p, 1), at<float>(p, 2),
                                                                      at<float>(p, 3), nullptr);
                         }});
        }

    // one chunk of all 6 tokens of the fused LM head, fp32 and bf16, plain and async
    for (int bf = 0; bf < 2; ++bf)
        for (int async = 0; async < 2; ++async) {
            std::vector<Arg> args = {{"cfg", 8, true},        {"row_offsets", 8, false}, {"logits", bf ? 2u : 4u, false},
                                     {"targets", 8, false},   {"old_logp", 4, false},    {"advantages", 4, false},
                                     {"ref_logp", 4, false},  {"mask", 1, false},        {"logp", 4, false},
                                     {"entropy", 4, false},   {"sums", 8, false}};
            if (async) {
                args.push_back({"host_row_offsets", 8, true});
                args.push_back({"errors", 8, false});
            }
            static const char* names[2][2] = {{"drmas_lmhead_chunk_f32", "drmas_lmhead_chunk_async_f32"},
                                              {"drmas_lmhead_chunk_bf16", "drmas_lmhead_chunk_async_bf16"}};
            e.push_back({names[bf][async], false, args,
                         [bf, async, old6, offs](void* const* p) {
                             const drmas_lmhead_config c{0.2, 0.28, 3.0, 0.1, 6.0, 0.01, DRMAS_KL_K3, 0};
                             memcpy(p[0], &c, sizeof c);
                             fill<int64_t>(p, 1, offs);
                             for (int i = 0; i < 30; ++i) {
                                 const float z = 0.25f * (float)(i % 7) - 0.5f;
                                 if (bf) at<uint16_t>(p, 2)[i] = bf16(z);
                                 else at<float>(p, 2)[i] = z;
                             }
                             fill<int64_t>(p, 3, {0, 4, 2, 3, 1, 0});
                             fill<float>(p, 4, old6);
                             fill<float>(p, 5, {0.5f, -1.0f});
                             fill<float>(p, 6, {-0.4f, -1.1f, -0.2f, -2.1f, -0.8f, -1.4f});
                             fill<uint8_t>(p, 7, {1, 1, 0, 1, 1, 1});
                             if (async) fill<int64_t>(p, 11, offs);
                         },
                         [bf, async](int32_t dev, void* const* p) {
                             const drmas_lmhead_config* c = at<drmas_lmhead_config>(p, 0);
                             const int64_t* o = at<int64_t>(p, 1);
                             const int64_t* y = at<int64_t>(p, 3);
                             const float *old = at<float>(p, 4), *adv = at<float>(p, 5), *ref = at<float>(p, 6);
                             const uint8_t* m = at<uint8_t>(p, 7);
                             float *lp = at<float>(p, 8), *ent = at<float>(p, 9);
                             double* s = at<double>(p, 10);
                             if (async) {
                                 const int64_t* ho = at<int64_t>(p, 11);
                                 uint64_t* err = at<uint64_t>(p, 12);
                                 return bf ? drmas_lmhead_chunk_async_bf16(dev, c, 2, ho, o, 6, 0, 6, 5, at<uint16_t>(p, 2), y, old, adv,
                                                                           ref, m, lp, ent, s, err, nullptr)
                                           : drmas_lmhead_chunk_async_f32(dev, c, 2, ho, o, 6, 0, 6, 5, at<float>(p, 2), y, old, adv, ref,
                                                                          m, lp, ent, s, err, nullptr);
                             }
                             return bf ? drmas_lmhead_chunk_bf16(dev, c, 2, o, 6, 0, 6, 5, at<uint16_t>(p, 2), y, old, adv, ref, m, lp, ent,
                                                                 s, nullptr)
                                       : drmas_lmhead_chunk_f32(dev, c, 2, o, 6, 0, 6, 5, at<float>(p, 2), y, old, adv, ref, m, lp, ent, s,
                                                                nullptr);
                         }});
        }

    // the CPU decoding step: 2 rows, 2 query heads on 1 kv head of 4, a cache of 4 slots (2 attended)
    e.push_back({"drmas_decode_attention_f32", true,
                 {{"qkv", 4, false}, {"q_norm", 4, false}, {"k_norm", 4, false}, {"cos", 4, false}, {"sin_signed", 4, false},
                  {"k_cache", 4, false}, {"v_cache", 4, false}, {"mask", 1, false}, {"out", 4, false}},
                 [](void* const* p) {
                     for (int i = 0; i < 32; ++i) {
                         at<float>(p, 0)[i] = 0.125f * (float)(i % 9) - 0.5f;
                         at<float>(p, 5)[i] = 0.1f * (float)(i % 5);
                         at<float>(p, 6)[i] = -0.2f * (float)(i % 3);
                     }
                     fill<float>(p, 1, {1, 0.5f, 2, 1});
                     fill<float>(p, 2, {1, 1, 0.5f, 2});
                     fill<float>(p, 3, std::vector<float>(8, 1.0f));
                     fill<float>(p, 4, std::vector<float>(8, 0.0f));
                     fill<uint8_t>(p, 7, {1, 1, 0, 1});
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_decode_attention_f32(dev, 2, 2, 1, 4, at<float>(p, 0), 16, at<float>(p, 1), at<float>(p, 2), 1e-6,
                                                       at<float>(p, 3), at<float>(p, 4), at<float>(p, 5), at<float>(p, 6), 16, 4, 1, 2,
                                                       at<uint8_t>(p, 7), 0.5, at<float>(p, 8));
                 }});

    e.push_back({"drmas_rms_norm_f32", true, {{"x", 4, false}, {"residual", 4, false}, {"weight", 4, false}, {"out", 4, false}},
                 [](void* const* p) {
                     fill<float>(p, 0, {1, -2, 3, 0.5f, 0.25f, -1, 2, 2, -3, 1, 0, 4});
                     fill<float>(p, 1, std::vector<float>(12, 0.5f));
                     fill<float>(p, 2, {1, 1.5f, 0.5f, 2, 1, 1});
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_rms_norm_f32(dev, 2, 6, at<float>(p, 0), 6, at<float>(p, 1), 6, at<float>(p, 2), 1e-6, at<float>(p, 3), 6);
                 }});

    e.push_back({"drmas_swiglu_f32", true, {{"gate", 4, false}, {"up", 4, false}, {"out", 4, false}},
                 [](void* const* p) {
                     fill<float>(p, 0, {1, -2, 3, 0.5f, 0.25f, -1, 2, 2, -3, 1, 0, 4});
                     fill<float>(p, 1, {0.5f, 1, -1, 2, 3, -0.5f, 1, 1, 1, -2, 2, 0.25f});
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_swiglu_f32(dev, 2, 6, at<float>(p, 0), 6, at<float>(p, 1), 6, at<float>(p, 2), 6);
                 }});

    e.push_back({"drmas_sample_f32", true, {{"logits", 4, false}, {"uniforms", 8, false}, {"tokens", 8, false}, {"logprobs", 4, false}},
                 [](void* const* p) {
                     fill<float>(p, 0, {0.5f, 1, -1, 2, 0, 3, 1, 1, -2, 0.5f});
                     fill<double>(p, 1, {0.3, 0.7});
                 },
                 [](int32_t dev, void* const* p) {
                     return drmas_sample_f32(dev, 2, 5, at<float>(p, 0), 5, 1.0, 0, 1.0, at<double>(p, 1), at<int64_t>(p, 2),
                                             at<float>(p, 3));
                 }});
    return e;
}

// Where the arguments live: `Memory` allocates, fills and reads back the backend's memory (host memory
// for the CPU; drmas_cuda_malloc'd for CUDA) as char* blocks of `bytes`.
//   char* alloc(size_t bytes); void put(char* dst, const char* src, size_t bytes);
//   void get(char* dst, const char* src, size_t bytes); void release(char* p);
// `check(ok, fmt, ...)` is the suite's own check. Returns the number of misaligned calls made.
template <class Memory, class Check>
int run(int32_t device, Memory& mem, Check check) {
    int calls = 0;
    for (const Entry& en : entries()) {
        if (en.cpu_only && device != DRMAS_DEVICE_CPU) continue;
        const size_t n = en.args.size();
        std::vector<char> host_init(n * kSlot, 0), host_slots(n * kSlot, 0);
        char* dev_slots = mem.alloc(n * kSlot);
        std::vector<void*> init_ptrs(n), p(n);
        for (size_t k = 0; k < n; ++k) init_ptrs[k] = host_init.data() + k * kSlot;
        en.init(init_ptrs.data());
        // host arguments (configs, host_row_offsets) in host memory; the arrays in the backend's
        memcpy(host_slots.data(), host_init.data(), host_slots.size());
        mem.put(dev_slots, host_init.data(), n * kSlot);
        for (size_t k = 0; k < n; ++k) p[k] = (en.args[k].host ? host_slots.data() : dev_slots) + k * kSlot;
        int32_t st = en.call(device, p.data());
        check(st == DRMAS_OK, "%s on aligned arguments (the control): status %d: %s", en.fn, st, drmas_last_error());
        if (st != DRMAS_OK) {
            mem.release(dev_slots);
            continue;
        }
        // the refused calls must change nothing: what the control call left is the reference
        std::vector<char> dev_before(n * kSlot), dev_after(n * kSlot);
        mem.get(dev_before.data(), dev_slots, n * kSlot);
        const std::vector<char> host_before = host_slots;
        for (size_t k = 0; k < n; ++k) {
            const Arg& a = en.args[k];
            if (a.align == 1) continue;
            const size_t offsets[2] = {1, a.align / 2};
            for (int j = 0; j < 2; ++j) {
                const size_t off = offsets[j];
                if (j == 1 && off == 1) continue;  // bf16: half its alignment is 1 again
                std::vector<void*> q = p;
                q[k] = (char*)p[k] + off;
                st = en.call(device, q.data());
                ++calls;
                const std::string msg = drmas_last_error();
                char want[160], want_bytes[64];
                snprintf(want, sizeof want, "%s: %s (0x", en.fn, a.name);
                snprintf(want_bytes, sizeof want_bytes, ") is not aligned to %zu bytes", a.align);
                check(st == DRMAS_ERR_CONFIG && msg.find(want) != std::string::npos && msg.find(want_bytes) != std::string::npos,
                      "%s with %s %zu byte(s) off: status %d, message \"%s\"", en.fn, a.name, off, st, msg.c_str());
                mem.get(dev_after.data(), dev_slots, n * kSlot);
                check(dev_after == dev_before && host_slots == host_before, "%s with %s %zu byte(s) off: memory written", en.fn,
                      a.name, off);
            }
        }
        mem.release(dev_slots);
    }
    return calls;
}

}  // namespace align_cases

#endif  // DRMAS_TEST_ALIGN_CASES_H
