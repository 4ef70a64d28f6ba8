// KlEstimator.java — the KL-to-reference estimators of the loss (ARCHITECTURE §6), named as
// in verl; ordinals are the DRMAS_KL_* values of drmas.h (AbiOrdinalsTest).
package dev.drmas.algo;

public enum KlEstimator implements ConfigEnum {
    NONE("none"),
    /** logp − ref */
    K1("k1"),
    /** ½(logp − ref)² */
    K2("k2"),
    /** low_var_kl: d = clamp(ref − logp, ±20); clamp(eᵈ − d − 1, ±10) */
    K3("k3");

    private final String configName;

    KlEstimator(String configName) {
        this.configName = configName;
    }

    @Override
    public String configName() {
        return configName;
    }

    public static KlEstimator parse(String text) {
        String t = text.trim().toLowerCase(java.util.Locale.ROOT);
        if (t.equals("low_var_kl")) return K3;
        if (t.equals("kl")) return K1;
        if (t.equals("mse")) return K2;
        return ConfigEnum.parse(KlEstimator.class, "kl_type", text);
    }
}
