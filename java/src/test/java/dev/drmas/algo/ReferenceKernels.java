// ReferenceKernels.java — the plain-Java oracle the native kernels are tested against, written
// from the formulas of ARCHITECTURE §5/§6 (not from the native code): slow, double precision,
// one obvious loop per formula. Used by the tests and the benchmarks (test-jar).
package dev.drmas.algo;

import dev.drmas.bindings.AbiIndices;
import java.util.ArrayList;
import java.util.List;

public final class ReferenceKernels {
    private ReferenceKernels() {
    }

    // ---------------------------------------------------------------- segment statistics

    /** Per-segment count, mean, M2 = Σ(x − mean)² and std (0 when count ≤ ddof); empty → 0. */
    public record SegStats(long[] count, double[] mean, double[] m2, double[] std) {
    }

    /** Statistics of one list of values, as the spec defines them. */
    record Moments(long count, double mean, double m2, double std) {
        boolean single() {
            return count == 1;
        }
    }

    static Moments moments(Values xs, boolean unbiased) {
        int n = xs.size();
        if (n == 0) return new Moments(0, 0.0, 0.0, 0.0);
        double sum = 0;
        for (int i = 0; i < n; i++) sum += xs.get(i);
        double mean = sum / n;
        boolean allEqual = true;
        for (int i = 0; i < n; i++) allEqual &= xs.get(i) == xs.get(0);
        // §5: a segment whose values are all equal has mean exactly that value and M2, std exactly 0
        if (allEqual) return new Moments(n, xs.get(0), 0.0, 0.0);
        double m2 = 0;
        for (int i = 0; i < n; i++) m2 += (xs.get(i) - mean) * (xs.get(i) - mean);
        int ddof = unbiased ? 1 : 0;
        double std = n > ddof ? Math.sqrt(m2 / (n - ddof)) : 0.0;
        return new Moments(n, mean, m2, std);
    }

    public static SegStats segmentStats(float[] v, int[] ids, int numSegments, boolean unbiased) {
        List<Values> seg = lists(numSegments);
        for (int i = 0; i < v.length; i++) seg.get(ids[i]).add((double) v[i]);
        long[] count = new long[numSegments];
        double[] mean = new double[numSegments], m2 = new double[numSegments], std = new double[numSegments];
        for (int s = 0; s < numSegments; s++) {
            Moments m = moments(seg.get(s), unbiased);
            count[s] = m.count();
            mean[s] = m.mean();
            m2[s] = m.m2();
            std[s] = m.std();
        }
        return new SegStats(count, mean, m2, std);
    }

    // ---------------------------------------------------------------- advantages

    /** Everything the advantage formulas need: trajectory scores, group and agent moments. */
    private record Groups(double[] trajScore, Moments[] group, Moments[] agent) {
    }

    private static Groups groups(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                 int numUids, int numTrajs, int numAgents) {
        int n = scores.length;
        // trajectory scores S_t: mean of the rows of t
        double[] trajScore = new double[Math.max(numTrajs, 0)];
        int[] trajUid = new int[trajScore.length];
        if (c.globalPooling() == GlobalPooling.TRAJECTORIES) {
            List<Values> rowsOfTraj = lists(numTrajs);
            java.util.Arrays.fill(trajUid, -1);
            for (int i = 0; i < n; i++) {
                rowsOfTraj.get(traj[i]).add((double) scores[i]);
                if (trajUid[traj[i]] >= 0 && trajUid[traj[i]] != uid[i]) {
                    throw new IllegalArgumentException("trajectory " + traj[i] + " in two groups");
                }
                trajUid[traj[i]] = uid[i];
            }
            for (int t = 0; t < numTrajs; t++) trajScore[t] = moments(rowsOfTraj.get(t), c.unbiased()).mean();
        }
        // group values: S_t of the non-empty trajectories of u, or every row of u
        List<Values> groupValues = lists(numUids);
        if (c.globalPooling() == GlobalPooling.TRAJECTORIES) {
            for (int t = 0; t < numTrajs; t++) if (trajUid[t] >= 0) groupValues.get(trajUid[t]).add(trajScore[t]);
        } else {
            for (int i = 0; i < n; i++) groupValues.get(uid[i]).add((double) scores[i]);
        }
        // agent values: every row of (u, k)
        List<Values> agentValues = lists(numUids * numAgents);
        for (int i = 0; i < n; i++) agentValues.get(uid[i] * numAgents + agent[i]).add((double) scores[i]);

        Moments[] group = new Moments[numUids];
        for (int u = 0; u < numUids; u++) group[u] = moments(groupValues.get(u), c.unbiased());
        Moments[] ag = new Moments[numUids * numAgents];
        for (int s = 0; s < ag.length; s++) ag[s] = moments(agentValues.get(s), c.unbiased());
        return new Groups(trajScore, group, ag);
    }

