// SearchOptions.java — `orchestra.options` of the search workflow (verifier → searcher | answerer):
// turns, the information window, what a verdict-less verifier reply counts as, the invalid-action
// penalty and the retriever behind the searcher's tool.
package dev.drmas.workflow.search;

import dev.drmas.config.Check;
import dev.drmas.workflow.MalformedVerdict;

/**
 * @param maxTurns         turns of verifier then searcher or answerer, &gt;= 1; default 4
 * @param historyLength    the latest information blocks shown to the agents, &gt;= 1; default 4
 * @param malformedVerdict how a verifier output without a yes/no tag counts: {@code approve}
 *                         (default: yes, answer now) or {@code reject} (no, search again)
 * @param invalidPenalty   subtracted from a row's score when its agent's output lacks its tag
 *                         (verifier, searcher, answerer), &gt;= 0; default 0.01 (the paper's search
 *                         setting)
 * @param retriever        where queries go
 */
public record SearchOptions(int maxTurns, int historyLength, MalformedVerdict malformedVerdict, double invalidPenalty,
                            RetrieverOptions retriever) {
    public SearchOptions {
        Check.positive(maxTurns, "max_turns");
        Check.positive(historyLength, "history_length");
        Check.given(malformedVerdict, "malformed_verdict");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
        Check.given(retriever, "retriever");
    }

    public static SearchOptions defaults() {
        return new SearchOptions(4, 4, MalformedVerdict.APPROVE, 0.01, RetrieverOptions.defaults());
    }
}
