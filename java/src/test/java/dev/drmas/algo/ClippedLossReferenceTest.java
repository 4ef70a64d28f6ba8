// ClippedLossReferenceTest.java — the native fused PPO loss (ClippedLoss, CPU backend) against
// ReferenceKernels.clippedLoss: every aggregation × KL estimator (with and without a reference) ×
// dual clip × clip range, masks with NaN padding, ratios beyond the ±20 clamp, awkward shapes.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.DrmasException;
import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class ClippedLossReferenceTest {
    static final double GRAD_ATOL = 1e-6, GRAD_RTOL = 1e-4;
    static final double SUMS_ATOL = 1e-6, SUMS_RTOL = 1e-5;

    /** Token arrays of one call; ref and mask may be null. */
    record Tokens(long[] offsets, float[] logp, float[] old, float[] adv, float[] ref, boolean[] mask) {
        int numRows() {
            return offsets.length - 1;
        }

        int validTokens() {
            int n = 0;
            for (int r = 0; r < numRows(); r++) {
                for (long t = offsets[r]; t < offsets[r + 1]; t++) if (mask == null || mask[(int) t]) n++;
            }
            return n;
        }

        Tokens withoutRef() {
            return new Tokens(offsets, logp, old, adv, null, mask);
        }

        Tokens withoutMask() {
            return new Tokens(offsets, logp, old, adv, ref, null);
        }
    }

    /**
     * Rows of the given lengths after {@code lead} tokens no row owns, followed by {@code tail}
     * such tokens. Log-ratios: mostly small, some exactly 0, some up to ±3 and (with far) up to ±30.
     * Advantages: one value per row (10% exactly 0) with some per-token noise. Masked tokens hold
     * {@code padding} in every input; tokens outside rows hold finite values that would change the
     * result if they were read (NaN there is tested separately), and mask true.
     */
    static Tokens tokens(long seed, int[] lengths, int lead, int tail, double maskedFraction, boolean far, float padding) {
        Random r = new Random(seed);
        long[] off = new long[lengths.length + 1];
        off[0] = lead;
        for (int i = 0; i < lengths.length; i++) off[i + 1] = off[i] + lengths[i];
        int n = (int) off[lengths.length] + tail;
        float[] logp = new float[n], old = new float[n], adv = new float[n], ref = new float[n];
        boolean[] mask = new boolean[n];
        java.util.Arrays.fill(logp, -3f);
        java.util.Arrays.fill(old, -13f);
        java.util.Arrays.fill(adv, 5f);
        java.util.Arrays.fill(ref, 30f);
        java.util.Arrays.fill(mask, true);
        for (int row = 0; row < lengths.length; row++) {
            float rowAdv = r.nextInt(10) == 0 ? 0f : (float) (1.5 * r.nextGaussian());
            for (long tt = off[row]; tt < off[row + 1]; tt++) {
                int t = (int) tt;
                mask[t] = r.nextDouble() >= maskedFraction;
                if (!mask[t]) { // masked: padding everywhere
                    logp[t] = old[t] = adv[t] = ref[t] = padding;
                    continue;
                }
                logp[t] = (float) (-8 * r.nextDouble());
                double u = r.nextDouble();
                double delta;
                if (u < 0.55) delta = 0.3 * r.nextGaussian();
                else if (u < 0.65) delta = 0;
                else if (u < 0.9 || !far) delta = 3 * (2 * r.nextDouble() - 1);
                else delta = 30 * (2 * r.nextDouble() - 1);
                old[t] = (float) (logp[t] - delta);
                double v = r.nextDouble();
                double refDelta = v < 0.8 ? 0.5 * r.nextGaussian() : (far ? 30 : 5) * (2 * r.nextDouble() - 1);
                ref[t] = (float) (logp[t] + refDelta);
                adv[t] = r.nextInt(8) == 0 ? (float) r.nextGaussian() : rowAdv;
            }
        }
        return new Tokens(off, logp, old, adv, ref, mask);
    }

    /** A seed that is the same in every run (a record's hashCode hashes its enums by identity). */
    static long seed(LossConfig c) {
        return c.toString().hashCode();
    }

    static double normalizerFor(LossAggregation a, Tokens tk) {
        return switch (a.divisor()) {
            case TOKENS -> Math.max(1, tk.validTokens()) * 1.5; // as if other micro-batches followed
            case ROWS -> Math.max(1, tk.numRows());
            case ROWS_TIMES_CONSTANT -> Math.max(1, tk.numRows()) * 4096.0;
        };
    }

    static void check(String what, LossConfig c, double normalizer, Tokens tk) {
        ReferenceKernels.LossRef e = ReferenceKernels.clippedLoss(c, normalizer, tk.offsets(), tk.logp(), tk.old(),
                tk.adv(), tk.ref(), tk.mask());
        ClippedLoss.Result a = ClippedLoss.compute(c, normalizer, tk.offsets(), tk.logp(), tk.old(), tk.adv(),
                tk.ref(), tk.mask());
        double[] scale = ReferenceKernels.clippedLossMagnitudes(c, normalizer, tk.offsets(), tk.logp(), tk.old(),
                tk.adv(), tk.ref(), tk.mask());
        String w = what + " " + c + " normalizer " + normalizer + (tk.ref() == null ? " (no ref)" : "")
                + (tk.mask() == null ? " (no mask)" : "");
        Tolerance.assertClose(w + " grad", a.grad(), e.grad(), GRAD_ATOL, GRAD_RTOL);
        // rtol is taken relative to Σ|term| as well as |sum|: PPO_KL, PG_LOSS and k1's KL add terms
        // of both signs, each with the relative error of an f32 log-ratio (≈1e-6 at |δ| = 20)
        Tolerance.assertClose(w + " sums", a.sums(), e.sums(), scale, SUMS_ATOL, SUMS_RTOL);
        // tokens outside rows or masked have exactly zero gradient
        boolean[] valid = new boolean[tk.logp().length];
        for (int r = 0; r < tk.numRows(); r++) {
            for (long t = tk.offsets()[r]; t < tk.offsets()[r + 1]; t++) {
                valid[(int) t] = tk.mask() == null || tk.mask()[(int) t];
            }
        }
        for (int t = 0; t < valid.length; t++) {
            if (!valid[t]) assertEquals(0f, a.grad()[t], w + ": grad of invalid token " + t + " must be 0");
        }
        assertEquals(e.sums()[AbiIndices.LOSS_TOKENS], a.sums()[AbiIndices.LOSS_TOKENS], w + ": token count");
        assertEquals(e.sums()[AbiIndices.LOSS_CLIPPED], a.sums()[AbiIndices.LOSS_CLIPPED], w + ": clipped count");
        assertEquals(e.sums()[AbiIndices.LOSS_CLIPPED_LOWER], a.sums()[AbiIndices.LOSS_CLIPPED_LOWER],
                w + ": lower-clipped count");
    }

    static final int[] MIXED_LENGTHS = {0, 1, 2, 3, 5, 7, 11, 0, 1, 131, 17, 257, 0, 64, 1, 509, 2, 1021, 33, 0, 97};

    /** aggregation × KL (estimator, with ref?) × dual clip × clip range. */
    static Stream<Arguments> configs() {
        double[][] clips = {{0.2, 0.2}, {0.2, 0.28}, {0.0, 0.0}, {0.5, 3.0}};
        Object[][] kls = {{KlEstimator.NONE, false}, {KlEstimator.NONE, true}, {KlEstimator.K1, true},
                {KlEstimator.K2, true}, {KlEstimator.K3, true}};
        List<Arguments> out = new ArrayList<>();
        for (LossAggregation agg : LossAggregation.values()) {
            for (Object[] kl : kls) {
                for (double dual : new double[] {0.0, 3.0}) {
                    for (double[] clip : clips) {
                        LossConfig c = new LossConfig(clip[0], clip[1], dual, (KlEstimator) kl[0], 0.05, agg);
                        out.add(Arguments.of(c, kl[1]));
                    }
                }
            }
        }
        return out.stream();
    }

    @ParameterizedTest(name = "{0} withRef={1}")
    @MethodSource("configs")
    void everyConfig(LossConfig c, boolean withRef) {
        Tokens tk = tokens(seed(c), MIXED_LENGTHS, 3, 5, 0.2, true, Float.NaN);
        if (!withRef) tk = tk.withoutRef();
        check("masked, NaN padding", c, normalizerFor(c.aggregation(), tk), tk);
        Tokens all = tokens(seed(c) + 1, MIXED_LENGTHS, 0, 0, 0.0, true, 0f).withoutMask();
        if (!withRef) all = all.withoutRef();
        check("no mask", c, normalizerFor(c.aggregation(), all), all);
    }

    @ParameterizedTest(name = "{0} withRef={1}")
    @MethodSource("configs")
    void ratiosBeyondTheClamp(LossConfig c, boolean withRef) {
        // every log-ratio in ±30, every reference in ±30 of logp: both ±20 clamps and the ±10 KL clamp bite
        Random r = new Random(seed(c));
        int n = 2003;
        float[] logp = new float[n], old = new float[n], adv = new float[n], ref = new float[n];
        for (int t = 0; t < n; t++) {
            logp[t] = (float) (-5 * r.nextDouble());
            old[t] = (float) (logp[t] - 30 * (2 * r.nextDouble() - 1));
            ref[t] = (float) (logp[t] - 30 * (2 * r.nextDouble() - 1));
            adv[t] = (float) (2 * r.nextGaussian());
        }
        long[] off = {0, 1000, 1000, n};
        Tokens tk = new Tokens(off, logp, old, adv, withRef ? ref : null, null);
        check("|logp − old| up to 30", c, normalizerFor(c.aggregation(), tk), tk);
    }

    static Stream<LossConfig> someConfigs() {
        return Stream.of(LossConfig.defaults(),
                LossConfig.defaults().withDualClip(0).withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN),
                LossConfig.defaults().withKl(KlEstimator.K3, 0.1).withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM),
                LossConfig.defaults().withKl(KlEstimator.K2, 1.0).withClip(0.1, 0.3)
                        .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("someConfigs")
    void awkwardShapes(LossConfig c) {
        Tokens one = tokens(1, new int[] {1}, 0, 0, 0.0, false, 0f);
        check("1 token", c, normalizerFor(c.aggregation(), one), one);
        check("1 token, no mask", c, 1.0, one.withoutMask());
        Tokens onePadded = tokens(2, new int[] {1}, 2, 3, 0.0, false, Float.NaN);
        check("1 valid token among padding", c, normalizerFor(c.aggregation(), onePadded), onePadded);
        Tokens empties = tokens(3, new int[] {0, 0, 0}, 1, 2, 0.0, false, 0f);
        check("empty rows only", c, 3.0, empties);
        Tokens noRows = tokens(4, new int[0], 5, 0, 0.0, false, 0f);
        check("no rows, 5 tokens outside", c, 1.0, noRows);
        Tokens none = tokens(5, new int[0], 0, 0, 0.0, false, 0f);
        check("no tokens at all", c, 1.0, none);
        Tokens allMasked = tokens(6, new int[] {7, 11}, 0, 0, 1.0, false, Float.NaN);
        check("every token masked", c, 2.0, allMasked);
        Tokens prime = tokens(7, new int[] {65537}, 0, 0, 0.1, true, Float.NaN);
        check("one row of 65537 tokens", c, normalizerFor(c.aggregation(), prime), prime);
        Tokens primes = tokens(8, new int[] {2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 4099}, 1, 1, 0.3,
                true, Float.NaN);
        check("prime row lengths", c, normalizerFor(c.aggregation(), primes), primes);
        Tokens many = tokens(9, lengths(new Random(9), 3001, 300), 0, 17, 0.25, true, Float.NaN);
        check("3001 rows", c, normalizerFor(c.aggregation(), many), many);
    }

    static int[] lengths(Random r, int rows, int maxLen) {
        int[] l = new int[rows];
        for (int i = 0; i < rows; i++) l[i] = r.nextInt(maxLen + 1);
        return l;
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("someConfigs")
    void nanOutsideRowsDoesNotLeak(LossConfig c) {
        // tokens no row owns (leading and trailing padding) hold NaN in every input
        Tokens tk = tokens(10, MIXED_LENGTHS, 9, 13, 0.0, true, Float.NaN);
        long first = tk.offsets()[0], end = tk.offsets()[tk.numRows()];
        for (int t = 0; t < tk.logp().length; t++) {
            if (first <= t && t < end) continue;
            tk.logp()[t] = Float.NaN;
            tk.old()[t] = Float.NaN;
            tk.adv()[t] = Float.NaN;
            tk.ref()[t] = Float.NaN;
            tk.mask()[t] = true; // mask says valid, but no row owns these tokens
        }
        check("NaN outside rows", c, normalizerFor(c.aggregation(), tk), tk);
        check("NaN outside rows, no mask", c, normalizerFor(c.aggregation(), tk), tk.withoutMask());
    }

    @Test
    void klWithoutReferenceIsRejected() {
        // a KL estimator without reference log-probs is refused (by drmas.h's check, which names it)
        Tokens tk = tokens(11, new int[] {3, 4}, 0, 0, 0.0, false, 0f).withoutRef();
        for (KlEstimator kl : new KlEstimator[] {KlEstimator.K1, KlEstimator.K2, KlEstimator.K3}) {
            LossConfig c = LossConfig.defaults().withKl(kl, 0.1);
            assertTrue(c.usesReference());
            DrmasException e = assertThrows(DrmasException.class,
                    () -> ClippedLoss.compute(c, 7.0, tk.offsets(), tk.logp(), tk.old(), tk.adv(), null, tk.mask()),
                    "kl " + kl + " without ref");
            assertEquals(DrmasException.ERR_NULL, e.status());
            assertTrue(e.getMessage().contains("ref_logp is NULL"), e.getMessage());
        }
        assertFalse(LossConfig.defaults().usesReference());
    }

    @Test
    void handExample() {
        // one row of four tokens, token-mean over 4, clip 0.2/0.2, dual clip 3, no KL:
        //  t0: δ = 0,   A = 1:  ratio 1,     pg = −1,                        grad = −1·1/4
        //  t1: δ = ln2, A = 1:  ratio 2,     pg = max(−2, −1.2) = −1.2 (clipped), grad 0
        //  t2: δ = ln2, A = −1: ratio 2,     pg = max(2, 1.2) = 2 (< 3),     grad = 2/4
        //  t3: δ = ln4, A = −1: ratio 4,     pg = min(max(4, 1.2), 3) = 3,   grad 0, lower-clipped
        float ln2 = (float) Math.log(2), ln4 = (float) Math.log(4);
        float[] logp = {-1f, -1f + ln2, -1f + ln2, -1f + ln4};
        float[] old = {-1f, -1f, -1f, -1f};
        float[] adv = {1f, 1f, -1f, -1f};
        long[] off = {0, 4};
        LossConfig c = LossConfig.defaults();
        double[] grad = {-0.25, 0, 0.5, 0};
        // pg values exact up to the float rounding of ln 2 and ln 4
        double r2 = Math.exp((double) (-1f + ln2) - (-1.0)), r4 = Math.exp((double) (-1f + ln4) - (-1.0));
        double loss = (-1 - 1.2 + r2 + 3) / 4;
        double ppoKl = -(2 * ((double) (-1f + ln2) + 1) + ((double) (-1f + ln4) + 1));
        double[] sums = {loss, loss, 0, 4, 1, 1, ppoKl, 0};
        ReferenceKernels.LossRef e = ReferenceKernels.clippedLoss(c, 4.0, off, logp, old, adv, null, null);
        grad[2] = r2 / 4;
        Tolerance.assertClose("reference grad", e.grad(), grad, 1e-12, 1e-12);
        Tolerance.assertClose("reference sums", e.sums(), sums, 1e-12, 1e-12);
        ClippedLoss.Result a = ClippedLoss.compute(c, 4.0, off, logp, old, adv, null, null);
        Tolerance.assertClose("native grad", a.grad(), grad, GRAD_ATOL, GRAD_RTOL);
        Tolerance.assertClose("native sums", a.sums(), sums, SUMS_ATOL, SUMS_RTOL);
    }
}
