// AdamW.java — the optimiser of one model, written with LibTorch's in-place tensor ops rather than
// torch::optim so that its state is a plain map of named tensors: checkpoints store it as
// safetensors next to the weights, and resuming is exact. Decoupled weight decay (Loshchilov &
// Hutter), bias-corrected moments and a linear warm-up of the learning rate, as torch.optim.AdamW.
package dev.drmas.train;

import dev.drmas.model.Scopes;
import java.util.LinkedHashMap;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;

public final class AdamW implements AutoCloseable {
    /** lr, betas, eps, weight decay, warm-up steps (lr ramps linearly from lr/warmup to lr). */
    public record Settings(double lr, double beta1, double beta2, double eps, double weightDecay, int warmupSteps) {
        public Settings {
            if (!(lr > 0) || Double.isInfinite(lr)) throw new IllegalArgumentException("lr must be > 0, got " + lr);
            if (!(beta1 >= 0 && beta1 < 1)) throw new IllegalArgumentException("beta1 must be in [0, 1), got " + beta1);
            if (!(beta2 >= 0 && beta2 < 1)) throw new IllegalArgumentException("beta2 must be in [0, 1), got " + beta2);
            if (!(eps > 0)) throw new IllegalArgumentException("eps must be > 0, got " + eps);
            if (!(weightDecay >= 0)) throw new IllegalArgumentException("weight_decay must be >= 0, got " + weightDecay);
            if (warmupSteps < 0) throw new IllegalArgumentException("warmup_steps must be >= 0, got " + warmupSteps);
        }

        public static Settings of(double lr) {
            return new Settings(lr, 0.9, 0.999, 1e-8, 0.01, 0);
        }
    }

    private final Map<String, Tensor> params;
    private final Settings s;
    private final Map<String, Tensor> expAvg = new LinkedHashMap<>(), expAvgSq = new LinkedHashMap<>();
    private long steps;

    /** Optimises {@code params} (the model's live tensors, requiring grad) in place. */
    public AdamW(Map<String, Tensor> params, Settings settings) {
        this.params = params;
        this.s = settings;
        try (PointerScope scope = new PointerScope()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                expAvg.put(e.getKey(), Scopes.retain(torch.zeros_like(e.getValue()).detach()));
                expAvgSq.put(e.getKey(), Scopes.retain(torch.zeros_like(e.getValue()).detach()));
            }
        }
    }

    public Settings settings() {
        return s;
    }

    /** Optimiser steps taken so far. */
    public long steps() {
        return steps;
    }

    /** The learning rate of the next step (after warm-up). */
    public double currentLr() {
        return lrOfStep(steps);
    }

    /** The learning rate the latest step used (what metrics report, as torch's get_last_lr); NaN before the first step. */
    public double lastLr() {
        return steps == 0 ? Double.NaN : lrOfStep(steps - 1);
    }

    /** The learning rate of step {@code i} (from 0): lr/warmup, 2·lr/warmup, ... up to lr. */
    private double lrOfStep(long i) {
        return s.warmupSteps() > 0 && i < s.warmupSteps() ? s.lr() * (i + 1) / s.warmupSteps() : s.lr();
    }

    /** The tensors this optimiser updates in place, by name. */
    public Map<String, Tensor> weights() {
        return params;
    }

    /** One update from the parameters' .grad (parameters without a gradient are left alone). */
    public void step() {
        step(null);
    }

    /**
     * One update from {@code grads} (by name; null: each parameter's own .grad). A missing or
     * undefined gradient leaves its parameter alone. Mixed precision passes the fp32 accumulators
     * of the master weights here.
     */
    public void step(Map<String, Tensor> grads) {
        final double lr = currentLr();
        steps++;
        final double bc1 = 1 - Math.pow(s.beta1(), steps), bc2 = 1 - Math.pow(s.beta2(), steps);
        try (NoGradGuard ng = new NoGradGuard()) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                // a scope per parameter, so that its denominator is freed before the next one's
                // exists: one around the loop held a float32 copy of every parameter until the last
                try (PointerScope scope = new PointerScope()) {
                    Tensor p = e.getValue();
                    Tensor g = grads == null ? p.grad() : grads.get(e.getKey());
                    if (g == null || !g.defined()) continue;
                    Tensor m = expAvg.get(e.getKey()), v = expAvgSq.get(e.getKey());
                    if (s.weightDecay() > 0) p.mul_(new Scalar(1 - lr * s.weightDecay()));
                    m.mul_(new Scalar(s.beta1())).add_(g, new Scalar(1 - s.beta1()));
                    v.mul_(new Scalar(s.beta2())).addcmul_(g, g, new Scalar(1 - s.beta2()));
                    Tensor denom = v.sqrt().div_(new Scalar(Math.sqrt(bc2))).add_(new Scalar(s.eps()));
                    p.addcdiv_(m, denom, new Scalar(-lr / bc1));
                }
            }
        }
    }

    /** Drops every parameter's gradient (set to zero in place). */
    public void zeroGrad() {
        try (PointerScope scope = new PointerScope()) {
            for (Tensor p : params.values()) {
                Tensor g = p.grad();
                if (g.defined()) g.detach_().zero_();
            }
        }
    }

    /** The state as named tensors (live views: copy before changing) plus the step count. */
    public Map<String, Tensor> state() {
        Map<String, Tensor> out = new LinkedHashMap<>();
        expAvg.forEach((k, t) -> out.put("exp_avg." + k, t));
        expAvgSq.forEach((k, t) -> out.put("exp_avg_sq." + k, t));
        return out;
    }

    /** Restores a state written by {@link #state()} and {@code steps} (shapes must match). */
    public void load(Map<String, Tensor> state, long steps) {
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            for (String k : params.keySet()) {
                copy(state, "exp_avg." + k, expAvg.get(k));
                copy(state, "exp_avg_sq." + k, expAvgSq.get(k));
            }
        }
        this.steps = steps;
    }

    /** The step count of a state restored in place (a sharded optimiser reads its part of the moments straight into {@link #state}'s tensors). */
    void restoreSteps(long steps) {
        this.steps = steps;
    }

    private static void copy(Map<String, Tensor> state, String name, Tensor into) {
        Tensor t = state.get(name);
        if (t == null) throw new IllegalArgumentException("optimizer state has no tensor " + name);
        if (!java.util.Arrays.equals(shape(t), shape(into))) {
            throw new IllegalArgumentException("optimizer state " + name + " has shape " + java.util.Arrays.toString(shape(t))
                    + ", the parameter has " + java.util.Arrays.toString(shape(into)));
        }
        into.copy_(t);
    }

    static long[] shape(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    @Override
    public void close() {
        for (Tensor t : expAvg.values()) t.releaseReference();
        for (Tensor t : expAvgSq.values()) t.releaseReference();
        expAvg.clear();
        expAvgSq.clear();
    }
}
