// drmas_math.h — the per-element formulas shared by the CPU backend and the CUDA kernels,
// so that both compute the same numbers by construction: the advantage of one row given its
// segments' statistics (ARCHITECTURE §5) and the clipped PPO loss of one token (§6).
// defines: SegStat, mean_from_agent, std_from_agent, trajectory_numerator, reads_group,
//          Resolved, resolve_segments, apply_advantage, row_advantage, TokenLoss, exp_as_float,
//          token_loss, bf16_to_float, float_to_bf16
// The independent oracle is the plain-Java reference in the test sources, not this file.
#pragma once

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "drmas.h"

#if defined(__CUDACC__)
#define DRMAS_HD __host__ __device__ __forceinline__
#else
#define DRMAS_HD inline
#endif

namespace drmas {

// Statistics of one segment as the normaliser uses them: members, mean, std (ddof applied).
struct SegStat {
    double count;
    double mean;
    double std;
};

// std = sqrt(m2 / (count - ddof)), 0 when there are not more members than ddof.
DRMAS_HD double std_from_m2(double count, double m2, int ddof) {
    return count > ddof ? sqrt(m2 / (count - ddof)) : 0.0;
}

// The mode as the config describes it (drmas.h: mean_from, std_from, numerator). Every
// backend reads the mode through these, so there is no table of named modes below the ABI.
DRMAS_HD bool mean_from_agent(const drmas_norm_config& c) { return c.mean_from == DRMAS_FROM_AGENT; }
DRMAS_HD bool std_from_agent(const drmas_norm_config& c) { return c.std_from == DRMAS_FROM_AGENT; }
// The numerator is the trajectory's mean score; it differs from the row's own only with
// trajectory pooling (callers then pass x = S_t, else x = s).
DRMAS_HD bool trajectory_numerator(const drmas_norm_config& c) { return c.numerator == DRMAS_NUMERATOR_TRAJECTORY; }

// Whether the advantages read the group's statistics (or, with `traj`, the trajectory means),
// whatever the segment sizes: its mean, its std when dividing, or the trajectory numerator.
// (A single agent segment under the fallback policy reads its group too; callers add that.)
DRMAS_HD bool reads_group(const drmas_norm_config& c, bool traj) {
    return !mean_from_agent(c) || (c.scale_by_std && !std_from_agent(c)) || (traj && trajectory_numerator(c));
}

// What a row's advantage needs from its segments, resolved once per (uid, agent) segment:
// the mean to subtract, the divisor (std + eps), or `zero` when the singleton policy says
// A = 0. The mode takes its mean from one segment and its std from another; a single-member
// segment that the mode uses is handled by the policy. The std segment is "used" only when
// scale_by_std is on.
struct Resolved {
    double mean;
    double denom;
    int zero;
};

DRMAS_HD Resolved resolve_segments(const drmas_norm_config& c, SegStat agent, SegStat group) {
    const bool agent_mean = mean_from_agent(c);
    const bool agent_std = std_from_agent(c);

    // Resolve one statistic (mean when want_mean, else std) from its segment.
    // Returns false when the policy says A = 0.
    auto resolve = [&](bool from_agent, bool want_mean, double* out) -> bool {
        const double raw_value = want_mean ? 0.0 : 1.0;
        if (from_agent) {
            if (agent.count > 1) {
                *out = want_mean ? agent.mean : agent.std;
                return true;
            }
            if (c.singleton == DRMAS_SINGLETON_ZERO) return false;
            if (c.singleton == DRMAS_SINGLETON_RAW) {
                *out = raw_value;
                return true;
            }
            // fallback: the agent's group takes its place, unless the group is single too
        }
        if (group.count > 1) {
            *out = want_mean ? group.mean : group.std;
            return true;
        }
        if (c.singleton == DRMAS_SINGLETON_RAW) {
            *out = raw_value;
            return true;
        }
        return false;  // fallback and zero: a single group gives A = 0
    };

    Resolved r{0.0, 1.0, 0};
    double std = 1.0;
    if (!resolve(agent_mean, true, &r.mean)) r.zero = 1;
    if (c.scale_by_std && !resolve(agent_std, false, &std)) r.zero = 1;
    r.denom = std + c.eps;
    return r;
}

// Advantage of one row from its resolved segments. `s` is the row score, `x` the trajectory
// numerator (the trajectory's mean score under trajectory pooling, else s).
// Written as selects rather than early returns so that the per-row loop stays branch-free.
// When dividing by the std, a zero difference gives exactly +0 (a constant segment).
DRMAS_HD float apply_advantage(const drmas_norm_config& c, const Resolved& r, double s, double x) {
    const double diff = (trajectory_numerator(c) ? x : s) - r.mean;
    const double scaled = diff == 0.0 ? 0.0 : diff / r.denom;
    const double a = c.scale_by_std ? scaled : diff;
    return r.zero ? 0.0f : (float)a;
}

DRMAS_HD float row_advantage(const drmas_norm_config& c, double s, double x, SegStat agent, SegStat group) {
    return apply_advantage(c, resolve_segments(c, agent, group), s, x);
}

// Loss of one valid token, before the aggregation weight.
struct TokenLoss {
    float pg;        // policy-gradient loss
    float dpg;       // d pg / d logp
    float kl;        // KL estimator value (0 without a reference)
    float dkl;       // d kl / d logp
    float neg_kl;    // old_logp - logp, clamped as in the ratio (ppo_kl)
    int clipped;     // the clipped surrogate was strictly larger (clipfrac)
    int clipped_lower;  // A < 0 and the dual-clip bound won (clipfrac_lower)
};

DRMAS_HD float clampf_(float v, float lo, float hi) { return v < lo ? lo : (v > hi ? hi : v); }

// Gradient conventions follow LibTorch autograd of the same formula: clamp passes the
// gradient on its closed interval, max/min split it evenly on ties, where() routes it.
// The ratio and k3's e^x are fp64 exponentials rounded to fp32 on both backends: fp32 expf is
// correctly rounded on neither (up to 2 ulp on CUDA, ~0.5 ulp in glibc), so a ratio within an
// ulp of 1 - eps_low or 1 + eps_high could clip on one backend and not on the other; fp64 exp
// (<= 1 ulp of fp64 on both) rounds to the same float unless the exact value lies within ~2^-52
// of a rounding boundary, so the backends agree bit for bit in practice.
DRMAS_HD float exp_as_float(float x) { return (float)exp((double)x); }
DRMAS_HD TokenLoss token_loss(const drmas_loss_config& c, float logp, float old_logp, float adv,
                              bool has_ref, float ref_logp) {
    TokenLoss t;
    const float d = logp - old_logp;
    const float dc = clampf_(d, -20.0f, 20.0f);
    const float ratio = exp_as_float(dc);
    const float dratio = (d >= -20.0f && d <= 20.0f) ? ratio : 0.0f;
    const float lo = (float)(1.0 - c.clip_low), hi = (float)(1.0 + c.clip_high);
    const float pg1 = -adv * ratio;
    const float pg2 = -adv * clampf_(ratio, lo, hi);
    // max(pg1, pg2): where pg2 wins strictly the ratio is outside [lo, hi], so the clamp
    // blocks the gradient; on a tie both branches carry -A (half each).
    float pg = pg1 > pg2 ? pg1 : pg2;
    float dpg_dratio = pg2 > pg1 ? 0.0f : -adv;
    t.clipped = pg2 > pg1;
    t.clipped_lower = 0;
    if (c.dual_clip > 0.0 && adv < 0.0f) {
        const float pg3 = -adv * (float)c.dual_clip;
        t.clipped_lower = pg > pg3;
        if (pg > pg3) {
            pg = pg3;
            dpg_dratio = 0.0f;
        } else if (pg == pg3) {
            dpg_dratio *= 0.5f;
        }
    }
    t.pg = pg;
    t.dpg = dpg_dratio * dratio;
    t.neg_kl = -dc;
    t.kl = 0.0f;
    t.dkl = 0.0f;
    if (has_ref) {
        switch (c.kl_type) {
            case DRMAS_KL_K1:
                t.kl = logp - ref_logp;
                t.dkl = 1.0f;
                break;
            case DRMAS_KL_K2: {
                const float e = logp - ref_logp;
                t.kl = 0.5f * e * e;
                t.dkl = e;
                break;
            }
            case DRMAS_KL_K3: {
                const float e = ref_logp - logp;
                const float ec = clampf_(e, -20.0f, 20.0f);
                const float r = exp_as_float(ec);
                const float kld = r - ec - 1.0f;
                t.kl = clampf_(kld, -10.0f, 10.0f);
                const bool pass = (e >= -20.0f && e <= 20.0f) && (kld >= -10.0f && kld <= 10.0f);
                t.dkl = pass ? 1.0f - r : 0.0f;
                break;
            }
            default:
                break;
        }
    }
    return t;
}

// bfloat16 as the ABI carries it (the upper 16 bits of an fp32): widening is exact; narrowing rounds
// to nearest, ties to even (as __float2bfloat16_rn and torch do), NaN staying a quiet NaN of its sign.
DRMAS_HD float bf16_to_float(uint16_t b) {
    const uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
DRMAS_HD uint16_t float_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x0040u);  // NaN
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);  // inf stays inf; past bf16's largest finite: inf
}

}  // namespace drmas
