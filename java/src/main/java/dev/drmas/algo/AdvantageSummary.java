// AdvantageSummary.java — per-agent figures of one normalisation: score and advantage mean,
// the advantage second moment E[A²] (what scales an agent's gradient norm, the paper's §4),
// and Lemma 4.2's inflation factor, its mean and its maximum over the groups where it is defined.
// It is undefined where the group's std is 0 and also where the std is only rounding noise (below
// RELATIVE_STD_FLOOR times the group's mean): float32 scores that mean the same value (0.7 and
// the mean of 0.6 and 0.8) give a σ of ~1e-8, and dividing by its square reported factors of 1e15.
package dev.drmas.algo;

import dev.drmas.bindings.AbiIndices;

public record AdvantageSummary(int agent, long rows, double scoreMean, double advantageMean,
                               double advantageSecondMoment, double inflationMean, double inflationMax,
                               long inflationGroups) {
    /** A group std at or below this times |group mean| counts as 0 (float32 scores carry ~6e-8 relative rounding). */
    public static final double RELATIVE_STD_FLOOR = 1e-6;

    /**
     * Lemma 4.2's inflation factor of segment {@code seg} (of {@code segs}) in the diagnostics of
     * {@link Advantages#computeWithDiagnostics} (a ratio of population variances, drmas.h), or NaN
     * where it is undefined: the group's std is 0,
     * or no more than {@link #RELATIVE_STD_FLOOR} times the group's mean. One rule for every place
     * that reports the factor (this summary, the trainer's step metrics).
     */
    public static double inflation(double[] diagnostics, long segs, long seg) {
        double v = diagnostics[Math.toIntExact(AbiIndices.DIAG_INFLATION * segs + seg)];
        double sigma = diagnostics[Math.toIntExact(AbiIndices.DIAG_GROUP_STD * segs + seg)];
        double mu = diagnostics[Math.toIntExact(AbiIndices.DIAG_GROUP_MEAN * segs + seg)];
        return sigma > RELATIVE_STD_FLOOR * Math.abs(mu) ? v : Double.NaN;
    }

    /** One summary per agent from the rows and the diagnostics of {@link Advantages#computeWithDiagnostics}. */
    public static AdvantageSummary[] perAgent(float[] scores, int[] agent, float[] advantages, double[] diagnostics,
                                              int numUids, int numAgents) {
        long[] rows = new long[numAgents];
        double[] s = new double[numAgents], a = new double[numAgents], a2 = new double[numAgents];
        for (int i = 0; i < scores.length; i++) {
            int k = agent[i];
            rows[k]++;
            s[k] += scores[i];
            a[k] += advantages[i];
            a2[k] += (double) advantages[i] * advantages[i];
        }
        AdvantageSummary[] out = new AdvantageSummary[numAgents];
        long segs = (long) numUids * numAgents;
        for (int k = 0; k < numAgents; k++) {
            double inf = 0, max = Double.NaN;
            long groups = 0;
            for (int u = 0; u < numUids; u++) {
                double v = inflation(diagnostics, segs, (long) u * numAgents + k);
                if (!Double.isNaN(v)) {
                    inf += v;
                    max = groups == 0 ? v : Math.max(max, v);
                    groups++;
                }
            }
            double n = Math.max(1, rows[k]);
            out[k] = new AdvantageSummary(k, rows[k], s[k] / n, a[k] / n, a2[k] / n,
                    groups > 0 ? inf / groups : Double.NaN, max, groups);
        }
        return out;
    }
}
