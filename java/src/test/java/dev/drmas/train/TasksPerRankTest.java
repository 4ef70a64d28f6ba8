// TasksPerRankTest.java — rollout.tasks_per_step bounds the ranks of training only: with fewer tasks a
// step than ranks, two ranks (threads, the real Gloo group) refuse to train, naming both numbers, and
// evaluate as one process does (`drmas launch --eval --nproc 8` on a config whose training steps are
// small, which was refused for the training reason), also a task at a time (eval.chunk_tasks).
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.DistributedConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class TasksPerRankTest {
    @TempDir
    Path tmp;

    private RunConfig config(Path out, String... more) {
        List<String> o = new ArrayList<>(List.of("run.threads=1", "rollout.tasks_per_step=1", "ppo.mini_batch_size=3", "eval.tasks=3", "eval.k=2"));
        o.addAll(List.of(more));
        return CheckpointRetentionTest.config(out, o.toArray(String[]::new));
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void twoRanksEvaluateWithOneTaskAStepAndRefuseToTrain() throws Exception {
        Map<String, Double> alone;
        try (Trainer t = Trainer.open(config(tmp.resolve("one")), TrainerEndToEndTest.QUIET)) {
            alone = t.evaluate();
        }
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        var dc = new DistributedConfig(DistributedConfig.Backend.GLOO, 60, 1, 1, false);
        // a chunk of one task: rank 0 evaluates tasks 0 and 2, rank 1 task 1 and then nothing, the counts summed after each
        RunConfig cfg = config(tmp.resolve("two"), "eval.chunk_tasks=1");
        ExecutorService ex = Executors.newFixedThreadPool(2);
        List<Object> results = new ArrayList<>();
        try {
            List<Future<Object>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                var env = new DistEnv("127.0.0.1", port, r, 2, r);
                fs.add(ex.submit(() -> {
                    try (var pg = new ProcessGroup(env, dc, false); Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET, pg)) {
                        Map<String, Double> m = t.evaluate();
                        var refused = assertThrows(IllegalArgumentException.class, t::train);
                        return List.of(m, refused.getMessage());
                    } catch (Exception e) {
                        return e.toString();
                    }
                }));
            }
            for (var f : fs) results.add(f.get(140, TimeUnit.SECONDS));
        } finally {
            ex.shutdownNow();
        }
        for (Object o : results) {
            assertTrue(o instanceof List<?>, String.valueOf(o));
            List<?> l = (List<?>) o;
            assertEquals(withoutTimes(alone), withoutTimes((Map<?, ?>) l.get(0)), "two ranks, a task at a time, evaluate what one process does");
            assertEquals("rollout.tasks_per_step (1) is smaller than WORLD_SIZE (2): every rank needs at least one task per training step",
                    l.get(1));
        }
        assertEquals(3.0, alone.get("eval/tasks"), alone.toString());
    }

    static Map<Object, Object> withoutTimes(Map<?, ?> m) {
        Map<Object, Object> out = new java.util.TreeMap<>();
        m.forEach((k, v) -> {
            if (!k.toString().startsWith("time/")) out.put(k, v);
        });
        return out;
    }
}
