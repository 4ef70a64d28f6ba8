// WorkloadMetricsDistributedTest.java — a workflow's own episode metrics summed over two real Gloo
// ranks (two threads of this JVM): each metric is summed with the same metric of the other rank even
// when the two ranks' maps iterate in different orders (Map.of's order differs between JVMs), and
// ranks whose metric names differ stop at once with an error naming the names, instead of waiting
// in the sum until distributed.timeout_s.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Orchestra;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.config.DistributedConfig;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import dev.drmas.env.Task;
import dev.drmas.workflow.Workload;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import org.junit.jupiter.api.Test;

class WorkloadMetricsDistributedTest {
    /** A workload whose episodeSums returns {@code sums}; only that is called. */
    record SumsWorkload(Map<String, Double> sums) implements Workload {
        @Override public Team team() { throw new UnsupportedOperationException(); }
        @Override public Orchestra orchestra() { throw new UnsupportedOperationException(); }
        @Override public List<Task> train() { throw new UnsupportedOperationException(); }
        @Override public List<Task> test() { throw new UnsupportedOperationException(); }
        @Override public double reward(Task task, Episode e) { throw new UnsupportedOperationException(); }
        @Override public double rowScore(double reward, Step s) { throw new UnsupportedOperationException(); }
        @Override public Map<String, Double> episodeSums(List<Task> tasks, List<Episode> episodes) { return sums; }
        @Override public int maxTurnsPerEpisode() { return 2; }
        @Override public AgentPolicy demonstrator(List<Task> tasks, double pCorrect, SplittableRandom rng) { throw new UnsupportedOperationException(); }
    }

    /** Each rank's metrics (or its exception), from StepMetrics.workload with prefix "eval/" over one episode per rank. */
    static List<Object> run(IntFunction<Map<String, Double>> sumsOfRank) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        // a short timeout: the old code's wait for a sum of another length ends in seconds, not minutes
        DistributedConfig dc = new DistributedConfig(DistributedConfig.Backend.GLOO, 10, 1, 1, false);
        ExecutorService ex = Executors.newFixedThreadPool(2);
        List<Object> out = new ArrayList<>();
        try {
            List<Future<Map<String, Double>>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                DistEnv env = new DistEnv("127.0.0.1", port, r, 2, r);
                Map<String, Double> sums = sumsOfRank.apply(r);
                fs.add(ex.submit(() -> {
                    try (ProcessGroup pg = new ProcessGroup(env, dc, false)) {
                        Map<String, Double> m = new LinkedHashMap<>();
                        StepMetrics.workload("eval/", RolloutBatchTest.TASKS, RolloutBatchTest.episodes().subList(0, 1),
                                new SumsWorkload(sums), pg, m);
                        return m;
                    }
                }));
            }
            for (Future<Map<String, Double>> f : fs) {
                try {
                    out.add(f.get(120, TimeUnit.SECONDS));
                } catch (ExecutionException e) {
                    out.add(e.getCause());
                }
            }
        } finally {
            ex.shutdownNow();
        }
        return out;
    }

    @Test
    void metricsAreSummedByNameWhateverEachRanksOrder() throws Exception {
        // every episode scores pc/one = 1 and pc/zero = 0; rank 1's map iterates in the other order
        List<Object> ranks = run(r -> {
            Map<String, Double> m = new LinkedHashMap<>();
            if (r == 0) {
                m.put("pc/one", 1.0);
                m.put("pc/zero", 0.0);
            } else {
                m.put("pc/zero", 0.0);
                m.put("pc/one", 1.0);
            }
            return m;
        });
        for (Object o : ranks) {
            assertTrue(o instanceof Map, "a rank failed: " + o);
            Map<?, ?> m = (Map<?, ?>) o;
            assertEquals(1.0, m.get("eval/pc/one"), "eval/pc/one: " + m);
            assertEquals(0.0, m.get("eval/pc/zero"), "eval/pc/zero: " + m);
        }
    }

    @Test
    void ranksWithOtherNamesStopAtOnceNamingThem() throws Exception {
        // rank 1 has no evaluation tasks and its workflow returns Map.of() for them
        long t0 = System.nanoTime();
        List<Object> ranks = run(r -> r == 0 ? Map.of("pc/one", 1.0, "pc/zero", 0.0) : Map.of());
        double seconds = (System.nanoTime() - t0) / 1e9;
        for (int r = 0; r < 2; r++) {
            Object o = ranks.get(r);
            assertTrue(o instanceof dev.drmas.dist.DistributedException, "rank " + r + ": " + o);
            String msg = ((Throwable) o).getMessage();
            assertTrue(msg.contains("episodeSums return different names") && msg.contains("eval/ workload metrics"), msg);
            assertTrue(msg.contains(r == 0 ? "[pc/one, pc/zero]" : "has []"), msg);
        }
        assertTrue(seconds < 8, "stopped after " + seconds + " s, not at once");
    }
}
