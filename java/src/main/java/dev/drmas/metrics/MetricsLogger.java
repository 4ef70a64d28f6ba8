// MetricsLogger.java — what the trainer logs to: fans each step's scalars out to its sinks
// (metrics.jsonl, TensorBoard, the console). A non-finite value is reported once per name and
// passed on for each sink to keep as it can. A console sink that fails is reported and dropped
// while the others go on; a file of the run folder that cannot be written (a full disk) stops the
// run instead, since every later step would be lost from it while the run looked fine (the last
// checkpoint stays, and a resumed run rewrites the metrics from there). sync() forces the files to
// the disk, which the trainer does before each checkpoint's rename.
package dev.drmas.metrics;

import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Non-finite values: metrics.jsonl writes {@code null} and notes the value under
 * {@code "nonfinite"}; TensorBoard leaves the point out; the console prints it as it is.
 * The first non-finite value of each name is reported on the warning stream with its step.
 *
 * <p>A sink that throws while logging is closed, reported with the error on the warning stream
 * and not called again ({@link #failures()} lists them); the step is still given to the others,
 * unless the sink is {@link MetricsSink#essential()}: then log throws.
 */
public final class MetricsLogger implements MetricsSink {
    /** Where {@link #forRun} puts the event files, under the run directory. */
    public static final String TENSORBOARD_DIR = "tensorboard";

    private final List<MetricsSink> sinks;
    private final PrintStream warnings;
    private final Set<String> reportedNonFinite = new HashSet<>();
    private final List<String> failures = new ArrayList<>();
    private boolean closed;

    public MetricsLogger(List<? extends MetricsSink> sinks, PrintStream warnings) {
        this.sinks = new ArrayList<>(sinks);
        this.warnings = warnings;
    }

    public MetricsLogger(List<? extends MetricsSink> sinks) {
        this(sinks, System.err);
    }

    /**
     * The usual sinks of a run directory: {@code runDir/metrics.jsonl}, event files under
     * {@code runDir/tensorboard/}, and a progress bar on standard output showing {@code shownKeys}.
     *
     * @param resumeFromStep the step of the checkpoint a resumed run starts from, or -1 for a new run
     */
    public static MetricsLogger forRun(Path runDir, long totalSteps, long resumeFromStep, List<String> shownKeys)
            throws IOException {
        return forRun(runDir, totalSteps, resumeFromStep, shownKeys, true, true, true, null);
    }

    /**
     * As {@link #forRun(Path, long, long, List)}, with each sink on or off (a run config's metrics section).
     *
     * @param stepLines where a plain line per logged step goes when there is no progress bar
     *                  (metrics.progress_bar: false), or null for none (the ranks other than 0)
     */
    public static MetricsLogger forRun(Path runDir, long totalSteps, long resumeFromStep, List<String> shownKeys,
                                       boolean jsonl, boolean tensorboard, boolean progressBar, PrintStream stepLines)
            throws IOException {
        List<MetricsSink> sinks = new ArrayList<>();
        long start = Math.max(resumeFromStep, 0);
        try {
            // the bar first: it only reads the environment, and a bad setting should not leave files open
            if (progressBar) sinks.add(ProgressBar.forConsole(totalSteps, start, shownKeys));
            else if (stepLines != null) sinks.add(ProgressBar.perStep(totalSteps, start, shownKeys, stepLines));
            if (jsonl) sinks.add(JsonlSink.open(runDir.resolve(JsonlSink.FILE_NAME), resumeFromStep));
            if (tensorboard) sinks.add(TensorBoardSink.open(runDir.resolve(TENSORBOARD_DIR), resumeFromStep));
        } catch (IOException | RuntimeException e) {
            for (MetricsSink k : sinks) k.close();
            throw e;
        }
        return new MetricsLogger(sinks);
    }

    @Override
    public synchronized void log(long step, Map<String, Double> scalars) {
        if (closed) throw new IllegalStateException("metrics logger is closed");
        if (step < 0) throw new IllegalArgumentException("step must be >= 0, got " + step);
        // One copy, checked once, shared read-only by every sink.
        var copy = new LinkedHashMap<String, Double>();
        for (var e : scalars.entrySet()) {
            if (e.getKey() == null) throw new IllegalArgumentException("metric name is null at step " + step);
            if (e.getValue() == null) {
                throw new IllegalArgumentException("metric '" + e.getKey() + "' has no value (null) at step " + step);
            }
            copy.put(e.getKey(), e.getValue());
            if (!Double.isFinite(e.getValue()) && reportedNonFinite.add(e.getKey())) {
                warnings.println("metrics: " + e.getKey() + " is " + e.getValue() + " at step " + step
                        + " (null in metrics.jsonl, left out of TensorBoard); later non-finite values of it are not reported");
            }
        }
        Map<String, Double> shared = Collections.unmodifiableMap(copy);
        each("at step " + step, sink -> sink.log(step, shared));
    }

    /** Syncs every sink (before a checkpoint); a sink that fails is handled as in {@link #log}. */
    @Override
    public synchronized void sync() {
        if (closed) throw new IllegalStateException("metrics logger is closed");
        each("to sync its file", MetricsSink::sync);
    }

    /** Gives {@code call} to every sink; one that throws is dropped, or stops the run when essential. */
    private void each(String when, java.util.function.Consumer<MetricsSink> call) {
        for (var it = sinks.iterator(); it.hasNext(); ) {
            MetricsSink sink = it.next();
            try {
                call.accept(sink);
            } catch (RuntimeException e) {
                it.remove();
                String what = sink.getClass().getSimpleName() + " failed " + when + ": " + e.getMessage();
                failures.add(what);
                if (sink.essential()) {
                    closeQuietly(sink);
                    throw new IllegalStateException("metrics: " + what + "; the run stops (resume continues from its last checkpoint)", e);
                }
                warnings.println("metrics: " + what + "; it is dropped, the other sinks go on");
                closeQuietly(sink);
            }
        }
    }

    /** The sinks dropped after an error, each as "Sink failed at step N: message" (or "failed to sync its file"). */
    public synchronized List<String> failures() {
        return List.copyOf(failures);
    }

    /** Closes every sink, reporting (not throwing) a sink that fails to close. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        for (MetricsSink sink : sinks) closeQuietly(sink);
        sinks.clear();
    }

    private void closeQuietly(MetricsSink sink) {
        try {
            sink.close();
        } catch (RuntimeException e) {
            warnings.println("metrics: closing " + sink.getClass().getSimpleName() + " failed: " + e.getMessage());
        }
    }
}
