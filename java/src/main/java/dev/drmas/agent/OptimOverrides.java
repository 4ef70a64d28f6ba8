// OptimOverrides.java — optimiser settings given for one model or one agent in a config: every
// field optional (null = not set here). Merged over the defaults by Team.resolveOptim.
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.List;

public record OptimOverrides(Double lr, Double beta1, Double beta2, Double weightDecay, Integer warmupSteps,
                             Double gradClip) {

    public static final OptimOverrides NONE = new OptimOverrides(null, null, null, null, null, null);

    /** Only a learning rate: the most common override. */
    public static OptimOverrides lr(double lr) {
        return new OptimOverrides(lr, null, null, null, null, null);
    }

    /** One settable field: its config key and its value here (null when not set). */
    public record Entry(String key, Object value) {}

    /** Every field with its config key, in a fixed order, set or not. */
    public List<Entry> entries() {
        List<Entry> out = new ArrayList<>(6);
        out.add(new Entry("lr", lr));
        out.add(new Entry("beta1", beta1));
        out.add(new Entry("beta2", beta2));
        out.add(new Entry("weight_decay", weightDecay));
        out.add(new Entry("warmup_steps", warmupSteps));
        out.add(new Entry("grad_clip", gradClip));
        return out;
    }

    public boolean isEmpty() {
        return entries().stream().allMatch(e -> e.value() == null);
    }
}
