// NormMode.java — the advantage normalisation modes of ARCHITECTURE §5: which segment the
// mean and the std come from. The ordinal order matches DRMAS_MODE_* in drmas.h.
package dev.drmas.algo;

public enum NormMode implements ConfigEnum {
    /** (x − μ_u)/(σ_u + ε): vanilla GRPO, one baseline per group. */
    GRPO("grpo", false, false),
    /** (s − μ_uk)/(σ_uk + ε): Dr. MAS, agent-wise. */
    DRMAS("drmas", true, true),
    /** (s − μ_uk)/(σ_u + ε): ablation. */
    AGENT_MEAN("agent-mean", true, false),
    /** (s − μ_u)/(σ_uk + ε): ablation. */
    AGENT_STD("agent-std", false, true);

    private final String configName;
    private final boolean agentMean;
    private final boolean agentStd;

    NormMode(String configName, boolean agentMean, boolean agentStd) {
        this.configName = configName;
        this.agentMean = agentMean;
        this.agentStd = agentStd;
    }

    @Override
    public String configName() {
        return configName;
    }

    /** Whether the mean comes from the (uid, agent) segment rather than the group. */
    public boolean agentMean() {
        return agentMean;
    }

    /** Whether the std comes from the (uid, agent) segment rather than the group. */
    public boolean agentStd() {
        return agentStd;
    }

    public static NormMode parse(String text) {
        return ConfigEnum.parse(NormMode.class, "mode", text);
    }
}
