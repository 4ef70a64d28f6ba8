// PlainJavaAdvantage.java — the "plain Java" contestant of AdvantageBench: a fast single-threaded
// Java port of the native CPU algorithm, because ReferenceKernels.advantages (the test oracle)
// boxes every value and is far too slow at 16M rows; it is benchmarked apart, only up to 1M rows.
package dev.drmas.bench;

import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.SingletonPolicy;
import java.util.Arrays;

/**
 * Two paths, as in native/src/cpu.cpp. When every uid's rows are contiguous (the rollout
 * layout), each uid run is normalised on its own in three short passes while it is hot in
 * cache: one pass of sums (per agent, per trajectory), one of second moments, one writing the
 * advantages. Any other order takes the general path: global per-segment arrays, three full
 * passes. Statistics are in double (its results are bit-identical to the kernel's on the
 * benchmark inputs); scratch arrays are kept between calls (no allocation per call once warm).
 * Any NormConfig is supported; ids must be dense and in range (they are not validated).
 */
final class PlainJavaAdvantage {
    private final boolean agentMean, agentStd, trajNumerator, trajPooling, scale;
    private final SingletonPolicy singleton;
    private final int ddof;
    private final double eps;

    // blocked path
    private boolean[] seen = new boolean[0];
    private int[] runStart = new int[64];
    private int[] stamp = new int[0], slot = new int[0];
    private int epoch;
    private double[] tCnt = new double[64], tMean = new double[64];
    private double[] aCnt = new double[0], aMean = new double[0], aM2 = new double[0];
    // general path
    private double[] sCnt = new double[0], sMean = new double[0], sStd = new double[0];
    private double[] gCnt = new double[0], gMean = new double[0], gM2 = new double[0];
    private double[] allTCnt = new double[0], allTMean = new double[0];
    private int[] owner = new int[0];

    PlainJavaAdvantage(NormConfig c) {
        this.agentMean = c.mode().agentMean();
        this.agentStd = c.mode().agentStd();
        this.trajNumerator = c.mode().trajectoryNumerator();
        this.trajPooling = c.globalPooling() == GlobalPooling.TRAJECTORIES;
        this.scale = c.scaleByStd();
        this.singleton = c.singleton();
        this.ddof = c.unbiased() ? 1 : 0;
        this.eps = c.eps();
    }

    /** Writes the advantage of every row into {@code out}. */
    void compute(float[] scores, int[] uid, int[] traj, int[] agent, int numUids, int numTrajs, int numAgents,
                 float[] out) {
        int n = scores.length;
        if (trajPooling && traj == null) throw new IllegalArgumentException("traj is required with trajectory pooling");
        // uid runs; the layout is "contiguous" when no uid starts two runs
        if (seen.length < numUids) seen = new boolean[numUids];
        else Arrays.fill(seen, 0, numUids, false);
        int runs = 0, prev = -1;
        boolean contiguous = true;
        for (int i = 0; i < n; i++) {
            int u = uid[i];
            if (u != prev) {
                if (seen[u]) {
                    contiguous = false;
                    break;
                }
                seen[u] = true;
                if (runs == runStart.length) runStart = Arrays.copyOf(runStart, 2 * runs);
                runStart[runs++] = i;
                prev = u;
            }
        }
        if (!contiguous) {
            general(scores, uid, traj, agent, numUids, numTrajs, numAgents, out);
            return;
        }
        if (aCnt.length < numAgents) {
            aCnt = new double[numAgents];
            aMean = new double[numAgents];
            aM2 = new double[numAgents];
        }
        if (trajPooling && stamp.length < numTrajs) {
            stamp = new int[numTrajs];
            slot = new int[numTrajs];
            epoch = 0;
        }
        for (int r = 0; r < runs; r++) {
            run(scores, traj, agent, numAgents, runStart[r], r + 1 < runs ? runStart[r + 1] : n, out);
        }
    }

    // Rows [b, e), all of one uid. Trajectory slots: stamp[t] == epoch marks t as seen in this run.
    private void run(float[] scores, int[] traj, int[] agent, int K, int b, int e, float[] out) {
        Arrays.fill(aCnt, 0, K, 0.0);
        Arrays.fill(aMean, 0, K, 0.0);
        Arrays.fill(aM2, 0, K, 0.0);
        int ep = 0, nt = 0;
        if (trajPooling) {
            if (epoch == Integer.MAX_VALUE) {
                Arrays.fill(stamp, 0);
                epoch = 0;
            }
            ep = ++epoch;
        }
        // pass 1: sums
        double gsum = 0;
        for (int i = b; i < e; i++) {
            double s = scores[i];
            int k = agent[i];
            aCnt[k] += 1;
            aMean[k] += s;
            if (trajPooling) {
                int t = traj[i], j;
                if (stamp[t] != ep) {
                    stamp[t] = ep;
                    j = nt++;
                    slot[t] = j;
                    if (j == tCnt.length) {
                        tCnt = Arrays.copyOf(tCnt, 2 * j);
                        tMean = Arrays.copyOf(tMean, 2 * j);
                    }
                    tCnt[j] = 0;
                    tMean[j] = 0;
                } else {
                    j = slot[t];
                }
                tCnt[j] += 1;
                tMean[j] += s;
            } else {
                gsum += s;
            }
        }
        for (int k = 0; k < K; k++) aMean[k] = aCnt[k] > 0 ? aMean[k] / aCnt[k] : 0.0;
        double gcnt;
        if (trajPooling) {
            for (int j = 0; j < nt; j++) {
                tMean[j] /= tCnt[j];
                gsum += tMean[j];
            }
            gcnt = nt;
        } else {
            gcnt = e - b;
        }
        double gmean = gsum / gcnt;
        // pass 2: second moments
        double gm2 = 0;
        for (int i = b; i < e; i++) {
            double s = scores[i];
            int k = agent[i];
            double d = s - aMean[k];
            aM2[k] += d * d;
            if (!trajPooling) gm2 += (s - gmean) * (s - gmean);
        }
        if (trajPooling) for (int j = 0; j < nt; j++) gm2 += (tMean[j] - gmean) * (tMean[j] - gmean);
        double gstd = std(gcnt, gm2);
        for (int k = 0; k < K; k++) aM2[k] = std(aCnt[k], aM2[k]); // now the agents' std
        // pass 3: advantages
        for (int i = b; i < e; i++) {
            int k = agent[i];
            double s = scores[i];
            double x = trajPooling ? tMean[slot[traj[i]]] : s;
            out[i] = rowAdvantage(s, x, aCnt[k], aMean[k], aM2[k], gcnt, gmean, gstd);
        }
    }

