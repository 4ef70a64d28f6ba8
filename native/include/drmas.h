/* drmas.h — the C ABI of libdrmas: segment statistics, Dr. MAS / GRPO advantage
 * normalisation, row-to-token broadcast and the fused clipped PPO loss, on the CPU and on
 * CUDA with one semantics. Plain C so that Java's FFM (and anything else) can bind it.
 *
 * defines: drmas_segment_stats_f32, drmas_advantage_f32, drmas_advantage_trusted_f32,
 *          drmas_broadcast_rows_f32, drmas_clipped_loss_f32, drmas_clipped_loss_async_f32,
 *          drmas_clipped_loss_rows_f32, drmas_lmhead_logprobs_f32,
 *          drmas_lmhead_chunk_f32, drmas_lmhead_logprobs_bf16, drmas_lmhead_chunk_bf16,
 *          drmas_lmhead_chunk_async_f32, drmas_lmhead_chunk_async_bf16,
 *          drmas_lmhead_logprobs_async_f32, drmas_lmhead_logprobs_async_bf16,
 *          drmas_decode_attention_f32, drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32,
 *          drmas_last_error,
 *          drmas_abi_value, drmas_cuda_* helpers
 *
 * Conventions (ARCHITECTURE §4):
 *  - Every function returns a status: DRMAS_OK (0) or a DRMAS_ERR_* code. On error,
 *    drmas_last_error() returns a thread-local message that names the argument and, for
 *    bad data, the first offending index; output buffers are left untouched.
 *  - Every non-NULL pointer argument must start on a multiple of its element type's alignment (2
 *    bytes for bf16 logits, 4 for float and int32_t, 8 for int64_t, uint64_t, double and the config
 *    structs; mask bytes have none), whatever the array's length and whether or not the call reads
 *    it: a misaligned access is undefined behaviour on the host and, on CUDA, a "misaligned address"
 *    fault that ends the process's whole CUDA context. A misaligned pointer is DRMAS_ERR_CONFIG naming
 *    the argument and its address, checked right after `device`, before anything is read.
 *  - `device` selects the backend (DRMAS_DEVICE_CPU or DRMAS_DEVICE_CUDA). With CUDA, every
 *    array pointer is a device pointer (cudaMalloc'd or managed), all of one GPU: the call
 *    runs on that GPU whatever the calling thread's current device, which it leaves as it
 *    was. (On a thread that has never selected a device, "as it was" is device 0, and with
 *    CUDA 12 and later switching back to it creates device 0's context, hundreds of MiB, if
 *    the process had none there: call from a thread whose current device is the arrays', as
 *    LibTorch's device guard and the trainer do.) Work is queued on `stream` (a cudaStream_t
 *    of that GPU, e.g. LibTorch's current stream; NULL is the legacy default stream). Config structs are always host memory.
 *    CUDA calls validate their data on the device and synchronise `stream` to report errors
 *    before anything is written (as torch.nonzero does; once, or twice where a call validates
 *    in two steps, as drmas_lmhead_chunk_* does); drmas_clipped_loss_async_f32 takes
 *    host-validated offsets instead and never synchronises, and drmas_lmhead_chunk_async_* and
 *    drmas_lmhead_logprobs_async_* also leave their data errors on the device for the caller to
 *    read once, after the last chunk.
 *  - Sizes are int64_t; ids are dense int32 in [0, num_x). Empty segments are legal.
 *  - Scratch memory: the CPU backend allocates internally and frees before returning; the
 *    CUDA backend uses cudaMallocAsync/cudaFreeAsync on `stream` (stream-ordered pool), before
 *    it writes anything: a call that fails with DRMAS_ERR_ALLOC can be made again once memory
 *    is freed (the Java bindings do so once, after LibTorch's caching allocator has given its
 *    cached blocks back).
 *  - Numerics: statistics accumulate in fp64 with a two-pass method. A segment whose values
 *    are all equal has mean exactly that value and M2/std exactly 0.
 *  - Determinism: the CPU backend is run-to-run deterministic for a given thread count.
 *    CUDA segment sums use fp64 atomics, so the order of additions (and the last fp64 bit)
 *    may vary between runs; constant segments stay exact. The CUDA loss reduces per-row
 *    partials in a fixed order and is deterministic. CUDA advantages of sorted rows in uid runs
 *    of at most 4096 rows, without diagnostics (drmas_advantage_f32 and
 *    drmas_advantage_trusted_f32), use no atomics and are run-to-run deterministic too.
 */
#ifndef DRMAS_H
#define DRMAS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define DRMAS_API __declspec(dllexport)
#else
#define DRMAS_API __attribute__((visibility("default")))
#endif

/* ---- status codes ---------------------------------------------------------------- */
#define DRMAS_OK 0
#define DRMAS_ERR_NULL 1         /* a required pointer is NULL */
#define DRMAS_ERR_SIZE 2         /* a negative or inconsistent size */
#define DRMAS_ERR_RANGE 3        /* an id or offset out of its range */
#define DRMAS_ERR_NONFINITE 4    /* a NaN or infinite input where a finite one is needed */
#define DRMAS_ERR_CONFIG 5       /* an unknown enum value or a bad parameter */
#define DRMAS_ERR_UNSUPPORTED 6  /* the backend is not compiled in or has no usable device */
#define DRMAS_ERR_CUDA 7         /* a CUDA runtime error */
#define DRMAS_ERR_ALLOC 8        /* out of memory */
#define DRMAS_ERR_INCONSISTENT 9 /* data that contradicts itself (a trajectory in two groups) */

