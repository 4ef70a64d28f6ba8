// Kernels.java — the Java face of libdrmas on MemorySegments: segmentStats, advantage,
// broadcastRows, clippedLoss (one name per operation, as in C and CUDA). It checks that every
// buffer is large enough before the call, so that a short buffer is a Java error naming the
// argument instead of a native out-of-bounds write. CPU calls accept heap segments (Java
// arrays, read in place); CUDA calls need segments that wrap device memory (DeviceBuffer).
package dev.drmas.bindings;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Objects;

public final class Kernels {
    private Kernels() {}

    /** drmas_norm_config: mode, pooling and singleton as the DRMAS_* values. */
    public record NormParams(int mode, int globalPooling, int singleton, int ddof, boolean scaleByStd, double eps) {}

    /** drmas_loss_config. dualClip 0 is off; klType 0 is none. */
    public record LossParams(double clipLow, double clipHigh, double dualClip, double klCoef, double normalizer,
                             int klType, int aggregation) {}

    private static MemorySegment orNull(MemorySegment s) {
        return s == null ? MemorySegment.NULL : s;
    }

    // Checks the segment can hold `count` elements of `elemBytes` and lives where the backend
    // can read it. A NULL segment is passed through: the library names it in its error.
    private static MemorySegment arg(Backend b, String name, MemorySegment s, long count, long elemBytes) {
        if (s == null || s.equals(MemorySegment.NULL)) return MemorySegment.NULL;
        if (b == Backend.CUDA && !s.isNative()) {
            throw new IllegalArgumentException(name + ": a Java array cannot be passed to the CUDA backend; use a DeviceBuffer");
        }
        long need = Math.multiplyExact(count, elemBytes);
        if (s.byteSize() < need) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes but " + count
                    + " elements need " + need);
        }
        return s;
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
                numSegments, unbiased ? 1 : 0, arg(b, "count", count, numSegments, 8), arg(b, "mean", mean, numSegments, 8),
                arg(b, "m2", m2, numSegments, 8), arg(b, "std", std, numSegments, 8), orNull(stream)));
    }

    /** Row advantages (and optional diagnostics); see drmas_advantage_f32. traj may be null with row pooling. */
    public static void advantage(Backend b, NormParams p, long n, MemorySegment scores, MemorySegment uid,
                                 MemorySegment traj, MemorySegment agent, long numUids, long numTrajs, long numAgents,
                                 MemorySegment advantages, MemorySegment diagnostics, MemorySegment stream) {
        Objects.requireNonNull(p, "params");
        checkCount("n", n);
        checkCount("numUids", numUids);
        checkCount("numTrajs", numTrajs);
        checkCount("numAgents", numAgents);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = arena.allocate(LibDrmas.NORM_CONFIG);
            cfg.set(ValueLayout.JAVA_INT, 0, p.mode());
            cfg.set(ValueLayout.JAVA_INT, 4, p.globalPooling());
            cfg.set(ValueLayout.JAVA_INT, 8, p.singleton());
            cfg.set(ValueLayout.JAVA_INT, 12, p.ddof());
            cfg.set(ValueLayout.JAVA_INT, 16, p.scaleByStd() ? 1 : 0);
            cfg.set(ValueLayout.JAVA_INT, 20, 0);
            cfg.set(ValueLayout.JAVA_DOUBLE, 24, p.eps());
            long segs = Math.multiplyExact(numUids, numAgents);
            LibDrmas.check(LibDrmas.advantage(crit, b.device(), cfg, n, arg(b, "scores", scores, n, 4),
                    arg(b, "uid", uid, n, 4), arg(b, "traj", traj, n, 4), arg(b, "agent", agent, n, 4),
                    numUids, numTrajs, numAgents, arg(b, "advantages", advantages, n, 4),
                    arg(b, "diagnostics", diagnostics, Math.multiplyExact(segs, LibDrmas.DIAG_FIELDS), 8), orNull(stream)));
        }
    }

    /** Row values to their tokens; see drmas_broadcast_rows_f32. */
    public static void broadcastRows(Backend b, long numRows, MemorySegment rowValues, MemorySegment offsets,
                                     long numTokens, MemorySegment tokenValues, MemorySegment stream) {
        checkCount("numRows", numRows);
        checkCount("numTokens", numTokens);
        boolean crit = b == Backend.CPU;
        LibDrmas.check(LibDrmas.broadcastRows(crit, b.device(), numRows, arg(b, "row_values", rowValues, numRows, 4),
                arg(b, "row_offsets", offsets, numRows + 1, 8), numTokens,
                arg(b, "token_values", tokenValues, numTokens, 4), orNull(stream)));
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
        Objects.requireNonNull(p, "params");
        checkCount("numRows", numRows);
        checkCount("numTokens", numTokens);
        boolean crit = b == Backend.CPU;
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment cfg = arena.allocate(LibDrmas.LOSS_CONFIG);
            cfg.set(ValueLayout.JAVA_DOUBLE, 0, p.clipLow());
            cfg.set(ValueLayout.JAVA_DOUBLE, 8, p.clipHigh());
            cfg.set(ValueLayout.JAVA_DOUBLE, 16, p.dualClip());
            cfg.set(ValueLayout.JAVA_DOUBLE, 24, p.klCoef());
            cfg.set(ValueLayout.JAVA_DOUBLE, 32, p.normalizer());
            cfg.set(ValueLayout.JAVA_INT, 40, p.klType());
            cfg.set(ValueLayout.JAVA_INT, 44, p.aggregation());
            MemorySegment off = arg(b, "row_offsets", offsets, numRows + 1, 8);
            MemorySegment lp = arg(b, "logp", logp, numTokens, 4), olp = arg(b, "old_logp", oldLogp, numTokens, 4);
            MemorySegment a = arg(b, "advantages", adv, numTokens, 4), r = arg(b, "ref_logp", ref, numTokens, 4);
            MemorySegment m = arg(b, "mask", mask, numTokens, 1), g = arg(b, "grad", grad, numTokens, 4);
            MemorySegment s = arg(b, "sums", sums, LibDrmas.LOSS_SUMS, 8);
            if (hostOffsets == null) {
                LibDrmas.check(LibDrmas.clippedLoss(crit, b.device(), cfg, numRows, off, numTokens, lp, olp, a, r, m, g, s,
                        orNull(stream)));
            } else {
                MemorySegment host = hostArg("host_row_offsets", hostOffsets, numRows + 1, 8, crit, arena);
                LibDrmas.check(LibDrmas.clippedLossAsync(crit, b.device(), cfg, numRows, host, off, numTokens, lp, olp, a,
                        r, m, g, s, orNull(stream)));
            }
        }
    }

    // A host array for any backend: CUDA calls use non-critical downcalls, which take native
    // memory only, so a heap segment is copied into `arena` for them.
    private static MemorySegment hostArg(String name, MemorySegment s, long count, long elemBytes, boolean critical,
                                         Arena arena) {
        long need = Math.multiplyExact(count, elemBytes);
        if (s.byteSize() < need) {
            throw new IllegalArgumentException(name + " holds " + s.byteSize() + " bytes but " + count + " elements need " + need);
        }
        if (critical || s.isNative()) return s;
        MemorySegment copy = arena.allocate(need, 8);
        copy.copyFrom(s.asSlice(0, need));
        return copy;
    }
}
