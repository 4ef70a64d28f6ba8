// SamplingParams.java — how the rollout engine picks the next token: greedy (temperature 0) or
// sampling at a temperature, optionally restricted to the top-k tokens and to the top-p nucleus,
// applied in that order (as HF transformers' logits warpers: temperature, top-k, top-p).
package dev.drmas.rollout;

/**
 * @param temperature 0 for greedy decoding, else the divisor of the logits (finite, > 0)
 * @param topK        keep only tokens whose scaled logit is at least the k-th largest (ties with
 *                    the k-th are kept, as HF's TopKLogitsWarper); 0 turns it off
 * @param topP        keep the smallest set of most likely tokens whose probability reaches topP
 *                    (the token that crosses it is kept); 1 turns it off
 */
public record SamplingParams(double temperature, int topK, double topP) {
    public static final SamplingParams GREEDY = new SamplingParams(0.0, 0, 1.0);

    public SamplingParams {
        if (!(temperature >= 0.0) || Double.isInfinite(temperature)) {
            throw new IllegalArgumentException("temperature must be finite and >= 0 (0 = greedy), got " + temperature);
        }
        if (topK < 0) throw new IllegalArgumentException("top_k must be >= 0 (0 = off), got " + topK);
        if (!(topP > 0.0 && topP <= 1.0)) throw new IllegalArgumentException("top_p must be in (0, 1], got " + topP);
    }

    /** Sampling at {@code temperature} without top-k or top-p. */
    public static SamplingParams temperature(double temperature) {
        return new SamplingParams(temperature, 0, 1.0);
    }

    public boolean greedy() {
        return temperature == 0.0;
    }
}
