// GenerationBudget.java — whether the run's generation fits before it starts. A batch of B requests
// with room for P prompt and N new tokens holds B·(P + N) token slots in Java arrays and a KV cache
// of 2·layers·B·kv_heads·head_dim·(P + N) values per model; rollout.max_new_tokens=1e8 used to end
// in an OutOfMemoryError deep in Generator (or in an int product that overflowed). The sizes are
// computed here in long arithmetic, and a run whose batches cannot fit is an error naming the keys.
// With rollout.max_batch_tokens a batch holds at most that many slots, whatever the request count.
// The ranks of one host share its memory: a CPU model's KV cache counts once for each of them.
package dev.drmas.train;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.model.ModelConfig;
import java.lang.management.ManagementFactory;
import java.util.Locale;
import java.util.Map;

final class GenerationBudget {
    /** Java arrays hold at most about this many elements. */
    static final long MAX_ARRAY = Integer.MAX_VALUE - 8;

    private GenerationBudget() {
    }

    /**
     * @param testTasks the workload's held-out tasks (eval.tasks 0 evaluates them all)
     * @param ranks     the world size: each rank generates its share of the batch
     * @param hostRanks the ranks on this host ({@link #ranksOnThisHost}), whose caches share its memory
     */
    static void check(RunConfig cfg, Policies policies, int testTasks, int ranks, int hostRanks) {
        var rc = cfg.rollout();
        var ec = cfg.eval();
        long train = ceilDiv(rc.tasksPerStep(), ranks) * rc.rolloutsPerTask();
        int evalTasks = ec.tasks() > 0 ? Math.min(ec.tasks(), testTasks) : testTasks;
        boolean chunked = ceilDiv(evalTasks, ranks) > ec.tasksPerChunk();
        long eval = (chunked ? ec.tasksPerChunk() : ceilDiv(evalTasks, ranks)) * ec.samplesPerTask();  // one chunk's requests
        long batch = Math.max(train, eval);
        String batchKeys = batch == train ? "rollout.tasks_per_step × rollout.rollouts_per_task"
                : chunked ? "eval.chunk_tasks × eval.samples" : "eval.tasks × eval.samples";
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
        if (physical <= 0) return;
        for (Policies.Policy p : policies.byId.values()) {
            if (!p.model().device().is_cpu()) continue;  // device memory: LibTorch's own error says it
            ModelConfig m = p.model().config();
            int bytes = p.model().dtype() == org.bytedeco.pytorch.global.torch.ScalarType.Float ? 4 : 2;
            checkKvCache(key, sizes, p.id(), m, bytes, cells, hostRanks, physical);
        }
    }

    /**
     * Refuses a KV cache of {@code cells} slots of model {@code m} (values of {@code bytes} bytes)
     * that, once on each of the host's {@code hostRanks} ranks, is more than its {@code physical} bytes.
     */
    static void checkKvCache(String key, String sizes, String model, ModelConfig m, int bytes, long cells, int hostRanks,
                             long physical) {
        long perSlot = 2L * m.numLayers() * m.numKvHeads() * m.headDim() * bytes;
        double kv = (double) perSlot * cells;
        if (kv * hostRanks <= physical) return;
        String each = gib((long) Math.min(kv, Long.MAX_VALUE));
        String needs = hostRanks == 1 ? "a KV cache of " + each + " for model " + model
                : "a KV cache of " + each + " for model " + model + " on each of this host's " + hostRanks + " ranks ("
                        + gib((long) Math.min(kv * hostRanks, Long.MAX_VALUE)) + " in all)";
        throw ConfigException.at(key, sizes + " needs " + needs + ", more than this machine's " + gib(physical)
                + " of memory; lower the budgets or the batch, or bound it with rollout.max_batch_tokens"
                + (hostRanks == 1 ? "" : ", or run fewer ranks a host"));
    }

    /**
     * How many ranks share this host: LOCAL_WORLD_SIZE where the launcher sets it ({@code drmas launch}
     * and torchrun do); else, with LOCAL_RANK unset, the whole world (DistEnv then takes the job for one
     * node, LOCAL_RANK = RANK); else 1, not knowing the others.
     */
    static int ranksOnThisHost(Map<String, String> env, int worldSize) {
        if (worldSize <= 1) return 1;
        String local = env.get("LOCAL_WORLD_SIZE");
        if (local != null && !local.isBlank()) {
            int n;
            try {
                n = Integer.parseInt(local.trim());
            } catch (NumberFormatException e) {
                n = -1;
            }
            if (n < 1 || n > worldSize) {
                throw new IllegalArgumentException("LOCAL_WORLD_SIZE=" + local + " must be an integer in [1, " + worldSize
                        + "] (the ranks on this host; WORLD_SIZE is " + worldSize + ")");
            }
            return n;
        }
        String localRank = env.get("LOCAL_RANK");
        return localRank == null || localRank.isBlank() ? worldSize : 1;
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