#define DRMAS_DEVICE_CPU 0
#define DRMAS_DEVICE_CUDA 1

/* ---- library ---------------------------------------------------------------------- */
/* Message of the last failed call on this thread ("" if none). Valid until the next call. */
DRMAS_API const char* drmas_last_error(void);
DRMAS_API const char* drmas_version(void);
/* 1 when the library was compiled with CUDA, else 0. */
DRMAS_API int32_t drmas_cuda_compiled(void);
/* 1 when compiled with CUDA and at least one device with a working driver is visible. */
DRMAS_API int32_t drmas_cuda_available(void);
/* Whether this library's CUDA kernels can run on CUDA device `device`: DRMAS_OK, or
 * DRMAS_ERR_UNSUPPORTED when the library was built without CUDA, sees no usable device, or has no
 * kernel image for the device (it was compiled for other architectures: CMake's
 * DRMAS_CUDA_ARCHITECTURES), DRMAS_ERR_RANGE for a device that is not there. The message names the
 * device's compute capability and the architectures compiled in. Without this check the first
 * kernel launch is what fails ("no kernel image is available for execution on the device"), which
 * in training is the first update, after a whole rollout. Leaves the current device as it was. */
DRMAS_API int32_t drmas_cuda_check_device(int32_t device);
/* Threads used by the CPU backend (default: hardware concurrency, or OMP_NUM_THREADS
 * when set). n <= 0 restores the default. */
DRMAS_API int32_t drmas_set_num_threads(int32_t n);
DRMAS_API int32_t drmas_get_num_threads(void);

/* ---- 1. segment statistics -------------------------------------------------------- *
 * For s in [0, num_segments): count[s] = |{i : segment_ids[i] = s}|, mean[s] and
 * m2[s] = sum (x - mean)^2 over the segment (fp64, two-pass), and, when std != NULL,
 * std[s] = sqrt(m2 / (count - ddof)) for count > ddof, else 0. Empty segments give
 * count 0 and mean = m2 = std = 0. (count, mean, m2) merge exactly across shards with
 * Chan et al.'s update. ddof is 1 (unbiased, n - 1) or 0 (biased).
 * Errors: NULL values/segment_ids (when n > 0)/count/mean/m2, n < 0, num_segments < 0,
 * ddof not 0 or 1, an id outside [0, num_segments) (names the row), a non-finite value
 * (names the row).
 * API only: training does not call it (drmas_advantage_f32 computes the statistics it needs
 * itself, and ranks never split a group, so there is nothing to merge). It is the building
 * block for callers with their own normalisation (Java: dev.drmas.algo.SegmentStats). */
DRMAS_API int32_t drmas_segment_stats_f32(int32_t device, int64_t n, const float* values,
                                          const int32_t* segment_ids, int64_t num_segments,
                                          int32_t ddof, int64_t* count, double* mean,
                                          double* m2, double* std, void* stream);

/* ---- 2. advantage normalisation (ARCHITECTURE §5) --------------------------------- *
 * A mode is data, not a number: A_i = (x_i - mean) / (std + eps), where the mean comes from
 * the agent segment (uid, agent) or the group (uid), so does the std, and the numerator x_i is
 * the row's own score s_i or, under trajectory pooling, its trajectory's mean score S_t(i)
 * (under row pooling x_i = s_i either way). The named modes are a table of the callers
 * (Java: dev.drmas.algo.NormMode):
 *   grpo        mean GROUP, std GROUP, numerator TRAJECTORY
 *   drmas       mean AGENT, std AGENT, numerator ROW
 *   agent-mean  mean AGENT, std GROUP, numerator ROW
 *   agent-std   mean GROUP, std AGENT, numerator ROW
 * so that a new mode needs no change here. */
#define DRMAS_FROM_GROUP 0 /* the statistic of the row's group u (as pooled by global_pooling) */
#define DRMAS_FROM_AGENT 1 /* the statistic of the row's agent segment (u, k) */

#define DRMAS_NUMERATOR_ROW 0        /* x_i = s_i */
#define DRMAS_NUMERATOR_TRAJECTORY 1 /* x_i = S_t(i) under trajectory pooling, else s_i */

#define DRMAS_POOL_TRAJECTORIES 0 /* group stats over trajectory mean scores S_t */
#define DRMAS_POOL_ROWS 1         /* group stats over all rows of the group */

/* When a segment that the config reads (the mean's; the std's with scale_by_std) has a single
 * member (ARCHITECTURE §5): */
#define DRMAS_SINGLETON_FALLBACK 0 /* single agent segment -> its group; single group used -> A = 0 */
#define DRMAS_SINGLETON_ZERO 1     /* any used segment single -> A = 0 */
#define DRMAS_SINGLETON_RAW 2      /* a single segment has mean 0 and std 1 */

typedef struct drmas_norm_config {
    int32_t mean_from;      /* DRMAS_FROM_*: the segment whose mean is subtracted */
    int32_t std_from;       /* DRMAS_FROM_*: the segment whose std divides (with scale_by_std) */
    int32_t numerator;      /* DRMAS_NUMERATOR_* */
    int32_t global_pooling; /* DRMAS_POOL_* */
    int32_t singleton;      /* DRMAS_SINGLETON_* */
    int32_t ddof;           /* 1 unbiased (default), 0 biased */
    int32_t scale_by_std;   /* 1: divide by (std + eps) (default); 0: centre only */
    int32_t reserved;       /* must be 0 */
    double eps;             /* >= 0, finite; > 0 with scale_by_std; default 1e-6 */
} drmas_norm_config;        /* 40 bytes, no padding */

