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
    int64_t group, d, write, slots;
    const uint8_t* mask;    // [slots]: which slots the row attends to (its own always), NULL: all
    float scale;
    float* out;             // [group, d]
    float* scratch;         // group x slots + d floats
    int32_t* live;          // slots ints
};

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
