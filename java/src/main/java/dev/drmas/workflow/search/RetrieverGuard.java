// RetrieverGuard.java — the search workload's way into a retrieval server that may go away: a batch
// whose every search failed is retried while the server is down (waits of 1 s, 2 s, ... 30 s), and
// when it has not come back within retriever.outage_s the run stops, naming the server's error,
// instead of training for hours on "search failed". A server that answers but refuses the batch is
// asked one query at a time, so that one query it cannot take fails alone and the rest go on.
package dev.drmas.workflow.search;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.List;
import java.util.function.LongSupplier;

final class RetrieverGuard {
    /** Waits between tries, in milliseconds: from 1 s, doubling, at most 30 s. */
    static final long FIRST_WAIT_MS = 1000, MAX_WAIT_MS = 30_000;

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
     * @param outageS how long a batch that fails whole is retried before {@link #search} throws; 0:
     *                never (the failed results are returned at once)
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
     * out of reach, silent or refusing every query alike is retried until outage_s has passed.
     *
     * @throws IllegalStateException when the server has failed every try for outage_s, naming it and
     *         its last error: the run stops (it resumes from its last checkpoint once the server is back)
     */
    List<Retriever.Result> search(List<String> queries) {
        List<Retriever.Result> r = retriever.search(queries, k);
        if (outageMs <= 0 || queries.isEmpty() || !allFailed(r)) return r;
        long start = clockMs.getAsLong(), wait = FIRST_WAIT_MS;
        while (true) {
            if (anyRefused(r)) {
                if (queries.size() == 1) return r;  // a query the server refuses, not an outage: it fails alone
                List<Retriever.Result> alone = new ArrayList<>(queries.size());
                for (String q : queries) alone.add(retriever.search(List.of(q), k).getFirst());
                if (!allFailed(alone)) return alone;
                r = alone;  // it refuses every query alike: as good as down
            }
            long waited = clockMs.getAsLong() - start;
            String error = r.getFirst().error();
            if (waited + wait > outageMs) {
                throw new IllegalStateException("the retriever at " + server + " failed every search of a batch of " + queries.size()
                        + (queries.size() == 1 ? " query" : " queries") + " for " + seconds(waited) + " (orchestra.options.retriever"
                        + ".outage_s: " + seconds(outageMs) + "); its last error: " + error + ". The run stops here: start the"
                        + " server and run the same command again (it resumes from the last checkpoint)");
            }
            log.println("drmas: search failed: " + error + "; trying again in " + seconds(wait) + " (the run stops if the retriever has"
                    + " not answered within orchestra.options.retriever.outage_s, " + seconds(outageMs) + ")");
            try {
                sleeper.sleep(wait);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return r;  // a stopping run: the batch's searches fail, as without the guard
            }
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
