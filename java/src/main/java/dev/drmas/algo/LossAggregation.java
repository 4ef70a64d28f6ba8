// LossAggregation.java — the table of loss aggregations (ARCHITECTURE §6, verl's loss_agg_mode):
// each entry says whether a row's token losses are averaged over its tokens first (what the
// native kernel is told: drmas_loss_config.per_row_mean) and what the sum is divided by, which
// normalizer() computes, for the whole mini-batch. A new aggregation is one entry here.
package dev.drmas.algo;

public enum LossAggregation implements ConfigEnum {
    /** Σ tokens / (valid tokens of the whole mini-batch). */
    TOKEN_MEAN("token-mean", false, Divisor.TOKENS),
    /** Σ_seq Σ_tok / (sequences of the mini-batch). */
    SEQ_MEAN_TOKEN_SUM("seq-mean-token-sum", false, Divisor.ROWS),
    /** Σ_seq (Σ_tok / n_seq) / (sequences of the mini-batch). */
    SEQ_MEAN_TOKEN_MEAN("seq-mean-token-mean", true, Divisor.ROWS),
    /**
     * Σ_seq (Σ_tok / constant) / (sequences of the mini-batch): Dr. GRPO's mean over sequences of their
     * token sums over a constant (by default the longest response allowed). verl divides each
     * micro-batch's Σ_seq Σ_tok by the constant and then by the count of micro-batches, a scale that
     * changes with micro_batch_size; Σ / constant alone, over a whole mini-batch, would scale the
     * gradient with its row count (and be clipped at nearly every step).
     */
    SEQ_MEAN_TOKEN_SUM_NORM("seq-mean-token-sum-norm", false, Divisor.ROWS_TIMES_CONSTANT);

    /** What the aggregated sum is divided by. */
    public enum Divisor {
        /** the valid tokens of the mini-batch (all micro-batches and ranks) */
        TOKENS,
        /** the rows (sequences) of the mini-batch */
        ROWS,
        /** the rows (sequences) of the mini-batch times a constant of the run (Dr. GRPO's token budget) */
        ROWS_TIMES_CONSTANT
    }

    private final String configName;
    private final boolean perRowMean;
    private final Divisor divisor;

    LossAggregation(String configName, boolean perRowMean, Divisor divisor) {
        this.configName = configName;
        this.perRowMean = perRowMean;
        this.divisor = divisor;
    }

    @Override
    public String configName() {
        return configName;
    }

    /** Whether each row's token losses are divided by its valid tokens before the rows are summed. */
    public boolean perRowMean() {
        return perRowMean;
    }

    public Divisor divisor() {
        return divisor;
    }

    /**
     * The divisor of a mini-batch of {@code rows} rows with {@code tokens} valid response tokens (all
     * ranks together); {@code constant} is the run's constant, used by {@link Divisor#ROWS_TIMES_CONSTANT}.
     */
    public double normalizer(long tokens, long rows, double constant) {
        return switch (divisor) {
            case TOKENS -> tokens;
            case ROWS -> rows;
            case ROWS_TIMES_CONSTANT -> rows * constant;
        };
    }

    public static LossAggregation parse(String text) {
        return ConfigEnum.parse(LossAggregation.class, "loss_agg_mode", text);
    }
}
