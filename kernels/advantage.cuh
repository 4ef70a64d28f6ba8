// advantage.cuh — Dr. MAS / GRPO advantage normalisation: two-pass fp64 statistics of the
// agent segments (uid, agent), of the trajectories and of the groups (over trajectory means
// or rows), then one thread per row applies drmas::row_advantage, the formula the CPU uses.
// Every kernel skips rows whose ids are out of range (RowIds), so that unvalidated input
// (drmas_advantage_trusted_f32) can never index outside the accumulators or the outputs; after
// validation no row is skipped and the guards change nothing.
// Sorted rows (as rollouts write them) take advantage_sorted_kernel instead: one warp per uid run,
// statistics in registers, one read of the rows; the kernels above are its fallback, gated on
// its verdict where no host synchronisation may decide (the trusted entry).
// defines: RowIds, row_ids, trajectory_uid, advantage_sums_kernel, trajectory_group_sums_kernel,
//          advantage_m2_kernel, trajectory_group_m2_kernel, advantage_kernel,
//          advantage_diagnostics_kernel, advantage_fill_kernel,
//          kSortedTileRows, kSortedMaxAgents, RunRow, add_by_agent, TrajCarry, traj_means,
//          normalise_sorted_run, advantage_sorted_kernel
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"
#include "drmas_math.h"
#include "validate.cuh"

namespace drmas {

// Per-segment accumulators of one statistic family (agent segments, groups or trajectories).
// `mean` holds the sum until segment_means_kernel has run.
struct SegmentAccumulators {
    unsigned long long* count;
    double* mean;
    double* m2;
};

struct ConstSegmentAccumulators {
    const unsigned long long* count;
    const double* mean;
    const double* m2;
};

// The ids of row i and whether all of them are in range (uid < num_uids, agent < num_agents and,
// with trajectories, traj < num_trajs). A row that is not `ok` takes part in no statistic.
struct RowIds {
    int64_t u, t, seg;
    bool ok;
};
__device__ __forceinline__ RowIds row_ids(int64_t i, const int32_t* __restrict__ uid, const int32_t* __restrict__ traj,
                                          const int32_t* __restrict__ agent, int64_t num_uids, int64_t num_trajs,
                                          int64_t num_agents) {
    const int32_t u = uid[i], k = agent[i];
    const int32_t t = traj != nullptr ? traj[i] : 0;
    const bool ok = id_in_range(u, num_uids) && id_in_range(k, num_agents) &&
                    (traj == nullptr || id_in_range(t, num_trajs));
    return ok ? RowIds{u, t, (int64_t)u * num_agents + k, true} : RowIds{0, 0, 0, false};
}

__device__ __forceinline__ SegStat seg_stat(ConstSegmentAccumulators a, int64_t s, int ddof) {
    const double c = (double)a.count[s];
    return SegStat{c, a.mean[s], std_from_m2(c, a.m2[s], ddof)};
}

// Pass 1 over rows: agent segment uid*K + agent always; trajectories (trajectory pooling,
// traj != NULL) or groups (row pooling) for the group statistics.
__global__ void advantage_sums_kernel(const unsigned long long* gate, int64_t n, const float* __restrict__ scores,
                                      const int32_t* __restrict__ uid,
                                      const int32_t* __restrict__ traj,
                                      const int32_t* __restrict__ agent, int64_t num_uids,
                                      int64_t num_trajs, int64_t num_agents,
                                      SegmentAccumulators agents, SegmentAccumulators groups,
                                      SegmentAccumulators trajs) {
    if (gated_off(gate)) return;
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const RowIds id = i < n ? row_ids(i, uid, traj, agent, num_uids, num_trajs, num_agents) : RowIds{0, 0, 0, false};
        const bool in = id.ok;
        const int64_t u = id.u, seg = id.seg;
        const double s = in ? (double)scores[i] : 0.0;
        segment_atomic_add(agents.count, seg, 1ull, in);
        segment_atomic_add(agents.mean, seg, s, in);
        if (traj != nullptr) {
            const int64_t t = id.t;
            segment_atomic_add(trajs.count, t, 1ull, in);
            segment_atomic_add(trajs.mean, t, s, in);
        } else {
            segment_atomic_add(groups.count, u, 1ull, in);
            segment_atomic_add(groups.mean, u, s, in);
        }
    }
}

