// validate.cuh — the data checks that run on the device before any output is written: ids in
// range, finite values, monotone row offsets, one uid per trajectory (and whether the rows are
// sorted, which picks the one-pass advantage kernel). Each check keeps its own
// first-bad-index slot (atomicMin), so the host can report them in the CPU backend's order.
// defines: validate_segment_rows_kernel, validate_advantage_rows_kernel,
//          trajectory_first_row_kernel, trajectory_consistency_kernel,
//          validate_row_offsets_kernel (+ the slot numbers of each)
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"

namespace drmas {

// Slots of validate_segment_rows_kernel.
enum SegmentCheck { kSegBadId = 0, kSegBadValue = 1, kSegChecks = 2 };

__global__ void validate_segment_rows_kernel(int64_t n, const float* __restrict__ values,
                                             const int32_t* __restrict__ ids,
                                             int64_t num_segments,
                                             unsigned long long* __restrict__ first_bad) {
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const bool in = i < n;
        const int32_t id = in ? ids[i] : 0;
        const float v = in ? values[i] : 0.0f;
        record_first_bad(first_bad + kSegBadId, i, in && (id < 0 || (int64_t)id >= num_segments));
        record_first_bad(first_bad + kSegBadValue, i, in && !isfinite(v));
    }
}

// Slots of the advantage checks.
enum AdvantageCheck {
    kAdvBadUid = 0,
    kAdvBadTraj = 1,
    kAdvBadAgent = 2,
    kAdvBadScore = 3,
    kAdvInconsistent = 4,  // a row whose uid differs from its trajectory's first row's
    // The first row out of the sorted order (not an error): uid[i] < uid[i - 1] or, with
    // trajectories, traj[i] < traj[i - 1] or the same trajectory id across a change of uid; or the
    // row that makes a uid run longer than kSortedLongRun (uid[i] = uid[i - kSortedLongRun]). Where it
    // stays kNoError the rows are sorted as rollouts write them (cpu.cpp's fast path) in runs of at
    // most kSortedLongRun rows and advantage_sorted_kernel normalises them in one pass; it also gates
    // the trajectory checks.
    kAdvUnsorted = 5,
    kAdvChecks = 6
};

// The longest uid run that advantage_sorted_kernel takes. It gives each run to one warp, which walks
// it 3 to 5 times, 32 rows at a time, alone: a run of millions of rows would keep one warp busy long
// after the rest of the GPU has finished (found by review; the emulator cannot show speed). Longer
// runs go to the multi-kernel path, which spreads the rows over the whole grid. Rollouts' runs are
// tasks x rollouts x turns x agents rows: tens to a few thousand.
constexpr int64_t kSortedLongRun = 4096;

// Whether row i (uid u) makes its uid run longer than kSortedLongRun: for rows in order, uid[i] =
// uid[i - L] exactly where the run holding row i has more than L rows up to it.
__device__ __forceinline__ bool lengthens_long_run(const int32_t* __restrict__ uid, int64_t i, int32_t u) {
    return i >= kSortedLongRun && uid[i - kSortedLongRun] == u;
}

// Whether row i (> 0) breaks the sorted order after row i - 1 (traj may be NULL).
__device__ __forceinline__ bool breaks_order(int32_t u, int32_t up, const int32_t* traj, int32_t t, int32_t tp) {
    return up > u || (traj != nullptr && (tp > t || (u != up && t == tp)));
}

// traj may be NULL (row pooling): then no trajectory is checked.
__global__ void validate_advantage_rows_kernel(int64_t n, const float* __restrict__ scores,
                                               const int32_t* __restrict__ uid,
                                               const int32_t* __restrict__ traj,
                                               const int32_t* __restrict__ agent,
                                               int64_t num_uids, int64_t num_trajs,
                                               int64_t num_agents,
                                               unsigned long long* __restrict__ first_bad) {
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        const bool in = i < n;
        const bool bad_uid = in && !id_in_range(uid[i], num_uids);
        const bool bad_traj = in && traj != nullptr && !id_in_range(traj[i], num_trajs);
        const bool bad_agent = in && !id_in_range(agent[i], num_agents);
        const bool bad_score = in && !isfinite(scores[i]);
        // the row before from the lane before (lane 0 reads it)
        const int32_t u = in ? uid[i] : 0, t = in && traj != nullptr ? traj[i] : 0;
        int32_t up = __shfl_up_sync(kFullMask, u, 1), tp = __shfl_up_sync(kFullMask, t, 1);
        if (lane_id() == 0 && in && i > 0) {
            up = uid[i - 1];
            tp = traj != nullptr ? traj[i - 1] : 0;
        }
        record_first_bad(first_bad + kAdvUnsorted, i,
                         in && ((i > 0 && breaks_order(u, up, traj, t, tp)) || lengthens_long_run(uid, i, u)));
        record_first_bad(first_bad + kAdvBadUid, i, bad_uid);
        record_first_bad(first_bad + kAdvBadTraj, i, bad_traj);
        record_first_bad(first_bad + kAdvBadAgent, i, bad_agent);
        record_first_bad(first_bad + kAdvBadScore, i, bad_score);
    }
}

