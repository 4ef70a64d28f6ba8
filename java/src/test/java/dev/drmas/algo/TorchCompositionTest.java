// TorchCompositionTest.java — the native kernels against the same computations composed from
// LibTorch ops (TorchReference): segment stats, advantages, broadcast, dL/dlogp vs autograd, and
// the production Tensor overloads (validation, logp.backward(grad) through a tiny model).
package dev.drmas.algo;

import dev.drmas.testing.TorchScope;

import static dev.drmas.algo.TorchReference.bools;
import static dev.drmas.algo.TorchReference.doubles;
import static dev.drmas.algo.TorchReference.floats;
import static dev.drmas.algo.TorchReference.ints;
import static dev.drmas.algo.TorchReference.longs;
import static dev.drmas.algo.TorchReference.toDoubles;
import static dev.drmas.algo.TorchReference.toFloats;
import static dev.drmas.algo.TorchReference.toLongs;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@ExtendWith(TorchScope.class)
class TorchCompositionTest {
    // float32 results: |a − e| ≤ atol + rtol·|e|
    static final double GRAD_ATOL = 1e-6, GRAD_RTOL = 1e-4;
    static final double ADV_ATOL = 1e-5, ADV_RTOL = 1e-5;
    // float64 statistics (two fp64 two-pass computations that differ only in summation order)
    static final double STAT_ATOL = 1e-9, STAT_RTOL = 1e-9;
    // the loss value: float32 token losses summed in fp64 on both sides
    static final double LOSS_ATOL = 1e-5, LOSS_RTOL = 1e-4;

    // ================================================================== data

    /** Rows of a rollout batch: score and (uid, traj, agent) ids. */
    record Rows(String name, float[] scores, int[] uid, int[] traj, int[] agent, int numUids, int numTrajs,
                int numAgents) {
        int n() {
            return scores.length;
        }

        @Override
        public String toString() {
            return name + " (n=" + n() + ")";
        }
    }

    /**
     * Random rows: trajectories of 1..maxSteps steps, each in a random group (so groups have
     * from zero to many trajectories, some exactly one), agents drawn per step (some (uid, agent)
     * segments empty or single), unused trajectory ids in between, and scores that mix binary
     * trajectory rewards shared by the steps (ties, constant segments), whole constant groups and
     * continuous per-step scores.
     */
    static Rows randomRows(String name, long seed, int n, int numUids, int numAgents, int maxSteps, boolean shuffle) {
        Random rnd = new Random(seed);
        float[] groupConst = new float[numUids];
        boolean[] isConst = new boolean[numUids];
        for (int u = 0; u < numUids; u++) {
            isConst[u] = rnd.nextInt(10) == 0;
            groupConst[u] = (float) rnd.nextInt(3) * 0.5f;
        }
        List<int[]> ids = new ArrayList<>();
        List<Float> sc = new ArrayList<>();
        int t = 0;
        while (ids.size() < n) {
            if (rnd.nextInt(20) == 0) t++; // an empty trajectory id
            int u = rnd.nextInt(numUids);
            int steps = 1 + rnd.nextInt(maxSteps);
            boolean shared = rnd.nextBoolean();
            float reward = rnd.nextBoolean() ? 1f : 0f;
            for (int s = 0; s < steps && ids.size() < n; s++) {
                ids.add(new int[] {u, t, rnd.nextInt(numAgents)});
                float v = isConst[u] ? groupConst[u]
                        : shared ? reward : (float) (rnd.nextGaussian() * 2 + 0.5);
                sc.add(v);
            }
            t++;
        }
        int numTrajs = t + 2; // trailing empty trajectory ids
        Integer[] order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        if (shuffle) {
            List<Integer> l = Arrays.asList(order);
            java.util.Collections.shuffle(l, rnd);
        }
        float[] scores = new float[n];
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        for (int i = 0; i < n; i++) {
            int j = order[i];
            scores[i] = sc.get(j);
            uid[i] = ids.get(j)[0];
            traj[i] = ids.get(j)[1];
            agent[i] = ids.get(j)[2];
        }
        return new Rows(name, scores, uid, traj, agent, numUids, numTrajs, numAgents);
    }