// The group of trajectory t (the uid of its first row), or -1 when t is past the end, has no
// rows, or its first row is unknown or out of range.
__device__ __forceinline__ int64_t trajectory_uid(int64_t t, int64_t num_trajs, ConstSegmentAccumulators trajs,
                                                  const unsigned long long* __restrict__ first_row,
                                                  const int32_t* __restrict__ uid, int64_t num_uids) {
    if (t >= num_trajs || trajs.count[t] == 0) return -1;
    const unsigned long long f = first_row[t];
    if (f == kNoError) return -1;
    const int32_t u = uid[f];
    return id_in_range(u, num_uids) ? (int64_t)u : -1;
}

// Trajectory pooling, pass 1 of the groups: every non-empty trajectory adds its mean score
// S_t once to its group (the uid of its first row; all its rows agree, as validated). A
// trajectory with rows has a first row whose uid is in range (trajectory_first_row_kernel skips
// the same rows as advantage_sums_kernel and more); the check is kept so that this holds by
// construction here too.
__global__ void trajectory_group_sums_kernel(const unsigned long long* gate, int64_t num_trajs, ConstSegmentAccumulators trajs,
                                             const unsigned long long* __restrict__ first_row,
                                             const int32_t* __restrict__ uid, int64_t num_uids,
                                             SegmentAccumulators groups) {
    if (gated_off(gate)) return;
    for (int64_t base = warp_loop_start(); base < num_trajs; base += grid_stride()) {
        const int64_t t = base + lane_id();
        const int64_t u = trajectory_uid(t, num_trajs, trajs, first_row, uid, num_uids);
        const bool active = u >= 0;
        const double st = active ? trajs.mean[t] : 0.0;
        segment_atomic_add(groups.count, active ? u : 0, 1ull, active);
        segment_atomic_add(groups.mean, active ? u : 0, st, active);
    }
}

// Pass 2 over rows: agent M2 always, group M2 over rows under row pooling (traj == NULL).
__global__ void advantage_m2_kernel(const unsigned long long* gate, int64_t n, const float* __restrict__ scores,
                                    const int32_t* __restrict__ uid,
                                    const int32_t* __restrict__ traj,
                                    const int32_t* __restrict__ agent, int64_t num_uids,
                                    int64_t num_trajs, int64_t num_agents,
                                    SegmentAccumulators agents, SegmentAccumulators groups) {
    if (gated_off(gate)) return;
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const RowIds id = i < n ? row_ids(i, uid, traj, agent, num_uids, num_trajs, num_agents) : RowIds{0, 0, 0, false};
        const bool in = id.ok;
        const int64_t u = id.u, seg = id.seg;
        const double s = in ? (double)scores[i] : 0.0;
        double da = 0.0;
        if (in) {
            da = s - agents.mean[seg];
            da *= da;
        }
        segment_atomic_add(agents.m2, seg, da, in);
        if (traj == nullptr) {
            double dg = 0.0;
            if (in) {
                dg = s - groups.mean[u];
                dg *= dg;
            }
            segment_atomic_add(groups.m2, u, dg, in);
        }
    }
}

// Trajectory pooling, pass 2 of the groups: (S_t - mu_u)^2 per non-empty trajectory.
__global__ void trajectory_group_m2_kernel(const unsigned long long* gate, int64_t num_trajs, ConstSegmentAccumulators trajs,
                                           const unsigned long long* __restrict__ first_row,
                                           const int32_t* __restrict__ uid, int64_t num_uids,
                                           SegmentAccumulators groups) {
    if (gated_off(gate)) return;
    for (int64_t base = warp_loop_start(); base < num_trajs; base += grid_stride()) {
        const int64_t t = base + lane_id();
        const int64_t u = trajectory_uid(t, num_trajs, trajs, first_row, uid, num_uids);
        const bool active = u >= 0;
        double d = 0.0;
        if (active) {
            d = trajs.mean[t] - groups.mean[u];
            d *= d;
        }
        segment_atomic_add(groups.m2, active ? u : 0, d, active);
    }
}

