// ClipGradNormTest.java — ModelOptimizer.clipGradNorm against torch.nn.utils.clip_grad_norm_'s
// rule written out in plain Java: the returned norm is the L2 norm of all gradients together, and
// every gradient is scaled by max / (norm + 1e-6) where that is below 1 (torch clamps it at 1:
// above the maximum, and within 1e-6 under it); otherwise, or with max 0 (no clipping), nothing
// changes. In full precision (the parameters' .grad) and in mixed
// precision (the fp32 accumulators AdamW then reads). Adam's steps hardly depend on a uniform
// scale of the gradients, so a lost or wrong clip does not show in the weights of a few steps.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;

import dev.drmas.model.Scopes;
import dev.drmas.model.Tensors;
import java.util.LinkedHashMap;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;

class ClipGradNormTest {
    static final float[] G1 = {0.5f, -1.5f, 2.0f}, G2 = {-0.25f, 1.0f, 3.0f, -0.75f};

    /** Two parameters whose .grad are G1 and G2 (in {@code dtype}). */
    private static Map<String, Tensor> params(ScalarType dtype) {
        Map<String, Tensor> ps = new LinkedHashMap<>();
        float[][] gs = {G1, G2};
        for (int k = 0; k < 2; k++) {
            Tensor w = Scopes.retain(Tensors.floats(new float[gs[k].length]).to(dtype));
            w.set_requires_grad(true);
            w.mul(Tensors.floats(gs[k]).to(dtype)).sum().backward();  // d/dw Σ w·g = g
            ps.put("w" + k, w);
        }
        return ps;
    }

    private static double norm() {
        double sq = 0;
        for (float g : G1) sq += (double) g * g;
        for (float g : G2) sq += (double) g * g;
        return Math.sqrt(sq);
    }

    @Test
    void fullPrecisionScalesTheGradientsAboveTheMaximum() {
        final double norm = norm(), max = 1.5;  // norm ≈ 4.39
        try (PointerScope scope = new PointerScope()) {
            Map<String, Tensor> ps = params(ScalarType.Float);
            try (ModelOptimizer o = ModelOptimizer.create(ps, AdamW.Settings.of(1e-3), false)) {
                assertEquals(norm, o.gradNorm(), 1e-12 * norm);
                assertEquals(norm, o.clipGradNorm(max), 1e-12 * norm, "the norm before clipping");
                double coef = max / (norm + 1e-6);
                float[][] gs = {G1, G2};
                for (int k = 0; k < 2; k++) {
                    float[] got = Tensors.toFloats(ps.get("w" + k).grad());
                    for (int i = 0; i < got.length; i++) {
                        double want = gs[k][i] * coef;
                        assertEquals(want, got[i], 1e-7 + 1e-6 * Math.abs(want), "w" + k + ".grad[" + i + "]");
                    }
                }
                assertEquals(max, o.gradNorm(), 1e-6, "the clipped norm");
                // at or below the maximum, and with 0 (no clipping): untouched
                float[] before = Tensors.toFloats(ps.get("w1").grad());
                assertEquals(o.gradNorm(), o.clipGradNorm(2 * max), 0.0);
                assertEquals(o.gradNorm(), o.clipGradNorm(0), 0.0);
                assertArrayEquals(before, Tensors.toFloats(ps.get("w1").grad()));
                // the clipped norm is max · norm / (norm + 1e-6), just under max: torch scales it
                // again, by max / (n1 + 1e-6) < 1
                double n1 = o.gradNorm();
                assertEquals(true, n1 < max && max / (n1 + 1e-6) < 1, "the clipped norm lies in the band under the maximum");
                double again = max / (n1 + 1e-6);
                assertEquals(n1, o.clipGradNorm(max), 0.0);
                float[] after = Tensors.toFloats(ps.get("w1").grad());
                for (int i = 0; i < after.length; i++) {
                    // (1 - again ≈ 4e-7 is several float ulps of each gradient: unscaled ones fail)
                    float want = (float) (before[i] * again);
                    assertEquals(want, after[i], Math.ulp(want), "w1.grad[" + i + "] scaled by torch's clamped factor");
                }
            }
        }
    }

    @Test
    void mixedPrecisionScalesTheFp32Accumulators() {
        // G1 and G2 are exact in bf16, so the accumulators hold them exactly
        final double norm = norm(), max = 2.0;
        try (PointerScope scope = new PointerScope()) {
            Map<String, Tensor> ps = params(ScalarType.BFloat16);
            try (ModelOptimizer o = ModelOptimizer.create(ps, AdamW.Settings.of(1e-3), true)) {
                o.afterBackward();
                assertEquals(norm, o.clipGradNorm(max), 1e-12 * norm, "the norm before clipping");
                assertEquals(max * norm / (norm + 1e-6), o.gradNorm(), 1e-6, "the accumulators' norm after clipping");
                assertEquals(o.gradNorm(), o.clipGradNorm(0), 0.0, "max 0: no clipping");
            }
        }
    }

    /**
     * The norm's square and the ranks' weight checksum are each tensor's fp64 sums added in the
     * tensors' order, bit for bit (they are summed on the tensors' device and read once; ranks compare
     * the checksums for equality, so their bits matter), skipping undefined gradients.
     */
    @Test
    void theSquaredNormAndTheChecksumAreThePerTensorFp64SumsAddedInOrder() {
        try (PointerScope scope = new PointerScope()) {
            torch.manual_seed(11);
            java.util.List<Tensor> ts = new java.util.ArrayList<>();
            long[][] shapes = {{37}, {5, 3}, {0}, {1}, {129, 7}, {2, 2, 2}};
            for (long[] sh : shapes) ts.add(torch.randn(sh).mul(new org.bytedeco.pytorch.Scalar(1e3)).to(ScalarType.BFloat16));
            double sq = 0, sum = 0, sq2 = 0;
            for (Tensor t : ts) {
                Tensor d = t.to(ScalarType.Double);
                sq += d.mul(d).sum().item_double();
                sum += d.sum().item_double();
            }
            sq2 = sq;
            java.util.List<Tensor> withHoles = new java.util.ArrayList<>(ts);
            withHoles.add(1, null);
            withHoles.add(new Tensor());  // undefined
            assertEquals(Double.doubleToRawLongBits(sq), Double.doubleToRawLongBits(GradNorm.squaredSum(withHoles)), "squaredSum");
            double[] c = Policies.checksum(ts);
            assertEquals(Double.doubleToRawLongBits(sum), Double.doubleToRawLongBits(c[0]), "checksum sum");
            assertEquals(Double.doubleToRawLongBits(sq2), Double.doubleToRawLongBits(c[1]), "checksum sum of squares");
            assertEquals(0.0, GradNorm.squaredSum(java.util.List.of()));
            assertArrayEquals(new double[2], Policies.checksum(java.util.List.of()));
        }
    }
}