    private void general(float[] scores, int[] uid, int[] traj, int[] agent, int U, int T, int K, float[] out) {
        int n = scores.length, S = Math.multiplyExact(U, K);
        if (sCnt.length < S) {
            sCnt = new double[S];
            sMean = new double[S];
            sStd = new double[S];
        } else {
            Arrays.fill(sCnt, 0, S, 0.0);
            Arrays.fill(sMean, 0, S, 0.0);
            Arrays.fill(sStd, 0, S, 0.0);
        }
        if (gCnt.length < U) {
            gCnt = new double[U];
            gMean = new double[U];
            gM2 = new double[U];
        } else {
            Arrays.fill(gCnt, 0, U, 0.0);
            Arrays.fill(gMean, 0, U, 0.0);
            Arrays.fill(gM2, 0, U, 0.0);
        }
        if (trajPooling) {
            if (allTCnt.length < T) {
                allTCnt = new double[T];
                allTMean = new double[T];
                owner = new int[T];
            } else {
                Arrays.fill(allTCnt, 0, T, 0.0);
                Arrays.fill(allTMean, 0, T, 0.0);
            }
        }
        // pass 1: sums
        for (int i = 0; i < n; i++) {
            double s = scores[i];
            int u = uid[i], seg = u * K + agent[i];
            sCnt[seg] += 1;
            sMean[seg] += s;
            if (trajPooling) {
                int t = traj[i];
                allTCnt[t] += 1;
                allTMean[t] += s;
                owner[t] = u;
            } else {
                gCnt[u] += 1;
                gMean[u] += s;
            }
        }
        for (int s = 0; s < S; s++) sMean[s] = sCnt[s] > 0 ? sMean[s] / sCnt[s] : 0.0;
        if (trajPooling) {
            for (int t = 0; t < T; t++) {
                if (allTCnt[t] == 0) continue;
                allTMean[t] /= allTCnt[t];
                gCnt[owner[t]] += 1;
                gMean[owner[t]] += allTMean[t];
            }
        }
        for (int u = 0; u < U; u++) gMean[u] = gCnt[u] > 0 ? gMean[u] / gCnt[u] : 0.0;
        // pass 2: second moments (sStd holds M2 until converted)
        for (int i = 0; i < n; i++) {
            double s = scores[i];
            int u = uid[i], seg = u * K + agent[i];
            double d = s - sMean[seg];
            sStd[seg] += d * d;
            if (!trajPooling) gM2[u] += (s - gMean[u]) * (s - gMean[u]);
        }
        if (trajPooling) {
            for (int t = 0; t < T; t++) {
                if (allTCnt[t] == 0) continue;
                double d = allTMean[t] - gMean[owner[t]];
                gM2[owner[t]] += d * d;
            }
        }
        for (int s = 0; s < S; s++) sStd[s] = std(sCnt[s], sStd[s]);
        for (int u = 0; u < U; u++) gM2[u] = std(gCnt[u], gM2[u]); // now the groups' std
        // pass 3: advantages
        for (int i = 0; i < n; i++) {
            int u = uid[i], seg = u * K + agent[i];
            double s = scores[i];
            double x = trajPooling ? allTMean[traj[i]] : s;
            out[i] = rowAdvantage(s, x, sCnt[seg], sMean[seg], sStd[seg], gCnt[u], gMean[u], gM2[u]);
        }
    }

    private double std(double count, double m2) {
        return count > ddof ? Math.sqrt(m2 / (count - ddof)) : 0.0;
    }

    // The per-row formula of drmas_math.h row_advantage: mode, singleton policy, scale_by_std.
    private float rowAdvantage(double s, double x, double aCount, double aMeanV, double aStd,
                               double gCount, double gMeanV, double gStd) {
        double num = trajNumerator ? x : s;
        double mean;
        if (agentMean && aCount > 1) mean = aMeanV;
        else if (agentMean && singleton == SingletonPolicy.ZERO) return 0f;
        else if (agentMean && singleton == SingletonPolicy.RAW) mean = 0.0;
        else if (gCount > 1) mean = gMeanV;
        else if (singleton == SingletonPolicy.RAW) mean = 0.0;
        else return 0f;
        double diff = num - mean;
        if (!scale) return (float) diff;
        double std;
        if (agentStd && aCount > 1) std = aStd;
        else if (agentStd && singleton == SingletonPolicy.ZERO) return 0f;
        else if (agentStd && singleton == SingletonPolicy.RAW) std = 1.0;
        else if (gCount > 1) std = gStd;
        else if (singleton == SingletonPolicy.RAW) std = 1.0;
        else return 0f;
        if (diff == 0.0) return 0f;
        return (float) (diff / (std + eps));
    }
}
