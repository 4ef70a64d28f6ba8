// MetricsConfig.java — `metrics:`: which sinks a run writes to (all on by default).
package dev.drmas.config;

/**
 * @param jsonl       write {@code metrics.jsonl} in the run folder; default true
 * @param tensorboard write TensorBoard event files in the run folder; default true
 * @param progressBar show a progress bar on the console (else rank 0 prints one plain line per
 *                    logged step into the run's log); default true
 */
public record MetricsConfig(boolean jsonl, boolean tensorboard, boolean progressBar) {
    public static MetricsConfig defaults() {
        return new MetricsConfig(true, true, true);
    }
}
