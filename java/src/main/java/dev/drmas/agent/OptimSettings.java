// OptimSettings.java — the complete AdamW settings of one model's optimiser, after defaults,
// the model's own settings and its agents' overrides are merged (Team.resolveOptim). Keys are
// spelled as in configs (lr, beta1, beta2, weight_decay, warmup_steps, grad_clip).
package dev.drmas.agent;

/**
 * @param lr           peak learning rate, reached after the warm-up
 * @param beta1        AdamW first-moment decay
 * @param beta2        AdamW second-moment decay
 * @param weightDecay  decoupled weight decay
 * @param warmupSteps  linear warm-up length in optimiser steps (0: none)
 * @param gradClip     max global grad norm; +Infinity disables clipping
 */
public record OptimSettings(double lr, double beta1, double beta2, double weightDecay, int warmupSteps,
                            double gradClip) {

    /** verl's actor defaults. */
    public static final OptimSettings DEFAULTS = new OptimSettings(1e-6, 0.9, 0.999, 0.01, 0, 1.0);

    public OptimSettings {
        if (!(lr > 0) || Double.isInfinite(lr)) throw bad("lr", lr, "must be finite and > 0");
        if (!(beta1 >= 0 && beta1 < 1)) throw bad("beta1", beta1, "must be in [0, 1)");
        if (!(beta2 >= 0 && beta2 < 1)) throw bad("beta2", beta2, "must be in [0, 1)");
        if (!(weightDecay >= 0) || Double.isInfinite(weightDecay)) {
            throw bad("weight_decay", weightDecay, "must be finite and >= 0");
        }
        if (warmupSteps < 0) throw bad("warmup_steps", warmupSteps, "must be >= 0");
        if (!(gradClip > 0)) throw bad("grad_clip", gradClip, "must be > 0 (.inf disables clipping)");
    }

    private static IllegalArgumentException bad(String key, Object value, String rule) {
        return new IllegalArgumentException("optim." + key + " = " + value + " " + rule);
    }

    /** These settings with every non-null field of {@code o} replacing its own. */
    public OptimSettings with(OptimOverrides o) {
        return new OptimSettings(
                o.lr() != null ? o.lr() : lr,
                o.beta1() != null ? o.beta1() : beta1,
                o.beta2() != null ? o.beta2() : beta2,
                o.weightDecay() != null ? o.weightDecay() : weightDecay,
                o.warmupSteps() != null ? o.warmupSteps() : warmupSteps,
                o.gradClip() != null ? o.gradClip() : gradClip);
    }
}
