// EvalConfig.java — `eval:`: held-out evaluation, avg@n and pass@k (the unbiased estimator of
// Chen et al. 2021 from `samples` draws per task), with its own sampling settings.
package dev.drmas.config;

import dev.drmas.rollout.SamplingParams;

/**
 * @param tasks       held-out tasks evaluated; 0 (default) = all of the test set
 * @param k           the k of pass@k (pass@1 is logged too); default 4
 * @param samples     rollouts per task n, &gt;= k, which avg@n is named after; 0 (default) = k
 * @param temperature sampling temperature, 0 (greedy) or &gt;= 1e-5; default 0.6
 * @param topP        nucleus, in (0, 1]; default 0.95
 * @param topK        top-k, &gt;= 0 (0 = off); default 0
 * @param chunkTasks  a rank's tasks evaluated together, their episodes then reduced to counts and
 *                    dropped; 0 (default) = as many as make CHUNK_EPISODES episodes
 */
public record EvalConfig(int tasks, int k, int samples, double temperature, double topP, int topK, int chunkTasks) {
    /** The episodes of a chunk when chunk_tasks is 0: a search episode keeps ~60–75 KB until its chunk ends. */
    public static final int CHUNK_EPISODES = 4096;

    public EvalConfig {
        Check.nonNegative(tasks, "tasks");
        Check.positive(k, "k");
        Check.that(samples == 0 || samples >= k, "samples", "must be 0 (= k) or >= k (" + k + "), got " + samples);
        Check.nonNegative(temperature, "temperature");
        String tiny = RolloutConfig.greedyOrSampledProblem(temperature);
        Check.that(tiny == null, "temperature", tiny);
        Check.that(topP > 0 && topP <= 1, "top_p", "must be in (0, 1], got " + Check.num(topP));
        Check.nonNegative(topK, "top_k");
        Check.nonNegative(chunkTasks, "chunk_tasks");
    }

    public static EvalConfig defaults() {
        return new EvalConfig(0, 4, 0, 0.6, 0.95, 0, 0);
    }

    /** Rollouts per task: {@code samples}, or k when samples is 0. */
    public int samplesPerTask() {
        return samples == 0 ? k : samples;
    }

    /** A rank's tasks in one chunk: chunk_tasks, or as many as make CHUNK_EPISODES episodes (at least one). */
    public int tasksPerChunk() {
        return chunkTasks > 0 ? chunkTasks : Math.max(1, CHUNK_EPISODES / samplesPerTask());
    }

    public SamplingParams sampling() {
        return new SamplingParams(temperature, topK, topP);
    }
}
