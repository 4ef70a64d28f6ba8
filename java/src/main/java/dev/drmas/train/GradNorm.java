// GradNorm.java — the global gradient norm of a model and clipping to a maximum, as
// torch.nn.utils.clip_grad_norm_: one norm over all parameters' gradients (accumulated in fp64),
// scaled by max/(norm + 1e-6) where that is below 1 (torch clamps the factor at 1, so a norm within
// 1e-6 under the maximum is scaled too). A non-finite norm is reported, not applied.
package dev.drmas.train;

import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class GradNorm {
    private GradNorm() {
    }

    /** The L2 norm of all defined gradients. */
    public static double of(Map<String, Tensor> params) {
        return Math.sqrt(squaredSum(grads(params)));
    }

    /** The sum of the squares of the defined tensors' elements (fp64): a norm's square, which shards add up. */
    public static double squaredSum(Iterable<Tensor> grads) {
        try (PointerScope outer = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            // the running sum stays on the tensors' device and is read once at the end: an item() per
            // tensor was a host synchronisation per parameter on a GPU. Each add is the same fp64
            // addition in the same order as a Java double sum, so the result has the same bits.
            Tensor acc = null;
            for (Tensor g : grads) {
                if (g == null || !g.defined()) continue;
                // a scope per tensor: one around the loop held every gradient's fp64 copy and its
                // square (16 bytes a parameter of the whole model) until the last
                if (acc == null) acc = torch.zeros(new long[0], new TensorOptions(ScalarType.Double).device(new DeviceOptional(g.device())));
                try (PointerScope scope = new PointerScope()) {
                    Tensor gd = g.to(ScalarType.Double);
                    acc.add_(gd.mul(gd).sum());
                }
            }
            return acc == null ? 0 : acc.item_double();
        }
    }

    /**
     * Scales every defined tensor by {@code max/(norm + 1e-6)} where that is below 1, for a finite
     * {@code norm} and {@code max} &gt; 0: torch's {@code clamp(max / (norm + 1e-6), max=1)}, without
     * the multiplications by 1.
     */
    public static void scale(Iterable<Tensor> grads, double norm, double max) {
        if (!(max > 0 && Double.isFinite(norm))) return;
        double coef = max / (norm + 1e-6);
        if (!(coef < 1)) return;
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Tensor g : grads) {
                if (g != null && g.defined()) g.mul_(new Scalar(coef));
            }
        }
    }

    private static java.util.List<Tensor> grads(Map<String, Tensor> params) {
        java.util.List<Tensor> g = new java.util.ArrayList<>(params.size());
        for (Tensor p : params.values()) g.add(p.grad());
        return g;
    }
}