/* Fields of the optional diagnostics array, field-major: diag[f * S + u * K + k] with
 * S = num_uids * num_agents, K = num_agents. Group fields repeat the group's statistics
 * (as pooled by the config) for every agent of the group. Std fields follow cfg.ddof with
 * the segment_stats convention (0 when count <= ddof). INFLATION is Lemma 4.2's
 * (sigma_uk^2 + (mu_uk - mu_u)^2) / sigma_u^2 with population variances whatever ddof
 * (sigma_uk^2 = AGENT_M2 / AGENT_COUNT, sigma_u^2 = GROUP_M2 / GROUP_COUNT, the group as pooled),
 * NaN where the agent segment is empty or GROUP_STD = 0. Statistics are the segments' own,
 * before any singleton policy. */
#define DRMAS_DIAG_AGENT_COUNT 0
#define DRMAS_DIAG_AGENT_MEAN 1
#define DRMAS_DIAG_AGENT_M2 2
#define DRMAS_DIAG_AGENT_STD 3
#define DRMAS_DIAG_GROUP_COUNT 4
#define DRMAS_DIAG_GROUP_MEAN 5
#define DRMAS_DIAG_GROUP_M2 6
#define DRMAS_DIAG_GROUP_STD 7
#define DRMAS_DIAG_INFLATION 8
#define DRMAS_DIAG_FIELDS 9

/* Rows i in [0, n) with score[i], group uid[i] in [0, num_uids), trajectory traj[i] in
 * [0, num_trajs) and agent[i] in [0, num_agents). Writes advantages[n] and, when
 * diagnostics != NULL, diagnostics[DRMAS_DIAG_FIELDS * num_uids * num_agents].
 * traj may be NULL (and num_trajs 0) with DRMAS_POOL_ROWS. Every trajectory must lie in
 * one group (DRMAS_ERR_INCONSISTENT names the row otherwise). Non-finite scores are an
 * error naming the row. Fastest when the rows are sorted as rollouts write them: uid never
 * decreases and, with trajectories, each trajectory's rows are together and trajectory ids
 * never decrease; any other order is partitioned by uid into scratch first (36 B a row) and is
 * correct too. On the CPU that scratch (and the 1 bit a row that sorted rows use) is kept between
 * calls, up to DRMAS_CPU_WORKSPACE_MB (default 1024; 0: freed after each call), because fresh
 * pages cost a fault and a clearing each, which is more than the normalisation itself; a call made
 * while another uses it, or one that needs more, allocates and frees its own. The partition and
 * the statistics also hold a few words per uid and per trajectory (whatever the thread count: with
 * few rows a uid, the partition counts them on fewer threads), so memory grows with num_uids and
 * num_trajs as well as with n: give dense ids (0 to U - 1, as the trainer and drmas normalize
 * do); 4 rows declared with num_uids = 1e8 take gigabytes (or fail with DRMAS_ERR_ALLOC).
 * The CPU backend uses AVX2 kernels where the CPU has them; the environment variable
 * DRMAS_CPU_ISA=v2 selects the baseline ones, which give bit-identical results.
 * advantages and diagnostics must not share memory with the inputs or with each other (no call
 * works in place; DRMAS_ERR_CONFIG names the pair). Advantages are computed in fp64 and rounded to
 * float: one past float's range, which only extreme finite scores give (a difference of 1e33 over
 * a std of 0 plus eps = 1e-6, say), is +-inf. */
DRMAS_API int32_t drmas_advantage_f32(int32_t device, const drmas_norm_config* cfg, int64_t n,
                                      const float* scores, const int32_t* uid,
                                      const int32_t* traj, const int32_t* agent,
                                      int64_t num_uids, int64_t num_trajs, int64_t num_agents,
                                      float* advantages, double* diagnostics, void* stream);

/* The same normalisation for callers that built the ids themselves (the trainer does): for valid
 * input the same results (on the CPU bit for bit, with the same thread count; on CUDA up to the
 * order of the fp64 atomics, as between two drmas_advantage_f32 calls). There is no separate
 * validation pass: on the CPU, sorted rows are checked block by block in registers while they are
 * normalised, so each row is read once from memory (rows in another order take
 * drmas_advantage_f32's path). Bad input is still an error with drmas_advantage_f32's code and
 * message (naming this function), but advantages and diagnostics may then be partly written. On any input it reads and
 * writes only inside its arrays. With CUDA the call never synchronises and reports no bad row.
 * Sorted rows are normalised by one kernel; that kernel checks the order and the ids as it goes,
 * and rows in another order, with an id out of range or in a uid run of more than 4096 rows (which
 * one warp would walk alone) make it hand the whole call to the multi-kernel path queued behind it (whose launches return at once otherwise). That path skips
 * rows with an id out of range (their advantages are NaN, so that bad input shows); the other
 * advantages of bad input are unspecified. Outputs overlapping the inputs are refused as by
 * drmas_advantage_f32 (that check needs no data). */
DRMAS_API int32_t drmas_advantage_trusted_f32(int32_t device, const drmas_norm_config* cfg, int64_t n,
                                              const float* scores, const int32_t* uid,
                                              const int32_t* traj, const int32_t* agent,
                                              int64_t num_uids, int64_t num_trajs, int64_t num_agents,
                                              float* advantages, double* diagnostics, void* stream);

