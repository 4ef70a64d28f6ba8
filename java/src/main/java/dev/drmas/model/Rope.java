// Rope.java — rotary position embeddings as HF transformers computes them: inverse frequencies
// theta^(-2i/d) (stretched by linear or llama3 rope_scaling), angles position × frequency with
// the frequencies repeated over both halves of a head, and the rotate_half convention (the
// pairs rotated together are (j, j + d/2), not adjacent elements).
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
     * The rotation of one forward's positions: cos and sin of the angles, [B, 1, T, headDim] in
     * the model dtype, with sin's first half negated ({@code sinSigned}), so that rotate_half(x)·sin
     * is roll(x, d/2)·sinSigned: the same products, exactly (negating a factor negates the
     * rounded product), in 2 LibTorch calls instead of 5 (narrow, neg, narrow, cat and mul).
     */
    record Angles(Tensor cos, Tensor sinSigned) {
        /** x·cos + rotate_half(x)·sin for x [B, heads, T, headDim]; rotate_half(x) = [−x₂, x₁]. */
        Tensor apply(Tensor x) {
            long half = cos.size(-1) / 2;
            return x.mul(cos).add(x.roll(new long[]{half}, new long[]{-1}).mul(sinSigned));
        }
    }

    /**
     * The angles of int64 {@code positions} [B, T]: computed in float32 with float32
     * {@code invFreq} [headDim/2], then cast to {@code dtype} (as HF).
     */
    static Angles angles(Tensor positions, Tensor invFreq, ScalarType dtype) {
        Tensor freqs = positions.to(ScalarType.Float).unsqueeze(-1).mul(invFreq); // [B, T, d/2]
        Tensor emb = torch.cat(new TensorVector(freqs, freqs), -1).unsqueeze(1);
        Tensor sin = emb.sin().to(dtype);
        long half = invFreq.size(0);
        Tensor sinSigned = torch.cat(new TensorVector(sin.narrow(-1, 0, half).neg(), sin.narrow(-1, half, half)), -1);
        return new Angles(emb.cos().to(dtype), sinSigned);
    }
}
