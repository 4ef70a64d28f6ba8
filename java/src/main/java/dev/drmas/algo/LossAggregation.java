// LossAggregation.java — how per-token losses become one number (ARCHITECTURE §6, verl's
// loss_agg_mode); ordinals match DRMAS_AGG_* in drmas.h.
package dev.drmas.algo;

public enum LossAggregation implements ConfigEnum {
    /** Σ tokens / (valid tokens of the whole mini-batch). */
    TOKEN_MEAN("token-mean"),
    /** Σ_seq Σ_tok / (sequences of the mini-batch). */
    SEQ_MEAN_TOKEN_SUM("seq-mean-token-sum"),
    /** Σ_seq (Σ_tok / n_seq) / (sequences of the mini-batch). */
    SEQ_MEAN_TOKEN_MEAN("seq-mean-token-mean"),
    /** Σ_seq Σ_tok / constant (Dr. GRPO; by default the longest response allowed). */
    SEQ_MEAN_TOKEN_SUM_NORM("seq-mean-token-sum-norm");

    private final String configName;

    LossAggregation(String configName) {
        this.configName = configName;
    }

    @Override
    public String configName() {
        return configName;
    }

    public static LossAggregation parse(String text) {
        return ConfigEnum.parse(LossAggregation.class, "loss_agg_mode", text);
    }
}