/* ---- 3. broadcast of row values to tokens ----------------------------------------- *
 * Row r owns tokens [row_offsets[r], row_offsets[r+1]); token_values[t] = row_values[r]
 * for the tokens of row r and 0 for tokens no row owns. row_offsets has num_rows + 1
 * entries, starts >= 0, never decreases and ends <= num_tokens.
 * API only: training does not call it (the trainer fills each row's tokens while it packs them
 * into a micro-batch); it is there for callers whose advantages live on a GPU (Java:
 * dev.drmas.algo.TokenBroadcast). */
DRMAS_API int32_t drmas_broadcast_rows_f32(int32_t device, int64_t num_rows,
                                           const float* row_values, const int64_t* row_offsets,
                                           int64_t num_tokens, float* token_values,
                                           void* stream);

/* ---- 4. fused clipped PPO loss, forward and backward (ARCHITECTURE §6) ------------ */
#define DRMAS_KL_NONE 0
#define DRMAS_KL_K1 1 /* logp - ref */
#define DRMAS_KL_K2 2 /* 0.5 (logp - ref)^2 */
#define DRMAS_KL_K3 3 /* low_var_kl: d = clamp(ref - logp, -20, 20); clamp(e^d - d - 1, -10, 10) */

/* The per-token loss l_t = pg_t + kl_coef * kl_t of the valid tokens (inside a row and
 * mask != 0) is summed per row, divided by the row's valid-token count n_r when
 * cfg.per_row_mean is 1 (a row with n_r = 0 adds 0), summed over the rows and divided by
 * cfg.normalizer. The aggregations are a table of the callers (Java:
 * dev.drmas.algo.LossAggregation, which also computes the normalizer), verl's loss_agg_mode:
 *   token-mean               per_row_mean 0, normalizer: valid tokens of the whole mini-batch
 *   seq-mean-token-sum       per_row_mean 0, normalizer: rows of the mini-batch
 *   seq-mean-token-mean      per_row_mean 1, normalizer: rows of the mini-batch
 *   seq-mean-token-sum-norm  per_row_mean 0, normalizer: a constant (Dr. GRPO) */
typedef struct drmas_loss_config {
    double clip_low;      /* eps_low in [0, 1) */
    double clip_high;     /* eps_high >= 0 */
    double dual_clip;     /* c > 1: pg = min(pg, -A c) for A < 0; 0 disables */
    double kl_coef;       /* weight of the KL term (needs ref_logp and kl_type != NONE); a float: |x| <= FLT_MAX */
    double normalizer;    /* the final divisor of the aggregation: finite, >= 1 / FLT_MAX (1 / normalizer is a float) */
    int32_t kl_type;      /* DRMAS_KL_* */
    int32_t per_row_mean; /* 1: each row's sum is divided by its valid tokens first; 0: not */
} drmas_loss_config;      /* 48 bytes, no padding */

/* Outputs of sums[DRMAS_LOSS_SUMS] (fp64; a device pointer with CUDA). LOSS, PG_LOSS and
 * KL_LOSS are aggregated (divided as above; KL_LOSS without kl_coef); the others are raw
 * sums over the valid tokens of this call, for the caller to divide by the global count. */
#define DRMAS_LOSS_LOSS 0
#define DRMAS_LOSS_PG_LOSS 1
#define DRMAS_LOSS_KL_LOSS 2
#define DRMAS_LOSS_TOKENS 3        /* valid tokens */
#define DRMAS_LOSS_CLIPPED 4       /* tokens with the clipped term larger (clipfrac numerator) */
#define DRMAS_LOSS_CLIPPED_LOWER 5 /* A < 0 tokens where the dual clip bound won */
#define DRMAS_LOSS_PPO_KL 6        /* sum of (old_logp - logp), clamped like the ratio */
#define DRMAS_LOSS_KL 7            /* sum of the KL estimator (0 without ref_logp) */
#define DRMAS_LOSS_SUMS 8

/* Token arrays have num_tokens entries; row r owns [row_offsets[r], row_offsets[r+1])
 * (validated as for broadcast). mask may be NULL (all tokens valid); ref_logp may be NULL
 * only with cfg.kl_type = DRMAS_KL_NONE (a KL estimator without a reference is an error).
 * Writes grad[t] = dL/dlogp[t] (0 for tokens outside rows or masked) and sums. Values of
 * masked tokens are never read into the result, so padding may hold anything. Those of valid
 * tokens are not checked: a NaN there makes the sums NaN (check them), while that token's gradient
 * may be NaN or, where the NaN ratio is clipped away, 0. The clip bounds, dual_clip, kl_coef and
 * 1 / normalizer are applied as floats. grad and sums must not share memory with the inputs or
 * with each other (DRMAS_ERR_CONFIG names the pair). */
DRMAS_API int32_t drmas_clipped_loss_f32(int32_t device, const drmas_loss_config* cfg,
                                         int64_t num_rows, const int64_t* row_offsets,
                                         int64_t num_tokens, const float* logp,
                                         const float* old_logp, const float* advantages,
                                         const float* ref_logp, const uint8_t* mask,
                                         float* grad, double* sums, void* stream);

/* The same as drmas_clipped_loss_f32, given also host_row_offsets: a host copy of row_offsets
 * (num_rows + 1 entries), which is validated on the host with the same checks and messages.
 * The CUDA backend then never reads row_offsets back and never synchronises: the call is only
 * queued on `stream` (the trainer's form: offsets are built on the host anyway). row_offsets
 * must hold the same values (a device copy cannot be compared without a synchronisation); where
 * it does not, the kernel still reads and writes only inside the token arrays (a row whose device
 * offsets fall outside [0, num_tokens] or decrease counts as empty): wrong results, not an error.
 * With DRMAS_DEVICE_CPU both are host arrays and may be the same pointer. */
