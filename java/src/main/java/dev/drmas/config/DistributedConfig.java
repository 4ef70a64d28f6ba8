// DistributedConfig.java — `distributed:`: how the ranks of a data-parallel run talk over c10d
// (which backend, how long any wait may last, how often the ranks check that they still hold the
// same weights). Who the ranks are comes from the environment (RANK, WORLD_SIZE, ...), not from here.
package dev.drmas.config;

import dev.drmas.algo.ConfigEnum;

/**
 * @param backend        {@code auto} (default: nccl on cuda, gloo on cpu), {@code gloo} or {@code nccl}
 * @param timeoutS       seconds any store or collective wait may last before the run stops with an
 *                       error naming the rank that did not arrive; it must exceed the largest
 *                       per-step imbalance between ranks (rollout lengths differ); default 300
 * @param checksumFreq   compare a parameter checksum across ranks every this many steps (and
 *                       after the last); 0 = never; default 10
 * @param bucketMb       gradients are summed across ranks in flat buffers of about this many MiB;
 *                       default 25 (as PyTorch DDP)
 * @param shardOptimizer ZeRO stage 2: each rank keeps and updates only its 1/world share of the
 *                       fp32 master weights, AdamW moments and fp32 gradient; the gradients are
 *                       summed over the ranks after every micro-batch (in buckets of bucket_mb)
 *                       and the updated weights spread back to every rank; default false (every
 *                       rank holds the whole optimiser state, as DDP)
 */
public record DistributedConfig(Backend backend, double timeoutS, int checksumFreq, double bucketMb, boolean shardOptimizer) {

    /** The c10d backend. */
    public enum Backend implements ConfigEnum {
        AUTO("auto"), GLOO("gloo"), NCCL("nccl");

        private final String configName;

        Backend(String configName) {
            this.configName = configName;
        }

        @Override
        public String configName() {
            return configName;
        }
    }

    public DistributedConfig {
        Check.given(backend, "backend");
        Check.positive(timeoutS, "timeout_s");
        // c10d keeps it as int64 milliseconds (and so does the wait's deadline here): ~9.2e9 s overflows and ends every
        // wait at once; a week is beyond any step's imbalance or checkpoint
        Check.that(timeoutS <= MAX_TIMEOUT_S, "timeout_s", "must be at most " + (long) MAX_TIMEOUT_S + " s (a week), got " + timeoutS);
        Check.nonNegative(checksumFreq, "checksum_freq");
        Check.positive(bucketMb, "bucket_mb");
    }

    /** The longest timeout_s: a week. */
    public static final double MAX_TIMEOUT_S = 7 * 24 * 3600;

    public static DistributedConfig defaults() {
        return new DistributedConfig(Backend.AUTO, 300, 10, 25, false);
    }
}
