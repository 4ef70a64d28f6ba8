// AgentPolicy.java — where agents' text comes from. The trainer implements it with the rollout
// engine (render the chat, tokenize, generate with the agent's model); tests implement it with
// scripted functions of the conversation, so a workflow's state machine is testable alone.
package dev.drmas.agent;

import java.util.List;

@FunctionalInterface
public interface AgentPolicy {
    /**
     * One batched call: a turn of {@code agent} for every request, in order. A workflow calls it
     * once per agent per round, with the episodes still active, in the order they were given.
     */
    List<Turn> act(Agent agent, List<TurnRequest> requests);
}
