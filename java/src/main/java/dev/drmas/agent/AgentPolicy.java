// AgentPolicy.java — where agents' text comes from. The trainer implements it with the rollout
// engine (render the chat, tokenize, generate with the agent's model); tests implement it with
// scripted functions of the conversation, so a workflow's state machine is testable alone.
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.List;

@FunctionalInterface
public interface AgentPolicy {
    /**
     * One batched call: a turn of {@code agent} for every request, in order. A workflow calls it
     * once per agent per round, with the episodes still active, in the order they were given.
     */
    List<Turn> act(Agent agent, List<TurnRequest> requests);

    /**
     * Turns of several agents whose turns do not wait for each other (search: the answerer and
     * the searcher of one round): {@code requests.get(i)} for {@code agents.get(i)}, the turns
     * returned alike. The trainer's policy generates the requests of agents that share a model in
     * one batch, so that the rollout engine batches them together; by default one {@link #act}
     * per agent, in order. The turns are the same either way.
     */
    default List<List<Turn>> actTogether(List<Agent> agents, List<List<TurnRequest>> requests) {
        if (agents.size() != requests.size()) {
            throw new IllegalArgumentException(agents.size() + " agents but " + requests.size() + " request lists");
        }
        List<List<Turn>> out = new ArrayList<>(agents.size());
        for (int i = 0; i < agents.size(); i++) out.add(act(agents.get(i), requests.get(i)));
        return out;
    }
}
