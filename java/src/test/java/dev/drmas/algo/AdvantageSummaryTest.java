// AdvantageSummaryTest.java — AdvantageSummary on hand-made diagnostics, where every figure is known:
// Lemma 4.2's factor is left out where the group's std is rounding noise of a large group mean (at or
// below RELATIVE_STD_FLOOR × |mean|, the floor itself included) and kept for a real spread however
// small, read from the group's own mean; the per-agent means of advantages and of the factor.
// The diagnostics' other fields hold values that would pass the floor, so that reading a wrong field
// shows.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class AdvantageSummaryTest {
    static final int UIDS = 4, AGENTS = 2, SEGS = UIDS * AGENTS;

    /**
     * Four groups of two agents: uid 0 a small real spread (mean 0.002, std 0.001), uid 1 a std of
     * 0.5 on a mean of 1e6 (below the floor's 1), uid 2 a std exactly at the floor of a mean of 1e6,
     * uid 3 an ordinary spread (mean 0.5, std 0.5). Factors: agent 0 1.5, 1e12, 5, 2.5; agent 1
     * 0.5, 3e12, 6, 1.5.
     */
    static double[] diagnostics() {
        double[] d = new double[AbiIndices.DIAG_FIELDS * SEGS];
        Arrays.fill(d, 0, AbiIndices.DIAG_GROUP_MEAN * SEGS, 2.0);  // agent counts, means, stds; group counts
        Arrays.fill(d, AbiIndices.DIAG_GROUP_COUNT * SEGS, AbiIndices.DIAG_GROUP_MEAN * SEGS, 4.0);
        double[] mean = {0.002, 1e6, 1e6, 0.5};
        double[] std = {0.001, 0.5, AdvantageSummary.RELATIVE_STD_FLOOR * 1e6, 0.5};
        double[][] factor = {{1.5, 0.5}, {1e12, 3e12}, {5, 6}, {2.5, 1.5}};
        for (int u = 0; u < UIDS; u++) {
            for (int a = 0; a < AGENTS; a++) {
                int seg = u * AGENTS + a;
                d[AbiIndices.DIAG_GROUP_MEAN * SEGS + seg] = mean[u];
                d[AbiIndices.DIAG_GROUP_STD * SEGS + seg] = std[u];
                d[AbiIndices.DIAG_INFLATION * SEGS + seg] = factor[u][a];
            }
        }
        return d;
    }

    @Test
    void theFactorIsLeftOutWhereTheGroupStdIsRoundingNoiseOfItsMean() {
        double[] d = diagnostics();
        assertEquals(1.5, AdvantageSummary.inflation(d, SEGS, 0), "a small real spread counts");
        assertEquals(0.5, AdvantageSummary.inflation(d, SEGS, 1));
        assertTrue(Double.isNaN(AdvantageSummary.inflation(d, SEGS, 2)), "std 0.5 of a mean of 1e6: noise");
        assertTrue(Double.isNaN(AdvantageSummary.inflation(d, SEGS, 3)));
        assertTrue(Double.isNaN(AdvantageSummary.inflation(d, SEGS, 4)), "a std exactly at the floor counts as 0");
        assertTrue(Double.isNaN(AdvantageSummary.inflation(d, SEGS, 5)));
        assertEquals(2.5, AdvantageSummary.inflation(d, SEGS, 6));
        assertEquals(1.5, AdvantageSummary.inflation(d, SEGS, 7));
    }

    @Test
    void perAgentMeansAreOverTheRowsAndOverTheGroupsWhereTheFactorIsDefined() {
        // agent 0: scores 1, 0, advantages 1.5, 0.5; agent 1: score 0.25, advantage −2
        float[] scores = {1, 0.25f, 0};
        int[] agent = {0, 1, 0};
        float[] adv = {1.5f, -2, 0.5f};
        AdvantageSummary[] s = AdvantageSummary.perAgent(scores, agent, adv, diagnostics(), UIDS, AGENTS);
        assertEquals(2, s[0].rows());
        assertEquals(0.5, s[0].scoreMean(), 1e-12);
        assertEquals(1.0, s[0].advantageMean(), 1e-12);
        assertEquals((2.25 + 0.25) / 2, s[0].advantageSecondMoment(), 1e-12);
        assertEquals(-2.0, s[1].advantageMean(), 1e-12);
        assertEquals(4.0, s[1].advantageSecondMoment(), 1e-12);
        // uids 0 and 3 only
        assertEquals(2, s[0].inflationGroups());
        assertEquals((1.5 + 2.5) / 2, s[0].inflationMean(), 1e-12);
        assertEquals(2.5, s[0].inflationMax());
        assertEquals((0.5 + 1.5) / 2, s[1].inflationMean(), 1e-12);
        assertEquals(1.5, s[1].inflationMax());
    }
}
