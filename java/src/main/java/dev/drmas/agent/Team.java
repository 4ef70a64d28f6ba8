// Team.java — the agents of a run and the agent → model mapping: shared (several agents on one
// model, hence one optimiser), non-shared (a model per agent) or heterogeneous (models of
// different configs; here only their ids). Optimiser settings per model, with per-agent overrides
// and the check that agents sharing a model agree, live in the run config (RunConfig.optimFor).
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class Team {
    private final List<Agent> agents;                       // by index
    private final Map<String, Agent> byId = new LinkedHashMap<>();
    private final Map<String, List<Agent>> byModel = new LinkedHashMap<>();  // models in order of first agent
    /** @param agents the agents; their indices must be exactly 0..n-1 (in any order) */
    public Team(List<Agent> agents) {
        if (agents == null || agents.isEmpty()) throw new IllegalArgumentException("a team needs at least one agent");
        Agent[] slots = new Agent[agents.size()];
        for (Agent a : agents) {
            if (byId.putIfAbsent(a.id(), a) != null) {
                throw new IllegalArgumentException("two agents are named '" + a.id() + "'; agent ids must be unique");
            }
            if (a.index() >= slots.length) {
                throw new IllegalArgumentException("agent '" + a.id() + "': index " + a.index()
                        + " is out of range; a team of " + slots.length + " agents uses indices 0.." + (slots.length - 1));
            }
            if (slots[a.index()] != null) {
                throw new IllegalArgumentException("agents '" + slots[a.index()].id() + "' and '" + a.id()
                        + "' both have index " + a.index() + "; indices must be 0..n-1, one per agent");
            }
            slots[a.index()] = a;
        }
        this.agents = List.of(slots);
        for (Agent a : this.agents) byModel.computeIfAbsent(a.modelId(), m -> new ArrayList<>()).add(a);
        byModel.replaceAll((m, list) -> List.copyOf(list));
    }

    /** The agents in index order. */
    public List<Agent> agents() {
        return agents;
    }

    public int size() {
        return agents.size();
    }

    public Agent agent(int index) {
        if (index < 0 || index >= agents.size()) {
            throw new IllegalArgumentException("no agent with index " + index + " in a team of " + agents.size());
        }
        return agents.get(index);
    }

    public Agent agent(String id) {
        Agent a = byId.get(id);
        if (a == null) {
            throw new IllegalArgumentException("no agent '" + id + "' in the team; agents: " + String.join(", ", byId.keySet()));
        }
        return a;
    }

    public boolean has(String agentId) {
        return byId.containsKey(agentId);
    }

    /** Model ids in order of the first agent that uses each. */
    public List<String> models() {
        return List.copyOf(byModel.keySet());
    }

    public String modelOf(String agentId) {
        return agent(agentId).modelId();
    }

    /** The agents a model generates for and is trained on, in index order. */
    public List<Agent> agentsOf(String modelId) {
        List<Agent> list = byModel.get(modelId);
        if (list == null) {
            throw new IllegalArgumentException("no agent uses model '" + modelId + "'; models: "
                    + String.join(", ", byModel.keySet()));
        }
        return list;
    }

    /** Whether several agents share this model (and its optimiser). */
    public boolean isShared(String modelId) {
        return agentsOf(modelId).size() > 1;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("Team[");
        for (Agent a : agents) sb.append(a.index() == 0 ? "" : ", ").append(a.id()).append("→").append(a.modelId());
        return sb.append(']').toString();
    }
}
