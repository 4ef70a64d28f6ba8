// broadcast_rows.cuh — row values to tokens: one block per row (grid-stride over rows) writes
// the row's contiguous tokens, so every store is coalesced and rows of length 0 cost nothing.
// Tokens before row 0 and after the last row are zeroed by the launcher (monotone offsets tile
// the span in between exactly).
// defines: broadcast_rows_kernel
#pragma once

#include <stdint.h>

#include "drmas_common.cuh"

namespace drmas {

// token_values[t] = row_values[r] for t in [row_offsets[r], row_offsets[r + 1]).
// Offsets are validated (monotone, within [0, num_tokens]) before this runs.
__global__ void broadcast_rows_kernel(int64_t num_rows, const float* __restrict__ row_values,
                                      const int64_t* __restrict__ row_offsets,
                                      float* __restrict__ token_values) {
    for (int64_t r = blockIdx.x; r < num_rows; r += gridDim.x) {
        const int64_t begin = row_offsets[r];
        const int64_t end = row_offsets[r + 1];
        const float v = row_values[r];
        for (int64_t t = begin + threadIdx.x; t < end; t += blockDim.x) token_values[t] = v;
    }
}

}  // namespace drmas