    /**
     * Hand-made rows, unsorted, covering each singleton situation: a group of one trajectory
     * (and, under row pooling, of one row), agents acting once, a constant group, an empty group
     * (uid 2), an empty trajectory id (3) and an agent that never acts (agent 2).
     */
    static Rows handmadeRows() {
        //                 uid traj agent score
        int[][] rows = {
                {0, 0, 0}, {0, 0, 1}, {0, 1, 0}, {0, 1, 0}, // uid 0: trajs 0,1; agent 1 acts once
                {1, 2, 0}, {1, 2, 0}, {1, 2, 1},            // uid 1: one trajectory
                {3, 4, 0}, {3, 4, 1}, {3, 5, 0}, {3, 5, 1}, // uid 3: constant scores
                {4, 6, 1},                                  // uid 4: a single row
                {5, 7, 0}, {5, 8, 1}, {5, 9, 0},            // uid 5: agent 1 once, 3 trajectories
        };
        float[] score = {1, 2, 3, 5, 5, 7, 4, 0.5f, 0.5f, 0.5f, 0.5f, 9, -1, 2, 2};
        int[] perm = {9, 3, 0, 14, 6, 11, 1, 7, 12, 4, 10, 2, 13, 5, 8};
        int n = rows.length;
        float[] s = new float[n];
        int[] uid = new int[n], traj = new int[n], agent = new int[n];
        for (int i = 0; i < n; i++) {
            int j = perm[i];
            s[i] = score[j];
            uid[i] = rows[j][0];
            traj[i] = rows[j][1];
            agent[i] = rows[j][2];
        }
        return new Rows("handmade", s, uid, traj, agent, 6, 10, 3);
    }

    private static List<Rows> rowSets;

    static synchronized List<Rows> rowSets() {
        if (rowSets == null) {
            rowSets = List.of(
                    new Rows("one row", new float[] {0.75f}, new int[] {0}, new int[] {0}, new int[] {0}, 1, 1, 1),
                    handmadeRows(),
                    randomRows("prime, shuffled", 11, 1009, 37, 3, 4, true),
                    randomRows("sorted by rollout", 12, 4099, 300, 2, 5, false),
                    randomRows("large, shuffled", 13, 100_003, 4096, 4, 6, true));
        }
        return rowSets;
    }

    /** mode × pooling × singleton × scaleByStd; the std convention (ddof) is varied inside the test. */
    static Stream<Arguments> normConfigs() {
        List<Arguments> out = new ArrayList<>();
        for (NormMode m : NormMode.values()) {
            for (GlobalPooling p : GlobalPooling.values()) {
                for (SingletonPolicy s : SingletonPolicy.values()) {
                    for (boolean scale : new boolean[] {true, false}) {
                        out.add(Arguments.of(new NormConfig(m, p, s, true, scale, NormConfig.DEFAULT_EPS)));
                    }
                }
            }
        }
        return out.stream();
    }

    // ================================================================== segment statistics

    @Test
    void segmentStatsMatchLibTorch() {
        for (Rows r : rowSets()) {
            for (boolean unbiased : new boolean[] {true, false}) {
                // by trajectory (empty ids included) and by agent segment
                checkStats(r + " by traj", r.scores(), r.traj(), r.numTrajs(), unbiased);
                int[] seg = new int[r.n()];
                for (int i = 0; i < seg.length; i++) seg[i] = r.uid()[i] * r.numAgents() + r.agent()[i];
                checkStats(r + " by (uid, agent)", r.scores(), seg, r.numUids() * r.numAgents(), unbiased);
            }
        }
        checkStats("no rows", new float[0], new int[0], 3, true);
        checkStats("no segments", new float[0], new int[0], 0, false);
    }

    private void checkStats(String what, float[] values, int[] ids, int numSegments, boolean unbiased) {
        SegmentStats.Result a = SegmentStats.compute(values, ids, numSegments, unbiased);
        TorchReference.Stats e = TorchReference.segmentStats(floats(values), ints(ids), numSegments, unbiased);
        String w = what + (unbiased ? ", unbiased" : ", biased");
        Tolerance.assertClose(w + ": count", a.count(), toLongs(e.count()));
        Tolerance.assertClose(w + ": mean", a.mean(), toDoubles(e.mean()), STAT_ATOL, STAT_RTOL);
        Tolerance.assertClose(w + ": m2", a.m2(), toDoubles(e.m2()), STAT_ATOL, STAT_RTOL);
        Tolerance.assertClose(w + ": std", a.std(), toDoubles(e.std()), STAT_ATOL, STAT_RTOL);
    }

