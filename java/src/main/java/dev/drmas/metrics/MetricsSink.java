// MetricsSink.java — one destination of the trainer's scalars (metrics.jsonl, TensorBoard event
// files, the console). Steps arrive in increasing order, several calls may share a step (training
// scalars and evaluation scalars logged apart), and values may be NaN or infinite: each sink
// decides how to keep those, and none may throw because of one.
package dev.drmas.metrics;

import java.util.Map;

public interface MetricsSink extends AutoCloseable {
    /**
     * Records the scalars of one step.
     *
     * @param step    the training step they belong to (>= 0; 0 is before the first update)
     * @param scalars name to value, names slash-separated ({@code reward/mean},
     *                {@code agent/solver/adv_std}, {@code time/rollout_s}); no null key or value
     * @throws java.io.UncheckedIOException when the destination cannot be written
     */
    void log(long step, Map<String, Double> scalars);

    /**
     * Whether the run must stop when this sink cannot write: true for the run folder's files
     * (metrics.jsonl, TensorBoard events), whose lost lines nothing would bring back; false for
     * the console, which may go away while the run goes on.
     */
    default boolean essential() {
        return false;
    }

    /**
     * Forces what was logged so far to the device. The trainer calls it before a checkpoint's
     * rename, once per checkpoint (a sync per line would cost a disk round trip each): every line up
     * to the checkpoint's step then survives whatever power loss the checkpoint survives, and a
     * resume from it finds them. A destination with nothing durable to force does nothing.
     *
     * @throws java.io.UncheckedIOException when the destination cannot be synced
     */
    default void sync() {
    }

    /** Flushes and releases the destination; later calls to {@link #log} are errors. */
    @Override
    void close();
}
