// cpu_lmhead.h — what the fused LM head's CPU code shares between cpu.cpp (validation, the loss,
// the threads) and its per-logit loops in cpu_lmhead_kernels.inc, which are compiled twice
// (cpu_lmhead_v2.cpp for x86-64-v2, cpu_lmhead_v3.cpp for AVX2 machines) and picked at run time
// like the advantage kernels (cpu_adv.h). Both compute bit-identical results: the same float
// operations in the same order, eight lanes wide on either, no fused multiply-add.
// defines: RowStats, LmheadIsa, lmhead_isa
#pragma once

#include <stdint.h>

namespace drmas {

// One token's softmax statistics over its logits row: lse = log sum_v e^{z_v} and the entropy
// H = lse - sum_v p_v z_v. bad: the index of the first non-finite logit (lse and H are then
// meaningless), or -1.
struct RowStats {
    float lse;
    float entropy;
    int64_t bad;
};

struct LmheadIsa {
    const char* name;
    // The statistics of one row of V logits: the running maximum m, s = sum e^{z - m} and
    // sz = sum e^{z - m} (z - m) in fp64 from fp32 sums of blocks of 512 logits (eight lanes),
    // rescaled when the maximum grows.
    RowStats (*row_stats)(const float* z, int64_t V);
    // Overwrites one valid token's row of V logits with the entropy bonus's and the loss's
    // share of dL/dz except the target's +g: with lp = z - lse and p = e^lp,
    // z = -g p + ew p (lp + H), 0 where that is below FLT_MIN in magnitude (no denormals).
    void (*dz_row)(float* z, int64_t V, float lse, float entropy, float g, float ew);
};
extern const LmheadIsa kLmheadIsaV2, kLmheadIsaV3;

// The loops for this CPU, chosen as adv_isa() chooses (DRMAS_CPU_ISA=v2 forces the baseline).
const LmheadIsa& lmhead_isa();

}  // namespace drmas
