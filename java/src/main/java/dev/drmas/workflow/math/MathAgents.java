// MathAgents.java — the math workflow's roles with short prompts that tiny character-level models can
// follow: the solver (valid with a non-empty \boxed{} answer) and the verifier (valid with an
// approve/reject verdict tag, read by MathReward's parser).
package dev.drmas.workflow.math;

import dev.drmas.agent.Agent;
import dev.drmas.agent.PromptTemplate;

public final class MathAgents {
    public static final String SOLVER = "solver";
    public static final String VERIFIER = "verifier";

    private MathAgents() {
    }

    /** The solver; later turns (after a rejection) see the previous answer and the verdict. */
    public static Agent solver(int index, String modelId) {
        return new Agent(SOLVER, index, modelId, "Solve. Put the final answer in \\boxed{}.",
                PromptTemplate.of("Q: {question}"),
                PromptTemplate.of("Q: {question}\nPrevious: {answer}\nVerifier: {verdict}"),
                MathReward::solverValid);
    }

    /** The verifier of the solver's latest answer. */
    public static Agent verifier(int index, String modelId) {
        return new Agent(VERIFIER, index, modelId,
                "Check the answer. Reply <verify>approve</verify> or <verify>reject</verify>.",
                PromptTemplate.of("Q: {question}\nA: {answer}"), null, MathReward::verifierValid);
    }
}
