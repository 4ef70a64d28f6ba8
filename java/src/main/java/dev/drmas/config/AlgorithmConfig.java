// AlgorithmConfig.java — `algorithm:`: the advantage normalisation of ARCHITECTURE §5 (GRPO,
// Dr. MAS and the two ablations) in config form, turned into the algo package's NormConfig,
// which checks the values (here, at config time, under their key paths).
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;
import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SettingException;
import dev.drmas.algo.SingletonPolicy;

/**
 * @param mode           {@code grpo}, {@code drmas} (default), {@code agent-mean} or {@code agent-std}
 * @param globalPooling  what the group statistics pool over: {@code trajectories} (default, one
 *                       mean score per trajectory, as the reference code) or {@code rows}
 * @param eps            added to the std, &gt; 0 when scale_by_std; default 1e-6
 * @param std            {@code unbiased} (default, n − 1) or {@code biased} (n)
 * @param scaleByStd     divide by (std + eps) (default true); false only centres (Dr. GRPO)
 * @param singleton      single-member segments: {@code fallback} (default), {@code zero} or
 *                       {@code raw}
 */
public record AlgorithmConfig(NormMode mode, GlobalPooling globalPooling, double eps, Std std, boolean scaleByStd,
                              SingletonPolicy singleton) {

    public enum Std implements ConfigEnum {
        UNBIASED("unbiased"), BIASED("biased");

        private final String configName;

        Std(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public AlgorithmConfig {
        Check.given(mode, "mode");
        Check.given(globalPooling, "global_pooling");
        Check.given(std, "std");
        Check.given(singleton, "singleton");
        try {
            // (the fields are not assigned yet: build from the parameters)
            normConfig(mode, globalPooling, eps, std, scaleByStd, singleton);
        } catch (SettingException e) {
            throw ConfigException.at(e.key(), e.problem());
        }
    }

    public static AlgorithmConfig defaults() {
        return new AlgorithmConfig(NormMode.DRMAS, GlobalPooling.TRAJECTORIES, NormConfig.DEFAULT_EPS, Std.UNBIASED,
                true, SingletonPolicy.FALLBACK);
    }

    public NormConfig toNormConfig() {
        return normConfig(mode, globalPooling, eps, std, scaleByStd, singleton);
    }

    private static NormConfig normConfig(NormMode mode, GlobalPooling globalPooling, double eps, Std std, boolean scaleByStd,
                                         SingletonPolicy singleton) {
        return new NormConfig(mode, globalPooling, singleton, std == Std.UNBIASED, scaleByStd, eps);
    }
}
