// Kernels.java — the Java face of libdrmas on MemorySegments: segmentStats, advantage,
// broadcastRows, clippedLoss, lmheadLogprobs, lmheadChunk and their bf16 forms lmheadLogprobsBf16, lmheadChunkBf16,
// and the CPU-only decoding step's decodeAttention, rmsNorm, swiglu and sample
// (one name per operation, as in C and CUDA). It checks that every
// buffer is large enough before the call, so that a short buffer is a Java error naming the
// argument instead of a native out-of-bounds write; sizes that overflow a long are
// IllegalArgumentExceptions naming the argument, the factors and their values (never a bare
// ArithmeticException, nor a product that wraps round and lets a short buffer through). Config structs are written field by field
// through LibDrmas's named layouts, which are checked against the loaded library before the
// first one is written. CPU calls accept heap segments (Java arrays, read in place); CUDA calls
// need segments that wrap device memory (DeviceBuffer). A DeviceBuffer's memory passed to the CPU
// backend is refused; other device memory cannot be told from host memory here (a LibTorch CUDA
// tensor's data_ptr made a segment with the restricted MemorySegment.reinterpret: the caller
// vouches for it, as reinterpret says), so callers with tensors pick the backend from the tensor's
// device, as the trainer does (TensorViews.backendOf).
package dev.drmas.bindings;

import java.lang.foreign.Arena;
import java.lang.foreign.MemoryLayout;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.StructLayout;
import java.lang.invoke.VarHandle;
import java.util.Objects;

public final class Kernels {
    private Kernels() {}

    /**
     * drmas_norm_config. The mode is its descriptor: the mean and the std from the agent segment
     * (true) or the group (false), and the trajectory numerator; pooling and singleton are the
     * DRMAS_POOL_* and DRMAS_SINGLETON_* values.
     */
    public record NormParams(boolean meanFromAgent, boolean stdFromAgent, boolean trajectoryNumerator, int globalPooling,
                             int singleton, int ddof, boolean scaleByStd, double eps) {}

    /** drmas_loss_config. dualClip 0 is off; klType 0 is none; perRowMean averages each row's tokens first. */
    public record LossParams(double clipLow, double clipHigh, double dualClip, double klCoef, double normalizer,
                             int klType, boolean perRowMean) {}

    /** drmas_lmhead_config: the loss's fields, and the weight of each valid token's entropy (the bonus). */
    public record LmHeadParams(LossParams loss, double entropyCoef) {}

    // The config structs are written field by field through their named layouts.
    private static VarHandle field(StructLayout s, String name) {
        return s.varHandle(MemoryLayout.PathElement.groupElement(name));
    }

    private static final VarHandle NC_MEAN_FROM = field(LibDrmas.NORM_CONFIG, "mean_from");
    private static final VarHandle NC_STD_FROM = field(LibDrmas.NORM_CONFIG, "std_from");
    private static final VarHandle NC_NUMERATOR = field(LibDrmas.NORM_CONFIG, "numerator");
    private static final VarHandle NC_POOLING = field(LibDrmas.NORM_CONFIG, "global_pooling");
    private static final VarHandle NC_SINGLETON = field(LibDrmas.NORM_CONFIG, "singleton");
    private static final VarHandle NC_DDOF = field(LibDrmas.NORM_CONFIG, "ddof");
    private static final VarHandle NC_SCALE = field(LibDrmas.NORM_CONFIG, "scale_by_std");
    private static final VarHandle NC_RESERVED = field(LibDrmas.NORM_CONFIG, "reserved");
    private static final VarHandle NC_EPS = field(LibDrmas.NORM_CONFIG, "eps");
    private static final VarHandle LC_CLIP_LOW = field(LibDrmas.LOSS_CONFIG, "clip_low");
    private static final VarHandle LC_CLIP_HIGH = field(LibDrmas.LOSS_CONFIG, "clip_high");
    private static final VarHandle LC_DUAL_CLIP = field(LibDrmas.LOSS_CONFIG, "dual_clip");
    private static final VarHandle LC_KL_COEF = field(LibDrmas.LOSS_CONFIG, "kl_coef");
    private static final VarHandle LC_NORMALIZER = field(LibDrmas.LOSS_CONFIG, "normalizer");
    private static final VarHandle LC_KL_TYPE = field(LibDrmas.LOSS_CONFIG, "kl_type");
    private static final VarHandle LC_PER_ROW_MEAN = field(LibDrmas.LOSS_CONFIG, "per_row_mean");

