// NormMode.java — the table of named advantage modes (ARCHITECTURE §5): each entry is what the
// mode means (AdvantageMode: mean and std from the agent or the group, trajectory numerator),
// which is all the native kernels are told. A new mode is one entry here (plus its tests).
package dev.drmas.algo;

public enum NormMode implements ConfigEnum, AdvantageMode {
    /** (x − μ_u)/(σ_u + ε), x = S_t: vanilla GRPO, one baseline per group. */
    GRPO("grpo", false, false, true),
    /** (s − μ_uk)/(σ_uk + ε): Dr. MAS, agent-wise. */
    DRMAS("drmas", true, true, false),
    /** (s − μ_uk)/(σ_u + ε): ablation. */
    AGENT_MEAN("agent-mean", true, false, false),
    /** (s − μ_u)/(σ_uk + ε): ablation. */
    AGENT_STD("agent-std", false, true, false);

    private final String configName;
    private final boolean agentMean;
    private final boolean agentStd;
    private final boolean trajectoryNumerator;

    NormMode(String configName, boolean agentMean, boolean agentStd, boolean trajectoryNumerator) {
        this.configName = configName;
        this.agentMean = agentMean;
        this.agentStd = agentStd;
        this.trajectoryNumerator = trajectoryNumerator;
    }

    @Override
    public String configName() {
        return configName;
    }

    @Override
    public boolean agentMean() {
        return agentMean;
    }

    @Override
    public boolean agentStd() {
        return agentStd;
    }

    @Override
    public boolean trajectoryNumerator() {
        return trajectoryNumerator;
    }

    public static NormMode parse(String text) {
        return ConfigEnum.parse(NormMode.class, "mode", text);
    }
}
