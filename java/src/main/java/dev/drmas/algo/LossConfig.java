// LossConfig.java — the clipped PPO loss settings (ARCHITECTURE §6), defaults as verl's:
// clip 0.2/0.2, dual clip c = 3, no KL, token-mean.
package dev.drmas.algo;

import java.util.Objects;

/**
 * @param clipLow     ε_low in [0, 1)
 * @param clipHigh    ε_high ≥ 0
 * @param dualClip    c &gt; 1 caps the loss of A &lt; 0 tokens at −A·c; 0 turns it off
 * @param kl          KL estimator against a reference policy (NONE: no KL term)
 * @param klCoef      weight of the KL term
 * @param aggregation how token losses are aggregated
 */
public record LossConfig(double clipLow, double clipHigh, double dualClip, KlEstimator kl,
                         double klCoef, LossAggregation aggregation) {

    public LossConfig {
        Objects.requireNonNull(kl, "kl");
        Objects.requireNonNull(aggregation, "aggregation");
        if (!(clipLow >= 0 && clipLow < 1)) throw new IllegalArgumentException("clip_low must be in [0, 1), got " + clipLow);
        if (!(clipHigh >= 0 && Double.isFinite(clipHigh))) throw new IllegalArgumentException("clip_high must be finite and >= 0, got " + clipHigh);
        if (!(dualClip == 0 || (dualClip > 1 && Double.isFinite(dualClip)))) {
            throw new IllegalArgumentException("dual_clip must be 0 (off) or > 1, got " + dualClip);
        }
        if (!Double.isFinite(klCoef)) throw new IllegalArgumentException("kl_coef must be finite, got " + klCoef);
    }

    public static LossConfig defaults() {
        return new LossConfig(0.2, 0.2, 3.0, KlEstimator.NONE, 0.0, LossAggregation.TOKEN_MEAN);
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
