// HandComputedExamplesTest.java — tiny batches whose advantages were worked out by hand
// (intermediate μ/σ in the comments), checked against both ReferenceKernels and the native
// Advantages, so that the oracle itself is pinned to ARCHITECTURE §5.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class HandComputedExamplesTest {
    static final double TOL = 1e-5;

    /*
     * Example 1: three groups, two agents, six trajectories, eleven rows (not sorted by uid).
     *
     *   row uid traj agent score
     *    0   0   0    0    1.0
     *    1   0   0    1    0.0
     *    2   1   3    0    2.0
     *    3   0   0    0    0.5    agent 0 acts twice in trajectory 0
     *    4   0   1    0    0.0
     *    5   1   3    1    6.0    the only row of agent (1,1): a single agent segment
     *    6   0   1    1    1.0
     *    7   2   5    0    1.0    uid 2 has one trajectory of two rows: agents (2,0), (2,1)
     *    8   0   2    0    0.25   trajectory 2 has no agent-1 row
     *    9   1   4    0    5.0
     *   10   2   5    1    3.0
     *
     * Trajectory scores: S0 = (1 + 0 + 0.5)/3 = 0.5, S1 = 0.5, S2 = 0.25, S3 = 4, S4 = 5, S5 = 2.
     *
     * Unbiased (n − 1) statistics:
     *   group, trajectory pooling: u0 {0.5, 0.5, 0.25}: μ = 0.416667, σ = 0.144338
     *                              u1 {4, 5}: μ = 4.5, σ = 0.707107;  u2 {2}: single (μ 2, σ 0)
     *   group, row pooling:        u0 {1,0,0.5,0,1,0.25}: μ = 0.458333, σ = 0.458712
     *                              u1 {2,6,5}: μ = 4.333333, σ = 2.081666;  u2 {1,3}: μ = 2, σ = 1.414214
     *   agents: (0,0) {1,0.5,0,0.25}: μ = 0.4375, σ = 0.426956;  (0,1) {0,1}: μ = 0.5, σ = 0.707107
     *           (1,0) {2,5}: μ = 3.5, σ = 2.121320;  (1,1) {6}, (2,0) {1}, (2,1) {3}: single
     * Biased (n) std: σ_u0 = 0.117851 (traj), σ_(0,0) = 0.369755, σ_(0,1) = 0.5, σ_(1,0) = 1.5.
     * eps = 1e-6 throughout, so e.g. 1/(1 + eps) = 0.999999.
     */
    static final float[] S = {1.0f, 0.0f, 2.0f, 0.5f, 0.0f, 6.0f, 1.0f, 1.0f, 0.25f, 5.0f, 3.0f};
    static final int[] U = {0, 0, 1, 0, 0, 1, 0, 2, 0, 1, 2};
    static final int[] T = {0, 0, 3, 0, 1, 3, 1, 5, 2, 4, 5};
    static final int[] K = {0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 1};

    static NormConfig cfg(NormMode m, GlobalPooling p, SingletonPolicy s) {
        return NormConfig.of(m).withGlobalPooling(p).withSingleton(s);
    }

    static Stream<Arguments> example1Cases() {
        GlobalPooling TR = GlobalPooling.TRAJECTORIES, RO = GlobalPooling.ROWS;
        SingletonPolicy FB = SingletonPolicy.FALLBACK, ZE = SingletonPolicy.ZERO, RAW = SingletonPolicy.RAW;
        return Stream.of(
                // GRPO, trajectories: A = (S_t − μ_u)/(σ_u + ε); row 0: (0.5 − 0.416667)/0.144338 = 0.577346;
                // row 2: (4 − 4.5)/0.707107 = −0.707106; row 8: (0.25 − 0.416667)/0.144338 = −1.154693;
                // u2 is a single trajectory: its group is used and single → 0.
                Arguments.of("grpo/trajectories/fallback", cfg(NormMode.GRPO, TR, FB), new float[] {
                        0.5773463f, 0.5773463f, -0.7071058f, 0.5773463f, 0.5773463f, -0.7071058f, 0.5773463f,
                        0f, -1.154693f, 0.7071058f, 0f}),
                // Dr. MAS: A = (s − μ_uk)/(σ_uk + ε); row 0: (1 − 0.4375)/0.426956 = 1.317462;
                // row 5: agent (1,1) single → group u1: (6 − 4.5)/0.707107 = 2.121317;
                // rows 7, 10: single agent → group u2, which is single → 0.
                Arguments.of("drmas/trajectories/fallback", cfg(NormMode.DRMAS, TR, FB), new float[] {
                        1.317462f, -0.7071058f, -0.7071064f, 0.1463847f, -1.024693f, 2.121317f, 0.7071058f,
                        0f, -0.439154f, 0.7071064f, 0f}),
                // agent-mean: A = (s − μ_uk)/(σ_u + ε); row 0: (1 − 0.4375)/0.144338 = 3.897087;
                // row 2: (2 − 3.5)/0.707107 = −2.121317; row 5: mean falls back to μ_u1 = 4.5 → 2.121317.
                Arguments.of("agent-mean/trajectories/fallback", cfg(NormMode.AGENT_MEAN, TR, FB), new float[] {
                        3.897087f, -3.464078f, -2.121317f, 0.4330097f, -3.031068f, 2.121317f, 3.464078f,
                        0f, -1.299029f, 2.121317f, 0f}),
                // agent-std: A = (s − μ_u)/(σ_uk + ε); row 0: (1 − 0.416667)/0.426956 = 1.366257;
                // row 9: (5 − 4.5)/2.121320 = 0.235702; row 5: std falls back to σ_u1 → 2.121317.
                Arguments.of("agent-std/trajectories/fallback", cfg(NormMode.AGENT_STD, TR, FB), new float[] {
                        1.366257f, -0.5892548f, -1.178511f, 0.1951796f, -0.9758978f, 2.121317f, 0.8249567f,
                        0f, -0.3903591f, 0.2357021f, 0f}),
                // GRPO, rows: A = (s − μ_u)/(σ_u + ε) over rows; row 0: (1 − 0.458333)/0.458712 = 1.180840;
                // row 7: (1 − 2)/1.414214 = −0.707106.
                Arguments.of("grpo/rows/fallback", cfg(NormMode.GRPO, RO, FB), new float[] {
                        1.18084f, -0.9991724f, -1.120897f, 0.09083385f, -0.9991724f, 0.8006404f, 1.18084f,
                        -0.7071063f, -0.4541693f, 0.3202562f, 0.7071063f}),
                // Dr. MAS, rows: as with trajectories except the fallbacks: row 5 → (6 − 4.333333)/2.081666
                // = 0.800640; rows 7, 10 → group u2 (rows): ∓0.707106.
                Arguments.of("drmas/rows/fallback", cfg(NormMode.DRMAS, RO, FB), new float[] {
                        1.317462f, -0.7071058f, -0.7071064f, 0.1463847f, -1.024693f, 0.8006404f, 0.7071058f,
                        -0.7071063f, -0.439154f, 0.7071064f, 0.7071063f}),
                // agent-mean, rows: row 0: (1 − 0.4375)/0.458712 = 1.226257.
                Arguments.of("agent-mean/rows/fallback", cfg(NormMode.AGENT_MEAN, RO, FB), new float[] {
                        1.226257f, -1.090006f, -0.7205763f, 0.1362508f, -0.9537555f, 0.8006404f, 1.090006f,
                        -0.7071063f, -0.4087523f, 0.7205763f, 0.7071063f}),
                // agent-std, rows: row 0: (1 − 0.458333)/0.426956 = 1.268667.
                Arguments.of("agent-std/rows/fallback", cfg(NormMode.AGENT_STD, RO, FB), new float[] {
                        1.268667f, -0.6481803f, -1.099943f, 0.09758978f, -1.073488f, 0.8006404f, 0.7660313f,
                        -0.7071063f, -0.4879489f, 0.3142695f, 0.7071063f}),
                // GRPO raw: the single group u2 has mean 0 and std 1: S5/(1 + ε) = 2/(1 + ε) = 1.999998.
                Arguments.of("grpo/trajectories/raw", cfg(NormMode.GRPO, TR, RAW), new float[] {
                        0.5773463f, 0.5773463f, -0.7071058f, 0.5773463f, 0.5773463f, -0.7071058f, 0.5773463f,
                        1.999998f, -1.154693f, 0.7071058f, 1.999998f}),
                // Dr. MAS raw: single agents give s/(1 + ε): 6 → 5.999994, 1 → 0.999999, 3 → 2.999997.
                Arguments.of("drmas/trajectories/raw", cfg(NormMode.DRMAS, TR, RAW), new float[] {
                        1.317462f, -0.7071058f, -0.7071064f, 0.1463847f, -1.024693f, 5.999994f, 0.7071058f,
                        0.999999f, -0.439154f, 0.7071064f, 2.999997f}),
                // Dr. MAS zero: single agent segments → 0 (rows 5, 7, 10).
                Arguments.of("drmas/trajectories/zero", cfg(NormMode.DRMAS, TR, ZE), new float[] {
                        1.317462f, -0.7071058f, -0.7071064f, 0.1463847f, -1.024693f, 0f, 0.7071058f,
                        0f, -0.439154f, 0.7071064f, 0f}),
                // agent-mean zero: row 5 (single agent mean) and u2 (single group std) → 0.
                Arguments.of("agent-mean/trajectories/zero", cfg(NormMode.AGENT_MEAN, TR, ZE), new float[] {
                        3.897087f, -3.464078f, -2.121317f, 0.4330097f, -3.031068f, 0f, 3.464078f,
                        0f, -1.299029f, 2.121317f, 0f}),
                // agent-std zero: row 5 (single agent std) and u2 → 0.
                Arguments.of("agent-std/trajectories/zero", cfg(NormMode.AGENT_STD, TR, ZE), new float[] {
                        1.366257f, -0.5892548f, -1.178511f, 0.1951796f, -0.9758978f, 0f, 0.8249567f,
                        0f, -0.3903591f, 0.2357021f, 0f}),
                // agent-std, rows, raw: row 5: (6 − 4.333333)/(1 + ε) = 1.666665; row 7: (1 − 2)/(1 + ε).
                Arguments.of("agent-std/rows/raw", cfg(NormMode.AGENT_STD, RO, RAW), new float[] {
                        1.268667f, -0.6481803f, -1.099943f, 0.09758978f, -1.073488f, 1.666665f, 0.7660313f,
                        -0.999999f, -0.4879489f, 0.3142695f, 0.999999f}),
                // Dr. MAS, biased std: row 0: (1 − 0.4375)/0.369755 = 1.521274; row 1: (0 − 0.5)/0.5 = −0.999998;
                // row 5: group u1 std (biased) 0.5: (6 − 4.5)/0.5 = 2.999994.
                Arguments.of("drmas/trajectories/fallback/biased",
                        NormConfig.of(NormMode.DRMAS).withUnbiased(false), new float[] {
                        1.521274f, -0.999998f, -0.9999993f, 0.1690304f, -1.183213f, 2.999994f, 0.999998f,
                        0f, -0.5070912f, 0.9999993f, 0f}),
                // Dr. MAS without scaling: A = s − μ_uk; row 0: 1 − 0.4375 = 0.5625; row 5: 6 − 4.5 = 1.5.
                Arguments.of("drmas/trajectories/fallback/no-scale",
                        NormConfig.of(NormMode.DRMAS).withScaleByStd(false), new float[] {
                        0.5625f, -0.5f, -1.5f, 0.0625f, -0.4375f, 1.5f, 0.5f, 0f, -0.1875f, 1.5f, 0f}),
                // A mode in no table, only a descriptor (AdvantagesTest.GROUP_MEAN_AGENT_STD_TRAJ):
                // A = (S_t − μ_u)/(σ_uk + ε); row 0: (0.5 − 0.416667)/0.426956 = 0.195180; row 1:
                // 0.083333/0.707107 = 0.117851; row 5: agent (1,1) single → σ_u1: (4 − 4.5)/0.707107;
                // u2: its group (the mean) is single → 0.
                Arguments.of("group-mean/agent-std/traj/trajectories/fallback",
                        NormConfig.of(AdvantagesTest.GROUP_MEAN_AGENT_STD_TRAJ), new float[] {
                        0.1951796f, 0.1178509f, -0.2357021f, 0.1951796f, 0.1951796f, -0.7071058f, 0.1178509f,
                        0f, -0.3903591f, 0.2357021f, 0f}),
                // the same, raw: row 5's single agent std is 1: (4 − 4.5)/(1 + ε); u2's single group mean
                // is 0 and its single agents' std 1: S5/(1 + ε) = 1.999998.
                Arguments.of("group-mean/agent-std/traj/trajectories/raw",
                        NormConfig.of(AdvantagesTest.GROUP_MEAN_AGENT_STD_TRAJ).withSingleton(RAW), new float[] {
                        0.1951796f, 0.1178509f, -0.2357021f, 0.1951796f, 0.1951796f, -0.4999995f, 0.1178509f,
                        1.999998f, -0.3903591f, 0.2357021f, 1.999998f}),
                // agent-mean zero without scaling: the group std is not used, so u2 is zeroed only because
                // its agent segments (the mean) are single; row 5 likewise.
                Arguments.of("agent-mean/trajectories/zero/no-scale",
                        cfg(NormMode.AGENT_MEAN, TR, ZE).withScaleByStd(false), new float[] {
                        0.5625f, -0.5f, -1.5f, 0.0625f, -0.4375f, 0f, 0.5f, 0f, -0.1875f, 1.5f, 0f}));
    }

    /*
     * Example 2: one group with a single trajectory in which agent 0 acts twice.
     *   row 0: agent 0, 1.0;  row 1: agent 1, 2.0;  row 2: agent 0, 3.0
     * S0 = 2 (single group under trajectory pooling); rows pooling: μ_u = 2, σ_u = 1.
     * Agent (0,0) {1, 3}: μ = 2, σ = 1.414214; agent (0,1) {2}: single.
     */
    static final float[] S2 = {1f, 2f, 3f};
    static final int[] U2 = {0, 0, 0}, T2 = {0, 0, 0}, K2 = {0, 1, 0};

    static Stream<Arguments> example2Cases() {
        GlobalPooling TR = GlobalPooling.TRAJECTORIES, RO = GlobalPooling.ROWS;
        SingletonPolicy FB = SingletonPolicy.FALLBACK, ZE = SingletonPolicy.ZERO, RAW = SingletonPolicy.RAW;
        return Stream.of(
                // the group std is used and single → every row 0 (the agent-0 mean is fine, but not enough)
                Arguments.of("agent-mean/trajectories/fallback", cfg(NormMode.AGENT_MEAN, TR, FB), new float[] {0f, 0f, 0f}),
                // without scaling the group std is unused: rows 0, 2: s − 2; row 1 falls back to the single group → 0
                Arguments.of("agent-mean/trajectories/fallback/no-scale",
                        cfg(NormMode.AGENT_MEAN, TR, FB).withScaleByStd(false), new float[] {-1f, 0f, 1f}),
                // Dr. MAS: rows 0, 2: ∓1/1.414214 = ∓0.707106; row 1 → group (single) → 0
                Arguments.of("drmas/trajectories/fallback", cfg(NormMode.DRMAS, TR, FB),
                        new float[] {-0.7071063f, 0f, 0.7071063f}),
                Arguments.of("drmas/trajectories/zero", cfg(NormMode.DRMAS, TR, ZE),
                        new float[] {-0.7071063f, 0f, 0.7071063f}),
                // raw: group std 1; rows 0, 2: (s − 2)/(1 + ε); row 1: mean 0 → 2/(1 + ε)
                Arguments.of("agent-mean/trajectories/raw", cfg(NormMode.AGENT_MEAN, TR, RAW),
                        new float[] {-0.999999f, 1.999998f, 0.999999f}),
                // rows pooling: μ_u = 2, σ_u = 1 → (s − 2)/(1 + ε)
                Arguments.of("grpo/rows/fallback", cfg(NormMode.GRPO, RO, FB), new float[] {-0.999999f, 0f, 0.999999f}),
                // raw GRPO, trajectories: S0/(1 + ε) for every row
                Arguments.of("grpo/trajectories/raw", cfg(NormMode.GRPO, TR, RAW),
                        new float[] {1.999998f, 1.999998f, 1.999998f}));
    }

    static void assertExample(String name, float[] expected, float[] actual) {
        Tolerance.assertClose(name, actual, expected, TOL, 0);
        for (int i = 0; i < expected.length; i++) {
            if (expected[i] == 0f) assertEquals(0f, actual[i], name + ": row " + i + " must be exactly 0");
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("example1Cases")
    void example1(String name, NormConfig c, float[] expected) {
        assertExample("reference " + name, expected, ReferenceKernels.advantages(c, S, U, T, K, 3, 6, 2));
        assertExample("native " + name, expected, Advantages.compute(c, S, U, T, K, 3, 6, 2));
        if (c.globalPooling() == GlobalPooling.ROWS) {
            assertExample("native, traj null, " + name, expected, Advantages.compute(c, S, U, null, K, 3, 0, 2));
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("example2Cases")
    void example2(String name, NormConfig c, float[] expected) {
        assertExample("reference " + name, expected, ReferenceKernels.advantages(c, S2, U2, T2, K2, 1, 1, 2));
        assertExample("native " + name, expected, Advantages.compute(c, S2, U2, T2, K2, 1, 1, 2));
    }

    /*
     * Diagnostics of example 1, Dr. MAS with trajectory pooling (unbiased). Segment j = u·2 + k.
     * Inflation (σ_uk² + (μ_uk − μ_u)²)/σ_u² with population variances (M2/n) whatever ddof:
     *   (0,0): (0.546875/4 + (1/48)²)/((1/24)/3) = (35/256 + 1/2304)·72 = 9.875
     *   (0,1): (0.5/2 + (1/12)²)·72 = 18.5
     *   (1,0): (4.5/2 + 1)/(0.5/2) = 13;  (1,1): (0 + 1.5²)/0.25 = 9;  u2: σ_u = 0 → NaN
     */
    @Test
    void example1Diagnostics() {
        NormConfig c = NormConfig.of(NormMode.DRMAS);
        double nan = Double.NaN;
        double[] expected = {
                /* agent count */ 4, 2, 2, 1, 1, 1,
                /* agent mean  */ 0.4375, 0.5, 3.5, 6, 1, 3,
                /* agent M2    */ 0.546875, 0.5, 4.5, 0, 0, 0,
                /* agent std   */ Math.sqrt(0.546875 / 3), Math.sqrt(0.5), Math.sqrt(4.5), 0, 0, 0,
                /* group count */ 3, 3, 2, 2, 1, 1,
                /* group mean  */ 1.25 / 3, 1.25 / 3, 4.5, 4.5, 2, 2,
                /* group M2    */ 1.0 / 24, 1.0 / 24, 0.5, 0.5, 0, 0,
                /* group std   */ Math.sqrt(1.0 / 48), Math.sqrt(1.0 / 48), Math.sqrt(0.5), Math.sqrt(0.5), 0, 0,
                /* inflation   */ 9.875, 18.5, 13, 9, nan, nan};
        Tolerance.assertClose("reference diagnostics", ReferenceKernels.diagnostics(c, S, U, T, K, 3, 6, 2),
                expected, 1e-12, 1e-12);
        Tolerance.assertClose("native diagnostics",
                Advantages.computeWithDiagnostics(c, S, U, T, K, 3, 6, 2).diagnostics(), expected, 1e-12, 1e-12);
    }
}
