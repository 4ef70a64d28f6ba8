// RoleSpec.java — one role of a workflow as the config layer sees it: the name that agents[i].role
// spells and how many agents may have it. A workflow that declares its roles (WorkflowSchema.roles)
// has its agents checked when the config is bound, so that a mistyped role is reported at its
// file:line or override before any model loads; the workflow's Roles runs the same check when it
// builds the team, so that both say the same thing.
package dev.drmas.config;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.IntPredicate;

/**
 * @param name the role as configs spell it ({@code agents[i].role})
 * @param min  agents the workflow needs in this role, &gt;= 0
 * @param max  agents it can use in this role, &gt;= max(min, 1)
 */
public record RoleSpec(String name, int min, int max) {
    public RoleSpec {
        // a workflow author's mistake, not a user's: no key path to name
        if (name == null || name.isBlank()) throw new IllegalArgumentException("a role needs a name");
        if (min < 0 || max < Math.max(min, 1)) throw new IllegalArgumentException("role " + name + ": bad bounds " + min + ".." + max);
    }

    /**
     * Checks {@code agents} (roles filled in) against the {@code roles} of {@code workflow}: each
     * names one of them, no role has more than its max, and each has its min. {@code roleFromId}
     * tells which agents had no role: of their own (their id stands for it), which an unknown
     * role's message then says.
     *
     * @throws ConfigException at agents[i].role, or at agents for a role too few agents have
     */
    public static void check(String workflow, List<RoleSpec> roles, List<AgentSpec> agents, IntPredicate roleFromId) {
        Map<String, RoleSpec> byName = new LinkedHashMap<>();
        for (RoleSpec r : roles) byName.put(r.name(), r);
        Map<String, List<Integer>> byRole = new LinkedHashMap<>();
        for (int i = 0; i < agents.size(); i++) {
            String role = agents.get(i).role();
            String at = "agents[" + i + "].role";
            RoleSpec r = byName.get(role);
            if (r == null) {
                throw ConfigException.at(at, "'" + role + "' is not a role of the " + workflow + " workflow ("
                        + String.join(", ", byName.keySet()) + ")"
                        + (roleFromId.test(i) ? "; agents[" + i + "] has no role:, so its id stands for it" : ""));
            }
            List<Integer> same = byRole.computeIfAbsent(r.name(), k -> new ArrayList<>());
            if (same.size() == r.max()) {
                throw ConfigException.at(at, "'" + role + "' is also the role of "
                        + String.join(", ", same.stream().map(j -> "agents[" + j + "]").toList()) + "; the " + workflow
                        + " workflow has at most " + r.max() + " " + r.name() + (r.max() == 1 ? "" : "s"));
            }
            same.add(i);
        }
        for (RoleSpec r : roles) {
            int n = byRole.getOrDefault(r.name(), List.of()).size();
            if (n < r.min()) {
                throw ConfigException.at("agents", "the " + workflow + " workflow needs " + (r.min() == 1 ? "an agent" : r.min() + " agents")
                        + " with role " + r.name() + (n > 0 ? " (has " + n + ")" : ""));
            }
        }
    }
}
