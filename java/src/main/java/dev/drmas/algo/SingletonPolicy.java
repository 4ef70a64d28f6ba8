// SingletonPolicy.java — what happens when a segment the mode uses has one member
// (ARCHITECTURE §5): fall back to the group, give 0, or use mean 0 / std 1 as verl does.
package dev.drmas.algo;

public enum SingletonPolicy implements ConfigEnum {
    FALLBACK("fallback"),
    ZERO("zero"),
    RAW("raw");

    private final String configName;

    SingletonPolicy(String configName) {
        this.configName = configName;
    }

    @Override
    public String configName() {
        return configName;
    }

    public static SingletonPolicy parse(String text) {
        return ConfigEnum.parse(SingletonPolicy.class, "singleton", text);
    }
}
