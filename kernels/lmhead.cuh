// lmhead.cuh — the fused LM head (drmas_lmhead_logprobs_f32/_bf16, drmas_lmhead_chunk_f32/_bf16) on
// CUDA, the twin of lmhead_logprobs_cpu / lmhead_chunk_cpu. Logits are fp32 or bf16 (uint16_t bits),
// read through logit_value (bf16 widened exactly) and dL/dz written through store_logit (rounded to
// bf16 to nearest even), so that a bf16 call computes what the fp32 one does on the widened values.
// One block per token of the chunk computes its softmax statistics over the vocabulary (block max, then fp64 sums of e^{z - max} and
// e^{z - max}(z - max) in a fixed order); one block per row computes the clipped loss of its tokens
// inside the chunk (clipped_loss_row, the clipped loss kernel's own, with the row clamped to the
// chunk and the per-row-mean count over the whole row); one block per token writes dL/dz over its logits.
// defines: LmHeadValid, logit_value, store_logit, lmhead_stats_kernel, lmhead_stats_bf16_kernel,
//          lmhead_loss_kernel, lmhead_grad_kernel, lmhead_entropy_sum_kernel
#pragma once

#include <float.h>
#include <math.h>
#include <stdint.h>

#include "clipped_loss.cuh"
#include "drmas_common.cuh"
#include "drmas_math.h"

namespace drmas {

// Token c0 + i of the chunk is valid when a row owns it ([first, last): rows are back to back) and
// its mask (may be NULL) is not 0.
struct LmHeadValid {
    int64_t c0, first, last;
    const uint8_t* mask;
};

__device__ __forceinline__ bool lmhead_valid(const LmHeadValid& v, int64_t i) {
    const int64_t t = v.c0 + i;
    return t >= v.first && t < v.last && (v.mask == nullptr || v.mask[t] != 0);
}

// A logit as fp32, and dL/dz stored in the logits' type (host and device: the launchers widen the
// first non-finite logit for its message).
DRMAS_HD float logit_value(float x) { return x; }
DRMAS_HD float logit_value(uint16_t b) { return bf16_to_float(b); }
DRMAS_HD void store_logit(float* p, float v) { *p = v; }
DRMAS_HD void store_logit(uint16_t* p, float v) { *p = float_to_bf16(v); }

// Per valid token i: lse[i], entropy[i], logp[i] (0 for invalid tokens). slots[0]: the first token
// whose target is outside [0, V); slots[1]: the first flat index i·V + v of a non-finite logit.
// The body of lmhead_stats_kernel (fp32 logits) and lmhead_stats_bf16_kernel, which own its shared
// memory (smax[kWarpsPerBlock], ssum[2 kWarpsPerBlock]): the emulator wants __shared__ in plain kernels.
template <class L>
__device__ __forceinline__ void lmhead_stats_block(int64_t n, int64_t V, const L* __restrict__ logits,
                                                   const int64_t* __restrict__ targets, LmHeadValid valid,
                                                   float* __restrict__ lse, float* __restrict__ entropy,
                                                   float* __restrict__ logp, unsigned long long* __restrict__ slots,
                                                   float* smax, double* ssum) {
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {  // block-uniform
        if (!lmhead_valid(valid, i)) {
            if (threadIdx.x == 0) lse[i] = entropy[i] = logp[i] = 0.0f;
            continue;
        }
        const int64_t y = targets[valid.c0 + i];
        if (threadIdx.x == 0 && (y < 0 || y >= V)) atomicMin(&slots[0], (unsigned long long)i);
        const L* z = logits + i * V;
        float m = -INFINITY;
        int64_t bad = -1;
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float x = logit_value(z[v]);
            if (!(fabsf(x) <= FLT_MAX)) {
                if (bad < 0) bad = v;
            } else {
                m = fmaxf(m, x);
            }
        }
        if (bad >= 0) atomicMin(&slots[1], (unsigned long long)(i * V + bad));
        for (int offset = 16; offset > 0; offset >>= 1) m = fmaxf(m, __shfl_xor_sync(kFullMask, m, offset));
        if (lane_id() == 0) smax[threadIdx.x >> 5] = m;
        __syncthreads();
        float mx = smax[0];
        for (int w = 1; w < kWarpsPerBlock; ++w) mx = fmaxf(mx, smax[w]);
        double acc[2] = {0.0, 0.0};  // sum e^{z - max}, sum e^{z - max} (z - max)
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float d = __fadd_rn(logit_value(z[v]), -mx);
            const float e = expf(d);
            acc[0] += (double)e;
            acc[1] += e == 0.0f ? 0.0 : (double)__fmul_rn(e, d);  // not 0 * -inf where z - max overflows
        }
        block_sum(acc, ssum);  // synchronises: smax may be rewritten by the next token
        if (threadIdx.x == 0) {
            const double ls = log(acc[0]);
            const float l = (float)((double)mx + ls);
            lse[i] = l;
            entropy[i] = (float)(ls - acc[1] / acc[0]);
            logp[i] = (y >= 0 && y < V) ? __fadd_rn(logit_value(z[y]), -l) : 0.0f;
        }
    }
}

