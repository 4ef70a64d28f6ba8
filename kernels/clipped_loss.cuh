// clipped_loss.cuh — fused clipped PPO loss, forward and backward, in one launch. A warp per
// row (a block per row past kWarpRowMax tokens) counts the row's valid tokens (for
// seq-mean-token-mean), writes dL/dlogp for each of its tokens via drmas::token_loss (the CPU's
// formula), kLossTokensPerLane tokens a lane with their loads issued together, and stores per-row
// partial sums added in one canonical order; the last block to finish then adds the partials in
// row order (reduce_loss_partials, the same order as the separate clipped_loss_reduce_kernel), so
// the sums are run-to-run deterministic whichever block is last.
// defines: AdvantagePerToken, AdvantagePerRow, kLossTokensPerLane, kLossChunk, kWarpRowMax,
//          loss_chunk, loss_row_weight, store_loss_row, clipped_loss_row_warp, clipped_loss_row,
//          reduce_loss_partials, clipped_loss_kernel, clipped_loss_reduce_kernel
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"
#include "drmas_math.h"

namespace drmas {

// The advantage of token t of row r: one per token (drmas_clipped_loss_f32) or one per row (the
// fused LM head's chunks).
struct AdvantagePerToken {
    const float* a;
    __device__ float operator()(int64_t t, int64_t) const { return a[t]; }
};
struct AdvantagePerRow {
    const float* a;
    __device__ float operator()(int64_t, int64_t r) const { return a[r]; }
};

// The rows' sums are added in one canonical order, whoever computes the row: its tokens in chunks of
// kLossChunk from the row's first, each chunk by one warp (lane l adds its tokens l, l + 32, ...
// in order, then a butterfly adds the lanes), the chunk sums in chunk order. A row of up to
// kWarpRowMax tokens is one warp's (clipped_loss_row_warp: no barrier, no shared memory), a longer
// one the whole block's (clipped_loss_row: the warps take chunks in turn); both give the same bits,
// so the sums do not depend on the split, and the fused LM head's chunk kernel (which calls
// clipped_loss_row) gives drmas_clipped_loss_f32's sums bit for bit.
enum { kLossRowSums = 7 };
constexpr int64_t kLossTokensPerLane = 8;
constexpr int64_t kLossChunk = 32 * kLossTokensPerLane;
constexpr int64_t kWarpRowMax = 2048;

// Raw per-row sums: loss, pg, kl, tokens, clipped, clipped_lower, ppo_kl.
enum { kLoss, kPg, kKl, kTokens, kClipped, kLower, kPpoKl };

// One chunk [cb, min(cb + kLossChunk, end)) of row r by one warp (all 32 lanes): dL/dlogp of its
// tokens into grad, and its raw sums into out (every lane gets them). Each lane issues the loads of
// its kLossTokensPerLane tokens together, without waiting for their mask bytes; a select (never a
// multiply by the mask) drops a masked token's terms, so NaN padding cannot reach any result, and
// adding an exact 0.0 to a sum that started at +0.0 leaves it bit for bit as a branch would.
// logp and grad are indexed from `base`; ref_logp may be NULL (no KL), mask NULL (all valid).
template <class Adv>
__device__ __forceinline__ void loss_chunk(const drmas_loss_config& cfg, int64_t r, int64_t cb, int64_t end, int64_t base,
                                           float weight_f, const float* __restrict__ logp,
                                           const float* __restrict__ old_logp, Adv adv_of,
                                           const float* __restrict__ ref_logp, const uint8_t* __restrict__ mask,
                                           float* __restrict__ grad, double (&out)[kLossRowSums]) {
    const bool has_ref = ref_logp != nullptr;
    const float coef = (float)cfg.kl_coef;
    const int64_t t0 = cb + lane_id();
    float lp[kLossTokensPerLane], old[kLossTokensPerLane], a[kLossTokensPerLane], ref[kLossTokensPerLane];
    bool valid[kLossTokensPerLane];
#pragma unroll
    for (int m = 0; m < kLossTokensPerLane; ++m) {
        const int64_t t = t0 + 32 * m;
        const bool in = t < end;
        lp[m] = in ? logp[t - base] : 0.0f;
        old[m] = in ? old_logp[t] : 0.0f;
        a[m] = in ? adv_of(t, r) : 0.0f;
        ref[m] = in && has_ref ? ref_logp[t] : 0.0f;
        valid[m] = in && (mask == nullptr || mask[t] != 0);
    }
#pragma unroll
    for (int k = 0; k < kLossRowSums; ++k) out[k] = 0.0;
#pragma unroll
    for (int m = 0; m < kLossTokensPerLane; ++m) {
        const int64_t t = t0 + 32 * m;
        const TokenLoss tl = token_loss(cfg, lp[m], old[m], a[m], has_ref, ref[m]);
        // wf * (dpg + coef * dkl) in fp32 without FMA contraction, as on the host.
        const float g = __fmul_rn(weight_f, __fadd_rn(tl.dpg, __fmul_rn(coef, tl.dkl)));
        const bool v = valid[m];
        out[kLoss] += v ? (double)tl.pg + (double)coef * (double)tl.kl : 0.0;
        out[kPg] += v ? (double)tl.pg : 0.0;
        out[kKl] += v ? (double)tl.kl : 0.0;
        out[kTokens] += v ? 1.0 : 0.0;
        out[kClipped] += v ? (double)tl.clipped : 0.0;
        out[kLower] += v ? (double)tl.clipped_lower : 0.0;
        out[kPpoKl] += v ? (double)tl.neg_kl : 0.0;
        if (t < end) grad[t - base] = v ? g : 0.0f;
    }
#pragma unroll
    for (int k = 0; k < kLossRowSums; ++k) out[k] = warp_sum(out[k]);
}

// Row r's weight: 1 / normalizer, or 1 / normalizer / n_r (seq-mean-token-mean; a row without
// valid tokens never uses it). n_r is an integer count, exact in any order.
__device__ __forceinline__ double loss_row_weight(const drmas_loss_config& cfg, double n_r) {
    const double inv_norm = 1.0 / cfg.normalizer;
    if (cfg.per_row_mean == 0) return inv_norm;
    return n_r > 0.0 ? inv_norm / n_r : 0.0;
}

// The per-row partials into partials[k * num_rows + r], field-major with the fields of DRMAS_LOSS_*
// (LOSS, PG_LOSS, KL_LOSS aggregated with the row's weight).
__device__ __forceinline__ void store_loss_row(int64_t num_rows, int64_t r, double weight, const double (&acc)[kLossRowSums],
                                               double* __restrict__ partials) {
    double* p = partials + r;
    p[DRMAS_LOSS_LOSS * num_rows] = weight * acc[kLoss];
    p[DRMAS_LOSS_PG_LOSS * num_rows] = weight * acc[kPg];
    p[DRMAS_LOSS_KL_LOSS * num_rows] = weight * acc[kKl];
    p[DRMAS_LOSS_TOKENS * num_rows] = acc[kTokens];
    p[DRMAS_LOSS_CLIPPED * num_rows] = acc[kClipped];
    p[DRMAS_LOSS_CLIPPED_LOWER * num_rows] = acc[kLower];
    p[DRMAS_LOSS_PPO_KL * num_rows] = acc[kPpoKl];
    p[DRMAS_LOSS_KL * num_rows] = acc[kKl];
}

// Row r [row_begin, row_end) by one warp (all 32 lanes).
template <class Adv>
__device__ __forceinline__ void clipped_loss_row_warp(const drmas_loss_config& cfg, int64_t num_rows, int64_t r,
                                                      int64_t row_begin, int64_t row_end, const float* __restrict__ logp,
                                                      const float* __restrict__ old_logp, Adv adv_of,
                                                      const float* __restrict__ ref_logp, const uint8_t* __restrict__ mask,
                                                      float* __restrict__ grad, double* __restrict__ partials) {
    double n_r = (double)(row_end - row_begin);
    if (cfg.per_row_mean != 0 && mask != nullptr) {
        double valid = 0.0;
        for (int64_t t = row_begin + lane_id(); t < row_end; t += 32) valid += mask[t] != 0 ? 1.0 : 0.0;
        n_r = warp_sum(valid);
    }
    const double weight = loss_row_weight(cfg, n_r);
    double acc[kLossRowSums];
#pragma unroll
    for (int k = 0; k < kLossRowSums; ++k) acc[k] = 0.0;
    for (int64_t cb = row_begin; cb < row_end; cb += kLossChunk) {
        double part[kLossRowSums];
        loss_chunk(cfg, r, cb, row_end, 0, (float)weight, logp, old_logp, adv_of, ref_logp, mask, grad, part);
#pragma unroll
        for (int k = 0; k < kLossRowSums; ++k) acc[k] += part[k];
    }
    if (lane_id() == 0) store_loss_row(num_rows, r, weight, acc, partials);
}

// Row r's share of the clipped loss by the whole block (block-uniform, as __syncthreads requires):
// its tokens [begin, end) inside the row's [row_begin, row_end) (whose valid tokens are the
// seq-mean-token-mean divisor), logp and grad indexed from `base`. The warps take the chunks in
// turn, 8 at a time; thread 0 adds their sums in chunk order. ref_logp may be NULL (no KL), mask
// may be NULL (every token valid). smem: kLossRowSums * kWarpsPerBlock doubles.
template <class Adv>
__device__ void clipped_loss_row(const drmas_loss_config& cfg, int64_t num_rows, int64_t r, int64_t row_begin, int64_t row_end,
                                 int64_t begin, int64_t end, int64_t base, const float* __restrict__ logp,
                                 const float* __restrict__ old_logp, Adv adv_of, const float* __restrict__ ref_logp,
                                 const uint8_t* __restrict__ mask, float* __restrict__ grad, double* __restrict__ partials,
                                 double* smem) {
    const int warp = (int)(threadIdx.x >> 5);
    double n_r = (double)(row_end - row_begin);
    if (cfg.per_row_mean != 0 && mask != nullptr) {
        double valid[1] = {0.0};
        for (int64_t t = row_begin + threadIdx.x; t < row_end; t += blockDim.x) valid[0] += mask[t] != 0 ? 1.0 : 0.0;
        block_sum(valid, smem);
        if (threadIdx.x == 0) smem[0] = valid[0];
        __syncthreads();
        n_r = smem[0];
        __syncthreads();
    }
    const double weight = loss_row_weight(cfg, n_r);
    double acc[kLossRowSums];
#pragma unroll
    for (int k = 0; k < kLossRowSums; ++k) acc[k] = 0.0;
    const int64_t chunks = (end - begin + kLossChunk - 1) / kLossChunk;
    for (int64_t c0 = 0; c0 < chunks; c0 += kWarpsPerBlock) {
        const int64_t c = c0 + warp;
        if (c < chunks) {  // warp-uniform
            double part[kLossRowSums];
            loss_chunk(cfg, r, begin + c * kLossChunk, end, base, (float)weight, logp, old_logp, adv_of, ref_logp, mask, grad,
                       part);
            if (lane_id() == 0) {
#pragma unroll
                for (int k = 0; k < kLossRowSums; ++k) smem[k * kWarpsPerBlock + warp] = part[k];
            }
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            const int64_t here = chunks - c0 < kWarpsPerBlock ? chunks - c0 : kWarpsPerBlock;
            for (int64_t w = 0; w < here; ++w) {
#pragma unroll
                for (int k = 0; k < kLossRowSums; ++k) acc[k] += smem[k * kWarpsPerBlock + w];
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) store_loss_row(num_rows, r, weight, acc, partials);
}

// By one whole block of kBlockSize threads: thread j adds rows j, j + kBlockSize, ... in
// order, then block_sum combines the threads in a fixed tree. Writes all DRMAS_LOSS_SUMS sums
// (zeros when num_rows is 0). The partials are read through volatile: in the fused kernel
// other blocks wrote them during this launch, so they must not come from the read-only cache.
// smem: DRMAS_LOSS_SUMS * kWarpsPerBlock doubles.
__device__ __forceinline__ void reduce_loss_partials(int64_t num_rows, const volatile double* partials,
                                                     double* __restrict__ sums, double* smem) {
    double acc[DRMAS_LOSS_SUMS];
#pragma unroll
    for (int k = 0; k < DRMAS_LOSS_SUMS; ++k) acc[k] = 0.0;
    for (int64_t r = threadIdx.x; r < num_rows; r += blockDim.x) {
#pragma unroll
        for (int k = 0; k < DRMAS_LOSS_SUMS; ++k) acc[k] += partials[k * num_rows + r];
    }
    block_sum(acc, smem);
    if (threadIdx.x == 0) {
#pragma unroll
        for (int k = 0; k < DRMAS_LOSS_SUMS; ++k) sums[k] = acc[k];
    }
}

// One launch for the whole loss: one block per group of kWarpsPerBlock consecutive rows
// (grid-stride over the groups), a warp per row of up to kWarpRowMax tokens, the whole block for
// each longer row of the group; advantages per token or per row; then each block counts itself done in blocks_done (zeroed before the
// launch) after a __threadfence() has made its partials visible, and the block that counts
// last (gridDim.x - 1) reduces all partials into sums. Any grid size works, num_rows = 0
// included (the one block only writes zero sums).
// Row r's tokens [begin, end). The host-offsets entries never read the device offsets back (their
// host copy, which must hold the same values, was validated instead): a device copy that differs
// makes its bad rows empty here rather than read or write outside the num_tokens token arrays.
__device__ __forceinline__ void loss_row_span(const int64_t* __restrict__ row_offsets, int64_t r, int64_t num_tokens,
                                              int64_t* begin, int64_t* end) {
    const int64_t b = row_offsets[r], e = row_offsets[r + 1];
    const bool ok = b >= 0 && b <= e && e <= num_tokens;
    *begin = ok ? b : 0;
    *end = ok ? e : 0;
}

template <class Adv>
__global__ void __launch_bounds__(kBlockSize)
clipped_loss_kernel(drmas_loss_config cfg, int64_t num_rows, int64_t num_tokens,
                    const int64_t* __restrict__ row_offsets, const float* __restrict__ logp,
                    const float* __restrict__ old_logp, Adv adv_of,
                    const float* __restrict__ ref_logp, const uint8_t* __restrict__ mask,
                    float* __restrict__ grad, double* partials, unsigned* blocks_done,
                    double* __restrict__ sums) {
    static_assert(DRMAS_LOSS_SUMS >= kLossRowSums, "smem serves both the rows and the reduction");
    __shared__ double smem[DRMAS_LOSS_SUMS * kWarpsPerBlock];
    const int warp = (int)(threadIdx.x >> 5);
    for (int64_t g = blockIdx.x; g * kWarpsPerBlock < num_rows; g += gridDim.x) {
        const int64_t first = g * kWarpsPerBlock;
        const int64_t last = first + kWarpsPerBlock < num_rows ? first + kWarpsPerBlock : num_rows;
        if (first + warp < last) {  // warp-uniform
            const int64_t r = first + warp;
            int64_t begin, end;
            loss_row_span(row_offsets, r, num_tokens, &begin, &end);
            if (end - begin <= kWarpRowMax)
                clipped_loss_row_warp(cfg, num_rows, r, begin, end, logp, old_logp, adv_of, ref_logp, mask, grad, partials);
        }
        for (int64_t r = first; r < last; ++r) {  // the group's long rows, by the whole block
            int64_t begin, end;
            loss_row_span(row_offsets, r, num_tokens, &begin, &end);
            if (end - begin > kWarpRowMax)
                clipped_loss_row(cfg, num_rows, r, begin, end, begin, end, 0, logp, old_logp, adv_of, ref_logp, mask, grad,
                                 partials, smem);
        }
    }
    __threadfence();  // this block's partials (thread 0's stores) before its count
    __syncthreads();
    if (threadIdx.x == 0) smem[0] = atomicAdd(blocks_done, 1u) == gridDim.x - 1 ? 1.0 : 0.0;
    __syncthreads();
    const bool last = smem[0] != 0.0;
    __syncthreads();  // smem is reused by the reduction
    if (!last) return;
    __threadfence();  // every other block's partials, counted before ours
    reduce_loss_partials(num_rows, partials, sums, smem);
}

// The same reduction as its own single-block launch (the fused LM head's chunks).
__global__ void __launch_bounds__(kBlockSize)
clipped_loss_reduce_kernel(int64_t num_rows, const double* __restrict__ partials,
                           double* __restrict__ sums) {
    __shared__ double smem[DRMAS_LOSS_SUMS * kWarpsPerBlock];
    reduce_loss_partials(num_rows, partials, sums, smem);
}

}  // namespace drmas
