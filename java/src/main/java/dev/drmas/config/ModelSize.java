// ModelSize.java — `models.<id>.size:`: the shape of a transformer trained from scratch (the tiny
// models of the CPU demo). Checked here so that a bad shape names its key before LibTorch sees it.
package dev.drmas.config;

/**
 * @param hidden        hidden size; default 128
 * @param layers        decoder layers; default 2
 * @param heads         attention heads; default 4
 * @param kvHeads       key/value heads (grouped-query attention), dividing heads; default 2
 * @param intermediate  MLP inner size; default 256
 * @param headDim       per-head size, even; 0 (default) = hidden / heads
 * @param maxPositions  the longest sequence (prompt + response) the model takes; default 1024
 * @param tieEmbeddings share the input embedding and the LM head; default true
 * @param ropeTheta     rotary embedding base; default 10000
 */
public record ModelSize(int hidden, int layers, int heads, int kvHeads, int intermediate, int headDim,
                        int maxPositions, boolean tieEmbeddings, double ropeTheta) {
    public ModelSize {
        Check.positive(hidden, "hidden");
        Check.positive(layers, "layers");
        Check.positive(heads, "heads");
        Check.positive(kvHeads, "kv_heads");
        Check.that(heads % kvHeads == 0, "kv_heads", "must divide heads (" + heads + "), got " + kvHeads);
        Check.positive(intermediate, "intermediate");
        Check.nonNegative(headDim, "head_dim");
        Check.that(headDim != 0 || hidden % heads == 0, "heads",
                "must divide hidden (" + hidden + ") when head_dim is 0, got " + heads);
        int hd = headDim != 0 ? headDim : hidden / heads;
        Check.that(hd % 2 == 0, headDim != 0 ? "head_dim" : "heads",
                "the head size must be even (rotary embeddings rotate pairs), got " + hd);
        Check.positive(maxPositions, "max_positions");
        Check.positive(ropeTheta, "rope_theta");
    }

    public static ModelSize defaults() {
        return new ModelSize(128, 2, 4, 2, 256, 0, 1024, true, 10000.0);
    }

    public int effectiveHeadDim() {
        return headDim != 0 ? headDim : hidden / heads;
    }
}
