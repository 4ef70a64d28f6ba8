// ProgressBar.java — the console sink: on a terminal one line redrawn with \r (step/total, a bar,
// elapsed, ETA (at the pace of the training steps, the evaluation before them aside) and a few chosen
// scalars); into a file or a pipe (CI, nohup) a plain line every N
// steps instead, since a log full of carriage returns is unreadable. Written here rather than
// taken from a library: it is one line of text, and no progress-bar artifact is served to us.
package dev.drmas.metrics;

import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.function.LongSupplier;

public final class ProgressBar implements MetricsSink {
    /** bar | plain: overrides the terminal detection of {@link #forConsole}. */
    public static final String MODE_ENV = "DRMAS_PROGRESS";
    /** A positive integer: the plain mode's line interval in steps. */
    public static final String EVERY_ENV = "DRMAS_PROGRESS_EVERY";
    static final int BAR_WIDTH = 24;

    public enum Mode { BAR, PLAIN }

    private final long total;
    private final long startStep;
    private final List<String> shownKeys;
    private final PrintStream out;
    private final Mode mode;
    private final long plainEvery;
    private final LongSupplier nanoClock;
    private final long startNanos;
    /**
     * Where the ETA's pace is measured from: the start, or the last log at the start step (the evaluation before
     * training, or a resumed checkpoint's pending one), which is no training step and is not repeated.
     */
    private long paceNanos;
    private final Map<String, Double> lastShown = new LinkedHashMap<>();
    private long lastPrintedStep = -1;
    private int lastLength;
    private boolean closed;

    /**
     * @param total      the last step of the run (> 0)
     * @param startStep  the step this process starts from (0, or the resumed checkpoint's step):
     *                   the ETA is extrapolated from the steps made since, not from the whole run
     * @param shownKeys  the scalars shown, in this order; each keeps its latest value until
     *                   logged again, so evaluation steps logged apart do not blank it
     * @param plainEvery in plain mode, print at every step that is a multiple of it and at the last
     * @param nanoClock  monotonic nanoseconds ({@code System::nanoTime}; tests pass their own)
     */
    public ProgressBar(long total, long startStep, List<String> shownKeys, PrintStream out, Mode mode,
                       long plainEvery, LongSupplier nanoClock) {
        if (total <= 0) throw new IllegalArgumentException("total steps must be > 0, got " + total);
        if (startStep < 0) throw new IllegalArgumentException("start step must be >= 0, got " + startStep);
        if (plainEvery <= 0) throw new IllegalArgumentException("plain-line interval must be > 0, got " + plainEvery);
        this.total = total;
        this.startStep = startStep;
        this.shownKeys = List.copyOf(shownKeys);
        this.out = out;
        this.mode = mode;
        this.plainEvery = plainEvery;
        this.nanoClock = nanoClock;
        this.startNanos = nanoClock.getAsLong();
        this.paceNanos = startNanos;
    }

    /**
     * On standard output: a redrawn bar when it is a terminal, else a plain line about every
     * twentieth of the run; {@value #MODE_ENV} and {@value #EVERY_ENV} override both choices.
     */
    public static ProgressBar forConsole(long total, long startStep, List<String> shownKeys) {
        return new ProgressBar(total, startStep, shownKeys, System.out, consoleMode(System.getenv(MODE_ENV)),
                plainEvery(System.getenv(EVERY_ENV), total), System::nanoTime);
    }

    /**
     * Without a bar (metrics.progress_bar: false): a plain line at every step logged, as a trainer's
     * log has one (step, the shown scalars, elapsed and ETA), whatever the terminal and {@value #MODE_ENV}.
     */
    public static ProgressBar perStep(long total, long startStep, List<String> shownKeys, PrintStream out) {
        return new ProgressBar(total, startStep, shownKeys, out, Mode.PLAIN, 1, System::nanoTime);
    }

    static Mode consoleMode(String env) {
        if (env != null && !env.isBlank()) {
            return switch (env.strip().toLowerCase(Locale.ROOT)) {
                case "bar" -> Mode.BAR;
                case "plain" -> Mode.PLAIN;
                default -> throw new IllegalArgumentException(MODE_ENV + " must be 'bar' or 'plain', got '" + env + "'");
            };
        }
        // Since JDK 22 System.console() is not null when redirected; isTerminal() is the real test.
        var console = System.console();
        boolean terminal = console != null && console.isTerminal() && !"dumb".equals(System.getenv("TERM"));
        return terminal ? Mode.BAR : Mode.PLAIN;
    }

    static long plainEvery(String env, long total) {
        if (env != null && !env.isBlank()) {
            try {
                long n = Long.parseLong(env.strip());
                if (n > 0) return n;
            } catch (NumberFormatException ignored) {
                // reported below, with what was given
            }
            throw new IllegalArgumentException(EVERY_ENV + " must be a positive integer, got '" + env + "'");
        }
        return Math.max(1, (total + 19) / 20);
    }