DRMAS_API int32_t drmas_clipped_loss_async_f32(int32_t device, const drmas_loss_config* cfg,
                                               int64_t num_rows, const int64_t* host_row_offsets,
                                               const int64_t* row_offsets, int64_t num_tokens,
                                               const float* logp, const float* old_logp,
                                               const float* advantages, const float* ref_logp,
                                               const uint8_t* mask, float* grad, double* sums,
                                               void* stream);

/* The training step's form: one advantage per ROW (row_advantages[num_rows], read through the row
 * offsets) instead of one per token, so that no per-token broadcast array is built. Otherwise as
 * drmas_clipped_loss_async_f32 when host_row_offsets is not NULL, and as drmas_clipped_loss_f32
 * (offsets validated on the device, one synchronisation) when it is NULL. On one backend the
 * results are bit for bit those of drmas_clipped_loss_f32 given the advantages broadcast to the
 * tokens (drmas_broadcast_rows_f32), with the same thread count. */
DRMAS_API int32_t drmas_clipped_loss_rows_f32(int32_t device, const drmas_loss_config* cfg, int64_t num_rows,
                                              const int64_t* host_row_offsets, const int64_t* row_offsets,
                                              int64_t num_tokens, const float* logp, const float* old_logp,
                                              const float* row_advantages, const float* ref_logp,
                                              const uint8_t* mask, float* grad, double* sums, void* stream);

/* ---- 5. fused LM head: log-probs, entropy and the clipped loss over a chunk of logits -- *
 * The caller computes a chunk of logits z = h W^T / T (rows of `vocab` floats, contiguous) with
 * its own matrix product; these ops take it from there, so that no [N, V] tensor of log-probs
 * or probabilities ever exists. Per token t: lse_t = log sum_v e^{z_tv} (running max, fp64 sum),
 * logp_t = z_{t,y_t} - lse_t, the entropy H_t = lse_t - sum_v p_tv z_tv (p = softmax z).
 * CUDA: one block per token for the statistics and dL/dz, one per row for the loss; the data is
 * validated on the device and `stream` synchronised to report errors, as for the other ops (once;
 * the chunk op twice: its row offsets, then the targets and logits);
 * the results agree with the CPU's to rounding (expf differs), the sums of one chunk of all tokens
 * equal drmas_clipped_loss_f32's on the CUDA backend.
 *
 * Forward only (the old and reference log-prob passes, evaluation scoring): logp[t] and, when
 * entropy != NULL, entropy[t] for t in [0, num_tokens). Every target must lie in [0, vocab) and
 * every logit must be finite (errors name the first bad token, and the vocabulary index). */
DRMAS_API int32_t drmas_lmhead_logprobs_f32(int32_t device, int64_t num_tokens, int64_t vocab,
                                            const float* logits, const int64_t* targets, float* logp,
                                            float* entropy, void* stream);

/* The clipped loss of ARCHITECTURE §6 (the fields as in drmas_loss_config) plus the entropy
 * bonus: the total loss is sums[LOSS] - entropy_coef * sums[ENTROPY], i.e. entropy_coef is the
 * weight of each valid token's entropy (PPO: the bonus coefficient / the mini-batch's tokens). */
typedef struct drmas_lmhead_config {
    double clip_low;      /* as drmas_loss_config */
    double clip_high;
    double dual_clip;
    double kl_coef;
    double normalizer;
    double entropy_coef;  /* finite; 0 turns the bonus off */
    int32_t kl_type;
    int32_t per_row_mean;
} drmas_lmhead_config;    /* 56 bytes, no padding */

/* sums[DRMAS_LMHEAD_SUMS]: DRMAS_LOSS_* as drmas_clipped_loss_f32's (over this chunk's valid
 * tokens), then the raw sum of the valid tokens' entropies. */
#define DRMAS_LMHEAD_ENTROPY 8
#define DRMAS_LMHEAD_SUMS 9

/* One chunk of the update's fused pass. The token arrays describe the whole micro-batch of
 * num_tokens tokens, rows as in drmas_clipped_loss_f32 (row r owns [row_offsets[r],
 * row_offsets[r+1]); mask and ref_logp as there; advantages has one entry per ROW); the chunk
 * is the tokens [chunk_begin, chunk_begin + chunk_tokens), whose logits are `logits`
 * (chunk_tokens x vocab). A token is valid when a row owns it and its mask is not 0; a row's
 * per_row_mean divisor counts its valid tokens over the whole row, not only the chunk. For the
 * chunk's valid tokens it computes logp, the entropy and the loss term from logp exactly as
 * drmas_clipped_loss_f32 does, and overwrites logits with dL/dz:
 *   dz_tv = g_t (1[v = y_t] - p_tv) + entropy_coef p_tv (log p_tv + H_t),
 * g_t = dL/dlogp_t as drmas_clipped_loss_f32 writes it, entries below FLT_MIN in magnitude written
 * as 0 (no denormals for the products that read dL/dz); the rows of invalid tokens become 0 (their
 * logits and targets are never read). logp and entropy (chunk_tokens entries each, may be NULL)
 * get the chunk's values (0 for invalid tokens); sums get this chunk's sums. Summed over chunks
 * that tile the tokens, the sums are the micro-batch's (up to the order of fp64 additions); one
 * chunk of all tokens gives bit for bit what drmas_clipped_loss_f32 gives from
 * drmas_lmhead_logprobs_f32's log-probs and the advantages broadcast to tokens, with the same
 * thread count. Errors: as drmas_clipped_loss_f32, plus a chunk outside [0, num_tokens], vocab < 1,
 * a valid token's target outside [0, vocab) or a non-finite logit (naming the first such token
 * and, for logits, the vocabulary index; every target is checked before any logit, so a bad target
 * is named before a non-finite logit of an earlier token); outputs, logits included, are then
 * untouched. entropy_coef, as kl_coef, must be a float (|x| <= FLT_MAX). */
