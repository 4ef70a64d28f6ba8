// cpu_decode.h — what drmas_decode_attention_f32's CPU code shares between cpu.cpp (the checks'
// results, the threads) and its per-head loops in cpu_decode_kernels.inc, which are compiled
// twice with the loss's loops (cpu_loss_v2.cpp for x86-64-v2, cpu_loss_v3.cpp for AVX2 machines:
// they share its vector exponential) and picked at run time like them. Both compute bit-identical
// results: the same float operations in the same order, eight lanes wide on either, no fused
// multiply-add.
// defines: DecodeHead, DecodeIsa, decode_isa
#pragma once

#include <stdint.h>

namespace drmas {

// One row's one kv head of a decoding step: the query heads that read it (HF's repeat_kv: query
// head i reads kv head i / group), its new key and value, its cache.
struct DecodeHead {
    float* q;               // [group, d]: this kv head's query heads, normed and rotated in place
    float* k;               // [d]: the new key, normed and rotated in place
    const float* v;         // [d]: the new value
    const float* q_norm;    // [d] or NULL (no per-head norm): Qwen3's q_norm / k_norm weights
    const float* k_norm;
    float eps;
    const float* cos;       // [d] the rotation of this row's position
    const float* sin;       // [d] its sines, the first half negated (Rope.Angles' sinSigned)
    float* k_cache;         // [capacity, d] of this row and kv head; the new key goes to slot `write`
    float* v_cache;
    int64_t group, d, write, slots, capacity;
    const uint8_t* mask;    // [slots]: which slots the row attends to (its own always), NULL: all
    // The same as runs of attended slots, [runs[2i], runs[2i + 1]) in increasing order, nruns >= 1
    // (the row's own slot always is one); made once a row by cpu.cpp (decode_runs), shared by its kv heads
    const int32_t* runs;
    int64_t nruns;
    float scale;
    float* out;             // [group, d]
    // The next item's keys and values (NULL: none), read ahead while this one computes: at batch 64 the
    // caches are tens of MB, read from memory, in short runs that the hardware prefetcher starts late
    const float* next_k;
    const float* next_v;
    float* scratch;         // decode_scratch(group, slots, d) floats
};

// The floats decode_head needs as scratch: each query head's scores padded to eight, one head, each
// query head's softmax sum.
inline int64_t decode_scratch(int64_t group, int64_t slots, int64_t d) { return group * (((slots + 7) & ~(int64_t)7) + 1) + d; }

struct DecodeIsa {
    const char* name;
    // Qwen3's per-head RMSNorm of q and k (when q_norm is set), the rotation, the new key and value
    // into the cache, then softmax(q k^T scale + mask) v for each query head of the group.
    void (*head)(const DecodeHead& h);
};
extern const DecodeIsa kDecodeIsaV2, kDecodeIsaV3;

// The loops for this CPU, chosen as adv_isa() chooses (DRMAS_CPU_ISA=v2 forces the baseline).
const DecodeIsa& decode_isa();

}  // namespace drmas
