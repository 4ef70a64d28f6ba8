// RolloutConfig.java — `rollout:`: how much is sampled per training step (B tasks × N rollouts,
// one group per task) and how tokens are drawn. Training samples must be drawn at a temperature
// > 0: the old log-probs are recomputed at the same temperature, and greedy rollouts give a
// group no variance to learn from.
package dev.drmas.config;

import dev.drmas.rollout.Generator;
import dev.drmas.rollout.SamplingParams;
import java.util.Arrays;

/**
 * @param tasksPerStep    B, tasks per step (one uid each); default 16
 * @param rolloutsPerTask N, rollouts of each task (the group); default 4
 * @param temperature     sampling temperature, &gt;= 1e-5; default 1.0
 * @param topP            nucleus, in (0, 1]; 1 = off (default)
 * @param topK            top-k, &gt;= 0; 0 = off (default)
 * @param maxNewTokens    token budget of one agent turn; default 256
 * @param maxPromptTokens the longest prompt of one agent turn (question plus team context, in
 *                        tokens after the chat template); longer ones are cut as {@code truncation}
 *                        says; default 512
 * @param maxBatchTokens  the most prompt + generated tokens of the rows one model decodes together
 *                        (its KV cache is sized from it): a turn's requests are generated in as
 *                        many batches as the budget needs, with the same tokens; 0 = no bound
 *                        (default); else at least max_prompt_tokens + max_new_tokens
 * @param engine          how a model's requests are batched: continuous (default: one cache of
 *                        the budget's rows, requests join as rows finish, shared prompt prefixes
 *                        prefilled once) or static (batches decoded until their last row stops);
 *                        the same tokens either way
 * @param prefixCache     whether the continuous engine keeps the prompts it prefilled through a
 *                        rollout phase (default true), so that an agent's later turns, whose
 *                        prompts extend its earlier ones, copy that part's keys and values instead
 *                        of computing them again (the same tokens); forgotten after each phase
 * @param prefixCacheTokens the most token slots the kept prompts may take per model; 0 (default):
 *                        one turn's requests × max_prompt_tokens (a turn's prompts), at most
 *                        max_batch_tokens when that is set
 * @param truncation      how a prompt longer than max_prompt_tokens is cut, as verl's
 *                        data.truncation: left (default: keep its end, the latest context), middle
 *                        (keep its first and last halves: the system prompt, the role and the
 *                        question, and the latest context; the Dr. MAS reference's math scripts),
 *                        right (keep its start) or error (stop the run, naming the agent)
 */
public record RolloutConfig(int tasksPerStep, int rolloutsPerTask, double temperature, double topP, int topK,
                            int maxNewTokens, int maxPromptTokens, int maxBatchTokens, Generator.Engine engine,
                            boolean prefixCache, long prefixCacheTokens, Truncation truncation) {
    /** How an over-long prompt is cut (its token ids after the chat template), as verl's data.truncation. */
    public enum Truncation {
        LEFT, MIDDLE, RIGHT, ERROR;

        /**
         * {@code ids} cut to {@code max} tokens: its last ones (left), its first ⌊max/2⌋ and last
         * ⌈max/2⌉ (middle, as verl), its first ones (right); ids itself when it fits. ERROR does
         * not cut: the caller reports the prompt.
         */
        public int[] cut(int[] ids, int max) {
            if (ids.length <= max) return ids;
            return switch (this) {
                case LEFT -> Arrays.copyOfRange(ids, ids.length - max, ids.length);
                case RIGHT -> Arrays.copyOf(ids, max);
                case MIDDLE -> {
                    int head = max / 2;
                    int[] out = Arrays.copyOf(ids, max);
                    System.arraycopy(ids, ids.length - (max - head), out, head, max - head);
                    yield out;
                }
                case ERROR -> throw new IllegalStateException("truncation 'error' does not cut");
            };
        }
    }

    /** The least temperature that samples: vLLM's sampling epsilon (below it vLLM decodes greedily). */
    public static final double MIN_TEMPERATURE = 1e-5;

    /**
     * What is wrong with {@code t} as a temperature where 0 means greedy (evaluation, generation): "must
     * be 0 (greedy) or >= 1e-5 ..., got t" for one in (0, MIN_TEMPERATURE), else null.
     */
    public static String greedyOrSampledProblem(double t) {
        if (t == 0 || !(t > 0) || t >= MIN_TEMPERATURE) return null;
        return "must be 0 (greedy) or >= " + MIN_TEMPERATURE + " (below it sampling is greedy in all but name, and logits / temperature"
                + " overflow), got " + Check.num(t);
    }

    public RolloutConfig {
        Check.positive(tasksPerStep, "tasks_per_step");
        Check.positive(rolloutsPerTask, "rollouts_per_task");
        Check.that(temperature > 0 && Double.isFinite(temperature), "temperature",
                "must be a finite number > 0 (training rollouts are sampled), got " + Check.num(temperature));
        // (PPO's log-probs divide the logits by it: below vLLM's sampling epsilon the ratios are noise, and the
        // logits overflow near 1e-37, which the rollout then reports as a model producing non-finite logits)
        Check.that(temperature >= MIN_TEMPERATURE, "temperature", "must be >= " + MIN_TEMPERATURE
                + " (below it sampling is greedy in all but name, and PPO's log-probs of logits / temperature overflow), got "
                + Check.num(temperature));
        Check.that(topP > 0 && topP <= 1, "top_p", "must be in (0, 1], got " + Check.num(topP));
        Check.nonNegative(topK, "top_k");
        Check.positive(maxNewTokens, "max_new_tokens");
        Check.positive(maxPromptTokens, "max_prompt_tokens");
        Check.nonNegative(maxBatchTokens, "max_batch_tokens");
        Check.that(engine != null, "engine", "must be continuous or static");
        Check.that(truncation != null, "truncation", "must be left, middle, right or error");
        Check.that(prefixCacheTokens >= 0, "prefix_cache_tokens", "must be >= 0 (0: as max_batch_tokens), got " + prefixCacheTokens);
        Check.that(maxBatchTokens == 0 || (long) maxBatchTokens >= (long) maxPromptTokens + maxNewTokens, "max_batch_tokens",
                "must hold one row of max_prompt_tokens + max_new_tokens (" + ((long) maxPromptTokens + maxNewTokens)
                        + ") or be 0 (no bound), got " + maxBatchTokens);
    }

    public static RolloutConfig defaults() {
        return new RolloutConfig(16, 4, 1.0, 1.0, 0, 256, 512, 0, Generator.Engine.CONTINUOUS, true, 0, Truncation.LEFT);
    }

    /**
     * The prefix cache's bound in token slots: prefix_cache_tokens, else {@code turnRows} requests
     * of max_prompt_tokens (one turn's prompts), at most max_batch_tokens when that is set; 0 when
     * it is off or the engine is static.
     */
    public long prefixCacheBudget(long turnRows) {
        if (!prefixCache || engine != Generator.Engine.CONTINUOUS) return 0;
        if (prefixCacheTokens > 0) return prefixCacheTokens;
        long prompts = Math.max(1, turnRows) * (long) maxPromptTokens;
        return maxBatchTokens > 0 ? Math.min(prompts, maxBatchTokens) : prompts;
    }

    public SamplingParams sampling() {
        return new SamplingParams(temperature, topK, topP);
    }
}