    public static float[] advantages(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                     int numUids, int numTrajs, int numAgents) {
        Groups g = groups(c, scores, uid, traj, agent, numUids, numTrajs, numAgents);
        boolean trajPooling = c.globalPooling() == GlobalPooling.TRAJECTORIES;
        float[] out = new float[scores.length];
        for (int i = 0; i < scores.length; i++) {
            Moments grp = g.group()[uid[i]];
            Moments agt = g.agent()[uid[i] * numAgents + agent[i]];
            double num = (c.mode().trajectoryNumerator() && trajPooling) ? g.trajScore()[traj[i]] : scores[i];

            // the segments the mode takes its mean and std from (isAgent flags)
            boolean meanFromAgent = c.mode().agentMean();
            boolean stdFromAgent = c.mode().agentStd();
            Moments meanSeg = meanFromAgent ? agt : grp;
            Moments stdSeg = stdFromAgent ? agt : grp;
            boolean stdUsed = c.scaleByStd();

            double mean = meanSeg.mean();
            double std = stdSeg.std();
            boolean zero = false;
            switch (c.singleton()) {
                case FALLBACK -> {
                    if (meanFromAgent && agt.single()) {
                        meanSeg = grp;
                        meanFromAgent = false;
                        mean = grp.mean();
                    }
                    if (stdUsed && stdFromAgent && agt.single()) {
                        stdSeg = grp;
                        stdFromAgent = false;
                        std = grp.std();
                    }
                    if (!meanFromAgent && grp.single()) zero = true;
                    if (stdUsed && !stdFromAgent && grp.single()) zero = true;
                }
                case ZERO -> {
                    if (meanSeg.single()) zero = true;
                    if (stdUsed && stdSeg.single()) zero = true;
                }
                case RAW -> {
                    if (meanSeg.single()) mean = 0.0;
                    if (stdSeg.single()) std = 1.0;
                }
            }
            double a;
            if (zero) {
                a = 0.0;
            } else {
                double centred = num - mean;
                if (centred == 0.0) a = 0.0;
                else a = c.scaleByStd() ? centred / (std + c.eps()) : centred;
            }
            out[i] = (float) a;
        }
        return out;
    }

    /** diag[f * S + u * K + k], the nine fields of drmas.h (statistics before any singleton policy). */
    public static double[] diagnostics(NormConfig c, float[] scores, int[] uid, int[] traj, int[] agent,
                                       int numUids, int numTrajs, int numAgents) {
        Groups g = groups(c, scores, uid, traj, agent, numUids, numTrajs, numAgents);
        int s = numUids * numAgents;
        double[] d = new double[AbiIndices.DIAG_FIELDS * s];
        for (int u = 0; u < numUids; u++) {
            Moments grp = g.group()[u];
            for (int k = 0; k < numAgents; k++) {
                int j = u * numAgents + k;
                Moments agt = g.agent()[j];
                d[AbiIndices.DIAG_AGENT_COUNT * s + j] = agt.count();
                d[AbiIndices.DIAG_AGENT_MEAN * s + j] = agt.mean();
                d[AbiIndices.DIAG_AGENT_M2 * s + j] = agt.m2();
                d[AbiIndices.DIAG_AGENT_STD * s + j] = agt.std();
                d[AbiIndices.DIAG_GROUP_COUNT * s + j] = grp.count();
                d[AbiIndices.DIAG_GROUP_MEAN * s + j] = grp.mean();
                d[AbiIndices.DIAG_GROUP_M2 * s + j] = grp.m2();
                d[AbiIndices.DIAG_GROUP_STD * s + j] = grp.std();
                // Lemma 4.2's ratio of the agent's mean of A² to the group's: population variances (M2 / n)
                double diff = agt.mean() - grp.mean();
                d[AbiIndices.DIAG_INFLATION * s + j] = (agt.count() == 0 || grp.std() == 0.0) ? Double.NaN
                        : (agt.m2() / agt.count() + diff * diff) / (grp.m2() / grp.count());
            }
        }
        return d;
    }

    // ---------------------------------------------------------------- broadcast

    public static float[] broadcastRows(float[] rowValues, long[] offsets, int numTokens) {
        float[] out = new float[numTokens];
        for (int r = 0; r < rowValues.length; r++) {
            for (long t = offsets[r]; t < offsets[r + 1]; t++) out[(int) t] = rowValues[r];
        }
        return out; // tokens no row owns keep 0
    }

    // ---------------------------------------------------------------- loss

    /** grad[t] = dL/dlogp[t]; sums indexed by AbiIndices.LOSS_*. */
    public record LossRef(double[] grad, double[] sums) {
    }


    private static double clamp(double x, double lo, double hi) {
        return Math.max(lo, Math.min(hi, x));
    }

    /** d clamp(x, lo, hi)/dx: 1 on the closed interval, else 0 (as autograd). */
    private static double clampGrad(double x, double lo, double hi) {
        return (lo <= x && x <= hi) ? 1.0 : 0.0;
    }

    public static LossRef clippedLoss(LossConfig c, double normalizer, long[] offsets, float[] logp,
                                      float[] old, float[] adv, float[] ref, boolean[] mask) {
        return loss(c, normalizer, offsets, logp, old, adv, ref, mask, false);
    }

