// AdamWTest.java — the hand-written AdamW against the update rule computed in plain Java (doubles)
// for a few steps on a small tensor, with weight decay and warm-up; and state save/restore; and
// where eps enters the denominator (after the second moment's bias correction, as torch's).
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import dev.drmas.model.Tensors;
import java.util.LinkedHashMap;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.junit.jupiter.api.Test;

class AdamWTest {
    @Test
    void matchesTheUpdateRule() {
        float[] p0 = {0.5f, -1.25f, 2.0f};
        float[][] grads = {{0.1f, -0.2f, 0.3f}, {-0.5f, 0.05f, 0.0f}, {1.0f, 1.0f, -1.0f}};
        AdamW.Settings s = new AdamW.Settings(0.1, 0.9, 0.99, 1e-8, 0.05, 2);
        // plain Java
        double[] p = {p0[0], p0[1], p0[2]}, m = new double[3], v = new double[3];
        for (int t = 1; t <= grads.length; t++) {
            double lr = t <= 2 ? 0.1 * t / 2 : 0.1;  // warm-up of 2 steps
            for (int i = 0; i < 3; i++) {
                double g = grads[t - 1][i];
                p[i] *= 1 - lr * 0.05;
                m[i] = 0.9 * m[i] + 0.1 * g;
                v[i] = 0.99 * v[i] + 0.01 * g * g;
                double mh = m[i] / (1 - Math.pow(0.9, t)), vh = v[i] / (1 - Math.pow(0.99, t));
                p[i] -= lr * mh / (Math.sqrt(vh) + 1e-8);
            }
        }
        try (PointerScope scope = new PointerScope()) {
            Tensor w = Tensors.floats(p0);
            w.set_requires_grad(true);
            Map<String, Tensor> params = new LinkedHashMap<>();
            params.put("w", w);
            try (AdamW o = new AdamW(params, s)) {
                for (float[] g : grads) {
                    w.mul(Tensors.floats(g)).sum().backward();  // d/dw of Σ w·g = g
                    o.step();
                    o.zeroGrad();
                }
                float[] got = Tensors.toFloats(w);
                for (int i = 0; i < 3; i++) assertEquals(p[i], got[i], 1e-6, "w[" + i + "]");
                assertEquals(3, o.steps());
                // the state restores into a fresh optimiser
                Tensor w2 = Tensors.floats(p0);
                w2.set_requires_grad(true);
                try (AdamW o2 = new AdamW(Map.of("w", w2), s)) {
                    o2.load(o.state(), o.steps());
                    assertEquals(o.currentLr(), o2.currentLr());
                    float[] m2 = Tensors.toFloats(o2.state().get("exp_avg.w"));
                    for (int i = 0; i < 3; i++) assertEquals(m[i], m2[i], 1e-6);
                    var e = assertThrows(IllegalArgumentException.class, () -> o2.load(Map.of(), 0));
                    assertEquals("optimizer state has no tensor exp_avg.w", e.getMessage());
                }
            }
        }
    }

    @Test
    void epsIsAddedAfterTheBiasCorrectionOfTheSecondMoment() {
        // torch.optim.AdamW: denom = sqrt(v) / sqrt(1 − beta2^t) + eps. With eps = 1e-8 (above) where
        // eps goes hardly matters; with a large eps (the PPO tests use 1e-3 against small gradients)
        // adding it before the correction, or inside the square root, changes every step.
        float[] p0 = {0.5f, -1.25f, 2.0f};
        float[][] grads = {{0.1f, -0.2f, 0.3f}, {-0.5f, 0.05f, 0.0f}, {1.0f, 1.0f, -1.0f}};
        final double lr = 0.1, b1 = 0.8, b2 = 0.9, eps = 0.05, wd = 0.0;
        double[] p = {p0[0], p0[1], p0[2]}, m = new double[3], v = new double[3];
        for (int t = 1; t <= grads.length; t++) {
            for (int i = 0; i < 3; i++) {
                double g = grads[t - 1][i];
                m[i] = b1 * m[i] + (1 - b1) * g;
                v[i] = b2 * v[i] + (1 - b2) * g * g;
                double denom = Math.sqrt(v[i]) / Math.sqrt(1 - Math.pow(b2, t)) + eps;
                p[i] -= lr / (1 - Math.pow(b1, t)) * m[i] / denom;
            }
        }
        try (PointerScope scope = new PointerScope()) {
            Tensor w = Tensors.floats(p0);
            w.set_requires_grad(true);
            try (AdamW o = new AdamW(Map.of("w", w), new AdamW.Settings(lr, b1, b2, eps, wd, 0))) {
                for (float[] g : grads) {
                    w.mul(Tensors.floats(g)).sum().backward();
                    o.step();
                    o.zeroGrad();
                }
                float[] got = Tensors.toFloats(w);
                for (int i = 0; i < 3; i++) assertEquals(p[i], got[i], 1e-6 + 1e-6 * Math.abs(p[i]), "w[" + i + "]");
            }
        }
    }
}
