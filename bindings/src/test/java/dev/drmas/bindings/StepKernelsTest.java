// StepKernelsTest.java — Kernels.rmsNorm, Kernels.swiglu and Kernels.sample (the CPU decoding step's
// drmas_rms_norm_f32, drmas_swiglu_f32, drmas_sample_f32) through FFM on Java arrays: against plain Java
// compositions (RMSNorm bit for bit in float, SwiGLU and the sampler in double), the sampler also on
// SamplerTest's hand-made distributions (which tokens top-k and top-p keep, the inverse CDF, greedy), and
// the errors: a short buffer is a Java error naming the argument, a bad argument the library's, with
// the outputs untouched.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

class StepKernelsTest {
    final Random rnd = new Random(9);

    float[] randoms(int n, float scale) {
        float[] a = new float[n];
        for (int i = 0; i < n; i++) a[i] = (float) rnd.nextGaussian() * scale;
        return a;
    }

    static MemorySegment seg(float[] a) {
        return MemorySegment.ofArray(a);
    }

    // ------------------------------------------------------------------ RMSNorm

    @Test
    void rmsNormAddsTheResidualAndNormalisesAsHfInFloat() {
        int rows = 5, h = 13, xs = 16, rs = 14, os = 15;  // a width that is no multiple of 8, strides wider than it
        float[] x = randoms(rows * xs, 2), res = randoms(rows * rs, 1), w = randoms(h, 0.3f), out = new float[rows * os];
        for (int i = 0; i < h; i++) w[i] += 1;
        Arrays.fill(out, -7f);
        float[] want = out.clone(), wantX = x.clone();
        double eps = 1e-6;
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int c = 0; c < h; c++) {
                wantX[r * xs + c] = x[r * xs + c] + res[r * rs + c];  // a float add, into x
                ss += (double) wantX[r * xs + c] * wantX[r * xs + c];
            }
            float f = (float) (1 / Math.sqrt(ss / h + eps));
            for (int c = 0; c < h; c++) want[r * os + c] = (wantX[r * xs + c] * f) * w[c];  // HF's order, in float
        }
        float[] gotX = x.clone();
        Kernels.rmsNorm(rows, h, seg(gotX), xs, seg(res), rs, seg(w), eps, seg(out), os);
        assertArrayEquals(wantX, gotX, "x + residual, the padding untouched");
        assertArrayEquals(want, out, "(x f) w, the padding untouched");

        // in place, without a residual: out is x
        float[] inPlace = x.clone();
        Kernels.rmsNorm(rows, h, seg(inPlace), xs, null, 0, seg(w), eps, seg(inPlace), xs);
        for (int r = 0; r < rows; r++) {
            double ss = 0;
            for (int c = 0; c < h; c++) ss += (double) x[r * xs + c] * x[r * xs + c];
            float f = (float) (1 / Math.sqrt(ss / h + eps));
            for (int c = 0; c < h; c++) assertEquals((x[r * xs + c] * f) * w[c], inPlace[r * xs + c], "row " + r + " [" + c + "]");
        }
    }

    @Test
    void rmsNormErrorsAreNamedAndWriteNothing() {
        float[] x = randoms(2 * 6, 1), res = randoms(2 * 6, 1), w = new float[6], out = new float[2 * 6];
        float[] x0 = x.clone();
        var e = assertThrows(IllegalArgumentException.class,
                () -> Kernels.rmsNorm(2, 6, seg(x), 6, seg(res), 6, seg(w), 1e-6, seg(new float[11]), 6));
        assertTrue(e.getMessage().contains("out"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Kernels.rmsNorm(2, 6, seg(x), 6, seg(new float[5 + 6]), 6, seg(w), 1e-6,
                seg(out), 6));
        assertTrue(e.getMessage().contains("residual"), e.getMessage());
        DrmasException d = assertThrows(DrmasException.class, () -> Kernels.rmsNorm(2, 6, seg(x), 5, seg(res), 6, seg(w), 1e-6, seg(out), 6));
        assertTrue(d.getMessage().contains("x_stride (5)"), d.getMessage());
        d = assertThrows(DrmasException.class, () -> Kernels.rmsNorm(2, 6, seg(x), 6, seg(x), 6, seg(w), 1e-6, seg(out), 6));
        assertTrue(d.getMessage().contains("residual must not be x"), d.getMessage());
        d = assertThrows(DrmasException.class, () -> Kernels.rmsNorm(2, 6, seg(x), 6, seg(res), 6, seg(w), Double.NaN, seg(out), 6));
        assertTrue(d.getMessage().contains("eps"), d.getMessage());
        assertArrayEquals(x0, x);
        assertArrayEquals(new float[2 * 6], out);
    }

    // ------------------------------------------------------------------ SwiGLU

    static double swigluRef(float g, float u) {
        if (Double.isNaN(g) || Double.isNaN(u)) return Double.NaN;
        if (Math.exp(-(double) g) >= 0x1.ffffffp127) return -0.0f * u;  // e^-g overflows float: silu's limit -0 (documented)
        double s = g == Float.POSITIVE_INFINITY ? Double.POSITIVE_INFINITY : g / (1 + Math.exp(-(double) g));
        return s * u;
    }

    @Test
    void swigluMatchesADoubleCompositionOnAwkwardValues() {
        float[] gv = {0, -0f, 1e-30f, -1e-30f, 1e-42f, 1, -1, 7.5f, -7.5f, 20, -20, 88.7f, -88.7f, 88.73f, -88.73f, 100, -100,
                Float.POSITIVE_INFINITY, Float.NEGATIVE_INFINITY, Float.NaN, 3e38f, -3e38f};
        float[] uv = {1, -1, 0.5f, 2.75f, 1e-30f, 0, -0f, 1e6f};
        int rows = gv.length, width = uv.length, gs = width + 1, us = width + 2, os = width + 3;
        float[] gate = new float[rows * gs], up = new float[rows * us], out = new float[rows * os];
        Arrays.fill(out, 42f);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < width; c++) {
                gate[r * gs + c] = gv[r];
                up[r * us + c] = uv[c];
            }
        Kernels.swiglu(rows, width, seg(gate), gs, seg(up), us, seg(out), os);
        for (int r = 0; r < rows; r++) {
            for (int c = 0; c < width; c++) {
                double want = swigluRef(gv[r], uv[c]);
                float got = out[r * os + c];
                String at = "swiglu(" + gv[r] + ", " + uv[c] + ") = " + got + ", want " + want;
                if (Double.isNaN(want)) assertTrue(Float.isNaN(got), at);
                else if (want == 0 || Math.abs(want) > Float.MAX_VALUE) assertEquals((float) want, got, 0f, at);  // +-0, or beyond float: +-inf
                else assertTrue(Math.abs(got - want) <= 1e-30 + 1e-6 * Math.abs(want), at);
            }
            for (int c = width; c < os; c++) assertEquals(42f, out[r * os + c], "padding");
        }
        // in place over gate: the same bits
        float[] g2 = gate.clone(), o2 = new float[rows * gs];
        Kernels.swiglu(rows, width, seg(g2), gs, seg(up), us, seg(g2), gs);
        Kernels.swiglu(rows, width, seg(gate), gs, seg(up), us, seg(o2), gs);
        for (int r = 0; r < rows; r++)
            for (int c = 0; c < width; c++) assertEquals(Float.floatToRawIntBits(o2[r * gs + c]), Float.floatToRawIntBits(g2[r * gs + c]));
    }

    @Test
    void swigluErrorsAreNamedAndWriteNothing() {
        float[] g = new float[12], u = new float[12], out = new float[12];
        var e = assertThrows(IllegalArgumentException.class, () -> Kernels.swiglu(2, 6, seg(g), 6, seg(new float[7]), 6, seg(out), 6));
        assertTrue(e.getMessage().contains("up"), e.getMessage());
        DrmasException d = assertThrows(DrmasException.class, () -> Kernels.swiglu(1, 6, seg(g), 6, seg(u), 6, seg(g), 7));
        assertTrue(d.getMessage().contains("out is gate"), d.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Kernels.swiglu(2, 0, seg(g), 6, seg(u), 6, seg(out), 6));
        assertArrayEquals(new float[12], out);
    }

    // ------------------------------------------------------------------ sampling

    /** A plain reference in double of drmas_sample_f32 for one row: {token, logprob}. */
    static double[] sampleRef(float[] z, int at, int v, double t, int k, double p, double u) {
        float[] s = new float[v];
        for (int j = 0; j < v; j++) s[j] = t == 0 || t == 1 ? z[at + j] : z[at + j] / (float) t;
        float m = Float.NEGATIVE_INFINITY;
        for (float x : s) m = Math.max(m, x);
        int first = 0;
        while (s[first] != m) first++;
        double[] e = new double[v];
        double sum = 0;
        for (int j = 0; j < v; j++) sum += e[j] = Math.exp((double) s[j] - m);
        if (t == 0) return new double[] {first, -Math.log(sum)};
        boolean[] keep = new boolean[v];
        Arrays.fill(keep, true);
        if (k > 0 && k < v) {
            float[] sorted = s.clone();
            Arrays.sort(sorted);
            float kth = sorted[v - k];
            for (int j = 0; j < v; j++) keep[j] = s[j] >= kth;
        }
        if (p < 1) {
            List<Integer> idx = new ArrayList<>();
            double zk = 0;
            for (int j = 0; j < v; j++) {
                if (keep[j]) {
                    idx.add(j);
                    zk += e[j];
                }
            }
            idx.sort((a, b) -> Float.compare(s[b], s[a]));  // stable: equal logits stay in token order
            double mass = 0;
            for (int j : idx) {
                if (!(mass < p)) keep[j] = false;
                mass += e[j] / zk;
            }
        }
        double[] cdf = new double[v];
        double run = 0;
        for (int j = 0; j < v; j++) cdf[j] = run += keep[j] ? e[j] : 0;
        double target = u * run;
        int tok = 0;
        while (!(cdf[tok] > target)) tok++;
        return new double[] {tok, ((double) s[tok] - m) - Math.log(sum)};
    }

    record Draws(long[] tokens, float[] logprobs) {}

    static Draws sample(float[] z, int rows, int v, int stride, double t, int k, double p, double[] u) {
        long[] tok = new long[rows];
        float[] lp = new float[rows];
        Kernels.sample(rows, v, seg(z), stride, t, k, p, u == null ? null : MemorySegment.ofArray(u), MemorySegment.ofArray(tok),
                MemorySegment.ofArray(lp));
        return new Draws(tok, lp);
    }

    @Test
    void sampleMatchesAPlainJavaReference() {
        int rows = 7, v = 523, stride = v + 2;
        float[] z = randoms(rows * stride, 3);
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < v; j++) {
                if (r % 3 == 1 && rnd.nextInt(5) == 0) z[r * stride + j] = Float.NEGATIVE_INFINITY;
                if (r % 3 == 2) z[r * stride + j] = Math.min(Math.round(z[r * stride + j]), 3);  // ties, the maximum among them
            }
        }
        double[] u = new double[rows];
        for (int r = 0; r < rows; r++) u[r] = r == 0 ? 0 : r == 1 ? 1 - 0x1p-53 : rnd.nextDouble();
        for (double t : new double[] {0, 0.6, 1, 1.7}) {
            for (int k : new int[] {0, 1, 5, v}) {
                for (double p : new double[] {1, 0.9, 0.3, 1e-9}) {
                    Draws d = sample(z, rows, v, stride, t, k, p, u);
                    for (int r = 0; r < rows; r++) {
                        double[] ref = sampleRef(z, r * stride, v, t, k, p, u[r]);
                        String at = "t " + t + " k " + k + " p " + p + " row " + r;
                        assertEquals((long) ref[0], d.tokens()[r], at);
                        assertEquals(ref[1], d.logprobs()[r], 1e-6 + 1e-6 * Math.abs(ref[1]), at);
                    }
                }
            }
        }
    }

    // SamplerTest's distribution: probabilities 0.05 .. 0.5 at scattered ids, two impossible tokens
    static final double[] PROBS = {0.1, 0.0, 0.5, 0.05, 0.15, 0.0, 0.2, 0.0};

    static float[] logits(double[]... rows) {
        int v = rows[0].length;
        float[] z = new float[rows.length * v];
        for (int b = 0; b < rows.length; b++)
            for (int j = 0; j < v; j++) z[b * v + j] = (float) Math.log(rows[b][j]);  // log 0 = -inf
        return z;
    }

    /** The tokens drawn from PROBS at 1000 evenly spread uniforms: the set that top-k and top-p keep. */
    static Set<Integer> kept(double temperature, int topK, double topP) {
        int n = 1000;
        double[][] rows = new double[n][];
        Arrays.fill(rows, PROBS);
        double[] u = new double[n];
        for (int i = 0; i < n; i++) u[i] = (i + 0.5) / n;
        Set<Integer> s = new TreeSet<>();
        for (long t : sample(logits(rows), n, PROBS.length, PROBS.length, temperature, topK, topP, u).tokens()) s.add((int) t);
        return s;
    }

    @Test
    void keepsWhatSamplerKeeps() {
        assertEquals(Set.of(2, 6), kept(1, 2, 1));
        assertEquals(Set.of(2), kept(1, 1, 1));
        assertEquals(Set.of(0, 2, 4, 6), kept(1, 4, 1));
        assertEquals(Set.of(2), kept(1, 0, 0.45));
        assertEquals(Set.of(2), kept(1, 0, 0.5));  // 0.5 alone reaches 0.5
        assertEquals(Set.of(2, 6), kept(1, 0, 0.6));
        assertEquals(Set.of(2, 4, 6), kept(1, 0, 0.8));
        assertEquals(Set.of(0, 2, 4, 6), kept(1, 0, 0.9));
        assertEquals(Set.of(0, 2, 3, 4, 6), kept(1, 0, 0.99));
        assertEquals(Set.of(2), kept(1, 2, 0.7));  // top-2 leaves 5/7 and 2/7
        assertEquals(Set.of(2, 6), kept(1, 2, 0.75));
        assertEquals(Set.of(2, 4, 6), kept(2, 0, 0.6));  // flatter at temperature 2
    }

    @Test
    void greedyInverseCdfAndLogProbsAsSampler() {
        double[] other = {0.3, 0.4, 0.1, 0.05, 0.05, 0.05, 0.05, 0.0};
        Draws g = sample(logits(PROBS, other), 2, 8, 8, 0, 0, 1, null);  // greedy needs no uniforms
        assertArrayEquals(new long[] {2, 1}, g.tokens());
        assertEquals(Math.log(0.5), g.logprobs()[0], 1e-6);
        assertEquals(Math.log(0.4), g.logprobs()[1], 1e-6);
        // temperature 1, no filter: the CDF over ids 0..7 is 0.1, 0.1, 0.6, 0.65, 0.8, 0.8, 1.0, 1.0
        double[] u = {0.0, 0.05, 0.1, 0.59, 0.62, 0.7, 0.99, 0.999999};
        double[][] rows = new double[u.length][];
        Arrays.fill(rows, PROBS);
        Draws d = sample(logits(rows), u.length, 8, 8, 1, 0, 1, u);
        long[] want = {0, 0, 2, 2, 3, 4, 6, 6};
        assertArrayEquals(want, d.tokens());
        for (int b = 0; b < u.length; b++) assertEquals(Math.log(PROBS[(int) want[b]]), d.logprobs()[b], 1e-5);
        // the log-prob is of the scaled distribution before the filters
        Draws f = sample(logits(PROBS), 1, 8, 8, 2, 1, 1, new double[] {0.5});
        assertEquals(2, f.tokens()[0]);
        double z = 0;
        for (double p : PROBS) z += Math.sqrt(p);
        assertEquals(Math.log(Math.sqrt(0.5) / z), f.logprobs()[0], 1e-5);
    }

    @Test
    void aRowThatIsNoDistributionGetsANaNLogProb() {
        float nan = Float.NaN;
        float ninf = Float.NEGATIVE_INFINITY;
        float[] z = {0.5f, nan, 2, 2, ninf, ninf, ninf, ninf};
        Draws d = sample(z, 2, 4, 4, 0.6, 0, 1, new double[] {0.3, 0.3});
        assertEquals(2, d.tokens()[0], "the first largest non-NaN logit");
        assertTrue(Float.isNaN(d.logprobs()[0]));
        assertEquals(0, d.tokens()[1], "all -inf");
        assertTrue(Float.isNaN(d.logprobs()[1]));
    }

    @Test
    void sampleErrorsAreNamedAndWriteNothing() {
        float[] z = new float[3 * 8];
        long[] tok = {-1, -1, -1};
        float[] lp = {-1, -1, -1};
        var e = assertThrows(IllegalArgumentException.class, () -> Kernels.sample(3, 8, seg(z), 8, 1, 0, 1,
                MemorySegment.ofArray(new double[2]), MemorySegment.ofArray(tok), MemorySegment.ofArray(lp)));
        assertTrue(e.getMessage().contains("uniforms"), e.getMessage());
        e = assertThrows(IllegalArgumentException.class, () -> Kernels.sample(3, 8, seg(new float[2 * 8 + 7]), 8, 1, 0, 1,
                MemorySegment.ofArray(new double[3]), MemorySegment.ofArray(tok), MemorySegment.ofArray(lp)));
        assertTrue(e.getMessage().contains("logits"), e.getMessage());
        DrmasException d = assertThrows(DrmasException.class, () -> Kernels.sample(3, 8, seg(z), 8, 1, 0, 1,
                MemorySegment.ofArray(new double[] {0.1, 1.0, 0.2}), MemorySegment.ofArray(tok), MemorySegment.ofArray(lp)));
        assertTrue(d.getMessage().contains("uniforms[1]"), d.getMessage());
        d = assertThrows(DrmasException.class, () -> sample(z, 3, 8, 8, 1, 0, 0, new double[3]));
        assertTrue(d.getMessage().contains("top_p"), d.getMessage());
        d = assertThrows(DrmasException.class, () -> sample(z, 3, 8, 8, -1, 0, 1, new double[3]));
        assertTrue(d.getMessage().contains("temperature"), d.getMessage());
        d = assertThrows(DrmasException.class, () -> sample(z, 3, 8, 8, 0.7, 0, 1, null));
        assertTrue(d.getMessage().contains("uniforms is NULL"), d.getMessage());
        assertArrayEquals(new long[] {-1, -1, -1}, tok);
        assertArrayEquals(new float[] {-1, -1, -1}, lp);
    }
}
