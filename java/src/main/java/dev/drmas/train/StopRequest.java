// StopRequest.java — a graceful stop on SIGTERM or SIGINT while training (a scheduler's preemption or
// scancel, `kill`, Ctrl-C, `drmas launch` or `drmas experiment` stopped): the JVM's shutdown hook asks
// the training loop to stop after the step under way and holds the process until the loop has saved a
// checkpoint of that step and ended; the ranks of a data-parallel run agree on the step to stop after
// (a sum of their requests once a step), so that they save the same one and leave no collective
// unpaired. Without it a stop lost every step since the last checkpoint, silently. A kill -9 (or the
// scheduler's own kill after its grace period) still stops at once: the temporary folder of a save it
// interrupts is removed when the run starts again.
package dev.drmas.train;

import dev.drmas.dist.Collective;
import java.io.PrintStream;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongSupplier;

final class StopRequest implements AutoCloseable {
    private final AtomicBoolean requested = new AtomicBoolean();
    private volatile Throwable failure;  // what ended the loop after a stop was asked for, instead of the stop's save
    private final CountDownLatch ended = new CountDownLatch(1);
    private final Thread hook;

    /**
     * Installs the hook until {@link #close}: on a stop it says, into {@code log} (null: nothing),
     * what happens next, using {@code step} (the steps done so far) and whether checkpoints are saved.
     */
    StopRequest(PrintStream log, LongSupplier step, boolean saves) {
        hook = new Thread(() -> {
            requested.set(true);
            if (log != null) {
                log.println();
                log.println("drmas: stop requested (SIGTERM or SIGINT): finishing step " + (step.getAsLong() + 1)
                        + (saves ? ", then saving its checkpoint" : " (trainer.save_freq is 0: no checkpoint)")
                        + "; kill -9 stops at once, losing the steps since the last checkpoint");
                log.flush();
            }
            try {
                ended.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            Throwable f = failure;
            if (f != null) {
                // the JVM ends when this hook returns, before the main thread reports the error: said here, and the
                // process exits 1, not the 143 of a stop that saved
                System.err.println("drmas: the stop failed: " + f + "; the last checkpoint is the one before it");
                System.err.flush();
                Runtime.getRuntime().halt(1);
            }
        }, "drmas-stop-request");
        Runtime.getRuntime().addShutdownHook(hook);
    }

    /** Whether this rank was asked to stop. */
    boolean requested() {
        return requested.get();
    }

    /** What ended the loop after a stop was asked for, or null. */
    Throwable failure() {
        return failure;
    }

    /** The loop ended with {@code e} after a stop was asked for: the hook reports it and exits 1. */
    void failed(Throwable e) {
        failure = e;
    }

    /** Asks for the stop as the hook does (tests: a signal to the test's own JVM would end the test run). */
    void request() {
        requested.set(true);
    }

    /**
     * Whether the run stops after {@code step}: this rank was asked to, or (several ranks) any was,
     * which every rank learns here alike (a collective: every rank calls it after every step).
     */
    boolean agreed(Collective dist, long step) {
        boolean mine = requested.get();
        if (dist.worldSize() == 1) return mine;
        double[] any = {mine ? 1 : 0};
        dist.sum(any, "the ranks' stop requests after step " + step);
        return any[0] > 0;
    }

    /** The loop has ended (saved, or failed): a waiting hook lets the JVM exit; else the hook is removed. */
    @Override
    public void close() {
        ended.countDown();
        try {
            Runtime.getRuntime().removeShutdownHook(hook);
        } catch (IllegalStateException shuttingDown) {
            // the hook is running: it returns now
        }
    }
}
