// AgentPrompts.java — `agents[i].prompts:`: the prompts a config gives an agent in place of its
// role's built-in ones (short prompts that tiny models trained from scratch can follow), so that a
// run on a real model can use prompts written for it, as the Dr. MAS reference's agents have. Each
// key null when not set; the workflow checks the templates' placeholders when it is built.
package dev.drmas.config;

/**
 * @param system   the system message; "" for none; null: the role's
 * @param user     the user-message template of the agent's first turn in an episode (placeholders
 *                 such as {@code {question}}, {@code {context}}: the workflow's, see README
 *                 "Workflows"); null: the role's
 * @param followUp the template of its later turns; null: {@code user} every turn when {@code user}
 *                 is set, else the role's
 */
public record AgentPrompts(String system, String user, String followUp) {
    public static final AgentPrompts NONE = new AgentPrompts(null, null, null);

    public AgentPrompts {
        if (user != null) Check.notBlank(user, "user");
        if (followUp != null) Check.notBlank(followUp, "follow_up");
    }

    public static AgentPrompts defaults() {
        return NONE;
    }

    public boolean isEmpty() {
        return system == null && user == null && followUp == null;
    }
}
