// cpu_bf16.cpp — the CPU backend of drmas_lmhead_logprobs_bf16 and drmas_lmhead_chunk_bf16: the bf16
// logits are widened (exactly) into an fp32 scratch copy and handed to the fp32 kernels of cpu.cpp,
// so that the two dtypes have one implementation and one semantics; on success dL/dz is rounded back
// to bf16 over the caller's logits, so that on error nothing of theirs has changed. The fp32 kernels
// name themselves in their messages: those are renamed to the _bf16 entry point.
#include <string.h>

#include <string>
#include <vector>

#include "backend.h"
#include "drmas_math.h"

namespace drmas {

namespace {

std::vector<float> widen(const uint16_t* logits, int64_t count) {
    std::vector<float> z((size_t)count);
    for (int64_t i = 0; i < count; ++i) z[(size_t)i] = bf16_to_float(logits[i]);
    return z;
}

// The fp32 kernel's error, its message naming the bf16 entry point instead.
int32_t renamed(int32_t st, const char* f32_name, const char* bf16_name) {
    if (st == DRMAS_OK) return st;
    const std::string msg = drmas_last_error();
    const size_t n = strlen(f32_name);
    if (msg.compare(0, n, f32_name) == 0) return fail(st, "%s%s", bf16_name, msg.c_str() + n);
    return fail(st, "%s: %s", bf16_name, msg.c_str());
}

}  // namespace

int32_t lmhead_logprobs_cpu(int64_t n, int64_t V, const uint16_t* logits, const int64_t* targets, float* logp,
                            float* entropy) {
    const std::vector<float> z = widen(logits, n * V);
    return renamed(lmhead_logprobs_cpu(n, V, z.data(), targets, logp, entropy), "drmas_lmhead_logprobs_f32",
                   "drmas_lmhead_logprobs_bf16");
}

int32_t lmhead_chunk_cpu(const drmas_lmhead_config& c, int64_t num_rows, const int64_t* off, int64_t num_tokens,
                         int64_t c0, int64_t n, int64_t V, uint16_t* logits, const int64_t* targets, const float* old_logp,
                         const float* adv, const float* ref, const uint8_t* mask, float* logp_out, float* ent_out,
                         double* sums) {
    std::vector<float> z = widen(logits, n * V);
    const int32_t st = lmhead_chunk_cpu(c, num_rows, off, num_tokens, c0, n, V, z.data(), targets, old_logp, adv, ref, mask,
                                        logp_out, ent_out, sums);
    if (st != DRMAS_OK) return renamed(st, "drmas_lmhead_chunk_f32", "drmas_lmhead_chunk_bf16");
    for (int64_t i = 0; i < n * V; ++i) logits[i] = float_to_bf16(z[(size_t)i]);
    return DRMAS_OK;
}

}  // namespace drmas