DRMAS_API int32_t drmas_lmhead_chunk_f32(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                         const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin,
                                         int64_t chunk_tokens, int64_t vocab, float* logits,
                                         const int64_t* targets, const float* old_logp,
                                         const float* advantages, const float* ref_logp,
                                         const uint8_t* mask, float* logp, float* entropy, double* sums,
                                         void* stream);

/* The same two ops over logits in bfloat16, what a bf16 matrix product writes (torch.bfloat16,
 * __nv_bfloat16): each logit is a uint16_t holding the upper 16 bits of an IEEE fp32. Each logit is
 * widened to fp32 exactly, and everything else is the _f32 op's on the widened values: the statistics,
 * log-probs, entropies, the loss and its fp64 sums, the errors and their messages (named _bf16). dL/dz
 * is written back over the bf16 logits, each value the fp32 one the _f32 op would write, rounded to
 * bf16 (to nearest, ties to even). On one backend, a _bf16 call gives bit for bit the _f32 op's
 * outputs on the widened logits and its dL/dz rounded to bf16. The CPU backend widens the chunk into
 * an fp32 scratch copy first (4 bytes per logit, freed before returning). */
DRMAS_API int32_t drmas_lmhead_logprobs_bf16(int32_t device, int64_t num_tokens, int64_t vocab,
                                             const uint16_t* logits, const int64_t* targets, float* logp,
                                             float* entropy, void* stream);
DRMAS_API int32_t drmas_lmhead_chunk_bf16(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                          const int64_t* row_offsets, int64_t num_tokens, int64_t chunk_begin,
                                          int64_t chunk_tokens, int64_t vocab, uint16_t* logits,
                                          const int64_t* targets, const float* old_logp,
                                          const float* advantages, const float* ref_logp,
                                          const uint8_t* mask, float* logp, float* entropy, double* sums,
                                          void* stream);

/* The chunk ops without a synchronisation, for a caller that runs many chunks (the fused LM head
 * of a micro-batch): on CUDA, drmas_lmhead_chunk_* synchronises `stream` twice per chunk (its row
 * offsets, then the targets and logits). These take host_row_offsets, a host copy of row_offsets
 * validated on the host as drmas_clipped_loss_async_f32 does (the same checks and messages, the same
 * caveat: row_offsets must hold the same values), and report the data errors of the chunk into
 * `errors` (2 entries, in the memory of the other arrays: device memory with CUDA) instead of
 * returning them: errors[0] = the chunk-relative index of the first valid token whose target is
 * outside [0, vocab), errors[1] = the first flat index i * vocab + v of a valid token's non-finite
 * logit, UINT64_MAX where there is none. Argument errors are still returned at once.
 * CUDA: nothing waits for the device; the chunk's outputs (logits, logp, entropy, sums) are written
 * whatever errors says, as the _f32/_bf16 op computes them (a bad target's token gets logp 0 and no
 * target term; a non-finite logit gives non-finite outputs; no access outside the arrays), so a
 * caller reads errors once, after its last chunk, and discards the outputs when any is set. The
 * results are bit for bit the _f32/_bf16 op's on data without errors.
 * CPU: exactly the _f32/_bf16 op (data errors returned, outputs untouched), errors set to UINT64_MAX. */
DRMAS_API int32_t drmas_lmhead_chunk_async_f32(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                               const int64_t* host_row_offsets, const int64_t* row_offsets,
                                               int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                                               int64_t vocab, float* logits, const int64_t* targets,
                                               const float* old_logp, const float* advantages,
                                               const float* ref_logp, const uint8_t* mask, float* logp,
                                               float* entropy, double* sums, uint64_t* errors, void* stream);
DRMAS_API int32_t drmas_lmhead_chunk_async_bf16(int32_t device, const drmas_lmhead_config* cfg, int64_t num_rows,
                                                const int64_t* host_row_offsets, const int64_t* row_offsets,
                                                int64_t num_tokens, int64_t chunk_begin, int64_t chunk_tokens,
                                                int64_t vocab, uint16_t* logits, const int64_t* targets,
                                                const float* old_logp, const float* advantages,
                                                const float* ref_logp, const uint8_t* mask, float* logp,
                                                float* entropy, double* sums, uint64_t* errors, void* stream);

/* drmas_lmhead_logprobs_* without its synchronisation (one per call on CUDA): the data errors go to
 * `errors` (2 entries in the other arrays' memory, as drmas_lmhead_chunk_async_*: errors[0] the first
 * token whose target is outside [0, vocab), errors[1] the first flat index t * vocab + v of a
 * non-finite logit, UINT64_MAX where none) and logp and entropy are written whatever it says, so a
 * caller of many chunks reads the errors once after the last. Bit for bit the plain op's results on
 * data without errors. CPU: exactly the plain op, errors set to UINT64_MAX. */
DRMAS_API int32_t drmas_lmhead_logprobs_async_f32(int32_t device, int64_t num_tokens, int64_t vocab,
                                                  const float* logits, const int64_t* targets, float* logp,
                                                  float* entropy, uint64_t* errors, void* stream);