    public Mode mode() {
        return mode;
    }

    @Override
    public synchronized void log(long step, Map<String, Double> scalars) {
        if (closed) throw new IllegalStateException("progress bar is closed");
        boolean shows = false;  // whether this log brings a value shown
        for (String k : shownKeys) {
            Double v = scalars.get(k);
            if (v != null) {
                lastShown.put(k, v);
                shows = true;
            }
        }
        long now = nanoClock.getAsLong(), elapsed = now - startNanos, pace = now - paceNanos;
        if (mode == Mode.BAR) {
            String line = barLine(step, total, startStep, elapsed, pace, shownValues());
            // Pad over what is left of a longer previous line; \r alone does not erase.
            int pad = Math.max(0, lastLength - line.length());
            out.print("\r" + line + " ".repeat(pad));
            out.flush();
            lastLength = line.length();
        } else if (step == lastPrintedStep ? shows : step % plainEvery == 0 || step >= total) {
            // a second log of a printed step (the evaluation after the step's training) is printed when it shows a value,
            // else the evaluation of the last step never reached the console
            out.println(plainLine(step, total, startStep, elapsed, pace, shownValues()));
            out.flush();
            lastPrintedStep = step;
        }
        // an evaluation before the first step (minutes on a large test set) would otherwise count as training time, and
        // the ETA of the first steps would be that many times too long
        if (step <= startStep) paceNanos = now;
    }

    /** Ends the bar's line, so that what is printed next starts on its own. */
    @Override
    public synchronized void close() {
        if (closed) return;
        closed = true;
        if (mode == Mode.BAR && lastLength > 0) {
            out.println();
            out.flush();
        }
    }

    private Map<String, Double> shownValues() {
        var m = new LinkedHashMap<String, Double>();
        for (String k : shownKeys) if (lastShown.containsKey(k)) m.put(k, lastShown.get(k));
        return m;
    }

    /** @param paceNanos the time the steps since {@code startStep} took, which the ETA extrapolates */
    static String barLine(long step, long total, long startStep, long elapsedNanos, long paceNanos, Map<String, Double> shown) {
        double frac = Math.clamp((double) step / total, 0.0, 1.0);
        int filled = (int) Math.floor(frac * BAR_WIDTH);
        var s = new StringBuilder();
        s.append(step).append('/').append(total).append(" [")
                .append("#".repeat(filled)).append("-".repeat(BAR_WIDTH - filled)).append("] ")
                .append(String.format(Locale.ROOT, "%3d%%", (int) Math.floor(frac * 100)))
                .append(' ').append(duration(elapsedNanos)).append('<').append(eta(step, total, startStep, paceNanos));
        appendScalars(s, shown);
        return s.toString();
    }

    static String plainLine(long step, long total, long startStep, long elapsedNanos, long paceNanos, Map<String, Double> shown) {
        double frac = Math.clamp((double) step / total, 0.0, 1.0);
        var s = new StringBuilder();
        s.append("step ").append(step).append('/').append(total)
                .append(String.format(Locale.ROOT, " (%d%%)", (int) Math.floor(frac * 100)))
                .append(" elapsed ").append(duration(elapsedNanos))
                .append(" eta ").append(eta(step, total, startStep, paceNanos));
        appendScalars(s, shown);
        return s.toString();
    }

    private static void appendScalars(StringBuilder s, Map<String, Double> shown) {
        for (var e : shown.entrySet()) {
            s.append(' ').append(e.getKey()).append('=').append(number(e.getValue()));
        }
    }

    /** Remaining time at the pace of this process's steps so far ({@code paceNanos} for them); "?" before the first. */
    static String eta(long step, long total, long startStep, long paceNanos) {
        long done = step - startStep;
        if (done <= 0) return "?";
        long remaining = Math.max(0, total - step);
        return duration((long) ((double) paceNanos / done * remaining));
    }

    /** mm:ss under an hour, else h:mm:ss (hours unbounded). */
    static String duration(long nanos) {
        long s = Math.max(0, nanos) / 1_000_000_000L;
        long h = s / 3600, m = (s % 3600) / 60, sec = s % 60;
        return h > 0 ? String.format(Locale.ROOT, "%d:%02d:%02d", h, m, sec)
                : String.format(Locale.ROOT, "%02d:%02d", m, sec);
    }

    /** Four significant digits, so columns of rewards and times stay short. */
    static String number(double v) {
        if (!Double.isFinite(v)) return Double.toString(v);
        if (v == Math.rint(v) && Math.abs(v) < 1e9) return Long.toString((long) v);
        return String.format(Locale.ROOT, "%.4g", v);
    }
}
