// cuda_stub.cpp — the CUDA backend of a libdrmas built without nvcc: every CUDA entry point
// reports DRMAS_ERR_UNSUPPORTED (api.cpp already refuses DRMAS_DEVICE_CUDA with a message
// before reaching these), and drmas_cuda_available() is 0.
#include "backend.h"

namespace drmas {

static int32_t no_cuda(const char* fn) {
    return fail(DRMAS_ERR_UNSUPPORTED, "%s: this libdrmas was built without CUDA", fn);
}

int32_t cuda_compiled() { return 0; }
int32_t cuda_available() { return 0; }
const char* cuda_unavailable_reason() { return ""; }
int32_t segment_stats_cuda(int64_t, const float*, const int32_t*, int64_t, int32_t, int64_t*,
                           double*, double*, double*, void*) {
    return no_cuda("segment_stats_cuda");
}
int32_t advantage_cuda(const drmas_norm_config&, int64_t, const float*, const int32_t*,
                       const int32_t*, const int32_t*, int64_t, int64_t, int64_t, float*, double*,
                       void*, bool) {
    return no_cuda("advantage_cuda");
}
int32_t broadcast_rows_cuda(int64_t, const float*, const int64_t*, int64_t, float*, void*) {
    return no_cuda("broadcast_rows_cuda");
}
int32_t clipped_loss_cuda(const drmas_loss_config&, int64_t, const int64_t*, const int64_t*,
                          int64_t, const float*, const float*, const float*, const float*,
                          const uint8_t*, float*, double*, void*, bool) {
    return no_cuda("clipped_loss_cuda");
}
int32_t lmhead_logprobs_cuda(int64_t, int64_t, const float*, const int64_t*, float*, float*, uint64_t*, void*) {
    return no_cuda("lmhead_logprobs_cuda");
}
int32_t lmhead_chunk_cuda(const drmas_lmhead_config&, int64_t, const int64_t*, const int64_t*, int64_t, int64_t, int64_t,
                          int64_t, float*, const int64_t*, const float*, const float*, const float*, const uint8_t*, float*,
                          float*, double*, uint64_t*, void*) {
    return no_cuda("lmhead_chunk_cuda");
}
int32_t lmhead_logprobs_cuda(int64_t, int64_t, const uint16_t*, const int64_t*, float*, float*, uint64_t*, void*) {
    return no_cuda("lmhead_logprobs_cuda");
}
int32_t lmhead_chunk_cuda(const drmas_lmhead_config&, int64_t, const int64_t*, const int64_t*, int64_t, int64_t, int64_t,
                          int64_t, uint16_t*, const int64_t*, const float*, const float*, const float*, const uint8_t*, float*,
                          float*, double*, uint64_t*, void*) {
    return no_cuda("lmhead_chunk_cuda");
}
int32_t cuda_malloc(size_t, void**) { return no_cuda("cuda_malloc"); }
int32_t cuda_free(void*) { return no_cuda("cuda_free"); }
int32_t cuda_memcpy(void*, const void*, size_t, int32_t) { return no_cuda("cuda_memcpy"); }
int32_t cuda_synchronize(void*) { return no_cuda("cuda_synchronize"); }
int32_t cuda_device_count() { return 0; }
int32_t cuda_set_device(int32_t) { return no_cuda("cuda_set_device"); }
int32_t cuda_check_device(int32_t) { return no_cuda("cuda_check_device"); }
int32_t cuda_get_device(int32_t*) { return no_cuda("cuda_get_device"); }

}  // namespace drmas
