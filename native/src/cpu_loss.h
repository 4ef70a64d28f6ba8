// cpu_loss.h — what the clipped loss's CPU code shares between cpu.cpp (validation, rows split
// over threads, the aggregation) and its per-token loop in cpu_loss_kernels.inc, which is compiled
// three times (cpu_loss_v2.cpp for x86-64-v2, cpu_loss_v3.cpp for AVX2 machines, cpu_loss_v4.cpp for
// AVX-512 ones) and picked at run time like the advantage kernels (cpu_adv.h). All give bit-identical
// results: the same operations in the same order, no fused multiply-add outside the exponential's
// fp64 polynomial (whose float result is exact either way); every token's grad and loss terms are bit for bit
// drmas::token_loss's (drmas_math.h), the ratio's e^x included.
// defines: LossRow, LossRowSums, LossIsa, loss_isa
#pragma once

#include <stdint.h>

#include "drmas.h"

namespace drmas {

// n consecutive tokens of one row (inside the row and the window): every pointer points at the
// first of them.
struct LossRow {
    const drmas_loss_config* c;
    int64_t n;
    const float* logp;
    const float* old_logp;
    const float* adv;       // one per token, or NULL: adv_row for every token
    float adv_row;
    const float* ref;       // NULL: no KL term
    const uint8_t* mask;    // NULL: every token valid
    float* grad;
    float weight;           // the row's aggregation weight, as float (grad = weight * dL/dlogp)
};

// The row's raw sums over its valid tokens, before the weight: loss = pg + kl_coef kl (fp64 per
// token), pg, kl, ppo (old - logp, clamped), and the counts.
struct LossRowSums {
    double loss, pg, kl, ppo;
    int64_t tokens, clipped, lower;
};

struct LossIsa {
    const char* name;
    // grad of every token (0 where masked) and the row's sums. The fp64 sums add the tokens in a
    // fixed order of lanes (the same on both instruction sets), not one by one.
    LossRowSums (*row)(const LossRow& r);
};
extern const LossIsa kLossIsaV2, kLossIsaV3, kLossIsaV4;

// The loop for this CPU: v4 where it has AVX-512 (F, BW, DQ, VL), else as adv_isa() chooses.
// DRMAS_CPU_ISA=v3 or v2 forces that one (where the CPU has it), so that the tests compare all.
const LossIsa& loss_isa();

}  // namespace drmas
