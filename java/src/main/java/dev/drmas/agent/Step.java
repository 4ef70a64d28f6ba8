// Step.java — one recorded agent call of an episode: one training row (agent index, turn index,
// the prompt it saw, the turn it produced, whether its output was a valid action).
package dev.drmas.agent;

import java.util.List;

/**
 * @param agent  the agent's dense index (Agent.index)
 * @param turn   position among the episode's steps: 0, 1, 2, ...
 * @param loop   the workflow round the step was taken in
 * @param prompt the conversation the agent continued
 * @param output the policy's turn (text and payload)
 * @param valid  the agent's validity check on the text
 */
public record Step(int agent, int turn, int loop, List<Message> prompt, Turn output, boolean valid) {
    public Step {
        prompt = List.copyOf(prompt);
    }

    public String text() {
        return output.text();
    }
}