// One thread per row: A_i = row_advantage(cfg, s_i, x_i, agent stat, group stat), with
// x_i = S_traj(i) under trajectory pooling (traj != NULL), else s_i. A row with an id out of
// range (unvalidated input only) gets NaN, so that bad input shows rather than training on.
__global__ void advantage_kernel(const unsigned long long* gate, drmas_norm_config cfg, int64_t n,
                                 const float* __restrict__ scores,
                                 const int32_t* __restrict__ uid,
                                 const int32_t* __restrict__ traj,
                                 const int32_t* __restrict__ agent, int64_t num_uids,
                                 int64_t num_trajs, int64_t num_agents,
                                 ConstSegmentAccumulators agents, ConstSegmentAccumulators groups,
                                 ConstSegmentAccumulators trajs, float* __restrict__ advantages) {
    if (gated_off(gate)) return;
    const int64_t stride = grid_stride();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const RowIds id = row_ids(i, uid, traj, agent, num_uids, num_trajs, num_agents);
        if (!id.ok) {
            advantages[i] = __int_as_float(0x7fc00000);
            continue;
        }
        const double s = (double)scores[i];
        const double x = traj != nullptr ? trajs.mean[id.t] : s;
        advantages[i] = row_advantage(cfg, s, x, seg_stat(agents, id.seg, cfg.ddof),
                                      seg_stat(groups, id.u, cfg.ddof));
    }
}

// diagnostics[f * S + u * K + k], S = num_uids * K: the agent segment's and its group's
// (count, mean, M2, std) and Lemma 4.2's inflation from population variances (NaN for an empty
// agent segment or a zero group std).
__global__ void advantage_diagnostics_kernel(int64_t num_uids, int64_t num_agents, int ddof,
                                             ConstSegmentAccumulators agents,
                                             ConstSegmentAccumulators groups,
                                             double* __restrict__ diagnostics) {
    const int64_t num_segments = num_uids * num_agents;
    const int64_t stride = grid_stride();
    const double nan_value = __longlong_as_double(0x7ff8000000000000LL);
    for (int64_t s = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; s < num_segments;
         s += stride) {
        const int64_t u = s / num_agents;
        const SegStat a = seg_stat(agents, s, ddof);
        const SegStat g = seg_stat(groups, u, ddof);
        double inflation = nan_value;
        if (a.count > 0 && g.std != 0.0) {
            const double shift = a.mean - g.mean;
            // population variances (M2 / n), as cpu.cpp's write_diag says why; the product rounded
            // apart, not contracted into an FMA (nvcc's default): the CPU's formula
            inflation = __dadd_rn(agents.m2[s] / a.count, __dmul_rn(shift, shift)) / (groups.m2[u] / g.count);
        }
        double* d = diagnostics + s;
        d[DRMAS_DIAG_AGENT_COUNT * num_segments] = a.count;
        d[DRMAS_DIAG_AGENT_MEAN * num_segments] = a.mean;
        d[DRMAS_DIAG_AGENT_M2 * num_segments] = agents.m2[s];
        d[DRMAS_DIAG_AGENT_STD * num_segments] = a.std;
        d[DRMAS_DIAG_GROUP_COUNT * num_segments] = g.count;
        d[DRMAS_DIAG_GROUP_MEAN * num_segments] = g.mean;
        d[DRMAS_DIAG_GROUP_M2 * num_segments] = groups.m2[u];
        d[DRMAS_DIAG_GROUP_STD * num_segments] = g.std;
        d[DRMAS_DIAG_INFLATION * num_segments] = inflation;
    }
}

// ---------------------------------------------------------------------------------------
// The fallback's set-up when it is gated (the trusted entry): ones (first-row slots) and
// zeros (accumulators) written by a kernel instead of two memsets, so that sorted rows, which
// never need them, cost an empty launch rather than a write of the accumulators.
__global__ void advantage_fill_kernel(const unsigned long long* gate, unsigned long long* __restrict__ ones,
                                      int64_t num_ones, unsigned long long* __restrict__ zeros, int64_t num_zeros) {
    if (gated_off(gate)) return;
    const int64_t stride = grid_stride();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < num_ones + num_zeros; i += stride) {
        if (i < num_ones)
            ones[i] = kNoError;
        else
            zeros[i - num_ones] = 0ull;  // the bits of 0.0 as well
    }
}

// ---------------------------------------------------------------------------------------
// One pass over sorted rows (uid never decreases; with trajectories, traj never decreases and
// changes wherever uid does: each uid's and each trajectory's rows are contiguous, as rollouts
// write them and as cpu.cpp's fast path requires). Each warp owns a tile of kSortedTileRows rows
// and normalises the uid runs that start in it, reading past the tile's end to finish the last;
// a run (at most kSortedLongRun rows) is read from memory once and its later passes hit L1. The
// statistics are two-pass fp64 like the CPU's, kept in registers: agent k's count, sum (then mean)
// and M2 in lane k (so at most kSortedMaxAgents agents), the group's in every lane, reduced by fixed
// shuffle trees in a fixed chunk order (so the result does not depend on scheduling, and a sum of
// equal values is exact: a constant segment keeps its value as mean and M2 = 0). No global atomics,
// no scratch.