    // ================================================================== advantages

    @ParameterizedTest(name = "{0}")
    @MethodSource("normConfigs")
    void advantagesMatchLibTorch(NormConfig config) {
        boolean rows = config.globalPooling() == GlobalPooling.ROWS;
        // the large set runs with one ddof per config (alternating over the configs), the others with both
        boolean largeUnbiased = (((NormMode) config.mode()).ordinal() + config.globalPooling().ordinal()
                + config.singleton().ordinal() + (config.scaleByStd() ? 1 : 0)) % 2 == 0;
        for (Rows r : rowSets()) {
            for (boolean unbiased : new boolean[] {true, false}) {
                if (r.n() > 50_000 && unbiased != largeUnbiased) continue;
                NormConfig c = config.withUnbiased(unbiased);
                // under row pooling traj is optional: leave it out except for one set
                boolean passTraj = !rows || r.name().startsWith("prime");
                int[] traj = passTraj ? r.traj() : null;
                int numTrajs = passTraj ? r.numTrajs() : 0;
                float[] actual = Advantages.compute(c, r.scores(), r.uid(), traj, r.agent(), r.numUids(), numTrajs,
                        r.numAgents());
                Tensor expected = TorchReference.advantages(c, floats(r.scores()), ints(r.uid()),
                        traj == null ? null : ints(traj), ints(r.agent()), r.numUids(), numTrajs, r.numAgents());
                Tolerance.assertClose(c + " on " + r, actual, toDoubles(expected), ADV_ATOL, ADV_RTOL);
            }
        }
    }

    /** The hand-made set really exercises what it claims (guards the data, not the kernels). */
    @Test
    void handmadeRowsHaveSingletonsAndEmptySegments() {
        Rows r = handmadeRows();
        TorchReference.Stats byTraj = TorchReference.segmentStats(floats(r.scores()), ints(r.traj()), r.numTrajs(), true);
        long[] trajCount = toLongs(byTraj.count());
        assertEquals(0, trajCount[3], "trajectory 3 is empty");
        int[] seg = new int[r.n()];
        for (int i = 0; i < seg.length; i++) seg[i] = r.uid()[i] * r.numAgents() + r.agent()[i];
        long[] agentCount = toLongs(TorchReference.segmentStats(floats(r.scores()), ints(seg),
                r.numUids() * r.numAgents(), true).count());
        assertEquals(1, agentCount[0 * 3 + 1], "uid 0, agent 1 acts once");
        assertEquals(0, agentCount[2 * 3 + 0], "uid 2 is empty");
        // GRPO with trajectory pooling gives uid 1 (one trajectory) A = 0 under fallback
        float[] a = toFloats(TorchReference.advantages(NormConfig.of(NormMode.GRPO), floats(r.scores()),
                ints(r.uid()), ints(r.traj()), ints(r.agent()), r.numUids(), r.numTrajs(), r.numAgents()));
        for (int i = 0; i < r.n(); i++) {
            if (r.uid()[i] == 1 || r.uid()[i] == 3) assertEquals(0f, a[i], "row " + i);
        }
    }

    // ================================================================== broadcast

    @Test
    void broadcastMatchesLibTorch() {
        Random rnd = new Random(21);
        checkBroadcast("no rows", new float[0], new long[] {0}, 4);
        checkBroadcast("no rows, no tokens", new float[0], new long[] {0}, 0);
        checkBroadcast("one row", new float[] {2.5f}, new long[] {0, 1}, 1);
        for (int rows : new int[] {1, 7, 101, 20_011}) {
            long[] off = new long[rows + 1];
            off[0] = rnd.nextInt(4); // tokens before the first row
            for (int r = 0; r < rows; r++) off[r + 1] = off[r] + (rnd.nextInt(6) == 0 ? 0 : 1 + rnd.nextInt(9));
            int numTokens = (int) off[rows] + rnd.nextInt(4); // and after the last
            float[] v = new float[rows];
            for (int r = 0; r < rows; r++) v[r] = (float) rnd.nextGaussian();
            checkBroadcast(rows + " rows", v, off, numTokens);
        }
    }

