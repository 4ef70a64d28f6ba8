// ReportStatsTest.java — the report's statistics on values whose answers are worked out by hand:
// when two 95% intervals overlap (apart, touching at one end, one inside the other, an unknown
// spread), the median of odd and even counts, the spike rule with a median other than 1
// (a value exactly at 3× the median is not a spike; one above it is), and Student's t past the table.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.junit.jupiter.api.Test;

class ReportStatsTest {
    static ReportStats.Interval iv(double mean, double half) {
        return new ReportStats.Interval(mean, half, 2);
    }

    /** Overlap must not depend on the order of the two. */
    static boolean overlap(ReportStats.Interval a, ReportStats.Interval b) {
        boolean ab = a.overlaps(b), ba = b.overlaps(a);
        assertEquals(ab, ba, a + " and " + b + ": not symmetric");
        return ab;
    }

    @Test
    void intervalsOverlapUnlessOneEndsBeforeTheOtherBegins() {
        // [0.15, 0.25] and [0.35, 0.45]: apart, whichever is asked
        assertFalse(overlap(iv(0.2, 0.05), iv(0.4, 0.05)));
        // [0.5, 1.5] and [1.5, 2.5] touch at 1.5: they overlap (the ends are exact in binary)
        assertTrue(overlap(iv(1, 0.5), iv(2, 0.5)));
        // [1.5, 2.5] and [0.7, 1.7]: the upper one's lower end is inside the lower one
        assertTrue(overlap(iv(2, 0.5), iv(1.2, 0.5)));
        // one inside the other: [0, 10] and [4.5, 5.5]
        assertTrue(overlap(iv(5, 5), iv(5, 0.5)));
        // just apart: [0.5, 1.5] and [1.5 + 2^-10, ...]
        assertFalse(overlap(iv(1, 0.5), iv(2 + 0x1p-10, 0.5)));
    }

    @Test
    void anUnknownSpreadCannotTellIntervalsApart() {
        // one seed (halfWidth NaN) far from the other mode's narrow interval, on either side of the call
        ReportStats.Interval single = ReportStats.interval(new double[] {0.9});
        assertTrue(Double.isNaN(single.halfWidth()));
        assertTrue(overlap(single, iv(0.1, 0.01)));
        assertTrue(overlap(new ReportStats.Interval(-3, Double.NaN, 1), new ReportStats.Interval(7, Double.NaN, 1)));
    }

    @Test
    void theMedianOfAnOddCountIsItsMiddleValue() {
        assertEquals(3, ReportStats.median(new double[] {5, 1, 3}));
        assertEquals(7, ReportStats.median(new double[] {7}));
        assertEquals(4, ReportStats.median(new double[] {9, 4, 1, 8, 2}));
        assertEquals(2.5, ReportStats.median(new double[] {4, 1, 3, 2}), "even: the mean of the middle two");
        assertTrue(Double.isNaN(ReportStats.median(new double[0])));
        // max/median of an odd count: 10 / 3
        assertEquals(10 / 3.0, ReportStats.maxOverMedian(new double[] {1, 3, 10, 2, 4}), 1e-12);
    }

    @Test
    void studentsTBeyondTheTableFollowsItsExpansionToTheLastTerm() {
        // scipy.stats.t.ppf(0.975, df); the four-term expansion's error is of order df⁻⁵, which each is within:
        // its third and fourth terms (9e-5 and 2e-6 at 31) matter at that bound
        double[][] exact = {{31, 2.039513446396408}, {35, 2.030107928250343}, {45, 2.014103388880846}, {60, 2.0002978220142604},
            {120, 1.9799304050824402}, {1000, 1.9623390808264083}};
        for (double[] e : exact) assertEquals(e[1], ReportStats.t975((int) e[0]), Math.pow(e[0], -5), "df " + (int) e[0]);
    }

    @Test
    void aSpikeIsAboveThreeTimesTheMedianBeforeIt() {
        // median of the three before is 2: 6 is exactly 3× it, not a spike; 6.5 is one
        assertEquals(0, ReportStats.spikes(new double[] {2, 2, 2, 6}));
        assertEquals(1, ReportStats.spikes(new double[] {2, 2, 2, 6.5}));
        // 5 is below 3 × 2 (the rule is 3× the median, not 3 / median)
        assertEquals(0, ReportStats.spikes(new double[] {2, 2, 2, 5}));
        // median 0.5 (of 0.4, 0.5, 0.6): 1.4 is below 1.5, 1.6 above; the median then is of the four before
        assertEquals(0, ReportStats.spikes(new double[] {0.4, 0.6, 0.5, 1.4}));
        assertEquals(1, ReportStats.spikes(new double[] {0.4, 0.6, 0.5, 1.6}));
        // 4, 4, 4, 4, then 12 (= 3 × 4, not a spike), 13 (above 3 × the median 4 of the five before: a spike)
        assertEquals(1, ReportStats.spikes(new double[] {4, 4, 4, 4, 12, 13}));
    }
}