constexpr int64_t kSortedTileRows = 256;
constexpr int64_t kSortedMaxAgents = 32;

// Row p + lane of a run chunk [p, min(p + 32, e)): its score, agent (wrapped into a lane number:
// ids are checked separately, and a shuffle must not leave the warp) and trajectory.
struct RunRow {
    int64_t i;
    bool in;
    double s;
    int k;
    int32_t t;
};
__device__ __forceinline__ RunRow run_row(int64_t p, int64_t e, const float* __restrict__ scores,
                                          const int32_t* __restrict__ traj, const int32_t* __restrict__ agent) {
    RunRow r;
    r.i = p + lane_id();
    r.in = r.i < e;
    r.s = r.in ? (double)scores[r.i] : 0.0;
    r.k = r.in ? (int)(agent[r.i] & 31) : 0;
    r.t = r.in && traj != nullptr ? traj[r.i] : 0;
    return r;
}

// Lane k: acc += the sum of v over the chunk's rows of agent k (and cnt += their number, when
// cnt is not NULL). One shuffle tree per agent present in the chunk.
__device__ __forceinline__ void add_by_agent(const RunRow& r, double v, double& acc, double* cnt) {
    unsigned todo = __ballot_sync(kFullMask, r.in);
    while (todo != 0u) {
        const int k = __shfl_sync(kFullMask, r.k, __ffs((int)todo) - 1);
        const bool mine = r.in && r.k == k;
        const unsigned sel = __ballot_sync(kFullMask, mine);
        const double total = warp_sum(mine ? v : 0.0);
        if (lane_id() == k) {
            acc += total;
            if (cnt != nullptr) *cnt += (double)__popc(sel);
        }
        todo &= ~sel;
    }
}

// The trajectory that the previous chunk of the run ended inside (open), with its mean score,
// already complete: the chunk's first rows continue it.
struct TrajCarry {
    int32_t t;
    double mean;
    bool open;
};

// Trajectory pooling, one chunk of a sorted run: *S = the mean score S_t of the row's trajectory
// and *last = whether the row is its trajectory's last. A segmented inclusive scan sums each
// trajectory's rows inside the chunk; a trajectory that goes on past the chunk is finished by
// reading ahead (whole warps, L1) and carried into the next chunk, so every row sees its complete
// S_t, summed in the same order in every pass. The group then counts each trajectory once, at its
// last row, as the CPU counts the trajectories of a run.
__device__ __forceinline__ void traj_means(const RunRow& r, int64_t p, int64_t e, const float* __restrict__ scores,
                                           const int32_t* __restrict__ traj, TrajCarry& carry, double* S, bool* last) {
    const int lane = lane_id();
    const unsigned active = __ballot_sync(kFullMask, r.in);  // lanes 0..last_lane (p < e)
    const int last_lane = 31 - __clz((int)active);
    const int32_t t_prev = __shfl_up_sync(kFullMask, r.t, 1);
    const int32_t t_next = __shfl_down_sync(kFullMask, r.t, 1);
    const bool head = r.in && (lane == 0 ? !(carry.open && r.t == carry.t) : r.t != t_prev);
    const bool tail = r.in && (lane == last_lane || r.t != t_next);
    const unsigned heads = __ballot_sync(kFullMask, head);
    const unsigned tails = __ballot_sync(kFullMask, tail);
    // this lane's segment of the chunk: lanes [h, g]
    const unsigned upto = lane == 31 ? ~0u : (2u << lane) - 1u;
    const int h = (heads & upto) != 0u ? 31 - __clz((int)(heads & upto)) : 0;
    const int g = __ffs((int)(tails & ~((1u << lane) - 1u))) - 1;  // -1 (unused) past the run
    double v = r.in ? r.s : 0.0;
    for (int d = 1; d < 32; d <<= 1) {
        const double u = __shfl_up_sync(kFullMask, v, (unsigned)d);
        if (lane - d >= h) v += u;
    }
    const double seg_sum = __shfl_sync(kFullMask, v, g);
    double mean = seg_sum / (double)(g - h + 1);
    const bool first_carried = (heads & 1u) == 0u;  // lane 0 continues the carried trajectory
    if (first_carried && h == 0) mean = carry.mean;

    // Does the chunk's last trajectory go on past it?
    const int32_t t_last = __shfl_sync(kFullMask, r.t, last_lane);
    int32_t t_after = 0;
    if (lane == 0 && p + 32 < e) t_after = traj[p + 32];
    t_after = __shfl_sync(kFullMask, t_after, 0);
    const bool open_last = p + 32 < e && t_after == t_last;
    const int h_last = __shfl_sync(kFullMask, h, last_lane);
    if (open_last && !(first_carried && h_last == 0)) {
        // read ahead: the rows of t_last after the chunk are the leading rows of the next chunks
        double sum = __shfl_sync(kFullMask, v, last_lane);
        double cnt = (double)(last_lane - h_last + 1);
        for (int64_t q = p + 32; q < e; q += 32) {
            const int64_t j = q + lane;
            const unsigned m = __ballot_sync(kFullMask, j < e && traj[j] == t_last);
            const int len = m == ~0u ? 32 : __ffs((int)~m) - 1;
            sum += warp_sum(lane < len ? (double)scores[j] : 0.0);
            cnt += (double)len;
            if (len < 32) break;
        }
        const double mean_last = sum / cnt;
        if (h == h_last) mean = mean_last;
        carry = TrajCarry{t_last, mean_last, true};
    } else if (!open_last) {
        carry.open = false;
    }  // else the carried trajectory spans the chunk and goes on: the carry stays
    *S = mean;
    *last = tail && !(open_last && lane == last_lane);
}

