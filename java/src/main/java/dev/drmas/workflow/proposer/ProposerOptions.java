// ProposerOptions.java — `orchestra.options` of the proposer-aggregator workflow: how many proposals
// each episode gets before the aggregator answers, the invalid-action penalty, and a grader command in
// place of the built-in answer check.
package dev.drmas.workflow.proposer;

import dev.drmas.config.Check;
import dev.drmas.workflow.GraderOptions;

/**
 * @param proposers      proposer calls per episode (P), &gt;= 1; default 3. With several agents of
 *                       role proposer, call i goes to proposer i mod (their number), so each needs
 *                       P &gt;= the number of proposer agents
 * @param invalidPenalty subtracted from a row's score when its output has no \boxed{} answer,
 *                       &gt;= 0; default 0.1 (as math)
 * @param grader         a command that grades the aggregator's final reply and each proposal instead of
 *                       the built-in check (AnswerGrader; ground_truth: the task's answer string); default none
 */
public record ProposerOptions(int proposers, double invalidPenalty, GraderOptions grader) {
    public ProposerOptions {
        Check.positive(proposers, "proposers");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
        Check.given(grader, "grader");
    }

    public static ProposerOptions defaults() {
        return new ProposerOptions(3, 0.1, GraderOptions.defaults());
    }
}