    private static final VarHandle HC_CLIP_LOW = field(LibDrmas.LMHEAD_CONFIG, "clip_low");
    private static final VarHandle HC_CLIP_HIGH = field(LibDrmas.LMHEAD_CONFIG, "clip_high");
    private static final VarHandle HC_DUAL_CLIP = field(LibDrmas.LMHEAD_CONFIG, "dual_clip");
    private static final VarHandle HC_KL_COEF = field(LibDrmas.LMHEAD_CONFIG, "kl_coef");
    private static final VarHandle HC_NORMALIZER = field(LibDrmas.LMHEAD_CONFIG, "normalizer");
    private static final VarHandle HC_ENTROPY_COEF = field(LibDrmas.LMHEAD_CONFIG, "entropy_coef");
    private static final VarHandle HC_KL_TYPE = field(LibDrmas.LMHEAD_CONFIG, "kl_type");
    private static final VarHandle HC_PER_ROW_MEAN = field(LibDrmas.LMHEAD_CONFIG, "per_row_mean");

    private static int bit(boolean b) {
        return b ? 1 : 0;
    }

    /** p as a drmas_norm_config in {@code arena}. */
    static MemorySegment normConfig(Arena arena, NormParams p) {
        LibDrmas.requireAbi();
        MemorySegment c = arena.allocate(LibDrmas.NORM_CONFIG);
        NC_MEAN_FROM.set(c, 0L, bit(p.meanFromAgent()));
        NC_STD_FROM.set(c, 0L, bit(p.stdFromAgent()));
        NC_NUMERATOR.set(c, 0L, bit(p.trajectoryNumerator()));
        NC_POOLING.set(c, 0L, p.globalPooling());
        NC_SINGLETON.set(c, 0L, p.singleton());
        NC_DDOF.set(c, 0L, p.ddof());
        NC_SCALE.set(c, 0L, bit(p.scaleByStd()));
        NC_RESERVED.set(c, 0L, 0);
        NC_EPS.set(c, 0L, p.eps());
        return c;
    }

    /** p as a drmas_loss_config in {@code arena}. */
    static MemorySegment lossConfig(Arena arena, LossParams p) {
        LibDrmas.requireAbi();
        MemorySegment c = arena.allocate(LibDrmas.LOSS_CONFIG);
        LC_CLIP_LOW.set(c, 0L, p.clipLow());
        LC_CLIP_HIGH.set(c, 0L, p.clipHigh());
        LC_DUAL_CLIP.set(c, 0L, p.dualClip());
        LC_KL_COEF.set(c, 0L, p.klCoef());
        LC_NORMALIZER.set(c, 0L, p.normalizer());
        LC_KL_TYPE.set(c, 0L, p.klType());
        LC_PER_ROW_MEAN.set(c, 0L, bit(p.perRowMean()));
        return c;
    }

    /** p as a drmas_lmhead_config in {@code arena}. */
    static MemorySegment lmheadConfig(Arena arena, LmHeadParams p) {
        LibDrmas.requireAbi();
        MemorySegment c = arena.allocate(LibDrmas.LMHEAD_CONFIG);
        LossParams l = p.loss();
        HC_CLIP_LOW.set(c, 0L, l.clipLow());
        HC_CLIP_HIGH.set(c, 0L, l.clipHigh());
        HC_DUAL_CLIP.set(c, 0L, l.dualClip());
        HC_KL_COEF.set(c, 0L, l.klCoef());
        HC_NORMALIZER.set(c, 0L, l.normalizer());
        HC_ENTROPY_COEF.set(c, 0L, p.entropyCoef());
        HC_KL_TYPE.set(c, 0L, l.klType());
        HC_PER_ROW_MEAN.set(c, 0L, bit(l.perRowMean()));
        return c;
    }

    private static MemorySegment orNull(MemorySegment s) {
        return s == null ? MemorySegment.NULL : s;
    }

    /** a x b, a size that {@code what} ("argument: factor x factor") names where it overflows a long. */
    private static long times(String what, long a, long b) {
        try {
            return Math.multiplyExact(a, b);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(what + " = " + a + " x " + b + " overflows a 64-bit size");
        }
    }

    /** a + b, as {@link #times}. */
    private static long plus(String what, long a, long b) {
        try {
            return Math.addExact(a, b);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(what + " = " + a + " + " + b + " overflows a 64-bit size");
        }
    }

    /** The bytes {@code count} elements of {@code elemBytes} take; an IllegalArgumentException naming {@code name} past a long. */
    private static long bytes(String name, long count, long elemBytes) {
        try {
            return Math.multiplyExact(count, elemBytes);
        } catch (ArithmeticException e) {
            throw new IllegalArgumentException(name + ": " + count + " elements x " + elemBytes + " bytes overflows a 64-bit size");
        }
    }

