// Completion.java — what generation returns per request: the new tokens, the log-probability of
// each under the sampling distribution, and why it stopped.
package dev.drmas.rollout;

public record Completion(int[] tokens, float[] logprobs, FinishReason finishReason) {
    public enum FinishReason {
        /** a stop token (EOS, end of turn) was generated; it is the last token */
        STOP_TOKEN,
        /** the decoded response contains a stop string; its last token is the last token */
        STOP_STRING,
        /** max_new_tokens reached */
        LENGTH
    }

    public int length() {
        return tokens.length;
    }
}
