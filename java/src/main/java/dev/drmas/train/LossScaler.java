// LossScaler.java — the loss scale of a model trained in float16 with fp32 masters
// (models.<id>.loss_scale), as torch.amp's GradScaler, Megatron's DynamicGradScaler and DeepSpeed's
// fp16 loss scaler: the backward runs on loss × S so that small gradients stay above float16's
// smallest value; ModelOptimizer divides by S as it takes the float16 .grad into fp32, so clipping,
// the norm and AdamW see the true gradient. Dynamic: a step whose gradient is not finite is skipped
// and S halves, though not below MIN; after growthInterval steps in a row that were taken, S doubles.
// Fixed: S never
// changes (a non-finite step is still skipped). The state (S, the good steps in a row) goes into
// checkpoints, so that a resumed run scales as an uninterrupted one.
package dev.drmas.train;

import dev.drmas.config.ModelSpec;

public final class LossScaler {
    /** torch.amp.GradScaler's defaults. */
    public static final double INITIAL = 65536, GROWTH = 2, BACKOFF = 0.5;
    /**
     * The smallest dynamic scale, as Megatron's and DeepSpeed's (min_loss_scale 1; torch's GradScaler
     * has none): a run of non-finite steps from another cause (a forward that overflows) would
     * otherwise halve S until every gradient underflows to 0, steps that AdamW takes on stale moments,
     * and past 2^-128 makes 1/S infinite in fp32 and every step NaN for good.
     */
    public static final double MIN = 1;
    /** The largest scale float32 holds (the loss is multiplied by it in fp32). */
    static final double MAX = Float.MAX_VALUE;
    public static final int INTERVAL = 2000;

    private final boolean dynamic;
    private final int growthInterval;
    private final double floor;  // MIN, or the initial scale where that is below it
    private double scale;
    private long goodSteps;

    private LossScaler(boolean dynamic, double scale, int growthInterval) {
        if (!(scale > 0) || scale > MAX) throw new IllegalArgumentException("loss scale must be a number > 0 and <= " + MAX + ", got " + scale);
        if (growthInterval < 1) throw new IllegalArgumentException("growth interval must be >= 1, got " + growthInterval);
        this.dynamic = dynamic;
        this.scale = scale;
        this.floor = Math.min(MIN, scale);
        this.growthInterval = growthInterval;
    }

    /** Dynamic scaling from {@code initial}, doubled after {@code growthInterval} good steps in a row. */
    public static LossScaler dynamic(double initial, int growthInterval) {
        return new LossScaler(true, initial, growthInterval);
    }

    /** A scale that never changes. */
    public static LossScaler fixed(double scale) {
        return new LossScaler(false, scale, 1);
    }

    /** The scaler models.<id> asks for, or null where it asks for none (ModelSpec resolves auto). */
    public static LossScaler of(ModelSpec spec) {
        ModelSpec.LossScaling s = spec.lossScaling();
        return switch (s.mode()) {
            case NONE -> null;
            case DYNAMIC -> dynamic(spec.lossScaleInit(), spec.lossScaleGrowthInterval());
            case FIXED -> fixed(s.fixedScale());
        };
    }

    /** The factor the backward's loss is multiplied by. */
    public double scale() {
        return scale;
    }

    public boolean isDynamic() {
        return dynamic;
    }

    /** Steps taken in a row since the scale last changed. */
    public long goodSteps() {
        return goodSteps;
    }

    /**
     * After each optimiser step's decision: {@code taken} (the gradient was finite) counts towards the
     * growth, a skipped step halves the scale and starts the count again. Nothing for a fixed scale.
     */
    void update(boolean taken) {
        if (!dynamic) return;
        if (!taken) {
            scale = Math.max(floor, scale * BACKOFF);
            goodSteps = 0;
        } else if (++goodSteps >= growthInterval) {
            if (scale * GROWTH <= MAX) scale *= GROWTH;
            goodSteps = 0;
        }
    }

    /** Restores a dynamic scaler's state from a checkpoint. */
    void restore(double scale, long goodSteps) {
        if (!(scale > 0) || scale > MAX) throw new IllegalArgumentException("the loss scale must be a number > 0 and <= " + MAX + ", got " + scale);
        if (goodSteps < 0) throw new IllegalArgumentException("the loss scale's good steps must be >= 0, got " + goodSteps);
        this.scale = scale;
        this.goodSteps = goodSteps;
    }
}
