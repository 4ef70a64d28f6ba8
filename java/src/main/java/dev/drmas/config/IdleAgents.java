// IdleAgents.java — the agents that a config's workflow options leave without a turn (math with
// max_loops 1: the verifier), and the models that therefore never train, decided from the config
// alone (WorkflowSchema.idleRoles), so that `drmas train` logs them and `drmas plan`, which loads
// nothing, prints them. Warnings, not errors: a run may mean it. (`drmas sft` warns from what its
// demonstrations did instead: a model that got no rows.)
package dev.drmas.config;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

public final class IdleAgents {
    private IdleAgents() {
    }

    /** One line per agent that never acts, and per model none of whose agents acts; empty when every agent can act. */
    public static List<String> warnings(RunConfig cfg) {
        Map<String, String> idle = WorkflowSchema.named(cfg.orchestra().name()).idleRoles(cfg.orchestra().options());
        List<String> out = new ArrayList<>();
        if (idle.isEmpty()) return out;
        for (AgentSpec a : cfg.agents()) {
            String why = idle.get(a.role());
            if (why != null) out.add("agent '" + a.id() + "' (role " + a.role() + ", model " + a.model() + ") never acts and gets no "
                    + "training rows: " + why);
        }
        for (String m : cfg.usedModels()) {
            List<AgentSpec> agents = cfg.agentsOf(m);
            if (agents.stream().allMatch(a -> idle.containsKey(a.role()))) {
                out.add("model '" + m + "' (agents " + String.join(", ", agents.stream().map(AgentSpec::id).toList()) + ") never trains: "
                        + "none of its agents acts, so its weights stay as they start");
            }
        }
        return out;
    }
}