// Normalises the run [b, e) (all the rows of one uid) by one warp, as cpu_adv_kernels.inc's
// run_simd_inline does: agent sums; the group's sums where the mode reads them or a single agent
// segment falls back to its group; the second moments about those means; the advantages.
__device__ __forceinline__ void normalise_sorted_run(const drmas_norm_config& cfg, int64_t b, int64_t e,
                                                     const float* __restrict__ scores, const int32_t* __restrict__ traj,
                                                     const int32_t* __restrict__ agent, int64_t num_agents,
                                                     float* __restrict__ advantages) {
    const int lane = lane_id();
    const bool by_traj = traj != nullptr;
    bool need_group = reads_group(cfg, by_traj);
    double acount = 0.0, asum = 0.0, gcount = 0.0, gsum = 0.0;
    // Group sums of one chunk: every row, or each trajectory's mean once.
    auto add_group = [&](const RunRow& r, TrajCarry& carry) {
        if (by_traj) {
            double st;
            bool is_last;
            traj_means(r, r.i - lane, e, scores, traj, carry, &st, &is_last);
            gsum += warp_sum(is_last ? st : 0.0);
            gcount += (double)__popc(__ballot_sync(kFullMask, is_last));
        } else {
            gsum += warp_sum(r.s);
            gcount += (double)__popc(__ballot_sync(kFullMask, r.in));
        }
    };
    TrajCarry carry{0, 0.0, false};
    for (int64_t p = b; p < e; p += 32) {
        const RunRow r = run_row(p, e, scores, traj, agent);
        add_by_agent(r, r.s, asum, &acount);
        if (need_group) add_group(r, carry);
    }
    const double amean = acount > 0.0 ? asum / acount : 0.0;
    const bool single = __any_sync(kFullMask, lane < num_agents && acount == 1.0);
    if (!need_group && single && cfg.singleton == DRMAS_SINGLETON_FALLBACK) {
        need_group = true;
        carry = TrajCarry{0, 0.0, false};
        for (int64_t p = b; p < e; p += 32) add_group(run_row(p, e, scores, traj, agent), carry);
    }
    const double gmean = gcount > 0.0 ? gsum / gcount : 0.0;

    double am2 = 0.0, gm2 = 0.0;
    carry = TrajCarry{0, 0.0, false};
    for (int64_t p = b; p < e; p += 32) {
        const RunRow r = run_row(p, e, scores, traj, agent);
        const double da = r.s - __shfl_sync(kFullMask, amean, r.k);
        add_by_agent(r, da * da, am2, nullptr);
        if (!need_group) continue;
        double dg = r.s - gmean;
        bool counts = r.in;
        if (by_traj) {
            double st;
            traj_means(r, p, e, scores, traj, carry, &st, &counts);
            dg = st - gmean;
        }
        gm2 += warp_sum(counts ? dg * dg : 0.0);
    }

    // lane k resolves agent k's segment once; each row takes its agent's from that lane
    const SegStat group{gcount, gmean, std_from_m2(gcount, gm2, cfg.ddof)};
    const Resolved res = resolve_segments(cfg, SegStat{acount, amean, std_from_m2(acount, am2, cfg.ddof)}, group);
    const bool traj_x = by_traj && trajectory_numerator(cfg);
    carry = TrajCarry{0, 0.0, false};
    for (int64_t p = b; p < e; p += 32) {
        const RunRow r = run_row(p, e, scores, traj, agent);
        double x = r.s;
        if (traj_x) {
            bool is_last;
            traj_means(r, p, e, scores, traj, carry, &x, &is_last);
        }
        const Resolved mine{__shfl_sync(kFullMask, res.mean, r.k), __shfl_sync(kFullMask, res.denom, r.k),
                            __shfl_sync(kFullMask, res.zero, r.k)};
        if (r.in) advantages[r.i] = apply_advantage(cfg, mine, r.s, x);
    }
}