DRMAS_API int32_t drmas_lmhead_logprobs_async_bf16(int32_t device, int64_t num_tokens, int64_t vocab,
                                                   const uint16_t* logits, const int64_t* targets, float* logp,
                                                   float* entropy, uint64_t* errors, void* stream);

/* ---- 6. a decoding step's attention (CPU only) ---------------------------------------- *
 * One layer of one decoding step of a grouped-query-attention model (Qwen3 / Llama layout) for
 * `rows` rows, one new token each, over a KV cache: per row r and kv head g (query head i reads kv
 * head i / (heads / kv_heads), HF's repeat_kv):
 *  - qkv + r * qkv_stride holds the row's projections [q: heads x head_dim | k: kv_heads x head_dim |
 *    v: kv_heads x head_dim]. With q_norm and k_norm ([head_dim] each, Qwen3) every q and k head is
 *    first RMS-normalised, x * (1 / sqrt(mean(x^2) + norm_eps)) * w; then rotated,
 *    x * cos + roll(x, head_dim / 2) * sin_signed (HF's rotate_half with sin's first half negated;
 *    cos and sin_signed are [rows, head_dim]). q and k are overwritten with these.
 *  - The new key and value go to slot write_slot of the cache: element c of slot j of row r, kv
 *    head g is k_cache[r * cache_row_stride + (g * capacity + j) * head_dim + c] (v_cache alike).
 *  - out[r, i, :] = softmax_j(scale q_i . k_j) v_j over the slots j in [0, slots) with mask[r * slots
 *    + j] != 0, and write_slot always (mask NULL: every slot); out is [rows, heads * head_dim].
 * Floats throughout: dot products and the softmax sum in eight lanes added in a fixed order, e^x by
 * a float polynomial within ~2 ulps (scores more than 87 below the row's maximum count as e^-87),
 * each element of the weighted sum of the values one running sum over the attended slots in
 * increasing order, divided by the softmax sum at the end; the same result on every instruction set
 * and thread count. The keys of masked slots and of slots in [slots, capacity) may be read (never
 * their values): what they hold does not change a bit. capacity < 2^31. The arrays the call writes
 * (qkv, k_cache, v_cache, out) must not share memory with one another or with the others (each
 * strided array spanning its rows with their gaps); DRMAS_ERR_CONFIG names the pair. The CUDA device
 * is DRMAS_ERR_UNSUPPORTED: on GPUs the decoding step is LibTorch's. */
DRMAS_API int32_t drmas_decode_attention_f32(int32_t device, int64_t rows, int64_t heads, int64_t kv_heads,
                                             int64_t head_dim, float* qkv, int64_t qkv_stride, const float* q_norm,
                                             const float* k_norm, double norm_eps, const float* cos,
                                             const float* sin_signed, float* k_cache, float* v_cache,
                                             int64_t cache_row_stride, int64_t capacity, int64_t write_slot,
                                             int64_t slots, const uint8_t* mask, double scale, float* out);

/* ---- 7. a CPU decoding step's other ops (CPU only) ------------------------------------ *
 * The rest of a decoding step's per-layer arithmetic and its sampler, one call each instead of a dozen
 * LibTorch calls. Rows are strided (strides in floats, each >= the row's width); `rows` = 0 is a
 * no-op. Rows run in parallel when rows x width is large (64K elements a thread); each row is one
 * thread's, computed with the same operations in the same order wherever it runs, so the results are
 * bit for bit the same on every thread count and instruction set (the AVX2 and the baseline loops,
 * DRMAS_CPU_ISA=v2, agree). The CUDA device is DRMAS_ERR_UNSUPPORTED: on GPUs the decoding step is
 * LibTorch's.
 *
 * RMSNorm with the transformer's residual connection (HF's Qwen2 / Llama RMSNorm in float32): per row
 * r, when residual is not NULL, first x[r, c] += residual[r, c] (a float add, written back into x: the
 * residual stream); then out[r, c] = (x[r, c] * f_r) * weight[c], two float multiplies in that order,
 * with f_r = (float)(1 / sqrt(ss_r / hidden + eps)) in fp64 and ss_r = sum_c x[r, c]^2 (after the add)
 * accumulated in fp64 in a fixed order. hidden >= 1; eps finite and >= 0 (eps 0 and a row of zeros
 * give NaN, as HF). out may be x itself (in place; then out_stride must equal x_stride) or a buffer
 * that does not overlap x; residual must not overlap x or out, nor weight out (or x, with a residual):
 * a partial overlap is DRMAS_ERR_CONFIG naming the pair (the extent of a strided array is its rows
 * from the first element to the last row's end, gaps included). Non-finite values propagate. */
DRMAS_API int32_t drmas_rms_norm_f32(int32_t device, int64_t rows, int64_t hidden, float* x, int64_t x_stride,
                                     const float* residual, int64_t residual_stride, const float* weight, double eps,
                                     float* out, int64_t out_stride);

/* SwiGLU: out[r, c] = silu(gate[r, c]) * up[r, c], silu(g) = g / (1 + e^-g) in float (LibTorch's
 * formula), e^x by a float polynomial within ~2 ulps over the whole float range, so an output is within
 * ~1e-6 relative of the exact value or below ~1e-30 in magnitude. Where e^-g overflows float (g below
 * -88.7228, where |silu(g)| < 2.6e-37, and g = -inf) silu is its limit -0, as LibTorch's float silu
 * gives for a finite g (for -inf it gives NaN): the output is +-0 for a finite up (NaN for an infinite
 * one). g = +inf gives +inf * up; NaN propagates. width >= 1. out may be gate or up (in place, with
 * the same stride) or a buffer overlapping neither (a partial overlap is DRMAS_ERR_CONFIG, as for
 * drmas_rms_norm_f32); gate and up may share memory. */
