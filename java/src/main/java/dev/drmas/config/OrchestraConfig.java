// OrchestraConfig.java — `orchestra:`: which multi-agent workflow runs (registered by name), the
// settings of the math solver–verifier loop of the paper's reference code, and those of the search
// workflow (verifier → searcher | answerer) with its retriever.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;

/**
 * @param name             the workflow: {@code math} (default), {@code search}, or another
 *                         registered one
 * @param maxLoops         math: rounds of solver then verifier, &gt;= 1 (the verifier is skipped
 *                         in the last); default 2
 * @param maxTurns         search: turns of verifier then searcher or answerer, &gt;= 1; default 4
 * @param historyLength    search: the latest information blocks shown to the agents, &gt;= 1;
 *                         default 4
 * @param malformedVerdict how a verifier output without a verify tag counts: {@code approve}
 *                         (default, as the reference code; for search: yes, answer now) or
 *                         {@code reject} (search: no, search again)
 * @param invalidPenalty   subtracted from a row's score when its agent's output is malformed
 *                         (solver without \boxed{}, verifier without a verify tag, searcher
 *                         without a search tag, answerer without an answer tag), &gt;= 0; default
 *                         (null) 0.1 for math and 0.01 for search
 * @param retriever        search: where queries go
 */
public record OrchestraConfig(String name, int maxLoops, int maxTurns, int historyLength,
                              MalformedVerdict malformedVerdict, Double invalidPenalty, RetrieverConfig retriever) {

    public enum MalformedVerdict implements ConfigEnum {
        APPROVE("approve"), REJECT("reject");

        private final String configName;

        MalformedVerdict(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    /** The search workflow's name, whose invalid_penalty defaults to 0.01. */
    public static final String SEARCH = "search";

    public OrchestraConfig {
        Check.notBlank(name, "name");
        Check.positive(maxLoops, "max_loops");
        Check.positive(maxTurns, "max_turns");
        Check.positive(historyLength, "history_length");
        Check.given(malformedVerdict, "malformed_verdict");
        if (invalidPenalty != null) Check.nonNegative(invalidPenalty, "invalid_penalty");
        Check.given(retriever, "retriever");
    }

    /** A math workflow's settings (search settings at their defaults). */
    public OrchestraConfig(String name, int maxLoops, MalformedVerdict malformedVerdict, double invalidPenalty) {
        this(name, maxLoops, 4, 4, malformedVerdict, invalidPenalty, RetrieverConfig.defaults());
    }

    public static OrchestraConfig defaults() {
        return new OrchestraConfig("math", 2, 4, 4, MalformedVerdict.APPROVE, null, RetrieverConfig.defaults());
    }

    /** invalid_penalty as set, else the workflow's default: 0.01 for search (as the paper's search setting), 0.1 otherwise. */
    public double effectiveInvalidPenalty() {
        return invalidPenalty != null ? invalidPenalty : name.equals(SEARCH) ? 0.01 : 0.1;
    }
}
