// Retriever.java — what the search workload's searcher queries: top-k passages per query, batched
// (one call per searcher round). Implementations: Bm25Retriever (Lucene, in-process) and
// HttpRetriever (a Search-R1 style server). A query that fails (timeout, server error) is a
// Result with an error, not an exception: one bad call must not crash a training run.
package dev.drmas.workflow.search;

import java.util.List;

public interface Retriever extends AutoCloseable {
    /**
     * The outcome of one query: hits best first, or an error message (then no hits); {@code refused}:
     * the failure is the server's answer (an HTTP error status, a body it should not have sent), not a
     * server out of reach or silent.
     */
    record Result(List<Passage.Hit> hits, String error, boolean refused) {
        public Result {
            hits = List.copyOf(hits);
        }

        public static Result ok(List<Passage.Hit> hits) {
            return new Result(hits, null, false);
        }

        /** A query that got no answer: a timeout, a refused connection. */
        public static Result failed(String error) {
            return new Result(List.of(), error, false);
        }

        /** A query the server answered with an error. */
        public static Result refused(String error) {
            return new Result(List.of(), error, true);
        }

        public boolean failed() {
            return error != null;
        }
    }

    /** The top {@code k} passages for each query, in query order. */
    List<Result> search(List<String> queries, int k);

    @Override
    default void close() {
    }
}
