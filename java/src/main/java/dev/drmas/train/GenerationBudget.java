// GenerationBudget.java — whether the run's generation fits before it starts. A batch of B requests
// with room for P prompt and N new tokens holds B·(P + N) token slots in Java arrays and a KV cache
// of 2·layers·B·kv_heads·head_dim·(P + N) values per model; rollout.max_new_tokens=1e8 used to end
// in an OutOfMemoryError deep in Generator (or in an int product that overflowed). The sizes are
// computed here in long arithmetic, and a run whose batches cannot fit is an error naming the keys.
// With rollout.max_batch_tokens a batch holds at most that many slots, whatever the request count.
package dev.drmas.train;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.model.ModelConfig;
import java.lang.management.ManagementFactory;
import java.util.Locale;

final class GenerationBudget {
    /** Java arrays hold at most about this many elements. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private GenerationBudget() {
    }

    /**
     * @param testTasks the workload's held-out tasks (eval.tasks 0 evaluates them all)
     * @param ranks     the world size: each rank generates its share of the batch
     */
    static void check(RunConfig cfg, Policies policies, int testTasks, int ranks) {
        var rc = cfg.rollout();
        var ec = cfg.eval();
        long train = ceilDiv(rc.tasksPerStep(), ranks) * rc.rolloutsPerTask();
        int evalTasks = ec.tasks() > 0 ? Math.min(ec.tasks(), testTasks) : testTasks;
        long eval = ceilDiv(evalTasks, ranks) * ec.samplesPerTask();
        long batch = Math.max(train, eval);
        String batchKeys = batch == train ? "rollout.tasks_per_step × rollout.rollouts_per_task" : "eval.tasks × eval.samples";
        long slots = (long) rc.maxPromptTokens() + rc.maxNewTokens();
        String sizes = String.format(Locale.ROOT, "a batch of %d requests (%s) × %d token slots (rollout.max_prompt_tokens %d"
                + " + rollout.max_new_tokens %d)", batch, batchKeys, slots, rc.maxPromptTokens(), rc.maxNewTokens());
        long cells = Math.multiplyHigh(batch, slots) != 0 ? Long.MAX_VALUE : batch * slots;
        String key = "rollout.max_new_tokens", count = sizes + " = " + cells + " slots";
        if (rc.maxBatchTokens() > 0 && rc.maxBatchTokens() < cells) {
            // the requests are generated in batches of at most max_batch_tokens slots
            cells = rc.maxBatchTokens();
            key = "rollout.max_batch_tokens";
            sizes = count = String.format(Locale.ROOT, "a batch of at most %d token slots", cells);
        }
        if (cells > MAX_ARRAY) {
            throw ConfigException.at(key, count + ", more than a Java array holds ("
                    + MAX_ARRAY + "); lower the token budgets or the batch, or bound it with rollout.max_batch_tokens");
        }
        long heap = Runtime.getRuntime().maxMemory();
        // ids and key validity (8 bytes each) per slot, tokens and log-probs (4 + 4) per new token
        long javaBytes = cells * 16 + batch * rc.maxNewTokens() * 8L;
        if (javaBytes > heap / 2) {
            throw ConfigException.at(key, sizes + " needs " + gib(javaBytes) + " of Java heap for the token"
                    + " arrays; this JVM has " + gib(heap) + " (raise it with DRMAS_JAVA_OPTS=-Xmx..., or lower the budgets)");
        }
        long physical = physicalMemory();
        for (Policies.Policy p : policies.byId.values()) {
            if (!p.model().device().is_cpu() || physical <= 0) continue;  // device memory: LibTorch's own error says it
            ModelConfig m = p.model().config();
            int bytes = p.model().dtype() == org.bytedeco.pytorch.global.torch.ScalarType.Float ? 4 : 2;
            long perSlot = 2L * m.numLayers() * m.numKvHeads() * m.headDim() * bytes;
            double kv = (double) perSlot * cells;
            if (kv > physical) {
                throw ConfigException.at(key, sizes + " needs a KV cache of " + gib((long) Math.min(kv, Long.MAX_VALUE))
                        + " for model " + p.id() + ", more than this machine's " + gib(physical) + " of memory; lower the budgets or the batch,"
                        + " or bound it with rollout.max_batch_tokens");
            }
        }
    }

    private static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    private static long physicalMemory() {
        if (ManagementFactory.getOperatingSystemMXBean() instanceof com.sun.management.OperatingSystemMXBean os) {
            return os.getTotalMemorySize();
        }
        return -1;
    }

    private static String gib(long bytes) {
        return String.format(Locale.ROOT, "%.1f GiB", bytes / (double) (1L << 30));
    }
}
