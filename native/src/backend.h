// backend.h — the internal contract between the C entry points (api.cpp) and the backends
// (cpu.cpp, cuda_backend.cu). api.cpp checks what can be checked without touching the
// data (NULL pointers, sizes, config values); each backend checks the data itself (ids in
// range, finite scores, monotone offsets) before it writes any output, and reports the first
// offending index with fail().
#pragma once

#include <stdint.h>

#include "drmas.h"

namespace drmas {

// Sets this thread's last-error message (printf-style) and returns `code`.
int32_t fail(int32_t code, const char* fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
void clear_error();

// Threads for the CPU backend.
int32_t cpu_threads();

// Checks host row offsets (>= 0 first, never decreasing, ending <= num_tokens) with the CPU
// backend's messages: for the CPU backend and for the host copy of drmas_clipped_loss_async_f32.
int32_t check_offsets(const char* fn, int64_t num_rows, const int64_t* off, int64_t num_tokens);

// ---- CPU backend (cpu.cpp) ----
int32_t segment_stats_cpu(int64_t n, const float* values, const int32_t* ids, int64_t num_segments,
                          int32_t ddof, int64_t* count, double* mean, double* m2, double* std);
int32_t advantage_cpu(const drmas_norm_config& cfg, int64_t n, const float* scores,
                      const int32_t* uid, const int32_t* traj, const int32_t* agent,
                      int64_t num_uids, int64_t num_trajs, int64_t num_agents, float* advantages,
                      double* diagnostics, bool trusted);
int32_t broadcast_rows_cpu(int64_t num_rows, const float* row_values, const int64_t* row_offsets,
                           int64_t num_tokens, float* token_values);
// per_row: advantages has one entry per row (drmas_clipped_loss_rows_f32), else one per token.
int32_t clipped_loss_cpu(const char* fn, const drmas_loss_config& cfg, int64_t num_rows, const int64_t* row_offsets,
                         int64_t num_tokens, const float* logp, const float* old_logp,
                         const float* advantages, const float* ref_logp, const uint8_t* mask,
                         float* grad, double* sums, bool per_row);
int32_t lmhead_logprobs_cpu(int64_t num_tokens, int64_t vocab, const float* logits, const int64_t* targets,
                            float* logp, float* entropy);
int32_t lmhead_chunk_cpu(const drmas_lmhead_config& cfg, int64_t num_rows, const int64_t* row_offsets,
                         int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens, int64_t vocab, float* logits,
                         const int64_t* targets, const float* old_logp, const float* advantages,
                         const float* ref_logp, const uint8_t* mask, float* logp, float* entropy, double* sums);
// bf16 logits (uint16_t bits; cpu_bf16.cpp): widened into an fp32 copy for the two above, dL/dz rounded back.
int32_t lmhead_logprobs_cpu(int64_t num_tokens, int64_t vocab, const uint16_t* logits, const int64_t* targets,
                            float* logp, float* entropy);
int32_t lmhead_chunk_cpu(const drmas_lmhead_config& cfg, int64_t num_rows, const int64_t* row_offsets,
                         int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens, int64_t vocab, uint16_t* logits,
                         const int64_t* targets, const float* old_logp, const float* advantages,
                         const float* ref_logp, const uint8_t* mask, float* logp, float* entropy, double* sums);

// The decoding step's attention (drmas_decode_attention_f32; CPU only), arguments checked.
int32_t decode_attention_cpu(int64_t rows, int64_t heads, int64_t kv_heads, int64_t d, float* qkv, int64_t qkv_stride,
                             const float* q_norm, const float* k_norm, double eps, const float* cos, const float* sin,
                             float* k_cache, float* v_cache, int64_t cache_row_stride, int64_t capacity, int64_t write_slot,
                             int64_t slots, const uint8_t* mask, double scale, float* out);
// The decoding step's other ops (drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32; CPU only),
// arguments checked; sample_cpu checks the uniforms itself.
int32_t rms_norm_cpu(int64_t rows, int64_t hidden, float* x, int64_t x_stride, const float* residual, int64_t residual_stride,
                     const float* weight, double eps, float* out, int64_t out_stride);
int32_t swiglu_cpu(int64_t rows, int64_t width, const float* gate, int64_t gate_stride, const float* up, int64_t up_stride,
                   float* out, int64_t out_stride);
int32_t sample_cpu(int64_t rows, int64_t vocab, const float* logits, int64_t logits_stride, double temperature, int64_t top_k,
                   double top_p, const double* uniforms, int64_t* tokens, float* logprobs);

// ---- CUDA backend (cuda_backend.cu; cuda_stub.cpp when built without nvcc) ----
int32_t cuda_compiled();
int32_t cuda_available();
// Why cuda_available() is 0, in CUDA's words ("CUDA driver version is insufficient for CUDA runtime
// version", "no CUDA-capable device is detected"); "" when it is 1 or without CUDA.
const char* cuda_unavailable_reason();
int32_t segment_stats_cuda(int64_t n, const float* values, const int32_t* ids,
                           int64_t num_segments, int32_t ddof, int64_t* count, double* mean,
                           double* m2, double* std, void* stream);
int32_t advantage_cuda(const drmas_norm_config& cfg, int64_t n, const float* scores,
                       const int32_t* uid, const int32_t* traj, const int32_t* agent,
                       int64_t num_uids, int64_t num_trajs, int64_t num_agents,
                       float* advantages, double* diagnostics, void* stream, bool trusted);
int32_t broadcast_rows_cuda(int64_t num_rows, const float* row_values, const int64_t* row_offsets,
                            int64_t num_tokens, float* token_values, void* stream);
// host_row_offsets: NULL, or a host copy of row_offsets that the caller has validated; then
// nothing is read back and the call never synchronises. per_row: as for clipped_loss_cpu.
int32_t clipped_loss_cuda(const drmas_loss_config& cfg, int64_t num_rows,
                          const int64_t* host_row_offsets, const int64_t* row_offsets,
                          int64_t num_tokens, const float* logp, const float* old_logp,
                          const float* advantages, const float* ref_logp, const uint8_t* mask,
                          float* grad, double* sums, void* stream, bool per_row);
int32_t lmhead_logprobs_cuda(int64_t num_tokens, int64_t vocab, const float* logits, const int64_t* targets,
                             float* logp, float* entropy, uint64_t* errors, void* stream);
int32_t lmhead_chunk_cuda(const drmas_lmhead_config& cfg, int64_t num_rows, const int64_t* host_row_offsets,
                          const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                          int64_t vocab, float* logits, const int64_t* targets, const float* old_logp,
                          const float* advantages, const float* ref_logp, const uint8_t* mask, float* logp,
                          float* entropy, double* sums, uint64_t* errors, void* stream);
// host_row_offsets and errors: both NULL for drmas_lmhead_chunk_* (offsets validated on the device,
// data errors returned after a synchronisation), both set for drmas_lmhead_chunk_async_* (offsets
// validated on the host by the caller, data errors left in errors: nothing waits for the device).
// bf16 logits (uint16_t bits): the same kernels, templated on the logits' type.
int32_t lmhead_logprobs_cuda(int64_t num_tokens, int64_t vocab, const uint16_t* logits, const int64_t* targets,
                             float* logp, float* entropy, uint64_t* errors, void* stream);
int32_t lmhead_chunk_cuda(const drmas_lmhead_config& cfg, int64_t num_rows, const int64_t* host_row_offsets,
                          const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                          int64_t vocab, uint16_t* logits, const int64_t* targets, const float* old_logp,
                          const float* advantages, const float* ref_logp, const uint8_t* mask, float* logp,
                          float* entropy, double* sums, uint64_t* errors, void* stream);
int32_t cuda_malloc(size_t bytes, void** ptr);
int32_t cuda_free(void* ptr);
int32_t cuda_memcpy(void* dst, const void* src, size_t bytes, int32_t kind);
int32_t cuda_synchronize(void* stream);
int32_t cuda_device_count();
int32_t cuda_set_device(int32_t device);
int32_t cuda_check_device(int32_t device);
int32_t cuda_get_device(int32_t* device);

}  // namespace drmas
