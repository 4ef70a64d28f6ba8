// ArrayArgumentChecksTest.java — the array wrappers' own checks, which stand before the native
// kernels: arrays of different lengths are refused with both names and lengths (the kernel takes
// one length and would read past or ignore the other array), and a loss normalizer of 0 is refused.
// Each mismatch makes the second array the longer one, so that without the check the kernel runs
// without an error, reading what it was given, and the test sees no exception.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.function.Executable;

class ArrayArgumentChecksTest {
    private static String refused(Executable call) {
        return assertThrows(IllegalArgumentException.class, call).getMessage();
    }

    @Test
    void aLossNormalizerOfZeroOrLessIsRefused() {
        LossConfig c = LossConfig.defaults();
        assertEquals("normalizer must be finite and > 0, got 0.0", refused(() -> ClippedLoss.params(c, 0.0)));
        assertEquals("normalizer must be finite and > 0, got -1.0", refused(() -> ClippedLoss.params(c, -1.0)));
        assertEquals("normalizer must be finite and > 0, got NaN", refused(() -> ClippedLoss.params(c, Double.NaN)));
        assertEquals("normalizer must be finite and > 0, got Infinity",
                refused(() -> ClippedLoss.params(c, Double.POSITIVE_INFINITY)));
        assertEquals(0.5, ClippedLoss.params(c, 0.5).normalizer());
    }

    @Test
    void theLossRefusesArraysOfOtherLengthsThanLogp() {
        LossConfig c = LossConfig.defaults();
        long[] offsets = {0, 2};
        float[] two = {-1f, -2f}, three = {-1f, -2f, -3f};
        assertEquals("oldLogp has 3 entries but logp has 2",
                refused(() -> ClippedLoss.compute(c, 2, offsets, two, three, two, null, null)));
        assertEquals("adv has 3 entries but logp has 2",
                refused(() -> ClippedLoss.compute(c, 2, offsets, two, two, three, null, null)));
        assertEquals("refLogp has 3 entries but logp has 2",
                refused(() -> ClippedLoss.compute(c.withKl(KlEstimator.K3, 0.1), 2, offsets, two, two, two, three, null)));
        assertEquals("mask has 3 entries but logp has 2",
                refused(() -> ClippedLoss.compute(c, 2, offsets, two, two, two, null, new boolean[] {true, true, true})));
        // the same arrays at one length run
        assertEquals(2, ClippedLoss.compute(c, 2, offsets, two, two, two, two, new boolean[] {true, true}).grad().length);
    }

    @Test
    void advantagesRefuseIdsOfOtherLengthsThanScores() {
        NormConfig c = NormConfig.of(NormMode.GRPO);
        float[] scores = {1f, 0f};
        int[] two = {0, 0}, three = {0, 0, 0}, traj = {0, 1};
        assertEquals("uid has 3 entries but scores has 2",
                refused(() -> Advantages.compute(c, scores, three, traj, two, 1, 2, 1)));
        assertEquals("agent has 3 entries but scores has 2",
                refused(() -> Advantages.compute(c, scores, two, traj, three, 1, 2, 1)));
        assertEquals("traj has 3 entries but scores has 2",
                refused(() -> Advantages.compute(c, scores, two, new int[] {0, 1, 1}, two, 1, 2, 1)));
        assertEquals(2, Advantages.compute(c, scores, two, traj, two, 1, 2, 1).length);
    }

    @Test
    void segmentStatsRefuseIdsOfAnotherLength() {
        assertEquals("ids has 3 entries but values has 2",
                refused(() -> SegmentStats.compute(new float[] {1f, 2f}, new int[] {0, 0, 0}, 1, false)));
        assertEquals(2, SegmentStats.compute(new float[] {1f, 2f}, new int[] {0, 0}, 1, false).count()[0]);
    }

    @Test
    void aBroadcastRefusesOffsetsThatAreNotOneLongerThanTheRows() {
        assertEquals("offsets has 4 entries but rowValues + 1 has 3",
                refused(() -> TokenBroadcast.rows(new float[] {1f, 2f}, new long[] {0, 1, 2, 3}, 3)));
        assertEquals(2f, TokenBroadcast.rows(new float[] {1f, 2f}, new long[] {0, 1, 3}, 3)[2]);
    }
}