DRMAS_API int32_t drmas_swiglu_f32(int32_t device, int64_t rows, int64_t width, const float* gate, int64_t gate_stride,
                                   const float* up, int64_t up_stride, float* out, int64_t out_stride);

/* The sampler of a decoding step (Java's dev.drmas.rollout.Sampler, HF's warpers: temperature, top-k,
 * top-p, in that order): one token and its log-probability per row of `vocab` logits, from the row's
 * uniform number. Per row:
 *  - temperature 0 (greedy): the token is the first index of the largest logit (torch.argmax's) and
 *    the log-prob log_softmax(logits)[token], unscaled; uniforms are not read (may be NULL).
 *  - otherwise s = logits / (float)temperature, divided in float (as LibTorch's x.div on a float
 *    tensor; temperature 1 is no division). top_k > 0 and < vocab keeps the tokens whose s is >= the
 *    k-th largest s (duplicates counted; ties with the k-th stay). Then top_p < 1 orders the kept
 *    tokens by s descending, equal s by token index ascending (documented here: LibTorch's sort leaves
 *    the order of ties unspecified), and keeps a token when the probability mass of the kept tokens
 *    strictly before it, with the probabilities renormalised over the top-k set, is < top_p (so the
 *    token that crosses top_p is kept). The token is the first index whose CDF of e^(s - max) over the
 *    kept tokens, summed in token order in fp64, exceeds uniforms[r] times its total (uniforms[r] < 1
 *    puts that target below the total in fp64, so there is one), which is never a token of zero
 *    probability; were the target ever the total, the token where the CDF reaches it. The log-prob is log_softmax(s)[token] over ALL tokens (before top-k
 *    and top-p: what the trainer recomputes as the old log-prob), in fp64, rounded to float.
 *  - a row that is no distribution (a NaN logit, a +inf one, all -inf; after the division, so also
 *    logits that overflow it) gets log-prob NaN and, as token, the first index of its largest non-NaN
 *    value (0 if it has none); the call still succeeds, so that the caller's NaN check names the row
 *    (Java: Generator.Row.add). -inf logits among finite ones are tokens of probability 0.
 * Probabilities are e^(s - max) in fp64 by a polynomial within a few fp64 ulps of libm's exp (results
 * in the denormals included), so a draw differs from an exact computation's only when its target lies
 * within ~1e-15 relative of a CDF boundary (or a top-p mass as close to top_p). temperature finite and >= 0; top_k >= 0 (0: off); top_p in
 * (0, 1] (1: off); every uniforms[r] in [0, 1) (DRMAS_ERR_RANGE names the first row that is not; it is
 * checked whenever uniforms is given); vocab < 2^31. Writes tokens[rows] and logprobs[rows].
 * Scratch: per thread, up to 16 bytes a vocabulary entry (the scaled row, top-k's copy, the fp64
 * CDF, top-p's order; only those the settings need), allocated and freed inside the call. tokens and
 * logprobs must not share memory with logits, uniforms or each other (DRMAS_ERR_CONFIG names the pair). */
DRMAS_API int32_t drmas_sample_f32(int32_t device, int64_t rows, int64_t vocab, const float* logits, int64_t logits_stride,
                                   double temperature, int64_t top_k, double top_p, const double* uniforms, int64_t* tokens,
                                   float* logprobs);

/* ---- the ABI as the library was compiled ------------------------------------------ *
 * So that a binding can check its own copy of this header against the library it loaded:
 * drmas_abi_value("drmas_norm_config") is sizeof(drmas_norm_config),
 * drmas_abi_value("drmas_norm_config.eps") is offsetof(drmas_norm_config, eps), and
 * drmas_abi_value("DRMAS_LOSS_KL") is the value of that #define (every DRMAS_ constant of this
 * header except DRMAS_API and DRMAS_H). Returns -1 for a name it does not know, or NULL. */
DRMAS_API int64_t drmas_abi_value(const char* name);

/* ---- CUDA memory helpers (so the bindings can test kernels with nothing but a JRE) --- */
#define DRMAS_COPY_HOST_TO_DEVICE 1
#define DRMAS_COPY_DEVICE_TO_HOST 2
#define DRMAS_COPY_DEVICE_TO_DEVICE 3
DRMAS_API int32_t drmas_cuda_malloc(size_t bytes, void** ptr);
DRMAS_API int32_t drmas_cuda_free(void* ptr);
DRMAS_API int32_t drmas_cuda_memcpy(void* dst, const void* src, size_t bytes, int32_t kind);
DRMAS_API int32_t drmas_cuda_synchronize(void* stream);
/* Visible CUDA devices (0 without CUDA, a driver or a GPU). */
DRMAS_API int32_t drmas_cuda_device_count(void);
/* The calling thread's current device: where drmas_cuda_malloc allocates. Kernel calls do not
 * need it (they run on their arrays' device). DRMAS_ERR_RANGE for a device that is not there. */
DRMAS_API int32_t drmas_cuda_set_device(int32_t device);
DRMAS_API int32_t drmas_cuda_get_device(int32_t* device);

#ifdef __cplusplus
}
#endif
#endif /* DRMAS_H */
