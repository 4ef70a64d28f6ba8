// AggregationByHandTest.java — each loss aggregation's table entry (per-row mean or not, and what
// the sum is divided by) pinned by hand: at ratio 1 every token's loss is −A, so the loss and each
// token's dL/dlogp follow from the rows' lengths and advantages alone. The reference kernels of
// ClippedLossReferenceTest read the same table (LossAggregation), so an entry changed there moved
// the oracle with the kernel; the numbers here are written out.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.stream.Stream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class AggregationByHandTest {
    /*
     * Three rows: row 0 one token with A = 1, row 1 three tokens with A = 2, row 2 empty (A = 5:
     * no token carries it, but it counts as a row of the mini-batch, as PpoUpdater counts it).
     * 4 tokens, 3 rows, constant 10. logp = old, so ratio = 1 and no clip acts; L = Σ w_t·(−A_t).
     *   token-mean:              w = 1/4             L = −(1 + 6)/4 = −1.75     g = −A/4
     *   seq-mean-token-sum:      w = 1/3             L = −(1 + 6)/3 = −7/3      g = −A/3
     *   seq-mean-token-mean:     w = 1/(n_row · 3)   L = −(1/1 + 6/3)/3 = −1    g = −1/3, −2/9
     *   seq-mean-token-sum-norm: w = 1/(3 · 10)      L = −7/30                  g = −A/30 (Dr. GRPO: the mean over rows)
     */
    static final long[] OFFSETS = {0, 1, 4, 4};
    static final float[] ADV = {1, 2, 2, 2};
    static final float[] LOGP = {-1.5f, -0.25f, -2f, -0.75f};
    static final long TOKENS = 4, ROWS = 3;
    static final double CONSTANT = 10;

    static Stream<Arguments> aggregations() {
        return Stream.of(
                Arguments.of(LossAggregation.TOKEN_MEAN, -1.75, new double[] {-0.25, -0.5, -0.5, -0.5}),
                Arguments.of(LossAggregation.SEQ_MEAN_TOKEN_SUM, -7.0 / 3, new double[] {-1.0 / 3, -2.0 / 3, -2.0 / 3, -2.0 / 3}),
                Arguments.of(LossAggregation.SEQ_MEAN_TOKEN_MEAN, -1.0, new double[] {-1.0 / 3, -2.0 / 9, -2.0 / 9, -2.0 / 9}),
                Arguments.of(LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM, -7.0 / 30, new double[] {-1.0 / 30, -2.0 / 30, -2.0 / 30, -2.0 / 30}));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("aggregations")
    void lossAndGradientAtRatioOne(LossAggregation a, double loss, double[] grad) {
        LossConfig c = LossConfig.defaults().withAggregation(a);
        ClippedLoss.Result r = ClippedLoss.compute(c, a.normalizer(TOKENS, ROWS, CONSTANT), OFFSETS, LOGP, LOGP.clone(), ADV, null,
                null);
        assertEquals(loss, r.loss(), 1e-6 * Math.abs(loss), a + ": loss");
        for (int t = 0; t < grad.length; t++) assertEquals(grad[t], r.grad()[t], 1e-6 * Math.abs(grad[t]), a + ": dL/dlogp of token " + t);
    }
}