    private void checkBroadcast(String what, float[] rowValues, long[] offsets, int numTokens) {
        float[] a = TokenBroadcast.rows(rowValues, offsets, numTokens);
        Tensor e = TorchReference.broadcastRows(floats(rowValues), longs(offsets), numTokens);
        Tolerance.assertClose("broadcast " + what, a, toDoubles(e), 0, 0);
    }

    // ================================================================== loss

    /** A packed token batch with its per-token advantages, masks and normalisers. */
    record Tokens(String name, long[] offsets, float[] logp, float[] old, float[] adv, float[] ref, boolean[] mask,
                  int validTokens) {
        int rows() {
            return offsets.length - 1;
        }

        double normalizer(LossAggregation a) {
            return a.normalizer(validTokens, rows(), 512.0);
        }

        @Override
        public String toString() {
            return name;
        }
    }

    /**
     * Rows of 0..maxLen tokens (some empty, one fully masked), unowned tokens before the first
     * and after the last row, masked tokens (NaN in every input there, and in unowned tokens),
     * the advantage of the row on each token (some rows 0), log-ratios mostly near the clip
     * range and a quarter anywhere in [−30, 30], reference log-probs near and far.
     */
    static Tokens randomTokens(String name, long seed, int rows, int maxLen, boolean withMask) {
        Random rnd = new Random(seed);
        long[] off = new long[rows + 1];
        off[0] = 3;
        for (int r = 0; r < rows; r++) off[r + 1] = off[r] + (rnd.nextInt(10) == 0 ? 0 : 1 + rnd.nextInt(maxLen));
        int n = (int) off[rows] + 5;
        float[] logp = new float[n], old = new float[n], adv = new float[n], ref = new float[n];
        boolean[] mask = new boolean[n];
        Arrays.fill(logp, Float.NaN);
        Arrays.fill(old, Float.NaN);
        Arrays.fill(adv, Float.NaN);
        Arrays.fill(ref, Float.NaN);
        int fullyMasked = rows / 2;
        int valid = 0;
        for (int r = 0; r < rows; r++) {
            float a = rnd.nextInt(8) == 0 ? 0f : (float) rnd.nextGaussian();
            for (long t = off[r]; t < off[r + 1]; t++) {
                int i = (int) t;
                mask[i] = !withMask || (r != fullyMasked && rnd.nextInt(7) != 0);
                if (!mask[i]) continue; // padding: NaN everywhere
                valid++;
                logp[i] = (float) (-rnd.nextDouble() * 8);
                double delta = rnd.nextInt(4) == 0 ? rnd.nextDouble() * 60 - 30 : rnd.nextGaussian() * 0.25;
                old[i] = (float) (logp[i] - delta);
                adv[i] = a;
                double kd = rnd.nextInt(5) == 0 ? rnd.nextDouble() * 50 - 25 : rnd.nextGaussian() * 0.5;
                ref[i] = (float) (logp[i] + kd);
            }
        }
        return new Tokens(name, off, logp, old, adv, ref, withMask ? mask : null, Math.max(valid, 1));
    }

    private static List<Tokens> tokenSets;

    static synchronized List<Tokens> tokenSets() {
        if (tokenSets == null) {
            tokenSets = List.of(
                    randomTokens("masked", 31, 97, 120, true),
                    randomTokens("no mask", 32, 13, 40, false),
                    new Tokens("one token", new long[] {0, 1}, new float[] {-1f}, new float[] {-1.5f},
                            new float[] {-2f}, new float[] {-0.5f}, null, 1));
        }
        return tokenSets;
    }

