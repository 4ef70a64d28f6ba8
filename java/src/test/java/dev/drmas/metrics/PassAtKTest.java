// PassAtKTest.java — pass@k and avg@n against hand-computed values, against enumerating every
// k-subset of n samples, and against exact binomials (BigInteger) where n is large enough that
// the closed form in doubles would overflow.
package dev.drmas.metrics;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.metrics.PassAtK.Counts;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;

class PassAtKTest {
    @Test
    void handComputedValues() {
        // n=5, c=2: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10
        assertEquals(0.4, PassAtK.passAtK(5, 2, 1), 1e-15);
        assertEquals(0.7, PassAtK.passAtK(5, 2, 2), 1e-15);
        // pass@3 = 1 - C(3,3)/C(5,3) = 1 - 1/10
        assertEquals(0.9, PassAtK.passAtK(5, 2, 3), 1e-15);
        assertEquals(0.0, PassAtK.passAtK(5, 0, 3));
        // n - c = 2 < k = 3: every 3-subset holds a correct sample
        assertEquals(1.0, PassAtK.passAtK(5, 3, 3));
        assertEquals(1.0, PassAtK.passAtK(5, 5, 1));
        // n=10, c=3, k=5: 1 - C(7,5)/C(10,5) = 1 - 21/252
        assertEquals(1.0 - 21.0 / 252.0, PassAtK.passAtK(10, 3, 5), 1e-15);
        assertEquals(0.75, PassAtK.avgAtK(4, 3));
    }

    @Test
    void matchesEnumerationOfAllSubsets() {
        for (int n = 1; n <= 10; n++) {
            for (int c = 0; c <= n; c++) {
                for (int k = 1; k <= n; k++) {
                    // samples 0..c-1 are the correct ones; count the k-subsets that hold one
                    int subsets = 0, hit = 0;
                    int correctMask = (1 << c) - 1;
                    for (int mask = 0; mask < (1 << n); mask++) {
                        if (Integer.bitCount(mask) != k) continue;
                        subsets++;
                        if ((mask & correctMask) != 0) hit++;
                    }
                    double expected = (double) hit / subsets;
                    assertEquals(expected, PassAtK.passAtK(n, c, k), 1e-12, "n=" + n + " c=" + c + " k=" + k);
                }
            }
        }
    }

    @Test
    void stableWhereBinomialsOverflowDoubles() {
        // C(2000, 10) ~ 2.8e26 fits, but C(2000, 1000) ~ 1e600 does not: check against exact ratios.
        int[][] cases = {{2000, 1000, 10}, {2000, 1, 1}, {2000, 3, 1000}, {1500, 700, 600}};
        for (int[] t : cases) {
            int n = t[0], c = t[1], k = t[2];
            BigDecimal ratio = new BigDecimal(binomial(n - c, k)).divide(new BigDecimal(binomial(n, k)), MathContext.DECIMAL128);
            double expected = 1.0 - ratio.doubleValue();
            double got = PassAtK.passAtK(n, c, k);
            assertEquals(expected, got, 1e-12 + 1e-9 * Math.abs(expected), "n=" + n + " c=" + c + " k=" + k);
            assertTrue(got >= 0 && got <= 1);
        }
        // a small pass@k keeps its relative precision (no cancellation in 1 - 0.9995)
        assertEquals(1.0 / 2000, PassAtK.passAtK(2000, 1, 1), 1e-15 / 2000);
        // n=1e6, c=1, k=1: exactly 1e-6; the plain 1 - product form is off by ~1e-11 relative
        assertEquals(1e-6, PassAtK.passAtK(1_000_000, 1, 1), 1e-15 * 1e-6);
    }

    @Test
    void aggregatesOverTasks() {
        var tasks = List.of(new Counts(4, 0), new Counts(4, 1), new Counts(4, 4));
        // pass@2 of (4,1) = 1 - C(3,2)/C(4,2) = 1 - 3/6
        assertEquals((0 + 0.5 + 1) / 3, PassAtK.meanPassAtK(tasks, 2), 1e-15);
        Map<String, Double> s = PassAtK.scalars("eval/", tasks, 1, 2, 4);
        assertEquals(List.of("eval/avg@4", "eval/pass@1", "eval/pass@2", "eval/pass@4"), List.copyOf(s.keySet()));
        assertEquals((0 + 0.25 + 1) / 3, s.get("eval/avg@4"), 1e-15);
        assertEquals((0 + 0.25 + 1) / 3, s.get("eval/pass@1"), 1e-15); // pass@1 is avg@n
        assertEquals((0 + 0.5 + 1) / 3, s.get("eval/pass@2"), 1e-15);
        assertEquals((0 + 1 + 1) / 3.0, s.get("eval/pass@4"), 1e-15);
        assertEquals(new Counts(5, 2), Counts.of(new boolean[] {true, false, false, true, false}));
    }

    @Test
    void rejectsImpossibleCounts() {
        assertThrows(IllegalArgumentException.class, () -> PassAtK.passAtK(5, 2, 6));
        assertThrows(IllegalArgumentException.class, () -> PassAtK.passAtK(5, 2, 0));
        assertThrows(IllegalArgumentException.class, () -> PassAtK.passAtK(5, 6, 1));
        assertThrows(IllegalArgumentException.class, () -> PassAtK.passAtK(0, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> PassAtK.meanPassAtK(List.of(), 1));
        var e = assertThrows(IllegalArgumentException.class,
                () -> PassAtK.scalars("eval/", List.of(new Counts(4, 1), new Counts(8, 1)), 1));
        assertTrue(e.getMessage().contains("4 and 8"), e.getMessage());
    }

    private static BigInteger binomial(int n, int k) {
        if (k < 0 || k > n) return BigInteger.ZERO;
        BigInteger r = BigInteger.ONE;
        for (int i = 1; i <= k; i++) r = r.multiply(BigInteger.valueOf(n - k + i)).divide(BigInteger.valueOf(i));
        return r;
    }
}
