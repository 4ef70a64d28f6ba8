// Roles.java — the team of a run from its config: each entry of `agents:` names a role, and the
// workflow says which roles it has, how many agents each may have and what prompts an agent of that
// role gets. One implementation of the checks every workflow needs (unknown role, too few or too
// many agents of a role), with errors that name the agents[i] entry.
package dev.drmas.workflow;

import dev.drmas.agent.Agent;
import dev.drmas.agent.Team;
import dev.drmas.config.AgentSpec;
import dev.drmas.config.RunConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.BiFunction;

public final class Roles {
    /**
     * One role of a workflow.
     *
     * @param name  the role as configs spell it ({@code agents[i].role})
     * @param min   agents the workflow needs in this role, &gt;= 0
     * @param max   agents it can use in this role, &gt;= max(min, 1)
     * @param agent the role's agent (prompts, validity) for (dense index, model id); the trainer
     *              renames it to the config's agent id
     */
    public record Role(String name, int min, int max, BiFunction<Integer, String, Agent> agent) {
        public Role {
            if (min < 0 || max < Math.max(min, 1)) throw new IllegalArgumentException("role " + name + ": bad bounds " + min + ".." + max);
        }

        /** A role with exactly one agent. */
        public static Role one(String name, BiFunction<Integer, String, Agent> agent) {
            return new Role(name, 1, 1, agent);
        }
    }

    private final String workflow;
    private final Map<String, Role> roles = new LinkedHashMap<>();

    public Roles(String workflow, List<Role> roles) {
        this.workflow = workflow;
        for (Role r : roles) this.roles.put(r.name(), r);
    }

    /** The team of {@code cfg}'s agents, in config order (index i is agents[i]). */
    public Team team(RunConfig cfg) {
        List<Agent> agents = new ArrayList<>();
        Map<String, List<Integer>> byRole = new LinkedHashMap<>();
        for (int i = 0; i < cfg.agents().size(); i++) {
            AgentSpec a = cfg.agents().get(i);
            Role r = roles.get(a.role());
            if (r == null) {
                throw new IllegalArgumentException("agents[" + i + "].role: '" + a.role() + "' is not a role of the " + workflow
                        + " workflow (" + String.join(", ", roles.keySet()) + ")");
            }
            List<Integer> same = byRole.computeIfAbsent(r.name(), k -> new ArrayList<>());
            if (same.size() == r.max()) {
                throw new IllegalArgumentException("agents[" + i + "].role: '" + a.role() + "' is also the role of "
                        + String.join(", ", same.stream().map(j -> "agents[" + j + "]").toList()) + "; the " + workflow + " workflow has at most "
                        + r.max() + " " + r.name() + (r.max() == 1 ? "" : "s"));
            }
            same.add(i);
            agents.add(r.agent().apply(i, a.model()).withId(a.id()));
        }
        for (Role r : roles.values()) {
            int n = byRole.getOrDefault(r.name(), List.of()).size();
            if (n < r.min()) {
                throw new IllegalArgumentException("agents: the " + workflow + " workflow needs " + (r.min() == 1 ? "an agent" : r.min() + " agents")
                        + " with role " + r.name() + (n > 0 ? " (has " + n + ")" : ""));
            }
        }
        return new Team(agents);
    }

    /** The config ids of the agents with role {@code role}, in config order. */
    public static List<String> idsOf(RunConfig cfg, String role) {
        return cfg.agents().stream().filter(a -> a.role().equals(role)).map(AgentSpec::id).toList();
    }
}
