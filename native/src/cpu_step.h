// cpu_step.h — what the CPU decoding step's other ops (drmas_rms_norm_f32, drmas_swiglu_f32,
// drmas_sample_f32) share between cpu.cpp (the checks' results, the threads, the sampler's
// top-k / top-p / CDF logic) and their per-row vector loops in cpu_step_kernels.inc, which are
// compiled twice with the loss's loops (cpu_loss_v2.cpp for x86-64-v2, cpu_loss_v3.cpp for AVX2) and
// picked at run time like them. Both compute bit-identical results: the same operations in the same
// order, eight float lanes (or two times four double lanes) on either, no fused multiply-add.
// defines: StepMax, StepIsa, step_isa
#pragma once

#include <stdint.h>

namespace drmas {

// The largest non-NaN value of a row (-inf if there is none) and whether the row holds a NaN.
struct StepMax {
    float max;
    bool nan;
};

struct StepIsa {
    const char* name;
    // One row of RMSNorm: x[c] += residual[c] first when residual is not NULL (written back to x),
    // then out[c] = (x[c] * f) * w[c] with f = (float)(1 / sqrt(sum x^2 / n + eps)), the sum in fp64,
    // eight lanes then the lanes in a fixed order. out may be x.
    void (*rms_norm_row)(float* x, const float* residual, const float* w, int64_t n, double eps, float* out);
    // One row of SwiGLU: out[c] = silu(gate[c]) * up[c], silu(g) = g / (1 + e^-g) in float (0 for
    // g = -inf). out may be gate or up.
    void (*swiglu_row)(const float* gate, const float* up, int64_t n, float* out);
    // The sampler's scaled row: s[c] = z[c] / t in float when s is not NULL (else the row is read as
    // it is), and the maximum and NaN flag of the result.
    StepMax (*scale_max_row)(const float* z, int64_t n, float t, float* s);
    // e[c] = e^(s[c] - m) in fp64 (0 for s[c] = -inf; m is the row's maximum, so every argument is
    // <= 0) when e is not NULL, and their sum, in a fixed order of lanes.
    double (*exp_row)(const float* s, int64_t n, double m, double* e);
};
extern const StepIsa kStepIsaV2, kStepIsaV3;

// The loops for this CPU, chosen as adv_isa() chooses (DRMAS_CPU_ISA=v2 forces the baseline).
const StepIsa& step_isa();

}  // namespace drmas
