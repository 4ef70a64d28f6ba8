// SearchTool.java — the tool the search workflow's searcher uses: a batch of queries in, the text
// of the information block for each out. The workload binds it to a retriever (Lucene BM25 or an
// HTTP server) and formats passages; tests bind it to a map. A failed call is a result, not an
// exception, so the episode goes on (with nothing learned) and the failure is counted.
package dev.drmas.workflow.search;

import java.util.List;

@FunctionalInterface
public interface SearchTool {
    /** What one query brought back: the text shown inside {@code <information>}, and whether the call failed. */
    record Result(String information, boolean failed) {
        public Result {
            java.util.Objects.requireNonNull(information, "information");
        }
    }

    /** One result per query, in order. */
    List<Result> search(List<String> queries);
}
