// AgentSpec.java — one entry of `agents:`: an agent's id, its role (which prompt template and
// output parser the orchestra gives it), the model it runs on, and optimiser overrides for that
// model. The list order is the agents' index in rollout batches and metrics.
package dev.drmas.config;

/**
 * @param id    the agent's name, unique (letters, digits, _ and -); required
 * @param role  what the agent does in the orchestra ({@code solver}, {@code verifier}, and for
 *              other workflows {@code searcher}, {@code answerer}, ...), checked against the
 *              workflow's roles when the config loads (WorkflowSchema.roles; a workflow that
 *              declares none checks it when it opens). Default: the id
 * @param model a key of {@code models:}; may be left out when there is exactly one model
 * @param optim optimiser settings this agent sets for its model (default none)
 * @param prompts prompts in place of the role's built-in ones (default none)
 */
public record AgentSpec(String id, String role, String model, OptimOverrides optim, AgentPrompts prompts) {
    public AgentSpec {
        // id and model may be null here: RunConfig fills them in or reports them with the agent's index
        if (id != null) Check.id(id, "id");
        if (role != null) Check.notBlank(role, "role");
        if (model != null) Check.notBlank(model, "model");
        if (optim == null) optim = OptimOverrides.NONE;
        if (prompts == null) prompts = AgentPrompts.NONE;
    }

    /** What a list entry starts from: no id, role or model (RunConfig resolves them), no overrides. */
    public static AgentSpec defaults() {
        return new AgentSpec(null, null, null, OptimOverrides.NONE, AgentPrompts.NONE);
    }

    public AgentSpec(String id, String role, String model) {
        this(id, role, model, OptimOverrides.NONE, AgentPrompts.NONE);
    }

    public AgentSpec(String id, String role, String model, OptimOverrides optim) {
        this(id, role, model, optim, AgentPrompts.NONE);
    }
}