    static Stream<Arguments> lossConfigs() {
        List<Arguments> out = new ArrayList<>();
        double[][] clips = {{0.2, 0.2}, {0.2, 0.28}};
        for (LossAggregation agg : LossAggregation.values()) {
            for (double[] clip : clips) {
                for (double dual : new double[] {0.0, 3.0}) {
                    for (KlEstimator kl : KlEstimator.values()) {
                        LossConfig c = new LossConfig(clip[0], clip[1], dual, kl, kl == KlEstimator.NONE ? 0 : 0.05, agg);
                        out.add(Arguments.of(c, true));
                        if (kl == KlEstimator.NONE) out.add(Arguments.of(c, false)); // without refLogp
                    }
                }
            }
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0}, ref={1}")
    @MethodSource("lossConfigs")
    void lossGradientMatchesAutograd(LossConfig c, boolean withRef) {
        for (Tokens tk : tokenSets()) {
            double norm = tk.normalizer(c.aggregation());
            float[] ref = withRef ? tk.ref() : null;
            ClippedLoss.Result a = ClippedLoss.compute(c, norm, tk.offsets(), tk.logp(), tk.old(), tk.adv(), ref,
                    tk.mask());
            TorchReference.LossResult e = TorchReference.clippedLoss(c, norm, longs(tk.offsets()), floats(tk.logp()),
                    floats(tk.old()), floats(tk.adv()), ref == null ? null : floats(ref),
                    tk.mask() == null ? null : bools(tk.mask()));
            String what = c + " ref=" + withRef + " on " + tk;
            Tolerance.assertClose(what + ": dL/dlogp", a.grad(), toDoubles(e.grad()), GRAD_ATOL, GRAD_RTOL);
            Tolerance.assertClose(what + ": loss", new double[] {a.sums()[AbiIndices.LOSS_LOSS]}, new double[] {e.loss()},
                    LOSS_ATOL, LOSS_RTOL);
        }
    }

    /** The data really reaches the regimes the loss test is about (guards the data). */
    @Test
    void lossDataCoversClampAndMaskRegimes() {
        Tokens tk = tokenSets().get(0);
        int far = 0, beyondClamp = 0, masked = 0, nanMasked = 0;
        for (int i = 0; i < tk.logp().length; i++) {
            if (tk.mask()[i]) {
                double d = Math.abs(tk.logp()[i] - tk.old()[i]);
                if (d > 1) far++;
                if (d > 20) beyondClamp++;
            } else {
                masked++;
                if (Float.isNaN(tk.logp()[i])) nanMasked++;
            }
        }
        assertTrue(far > 100 && beyondClamp > 20, "far ratios: " + far + ", beyond ±20: " + beyondClamp);
        assertTrue(masked > 100 && nanMasked == masked, "masked: " + masked + ", NaN there: " + nanMasked);
    }

    // ================================================================== Tensor overloads

    @Test
    void advantagesTensorOverloadMatchesLibTorch() {
        Rows r = rowSets().get(2);
        for (NormConfig c : List.of(NormConfig.of(NormMode.DRMAS), NormConfig.of(NormMode.GRPO),
                NormConfig.of(NormMode.AGENT_STD).withGlobalPooling(GlobalPooling.ROWS))) {
            Tensor traj = c.globalPooling() == GlobalPooling.ROWS ? null : ints(r.traj());
            long numTrajs = traj == null ? 0 : r.numTrajs();
            Tensor a = Advantages.compute(c, floats(r.scores()), ints(r.uid()), traj, ints(r.agent()),
                    r.numUids(), numTrajs, r.numAgents());
            assertEquals(ScalarType.Float, a.scalar_type().intern());
            assertEquals(r.n(), a.numel());
            Tensor e = TorchReference.advantages(c, floats(r.scores()), ints(r.uid()), traj, ints(r.agent()),
                    r.numUids(), numTrajs, r.numAgents());
            Tolerance.assertClose("Tensor overload " + c, toFloats(a), toDoubles(e), ADV_ATOL, ADV_RTOL);
        }
    }

    @Test
    void advantagesTensorOverloadRejectsBadTensors() {
        Rows r = rowSets().get(2);
        int n = r.n();
        NormConfig c = NormConfig.of(NormMode.DRMAS);
        Tensor uid = ints(r.uid()), traj = ints(r.traj()), agent = ints(r.agent());
        // every other element of a 2n buffer: right size and dtype, stride 2
        float[] wide = new float[2 * n];
        for (int i = 0; i < n; i++) wide[2 * i] = r.scores()[i];
        Tensor strided = floats(wide).reshape(n, 2).select(1, 0);
        assertTrue(!strided.is_contiguous() && strided.numel() == n);
        expectIllegal("scores", "contiguous", () -> Advantages.compute(c, strided, uid, traj, agent,
                r.numUids(), r.numTrajs(), r.numAgents()));
        Tensor scores64 = floats(r.scores()).to(ScalarType.Double);
        expectIllegal("scores", null, () -> Advantages.compute(c, scores64, uid, traj, agent,
                r.numUids(), r.numTrajs(), r.numAgents()));
        Tensor uid64 = uid.to(ScalarType.Long);
        expectIllegal("uid", null, () -> Advantages.compute(c, floats(r.scores()), uid64, traj, agent,
                r.numUids(), r.numTrajs(), r.numAgents()));
    }

    @Test
    void lossTensorOverloadMatchesAutograd() {
        Tokens tk = tokenSets().get(0);
        LossConfig c = LossConfig.defaults().withClip(0.2, 0.28).withKl(KlEstimator.K3, 0.05)
                .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        double norm = tk.normalizer(c.aggregation());
        Tensor off = longs(tk.offsets());
        Tensor logp = floats(tk.logp());
        logp.set_requires_grad(true); // only its data is read
        Tensor old = floats(tk.old()), adv = floats(tk.adv()), ref = floats(tk.ref());
        TorchReference.LossResult e = TorchReference.clippedLoss(c, norm, off, logp, old, adv, ref, bools(tk.mask()));
        for (Tensor mask : List.of(bools(tk.mask()), bools(tk.mask()).to(ScalarType.Byte))) {
            ClippedLoss.TensorResult a = ClippedLoss.compute(c, norm, off, logp, old, adv, ref, mask);
            assertEquals(ScalarType.Float, a.grad().scalar_type().intern());
            String what = "Tensor overload, mask " + mask.scalar_type().intern();
            Tolerance.assertClose(what + ": dL/dlogp", toFloats(a.grad()), toDoubles(e.grad()), GRAD_ATOL, GRAD_RTOL);
            Tolerance.assertClose(what + ": loss", new double[] {a.loss()}, new double[] {e.loss()}, LOSS_ATOL,
                    LOSS_RTOL);
        }
    }

    @Test
    void lossTensorOverloadRejectsBadTensors() {
        Tokens tk = tokenSets().get(1);
        int n = tk.logp().length;
        LossConfig c = LossConfig.defaults();
        Tensor off = longs(tk.offsets());
        Tensor logp = floats(tk.logp()), old = floats(tk.old()), adv = floats(tk.adv());
        float[] wide = new float[2 * n];
        Tensor strided = floats(wide).reshape(n, 2).select(1, 1);
        expectIllegal("logp", "contiguous", () -> ClippedLoss.compute(c, 1.0, off, strided, old, adv, null, null));
        expectIllegal("adv", "contiguous", () -> ClippedLoss.compute(c, 1.0, off, logp, old, strided, null, null));
        Tensor logp64 = logp.to(ScalarType.Double);
        expectIllegal("logp", null, () -> ClippedLoss.compute(c, 1.0, off, logp64, old, adv, null, null));
        Tensor off32 = off.to(ScalarType.Int);
        expectIllegal("offsets", null, () -> ClippedLoss.compute(c, 1.0, off32, logp, old, adv, null, null));
        Tensor maskF = floats(new float[n]);
        expectIllegal("mask", null, () -> ClippedLoss.compute(c, 1.0, off, logp, old, adv, null, maskF));
    }

    /**
     * The training step's form: one advantage per row, read through the offsets by the kernel, with
     * and without the offsets on the host, against autograd of the loss on the per-token advantages
     * (which are NaN outside the valid tokens: only the row's own advantage may reach a token).
     */
    @Test
    void lossPerRowAdvantagesMatchAutograd() {
        Tokens tk = tokenSets().get(0);
        int rows = tk.offsets().length - 1;
        float[] rowAdv = new float[rows];
        for (int r = 0; r < rows; r++) {
            for (long t = tk.offsets()[r]; t < tk.offsets()[r + 1]; t++) {
                if (tk.mask()[(int) t]) {
                    rowAdv[r] = tk.adv()[(int) t];
                    break;
                }
            }
        }
        LossConfig c = LossConfig.defaults().withClip(0.2, 0.28).withKl(KlEstimator.K3, 0.05)
                .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        double norm = tk.normalizer(c.aggregation());
        Tensor off = longs(tk.offsets()), logp = floats(tk.logp()), old = floats(tk.old()), ref = floats(tk.ref());
        Tensor mask = bools(tk.mask());
        TorchReference.LossResult e = TorchReference.clippedLoss(c, norm, off, logp, old, floats(tk.adv()), ref, mask);
        for (long[] host : Arrays.asList(null, tk.offsets())) {
            ClippedLoss.DeviceResult a = ClippedLoss.computeRowsOnDevice(c, norm, host, off, logp, old, floats(rowAdv), ref, mask);
            String what = "per-row advantages, host offsets " + (host != null);
            assertEquals(tk.logp().length, a.grad().numel());
            Tolerance.assertClose(what + ": dL/dlogp", toFloats(a.grad()), toDoubles(e.grad()), GRAD_ATOL, GRAD_RTOL);
            assertEquals(AbiIndices.LOSS_SUMS, a.sums().numel());
            Tolerance.assertClose(what + ": loss", new double[] {toDoubles(a.sums())[AbiIndices.LOSS_LOSS]},
                    new double[] {e.loss()}, LOSS_ATOL, LOSS_RTOL);
        }
        // one advantage per row: numRows entries, no more
        Tensor longer = floats(Arrays.copyOf(rowAdv, rows + 2));
        expectIllegal("rowAdv", "expected " + rows, () -> ClippedLoss.computeRowsOnDevice(c, norm, null, off, logp, old,
                longer, ref, mask));
        // host offsets of another length than the tensor's are refused
        long[] shortHost = Arrays.copyOf(tk.offsets(), rows);
        assertEquals("hostOffsets has " + rows + " entries but offsets has " + (rows + 1),
                assertThrows(IllegalArgumentException.class, () -> ClippedLoss.computeOnDevice(c, norm, shortHost, off, logp,
                        old, floats(tk.adv()), ref, mask)).getMessage());
    }

    /** No rows (offsets [0]): every token is outside every row, so dL/dlogp is 0 and so are the sums. */
    @Test
    void lossTensorOverloadWithNoRows() {
        float[] x = {-1f, -2f, -3f};
        ClippedLoss.TensorResult r = ClippedLoss.compute(LossConfig.defaults(), 1.0, longs(0L), floats(x), floats(x),
                floats(1f, 1f, 1f), null, null);
        assertTrue(Arrays.equals(new float[3], toFloats(r.grad())), Arrays.toString(toFloats(r.grad())));
        assertTrue(Arrays.equals(new double[AbiIndices.LOSS_SUMS], r.sums()), Arrays.toString(r.sums()));
        expectIllegal("offsets", "numRows + 1", () -> ClippedLoss.compute(LossConfig.defaults(), 1.0,
                longs(new long[0]), floats(x), floats(x), floats(x), null, null));
    }

    /**
     * A tensor of the right dtype but the wrong size is refused even when 0 elements are expected
     * (no rows), and a tensor neither on the CPU nor on CUDA (meta) is refused as such.
     */
    @Test
    void tensorViewsRefuseAWrongSizeAndAnotherDevice() {
        NormConfig c = NormConfig.of(NormMode.GRPO).withGlobalPooling(GlobalPooling.ROWS);
        Tensor none = floats();
        expectIllegal("uid", "uid has 1 elements, expected 0",
                () -> Advantages.compute(c, none, ints(0), null, ints(new int[0]), 1, 0, 1));
        assertEquals(0, Advantages.compute(c, none, ints(new int[0]), null, ints(new int[0]), 1, 0, 1).numel());
        Tensor meta = torch.empty(new long[] {2}, new org.bytedeco.pytorch.TensorOptions(ScalarType.Float).device(
                new org.bytedeco.pytorch.DeviceOptional(new org.bytedeco.pytorch.Device("meta"))), null);
        assertEquals("scores must be a CPU or CUDA tensor", assertThrows(IllegalArgumentException.class,
                () -> Advantages.compute(c, meta, ints(0, 0), null, ints(0, 0), 1, 0, 1)).getMessage());
    }

    /**
     * The trainer's path: a model produces logp, the native kernel gives dL/dlogp, and
     * logp.backward(grad) must give the parameters the gradient autograd gives for the whole
     * composition (model → loss) at once.
     */
    @Test
    void nativeGradientBackpropagatesLikeAutograd() {
        Tokens tk = tokenSets().get(0);
        int n = tk.logp().length, dim = 8;
        Random rnd = new Random(41);
        float[] feat = new float[n * dim], w0 = new float[dim];
        for (int i = 0; i < feat.length; i++) feat[i] = (float) rnd.nextGaussian();
        for (int j = 0; j < dim; j++) w0[j] = (float) (rnd.nextGaussian() * 0.3);
        Tensor x = floats(feat).reshape(n, dim);
        // logp must stay within ±20 of old for some tokens and move the ratio both ways
        float[] old = new float[n];
        float[] base = toFloats(torch.log_sigmoid(x.mv(floats(w0))));
        for (int i = 0; i < n; i++) old[i] = base[i] + (float) (rnd.nextGaussian() * 0.3);
        for (LossConfig c : List.of(LossConfig.defaults(),
                LossConfig.defaults().withClip(0.2, 0.28).withDualClip(0).withKl(KlEstimator.K2, 0.1)
                        .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN))) {
            double norm = tk.normalizer(c.aggregation());
            Tensor off = longs(tk.offsets()), oldT = floats(old), adv = floats(tk.adv()), ref = floats(tk.ref());
            Tensor mask = bools(tk.mask());

            // autograd through model and loss together
            Tensor w1 = floats(w0);
            w1.set_requires_grad(true);
            Tensor loss = TorchReference.clippedLossTensor(c, norm, off, torch.log_sigmoid(x.mv(w1)), oldT, adv, ref, mask);
            loss.backward();
            double[] expected = toDoubles(w1.grad());

            // native dL/dlogp, then logp.backward(grad)
            Tensor w2 = floats(w0);
            w2.set_requires_grad(true);
            Tensor logp = torch.log_sigmoid(x.mv(w2));
            ClippedLoss.TensorResult r = ClippedLoss.compute(c, norm, off, logp.detach(), oldT, adv, ref, mask);
            logp.backward(r.grad(), new BoolOptional(), false, new TensorArrayRefOptional());
            Tolerance.assertClose(c + ": parameter gradient", toFloats(w2.grad()), expected, 1e-5, 1e-4);
            Tolerance.assertClose(c + ": loss", new double[] {r.loss()}, new double[] {loss.item_double()},
                    LOSS_ATOL, LOSS_RTOL);
        }
    }