__global__ void __launch_bounds__(kBlockSize)
lmhead_stats_kernel(int64_t n, int64_t V, const float* __restrict__ logits, const int64_t* __restrict__ targets,
                    LmHeadValid valid, float* __restrict__ lse, float* __restrict__ entropy, float* __restrict__ logp,
                    unsigned long long* __restrict__ slots) {
    __shared__ float smax[kWarpsPerBlock];
    __shared__ double ssum[2 * kWarpsPerBlock];
    lmhead_stats_block(n, V, logits, targets, valid, lse, entropy, logp, slots, smax, ssum);
}

__global__ void __launch_bounds__(kBlockSize)
lmhead_stats_bf16_kernel(int64_t n, int64_t V, const uint16_t* __restrict__ logits, const int64_t* __restrict__ targets,
                         LmHeadValid valid, float* __restrict__ lse, float* __restrict__ entropy, float* __restrict__ logp,
                         unsigned long long* __restrict__ slots) {
    __shared__ float smax[kWarpsPerBlock];
    __shared__ double ssum[2 * kWarpsPerBlock];
    lmhead_stats_block(n, V, logits, targets, valid, lse, entropy, logp, slots, smax, ssum);
}

// The clipped loss of the rows' tokens inside the chunk [c0, c1): clipped_loss_row, as
// clipped_loss_kernel runs it, with the row clamped to the chunk, logp and grad indexed from c0 and
// one advantage per row (so one chunk of all tokens gives drmas_clipped_loss_f32's sums bit for bit).
__global__ void __launch_bounds__(kBlockSize)
lmhead_loss_kernel(drmas_loss_config cfg, int64_t num_rows, int64_t num_tokens, const int64_t* __restrict__ row_offsets, int64_t c0,
                   int64_t c1, const float* __restrict__ logp, const float* __restrict__ old_logp,
                   const float* __restrict__ advantages, const float* __restrict__ ref_logp, const uint8_t* __restrict__ mask,
                   float* __restrict__ grad, double* __restrict__ partials) {
    __shared__ double smem[kLossRowSums * kWarpsPerBlock];
    for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
        // (the async form's device offsets may differ from the host copy it validated: such a row is empty, as in
        // clipped_loss_kernel; the per-row mean counts a row's valid tokens over the whole row, through mask)
        int64_t row_begin, row_end;
        loss_row_span(row_offsets, r, num_tokens, &row_begin, &row_end);
        const int64_t begin = row_begin > c0 ? row_begin : c0;
        const int64_t end = row_end < c1 ? row_end : c1;
        clipped_loss_row(cfg, num_rows, r, row_begin, row_end, begin, end, c0, logp, old_logp, AdvantagePerRow{advantages},
                         ref_logp, mask, grad, partials, smem);
    }
}

// dL/dz over the chunk's logits, in place: g (1[v = y] - p) + ew p (log p + H) for valid tokens (the
// CPU's order of operations, without contraction; below FLT_MIN in magnitude, 0), 0 for the others;
// in fp32, then stored as L.
template <class L>
__global__ void __launch_bounds__(kBlockSize)
lmhead_grad_kernel(int64_t n, int64_t V, L* __restrict__ logits, const int64_t* __restrict__ targets, LmHeadValid valid,
                   const float* __restrict__ lse, const float* __restrict__ entropy, const float* __restrict__ grad, float ew) {
    for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
        L* z = logits + i * V;
        if (!lmhead_valid(valid, i)) {
            for (int64_t v = threadIdx.x; v < V; v += blockDim.x) store_logit(z + v, 0.0f);
            continue;
        }
        const int64_t y = targets[valid.c0 + i];
        const float l = lse[i], h = entropy[i], g = grad[i];
        for (int64_t v = threadIdx.x; v < V; v += blockDim.x) {
            const float lpv = __fadd_rn(logit_value(z[v]), -l);
            const float p = expf(lpv);
            float d = __fadd_rn(__fmul_rn(-g, p), __fmul_rn(__fmul_rn(ew, p), __fadd_rn(lpv, h)));
            // as the CPU: no denormals for the products that read dL/dz, and 0 where p is 0
            if (p == 0.0f || fabsf(d) < FLT_MIN) d = 0.0f;
            if (v == y) {
                d = __fadd_rn(d, g);
                if (fabsf(d) < FLT_MIN) d = 0.0f;  // (the CPU flushes the target's entry after adding g too)
            }
            store_logit(z + v, d);
        }
    }
}

// sums[DRMAS_LMHEAD_ENTROPY] = the entropies of the chunk (0 for invalid tokens), in a fixed order. One block.
__global__ void __launch_bounds__(kBlockSize)
lmhead_entropy_sum_kernel(int64_t n, const float* __restrict__ entropy, double* __restrict__ sums) {
    __shared__ double smem[kWarpsPerBlock];
    double acc[1] = {0.0};
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) acc[0] += (double)entropy[i];
    block_sum(acc, smem);
    if (threadIdx.x == 0) sums[DRMAS_LMHEAD_ENTROPY] = acc[0];
}

}  // namespace drmas
