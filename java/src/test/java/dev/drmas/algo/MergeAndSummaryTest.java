// MergeAndSummaryTest.java — the two pieces of dev.drmas.algo that sit on top of the kernels:
// Chan et al.'s merge of partial moments (how ranks will combine segment statistics) against
// the statistics of the whole data set, and the per-agent AdvantageSummary against numbers
// worked out by hand.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class MergeAndSummaryTest {

    @Test
    void mergedShardMomentsEqualTheWholeData() {
        SplittableRandom r = new SplittableRandom(3);
        int n = 10_007, segs = 37;
        float[] v = new float[n];
        int[] id = new int[n];
        for (int i = 0; i < n; i++) {
            id[i] = r.nextInt(segs - 2);  // the last two segments stay empty
            v[i] = (float) (100 + r.nextGaussian() * (1 + id[i]));
        }
        SegmentStats.Result whole = SegmentStats.compute(v, id, segs, true);
        // three uneven shards, one of them empty, as ranks would hold them
        int[] cuts = {0, 0, 3_001, n};
        double[][] acc = new double[segs][3];
        for (int s = 0; s + 1 < cuts.length; s++) {
            float[] sv = Arrays.copyOfRange(v, cuts[s], cuts[s + 1]);
            int[] si = Arrays.copyOfRange(id, cuts[s], cuts[s + 1]);
            SegmentStats.Result part = SegmentStats.compute(sv, si, segs, true);
            for (int k = 0; k < segs; k++) {
                acc[k] = SegmentStats.merge((long) acc[k][0], acc[k][1], acc[k][2], part.count()[k], part.mean()[k], part.m2()[k]);
            }
        }
        for (int k = 0; k < segs; k++) {
            assertEquals(whole.count()[k], (long) acc[k][0], "count of segment " + k);
            assertEquals(whole.mean()[k], acc[k][1], 1e-9 * Math.abs(whole.mean()[k]) + 1e-12, "mean of segment " + k);
            assertEquals(whole.m2()[k], acc[k][2], 1e-9 * Math.abs(whole.m2()[k]) + 1e-9, "m2 of segment " + k);
        }
        assertEquals(0, (long) acc[segs - 1][0]);
    }

    @Test
    void perAgentSummaryMatchesHandComputedFigures() {
        // uid 0: three trajectories, agents 0 and 1 once each; uid 1: agent 0 only (agent 1 empty).
        float[] s = {1, 0, 0, 0, 1, 1, 0.5f, 0.5f};
        int[] uid = {0, 0, 0, 0, 0, 0, 1, 1};
        int[] traj = {0, 0, 1, 1, 2, 2, 3, 4};
        int[] ag = {0, 1, 0, 1, 0, 1, 0, 0};
        NormConfig cfg = NormConfig.of(NormMode.DRMAS);
        Advantages.Result r = Advantages.computeWithDiagnostics(cfg, s, uid, traj, ag, 2, 5, 2);
        AdvantageSummary[] sum = AdvantageSummary.perAgent(s, ag, r.advantages(), r.diagnostics(), 2, 2);

        // agent 0: rows 0, 2, 4, 6, 7 -> scores 1, 0, 1, 0.5, 0.5 (mean 0.6)
        assertEquals(5, sum[0].rows());
        assertEquals(0.6, sum[0].scoreMean(), 1e-7);
        double a2 = 0, am = 0;
        for (int i : new int[] {0, 2, 4, 6, 7}) {
            am += r.advantages()[i];
            a2 += (double) r.advantages()[i] * r.advantages()[i];
        }
        assertEquals(am / 5, sum[0].advantageMean(), 1e-7);
        assertEquals(a2 / 5, sum[0].advantageSecondMoment(), 1e-7);
        // agent 1: rows 1, 3, 5 -> scores 0, 0, 1
        assertEquals(3, sum[1].rows());
        assertEquals(1.0 / 3, sum[1].scoreMean(), 1e-7);

        // Inflation in uid 0 (trajectory pooling), population variances: S = {0.5, 0, 1}, mu = 0.5,
        // sigma^2 = 0.5/3 = 1/6.
        // agent 0 {1, 0, 1}: mu_k = 2/3, sigma_k^2 = (2/3)/3 = 2/9 -> (2/9 + 1/36) / (1/6) = 3/2
        // agent 1 {0, 0, 1}: mu_k = 1/3, sigma_k^2 = 2/9 -> (2/9 + 1/36) / (1/6) = 3/2
        // uid 1: S = {0.5, 0.5}, sigma = 0 -> undefined (NaN), so it is left out of the mean.
        assertEquals(1.5, sum[0].inflationMean(), 1e-9);
        assertEquals(1.5, sum[0].inflationMax(), 1e-9);
        assertEquals(1.5, sum[1].inflationMean(), 1e-9);
        assertEquals(1, sum[0].inflationGroups());
        assertEquals(1, sum[1].inflationGroups());
        assertTrue(Double.isNaN(r.diagnostics()[AbiIndices.DIAG_INFLATION * 4 + 2]), "uid 1, agent 0: sigma_u = 0");
        assertTrue(Double.isNaN(r.diagnostics()[AbiIndices.DIAG_INFLATION * 4 + 3]), "uid 1, agent 1: empty segment");
    }
}
