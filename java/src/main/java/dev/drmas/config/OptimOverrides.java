// OptimOverrides.java — `agents[i].optim:`: optimiser settings an agent sets for its model, each
// null when not set. A model's optimiser takes its own settings with every override of its agents
// applied; agents sharing a model must not set one key to different values (RunConfig checks).
package dev.drmas.config;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The keys and checks of {@link OptimConfig}; null (default) = not overridden.
 *
 * @param lr          see {@link OptimConfig#lr()}
 * @param betas       see {@link OptimConfig#betas()}
 * @param eps         see {@link OptimConfig#eps()}
 * @param weightDecay see {@link OptimConfig#weightDecay()}
 * @param warmupSteps see {@link OptimConfig#warmupSteps()}
 * @param gradClip    see {@link OptimConfig#gradClip()}
 */
public record OptimOverrides(Double lr, List<Double> betas, Double eps, Double weightDecay, Integer warmupSteps,
                             Double gradClip) {
    public static final OptimOverrides NONE = new OptimOverrides(null, null, null, null, null, null);

    public OptimOverrides {
        if (lr != null) OptimConfig.checkLr(lr, "lr");
        if (betas != null) betas = OptimConfig.checkBetas(betas, "betas");
        if (eps != null) Check.positiveFloat32(eps, "eps");
        if (weightDecay != null) OptimConfig.checkWeightDecay(weightDecay, "weight_decay");
        if (warmupSteps != null) Check.nonNegative(warmupSteps, "warmup_steps");
        if (gradClip != null) Check.nonNegative(gradClip, "grad_clip");
    }

    public static OptimOverrides defaults() {
        return NONE;
    }

    /** The overridden keys (snake_case) and their values, in declaration order. */
    public Map<String, Object> set() {
        Map<String, Object> m = new LinkedHashMap<>();
        if (lr != null) m.put("lr", lr);
        if (betas != null) m.put("betas", betas);
        if (eps != null) m.put("eps", eps);
        if (weightDecay != null) m.put("weight_decay", weightDecay);
        if (warmupSteps != null) m.put("warmup_steps", warmupSteps);
        if (gradClip != null) m.put("grad_clip", gradClip);
        return m;
    }
}
