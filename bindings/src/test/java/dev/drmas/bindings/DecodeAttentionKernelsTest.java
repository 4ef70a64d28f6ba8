// DecodeAttentionKernelsTest.java — Kernels.decodeAttention (drmas_decode_attention_f32) through FFM on
// Java arrays: against a plain Java composition in double of the same steps (per-head RMSNorm, the
// rotate_half rotation, masked softmax attention over a cache whose rows are wider than their data),
// and its errors: a short buffer is a Java error naming the argument, a bad slot the library's, with
// the outputs untouched.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.Random;
import org.junit.jupiter.api.Test;

class DecodeAttentionKernelsTest {
    // 3 rows, 6 query heads on 2 kv heads, head_dim 10 (not a multiple of 8), 11 slots read of 13
    static final int ROWS = 3, H = 6, KV = 2, D = 10, CAP = 13, SLOTS = 11, WRITE = 9;
    static final int QS = (H + 2 * KV) * D + 2, CS = KV * CAP * D + 3;

    final Random rnd = new Random(5);
    final float[] qkv = randoms(ROWS * QS, 2), kc = randoms(ROWS * CS, 1), vc = randoms(ROWS * CS, 1);
    final float[] qn = randoms(D, 0.3f), kn = randoms(D, 0.3f), cos = new float[ROWS * D], sin = new float[ROWS * D];
    final byte[] mask = new byte[ROWS * SLOTS];

    DecodeAttentionKernelsTest() {
        for (int i = 0; i < D; i++) {
            qn[i] += 1;
            kn[i] += 1;
        }
        for (int r = 0; r < ROWS; r++) {
            for (int e = 0; e < D / 2; e++) {
                double a = (r + 4) * Math.pow(10000, -2.0 * e / D);
                cos[r * D + e] = cos[r * D + e + D / 2] = (float) Math.cos(a);
                sin[r * D + e] = -(float) Math.sin(a);
                sin[r * D + e + D / 2] = (float) Math.sin(a);
            }
            for (int j = 0; j < SLOTS; j++) mask[r * SLOTS + j] = (byte) (r == 2 || rnd.nextInt(3) == 0 ? 0 : 1);  // row 2: its own slot only
        }
    }

    float[] randoms(int n, float scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) rnd.nextGaussian() * scale;
        return a;
    }

    void call(float[] q, float[] k, float[] v, float[] out, long writeSlot) {
        Kernels.decodeAttention(ROWS, H, KV, D, MemorySegment.ofArray(q), QS, MemorySegment.ofArray(qn), MemorySegment.ofArray(kn), 1e-6,
                MemorySegment.ofArray(cos), MemorySegment.ofArray(sin), MemorySegment.ofArray(k), MemorySegment.ofArray(v), CS, CAP,
                writeSlot, SLOTS, MemorySegment.ofArray(mask), 1 / Math.sqrt(D), MemorySegment.ofArray(out));
    }

    /** RMSNorm with weight w, then the rotation, of head x at offset `at` for row r, in double. */
    double[] prep(float[] x, int at, float[] w, int r) {
        double ss = 0;
        for (int e = 0; e < D; e++) ss += (double) x[at + e] * x[at + e];
        double f = 1 / Math.sqrt(ss / D + 1e-6);
        double[] t = new double[D], y = new double[D];
        for (int e = 0; e < D; e++) t[e] = x[at + e] * f * w[e];
        for (int e = 0; e < D; e++) y[e] = t[e] * cos[r * D + e] + t[(e + D / 2) % D] * sin[r * D + e];
        return y;
    }

    @Test
    void matchesAPlainJavaComposition() {
        float[] q = qkv.clone(), k = kc.clone(), v = vc.clone(), out = new float[ROWS * H * D];
        call(q, k, v, out, WRITE);
        for (int r = 0; r < ROWS; r++) {
            for (int h = 0; h < H; h++) {
                int g = h / (H / KV);
                double[] qh = prep(qkv, r * QS + h * D, qn, r), kNew = prep(qkv, r * QS + (H + g) * D, kn, r);
                double[] s = new double[SLOTS];
                double m = Double.NEGATIVE_INFINITY;
                for (int j = 0; j < SLOTS; j++) {
                    s[j] = Double.NEGATIVE_INFINITY;
                    if (j != WRITE && mask[r * SLOTS + j] == 0) continue;
                    double dot = 0;
                    for (int e = 0; e < D; e++) dot += qh[e] * (j == WRITE ? kNew[e] : kc[r * CS + (g * CAP + j) * D + e]);
                    s[j] = dot / Math.sqrt(D);
                    m = Math.max(m, s[j]);
                }
                double sum = 0;
                for (int j = 0; j < SLOTS; j++) sum += Math.exp(s[j] - m);
                for (int e = 0; e < D; e++) {
                    double o = 0;
                    for (int j = 0; j < SLOTS; j++) {
                        double val = j == WRITE ? qkv[r * QS + (H + KV + g) * D + e] : vc[r * CS + (g * CAP + j) * D + e];
                        if (s[j] != Double.NEGATIVE_INFINITY) o += Math.exp(s[j] - m) / sum * val;
                    }
                    float got = out[(r * H + h) * D + e];
                    assertTrue(Math.abs(got - o) <= 2e-5 + 2e-4 * Math.abs(o), "row " + r + " head " + h + " [" + e + "]: " + got + " vs " + o);
                }
                if (h % (H / KV) == 0) {  // the new key, rotated, in the cache's write slot
                    for (int e = 0; e < D; e++) {
                        float cached = k[r * CS + (g * CAP + WRITE) * D + e];
                        assertTrue(Math.abs(cached - kNew[e]) <= 2e-5 + 2e-4 * Math.abs(kNew[e]), "cached key " + e);
                    }
                }
            }
        }
    }

    @Test
    void badArgumentsAreNamedAndWriteNothing() {
        float[] q = qkv.clone(), k = kc.clone(), v = vc.clone(), out = new float[ROWS * H * D];
        float[] shortCache = new float[(ROWS - 1) * CS + KV * CAP * D - 1];  // one float short of the last row's data
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> call(q, shortCache, v, out, WRITE));
        assertTrue(e.getMessage().contains("k_cache"), e.getMessage());
        DrmasException d = assertThrows(DrmasException.class, () -> call(q, k, v, out, SLOTS));
        assertTrue(d.getMessage().contains("write_slot (11)"), d.getMessage());
        assertArrayEquals(qkv, q);
        assertArrayEquals(kc, k);
        assertArrayEquals(new float[ROWS * H * D], out);
    }
}
