// drmas_common.cuh — device helpers shared by the drmas kernels: warp-uniform grid-stride
// loops, warp-aggregated segment atomics (sorted ids cost one atomic per warp), a fixed-order
// block reduction (so per-row results are deterministic) and first-bad-index records.
// defines: DRMAS_LAUNCH, kBlockSize, kNoError, warp_loop_start, record_first_bad, warp_sum,
//          segment_atomic_add, block_sum, id_in_range, gated_off
#pragma once

#include <stdint.h>

// DRMAS_LAUNCH(kernel, grid, block, shared_bytes, stream)(args...) launches a kernel: the
// triple-chevron syntax under nvcc, an emulated launch in the host-C++ build of native/emu
// (whose cuda_runtime.h defines it first), so that both read the same launcher code.
#ifndef DRMAS_LAUNCH
#define DRMAS_LAUNCH(kernel, grid, block, smem, stream) kernel<<<(grid), (block), (smem), (stream)>>>
#endif

namespace drmas {

// Every kernel runs with this many threads per block (a multiple of 32: the warp-level
// helpers below assume whole warps).
constexpr int kBlockSize = 256;
constexpr int kWarpsPerBlock = kBlockSize / 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Initial value of a first-bad-index slot (memset 0xFF): "no offending index".
constexpr unsigned long long kNoError = ~0ull;

// Grid-stride loops in the kernels advance one warp at a time: `base` is the warp's first
// index and is the same in every lane, so all 32 lanes run the same iterations and can use
// __shfl_sync/__ballot_sync even in the last, partial iteration (lanes past the end are
// inactive rather than absent).
__device__ __forceinline__ int64_t warp_loop_start() {
    return (int64_t)blockIdx.x * blockDim.x + (threadIdx.x & ~31u);
}
__device__ __forceinline__ int64_t grid_stride() { return (int64_t)gridDim.x * blockDim.x; }
__device__ __forceinline__ int lane_id() { return (int)(threadIdx.x & 31u); }

// An id that indexes an array of `limit` entries (negative ids are out of range).
__device__ __forceinline__ bool id_in_range(int32_t id, int64_t limit) {
    return id >= 0 && (int64_t)id < limit;
}

// Records min(slot, index of the lowest lane with `bad`). Indices grow with the lane, so
// the lowest flagged lane holds the warp's first offending index: one atomic per warp.
// Must be called by all 32 lanes.
__device__ __forceinline__ void record_first_bad(unsigned long long* slot, int64_t i, bool bad) {
    const unsigned flagged = __ballot_sync(kFullMask, bad);
    if (flagged != 0u && lane_id() == __ffs((int)flagged) - 1)
        atomicMin(slot, (unsigned long long)i);
}

// A kernel launched with a gate runs only where an earlier kernel of the stream found the input
// needing it (the slot is no longer kNoError): the fallback of the one-pass advantage kernel is
// queued behind it, without a host synchronisation, and costs an empty launch when not needed.
// A NULL gate always runs. Every thread reads the same word, so the whole grid returns alike.
__device__ __forceinline__ bool gated_off(const unsigned long long* gate) {
    return gate != nullptr && *(const volatile unsigned long long*)gate == kNoError;
}

template <class T>
__device__ __forceinline__ T warp_sum(T v) {
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(kFullMask, v, offset);
    return v;
}

// arr[seg] += v for the active lanes. When every lane is active on the same segment (rows
// of one group are contiguous in a rollout batch) the warp sums first and issues a single
// atomic, which keeps one huge segment from serialising on one address. Any order of ids
// is still correct. Must be called by all 32 lanes.
template <class T>
__device__ __forceinline__ void segment_atomic_add(T* arr, int64_t seg, T v, bool active) {
    const long long first = __shfl_sync(kFullMask, (long long)seg, 0);
    if (__all_sync(kFullMask, active && (long long)seg == first)) {
        v = warp_sum(v);
        if (lane_id() == 0) atomicAdd(arr + first, v);
    } else if (active) {
        atomicAdd(arr + seg, v);
    }
}

// Sums v[0..N) over the block (blockDim.x == kBlockSize) in a fixed order: a shuffle tree
// inside each warp, then warp 0 adds the warp totals by the same tree. The result is valid
// in thread 0 only. `smem` holds N * kWarpsPerBlock values. Must be called by the whole
// block; it synchronises before returning so that smem can be reused at once.
template <int N, class T>
__device__ __forceinline__ void block_sum(T (&v)[N], T* smem) {
    const int lane = lane_id();
    const int warp = (int)(threadIdx.x >> 5);
#pragma unroll
    for (int k = 0; k < N; ++k) {
        for (int offset = 16; offset > 0; offset >>= 1)
            v[k] += __shfl_down_sync(kFullMask, v[k], offset);
    }
    if (lane == 0) {
#pragma unroll
        for (int k = 0; k < N; ++k) smem[k * kWarpsPerBlock + warp] = v[k];
    }
    __syncthreads();
    if (warp == 0) {
#pragma unroll
        for (int k = 0; k < N; ++k) {
            T x = lane < kWarpsPerBlock ? smem[k * kWarpsPerBlock + lane] : T(0);
            for (int offset = 16; offset > 0; offset >>= 1)
                x += __shfl_down_sync(kFullMask, x, offset);
            v[k] = x;
        }
    }
    __syncthreads();
}

}  // namespace drmas
