// AdvantagesTest.java — the native advantage normalisation (Advantages, CPU backend) against
// ReferenceKernels on random rollouts: every mode × pooling × singleton × ddof × scale, n = 1,
// prime sizes, empty segments, one huge group, 10^6 rows, shuffled rows, exact zeros.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

class AdvantagesTest {
    static final double ATOL = 1e-5, RTOL = 1e-5;
    static final double STATS_ATOL = 1e-9, STATS_RTOL = 1e-9;

    // ------------------------------------------------------------------ test data

    /** One batch of rows; traj may be null (rows pooling only). */
    record Batch(float[] scores, int[] uid, int[] traj, int[] agent, int numUids, int numTrajs, int numAgents) {
        int n() {
            return scores.length;
        }

        /** The same rows in a random order. */
        Batch shuffled(long seed) {
            Random r = new Random(seed);
            int n = n();
            int[] perm = new int[n];
            for (int i = 0; i < n; i++) perm[i] = i;
            for (int i = n - 1; i > 0; i--) {
                int j = r.nextInt(i + 1);
                int tmp = perm[i];
                perm[i] = perm[j];
                perm[j] = tmp;
            }
            float[] s = new float[n];
            int[] u = new int[n], t = traj == null ? null : new int[n], k = new int[n];
            for (int i = 0; i < n; i++) {
                s[i] = scores[perm[i]];
                u[i] = uid[perm[i]];
                if (t != null) t[i] = traj[perm[i]];
                k[i] = agent[perm[i]];
            }
            return new Batch(s, u, t, k, numUids, numTrajs, numAgents);
        }

        Batch withoutTraj() {
            return new Batch(scores, uid, null, agent, numUids, 0, numAgents);
        }
    }

    enum Scores { CONTINUOUS, BINARY_PER_TRAJ, DISCRETE, MIXED }

    /**
     * n rows of rollouts: groups of 1..maxTrajs trajectories of 1..maxTurns turns, each turn by
     * a random agent (so agents interleave and act several times per trajectory). With gaps,
     * some uid and trajectory ids have no rows and the last agent id is never used.
     */
    static Batch rollouts(long seed, int n, int maxTrajs, int numAgents, int maxTurns, Scores kind, boolean gaps) {
        Random r = new Random(seed);
        float[] s = new float[n];
        int[] u = new int[n], t = new int[n], k = new int[n];
        int rows = 0, uidId = 0, trajId = 0;
        int agentChoices = gaps && numAgents > 1 ? numAgents - 1 : numAgents;
        Scores[] kinds = {Scores.CONTINUOUS, Scores.BINARY_PER_TRAJ, Scores.DISCRETE};
        float[] discrete = {0f, 0.5f, 1f};
        while (rows < n) {
            if (gaps && r.nextInt(4) == 0) uidId++; // an empty group
            Scores uk = kind == Scores.MIXED ? kinds[r.nextInt(3)] : kind;
            int nt = 1 + r.nextInt(maxTrajs);
            for (int j = 0; j < nt && rows < n; j++) {
                if (gaps && r.nextInt(6) == 0) trajId++; // a trajectory id without rows
                int turns = 1 + r.nextInt(maxTurns);
                float reward = r.nextBoolean() ? 1f : 0f;
                for (int turn = 0; turn < turns && rows < n; turn++) {
                    u[rows] = uidId;
                    t[rows] = trajId;
                    k[rows] = r.nextInt(agentChoices);
                    s[rows] = switch (uk) {
                        case CONTINUOUS -> (float) r.nextGaussian();
                        case BINARY_PER_TRAJ -> reward;
                        case DISCRETE -> discrete[r.nextInt(3)];
                        case MIXED -> throw new AssertionError();
                    };
                    rows++;
                }
                trajId++;
            }
            uidId++;
        }
        return new Batch(s, u, t, k, uidId + (gaps ? 2 : 0), trajId + (gaps ? 3 : 0), numAgents);
    }

    static Stream<NormConfig> allConfigs() {
        List<NormConfig> out = new ArrayList<>();
        for (NormMode m : NormMode.values()) {
            for (GlobalPooling p : GlobalPooling.values()) {
                for (SingletonPolicy s : SingletonPolicy.values()) {
                    for (boolean unbiased : new boolean[] {true, false}) {
                        for (boolean scale : new boolean[] {true, false}) {
                            out.add(new NormConfig(m, p, s, unbiased, scale, NormConfig.DEFAULT_EPS));
                        }
                    }
                }
            }
        }
        return out.stream();
    }

