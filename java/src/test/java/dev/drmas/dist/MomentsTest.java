// MomentsTest.java — the (count, mean, M2) behind the per-agent score and advantage metrics
// (agent/<id>/score_std, adv_std, adv_sq_mean) against two-pass sums in plain Java: Welford's
// one-value update, Chan's merge of uneven parts (an empty one too), and the population variance.
// The distributed tests compare one rank with two, which a formula wrong alike on both sides passes.
package dev.drmas.dist;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class MomentsTest {
    /** Values far from 0 (1e4 + noise), where E[x²] − E[x]² would cancel; some segments empty. */
    private static double[] values(int n) {
        SplittableRandom r = new SplittableRandom(11);
        double[] x = new double[n];
        for (int i = 0; i < n; i++) x[i] = 1e4 + r.nextGaussian() * (1 + i % 3);
        return x;
    }

    /** count, mean and Σ(x − mean)² of x[from, to) by two passes. */
    private static double[] twoPass(double[] x, int from, int to) {
        double s = 0;
        for (int i = from; i < to; i++) s += x[i];
        double mean = s / (to - from), m2 = 0;
        for (int i = from; i < to; i++) m2 += (x[i] - mean) * (x[i] - mean);
        return new double[] {to - from, mean, m2};
    }

    private static Moments welford(double[] x, int from, int to) {
        Moments m = Moments.EMPTY;
        for (int i = from; i < to; i++) m = m.plus(x[i]);
        return m;
    }

    private static void assertMoments(double[] want, Moments got, String what) {
        assertEquals(want[0], got.count(), 0.0, what + ": count");
        assertEquals(want[1], got.mean(), 1e-12 * Math.abs(want[1]), what + ": mean");
        assertEquals(want[2], got.m2(), 1e-9 * want[2] + 1e-9, what + ": m2");
    }

    @Test
    void welfordMatchesTwoPasses() {
        double[] x = values(1001);
        assertMoments(twoPass(x, 0, x.length), welford(x, 0, x.length), "1001 values");
        assertMoments(twoPass(x, 5, 7), welford(x, 5, 7), "2 values");
        assertMoments(new double[] {1, x[3], 0}, Moments.EMPTY.plus(x[3]), "one value");
    }

    @Test
    void mergedPartsEqualTheWhole() {
        double[] x = values(1001);
        int[] cuts = {0, 0, 1, 300, 1001};  // an empty part, one value, uneven rest
        Moments merged = Moments.EMPTY, reversed = Moments.EMPTY;
        for (int p = 0; p + 1 < cuts.length; p++) merged = merged.merge(welford(x, cuts[p], cuts[p + 1]));
        for (int p = cuts.length - 2; p >= 0; p--) reversed = reversed.merge(welford(x, cuts[p], cuts[p + 1]));
        double[] whole = twoPass(x, 0, x.length);
        assertMoments(whole, merged, "merged in order");
        assertMoments(whole, reversed, "merged in reverse");
        assertMoments(whole, welford(x, 0, x.length).merge(Moments.EMPTY), "merged with nothing");
        assertMoments(whole, Moments.EMPTY.merge(welford(x, 0, x.length)), "nothing merged with it");
    }

    @Test
    void varianceIsThePopulationVariance() {
        double[] x = values(10);
        double[] w = twoPass(x, 0, x.length);
        assertEquals(w[2] / 10, welford(x, 0, x.length).variance(), 1e-9 * w[2] / 10, "divides by the count, not count − 1");
        assertEquals(0.0, Moments.EMPTY.variance());
        assertEquals(0.0, Moments.EMPTY.plus(3.5).variance());
        // {1, 2, 3, 4}: mean 2.5, M2 = 5, variance 1.25
        Moments m = Moments.EMPTY.plus(1).plus(2).plus(3).plus(4);
        assertEquals(1.25, m.variance(), 1e-15);
    }

    @Test
    void oneRankMergesToItself() {
        Moments[] mine = {welford(values(5), 0, 5), Moments.EMPTY};
        Moments[] all = Moments.allMerge(Collective.single(), mine, "a test");
        assertEquals(mine[0], all[0]);
        assertEquals(Moments.EMPTY, all[1]);
    }
}
