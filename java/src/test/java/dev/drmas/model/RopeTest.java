// RopeTest.java — rotary embeddings against numbers worked out by hand from the formulas: the
// inverse frequencies theta^(-2i/d) with no, linear and llama3 scaling (each llama3 band hit), and
// the rotation of the pairs (j, j + d/2) by position × frequency, out of place and in place, with
// LibTorch's angles and with the decoding step's (made in Java).
package dev.drmas.model;

import static dev.drmas.algo.TorchReference.floats;
import static dev.drmas.algo.TorchReference.longs;
import static dev.drmas.algo.TorchReference.toFloats;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.drmas.algo.Tolerance;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

class RopeTest {
    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    @Test
    void inverseFrequenciesWithoutScaling() {
        // head_dim 8, theta 10000: 10000^(-0/8), 10000^(-2/8), 10000^(-4/8), 10000^(-6/8)
        assertArrayEquals(new double[]{1, 0.1, 0.01, 0.001}, Rope.inverseFrequencies(8, 10000, null), 1e-15);
        // head_dim 4, theta 1e6: 1, 1e6^(-1/2)
        assertArrayEquals(new double[]{1, 0.001}, Rope.inverseFrequencies(4, 1e6, null), 1e-15);
    }

    @Test
    void linearScalingDividesEveryFrequency() {
        assertArrayEquals(new double[]{0.25, 0.025, 0.0025, 0.00025},
                Rope.inverseFrequencies(8, 10000, RopeScaling.linear(4)), 1e-15);
    }

    @Test
    void llama3ScalingKeepsHighDividesLowAndBlendsTheMiddle() {
        // factor 8, low_freq_factor 1, high_freq_factor 4, original context 64:
        // wavelengths 2π/f = 6.28, 62.8, 628, 6283 against the band [64/4, 64/1] = [16, 64]
        //   6.28 < 16          -> unchanged: 1
        //   16 <= 62.8 <= 64   -> s = (64/62.83 − 1)/(4 − 1) = 0.0061972...; (1 − s)·0.1/8 + s·0.1 = 0.0130422560...
        //   628, 6283 > 64     -> divided by 8: 0.00125, 0.000125
        double[] f = Rope.inverseFrequencies(8, 10000, RopeScaling.llama3(8, 1, 4, 64));
        assertArrayEquals(new double[]{1, 0.013042256043820465, 0.00125, 0.000125}, f, 1e-15);
    }

    @Test
    void llama3BandEdgesScaleWithBothFactors() {
        // low_freq_factor 2 (not 1, where original / low_freq_factor is the original itself): the
        // band of original 64 is [64/4, 64/2] = [16, 32], so 62.8 lies above it (divided by 8); of
        // original 128 it is [32, 64], where 62.8 is blended: s = (128/62.83 − 2)/(4 − 2) = 0.0185916...,
        // (1 − s)·0.1/8 + s·0.1 = 0.0141267681...
        assertArrayEquals(new double[]{1, 0.0125, 0.00125, 0.000125},
                Rope.inverseFrequencies(8, 10000, RopeScaling.llama3(8, 2, 4, 64)), 1e-15);
        assertArrayEquals(new double[]{1, 0.01412676813146139, 0.00125, 0.000125},
                Rope.inverseFrequencies(8, 10000, RopeScaling.llama3(8, 2, 4, 128)), 1e-15);
    }

    @Test
    void rotationTurnsEachPairJAndJPlusHalfByPositionTimesFrequency() {
        try (PointerScope scope = new PointerScope()) {
            int d = 8, half = 4;
            long[] positions = {3, 10};
            double[] freq = {1, 0.1, 0.01, 0.001};
            float[] x = new float[2 * d];
            for (int i = 0; i < x.length; i++) x[i] = (float) Math.sin(1.7 * i + 0.3); // arbitrary, non-zero
            float[] expected = new float[x.length];
            for (int t = 0; t < 2; t++) {
                for (int j = 0; j < half; j++) {
                    double angle = positions[t] * freq[j];
                    double a = x[t * d + j], b = x[t * d + j + half];
                    expected[t * d + j] = (float) (a * Math.cos(angle) - b * Math.sin(angle));
                    expected[t * d + j + half] = (float) (b * Math.cos(angle) + a * Math.sin(angle));
                }
            }
            Tensor invFreq = floats(1f, 0.1f, 0.01f, 0.001f);
            Rope.Angles angles = Rope.angles(longs(positions).view(1, 2), invFreq, ScalarType.Float); // batch 1, 2 tokens
            Tensor y = angles.rotate(floats(x).view(1, 1, 2, d), false);                               // 1 head
            Tolerance.assertClose("rotated", toFloats(y), expected, 1e-5, 0);
            // in place (a decoding step's buffer): the same rotation, written into x
            Tensor buffer = floats(x).view(1, 1, 2, d);
            Tensor z = angles.rotate(buffer, true);
            Tolerance.assertClose("rotated in place", toFloats(buffer), expected, 1e-5, 0);
            assertEquals(buffer.data_ptr().address(), z.data_ptr().address(), "in place returns its input");
            // the decoding step's angles, made in Java for its rows (here 2 rows of 1 token, 1 head)
            Rope.Angles java = Rope.angles(positions, new float[]{1f, 0.1f, 0.01f, 0.001f}, 2, 1, d);
            Tolerance.assertClose("rotated with Java's angles", toFloats(java.rotate(floats(x).view(2, 1, d), true)), expected,
                    1e-5, 0);
        }
    }

    @Test
    void javaAnglesAreWithinAnUlpOrTwoOfLibTorchs() {
        // the decoding step makes cos and sin in Java (double, rounded to float32), the general
        // pass in LibTorch's float32: both round the same float32 angle, so they differ by at
        // most the two functions' errors (≤ 1 ulp each), up to long contexts
        try (PointerScope scope = new PointerScope()) {
            int d = 64;
            double[] f = Rope.inverseFrequencies(d, 1e6, null);
            float[] f32 = new float[f.length];
            for (int i = 0; i < f.length; i++) f32[i] = (float) f[i];
            long[] positions = new long[300];
            for (int i = 0; i < positions.length; i++) positions[i] = i < 200 ? i : 200 + 157L * i;  // up to ~47k
            Rope.Angles torchAngles = Rope.angles(longs(positions).view(1, -1), floats(f32), ScalarType.Float);
            Rope.Angles javaAngles = Rope.angles(positions, f32, positions.length, d);
            Tolerance.assertClose("cos", toFloats(javaAngles.cos()), toFloats(torchAngles.cos()), 2.5e-7, 0);
            Tolerance.assertClose("signed sin", toFloats(javaAngles.sinSigned()), toFloats(torchAngles.sinSigned()), 2.5e-7, 0);
        }
    }
}