    /** A mode in no table: its descriptor alone says what it means, and that is all the kernel is told. */
    record Descriptor(String configName, boolean agentMean, boolean agentStd, boolean trajectoryNumerator)
            implements AdvantageMode {
        @Override
        public String toString() {
            return configName;
        }
    }

    /** Group mean, agent std, trajectory numerator: (S_t − μ_u)/(σ_uk + ε). */
    static final AdvantageMode GROUP_MEAN_AGENT_STD_TRAJ = new Descriptor("group-mean/agent-std/traj", false, true, true);

    /** The four descriptors that NormMode does not name, under every pooling, singleton policy and scaling. */
    static Stream<NormConfig> descriptorsOutsideTheTable() {
        List<NormConfig> out = new ArrayList<>();
        for (int d = 0; d < 8; d++) {
            boolean am = (d & 1) != 0, as = (d & 2) != 0, tn = (d & 4) != 0;
            boolean named = false;
            for (NormMode m : NormMode.values()) {
                named |= m.agentMean() == am && m.agentStd() == as && m.trajectoryNumerator() == tn;
            }
            if (named) continue;
            AdvantageMode mode = am == GROUP_MEAN_AGENT_STD_TRAJ.agentMean() && as == GROUP_MEAN_AGENT_STD_TRAJ.agentStd()
                    && tn == GROUP_MEAN_AGENT_STD_TRAJ.trajectoryNumerator() ? GROUP_MEAN_AGENT_STD_TRAJ
                    : new Descriptor("mean " + (am ? "agent" : "group") + "/std " + (as ? "agent" : "group")
                            + (tn ? "/traj" : "/row"), am, as, tn);
            for (GlobalPooling p : GlobalPooling.values()) {
                for (SingletonPolicy s : SingletonPolicy.values()) {
                    for (boolean scale : new boolean[] {true, false}) {
                        out.add(new NormConfig(mode, p, s, true, scale, NormConfig.DEFAULT_EPS));
                    }
                }
            }
        }
        if (out.size() != 4 * 12) throw new AssertionError("expected 4 descriptors outside NormMode, got " + out.size() / 12);
        return out.stream();
    }

    static Stream<NormConfig> defaultConfigs() {
        List<NormConfig> out = new ArrayList<>();
        for (NormMode m : NormMode.values()) {
            for (GlobalPooling p : GlobalPooling.values()) out.add(NormConfig.of(m).withGlobalPooling(p));
        }
        return out.stream();
    }

    // ------------------------------------------------------------------ comparison

    /** Native advantages and diagnostics vs the reference; returns the native advantages. */
    static float[] check(String what, NormConfig c, Batch b, boolean withDiagnostics) {
        float[] expected = ReferenceKernels.advantages(c, b.scores(), b.uid(), b.traj(), b.agent(),
                b.numUids(), b.numTrajs(), b.numAgents());
        float[] actual;
        if (withDiagnostics) {
            Advantages.Result r = Advantages.computeWithDiagnostics(c, b.scores(), b.uid(), b.traj(), b.agent(),
                    b.numUids(), b.numTrajs(), b.numAgents());
            double[] expDiag = ReferenceKernels.diagnostics(c, b.scores(), b.uid(), b.traj(), b.agent(),
                    b.numUids(), b.numTrajs(), b.numAgents());
            Tolerance.assertClose(what + " " + c + " diagnostics", r.diagnostics(), expDiag, STATS_ATOL, STATS_RTOL);
            actual = r.advantages();
            float[] plain = Advantages.compute(c, b.scores(), b.uid(), b.traj(), b.agent(),
                    b.numUids(), b.numTrajs(), b.numAgents());
            assertArrayEquals(actual, plain, what + " " + c + ": compute and computeWithDiagnostics differ");
        } else {
            actual = Advantages.compute(c, b.scores(), b.uid(), b.traj(), b.agent(),
                    b.numUids(), b.numTrajs(), b.numAgents());
        }
        Tolerance.assertClose(what + " " + c + " advantages", actual, expected, ATOL, RTOL);
        return actual;
    }

    // ------------------------------------------------------------------ tests

