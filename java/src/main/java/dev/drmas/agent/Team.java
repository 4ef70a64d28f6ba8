// Team.java — the agents of a run and the agent → model mapping: shared (several agents on one
// model, hence one optimiser), non-shared (a model per agent) or heterogeneous (models of
// different configs; here only their ids). It also merges optimiser settings into one per model.
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

public final class Team {
    private final List<Agent> agents;                       // by index
    private final Map<String, Agent> byId = new LinkedHashMap<>();
    private final Map<String, List<Agent>> byModel = new LinkedHashMap<>();  // models in order of first agent
    private final Map<String, OptimSettings> optim;

    /** A team whose models all use {@link OptimSettings#DEFAULTS}. */
    public Team(List<Agent> agents) {
        this(agents, OptimSettings.DEFAULTS, Map.of(), Map.of());
    }

    /**
     * @param agents      the agents; their indices must be exactly 0..n-1 (in any order)
     * @param defaults    optimiser settings of every model unless overridden
     * @param modelOptim  per model id: settings of that model's optimiser
     * @param agentOptim  per agent id: settings its model's optimiser should use; agents that
     *                    share a model must not disagree on a key (one optimiser serves them all)
     */
    public Team(List<Agent> agents, OptimSettings defaults, Map<String, OptimOverrides> modelOptim,
                Map<String, OptimOverrides> agentOptim) {
        Objects.requireNonNull(defaults, "defaults");
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
        for (String m : modelOptim.keySet()) {
            if (!byModel.containsKey(m)) {
                throw new IllegalArgumentException("optimiser settings for model '" + m
                        + "', which no agent uses; models: " + String.join(", ", byModel.keySet()));
            }
        }
        for (String a : agentOptim.keySet()) {
            if (!byId.containsKey(a)) {
                throw new IllegalArgumentException("optimiser overrides for agent '" + a
                        + "', which is not in the team; agents: " + String.join(", ", byId.keySet()));
            }
        }
        this.optim = Collections.unmodifiableMap(resolve(defaults, modelOptim, agentOptim));
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

    /** One complete optimiser configuration per model, in {@link #models()} order. */
    public Map<String, OptimSettings> resolveOptim() {
        return optim;
    }

    // defaults, then the model's settings, then the settings its agents give (which must agree)
    private Map<String, OptimSettings> resolve(OptimSettings defaults, Map<String, OptimOverrides> modelOptim,
                                               Map<String, OptimOverrides> agentOptim) {
        Map<String, OptimSettings> out = new LinkedHashMap<>();
        for (var e : byModel.entrySet()) {
            String model = e.getKey();
            OptimSettings settings;
            try {
                settings = defaults.with(modelOptim.getOrDefault(model, OptimOverrides.NONE));
            } catch (IllegalArgumentException ex) {
                throw new IllegalArgumentException("model '" + model + "': " + ex.getMessage(), ex);
            }
            Object[] merged = new Object[OptimOverrides.NONE.entries().size()];
            Agent[] setBy = new Agent[merged.length];
            String[] keys = new String[merged.length];
            for (Agent a : e.getValue()) {
                List<OptimOverrides.Entry> entries = agentOptim.getOrDefault(a.id(), OptimOverrides.NONE).entries();
                for (int k = 0; k < entries.size(); k++) {
                    keys[k] = entries.get(k).key();
                    Object v = entries.get(k).value();
                    if (v == null) continue;
                    if (merged[k] != null && !merged[k].equals(v)) {
                        throw new IllegalArgumentException("agents '" + setBy[k].id() + "' and '" + a.id()
                                + "' share model '" + model + "' (one optimiser) but set optim." + keys[k]
                                + " differently (" + merged[k] + " vs " + v + "); set it once for the model"
                                + " or give both agents the same value");
                    }
                    merged[k] = v;
                    setBy[k] = a;
                }
            }
            OptimOverrides fromAgents = new OptimOverrides((Double) merged[0], (Double) merged[1], (Double) merged[2],
                    (Double) merged[3], (Integer) merged[4], (Double) merged[5]);
            try {
                out.put(model, settings.with(fromAgents));
            } catch (IllegalArgumentException ex) {
                String who = Arrays.stream(setBy).filter(Objects::nonNull).map(Agent::id).distinct()
                        .map(id -> "'" + id + "'").toList().toString();
                throw new IllegalArgumentException("model '" + model + "' with overrides of agents " + who + ": "
                        + ex.getMessage(), ex);
            }
        }
        return out;
    }

    @Override
    public String toString() {
        StringBuilder sb = new StringBuilder("Team[");
        for (Agent a : agents) sb.append(a.index() == 0 ? "" : ", ").append(a.id()).append("→").append(a.modelId());
        return sb.append(']').toString();
    }
}