// first_row[t] = min{i : traj[i] = t} (slots preset to kNoError). Rows whose uid or traj is
// out of range are skipped: they are reported by the range checks, which come first.
// Runs only where `gate` is open (gated_off): sorted rows need no trajectory map.
__global__ void trajectory_first_row_kernel(const unsigned long long* gate, int64_t n, const int32_t* __restrict__ uid,
                                            const int32_t* __restrict__ traj, int64_t num_uids,
                                            int64_t num_trajs,
                                            unsigned long long* __restrict__ first_row) {
    if (gated_off(gate)) return;
    const int64_t stride = grid_stride();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        const int32_t t = traj[i];
        if (id_in_range(t, num_trajs) && id_in_range(uid[i], num_uids))
            atomicMin(first_row + t, (unsigned long long)i);
    }
}

// The first row whose uid differs from the uid of its trajectory's first row: the row a
// sequential scan would stop at ("traj[i] = t belongs to uid a but row f put it in uid b").
// Gated as trajectory_first_row_kernel: in sorted rows every trajectory lies in one uid.
__global__ void trajectory_consistency_kernel(const unsigned long long* gate, int64_t n, const int32_t* __restrict__ uid,
                                              const int32_t* __restrict__ traj, int64_t num_uids,
                                              int64_t num_trajs,
                                              const unsigned long long* __restrict__ first_row,
                                              unsigned long long* __restrict__ first_bad) {
    if (gated_off(gate)) return;
    for (int64_t base = warp_loop_start(); base < n; base += grid_stride()) {
        const int64_t i = base + lane_id();
        bool bad = false;
        if (i < n) {
            const int32_t t = traj[i];
            const int32_t u = uid[i];
            if (id_in_range(t, num_trajs) && id_in_range(u, num_uids)) {
                // first_row[t] <= i is a valid row: row i itself was a candidate.
                bad = uid[first_row[t]] != u;
            }
        }
        record_first_bad(first_bad + kAdvInconsistent, i, bad);
    }
}

// Slots of validate_row_offsets_kernel. Only the first is an index; the other two receive
// row_offsets[0] and row_offsets[num_rows] (int64 bits). The host checks them in the CPU's
// order: a negative first offset, then the first decrease, then an end past num_tokens.
// Once the offsets are known to be monotone the rows tile [first, last) exactly, so tokens
// outside that span are the only ones no row owns.
enum OffsetCheck {
    kOffDecreasing = 0,  // first r with row_offsets[r] < row_offsets[r - 1]
    kOffFirst = 1,
    kOffLast = 2,
    kOffSlots = 3
};

// Checks the num_rows + 1 offsets.
__global__ void validate_row_offsets_kernel(int64_t num_rows,
                                            const int64_t* __restrict__ row_offsets,
                                            unsigned long long* __restrict__ slots) {
    const int64_t count = num_rows + 1;
    for (int64_t base = warp_loop_start(); base < count; base += grid_stride()) {
        const int64_t r = base + lane_id();
        const bool in = r < count;
        const int64_t off = in ? row_offsets[r] : 0;
        const bool decreasing = in && r > 0 && off < row_offsets[r - 1];
        record_first_bad(slots + kOffDecreasing, r, decreasing);
        if (in && r == 0) slots[kOffFirst] = (unsigned long long)off;
        if (in && r == num_rows) slots[kOffLast] = (unsigned long long)off;
    }
}

}  // namespace drmas
