// TurnData.java — what the trainer attaches to each agent turn: the exact prompt and response
// tokens the model saw and produced, the log-probs of the sampled tokens, and why it stopped.
package dev.drmas.train;

import dev.drmas.rollout.Completion;

public record TurnData(int[] promptIds, int[] responseIds, float[] logprobs, Completion.FinishReason finishReason,
                       boolean promptTruncated) {
}
