// LossConfig.java — the clipped PPO loss settings (ARCHITECTURE §6), defaults as verl's:
// clip 0.2/0.2, dual clip c = 3, no KL, token-mean. Their ranges are checked here and only here
// (the config layer builds one to check `ppo:`), each error naming its key.
package dev.drmas.algo;

import java.util.Objects;

/**
 * @param clipLow     ε_low in [0, 1)
 * @param clipHigh    ε_high ≥ 0
 * @param dualClip    c &gt; 1 caps the loss of A &lt; 0 tokens at −A·c; 0 turns it off
 * @param kl          KL estimator against a reference policy (NONE: no KL term). Anything else
 *                    needs reference log-probs wherever the loss is computed.
 * @param klCoef      weight of the KL term, ≥ 0
 * @param aggregation how token losses are aggregated
 */
public record LossConfig(double clipLow, double clipHigh, double dualClip, KlEstimator kl,
                         double klCoef, LossAggregation aggregation) {

    public LossConfig {
        Objects.requireNonNull(kl, "kl");
        Objects.requireNonNull(aggregation, "aggregation");
        SettingException.require(clipLow >= 0 && clipLow < 1, "clip_low", "must be in [0, 1), got " + SettingException.num(clipLow));
        SettingException.require(clipHigh >= 0 && Double.isFinite(clipHigh), "clip_high",
                "must be a finite number >= 0, got " + SettingException.num(clipHigh));
        SettingException.require(dualClip == 0 || (dualClip > 1 && Double.isFinite(dualClip)), "dual_clip",
                "must be > 1, or null (or 0) to turn it off, got " + SettingException.num(dualClip));
        SettingException.require(klCoef >= 0 && Double.isFinite(klCoef), "kl_coef",
                "must be a finite number >= 0, got " + SettingException.num(klCoef));
    }

    public static LossConfig defaults() {
        return new LossConfig(0.2, 0.2, 3.0, KlEstimator.NONE, 0.0, LossAggregation.TOKEN_MEAN);
    }

    /** Whether the loss has a KL term, and so needs reference log-probs. */
    public boolean usesReference() {
        return kl != KlEstimator.NONE;
    }

    public LossConfig withClip(double low, double high) {
        return new LossConfig(low, high, dualClip, kl, klCoef, aggregation);
    }

    public LossConfig withDualClip(double c) {
        return new LossConfig(clipLow, clipHigh, c, kl, klCoef, aggregation);
    }

    public LossConfig withKl(KlEstimator estimator, double coef) {
        return new LossConfig(clipLow, clipHigh, dualClip, estimator, coef, aggregation);
    }

    public LossConfig withAggregation(LossAggregation a) {
        return new LossConfig(clipLow, clipHigh, dualClip, kl, klCoef, a);
    }
}
