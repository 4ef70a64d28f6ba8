// GradNorm.java — the global gradient norm of a model and clipping to a maximum, as
// torch.nn.utils.clip_grad_norm_: one norm over all parameters' gradients (accumulated in fp64),
// scaled by max/(norm + 1e-6) when above the maximum. A non-finite norm is reported, not applied.
package dev.drmas.train;

import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class GradNorm {
    private GradNorm() {
    }

    /** The L2 norm of all defined gradients. */
    public static double of(Map<String, Tensor> params) {
        double sq = 0;
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (Tensor p : params.values()) {
                Tensor g = p.grad();
                if (!g.defined()) continue;
                Tensor gd = g.to(ScalarType.Double);
                sq += gd.mul(gd).sum().item_double();
            }
        }
        return Math.sqrt(sq);
    }

    /**
     * The norm before clipping; gradients are scaled down to {@code max} when the norm exceeds it
     * ({@code max} 0: no clipping). When the norm is not finite nothing is changed.
     */
    public static double clip(Map<String, Tensor> params, double max) {
        double norm = of(params);
        if (max > 0 && Double.isFinite(norm) && norm > max) {
            double coef = max / (norm + 1e-6);
            try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
                for (Tensor p : params.values()) {
                    Tensor g = p.grad();
                    if (g.defined()) g.mul_(new Scalar(coef));
                }
            }
        }
        return norm;
    }
}
