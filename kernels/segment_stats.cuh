// segment_stats.cuh — two-pass fp64 segment statistics: pass 1 counts and sums per segment,
// a per-segment pass turns sums into means, pass 2 sums (x - mean)^2, a last pass takes the
// std. Two passes (not E[x^2] - E[x]^2) keep a constant segment's M2 exactly 0.
// defines: segment_sums_kernel, segment_means_kernel, segment_m2_kernel, segment_std_kernel
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"
#include "drmas_math.h"

namespace drmas {

// Pass 1: count[id] += 1, sum[id] += x (both preset to 0). Ids are already validated.
__global__ void segment_sums_kernel(int64_t n, const float* __restrict__ values,
                                    const int32_t* __restrict__ ids,
                                    unsigned long long* __restrict__ count,
                                    double* __restrict__ sum) {
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const bool in = i < n;
        const int64_t seg = in ? ids[i] : 0;
        const double x = in ? (double)values[i] : 0.0;
        segment_atomic_add(count, seg, 1ull, in);
        segment_atomic_add(sum, seg, x, in);
    }
}

// mean_inout holds the sums on entry and the means on exit; empty segments get mean 0.
// A sum of k equal floats is exact in fp64 (k < 2^29), so a constant segment's mean is
// exactly its value. gate: gated_off (drmas_common.cuh); NULL always runs.
__global__ void segment_means_kernel(const unsigned long long* gate, int64_t num_segments,
                                     const unsigned long long* __restrict__ count,
                                     double* __restrict__ mean_inout) {
    if (gated_off(gate)) return;
    const int64_t stride = grid_stride();
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < num_segments;
         s += stride) {
        const unsigned long long c = count[s];
        mean_inout[s] = c > 0 ? mean_inout[s] / (double)c : 0.0;
    }
}

// Pass 2: m2[id] += (x - mean[id])^2 (m2 preset to 0).
__global__ void segment_m2_kernel(int64_t n, const float* __restrict__ values,
                                  const int32_t* __restrict__ ids,
                                  const double* __restrict__ mean, double* __restrict__ m2) {
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const bool in = i < n;
        const int64_t seg = in ? ids[i] : 0;
        double d = 0.0;
        if (in) {
            d = (double)values[i] - mean[seg];
            d *= d;
        }
        segment_atomic_add(m2, seg, d, in);
    }
}

// std[s] = std_from_m2(count, m2, ddof): 0 when count <= ddof (empty segments included).
__global__ void segment_std_kernel(int64_t num_segments,
                                   const unsigned long long* __restrict__ count,
                                   const double* __restrict__ m2, int ddof,
                                   double* __restrict__ std_out) {
    const int64_t stride = grid_stride();
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < num_segments;
         s += stride)
        std_out[s] = std_from_m2((double)count[s], m2[s], ddof);
}

}  // namespace drmas
