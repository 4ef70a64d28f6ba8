// SearchOptions.java — `orchestra.options` of the search workflow (verifier → searcher | answerer):
// turns, the information window, what a verdict-less verifier reply counts as, the invalid-action
// penalty, the Dr. MAS reference's extra format checks and answer retry (off by default), the
// retriever behind the searcher's tool, and a grader command in place of the built-in exact match.
package dev.drmas.workflow.search;

import dev.drmas.config.Check;
import dev.drmas.workflow.GraderOptions;
import dev.drmas.workflow.MalformedVerdict;

/**
 * @param maxTurns         turns of verifier then searcher or answerer, &gt;= 1; default 4
 * @param historyLength    the latest information blocks shown to the agents, &gt;= 1; default 4
 * @param malformedVerdict how a verifier output without a yes/no tag counts: {@code approve}
 *                         (default: yes, answer now) or {@code reject} (no, search again)
 * @param invalidPenalty   subtracted from a row's score when its agent's output lacks its tag
 *                         (verifier, searcher, answerer), &gt;= 0; default 0.01 (the paper's search
 *                         setting)
 * @param requireThink     a searcher or answerer reply is valid only with exactly one {@code <think>}
 *                         and one {@code </think>}, in that order (the reference's check_think_tag);
 *                         default false
 * @param rejectCjk        a verifier, searcher or answerer reply with a character in U+4E00–U+9FFF is
 *                         invalid (the reference's check); default false
 * @param retryUnanswered  an answerer reply without an {@code <answer>…</answer>} tag does not end the
 *                         episode while turns remain: the next turn starts with the verifier again (the
 *                         reference's environment); default false: it ends the episode, reward 0
 * @param retriever        where queries go
 * @param grader           a command that grades the answerer's final reply of an approved episode instead
 *                         of the built-in exact match (AnswerGrader; ground_truth: {"target": [answers]},
 *                         as Search-R1's data gives it to verl; an episode the verifier did not approve
 *                         still scores 0); default none
 */
public record SearchOptions(int maxTurns, int historyLength, MalformedVerdict malformedVerdict, double invalidPenalty,
                            boolean requireThink, boolean rejectCjk, boolean retryUnanswered, RetrieverOptions retriever,
                            GraderOptions grader) {
    public SearchOptions {
        Check.positive(maxTurns, "max_turns");
        Check.positive(historyLength, "history_length");
        Check.given(malformedVerdict, "malformed_verdict");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
        Check.given(retriever, "retriever");
        Check.given(grader, "grader");
    }

    public static SearchOptions defaults() {
        return new SearchOptions(4, 4, MalformedVerdict.APPROVE, 0.01, false, false, false, RetrieverOptions.defaults(), GraderOptions.defaults());
    }
}
