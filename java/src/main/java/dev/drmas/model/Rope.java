// Rope.java — rotary position embeddings as HF transformers computes them: inverse frequencies
// theta^(-2i/d) (stretched by linear or llama3 rope_scaling), angles position × frequency with
// the frequencies repeated over both halves of a head, and the rotate_half convention (the
// pairs rotated together are (j, j + d/2), not adjacent elements). One rotation serves every
// forward; its angles come from LibTorch for a batch of positions, or from Java for the few
// positions of a CPU decoding step.
package dev.drmas.model;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

final class Rope {
    private Rope() {
    }

    /** The headDim/2 inverse frequencies, computed in double (HF computes them in float32). */
    static double[] inverseFrequencies(int headDim, double theta, RopeScaling scaling) {
        double[] f = new double[headDim / 2];
        for (int i = 0; i < f.length; i++) f[i] = 1.0 / Math.pow(theta, (2.0 * i) / headDim);
        if (scaling == null) return f;
        double factor = scaling.factor();
        if (scaling.type() == RopeScaling.Type.LINEAR) {
            for (int i = 0; i < f.length; i++) f[i] /= factor;
            return f;
        }
        // llama3: wavelengths longer than the original context / low_freq_factor are divided by
        // factor, shorter than original / high_freq_factor kept, and the band between blended
        double old = scaling.originalMaxPositions();
        double lowWavelen = old / scaling.lowFreqFactor(), highWavelen = old / scaling.highFreqFactor();
        for (int i = 0; i < f.length; i++) {
            double wavelen = 2 * Math.PI / f[i];
            if (wavelen > lowWavelen) {
                f[i] /= factor;
            } else if (wavelen >= highWavelen) {
                double smooth = (old / wavelen - scaling.lowFreqFactor()) / (scaling.highFreqFactor() - scaling.lowFreqFactor());
                f[i] = (1 - smooth) * f[i] / factor + smooth * f[i];
            }
        }
        return f;
    }

    /**
     * The rotation of one forward's positions: cos and sin of the angles (shaped to broadcast over
     * the heads of the tensors rotated), with sin's first half negated ({@code sinSigned}), so
     * that rotate_half(x)·sin is roll(x, d/2)·sinSigned: the same products, exactly (negating a
     * factor negates the rounded product), in 2 LibTorch calls instead of 5 (narrow, neg, narrow,
     * cat and mul). {@code shift} is {d/2}.
     */
    record Angles(Tensor cos, Tensor sinSigned, long[] shift) {
        private static final long[] LAST_DIM = {-1};

        /**
         * x·cos + rotate_half(x)·sin, rotate_half(x) = [−x₂, x₁], for x [..., headDim]. In place
         * (a decoding step's buffer): x is overwritten and the sum is fused into one addcmul,
         * which rounds once where the out-of-place form rounds the product and then the sum;
         * so the two differ in the last bit, and each path keeps its own (the golden metrics
         * pin both).
         */
        Tensor rotate(Tensor x, boolean inPlace) {
            if (inPlace) {
                Tensor rot = x.roll(shift, LAST_DIM);
                return x.mul_(cos).addcmul_(rot, sinSigned);
            }
            return x.mul(cos).add(x.roll(shift, LAST_DIM).mul(sinSigned));
        }
    }

    /**
     * The angles of int64 {@code positions} [B, T], shaped [B, 1, T, headDim] for heads [B, heads, T,
     * headDim]: computed in float32 with float32 {@code invFreq} [headDim/2], then cast to
     * {@code dtype} (as HF).
     */
    static Angles angles(Tensor positions, Tensor invFreq, ScalarType dtype) {
        Tensor freqs = positions.to(ScalarType.Float).unsqueeze(-1).mul(invFreq); // [B, T, d/2]
        Tensor emb = torch.cat(new TensorVector(freqs, freqs), -1).unsqueeze(1);
        Tensor sin = emb.sin().to(dtype);
        long half = invFreq.size(0);
        Tensor sinSigned = torch.cat(new TensorVector(sin.narrow(-1, 0, half).neg(), sin.narrow(-1, half, half)), -1);
        return new Angles(emb.cos().to(dtype), sinSigned, new long[]{half});
    }

    /**
     * The angles of a few {@code positions} made in Java (float32 CPU tensors of {@code shape},
     * whose last dim is headDim): for a decoding step, the ~10 LibTorch calls of
     * {@link #angles(Tensor, Tensor, ScalarType)} cost more than a layer's arithmetic. Each angle
     * is position × frequency rounded to float32, as there; its cos and sin are computed in double
     * and rounded to float32, so they are within an ulp of LibTorch's float32 ones, not always equal.
     */
    static Angles angles(long[] positions, float[] invFreq, long... shape) {
        float[][] cs = angleArrays(positions, invFreq);
        Tensor c = Tensors.floats(cs[0]), s = Tensors.floats(cs[1]);
        if (shape.length > 1) {
            c = c.view(shape);
            s = s.view(shape);
        }
        return new Angles(c, s, new long[]{invFreq.length});
    }

    /** The same cos and sinSigned as Java arrays [positions × headDim] (the native decoding attention's). */
    static float[][] angleArrays(long[] positions, float[] invFreq) {
        int half = invFreq.length, d = 2 * half;
        float[] cos = new float[positions.length * d], sin = new float[positions.length * d];
        for (int r = 0; r < positions.length; r++) {
            for (int i = 0; i < half; i++) {
                float angle = (float) positions[r] * invFreq[i];
                int at = r * d;
                cos[at + i] = cos[at + i + half] = (float) Math.cos(angle);
                float s = (float) Math.sin(angle);
                sin[at + i] = -s;
                sin[at + i + half] = s;
            }
        }
        return new float[][]{cos, sin};
    }
}
