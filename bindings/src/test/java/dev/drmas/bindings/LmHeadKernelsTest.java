// LmHeadKernelsTest.java — the fused LM head's bindings on the CPU backend, fp32 and bf16 logits: the
// bf16 ops give bit for bit the fp32 ops' log-probs, entropies and sums on the widened logits and
// their dL/dz rounded to bf16 (to nearest, ties to even: rounded here independently of the library),
// the bf16 logits are sized at 2 bytes each, and errors name the bf16 op and leave every output untouched.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Arrays;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class LmHeadKernelsTest {
    static final Kernels.LmHeadParams PARAMS =
            new Kernels.LmHeadParams(new Kernels.LossParams(0.2, 0.28, 3.0, 0.05, 7.0, 3, true), 0.01);

    /** A micro-batch of T tokens in 4 rows (not starting at 0, not ending at T, one empty), a masked token. */
    record Batch(int t, int v, long[] off, long[] y, float[] old, float[] ref, float[] adv, byte[] mask, float[] z) {}

    static Batch batch(int t, int v, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        long[] off = {1, t / 4, t / 4, (3L * t) / 4, t - 2};
        long[] y = new long[t];
        float[] old = new float[t], ref = new float[t];
        byte[] mask = new byte[t];
        for (int i = 0; i < t; i++) {
            y[i] = r.nextInt(v);
            old[i] = (float) -r.nextDouble(1, 8);
            ref[i] = old[i] + (float) (r.nextGaussian() * 0.3);
            mask[i] = (byte) (i == t / 2 ? 0 : 1);
        }
        y[t / 2] = v + 5;  // masked: never read
        y[0] = -1;         // outside every row: never read
        float[] z = new float[t * v];
        for (int i = 0; i < z.length; i++) z[i] = (float) (r.nextGaussian() * 2 + 6.0 * (i % v) / v);
        return new Batch(t, v, off, y, old, ref, new float[] {1.3f, -0.7f, 0.4f, -2.1f}, mask, z);
    }

    static float widen(short b) {
        return Float.intBitsToFloat((b & 0xFFFF) << 16);
    }

    /** fp32 to bf16, to nearest with ties to even, by comparing the two neighbours (finite values). */
    static short toBf16(float f) {
        int bits = Float.floatToRawIntBits(f);
        short lo = (short) (bits >>> 16), hi = (short) (lo + 1);
        if ((bits & 0xFFFF) == 0) return lo;
        double dl = Math.abs((double) f - widen(lo)), dh = Math.abs((double) widen(hi) - f);
        if (dl != dh) return dl < dh ? lo : hi;
        return (lo & 1) == 0 ? lo : hi;
    }

    static short[] toBf16(float[] z) {
        short[] b = new short[z.length];
        for (int i = 0; i < z.length; i++) b[i] = toBf16(z[i]);
        return b;
    }

    static float[] widen(short[] b) {
        float[] z = new float[b.length];
        for (int i = 0; i < b.length; i++) z[i] = widen(b[i]);
        return z;
    }

    static MemorySegment seg(float[] a) {
        return a == null ? null : MemorySegment.ofArray(a);
    }

    @Test
    void bf16OpsAreTheFp32OpsOnTheWidenedLogits() {
        assertEquals((short) 0x3F80, toBf16(1.0f + 0x1p-8f), "a tie goes to the even neighbour");
        assertEquals((short) 0x3F82, toBf16(1.0f + 3 * 0x1p-8f), "a tie goes to the even neighbour");
        Batch b = batch(29, 1031, 5);
        short[] zb = toBf16(b.z);
        float[] zw = widen(zb);
        int t = b.t, v = b.v;
        long[] yOk = Arrays.stream(b.y).map(x -> Math.min(Math.max(x, 0), v - 1)).toArray();
        float[] lp = new float[t], ent = new float[t], lpb = new float[t], entb = new float[t];
        Kernels.lmheadLogprobs(Backend.CPU, t, v, seg(zw), MemorySegment.ofArray(yOk), seg(lp), seg(ent), null);
        Kernels.lmheadLogprobsBf16(Backend.CPU, t, v, MemorySegment.ofArray(zb), MemorySegment.ofArray(yOk), seg(lpb), seg(entb), null);
        assertArrayEquals(lp, lpb, "log-probs");
        assertArrayEquals(ent, entb, "entropies");
        for (int p = 0; p < t; p++) assertTrue(lp[p] < 0 && ent[p] > 0, "token " + p);

        float[] dzf = zw.clone(), lpf = new float[t], entf = new float[t], lpg = new float[t], entg = new float[t];
        short[] dzb = zb.clone();
        int cs = 7;  // chunks that do not divide the tokens
        for (int c0 = 0; c0 < t; c0 += cs) {
            int n = Math.min(cs, t - c0);
            double[] sf = new double[AbiIndices.LMHEAD_SUMS], sb = new double[AbiIndices.LMHEAD_SUMS];
            float[] lpc = new float[n], entc = new float[n], lpd = new float[n], entd = new float[n];
            Kernels.lmheadChunk(Backend.CPU, PARAMS, 4, MemorySegment.ofArray(b.off), t, c0, n, v,
                    MemorySegment.ofArray(dzf).asSlice(4L * c0 * v), MemorySegment.ofArray(b.y), seg(b.old), seg(b.adv), seg(b.ref),
                    MemorySegment.ofArray(b.mask), seg(lpc), seg(entc), MemorySegment.ofArray(sf), null);
            Kernels.lmheadChunkBf16(Backend.CPU, PARAMS, 4, MemorySegment.ofArray(b.off), t, c0, n, v,
                    MemorySegment.ofArray(dzb).asSlice(2L * c0 * v), MemorySegment.ofArray(b.y), seg(b.old), seg(b.adv), seg(b.ref),
                    MemorySegment.ofArray(b.mask), seg(lpd), seg(entd), MemorySegment.ofArray(sb), null);
            assertArrayEquals(sf, sb, "sums of the chunk at " + c0);
            System.arraycopy(lpc, 0, lpf, c0, n);
            System.arraycopy(entc, 0, entf, c0, n);
            System.arraycopy(lpd, 0, lpg, c0, n);
            System.arraycopy(entd, 0, entg, c0, n);
        }
        assertArrayEquals(lpf, lpg, "chunk log-probs");
        assertArrayEquals(entf, entg, "chunk entropies");
        int nonzero = 0;
        for (int i = 0; i < dzf.length; i++) {
            assertEquals(toBf16(dzf[i]), dzb[i], "dL/dz[" + i + "]: the fp32 value " + dzf[i] + " rounded to bf16");
            if (dzb[i] != 0) nonzero++;
        }
        assertTrue(nonzero > dzf.length / 2, "dL/dz is mostly zero: " + nonzero);
    }

    @Test
    void bf16ErrorsNameTheOpAndLeaveEverythingUntouched() {
        Batch b = batch(12, 37, 6);
        short[] zb = toBf16(b.z);
        int t = b.t, v = b.v;
        long[] y = b.y.clone();
        y[5] = v;  // a valid token's target outside the vocabulary
        short[] dz = zb.clone();
        float[] lp = new float[t];
        Arrays.fill(lp, -7f);
        double[] sums = new double[AbiIndices.LMHEAD_SUMS];
        Arrays.fill(sums, 9);
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.lmheadChunkBf16(Backend.CPU, PARAMS, 4,
                MemorySegment.ofArray(b.off), t, 0, t, v, MemorySegment.ofArray(dz), MemorySegment.ofArray(y), seg(b.old), seg(b.adv),
                seg(b.ref), MemorySegment.ofArray(b.mask), seg(lp), null, MemorySegment.ofArray(sums), null));
        assertEquals(DrmasException.ERR_RANGE, e.status());
        assertTrue(e.getMessage().contains("drmas_lmhead_chunk_bf16: targets[5] = 37"), e.getMessage());
        assertArrayEquals(zb, dz, "logits written despite the error");
        for (float x : lp) assertEquals(-7f, x);
        for (double x : sums) assertEquals(9.0, x);

        short[] nan = zb.clone();
        nan[3 * v + 4] = (short) 0x7FC0;
        long[] yOk = Arrays.stream(b.y).map(x -> Math.min(Math.max(x, 0), v - 1)).toArray();
        e = assertThrows(DrmasException.class, () -> Kernels.lmheadLogprobsBf16(Backend.CPU, t, v, MemorySegment.ofArray(nan),
                MemorySegment.ofArray(yOk), seg(lp), null, null));
        assertEquals(DrmasException.ERR_NONFINITE, e.status());
        assertTrue(e.getMessage().contains("drmas_lmhead_logprobs_bf16: logits[3][4] (token 3, vocabulary index 4) is nan"), e.getMessage());
        for (float x : lp) assertEquals(-7f, x);

        // bf16 logits take 2 bytes each: exactly t x v shorts pass, one fewer is refused before the call
        Kernels.lmheadLogprobsBf16(Backend.CPU, t, v, MemorySegment.ofArray(zb), MemorySegment.ofArray(yOk), seg(lp), null, null);
        IllegalArgumentException short1 = assertThrows(IllegalArgumentException.class, () -> Kernels.lmheadLogprobsBf16(Backend.CPU, t,
                v, MemorySegment.ofArray(Arrays.copyOf(zb, zb.length - 1)), MemorySegment.ofArray(yOk), seg(lp), null, null));
        assertTrue(short1.getMessage().startsWith("logits holds " + (2L * t * v - 2) + " bytes"), short1.getMessage());
    }
}