    @ParameterizedTest(name = "{0}")
    @MethodSource("allConfigs")
    void randomRolloutsEveryConfig(NormConfig c) {
        Batch b = rollouts(1234, 3001, 6, 3, 4, Scores.MIXED, true);
        check("mixed rollouts", c, b, true);
        check("shuffled rollouts", c, b.shuffled(99), true);
        if (c.globalPooling() == GlobalPooling.ROWS) check("rows pooling, traj null", c, b.withoutTraj(), true);
        // many single segments: one or two short trajectories per group
        check("sparse groups", c, rollouts(77, 499, 2, 4, 2, Scores.CONTINUOUS, true), true);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("descriptorsOutsideTheTable")
    void aModeDefinedOnlyByItsDescriptorMatchesTheReference(NormConfig c) {
        Batch b = rollouts(4321, 2003, 6, 3, 4, Scores.MIXED, true);
        check("mixed rollouts", c, b, true);
        check("shuffled rollouts", c, b.shuffled(5), true);
        if (c.globalPooling() == GlobalPooling.ROWS) check("rows pooling, traj null", c, b.withoutTraj(), true);
        check("sparse groups", c, rollouts(78, 499, 2, 4, 2, Scores.CONTINUOUS, true), true);
        for (int k = 1; k <= 5; k++) check(k + " agents", c, rollouts(90 + k, 617, 4, k, 3, Scores.MIXED, false), false);
    }

    @Test
    void theTrajectoryNumeratorReachesTheKernel() {
        // same segments as agent-std, but x = S_t: under trajectory pooling the advantages differ
        Batch b = rollouts(11, 997, 6, 2, 4, Scores.MIXED, false);
        float[] traj = check("traj numerator", NormConfig.of(GROUP_MEAN_AGENT_STD_TRAJ), b, false);
        float[] row = check("row numerator", NormConfig.of(NormMode.AGENT_STD), b, false);
        int differ = 0;
        for (int i = 0; i < traj.length; i++) differ += traj[i] != row[i] ? 1 : 0;
        assertTrue(differ > traj.length / 4, differ + " of " + traj.length + " rows differ");
        // under row pooling x_i = s_i either way
        float[] trajRows = check("traj numerator, rows", NormConfig.of(GROUP_MEAN_AGENT_STD_TRAJ)
                .withGlobalPooling(GlobalPooling.ROWS), b, false);
        float[] rowRows = check("row numerator, rows", NormConfig.of(NormMode.AGENT_STD).withGlobalPooling(GlobalPooling.ROWS), b, false);
        assertArrayEquals(rowRows, trajRows);
    }

    /**
     * The trainer's form for its own ids (drmas_advantage_trusted_f32): the reference's advantages
     * and diagnostics for sorted rows (its one-pass path) and shuffled ones (the checked path), and
     * with row pooling and no trajectory ids.
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("defaultConfigs")
    void ownIdsMatchTheReference(NormConfig c) {
        Batch sorted = rollouts(31, 1201, 5, 3, 4, Scores.MIXED, true);
        List<Batch> batches = new ArrayList<>(List.of(sorted, sorted.shuffled(32)));
        if (c.globalPooling() == GlobalPooling.ROWS) batches.add(sorted.withoutTraj());
        for (Batch b : batches) {
            Advantages.Result r = Advantages.computeWithDiagnosticsOwnIds(c, b.scores(), b.uid(), b.traj(), b.agent(),
                    b.numUids(), b.numTrajs(), b.numAgents());
            Tolerance.assertClose("own ids " + c + " advantages", r.advantages(), ReferenceKernels.advantages(c, b.scores(),
                    b.uid(), b.traj(), b.agent(), b.numUids(), b.numTrajs(), b.numAgents()), ATOL, RTOL);
            Tolerance.assertClose("own ids " + c + " diagnostics", r.diagnostics(), ReferenceKernels.diagnostics(c, b.scores(),
                    b.uid(), b.traj(), b.agent(), b.numUids(), b.numTrajs(), b.numAgents()), STATS_ATOL, STATS_RTOL);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("allConfigs")
    void singleRow(NormConfig c) {
        float v = 0.75f;
        Batch one = new Batch(new float[] {v}, new int[] {0}, new int[] {0}, new int[] {0}, 1, 1, 1);
        float[] a = check("n = 1", c, one, true);
        float expected = c.singleton() == SingletonPolicy.RAW ? (float) (c.scaleByStd() ? v / (1 + c.eps()) : v) : 0f;
        assertEquals(expected, a[0], "n = 1");
        // the same row among empty segments: uid 2 of 3, agent 1 of 2, trajectory 4 of 5
        Batch sparse = new Batch(new float[] {v}, new int[] {2}, new int[] {4}, new int[] {1}, 3, 5, 2);
        a = check("n = 1, empty segments", c, sparse, true);
        assertEquals(expected, a[0], "n = 1, empty segments");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("defaultConfigs")
    void primeSizes(NormConfig c) {
        check("1009 rows", c, rollouts(5, 1009, 5, 3, 5, Scores.MIXED, false), true);
        check("1009 rows with gaps", c, rollouts(6, 1009, 5, 3, 5, Scores.CONTINUOUS, true), true);
        check("65537 rows", c, rollouts(7, 65537, 8, 4, 6, Scores.MIXED, true).shuffled(8), true);
    }

    @Test
    void emptySegments() {
        // uids 0, 3 and 5 of 7 hold rows; agents 1 and 3 of 5; trajectories 2, 5, 6, 9 of 12
        float[] s = {0.3f, 1.5f, -2f, 0.25f, 4f, 1f, 0.5f, 0.75f, -1f, 2f};
        int[] u = {0, 0, 3, 0, 3, 5, 5, 0, 3, 5};
        int[] t = {2, 2, 5, 6, 5, 9, 9, 6, 5, 9};
        int[] k = {1, 3, 1, 1, 3, 3, 1, 3, 1, 1};
        Batch b = new Batch(s, u, t, k, 7, 12, 5);
        allConfigs().forEach(c -> {
            check("empty segments", c, b, true);
            double[] d = Advantages.computeWithDiagnostics(c, s, u, t, k, 7, 12, 5).diagnostics();
            int segs = 7 * 5;
            // an empty agent segment reports count 0 and NaN inflation
            assertEquals(0.0, d[AbiIndices.DIAG_AGENT_COUNT * segs + 1 * 5 + 0], "count of empty agent segment");
            assertTrue(Double.isNaN(d[AbiIndices.DIAG_INFLATION * segs + 1 * 5 + 0]), "inflation of empty agent segment");
        });
    }

    @Test
    void oneHugeGroup() {
        // every row in uid 0: 200003 rows, several thousand trajectories, 4 agents interleaved
        Batch b = rollouts(11, 200_003, Integer.MAX_VALUE / 2, 4, 60, Scores.CONTINUOUS, false);
        int[] u = new int[b.n()];
        Batch one = new Batch(b.scores(), u, b.traj(), b.agent(), 1, b.numTrajs(), b.numAgents());
        check("one huge group", NormConfig.of(NormMode.DRMAS), one, true);
        check("one huge group", NormConfig.of(NormMode.GRPO), one.shuffled(3), true);
        check("one huge group", NormConfig.of(NormMode.AGENT_STD).withGlobalPooling(GlobalPooling.ROWS), one, true);
    }

    @Test
    void millionRowsInTenThousandGroups() {
        // groups of 1..16 trajectories of 1..23 turns: about 100 rows per uid
        Batch b = rollouts(2024, 1_000_000, 16, 3, 23, Scores.MIXED, false);
        assertTrue(b.numUids() > 5_000 && b.numUids() < 20_000, "about 10^4 uids, got " + b.numUids());
        check("10^6 rows", NormConfig.of(NormMode.DRMAS), b, true);
        check("10^6 rows shuffled", NormConfig.of(NormMode.GRPO).withGlobalPooling(GlobalPooling.ROWS), b.shuffled(1), false);
    }

    @Test
    void interleavedAgentsAndRepeatedTurns() {
        // each trajectory: agents 0,1,0,1,2,0 (agent 0 acts three times); two uids of three trajectories
        int[] pattern = {0, 1, 0, 1, 2, 0};
        int trajs = 6;
        int n = trajs * pattern.length;
        float[] s = new float[n];
        int[] u = new int[n], t = new int[n], k = new int[n];
        Random r = new Random(5);
        for (int i = 0; i < n; i++) {
            t[i] = i / pattern.length;
            u[i] = t[i] / 3;
            k[i] = pattern[i % pattern.length];
            s[i] = (float) (r.nextGaussian() + k[i]);
        }
        Batch b = new Batch(s, u, t, k, 2, trajs, 3);
        allConfigs().forEach(c -> {
            check("interleaved", c, b, true);
            check("interleaved, shuffled", c, b.shuffled(17), true);
        });
    }

    static Stream<NormConfig> exactZeroConfigs() {
        return allConfigs();
    }

    /**
     * Constant segments give exactly 0: (a) uids whose rows all score v, (b) uids where agent k
     * always scores c_k in trajectories of two rows (so every S_t is the same double).
     */
    @ParameterizedTest(name = "{0}")
    @MethodSource("exactZeroConfigs")
    void constantSegmentsGiveExactZero(NormConfig c) {
        float[] constants = {0.1f, 1e-3f, -7.3f, 123456.7f, 0f, 1f / 3f};
        List<Float> s = new ArrayList<>();
        List<Integer> u = new ArrayList<>(), t = new ArrayList<>(), k = new ArrayList<>();
        List<Boolean> perAgent = new ArrayList<>();
        int uidId = 0, trajId = 0;
        for (float v : constants) {
            // (a): 7 trajectories of agents 0,1,0 and 1,0 alternately, all scoring v
            for (int j = 0; j < 7; j++, trajId++) {
                int[] agents = j % 2 == 0 ? new int[] {0, 1, 0} : new int[] {1, 0};
                for (int a : agents) {
                    s.add(v); u.add(uidId); t.add(trajId); k.add(a); perAgent.add(false);
                }
            }
            uidId++;
            // (b): 5 trajectories of (agent 0 scores v, agent 1 scores 2v + 1)
            for (int j = 0; j < 5; j++, trajId++) {
                s.add(v); u.add(uidId); t.add(trajId); k.add(0); perAgent.add(true);
                s.add(2 * v + 1); u.add(uidId); t.add(trajId); k.add(1); perAgent.add(true);
            }
            uidId++;
        }
        int n = s.size();
        float[] sc = new float[n];
        int[] ua = new int[n], ta = new int[n], ka = new int[n];
        for (int i = 0; i < n; i++) {
            sc[i] = s.get(i);
            ua[i] = u.get(i);
            ta[i] = t.get(i);
            ka[i] = k.get(i);
        }
        Batch b = new Batch(sc, ua, ta, ka, uidId, trajId, 2);
        for (Batch batch : List.of(b, b.shuffled(4))) {
            float[] a = check("constant segments", c, batch, true);
            for (int i = 0; i < n; i++) {
                boolean perAgentUid = batch.uid()[i] % 2 == 1;
                boolean exactZero;
                if (!perAgentUid) {
                    exactZero = true; // every segment is constant and there are no single segments
                } else {
                    AdvantageMode m = c.mode();
                    if (m.agentMean() && !m.trajectoryNumerator()) {
                        exactZero = true; // s_i − μ_uk = 0
                    } else if (!m.agentMean() && m.trajectoryNumerator()) {
                        exactZero = c.globalPooling() == GlobalPooling.TRAJECTORIES; // S_t − μ_u = 0
                    } else {
                        exactZero = false;
                    }
                }
                if (exactZero) {
                    assertEquals(0.0f, a[i], "row " + i + " (uid " + batch.uid()[i] + ", score " + batch.scores()[i]
                            + ") of a constant segment must give exactly 0 under " + c);
                }
            }
        }
    }

    @Test
    void otherEpsilons() {
        Batch b = rollouts(31, 2003, 5, 3, 4, Scores.MIXED, true);
        for (NormMode m : NormMode.values()) {
            check("eps 0 without scaling", NormConfig.of(m).withScaleByStd(false).withEps(0), b, true);
            check("eps 0.1", NormConfig.of(m).withEps(0.1), b, true);
            check("eps 1e-12", NormConfig.of(m).withEps(1e-12).withSingleton(SingletonPolicy.RAW), b, true);
        }
    }

    @Test
    void largeOffsetScores() {
        // scores near 1e4 with small spread: fp32 E[x²] − E[x]² would lose everything here
        Batch b = rollouts(41, 4001, 6, 3, 5, Scores.CONTINUOUS, false);
        float[] s = b.scores().clone();
        for (int i = 0; i < s.length; i++) s[i] = 1e4f + s[i] * 0.01f;
        Batch off = new Batch(s, b.uid(), b.traj(), b.agent(), b.numUids(), b.numTrajs(), b.numAgents());
        defaultConfigs().forEach(c -> check("offset 1e4", c, off, true));
    }
    /** Diagnostics past a Java array (uids x agents x DIAG_FIELDS) are an IllegalArgumentException naming the counts, not "integer overflow". */
    @Test
    void diagnosticsPastAJavaArrayAreAnIllegalArgumentNamingTheCounts() {
        IllegalArgumentException e = org.junit.jupiter.api.Assertions.assertThrows(IllegalArgumentException.class,
                () -> Advantages.computeWithDiagnostics(NormConfig.of(NormMode.DRMAS), new float[1], new int[1], new int[1], new int[1],
                        1 << 20, 1, 1 << 20));
        assertTrue(e.getMessage().startsWith("diagnostics: 1048576 uids x 1048576 agents x " + AbiIndices.DIAG_FIELDS
                + " values are more than a Java array holds"), e.getMessage());
    }
}
