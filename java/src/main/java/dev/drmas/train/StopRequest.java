// StopRequest.java — a graceful stop on SIGTERM or SIGINT while training (a scheduler's preemption or
// scancel, `kill`, Ctrl-C, `drmas launch` or `drmas experiment` stopped): while the training loop runs,
// the two signals ask it to stop after the step under way (its save and due evaluation included) and to
// save a checkpoint of that step; the command then ends with 128 + the signal's number (143, 130), as a
// process the signal killed does, so that schedulers see a run that did not finish. A second signal
// stops at once, without saving (a run that hangs), as kill -9 does, unless it is the first signal's echo:
// the other one of the two within a few seconds of the first (a terminal's Ctrl-C sends SIGINT to every
// process of its group, and `drmas launch` or `drmas experiment`, stopping too, pass it on to this one
// as SIGTERM), or in a process those started, any one within those seconds (a scheduler, `timeout` or
// `kill -- -PGID` signals the whole group, and the launcher passes it on once more). The
// temporary folder of a save that a second signal interrupts is removed when the run starts again. The ranks of a data-parallel run agree on the step
// to stop after (a sum of their requests once a step), so that they save the same one and leave no
// collective unpaired, and on the exit status (the highest any rank asked for: a signal's over a tool's 75),
// so that every rank of a stopped run ends with it, not only the one whose signal or tool asked. Outside the
// loop the signals end the JVM as they always do.
// (sun.misc.Signal, not a shutdown hook: a hook runs once the JVM is already ending, so it could neither
// let Main report a failed save nor let a second signal through.)
package dev.drmas.train;

import dev.drmas.dist.Collective;
import java.io.PrintStream;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.LongSupplier;
import sun.misc.Signal;
import sun.misc.SignalHandler;

final class StopRequest implements AutoCloseable {
    private volatile boolean requested;
    private volatile int signal;  // the number of the signal that asked, 0 for none (or a test's request)
    private volatile long signalledAt;  // System.nanoTime() of that signal
    private volatile boolean echoed;  // a signal was taken as the first one's echo: the next one stops at once
    /** Whether a `drmas launch` or `drmas experiment` started this process (LaunchCommand.WATCH_ENV): it passes signals on. */
    private static final boolean UNDER_LAUNCHER = System.getenv("DRMAS_LAUNCHER_STDIN") != null;
    private final Map<Signal, SignalHandler> previous = new LinkedHashMap<>();

    /**
     * Takes SIGTERM and SIGINT until {@link #close}: the first says, into {@code log} (null: nothing),
     * what happens next, using {@code step} (the steps done so far) and whether checkpoints are saved.
     */
    StopRequest(PrintStream log, LongSupplier step, boolean saves) {
        for (String name : new String[] {"TERM", "INT"}) {
            Signal s = new Signal(name);
            try {
                previous.put(s, Signal.handle(s, got -> onSignal(got, log, step, saves)));
            } catch (IllegalArgumentException inUse) {
                // the JVM keeps it (-Xrs, or a tool's own handler): it ends the process as before
            }
        }
    }

    /** How soon after the first signal the other one is the same stop passed on (ECHO). */
    static final long ECHO_NANOS = 3_000_000_000L;

    /**
     * Whether signal {@code now}, {@code elapsedNanos} after signal {@code first} asked for the stop, is that
     * stop passed on rather than a second request to stop at once: soon after it, the other of SIGINT and
     * SIGTERM (a launcher's SIGTERM after the terminal's SIGINT to its whole group), or, in a process a
     * launcher started ({@code underLauncher}), either (its SIGTERM after a scheduler's to the whole group).
     * One echo at most: the caller takes the next signal as a request.
     */
    static boolean echo(int first, int now, long elapsedNanos, boolean underLauncher) {
        return elapsedNanos < ECHO_NANOS && (now != first || underLauncher);
    }

    private void onSignal(Signal got, PrintStream log, LongSupplier step, boolean saves) {
        if (requested && signal != 0) {
            if (!echoed && echo(signal, got.getNumber(), System.nanoTime() - signalledAt, UNDER_LAUNCHER)) {
                echoed = true;
                return;
            }
            System.err.println("drmas: SIG" + got.getName() + " again: stopping at once, without saving (the last checkpoint stays)");
            System.err.flush();
            Runtime.getRuntime().halt(128 + got.getNumber());
        }
        signalledAt = System.nanoTime();
        signal = got.getNumber();
        requested = true;
        if (log != null) {
            log.println();
            log.println("drmas: stop requested (SIG" + got.getName() + "): finishing step " + (step.getAsLong() + 1)
                    + (saves ? ", then saving its checkpoint" : " (trainer.save_freq is 0: no checkpoint)")
                    + "; a second SIGTERM or Ctrl-C stops at once, losing the steps since the last checkpoint");
            log.flush();
        }
    }

    /** Asks for the stop as a signal does, without one (tests in this package). */
    void request() {
        requested = true;
    }

    private volatile String reason;  // why a tool asked the run to stop (RunStop), null for none

    /** A tool's request (RunStop.requestStopAfterStep): stop after the step under way, ending with {@link #TOOL_STOP}. */
    void request(String why) {
        if (reason == null) reason = why;
        requested = true;
    }

    /** Why a tool asked the run to stop; null when none did. */
    String reason() {
        return reason;
    }

    /** The exit status of a run that a tool stopped (a service it needs gone): sysexits' EX_TEMPFAIL, "try again later". */
    static final int TOOL_STOP = 75;

    /** Whether this rank was asked to stop. */
    boolean requested() {
        return requested;
    }

    /** This rank's own status: 128 + the number of the signal that asked; a tool: TOOL_STOP; 0 when neither did. */
    private int ownStatus() {
        return signal != 0 ? 128 + signal : reason != null ? TOOL_STOP : 0;
    }

    private volatile int agreedStatus;  // the status the ranks agreed on when they stopped (0: none, or not stopped)
    private volatile int agreedFrom = -1;  // the lowest rank that asked for agreedStatus

    /**
     * The exit status of a stopped run: 128 + the number of the signal that asked, TOOL_STOP for a tool,
     * 0 when none did. On several ranks, the one they agreed on when they stopped (the highest asked for on
     * any rank), so that a rank whose own process was not asked ends as the one that was.
     */
    int exitStatus() {
        return Math.max(ownStatus(), agreedStatus);
    }

    /** The lowest rank whose request set the agreed status; -1 when the run did not stop for one. */
    int agreedFrom() {
        return agreedFrom;
    }

    /**
     * Whether the run stops after {@code step}: this rank was asked to, or (several ranks) any was,
     * which every rank learns here alike (a collective: every rank calls it after every step), together
     * with the status the run then ends with ({@link #exitStatus}).
     */
    boolean agreed(Collective dist, long step) {
        if (dist.worldSize() == 1) return requested;
        double[][] all = dist.gather(new double[] {requested ? 1 : 0, ownStatus()}, "the ranks' stop requests after step " + step);
        boolean any = false;
        int status = 0, from = -1;
        for (int r = 0; r < all.length; r++) {
            any |= all[r][0] > 0;
            if ((int) all[r][1] > status) {
                status = (int) all[r][1];
                from = r;
            }
        }
        if (any) {
            agreedStatus = status;
            agreedFrom = from;
        }
        return any;
    }

    /** The loop has ended: the signals' previous handlers are back. */
    @Override
    public void close() {
        previous.forEach(Signal::handle);
    }
}