    /**
     * The sums of the absolute values of the terms of each of clippedLoss's sums: the scale
     * against which a sum's rounding error is judged (the f32 inputs and an f32 log-ratio
     * give every term a relative error, and terms of both signs may cancel).
     */
    public static double[] clippedLossMagnitudes(LossConfig c, double normalizer, long[] offsets, float[] logp,
                                                 float[] old, float[] adv, float[] ref, boolean[] mask) {
        return loss(c, normalizer, offsets, logp, old, adv, ref, mask, true).sums();
    }

    private static LossRef loss(LossConfig c, double normalizer, long[] offsets, float[] logp, float[] old,
                                float[] adv, float[] ref, boolean[] mask, boolean absolute) {
        int numTokens = logp.length;
        int numRows = offsets.length - 1;
        double[] grad = new double[numTokens];
        double[] sums = new double[AbiIndices.LOSS_SUMS];
        boolean withKl = ref != null && c.kl() != KlEstimator.NONE;
        for (int r = 0; r < numRows; r++) {
            // valid tokens of the row
            List<Integer> valid = new ArrayList<>();
            for (long t = offsets[r]; t < offsets[r + 1]; t++) {
                if (mask == null || mask[(int) t]) valid.add((int) t);
            }
            if (valid.isEmpty()) continue;
            double w = c.aggregation().perRowMean()
                    ? 1.0 / (valid.size() * normalizer) : 1.0 / normalizer;
            for (int t : valid) {
                double lp = logp[t], a = adv[t];
                double delta = lp - (double) old[t];
                double dc = clamp(delta, -20, 20);
                double ratio = Math.exp(dc);
                double dRatio = ratio * clampGrad(delta, -20, 20);
                double lo = 1 - c.clipLow(), hi = 1 + c.clipHigh();
                double clipped = clamp(ratio, lo, hi);
                double dClipped = dRatio * clampGrad(ratio, lo, hi);
                double pg1 = -a * ratio, pg2 = -a * clipped;
                double dPg1 = -a * dRatio, dPg2 = -a * dClipped;
                double pg, dPg;
                if (pg2 > pg1) {
                    pg = pg2;
                    dPg = dPg2;          // the clamp is active here, so this is 0
                } else if (pg1 > pg2) {
                    pg = pg1;
                    dPg = dPg1;
                } else {
                    pg = pg1;
                    dPg = 0.5 * dPg1 + 0.5 * dPg2;
                }
                boolean dualOn = c.dualClip() > 0 && a < 0;
                double pgMax = pg;
                if (dualOn) {
                    double pg3 = -a * c.dualClip();  // constant in logp
                    if (pg3 < pg) {
                        pg = pg3;
                        dPg = 0.0;
                    } else if (pg3 == pg) {
                        dPg = 0.5 * dPg;
                    }
                }
                double kl = 0, dKl = 0;
                if (withKl) {
                    double diff = lp - (double) ref[t];
                    switch (c.kl()) {
                        case K1 -> {
                            kl = diff;
                            dKl = 1.0;
                        }
                        case K2 -> {
                            kl = 0.5 * diff * diff;
                            dKl = diff;
                        }
                        case K3 -> {
                            double raw = (double) ref[t] - lp;
                            double d = clamp(raw, -20, 20);
                            double inner = Math.exp(d) - d - 1;
                            kl = clamp(inner, -10, 10);
                            // dkl/dlogp = clamp'(inner) · (e^d − 1) · clamp'(raw) · (−1)
                            dKl = clampGrad(inner, -10, 10) * (Math.exp(d) - 1) * clampGrad(raw, -20, 20) * -1.0;
                        }
                        case NONE -> throw new AssertionError();
                    }
                }
                double l = pg + c.klCoef() * kl;
                grad[t] = w * (dPg + c.klCoef() * dKl);
                sums[AbiIndices.LOSS_LOSS] += term(w * l, absolute);
                sums[AbiIndices.LOSS_PG_LOSS] += term(w * pg, absolute);
                sums[AbiIndices.LOSS_KL_LOSS] += term(w * kl, absolute);
                sums[AbiIndices.LOSS_TOKENS] += 1;
                if (pg2 > pg1) sums[AbiIndices.LOSS_CLIPPED] += 1;
                if (dualOn && pgMax > -a * c.dualClip()) sums[AbiIndices.LOSS_CLIPPED_LOWER] += 1;
                sums[AbiIndices.LOSS_PPO_KL] += term(-dc, absolute);
                sums[AbiIndices.LOSS_KL] += term(kl, absolute);
            }
        }
        return new LossRef(grad, sums);
    }

    // ---------------------------------------------------------------- helpers

    private static double term(double x, boolean absolute) {
        return absolute ? Math.abs(x) : x;
    }

    /** A growable list of doubles (an ArrayList<Double> without the boxing). */
    static final class Values {
        private double[] a = new double[4];
        private int n;

        void add(double x) {
            if (n == a.length) a = java.util.Arrays.copyOf(a, 2 * n);
            a[n++] = x;
        }

        double get(int i) {
            return a[i];
        }

        int size() {
            return n;
        }
    }

    private static List<Values> lists(int n) {
        List<Values> l = new ArrayList<>(n);
        for (int i = 0; i < n; i++) l.add(new Values());
        return l;
    }
}
