// clipped_loss.cuh — fused clipped PPO loss, forward and backward, in one launch. One block
// per row counts the row's valid tokens (for seq-mean-token-mean), writes dL/dlogp for each of
// its tokens via drmas::token_loss (the CPU's formula) and stores fixed-order per-row partial
// sums; the last block to finish then adds the partials in row order (reduce_loss_partials, the
// same order as the separate clipped_loss_reduce_kernel), so the sums are run-to-run
// deterministic whichever block is last.
// defines: AdvantagePerToken, AdvantagePerRow, clipped_loss_row, reduce_loss_partials,
//          clipped_loss_kernel, clipped_loss_reduce_kernel
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

// Row r's share of the clipped loss, by the whole block (block-uniform, as block_sum's
// __syncthreads requires): its tokens [begin, end) inside the row's [row_begin, row_end) (whose
// valid tokens are the seq-mean-token-mean divisor), logp and grad indexed from `base`; the
// per-row partials into partials[k * num_rows + r], field-major with the fields of DRMAS_LOSS_*
// (LOSS, PG_LOSS, KL_LOSS aggregated with the row's weight). ref_logp may be NULL (no KL), mask may
// be NULL (every token valid). Every token's values are loaded without waiting for its mask byte
// (the loads overlap), and a select (never a multiply by the mask) drops a masked token's terms,
// so NaN padding cannot reach any result. smem: kLossRowSums * kWarpsPerBlock doubles.
enum { kLossRowSums = 7 };
template <class Adv>
__device__ void clipped_loss_row(const drmas_loss_config& cfg, int64_t num_rows, int64_t r, int64_t row_begin, int64_t row_end,
                                 int64_t begin, int64_t end, int64_t base, const float* __restrict__ logp,
                                 const float* __restrict__ old_logp, Adv adv_of, const float* __restrict__ ref_logp,
                                 const uint8_t* __restrict__ mask, float* __restrict__ grad, double* __restrict__ partials,
                                 double* smem) {
    // Raw per-row sums, reduced over the block before the row weight is applied (as the CPU
    // backend does): loss, pg, kl, tokens, clipped, clipped_lower, ppo_kl.
    enum { kLoss, kPg, kKl, kTokens, kClipped, kLower, kPpoKl };
    const bool has_ref = ref_logp != nullptr;
    const double inv_norm = 1.0 / cfg.normalizer;
    const float coef = (float)cfg.kl_coef;
    // Weight of this row's tokens: 1 / normalizer, or 1 / normalizer / n_r.
    double weight = inv_norm;
    if (cfg.per_row_mean != 0) {
        double valid[1] = {0.0};
        if (mask == nullptr) {
            valid[0] = threadIdx.x == 0 ? (double)(row_end - row_begin) : 0.0;
        } else {
            for (int64_t t = row_begin + threadIdx.x; t < row_end; t += blockDim.x) valid[0] += mask[t] != 0 ? 1.0 : 0.0;
        }
        block_sum(valid, smem);
        if (threadIdx.x == 0) smem[0] = valid[0];
        __syncthreads();
        const double n_r = smem[0];
        __syncthreads();
        // n_r = 0: the row has no valid token, so the weight is never used.
        weight = n_r > 0.0 ? inv_norm / n_r : 0.0;
    }
    const float weight_f = (float)weight;
    double acc[kLossRowSums];
#pragma unroll
    for (int k = 0; k < kLossRowSums; ++k) acc[k] = 0.0;
    for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) {
        // Loads first (in bounds for every token of the row), the mask only selects: adding an
        // exact 0.0 to a sum that started at +0.0 leaves it bit for bit as a branch would.
        const float lp = logp[t - base], old = old_logp[t], a = adv_of(t, r);
        const float ref = has_ref ? ref_logp[t] : 0.0f;
        const bool valid = mask == nullptr || mask[t] != 0;
        const TokenLoss tl = token_loss(cfg, lp, old, a, has_ref, ref);
        // wf * (dpg + coef * dkl) in fp32 without FMA contraction, as on the host.
        const float g = __fmul_rn(weight_f, __fadd_rn(tl.dpg, __fmul_rn(coef, tl.dkl)));
        acc[kLoss] += valid ? (double)tl.pg + (double)coef * (double)tl.kl : 0.0;
        acc[kPg] += valid ? (double)tl.pg : 0.0;
        acc[kKl] += valid ? (double)tl.kl : 0.0;
        acc[kTokens] += valid ? 1.0 : 0.0;
        acc[kClipped] += valid ? (double)tl.clipped : 0.0;
        acc[kLower] += valid ? (double)tl.clipped_lower : 0.0;
        acc[kPpoKl] += valid ? (double)tl.neg_kl : 0.0;
        grad[t - base] = valid ? g : 0.0f;
    }
    block_sum(acc, smem);
    if (threadIdx.x == 0) {
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

// One launch for the whole loss: one block per row (grid-stride over the rows), advantages per
// token or per row; then each block counts itself done in blocks_done (zeroed before the
// launch) after a __threadfence() has made its partials visible, and the block that counts
// last (gridDim.x - 1) reduces all partials into sums. Any grid size works, num_rows = 0
// included (the one block only writes zero sums).
template <class Adv>
__global__ void __launch_bounds__(kBlockSize)
clipped_loss_kernel(drmas_loss_config cfg, int64_t num_rows,
                    const int64_t* __restrict__ row_offsets, const float* __restrict__ logp,
                    const float* __restrict__ old_logp, Adv adv_of,
                    const float* __restrict__ ref_logp, const uint8_t* __restrict__ mask,
                    float* __restrict__ grad, double* partials, unsigned* blocks_done,
                    double* __restrict__ sums) {
    static_assert(DRMAS_LOSS_SUMS >= kLossRowSums, "smem serves both the rows and the reduction");
    __shared__ double smem[DRMAS_LOSS_SUMS * kWarpsPerBlock];
    for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
        const int64_t begin = row_offsets[r], end = row_offsets[r + 1];
        clipped_loss_row(cfg, num_rows, r, begin, end, begin, end, 0, logp, old_logp, adv_of, ref_logp,
                         mask, grad, partials, smem);
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
