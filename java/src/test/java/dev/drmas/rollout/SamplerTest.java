// SamplerTest.java — the sampler against hand-made distributions: which tokens top-k and top-p
// keep, greedy = argmax, log-probs = log-softmax, seeded reproducibility independent of the
// batch a request is in, and sampled frequencies that follow the filtered distribution.
package dev.drmas.rollout;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.model.Tensors;
import java.util.Set;
import java.util.TreeSet;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class SamplerTest {
    // probabilities 0.05 .. 0.5 placed at scattered token ids, in a vocabulary of 8 with two
    // impossible tokens (-inf logits)
    static final double[] PROBS = {0.1, 0.0, 0.5, 0.05, 0.15, 0.0, 0.2, 0.0};

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    static Tensor logits(double[]... rows) {
        int v = rows[0].length;
        double[] flat = new double[rows.length * v];
        for (int b = 0; b < rows.length; b++)
            for (int j = 0; j < v; j++) flat[b * v + j] = Math.log(rows[b][j]);  // log 0 = -inf
        return Tensors.doubles(flat).reshape(rows.length, v).to(torch.ScalarType.Float);
    }

    static Set<Integer> kept(double[] probs, double temperature, int topK, double topP) {
        try (PointerScope scope = new PointerScope()) {
            Tensor scaled = logits(probs).div(new org.bytedeco.pytorch.Scalar(temperature));
            Tensor keep = Sampler.keepMask(scaled, topK, topP);
            long[] k = Tensors.toLongs(keep);
            Set<Integer> s = new TreeSet<>();
            for (int j = 0; j < k.length; j++) if (k[j] != 0) s.add(j);
            return s;
        }
    }

    @Test
    void topKKeepsTheKLargest() {
        assertEquals(Set.of(2, 6), kept(PROBS, 1.0, 2, 1.0));
        assertEquals(Set.of(2), kept(PROBS, 1.0, 1, 1.0));
        assertEquals(Set.of(0, 2, 4, 6), kept(PROBS, 1.0, 4, 1.0));
    }

    @Test
    void topKKeepsTiesWithTheKth() {
        double[] p = {0.3, 0.1, 0.3, 0.3};
        assertEquals(Set.of(0, 2, 3), kept(p, 1.0, 2, 1.0));
    }

    @Test
    void topPKeepsTheSmallestPrefixReachingP() {
        // sorted: 0.5 (2), 0.2 (6), 0.15 (4), 0.1 (0), 0.05 (3)
        assertEquals(Set.of(2), kept(PROBS, 1.0, 0, 0.45));        // 0.5 alone reaches 0.45
        assertEquals(Set.of(2), kept(PROBS, 1.0, 0, 0.5));         // ... and exactly 0.5
        assertEquals(Set.of(2, 6), kept(PROBS, 1.0, 0, 0.6));
        assertEquals(Set.of(2, 6, 4), kept(PROBS, 1.0, 0, 0.8));
        assertEquals(Set.of(0, 2, 4, 6), kept(PROBS, 1.0, 0, 0.9));
        assertEquals(Set.of(0, 2, 3, 4, 6), kept(PROBS, 1.0, 0, 0.99));
    }

    @Test
    void topPActsAfterTopKOnTheRenormalisedDistribution() {
        // top-2 leaves 0.5 and 0.2, i.e. 5/7 and 2/7: top-p 0.7 needs only the first
        assertEquals(Set.of(2), kept(PROBS, 1.0, 2, 0.7));
        assertEquals(Set.of(2, 6), kept(PROBS, 1.0, 2, 0.75));
    }

    @Test
    void temperatureChangesTheNucleus() {
        // at temperature 1 the mass before each sorted token is 0, 0.5, 0.7: top-p 0.6 keeps 2.
        // At temperature 2 the probabilities flatten to sqrt(p)/Σ sqrt(p) = 0.340, 0.215, 0.186,
        // 0.152, 0.107, so the mass before the third token is 0.555 < 0.6: three are kept.
        double z = 0;
        for (double p : PROBS) z += Math.sqrt(p);
        double beforeThird = (Math.sqrt(0.5) + Math.sqrt(0.2)) / z;
        assertEquals(0.555, beforeThird, 1e-3);
        assertEquals(Set.of(2, 6), kept(PROBS, 1.0, 0, 0.6));
        assertEquals(Set.of(2, 6, 4), kept(PROBS, 2.0, 0, 0.6));
    }

    @Test
    void greedyIsArgmaxWithLogSoftmax() {
        try (PointerScope scope = new PointerScope()) {
            double[] other = {0.3, 0.4, 0.1, 0.05, 0.05, 0.05, 0.05, 0.0};
            Sampler.Draw d = Sampler.sample(logits(PROBS, other), SamplingParams.GREEDY, new double[] {0.9, 0.1});
            assertArrayEquals(new long[] {2, 1}, d.tokens());
            assertEquals(Math.log(0.5), d.logprobs()[0], 1e-6);
            assertEquals(Math.log(0.4), d.logprobs()[1], 1e-6);
        }
    }

    @Test
    void inverseCdfPicksTheExpectedTokenAndLogProb() {
        // temperature 1, no filter: CDF over ids 0..7 is 0.1, 0.1, 0.6, 0.65, 0.8, 0.8, 1.0, 1.0
        double[] u = {0.0, 0.05, 0.1, 0.59, 0.62, 0.7, 0.99, 0.999999};
        long[] want = {0, 0, 2, 2, 3, 4, 6, 6};
        try (PointerScope scope = new PointerScope()) {
            double[][] rows = new double[u.length][];
            java.util.Arrays.fill(rows, PROBS);
            Sampler.Draw d = Sampler.sample(logits(rows), SamplingParams.temperature(1.0), u);
            assertArrayEquals(want, d.tokens());
            for (int b = 0; b < u.length; b++) assertEquals(Math.log(PROBS[(int) want[b]]), d.logprobs()[b], 1e-5);
        }
    }

    @Test
    void logProbIsOfTheScaledDistributionBeforeFiltering() {
        try (PointerScope scope = new PointerScope()) {
            Sampler.Draw d = Sampler.sample(logits(PROBS), new SamplingParams(2.0, 1, 1.0), new double[] {0.5});
            assertEquals(2, d.tokens()[0]);  // top-1 leaves only token 2
            double z = 0;
            for (double p : PROBS) z += Math.sqrt(p);
            assertEquals(Math.log(Math.sqrt(0.5) / z), d.logprobs()[0], 1e-5);
        }
    }

    @Test
    void frequenciesFollowTheFilteredDistribution() {
        // 20000 draws from the top-p 0.9 nucleus {0.5, 0.2, 0.15, 0.1} renormalised by 0.95;
        // the uniforms are fixed by their seed, so this test is deterministic
        int n = 20000;
        double[] u = new double[n];
        for (int i = 0; i < n; i++) u[i] = Sampler.uniform(42, i, 0);
        double[][] rows = new double[n][];
        java.util.Arrays.fill(rows, PROBS);
        long[] tok;
        try (PointerScope scope = new PointerScope()) {
            tok = Sampler.sample(logits(rows), new SamplingParams(1.0, 0, 0.9), u).tokens();
        }
        int[] count = new int[PROBS.length];
        for (long t : tok) count[(int) t]++;
        for (int j : new int[] {1, 3, 5, 7}) assertEquals(0, count[j], "token " + j + " is outside the nucleus");
        for (int j : new int[] {0, 2, 4, 6}) {
            double want = PROBS[j] / 0.95, got = count[j] / (double) n;
            // 4.5 standard deviations of a binomial proportion
            assertEquals(want, got, 4.5 * Math.sqrt(want * (1 - want) / n), "token " + j);
        }
    }

    @Test
    void drawsDependOnlyOnSeedRequestAndStep() {
        assertEquals(Sampler.uniform(7, 3, 11), Sampler.uniform(7, 3, 11));
        assertTrue(Sampler.uniform(7, 3, 11) != Sampler.uniform(7, 3, 12));
        assertTrue(Sampler.uniform(7, 3, 11) != Sampler.uniform(7, 4, 11));
        assertTrue(Sampler.uniform(7, 3, 11) != Sampler.uniform(8, 3, 11));
        // a request alone and the same request inside a batch draw the same token
        double[] other = {0.05, 0.05, 0.05, 0.05, 0.3, 0.2, 0.2, 0.1};
        double ur = Sampler.uniform(1, 5, 2);
        try (PointerScope scope = new PointerScope()) {
            long alone = Sampler.sample(logits(PROBS), SamplingParams.temperature(0.8), new double[] {ur}).tokens()[0];
            long[] batch = Sampler.sample(logits(other, PROBS, other), SamplingParams.temperature(0.8),
                    new double[] {Sampler.uniform(1, 4, 2), ur, Sampler.uniform(1, 6, 2)}).tokens();
            assertEquals(alone, batch[1]);
        }
    }

    /**
     * libdrmas's sampler (CPU float32 logits, the default) against LibTorch's ops (what runs on GPUs
     * and other dtypes): the same tokens, log-probs within float rounding, over temperatures, top-k,
     * top-p, -inf logits, exact ties and awkward vocabulary sizes, on a strided view as the engines pass.
     */
    @Test
    void theNativeSamplerDrawsLibTorchsTokens() {
        java.util.SplittableRandom rng = new java.util.SplittableRandom(17);
        int draws = 0;
        for (int vocab : new int[] {1, 2, 7, 61, 513}) {
            for (SamplingParams p : new SamplingParams[] {SamplingParams.GREEDY, SamplingParams.temperature(1.0),
                    SamplingParams.temperature(0.6), new SamplingParams(1.7, 5, 1.0), new SamplingParams(0.8, 0, 0.9),
                    new SamplingParams(1.0, 3, 0.3), new SamplingParams(1.0, vocab + 4, 0.95)}) {
                int rows = 37;
                double[] flat = new double[rows * (vocab + 3)];
                for (int i = 0; i < flat.length; i++) {
                    double x = 3 * rng.nextGaussian();
                    flat[i] = rng.nextInt(11) == 0 ? Double.NEGATIVE_INFINITY : rng.nextInt(7) == 0 ? Math.rint(x) : x;
                }
                for (int r = 0; r < rows; r++) flat[r * (vocab + 3)] = 0.5;  // at least one finite logit a row
                double[] u = new double[rows];
                for (int r = 0; r < rows; r++) u[r] = Sampler.uniform(5, r, vocab);
                try (PointerScope scope = new PointerScope()) {
                    // rows vocab + 3 floats apart, as a narrowed view of wider logits
                    Tensor wide = Tensors.doubles(flat).reshape(rows, vocab + 3).to(torch.ScalarType.Float), view = wide.narrow(1, 0, vocab);
                    Sampler.Draw nat = Sampler.sample(view, p, u);
                    Sampler.Draw ref = Sampler.sampleTorch(view, p, u);
                    assertArrayEquals(ref.tokens(), nat.tokens(), "tokens, vocab " + vocab + ", " + p);
                    for (int r = 0; r < rows; r++) {
                        assertEquals(ref.logprobs()[r], nat.logprobs()[r], 1e-5 + 1e-6 * Math.abs(ref.logprobs()[r]),
                                "log-prob, vocab " + vocab + ", " + p + ", row " + r);
                    }
                    draws += rows;
                }
            }
        }
        assertEquals(5 * 7 * 37, draws);
    }

    @Test
    void badArgumentsAreNamed() {
        assertThrows(IllegalArgumentException.class, () -> new SamplingParams(-1, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new SamplingParams(Double.NaN, 0, 1));
        assertThrows(IllegalArgumentException.class, () -> new SamplingParams(1, -2, 1));
        var e = assertThrows(IllegalArgumentException.class, () -> new SamplingParams(1, 0, 0));
        assertTrue(e.getMessage().contains("top_p"), e.getMessage());
        try (PointerScope scope = new PointerScope()) {
            var e2 = assertThrows(IllegalArgumentException.class,
                    () -> Sampler.sample(logits(PROBS), SamplingParams.temperature(1), new double[] {1.0}));
            assertTrue(e2.getMessage().contains("uniforms[0]"), e2.getMessage());
            var e3 = assertThrows(IllegalArgumentException.class,
                    () -> Sampler.sample(logits(PROBS, PROBS), SamplingParams.temperature(1), new double[] {0.1}));
            assertTrue(e3.getMessage().contains("one uniform per row"), e3.getMessage());
        }
    }

    @Test
    void tensorsMakesShapedLongsAndRejectsAShapeTheyDoNotFill() {
        try (PointerScope scope = new PointerScope()) {
            Tensor t = Tensors.longs(new long[] {1, 2, 3, 4, 5, 6}, 2, 3);
            assertEquals(2, t.size(0));
            assertEquals(3, t.size(1));
            assertEquals(6L, t.select(0, 1).select(0, 2).item_long());
            assertArrayEquals(new long[] {1, 2, 3, 4, 5, 6}, Tensors.toLongs(t));
            var e = assertThrows(IllegalArgumentException.class, () -> Tensors.longs(new long[] {1, 2, 3}, 2, 2));
            assertEquals(0.5, Tensors.doubles(new double[] {0.25, 0.5}, 2, 1).select(0, 1).item_double());
            assertThrows(IllegalArgumentException.class, () -> Tensors.doubles(new double[] {1}, 2, 1));
            assertTrue(e.getMessage().contains("3 values do not fill shape [2, 2]"), e.getMessage());
        }
    }
}
