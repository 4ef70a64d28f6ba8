// SameConfigTest.java — the ranks of a data-parallel run compare their resolved configs before they
// open anything: a rank with another batch size or learning rate (a node whose copy of the config was
// edited) stops every rank, naming each key that differs with the rank's own value, where the ranks
// used to make other collective calls (a size error, or a timeout blamed on a peer) or train apart;
// other key sets (another team) are named as such; paths, threads and the console may
// differ. Two ranks as threads over the real Gloo group on 127.0.0.1, each opening a real trainer.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class SameConfigTest {
    @TempDir
    Path tmp;

    RunConfig config(Path out, String... more) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "run.threads=1", "trainer.steps=1", "trainer.eval_freq=0",
                "trainer.save_freq=0"));
        o.addAll(List.of(more));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void ranksWithOtherSettingsStopNamingEachKey() throws Exception {
        Path out = tmp.resolve("apart");
        List<String> got = twoRanks(r -> r == 0 ? config(out) : config(out, "rollout.tasks_per_step=4", "models.policy.optim.lr=0.002"));
        for (int r = 0; r < 2; r++) {
            String e = got.get(r);
            assertTrue(e.startsWith("DistributedException: rank " + r + ": the ranks' configs differ: "), e);
            assertTrue(e.contains("models.policy.optim.lr (rank 0 and rank(s) [1] differ; here: " + (r == 0 ? "0.001" : "0.002") + ")"), e);
            assertTrue(e.contains("rollout.tasks_per_step (rank 0 and rank(s) [1] differ; here: " + (r == 0 ? "2" : "4") + ")"), e);
            assertTrue(!e.contains("run.threads") && !e.contains("run.output_dir"), e);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void otherKeysAreNamedAsSuch() throws Exception {
        Path out = tmp.resolve("keys");
        List<String> got = twoRanks(r -> r == 0 ? config(out) : config(out, "agents=[{id: solver, role: solver, model: policy}]", "orchestra.options.max_loops=1"));
        for (int r = 0; r < 2; r++) {
            assertTrue(got.get(r).startsWith("DistributedException: rank " + r + ": the ranks' configs have different keys (rank 0 and "
                    + "rank(s) [1])"), got.get(r));
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void pathsThreadsAndTheConsoleMayDiffer() throws Exception {
        // each rank its own output folder here (fresh runs: nothing to resume), other threads and another console
        List<String> got = twoRanks(r -> r == 0 ? config(tmp.resolve("a"))
                : config(tmp.resolve("b"), "run.threads=2", "metrics.progress_bar=true", "metrics.tensorboard=false"));
        assertEquals(List.of("trained", "trained"), got);
    }

    /** Each of two ranks (threads, gloo) opens its trainer of {@code cfgOf(rank)} and trains; "trained" or its error. */
    private static List<String> twoRanks(IntFunction<RunConfig> cfgOf) throws Exception {
        return RankFailureAtOpeningTest.twoRanks(cfgOf).stream()
                .map(o -> o.error() == null ? "trained" : o.type().getSimpleName() + ": " + o.error()).toList();
    }
}
