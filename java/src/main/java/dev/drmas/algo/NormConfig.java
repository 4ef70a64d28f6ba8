// NormConfig.java — one advantage normalisation setting (ARCHITECTURE §5), validated here (and
// only here: the config layer builds one to check `algorithm:`) so that a bad value is reported
// in Java terms, with its key, before it reaches the native layer.
package dev.drmas.algo;

import java.util.Objects;

/**
 * @param mode          where the mean and std come from, and the numerator (a NormMode, or any
 *                      other descriptor)
 * @param globalPooling what the group statistics pool over
 * @param singleton     policy for single-member segments
 * @param unbiased      std with n − 1 (default) or n
 * @param scaleByStd    divide by (std + eps) (default) or only centre (Dr. GRPO style)
 * @param eps           added to the std; > 0 when scaleByStd
 */
public record NormConfig(AdvantageMode mode, GlobalPooling globalPooling, SingletonPolicy singleton,
                         boolean unbiased, boolean scaleByStd, double eps) {

    public static final double DEFAULT_EPS = 1e-6;

    public NormConfig {
        Objects.requireNonNull(mode, "mode");
        Objects.requireNonNull(globalPooling, "globalPooling");
        Objects.requireNonNull(singleton, "singleton");
        if (scaleByStd) {
            SettingException.require(eps > 0 && Double.isFinite(eps), "eps", "must be a finite number > 0, got " + SettingException.num(eps));
        } else {
            SettingException.require(eps >= 0 && Double.isFinite(eps), "eps",
                    "must be a finite number >= 0, got " + SettingException.num(eps));
        }
    }

    /** The defaults: trajectory pooling, fallback, unbiased std, scaled, eps 1e-6. */
    public static NormConfig of(AdvantageMode mode) {
        return new NormConfig(mode, GlobalPooling.TRAJECTORIES, SingletonPolicy.FALLBACK, true, true, DEFAULT_EPS);
    }

    public NormConfig withGlobalPooling(GlobalPooling p) {
        return new NormConfig(mode, p, singleton, unbiased, scaleByStd, eps);
    }

    public NormConfig withSingleton(SingletonPolicy s) {
        return new NormConfig(mode, globalPooling, s, unbiased, scaleByStd, eps);
    }

    public NormConfig withUnbiased(boolean u) {
        return new NormConfig(mode, globalPooling, singleton, u, scaleByStd, eps);
    }

    public NormConfig withScaleByStd(boolean s) {
        return new NormConfig(mode, globalPooling, singleton, unbiased, s, eps);
    }

    public NormConfig withEps(double e) {
        return new NormConfig(mode, globalPooling, singleton, unbiased, scaleByStd, e);
    }
}
