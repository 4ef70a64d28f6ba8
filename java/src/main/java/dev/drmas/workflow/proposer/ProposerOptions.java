// ProposerOptions.java — `orchestra.options` of the proposer-aggregator workflow: how many proposals
// each episode gets before the aggregator answers, and the invalid-action penalty.
package dev.drmas.workflow.proposer;

import dev.drmas.config.Check;

/**
 * @param proposers      proposer calls per episode (P), &gt;= 1; default 3. With several agents of
 *                       role proposer, call i goes to proposer i mod (their number), so each needs
 *                       P &gt;= the number of proposer agents
 * @param invalidPenalty subtracted from a row's score when its output has no \boxed{} answer,
 *                       &gt;= 0; default 0.1 (as math)
 */
public record ProposerOptions(int proposers, double invalidPenalty) {
    public ProposerOptions {
        Check.positive(proposers, "proposers");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
    }

    public static ProposerOptions defaults() {
        return new ProposerOptions(3, 0.1);
    }
}
