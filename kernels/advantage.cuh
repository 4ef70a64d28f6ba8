// advantage.cuh — Dr. MAS / GRPO advantage normalisation: two-pass fp64 statistics of the
// agent segments (uid, agent), of the trajectories and of the groups (over trajectory means
// or rows), then one thread per row applies drmas::row_advantage, the formula the CPU uses.
// Every kernel skips rows whose ids are out of range (RowIds), so that unvalidated input
// (drmas_advantage_trusted_f32) can never index outside the accumulators or the outputs; after
// validation no row is skipped and the guards change nothing.
// defines: RowIds, row_ids, trajectory_uid, advantage_sums_kernel, trajectory_group_sums_kernel,
//          advantage_m2_kernel,
//          trajectory_group_m2_kernel, advantage_kernel, advantage_diagnostics_kernel
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"
#include "drmas_math.h"

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
__global__ void advantage_sums_kernel(int64_t n, const float* __restrict__ scores,
                                      const int32_t* __restrict__ uid,
                                      const int32_t* __restrict__ traj,
                                      const int32_t* __restrict__ agent, int64_t num_uids,
                                      int64_t num_trajs, int64_t num_agents,
                                      SegmentAccumulators agents, SegmentAccumulators groups,
                                      SegmentAccumulators trajs) {
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
__global__ void trajectory_group_sums_kernel(int64_t num_trajs, ConstSegmentAccumulators trajs,
                                             const unsigned long long* __restrict__ first_row,
                                             const int32_t* __restrict__ uid, int64_t num_uids,
                                             SegmentAccumulators groups) {
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
__global__ void advantage_m2_kernel(int64_t n, const float* __restrict__ scores,
                                    const int32_t* __restrict__ uid,
                                    const int32_t* __restrict__ traj,
                                    const int32_t* __restrict__ agent, int64_t num_uids,
                                    int64_t num_trajs, int64_t num_agents,
                                    SegmentAccumulators agents, SegmentAccumulators groups) {
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
__global__ void trajectory_group_m2_kernel(int64_t num_trajs, ConstSegmentAccumulators trajs,
                                           const unsigned long long* __restrict__ first_row,
                                           const int32_t* __restrict__ uid, int64_t num_uids,
                                           SegmentAccumulators groups) {
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
__global__ void advantage_kernel(drmas_norm_config cfg, int64_t n,
                                 const float* __restrict__ scores,
                                 const int32_t* __restrict__ uid,
                                 const int32_t* __restrict__ traj,
                                 const int32_t* __restrict__ agent, int64_t num_uids,
                                 int64_t num_trajs, int64_t num_agents,
                                 ConstSegmentAccumulators agents, ConstSegmentAccumulators groups,
                                 ConstSegmentAccumulators trajs, float* __restrict__ advantages) {
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
// (count, mean, M2, std) and Lemma 4.2's inflation (NaN for an empty agent segment or a
// zero group std).
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
            inflation = (a.std * a.std + shift * shift) / (g.std * g.std);
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

}  // namespace drmas
