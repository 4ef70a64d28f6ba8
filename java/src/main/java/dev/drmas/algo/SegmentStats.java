// SegmentStats.java — per-segment count, mean, M2 and std of float values with int32 segment
// ids, in fp64 (the kernel drmas_segment_stats_f32), plus Chan et al.'s merge of the partial
// moments, which is how shards (ranks) combine their statistics exactly. API only: training does
// not call it (the advantage kernel computes its own statistics; ranks never split a group).
package dev.drmas.algo;

import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.MemorySegment;

public final class SegmentStats {
    private SegmentStats() {}

    /** count, mean, M2 = Σ(x − mean)² and std per segment (empty segments: all 0). */
    public record Result(long[] count, double[] mean, double[] m2, double[] std) {}

    public static Result compute(float[] values, int[] ids, int numSegments, boolean unbiased) {
        TensorViews.requireSameLength("values", values.length, "ids", ids.length);
        Result r = new Result(new long[numSegments], new double[numSegments], new double[numSegments], new double[numSegments]);
        Kernels.segmentStats(Backend.CPU, values.length, MemorySegment.ofArray(values), MemorySegment.ofArray(ids),
                numSegments, unbiased, MemorySegment.ofArray(r.count), MemorySegment.ofArray(r.mean),
                MemorySegment.ofArray(r.m2), MemorySegment.ofArray(r.std), null);
        return r;
    }

    /** Merges the moments of one segment seen by two shards (Chan, Golub and LeVeque). */
    public static double[] merge(long countA, double meanA, double m2A, long countB, double meanB, double m2B) {
        long n = countA + countB;
        if (n == 0) return new double[] {0, 0, 0};
        double delta = meanB - meanA;
        double mean = meanA + delta * countB / n;
        double m2 = m2A + m2B + delta * delta * ((double) countA * countB / n);
        return new double[] {n, mean, m2};
    }
}