    /** The row_offsets entries for numRows rows: offsetsFor(numRows). */
    private static long offsetsFor(long numRows) {
        return plus("row_offsets: offsetsFor(numRows)", numRows, 1);
    }

    // Checks the segment can hold `count` elements of `elemBytes` and lives where the backend
    // can read it. A NULL segment is passed through: the library names it in its error.
    private static MemorySegment arg(Backend b, String name, MemorySegment s, long count, long elemBytes) {
        if (s == null || s.equals(MemorySegment.NULL)) return MemorySegment.NULL;
        if (b == Backend.CUDA && !s.isNative()) {
            throw new IllegalArgumentException(name + ": a Java array cannot be passed to the CUDA backend; use a DeviceBuffer");
        }
        if (b == Backend.CPU && DeviceBuffer.holdsDeviceMemory(s)) {  // (the host would fault on it: a dead JVM)
            throw new IllegalArgumentException(name + ": device memory (a DeviceBuffer) cannot be passed to the CPU backend");
        }
        long need = bytes(name, count, elemBytes);
        if (s.byteSize() < need) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes but " + count
                    + " elements need " + need);
        }
        return s;
    }

    // arg for an array the call writes: a read-only segment (say a read-only file mapping, whose pages a
    // native store would fault on) is refused.
    private static MemorySegment out(Backend b, String name, MemorySegment s, long count, long elemBytes) {
        MemorySegment r = arg(b, name, s, count, elemBytes);
        if (!r.equals(MemorySegment.NULL) && s.isReadOnly()) {
            throw new IllegalArgumentException(name + " is read-only, but the call writes it");
        }
        return r;
    }

    private static void checkCount(String name, long v) {
        if (v < 0) throw new IllegalArgumentException(name + " must be >= 0, got " + v);
    }

    /** Per-segment count, mean, M2 and (when std != null) std; see drmas_segment_stats_f32. */
    public static void segmentStats(Backend b, long n, MemorySegment values, MemorySegment ids, long numSegments,
                                    boolean unbiased, MemorySegment count, MemorySegment mean, MemorySegment m2,
                                    MemorySegment std, MemorySegment stream) {
        checkCount("n", n);
        checkCount("numSegments", numSegments);
        boolean crit = b == Backend.CPU;
        LibDrmas.check(LibDrmas.segmentStats(crit, b.device(), n, arg(b, "values", values, n, 4), arg(b, "segment_ids", ids, n, 4),
                numSegments, unbiased ? 1 : 0, out(b, "count", count, numSegments, 8), out(b, "mean", mean, numSegments, 8),
                out(b, "m2", m2, numSegments, 8), out(b, "std", std, numSegments, 8), orNull(stream)));
    }

    /** Row advantages (and optional diagnostics); see drmas_advantage_f32. traj may be null with row pooling. */
    public static void advantage(Backend b, NormParams p, long n, MemorySegment scores, MemorySegment uid,
                                 MemorySegment traj, MemorySegment agent, long numUids, long numTrajs, long numAgents,
                                 MemorySegment advantages, MemorySegment diagnostics, MemorySegment stream) {
        advantage(b, p, false, n, scores, uid, traj, agent, numUids, numTrajs, numAgents, advantages, diagnostics, stream);
    }

    /**
     * As above; {@code trusted} calls drmas_advantage_trusted_f32 (for ids the caller built itself:
     * sorted rows read once; on bad input the outputs may be partly written, the error is still thrown).
     */
    public static void advantage(Backend b, NormParams p, boolean trusted, long n, MemorySegment scores, MemorySegment uid,
                                 MemorySegment traj, MemorySegment agent, long numUids, long numTrajs, long numAgents,
                                 MemorySegment advantages, MemorySegment diagnostics, MemorySegment stream) {
        Objects.requireNonNull(p, "params");
        checkCount("n", n);
        checkCount("numUids", numUids);
        checkCount("numTrajs", numTrajs);
        checkCount("numAgents", numAgents);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = normConfig(arena, p);
            long segs = times("numUids x numAgents", numUids, numAgents);  // (the kernel's (uid, agent) statistics)
            LibDrmas.check(LibDrmas.advantage(crit, trusted, b.device(), cfg, n, arg(b, "scores", scores, n, 4),
                    arg(b, "uid", uid, n, 4), arg(b, "traj", traj, n, 4), arg(b, "agent", agent, n, 4),
                    numUids, numTrajs, numAgents, out(b, "advantages", advantages, n, 4),
                    out(b, "diagnostics", diagnostics, times("diagnostics: numUids x numAgents x DIAG_FIELDS", segs, AbiIndices.DIAG_FIELDS), 8), orNull(stream)));
        }
    }

    /** Row values to their tokens; see drmas_broadcast_rows_f32. */
    public static void broadcastRows(Backend b, long numRows, MemorySegment rowValues, MemorySegment offsets,
                                     long numTokens, MemorySegment tokenValues, MemorySegment stream) {
        checkCount("numRows", numRows);
        checkCount("numTokens", numTokens);
        boolean crit = b == Backend.CPU;
        LibDrmas.check(LibDrmas.broadcastRows(crit, b.device(), numRows, arg(b, "row_values", rowValues, numRows, 4),
                arg(b, "row_offsets", offsets, offsetsFor(numRows), 8), numTokens,
                out(b, "token_values", tokenValues, numTokens, 4), orNull(stream)));
    }

    /** Fused clipped loss forward and backward; see drmas_clipped_loss_f32. ref and mask may be null. */
    public static void clippedLoss(Backend b, LossParams p, long numRows, MemorySegment offsets, long numTokens,
                                   MemorySegment logp, MemorySegment oldLogp, MemorySegment adv, MemorySegment ref,
                                   MemorySegment mask, MemorySegment grad, MemorySegment sums, MemorySegment stream) {
        clippedLoss(b, p, numRows, null, offsets, numTokens, logp, oldLogp, adv, ref, mask, grad, sums, stream);
    }

    /**
     * As above; with {@code hostOffsets} (a host copy of {@code offsets}, a heap or native segment)
     * through drmas_clipped_loss_async_f32, which validates that copy and never synchronises the
     * device: the call is only queued on {@code stream}. {@code offsets} must hold the same values.
     */
    public static void clippedLoss(Backend b, LossParams p, long numRows, MemorySegment hostOffsets, MemorySegment offsets,
                                   long numTokens, MemorySegment logp, MemorySegment oldLogp, MemorySegment adv,
                                   MemorySegment ref, MemorySegment mask, MemorySegment grad, MemorySegment sums,
                                   MemorySegment stream) {
        loss(b, p, numRows, hostOffsets, offsets, numTokens, logp, oldLogp, adv, false, ref, mask, grad, sums, stream);
    }

    /**
     * The loss with one advantage per row ({@code rowAdv}: numRows floats) read through the offsets;
     * see drmas_clipped_loss_rows_f32. {@code hostOffsets} may be null (then validated on the device,
     * one synchronisation with CUDA); ref and mask may be null.
     */
    public static void clippedLossRows(Backend b, LossParams p, long numRows, MemorySegment hostOffsets, MemorySegment offsets,
                                       long numTokens, MemorySegment logp, MemorySegment oldLogp, MemorySegment rowAdv,
                                       MemorySegment ref, MemorySegment mask, MemorySegment grad, MemorySegment sums,
                                       MemorySegment stream) {
        loss(b, p, numRows, hostOffsets, offsets, numTokens, logp, oldLogp, rowAdv, true, ref, mask, grad, sums, stream);
    }

    // The three loss entry points: drmas_clipped_loss_f32 (no host offsets, advantages per token),
    // drmas_clipped_loss_async_f32 (host offsets) and drmas_clipped_loss_rows_f32 (per row, host offsets or not).
    private static void loss(Backend b, LossParams p, long numRows, MemorySegment hostOffsets, MemorySegment offsets,
                             long numTokens, MemorySegment logp, MemorySegment oldLogp, MemorySegment adv, boolean perRow,
                             MemorySegment ref, MemorySegment mask, MemorySegment grad, MemorySegment sums,
                             MemorySegment stream) {
        Objects.requireNonNull(p, "params");
        checkCount("numRows", numRows);
        checkCount("numTokens", numTokens);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = lossConfig(arena, p);
            MemorySegment off = arg(b, "row_offsets", offsets, offsetsFor(numRows), 8);
            MemorySegment lp = arg(b, "logp", logp, numTokens, 4), olp = arg(b, "old_logp", oldLogp, numTokens, 4);
            MemorySegment a = perRow ? arg(b, "row_advantages", adv, numRows, 4) : arg(b, "advantages", adv, numTokens, 4);
            MemorySegment r = arg(b, "ref_logp", ref, numTokens, 4);
            MemorySegment m = arg(b, "mask", mask, numTokens, 1), g = out(b, "grad", grad, numTokens, 4);
            MemorySegment s = out(b, "sums", sums, AbiIndices.LOSS_SUMS, 8);
            if (hostOffsets == null && !perRow) {
                LibDrmas.check(LibDrmas.clippedLoss(crit, b.device(), cfg, numRows, off, numTokens, lp, olp, a, r, m, g, s,
                        orNull(stream)));
            } else {
                MemorySegment host = hostOffsets == null ? MemorySegment.NULL
                        : hostArg("host_row_offsets", hostOffsets, offsetsFor(numRows), 8, crit, arena);
                LibDrmas.check(LibDrmas.clippedLossAsync(crit, perRow, b.device(), cfg, numRows, host, off, numTokens, lp, olp,
                        a, r, m, g, s, orNull(stream)));
            }
        }
    }

    /** Log-probs (and entropies, when entropy != null) of a [numTokens, vocab] block of fp32 logits; see drmas_lmhead_logprobs_f32. */
    public static void lmheadLogprobs(Backend b, long numTokens, long vocab, MemorySegment logits, MemorySegment targets,
                                      MemorySegment logp, MemorySegment entropy, MemorySegment stream) {
        lmheadLogprobs(b, false, numTokens, vocab, logits, targets, logp, entropy, stream);
    }

    /**
     * As {@link #lmheadLogprobs} over bf16 logits (2 bytes each, the upper half of an fp32: torch.bfloat16's
     * layout); see drmas_lmhead_logprobs_bf16.
     */
    public static void lmheadLogprobsBf16(Backend b, long numTokens, long vocab, MemorySegment logits, MemorySegment targets,
                                          MemorySegment logp, MemorySegment entropy, MemorySegment stream) {
        lmheadLogprobs(b, true, numTokens, vocab, logits, targets, logp, entropy, stream);
    }

    private static void lmheadLogprobs(Backend b, boolean bf16, long numTokens, long vocab, MemorySegment logits,
                                       MemorySegment targets, MemorySegment logp, MemorySegment entropy, MemorySegment stream) {
        checkCount("numTokens", numTokens);
        if (vocab < 1) throw new IllegalArgumentException("vocab must be >= 1, got " + vocab);
        boolean crit = b == Backend.CPU;
        LibDrmas.check(LibDrmas.lmheadLogprobs(crit, bf16, b.device(), numTokens, vocab,
                arg(b, "logits", logits, times("logits: numTokens x vocab", numTokens, vocab), bf16 ? 2 : 4), arg(b, "targets", targets, numTokens, 8),
                out(b, "logp", logp, numTokens, 4), out(b, "entropy", entropy, numTokens, 4), orNull(stream)));
    }

    /**
     * One chunk of the fused LM head's update: dL/dz over {@code logits} (fp32) in place, the chunk's log-probs
     * and entropies (each may be null) and its sums ({@link AbiIndices}{@code .LMHEAD_SUMS}); see
     * drmas_lmhead_chunk_f32. Token arrays have numTokens entries, advantages numRows.
     */
    public static void lmheadChunk(Backend b, LmHeadParams p, long numRows, MemorySegment offsets, long numTokens,
                                   long chunkBegin, long chunkTokens, long vocab, MemorySegment logits, MemorySegment targets,
                                   MemorySegment oldLogp, MemorySegment adv, MemorySegment ref, MemorySegment mask,
                                   MemorySegment logp, MemorySegment entropy, MemorySegment sums, MemorySegment stream) {
        lmheadChunk(b, false, p, numRows, offsets, numTokens, chunkBegin, chunkTokens, vocab, logits, targets, oldLogp, adv, ref,
                mask, logp, entropy, sums, stream);
    }

    /**
     * As {@link #lmheadChunk} over bf16 logits (2 bytes each), dL/dz written back over them rounded to bf16; see
     * drmas_lmhead_chunk_bf16.
     */
    public static void lmheadChunkBf16(Backend b, LmHeadParams p, long numRows, MemorySegment offsets, long numTokens,
                                       long chunkBegin, long chunkTokens, long vocab, MemorySegment logits, MemorySegment targets,
                                       MemorySegment oldLogp, MemorySegment adv, MemorySegment ref, MemorySegment mask,
                                       MemorySegment logp, MemorySegment entropy, MemorySegment sums, MemorySegment stream) {
        lmheadChunk(b, true, p, numRows, offsets, numTokens, chunkBegin, chunkTokens, vocab, logits, targets, oldLogp, adv, ref,
                mask, logp, entropy, sums, stream);
    }

    /** The scalar arguments of a chunk call, checked before any native call (both chunk entries). */
    private static void checkChunk(LmHeadParams p, long numRows, long numTokens, long chunkTokens, long vocab) {
        Objects.requireNonNull(p, "params");
        checkCount("numRows", numRows);
        checkCount("numTokens", numTokens);
        checkCount("chunkTokens", chunkTokens);
        if (vocab < 1) throw new IllegalArgumentException("vocab must be >= 1, got " + vocab);
    }

    private static void lmheadChunk(Backend b, boolean bf16, LmHeadParams p, long numRows, MemorySegment offsets, long numTokens,
                                    long chunkBegin, long chunkTokens, long vocab, MemorySegment logits, MemorySegment targets,
                                    MemorySegment oldLogp, MemorySegment adv, MemorySegment ref, MemorySegment mask,
                                    MemorySegment logp, MemorySegment entropy, MemorySegment sums, MemorySegment stream) {
        checkChunk(p, numRows, numTokens, chunkTokens, vocab);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = lmheadConfig(arena, p);
            LibDrmas.check(LibDrmas.lmheadChunk(crit, bf16, b.device(), cfg, numRows, arg(b, "row_offsets", offsets, offsetsFor(numRows), 8),
                    numTokens, chunkBegin, chunkTokens, vocab,
                    out(b, "logits", logits, times("logits: chunkTokens x vocab", chunkTokens, vocab), bf16 ? 2 : 4),
                    arg(b, "targets", targets, numTokens, 8), arg(b, "old_logp", oldLogp, numTokens, 4),
                    arg(b, "advantages", adv, numRows, 4), arg(b, "ref_logp", ref, numTokens, 4), arg(b, "mask", mask, numTokens, 1),
                    out(b, "logp", logp, chunkTokens, 4), out(b, "entropy", entropy, chunkTokens, 4),
                    out(b, "sums", sums, AbiIndices.LMHEAD_SUMS, 8), orNull(stream)));
        }
    }

    /**
     * {@link #lmheadLogprobs} (bf16: {@link #lmheadLogprobsBf16}) without waiting for the device; see
     * drmas_lmhead_logprobs_async_f32: the data errors go to {@code errors} (2 uint64 in the backend's
     * memory, UINT64_MAX where none: the first bad target's token, the first non-finite logit's flat
     * index) instead of being thrown, and with CUDA logp and entropy are written regardless. The CPU
     * backend throws as lmheadLogprobs does and sets errors to UINT64_MAX.
     */
    public static void lmheadLogprobsAsync(Backend b, boolean bf16, long numTokens, long vocab, MemorySegment logits,
                                           MemorySegment targets, MemorySegment logp, MemorySegment entropy, MemorySegment errors,
                                           MemorySegment stream) {
        checkCount("numTokens", numTokens);
        if (vocab < 1) throw new IllegalArgumentException("vocab must be >= 1, got " + vocab);
        boolean crit = b == Backend.CPU;
        LibDrmas.check(LibDrmas.lmheadLogprobsAsync(crit, bf16, b.device(), numTokens, vocab,
                arg(b, "logits", logits, times("logits: numTokens x vocab", numTokens, vocab), bf16 ? 2 : 4), arg(b, "targets", targets, numTokens, 8),
                out(b, "logp", logp, numTokens, 4), out(b, "entropy", entropy, numTokens, 4), out(b, "errors", errors, 2, 8),
                orNull(stream)));
    }

    /**
     * One chunk as {@link #lmheadChunk} (bf16: {@link #lmheadChunkBf16}) without waiting for the device;
     * see drmas_lmhead_chunk_async_f32: {@code hostOffsets} (a host copy of {@code offsets}, a heap or
     * native segment) is validated on the host, and the chunk's data errors go to {@code errors} (2
     * uint64 in the backend's memory, UINT64_MAX where none: the chunk-relative first bad target's token,
     * the first non-finite logit's flat index) instead of being thrown; with CUDA the outputs are then
     * written regardless, so the caller reads errors before trusting them. The CPU backend throws data
     * errors as lmheadChunk does and sets errors to UINT64_MAX.
     */
    public static void lmheadChunkAsync(Backend b, boolean bf16, LmHeadParams p, long numRows, MemorySegment hostOffsets,
                                        MemorySegment offsets, long numTokens, long chunkBegin, long chunkTokens, long vocab,
                                        MemorySegment logits, MemorySegment targets, MemorySegment oldLogp, MemorySegment adv,
                                        MemorySegment ref, MemorySegment mask, MemorySegment logp, MemorySegment entropy,
                                        MemorySegment sums, MemorySegment errors, MemorySegment stream) {
        Objects.requireNonNull(p, "params");
        Objects.requireNonNull(hostOffsets, "hostOffsets");
        checkChunk(p, numRows, numTokens, chunkTokens, vocab);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = lmheadConfig(arena, p);
            LibDrmas.check(LibDrmas.lmheadChunkAsync(crit, bf16, b.device(), cfg, numRows,
                    hostArg("host_row_offsets", hostOffsets, offsetsFor(numRows), 8, crit, arena), arg(b, "row_offsets", offsets, offsetsFor(numRows), 8),
                    numTokens, chunkBegin, chunkTokens, vocab,
                    out(b, "logits", logits, times("logits: chunkTokens x vocab", chunkTokens, vocab), bf16 ? 2 : 4),
                    arg(b, "targets", targets, numTokens, 8), arg(b, "old_logp", oldLogp, numTokens, 4),
                    arg(b, "advantages", adv, numRows, 4), arg(b, "ref_logp", ref, numTokens, 4), arg(b, "mask", mask, numTokens, 1),
                    out(b, "logp", logp, chunkTokens, 4), out(b, "entropy", entropy, chunkTokens, 4),
                    out(b, "sums", sums, AbiIndices.LMHEAD_SUMS, 8), out(b, "errors", errors, 2, 8), orNull(stream)));
        }
    }

    /**
     * One layer of a decoding step's attention on the CPU (see drmas_decode_attention_f32): q and k of
     * each row's [q | k | v] in {@code qkv} per-head normed (when qNorm and kNorm are given) and rotated
     * in place, the new key and value written to slot {@code writeSlot} of the caches, and the
     * attention of each query head over the slots of [0, slots) that {@code mask} ([rows, slots]
     * bytes, or null: all) marks, its own slot always, into {@code out} [rows, heads·headDim]. Heap
     * segments (Java arrays) are read in place.
     */
    public static void decodeAttention(long rows, long heads, long kvHeads, long headDim, MemorySegment qkv, long qkvStride,
                                       MemorySegment qNorm, MemorySegment kNorm, double normEps, MemorySegment cos,
                                       MemorySegment sinSigned, MemorySegment kCache, MemorySegment vCache, long cacheRowStride,
                                       long capacity, long writeSlot, long slots, MemorySegment mask, double scale,
                                       MemorySegment out) {
        checkCount("rows", rows);
        if (heads < 1 || kvHeads < 1 || headDim < 1 || capacity < 1 || slots < 1) {
            throw new IllegalArgumentException("heads, kvHeads, headDim, capacity and slots must be >= 1, got " + heads + ", "
                    + kvHeads + ", " + headDim + ", " + capacity + ", " + slots);
        }
        Backend b = Backend.CPU;
        // the native side checks the strides against the shapes; the buffers' extents are checked here
        long rowsBefore = Math.max(0, rows - 1);
        // (every product checked: one that wrapped round would let a short buffer through to native code)
        long qkvWidth = times("qkv: (heads + 2 x kvHeads) x headDim",
                plus("qkv: heads + 2 x kvHeads", heads, times("qkv: 2 x kvHeads", 2, kvHeads)), headDim);
        long qkvNeed = rows == 0 ? 0 : plus("qkv: (rows - 1) x qkvStride + width", times("qkv: (rows - 1) x qkvStride", rowsBefore, qkvStride),
                qkvWidth);
        long cacheRow = times("k_cache: kvHeads x capacity x headDim", times("k_cache: kvHeads x capacity", kvHeads, capacity), headDim);
        long cacheNeed = rows == 0 ? 0 : plus("k_cache: (rows - 1) x cacheRowStride + row",
                times("k_cache: (rows - 1) x cacheRowStride", rowsBefore, cacheRowStride), cacheRow);
        long outNeed = times("out: rows x heads x headDim", rows, times("out: heads x headDim", heads, headDim));
        LibDrmas.check(LibDrmas.decodeAttention(rows, heads, kvHeads, headDim, out(b, "qkv", qkv, qkvNeed, 4), qkvStride,
                arg(b, "q_norm", qNorm, headDim, 4), arg(b, "k_norm", kNorm, headDim, 4), normEps,
                arg(b, "cos", cos, times("cos: rows x headDim", rows, headDim), 4),
                arg(b, "sin_signed", sinSigned, times("sin_signed: rows x headDim", rows, headDim), 4),
                out(b, "k_cache", kCache, cacheNeed, 4), out(b, "v_cache", vCache, cacheNeed, 4), cacheRowStride, capacity, writeSlot,
                slots, arg(b, "mask", mask, times("mask: rows x slots", rows, slots), 1), scale, out(b, "out", out, outNeed, 4)));
    }

    // The floats (or elements) that `rows` rows of `width` at `stride` span: the last row needs only its width.
    private static long extent(String name, long rows, long stride, long width) {
        return rows == 0 ? 0 : plus(name + ": (rows - 1) x stride + width", times(name + ": (rows - 1) x stride", rows - 1, stride), width);
    }

    /**
     * RMSNorm of {@code rows} rows of {@code hidden} floats on the CPU, with the residual connection (see
     * drmas_rms_norm_f32): when {@code residual} is not null, x += residual first (written back into x),
     * then out = (x·f)·weight with f = 1/sqrt(mean(x²) + eps), the mean in fp64. {@code out} may be
     * {@code x} (with the same stride); residual may overlap neither. Strides are in floats. Heap
     * segments (Java arrays) are read in place.
     */
    public static void rmsNorm(long rows, long hidden, MemorySegment x, long xStride, MemorySegment residual, long residualStride,
                               MemorySegment weight, double eps, MemorySegment out, long outStride) {
        checkCount("rows", rows);
        if (hidden < 1) throw new IllegalArgumentException("hidden must be >= 1, got " + hidden);
        Backend b = Backend.CPU;
        // the native side checks the strides against the width; the buffers' extents are checked here
        long xNeed = extent("x", rows, xStride, hidden);
        // x is written only where the residual is added into it (out = x is checked as out)
        MemorySegment xs = residual != null ? out(b, "x", x, xNeed, 4) : arg(b, "x", x, xNeed, 4);
        LibDrmas.check(LibDrmas.rmsNorm(rows, hidden, xs, xStride,
                arg(b, "residual", residual, residual == null ? 0 : extent("residual", rows, residualStride, hidden), 4), residualStride,
                arg(b, "weight", weight, rows == 0 ? 0 : hidden, 4), eps, out(b, "out", out, extent("out", rows, outStride, hidden), 4),
                outStride));
    }

    /**
     * SwiGLU of {@code rows} rows of {@code width} floats on the CPU (see drmas_swiglu_f32): out =
     * silu(gate)·up, silu(g) = g / (1 + e^-g) in float. {@code out} may be gate or up (with the same
     * stride). Strides are in floats. Heap segments (Java arrays) are read in place.
     */
    public static void swiglu(long rows, long width, MemorySegment gate, long gateStride, MemorySegment up, long upStride,
                              MemorySegment out, long outStride) {
        checkCount("rows", rows);
        if (width < 1) throw new IllegalArgumentException("width must be >= 1, got " + width);
        Backend b = Backend.CPU;
        LibDrmas.check(LibDrmas.swiglu(rows, width, arg(b, "gate", gate, extent("gate", rows, gateStride, width), 4), gateStride,
                arg(b, "up", up, extent("up", rows, upStride, width), 4), upStride, out(b, "out", out, extent("out", rows, outStride, width), 4),
                outStride));
    }

    /**
     * One token per row of {@code logits} ({@code rows} rows of {@code vocab} floats at {@code logitsStride})
     * on the CPU, as dev.drmas.rollout.Sampler draws it (see drmas_sample_f32): temperature 0 is greedy
     * (uniforms may then be null), else the logits / temperature filtered by top-k (0: off) then top-p (1:
     * off), and the inverse CDF of the rest at {@code uniforms[r]} in [0, 1). Writes {@code tokens} (longs)
     * and {@code logprobs} (floats: log-softmax of the scaled logits before the filters; NaN for a row that
     * is no distribution). Heap segments (Java arrays) are read in place.
     */
    public static void sample(long rows, long vocab, MemorySegment logits, long logitsStride, double temperature, long topK,
                              double topP, MemorySegment uniforms, MemorySegment tokens, MemorySegment logprobs) {
        checkCount("rows", rows);
        if (vocab < 1) throw new IllegalArgumentException("vocab must be >= 1, got " + vocab);
        Backend b = Backend.CPU;
        LibDrmas.check(LibDrmas.sample(rows, vocab, arg(b, "logits", logits, extent("logits", rows, logitsStride, vocab), 4), logitsStride,
                temperature, topK, topP, arg(b, "uniforms", uniforms, rows, 8), out(b, "tokens", tokens, rows, 8),
                out(b, "logprobs", logprobs, rows, 4)));
    }

    // A host array for any backend: CUDA calls use non-critical downcalls, which take native
    // memory only, so a heap segment is copied into `arena` for them.
    private static MemorySegment hostArg(String name, MemorySegment s, long count, long elemBytes, boolean critical,
                                         Arena arena) {
        long need = bytes(name, count, elemBytes);
        if (s.byteSize() < need) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes but " + count + " elements need " + need);
        }
        if (DeviceBuffer.holdsDeviceMemory(s)) {  // read on the host by either backend
            throw new IllegalArgumentException(name + ": device memory (a DeviceBuffer) where host memory is needed");
        }
        if (critical || s.isNative()) return s;
        MemorySegment copy = arena.allocate(need, 8);
        copy.copyFrom(s.asSlice(0, need));
        return copy;
    }
}
