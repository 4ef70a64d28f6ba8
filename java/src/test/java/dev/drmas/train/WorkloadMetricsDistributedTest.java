// WorkloadMetricsDistributedTest.java — a workflow's own episode metrics summed over two real Gloo
// ranks (two threads of this JVM): each metric is summed with the same metric of the other rank even
// when the two ranks' maps iterate in different orders (Map.of's order differs between JVMs), and
// ranks whose metric names differ stop at once with an error naming the names, instead of waiting
// in the sum until distributed.timeout_s, also where they have as many names, and list the ranks
// that differ from rank 0. A metric is a mean over every rank's episodes, not over the rank's own.
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
import java.util.function.IntUnaryOperator;
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

    /** What one rank computes on its process group. */
    interface RankBody {
        Map<String, Double> run(int rank, ProcessGroup pg) throws Exception;
    }

    /** Each of {@code n} ranks' result (or its exception), the ranks as threads of this JVM over loopback Gloo. */
    static List<Object> ranks(int n, RankBody body) throws Exception {
        int port;
        try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        // a short timeout: the old code's wait for a sum of another length ends in seconds, not minutes
        DistributedConfig dc = new DistributedConfig(DistributedConfig.Backend.GLOO, 10, 1, 1, false);
        ExecutorService ex = Executors.newFixedThreadPool(n);
        List<Object> out = new ArrayList<>();
        try {
            List<Future<Map<String, Double>>> fs = new ArrayList<>();
            for (int r = 0; r < n; r++) {
                DistEnv env = new DistEnv("127.0.0.1", port, r, n, r);
                int rank = r;
                fs.add(ex.submit(() -> {
                    try (ProcessGroup pg = new ProcessGroup(env, dc, false)) {
                        return body.run(rank, pg);
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

    /** Each rank's metrics (or its exception), from StepMetrics.workload with prefix "eval/" over one episode per rank. */
    static List<Object> run(IntFunction<Map<String, Double>> sumsOfRank) throws Exception {
        return run(2, sumsOfRank, r -> 1);
    }

    /** As above on {@code n} ranks, rank r with {@code episodes.applyAsInt(r)} episodes. */
    static List<Object> run(int n, IntFunction<Map<String, Double>> sumsOfRank, IntUnaryOperator episodes) throws Exception {
        return ranks(n, (r, pg) -> {
            Map<String, Double> m = new LinkedHashMap<>();
            StepMetrics.workload("eval/", RolloutBatchTest.TASKS, RolloutBatchTest.episodes().subList(0, episodes.applyAsInt(r)),
                    new SumsWorkload(sumsOfRank.apply(r)), pg, m);
            return m;
        });
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

    @Test
    void eachMetricIsAMeanOverEveryRanksEpisodes() throws Exception {
        // rank 0: one episode with pc/x = 1; rank 1: three episodes with pc/x = 0: both log 1/4, not their own 1 or 0
        List<Object> ranks = run(2, r -> Map.of("pc/x", r == 0 ? 1.0 : 0.0), r -> r == 0 ? 1 : 3);
        for (Object o : ranks) {
            assertTrue(o instanceof Map, "a rank failed: " + o);
            assertEquals(0.25, ((Map<?, ?>) o).get("eval/pc/x"), o.toString());
        }
    }

    @Test
    void ranksWithAsManyNamesButOthersStop() throws Exception {
        // as many names on each rank: only the names themselves tell that pc/zero would be added to pc/two
        List<Object> ranks = run(r -> r == 0 ? Map.of("pc/one", 1.0, "pc/zero", 0.0) : Map.of("pc/one", 1.0, "pc/two", 2.0));
        for (int r = 0; r < 2; r++) {
            Object o = ranks.get(r);
            assertTrue(o instanceof dev.drmas.dist.DistributedException, "rank " + r + ": " + o);
            assertTrue(((Throwable) o).getMessage().contains("episodeSums return different names"), ((Throwable) o).getMessage());
        }
    }

    @Test
    void theRanksThatDifferAreListed() throws Exception {
        // of three ranks, rank 1 agrees with rank 0 and rank 2 does not; then ranks 1 and 2 both differ
        List<Object> ranks = run(3, r -> r == 2 ? Map.of("pc/two", 2.0) : Map.of("pc/one", 1.0), r -> 1);
        for (Object o : ranks) {
            assertTrue(o instanceof dev.drmas.dist.DistributedException, String.valueOf(o));
            assertTrue(((Throwable) o).getMessage().contains("(rank 0 1 names; rank(s) 2 differ)"), ((Throwable) o).getMessage());
        }
        ranks = run(3, r -> r == 0 ? Map.of("pc/one", 1.0) : Map.of("pc/two", 2.0, "pc/three", 3.0), r -> 1);
        for (Object o : ranks) {
            assertTrue(o instanceof dev.drmas.dist.DistributedException, String.valueOf(o));
            assertTrue(((Throwable) o).getMessage().contains("(rank 0 1 names; rank(s) 1, 2 differ)"), ((Throwable) o).getMessage());
        }
    }
}
