// GenerationBudgetTest.java — the refusal of a generation whose KV caches cannot fit in the host's
// memory counts every rank of the host (`drmas launch --nproc N` on a CPU host holds N caches),
// and how the rank count is read from the launcher's environment.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import java.util.Map;
import org.junit.jupiter.api.Test;

class GenerationBudgetTest {
    // Qwen3's tiny preset: 2 layers × 2 KV heads × head_dim 32, keys and values, fp32: 1 KiB a slot
    private static final ModelConfig M = ModelConfig.tiny(Family.QWEN3, 100);
    private static final long GIB = 1L << 30;

    @Test
    void aCacheThatFitsOnceButNotOnEveryRankOfTheHostIsRefused() {
        long cells = 1L << 20;  // 1 GiB of KV cache
        for (int ranks : new int[] {1, 2, 3}) {
            assertDoesNotThrow(() -> GenerationBudget.checkKvCache("rollout.max_new_tokens", "a batch", "policy", M, 4, cells, ranks,
                    3 * GIB));
        }
        var e = assertThrows(ConfigException.class, () -> GenerationBudget.checkKvCache("rollout.max_new_tokens", "a batch",
                "policy", M, 4, cells, 4, 3 * GIB));
        assertEquals("rollout.max_new_tokens", e.key());
        assertTrue(e.getMessage().contains("a batch needs a KV cache of 1.0 GiB for model policy on each of this host's 4 ranks"
                + " (4.0 GiB in all), more than this machine's 3.0 GiB of memory"), e.getMessage());
        assertTrue(e.getMessage().endsWith("or run fewer ranks a host"), e.getMessage());
        // one rank: the message it always had
        e = assertThrows(ConfigException.class, () -> GenerationBudget.checkKvCache("rollout.max_batch_tokens", "a batch", "solver",
                M, 2, 4 * cells, 1, GIB));
        assertTrue(e.getMessage().contains("a batch needs a KV cache of 2.0 GiB for model solver, more than this machine's 1.0 GiB"
                + " of memory; lower the budgets or the batch, or bound it with rollout.max_batch_tokens"), e.getMessage());
    }

    @Test
    void theRanksOfThisHostComeFromTheLaunchersEnvironment() {
        assertEquals(1, GenerationBudget.ranksOnThisHost(Map.of(), 1));
        assertEquals(1, GenerationBudget.ranksOnThisHost(Map.of("LOCAL_WORLD_SIZE", "8"), 1));
        // drmas launch and torchrun set LOCAL_WORLD_SIZE
        assertEquals(4, GenerationBudget.ranksOnThisHost(Map.of("LOCAL_WORLD_SIZE", "4", "LOCAL_RANK", "1"), 16));
        assertEquals(2, GenerationBudget.ranksOnThisHost(Map.of("LOCAL_WORLD_SIZE", " 2 "), 2));
        // without it and without LOCAL_RANK, the job is one node's (as DistEnv takes LOCAL_RANK = RANK)
        assertEquals(3, GenerationBudget.ranksOnThisHost(Map.of(), 3));
        // LOCAL_RANK alone: the others of this host are unknown
        assertEquals(1, GenerationBudget.ranksOnThisHost(Map.of("LOCAL_RANK", "0"), 16));
        for (String bad : new String[] {"0", "17", "x", "-1"}) {
            var e = assertThrows(IllegalArgumentException.class,
                    () -> GenerationBudget.ranksOnThisHost(Map.of("LOCAL_WORLD_SIZE", bad), 16));
            assertEquals("LOCAL_WORLD_SIZE=" + bad + " must be an integer in [1, 16] (the ranks on this host; WORLD_SIZE is 16)",
                    e.getMessage());
        }
    }
}