    /** CPU tensors, and no tensor (an absent refLogp or mask), run on no CUDA stream: NULL. */
    @Test
    void noStreamForACpuTensorOrNone() {
        assertEquals(java.lang.foreign.MemorySegment.NULL, TorchStreams.current(null));
        assertEquals(java.lang.foreign.MemorySegment.NULL, TorchStreams.current(floats(1f)));
    }

    /** The call fails with an IllegalArgumentException whose message names the argument (and the problem). */
    private static void expectIllegal(String name, String detail, org.junit.jupiter.api.function.Executable call) {
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, call);
        String m = String.valueOf(e.getMessage());
        assertTrue(m.contains(name) && (detail == null || m.contains(detail)),
                "the message should name '" + name + "'" + (detail == null ? "" : " and say '" + detail + "'") + ": " + m);
    }

    /** TorchReference helpers round-trip Java arrays (guards the test plumbing). */
    @Test
    void arrayHelpersRoundTrip() {
        float[] f = {1.5f, -0f, Float.NaN, 3e38f};
        assertTrue(Arrays.equals(f, toFloats(floats(f))));
        double[] d = {1e-300, -2.5};
        assertTrue(Arrays.equals(d, toDoubles(doubles(d))));
        int[] i = {Integer.MIN_VALUE, 0, 7};
        assertTrue(Arrays.equals(i, TorchReference.toInts(ints(i))));
        long[] l = {Long.MAX_VALUE, -1};
        assertTrue(Arrays.equals(l, toLongs(longs(l))));
        boolean[] b = {true, false, true};
        assertTrue(Arrays.equals(b, TorchReference.toBooleans(bools(b))));
        assertEquals(ScalarType.Bool, bools(b).scalar_type().intern());
        assertEquals(0, floats().numel());
    }
}
