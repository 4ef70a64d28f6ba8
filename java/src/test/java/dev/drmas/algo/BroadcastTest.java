// BroadcastTest.java — native row-to-token broadcast (TokenBroadcast, CPU backend) against
// ReferenceKernels.broadcastRows: one token, empty rows, leading and trailing tokens that no
// row owns, prime lengths, 10^6 tokens. A broadcast only copies, so results must be bit-identical.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import java.util.Random;
import org.junit.jupiter.api.Test;

class BroadcastTest {

    static float[] check(String what, float[] rowValues, long[] offsets, int numTokens) {
        float[] expected = ReferenceKernels.broadcastRows(rowValues, offsets, numTokens);
        float[] actual = TokenBroadcast.rows(rowValues, offsets, numTokens);
        assertEquals(numTokens, actual.length, what + ": length");
        for (int t = 0; t < numTokens; t++) {
            if (Float.floatToRawIntBits(actual[t]) != Float.floatToRawIntBits(expected[t])) {
                assertArrayEquals(expected, actual, what + ": first difference at token " + t);
            }
        }
        return actual;
    }

    /** Contiguous rows of the given lengths starting at token 0 (row r owns [off[r], off[r+1])). */
    static long[] offsets(int[] lengths) {
        long[] off = new long[lengths.length + 1];
        for (int r = 0; r < lengths.length; r++) off[r + 1] = off[r] + lengths[r];
        return off;
    }

    static float[] values(Random r, int n) {
        float[] v = new float[n];
        for (int i = 0; i < n; i++) v[i] = (float) r.nextGaussian();
        return v;
    }

    @Test
    void oneToken() {
        float[] a = check("1 row, 1 token", new float[] {3.5f}, new long[] {0, 1}, 1);
        assertArrayEquals(new float[] {3.5f}, a);
        a = check("0 rows, 1 token", new float[0], new long[] {0}, 1);
        assertArrayEquals(new float[] {0f}, a);
        a = check("1 empty row, 1 token", new float[] {3.5f}, new long[] {1, 1}, 1);
        assertArrayEquals(new float[] {0f}, a);
        check("no tokens", new float[] {1f, 2f}, new long[] {0, 0, 0}, 0);
    }

    @Test
    void handExample() {
        // rows: [1,3) = 7, [3,3) empty = 8, [3,6) = -1, tokens 0 and 6..7 owned by no row
        float[] a = check("hand example", new float[] {7f, 8f, -1f}, new long[] {1, 3, 3, 6}, 8);
        assertArrayEquals(new float[] {0f, 7f, 7f, -1f, -1f, -1f, 0f, 0f}, a);
    }

    @Test
    void primeLengthsAndEmptyRows() {
        int[] lengths = {0, 1, 2, 3, 5, 7, 0, 0, 1009, 1, 13, 0, 65537, 2};
        Random r = new Random(1);
        long[] off = offsets(lengths);
        int total = (int) off[lengths.length];
        check("prime lengths, contiguous", values(r, lengths.length), off, total);
        check("prime lengths, tail of 17 tokens", values(r, lengths.length), off, total + 17);
        // a leading gap: the first row starts at 11
        long[] shifted = off.clone();
        for (int i = 0; i < shifted.length; i++) shifted[i] += 11;
        check("prime lengths, leading gap", values(r, lengths.length), shifted, total + 11 + 3);
    }

    @Test
    void randomRowsWithEmptyRows() {
        Random r = new Random(2);
        for (int trial = 0; trial < 20; trial++) {
            int numRows = 1 + r.nextInt(300);
            int[] lengths = new int[numRows];
            for (int i = 0; i < numRows; i++) lengths[i] = r.nextInt(5) == 0 ? 0 : r.nextInt(200);
            long[] off = offsets(lengths);
            check("random rows " + trial, values(r, numRows), off, (int) off[numRows] + r.nextInt(50));
        }
    }

    @Test
    void millionTokens() {
        Random r = new Random(4);
        int numRows = 4099;
        int[] lengths = new int[numRows];
        for (int i = 0; i < numRows; i++) lengths[i] = r.nextInt(489);
        long[] off = offsets(lengths);
        int total = (int) off[numRows];
        check("~10^6 tokens", values(r, numRows), off, total + 1000);
    }
}
