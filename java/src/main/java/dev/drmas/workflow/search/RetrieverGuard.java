// RetrieverGuard.java — the search workload's way into a retrieval server that may go away: a batch
// whose every search failed is retried while the server is down (waits of 1 s, 2 s, ... 30 s), and
// when it has not come back within retriever.outage_s the run stops after the step under way, saving
// it and naming the server's error (RunStop), instead of training for hours on "search failed". A
// server that answers but refuses the batch is asked one query at a time, so that one query it
// cannot take fails alone and the rest go on.
package dev.drmas.workflow.search;

import dev.drmas.workflow.RunStop;
import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongSupplier;

final class RetrieverGuard {
    /** Waits between tries, in milliseconds: from 1 s, doubling, at most 30 s. */
    static final long FIRST_WAIT_MS = 1000, MAX_WAIT_MS = 30_000, SLICE_MS = 1000;

    /** How the guard waits (tests pass their own clock). */
    interface Sleeper {
        void sleep(long ms) throws InterruptedException;
    }

    private final Retriever retriever;
    private final int k;
    private final long outageMs;
    private final String server;
    private final PrintStream log;
    private final LongSupplier clockMs;
    private final Sleeper sleeper;

    /**
     * @param outageS how long a batch that fails whole is retried before {@link #search} gives up (see
     *                there); 0: never retried (the failed results are returned at once)
     * @param server  the server's name in messages (its URL)
     */
    RetrieverGuard(Retriever retriever, int k, double outageS, String server, PrintStream log) {
        this(retriever, k, outageS, server, log, () -> System.nanoTime() / 1_000_000, Thread::sleep);
    }

    RetrieverGuard(Retriever retriever, int k, double outageS, String server, PrintStream log, LongSupplier clockMs, Sleeper sleeper) {
        this.retriever = retriever;
        this.k = k;
        this.outageMs = Math.round(outageS * 1000);
        this.server = server;
        this.log = log;
        this.clockMs = clockMs;
        this.sleeper = sleeper;
    }

    /**
     * One result per query. Where every query of the batch failed: a server that answered with an
     * error is asked each query alone (those it answers count; the others fail alone), and a server
     * out of reach, silent or refusing every query alike is tried again until outage_s has passed.
     * Then, during a training step, the run is asked to stop after the step (RunStop: it saves that
     * step, whose remaining searches fail at once, and ends with status 75) and the failed results are
     * returned; elsewhere (evaluation, a warm start) it throws. A stop asked for meanwhile (SIGTERM) ends
     * the wait at once, in the same ways.
     *
     * @throws IllegalStateException outside a training step, when the server has failed every try for
     *         outage_s or the run is stopping, naming the server and its last error
     */
    List<Retriever.Result> search(List<String> queries) {
        List<Retriever.Result> r = retriever.search(queries, k);
        if (outageMs <= 0 || queries.isEmpty() || !allFailed(r)) return r;
        long start = clockMs.getAsLong(), wait = FIRST_WAIT_MS;
        while (true) {
            boolean stopping = RunStop.stopRequested();
            if (!stopping && anyRefused(r)) {
                if (queries.size() == 1) return r;  // a query the server refuses, not an outage: it fails alone
                List<Retriever.Result> alone = new ArrayList<>(queries.size());
                for (String q : queries) alone.add(retriever.search(List.of(q), k).getFirst());
                if (!allFailed(alone)) return alone;
                r = alone;  // it refuses every query alike: as good as down
            }
            String error = r.getFirst().error();
            long waited = clockMs.getAsLong() - start, left = outageMs - waited;
            if (left <= 0 || stopping) {
                String what = "the retriever at " + server + " failed every search of a batch of " + queries.size()
                        + (queries.size() == 1 ? " query" : " queries") + " for " + seconds(waited) + " (orchestra.options.retriever"
                        + ".outage_s: " + seconds(outageMs) + "); its last error: " + error;
                if (RunStop.canStopAfterStep()) {
                    // the step goes on with these searches failed, and the run stops after it, saving it
                    if (!stopping) {
                        RunStop.requestStopAfterStep(what + ". Start the server and run the same command again: it resumes from the"
                                + " checkpoint of this step (whose searches from here on failed)");
                        log.println("drmas: " + what + ": stopping after this step");
                    }
                    return r;
                }
                throw new IllegalStateException(what + (stopping ? " (the run was asked to stop meanwhile)" : "")
                        + ". The run stops here: start the server and run the same command again");
            }
            long nap = Math.min(wait, left);  // the last try falls at the deadline
            log.println("drmas: search failed: " + error + "; trying again in " + seconds(nap) + " (the run stops if the retriever has"
                    + " not answered within orchestra.options.retriever.outage_s, " + seconds(outageMs) + ")");
            try {
                // in slices, so that a stop asked for meanwhile ends the wait within a second
                for (long slept = 0; slept < nap && !RunStop.stopRequested(); slept += SLICE_MS) sleeper.sleep(Math.min(SLICE_MS, nap - slept));
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return r;  // (nothing interrupts the training thread; as without the guard)
            }
            if (RunStop.stopRequested()) continue;  // decided above: no further try
            wait = Math.min(2 * wait, MAX_WAIT_MS);
            r = retriever.search(queries, k);
            if (!allFailed(r)) return r;
        }
    }

    private static boolean allFailed(List<Retriever.Result> r) {
        for (Retriever.Result x : r) if (!x.failed()) return false;
        return true;
    }

    private static boolean anyRefused(List<Retriever.Result> r) {
        for (Retriever.Result x : r) if (x.refused()) return true;
        return false;
    }

    private static String seconds(long ms) {
        return ms % 1000 == 0 ? ms / 1000 + " s" : String.format(java.util.Locale.ROOT, "%.1f s", ms / 1000.0);
    }
}
