// OptimConfig.java — `models.<id>.optim:`: the AdamW settings of one model's optimiser (verl's
// actor defaults), with the checks that agent overrides (OptimOverrides) share.
package dev.drmas.config;

import java.util.List;

/**
 * @param lr          peak learning rate, &gt; 0; default 1e-6
 * @param betas       AdamW (β1, β2), each in [0, 1); default [0.9, 0.999]
 * @param eps         AdamW ε, &gt; 0; default 1e-8
 * @param weightDecay decoupled weight decay, &gt;= 0; default 0.01
 * @param warmupSteps linear warm-up over this many optimiser steps W, then constant: step i
 *                    (from 0) uses lr·(i + 1)/W, so the first step takes lr/W and step W − 1 the
 *                    full lr (AdamW.lrOfStep); default 0 (lr from the first step). Counted in
 *                    optimiser steps, not training steps: a training step of n mini-batches
 *                    (ppo.updates_per_step, or rows / mini_batch_size) advances it by n, where
 *                    verl's scheduler advances once per training step
 * @param gradClip    clip the model's gradient norm to this; 0 = no clipping (the norm is still
 *                    computed, and a non-finite norm still skips the step); default 1.0
 */
public record OptimConfig(double lr, List<Double> betas, double eps, double weightDecay, int warmupSteps,
                          double gradClip) {
    public OptimConfig {
        checkLr(lr, "lr");
        betas = checkBetas(betas, "betas");
        Check.positiveFloat32(eps, "eps");
        checkWeightDecay(weightDecay, "weight_decay");
        Check.nonNegative(warmupSteps, "warmup_steps");
        Check.nonNegative(gradClip, "grad_clip");
    }

    public static OptimConfig defaults() {
        return new OptimConfig(1e-6, List.of(0.9, 0.999), 1e-8, 0.01, 0, 1.0);
    }

    public double beta1() {
        return betas.get(0);
    }

    public double beta2() {
        return betas.get(1);
    }

    /** These settings with an agent's overrides applied (its non-null fields). */
    public OptimConfig with(OptimOverrides o) {
        return new OptimConfig(o.lr() != null ? o.lr() : lr, o.betas() != null ? o.betas() : betas,
                o.eps() != null ? o.eps() : eps, o.weightDecay() != null ? o.weightDecay() : weightDecay,
                o.warmupSteps() != null ? o.warmupSteps() : warmupSteps, o.gradClip() != null ? o.gradClip() : gradClip);
    }

    static void checkLr(double lr, String key) {
        Check.positiveFloat32(lr, key);
    }

    static void checkWeightDecay(double weightDecay, String key) {
        Check.nonNegative(weightDecay, key);
        Check.that(weightDecay <= Float.MAX_VALUE, key, "must be <= " + Float.MAX_VALUE + " (LibTorch takes it as a float32), got "
                + Check.num(weightDecay));
    }

    static List<Double> checkBetas(List<Double> betas, String key) {
        Check.given(betas, key);
        Check.that(betas.size() == 2, key, "must be two numbers [beta1, beta2], got a list of " + betas.size());
        for (int i = 0; i < 2; i++) {
            Double b = betas.get(i);
            Check.given(b, key + "[" + i + "]");
            Check.inRange(b, 0, 1, true, key + "[" + i + "]");
        }
        return List.copyOf(betas);
    }
}
