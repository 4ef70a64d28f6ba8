// SegmentStatsTest.java — native segment statistics (SegmentStats, CPU backend) against
// ReferenceKernels.segmentStats: n = 1, primes, empty segments, one huge segment, 10^6 values in
// 10^4 segments, shuffled ids, large offsets, and constant segments that must be exact.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SegmentStatsTest {
    static final double ATOL = 1e-9, RTOL = 1e-9;

    static SegmentStats.Result check(String what, float[] v, int[] ids, int numSegments, boolean unbiased) {
        ReferenceKernels.SegStats e = ReferenceKernels.segmentStats(v, ids, numSegments, unbiased);
        SegmentStats.Result a = SegmentStats.compute(v, ids, numSegments, unbiased);
        String w = what + (unbiased ? " (unbiased)" : " (biased)");
        assertArrayEquals(e.count(), a.count(), w + " count");
        Tolerance.assertClose(w + " mean", a.mean(), e.mean(), ATOL, RTOL);
        Tolerance.assertClose(w + " m2", a.m2(), e.m2(), ATOL, RTOL);
        Tolerance.assertClose(w + " std", a.std(), e.std(), ATOL, RTOL);
        return a;
    }

    static float[] gaussian(Random r, int n, double offset, double scale) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = (float) (offset + scale * r.nextGaussian());
        return v;
    }

    static int[] randomIds(Random r, int n, int numSegments) {
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) ids[i] = r.nextInt(numSegments);
        return ids;
    }

    /** Contiguous runs of random length (as rollouts lay rows out). */
    static int[] sortedIds(Random r, int n, int numSegments) {
        int[] ids = randomIds(r, n, numSegments);
        java.util.Arrays.sort(ids);
        return ids;
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void singleValue(boolean unbiased) {
        SegmentStats.Result a = check("n = 1", new float[] {2.5f}, new int[] {0}, 1, unbiased);
        assertEquals(1L, a.count()[0]);
        assertEquals(2.5, a.mean()[0]);
        assertEquals(0.0, a.m2()[0]);
        assertEquals(0.0, a.std()[0]);
        // one value in segment 3 of 5: the others are empty
        a = check("n = 1 of 5 segments", new float[] {-1.25f}, new int[] {3}, 5, unbiased);
        assertArrayEquals(new long[] {0, 0, 0, 1, 0}, a.count());
        assertArrayEquals(new double[] {0, 0, 0, -1.25, 0}, a.mean());
        assertArrayEquals(new double[5], a.std());
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void handValues(boolean unbiased) {
        // segment 0: {1, 2, 3, 4}: mean 2.5, M2 5, std sqrt(5/3) or sqrt(5/4); segment 1 empty;
        // segment 2: {-1, 1}: mean 0, M2 2, std sqrt(2) or 1
        float[] v = {1, -1, 2, 3, 1, 4};
        int[] ids = {0, 2, 0, 0, 2, 0};
        SegmentStats.Result a = check("hand values", v, ids, 3, unbiased);
        assertArrayEquals(new long[] {4, 0, 2}, a.count());
        Tolerance.assertClose("mean", a.mean(), new double[] {2.5, 0, 0}, 1e-15, 0);
        Tolerance.assertClose("m2", a.m2(), new double[] {5, 0, 2}, 1e-15, 0);
        double[] std = unbiased ? new double[] {Math.sqrt(5.0 / 3), 0, Math.sqrt(2)} : new double[] {Math.sqrt(1.25), 0, 1};
        Tolerance.assertClose("std", a.std(), std, 1e-15, 1e-15);
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void primes(boolean unbiased) {
        Random r = new Random(1);
        check("1009 values in 31 segments", gaussian(r, 1009, 0, 1), randomIds(r, 1009, 31), 31, unbiased);
        check("65537 values in 257 sorted segments", gaussian(r, 65537, 3, 2), sortedIds(r, 65537, 257), 257, unbiased);
        check("65537 values in 65537 segments", gaussian(r, 65537, 0, 1), randomIds(r, 65537, 65537), 65537, unbiased);
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void emptySegments(boolean unbiased) {
        Random r = new Random(2);
        int n = 5003;
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) ids[i] = 3 * r.nextInt(400) + 1; // only ids ≡ 1 (mod 3) hold values
        SegmentStats.Result a = check("empty segments", gaussian(r, n, -1, 0.5), ids, 1201, unbiased);
        for (int s = 0; s < 1201; s += 3) {
            assertEquals(0L, a.count()[s]);
            assertEquals(0.0, a.mean()[s]);
            assertEquals(0.0, a.m2()[s]);
            assertEquals(0.0, a.std()[s]);
        }
        check("no values at all", new float[0], new int[0], 7, unbiased);
        check("no segments", new float[0], new int[0], 0, unbiased);
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void oneHugeSegment(boolean unbiased) {
        Random r = new Random(3);
        int n = 1_000_003;
        check("one huge segment", gaussian(r, n, 0.5, 1), new int[n], 1, unbiased);
    }

    @Test
    void millionValuesInTenThousandSegments() {
        Random r = new Random(4);
        int n = 1_000_000, segs = 10_000;
        float[] v = gaussian(r, n, 0, 1);
        check("10^6 values, sorted ids", v, sortedIds(r, n, segs), segs, true);
        check("10^6 values, shuffled ids", v, randomIds(r, n, segs), segs, false);
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void largeOffset(boolean unbiased) {
        // a naive E[x²] − E[x]² loses the spread of values near 1e6
        Random r = new Random(5);
        int n = 100_003;
        check("offset 1e6", gaussian(r, n, 1e6, 0.5), randomIds(r, n, 101), 101, unbiased);
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void constantSegmentsAreExact(boolean unbiased) {
        float[] constants = {0.1f, -7.3f, 1f / 3f, 123456.7f, 1e-30f, 0f, 3.4e38f / 1024};
        int per = 99_991; // a prime number of copies of each constant, ids interleaved
        int n = constants.length * per;
        float[] v = new float[n];
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) {
            ids[i] = i % constants.length;
            v[i] = constants[ids[i]];
        }
        SegmentStats.Result a = check("constant segments", v, ids, constants.length, unbiased);
        for (int s = 0; s < constants.length; s++) {
            assertEquals(per, a.count()[s]);
            assertEquals((double) constants[s], a.mean()[s], "mean of constant segment " + s + " must be exact");
            assertEquals(0.0, a.m2()[s], "M2 of constant segment " + s + " must be exactly 0");
            assertEquals(0.0, a.std()[s], "std of constant segment " + s + " must be exactly 0");
        }
    }

    @ParameterizedTest(name = "unbiased={0}")
    @ValueSource(booleans = {true, false})
    void twoValueSegments(boolean unbiased) {
        // count 2 is the smallest segment with an unbiased std
        Random r = new Random(6);
        int n = 2 * 4099;
        int[] ids = new int[n];
        for (int i = 0; i < n; i++) ids[i] = i / 2;
        check("two-value segments", gaussian(r, n, 0, 1), ids, 4099, unbiased);
    }
}
