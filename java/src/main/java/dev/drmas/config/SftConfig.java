// SftConfig.java — `sft:`: the supervised warm start (`drmas sft`) of models trained from
// scratch, on demonstrations that the workflow scripts from the training tasks: their final answers
// are right with probability correct_prob, so that RL starts from a policy that follows the formats
// but is far from perfect (math: the solver's answers; search: the answerer's).
package dev.drmas.config;

/**
 * @param steps             optimiser steps; default 300
 * @param batchSize         demonstrations per step; default 32
 * @param lr                AdamW learning rate, &gt; 0; default 1e-3. The other AdamW settings
 *                          are TRL's SFTTrainer defaults (betas 0.9, 0.999, eps 1e-8, no weight
 *                          decay), not the model's optim, which is the RL update's; gradients
 *                          are clipped to the model's optim.grad_clip
 * @param correctProb       probability that a demonstration's final answer is right, in [0, 1];
 *                          default 0.7
 */
public record SftConfig(int steps, int batchSize, double lr, double correctProb) {
    public SftConfig {
        Check.positive(steps, "steps");
        Check.positive(batchSize, "batch_size");
        Check.positive(lr, "lr");
        Check.inRange(correctProb, 0, 1, false, "correct_prob");
    }

    public static SftConfig defaults() {
        return new SftConfig(300, 32, 1e-3, 0.7);
    }
}