// The one-pass kernel (grid-stride over tiles, one warp a tile). Each warp first checks its
// tile's rows as sorted_and_valid does on the CPU (ids in range, order after the row before,
// with ballots); a tile that fails stores its first row into *not_sorted (plain stores: any
// value but kNoError opens the gated fallback, which then recomputes every advantage) and
// normalises nothing; so does a warp that finds a run longer than kSortedLongRun (validate.cuh). The
// kernel indexes memory by row only, never by an id, so unchecked input cannot make it read or write
// outside the arrays. num_agents <= kSortedMaxAgents.
__global__ void __launch_bounds__(kBlockSize)
advantage_sorted_kernel(drmas_norm_config cfg, int64_t n, const float* __restrict__ scores,
                        const int32_t* __restrict__ uid, const int32_t* __restrict__ traj,
                        const int32_t* __restrict__ agent, int64_t num_uids, int64_t num_trajs, int64_t num_agents,
                        float* __restrict__ advantages, unsigned long long* not_sorted) {
    const int lane = lane_id();
    const int64_t warps = (int64_t)gridDim.x * kWarpsPerBlock;
    for (int64_t tile = (int64_t)blockIdx.x * kWarpsPerBlock + (threadIdx.x >> 5); tile * kSortedTileRows < n;
         tile += warps) {
        const int64_t tb = tile * kSortedTileRows;
        const int64_t te = tb + kSortedTileRows < n ? tb + kSortedTileRows : n;
        bool bad = false;
        int64_t first_start = te;
        for (int64_t p = tb; p < te; p += 32) {
            const int64_t i = p + lane;
            const bool in = i < te;
            const int32_t u = in ? uid[i] : 0, k = in ? agent[i] : 0, t = in && traj != nullptr ? traj[i] : 0;
            int32_t up = __shfl_up_sync(kFullMask, u, 1), tp = __shfl_up_sync(kFullMask, t, 1);
            if (lane == 0 && i > 0) {  // lane 0 is in (p < te)
                up = uid[i - 1];
                tp = traj != nullptr ? traj[i - 1] : 0;
            }
            bool ok = id_in_range(u, num_uids) && id_in_range(k, num_agents) &&
                      (traj == nullptr || id_in_range(t, num_trajs));
            if (i > 0) ok = ok && !breaks_order(u, up, traj, t, tp);
            bad |= in && !ok;
            const unsigned starts = __ballot_sync(kFullMask, in && (i == 0 || u != up));
            if (starts != 0u && first_start == te) first_start = p + __ffs((int)starts) - 1;
        }
        if (__any_sync(kFullMask, bad)) {
            if (lane == 0) *(volatile unsigned long long*)not_sorted = (unsigned long long)tb;
            continue;
        }
        for (int64_t b = first_start; b < te;) {
            // the run's end: the first row after b with another uid, past the tile if need be; a run
            // longer than kSortedLongRun is not followed to its end but handed, with the whole call, to
            // the fallback (one warp would take it alone)
            const int32_t ub = uid[b];
            int64_t e = n;
            for (int64_t q = b + 1; q < n; q += 32) {
                if (q - b > kSortedLongRun) {
                    e = q;  // (a lower bound of the end: enough to know the run is long)
                    break;
                }
                const int64_t j = q + lane;
                const unsigned m = __ballot_sync(kFullMask, j < n && uid[j] != ub);
                if (m != 0u) {
                    e = q + __ffs((int)m) - 1;
                    break;
                }
            }
            if (e - b > kSortedLongRun) {
                if (lane == 0) *(volatile unsigned long long*)not_sorted = (unsigned long long)b;
                break;
            }
            normalise_sorted_run(cfg, b, e, scores, traj, agent, num_agents, advantages);
            b = e;
        }
    }
}

}  // namespace drmas
