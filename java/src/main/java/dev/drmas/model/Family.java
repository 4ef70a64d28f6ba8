// Family.java — the decoder-only model families drmas runs, with the names HF config.json uses
// for them (architectures[0] and model_type). They differ only in where the attention has
// biases (Qwen2: q/k/v) and whether queries and keys are RMS-normalised per head (Qwen3).
package dev.drmas.model;

public enum Family {
    QWEN2("Qwen2ForCausalLM", "qwen2"),
    QWEN3("Qwen3ForCausalLM", "qwen3"),
    LLAMA("LlamaForCausalLM", "llama");

    private final String architecture;
    private final String modelType;

    Family(String architecture, String modelType) {
        this.architecture = architecture;
        this.modelType = modelType;
    }

    /** The HF class name, {@code architectures[0]} in config.json. */
    public String architecture() {
        return architecture;
    }

    /** {@code model_type} in config.json. */
    public String modelType() {
        return modelType;
    }

    /** Qwen3 normalises each head of q and k with its own RMSNorm (q_norm, k_norm). */
    public boolean qkNorm() {
        return this == QWEN3;
    }

    static Family byArchitecture(String name) {
        for (Family f : values()) if (f.architecture.equals(name)) return f;
        return null;
    }

    static Family byModelType(String name) {
        for (Family f : values()) if (f.modelType.equals(name)) return f;
        return null;
    }

    static String supported() {
        StringBuilder b = new StringBuilder();
        for (Family f : values()) b.append(b.isEmpty() ? "" : ", ").append(f.architecture);
        return b.toString();
    }
}
