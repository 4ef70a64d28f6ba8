// Roles.java — the team of a run from its config: each entry of `agents:` names a role, and the
// workflow says which roles it has, how many agents each may have and what prompts an agent of that
// role gets, unless the entry's `prompts` gives its own (checked by the orchestra like the role's). The checks every workflow needs (unknown role, too few or too many agents of a role)
// are RoleSpec's, which the config layer runs when a config is bound (Workflow.roles declares them
// from this same list) and team() runs again, with errors that name the agents[i] entry.
package dev.drmas.workflow;

import dev.drmas.agent.Agent;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.agent.Team;
import dev.drmas.config.AgentPrompts;
import dev.drmas.config.AgentSpec;
import dev.drmas.config.RoleSpec;
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
            new RoleSpec(name, min, max); // its bounds' check
        }

        /** The role's name and bounds, as the config layer checks them. */
        public RoleSpec spec() {
            return new RoleSpec(name, min, max);
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

    /**
     * The team of {@code cfg}'s agents, in config order (index i is agents[i]). A config bound with
     * the workflow's declared roles has passed the same check already; this one is for a workflow
     * that does not declare them through {@link dev.drmas.config.WorkflowSchema#roles}.
     */
    public Team team(RunConfig cfg) {
        RoleSpec.check(workflow, specs(), cfg.agents(), i -> false);
        List<Agent> agents = new ArrayList<>();
        for (int i = 0; i < cfg.agents().size(); i++) {
            AgentSpec a = cfg.agents().get(i);
            agents.add(withPrompts(roles.get(a.role()).agent().apply(i, a.model()).withId(a.id()), a.prompts(), "agents[" + i + "].prompts"));
        }
        return new Team(agents);
    }

    /**
     * The agent with the config's prompts in place of its role's: a user template alone is used in
     * every turn (the role's follow-up was written for the role's own first-turn prompt).
     */
    static Agent withPrompts(Agent agent, AgentPrompts p, String at) {
        if (p.system() != null) agent = agent.withSystemPrompt(p.system());
        if (p.user() == null && p.followUp() == null) return agent;
        PromptTemplate user = p.user() != null ? PromptTemplate.of(p.user(), at + ".user") : agent.userTemplate();
        PromptTemplate followUp = p.followUp() != null ? PromptTemplate.of(p.followUp(), at + ".follow_up")
                : p.user() != null ? null : agent.followUpTemplate();
        return agent.withTemplates(user, followUp);
    }

    /** The roles' names and bounds, in order: what the workflow declares to the config layer. */
    public List<RoleSpec> specs() {
        return roles.values().stream().map(Role::spec).toList();
    }

    /** The roles' names, in order: the agents of a config that lists none, one per role. */
    public List<String> names() {
        return List.copyOf(roles.keySet());
    }

    /** The config ids of the agents with role {@code role}, in config order. */
    public static List<String> idsOf(RunConfig cfg, String role) {
        return cfg.agents().stream().filter(a -> a.role().equals(role)).map(AgentSpec::id).toList();
    }
}
