// GlobalPooling.java — what the group ("global") statistics pool over: one mean score per
// trajectory (the reference code's default) or every row (the paper's formulation).
package dev.drmas.algo;

public enum GlobalPooling implements ConfigEnum {
    TRAJECTORIES("trajectories"),
    ROWS("rows");

    private final String configName;

    GlobalPooling(String configName) {
        this.configName = configName;
    }

    @Override
    public String configName() {
        return configName;
    }

    public static GlobalPooling parse(String text) {
        return ConfigEnum.parse(GlobalPooling.class, "global_pooling", text);
    }
}
