// RopeScaling.java — config.json's rope_scaling: how the rotary inverse frequencies are stretched
// for longer contexts. drmas implements the types its model families ship with: linear (divide
// every frequency by factor) and llama3 (divide only the low frequencies, blend the middle band).
package dev.drmas.model;

/**
 * A rope_scaling entry; a config with none (or rope_type "default") has {@code null} instead.
 * For LINEAR only {@code factor} is used.
 */
public record RopeScaling(Type type, double factor, double lowFreqFactor, double highFreqFactor,
                          long originalMaxPositions) {
    public enum Type {
        LINEAR("linear"), LLAMA3("llama3");

        private final String configName;

        Type(String configName) {
            this.configName = configName;
        }

        public String configName() {
            return configName;
        }
    }

    public RopeScaling {
        if (type == null) throw new IllegalArgumentException("config.json: rope_scaling.rope_type is missing");
        if (!(factor > 0) || !Double.isFinite(factor)) {
            throw new IllegalArgumentException("config.json: rope_scaling.factor must be a positive number, got " + factor);
        }
        if (type == Type.LLAMA3) {
            if (!(lowFreqFactor > 0) || !(highFreqFactor > lowFreqFactor) || !Double.isFinite(highFreqFactor)) {
                throw new IllegalArgumentException("config.json: rope_scaling.high_freq_factor (" + highFreqFactor
                        + ") must be greater than rope_scaling.low_freq_factor (" + lowFreqFactor + ") > 0");
            }
            if (originalMaxPositions <= 0) {
                throw new IllegalArgumentException("config.json: rope_scaling.original_max_position_embeddings must be "
                        + "a positive integer, got " + originalMaxPositions);
            }
        }
    }

    public static RopeScaling linear(double factor) {
        return new RopeScaling(Type.LINEAR, factor, 0, 0, 0);
    }

    public static RopeScaling llama3(double factor, double lowFreqFactor, double highFreqFactor,
                                     long originalMaxPositions) {
        return new RopeScaling(Type.LLAMA3, factor, lowFreqFactor, highFreqFactor, originalMaxPositions);
    }
}
