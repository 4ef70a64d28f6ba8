// ProposerAgents.java — the proposer-aggregator roles with short prompts that tiny character-level
// models can follow; both are valid with a non-empty \boxed{} answer (math's check).
package dev.drmas.workflow.proposer;

import dev.drmas.agent.Agent;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.workflow.math.MathReward;

final class ProposerAgents {
    static final String PROPOSER = "proposer", AGGREGATOR = "aggregator";

    private ProposerAgents() {
    }

    /** A proposer answers the question alone (the math solver's prompt). */
    static Agent proposer(int index, String modelId) {
        return new Agent(PROPOSER, index, modelId, "Solve. Put the final answer in \\boxed{}.",
                PromptTemplate.of("Q: {question}"), null, MathReward::solverValid);
    }

    /** The aggregator reads the proposals and writes the final answer. */
    static Agent aggregator(int index, String modelId) {
        return new Agent(AGGREGATOR, index, modelId, "Pick the best proposal. Put the final answer in \\boxed{}.",
                PromptTemplate.of("Q: {question}\n{proposals}"), null, MathReward::solverValid);
    }
}
