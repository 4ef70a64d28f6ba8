// RunStop.java — how a workflow's tools learn that the training run in this process is stopping, and
// ask it to stop: the trainer installs its stop request here for its training loop and marks the
// steps, so that a tool waiting on a service (the search workflow's retriever in an outage) gives up
// its wait when SIGTERM asks the run to stop, and, when the service stays away, asks the run to stop
// after the step under way — which the trainer then saves, as after a signal — instead of throwing
// away the steps since the last checkpoint. Outside a training loop (evaluation alone, warm starts)
// nothing is installed and a tool decides alone. Process-wide: one training loop runs at a time.
package dev.drmas.workflow;

public final class RunStop {
    private RunStop() {
    }

    /** The training loop's side: whether a stop is asked for, and a tool's request to stop after the step, with why. */
    public interface Control {
        boolean stopRequested();

        void requestStop(String why);
    }

    private static volatile Control control;
    private static volatile boolean inStep;

    /** The training loop starts (its stop request is {@code c}). */
    public static void open(Control c) {
        control = c;
        inStep = false;
    }

    /** The training loop has ended. */
    public static void close() {
        control = null;
        inStep = false;
    }

    /** A training step (its rollout and update) starts ({@code true}) or has ended. */
    public static void inStep(boolean under) {
        inStep = under;
    }

    /** Whether the training run is asked to stop (a signal, or a tool): a tool should not wait on. */
    public static boolean stopRequested() {
        Control c = control;
        return c != null && c.stopRequested();
    }

    /** Whether a training step is under way, so that a tool may ask for a stop after it ({@link #requestStopAfterStep}). */
    public static boolean canStopAfterStep() {
        return control != null && inStep;
    }

    /** Asks the run to stop after the step under way and save it; {@code why} is the run's last word. No-op outside a step. */
    public static void requestStopAfterStep(String why) {
        Control c = control;
        if (c != null && inStep) c.requestStop(why);
    }
}
