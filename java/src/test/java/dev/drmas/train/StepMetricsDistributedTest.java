// StepMetricsDistributedTest.java — a step's metrics on two real Gloo ranks (threads of this JVM),
// each with half of a batch: every rank logs what one process logs for the whole batch (the reward,
// verdict rates, workload metrics, per-agent moments, rates, lengths and group means, the token
// counts), the rollout time of the slowest rank and the generation speed over it, and its own time
// in collectives; one process logs no time in collectives.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.algo.Advantages;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.dist.Collective;
import dev.drmas.metrics.PhaseTimer;
import dev.drmas.rollout.Completion;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class StepMetricsDistributedTest {
    static final Completion.FinishReason STOP = Completion.FinishReason.STOP_TOKEN;

    /** StepMetricsTest's batch: two tasks of two trajectories, verdicts, an invalid verifier turn, a reply cut at max_new_tokens. */
    static final List<Episode> EPISODES = List.of(
            StepMetricsTest.episode(0, 0, Map.of(Episode.APPROVALS, 1), StepMetricsTest.step(0, true, 2, STOP), StepMetricsTest.step(1, true, 4, STOP)),
            StepMetricsTest.episode(0, 1, Map.of(Episode.MALFORMED_VERDICTS, 1),
                    StepMetricsTest.step(0, true, 6, Completion.FinishReason.LENGTH), StepMetricsTest.step(1, false, 1, STOP)),
            StepMetricsTest.episode(1, 2, Map.of(Episode.REJECTIONS, 1), StepMetricsTest.step(0, true, 3, STOP), StepMetricsTest.step(1, true, 5, STOP)),
            StepMetricsTest.episode(1, 3, Map.of(Episode.APPROVALS, 1, Episode.REJECTIONS, 1), StepMetricsTest.step(0, true, 5, STOP),
                    StepMetricsTest.step(1, false, 2, STOP)));
    static final double[] REWARDS = {1, 0, 0.5, 0.75};
    static final float[] ADV = {1, 0.5f, -1, 0.5f, 2, -1, 0, 3};


    /** The workload's sums over {@code eps}: their trajectory numbers and reply tokens. */
    static WorkloadMetricsDistributedTest.SumsWorkload sums(List<Episode> eps) {
        Map<String, Double> m = new LinkedHashMap<>();
        m.put("traj", (double) eps.stream().mapToInt(Episode::traj).sum());
        m.put("reply_tokens", (double) eps.stream().flatMap(e -> e.steps().stream()).mapToInt(s -> s.output().payload(TurnData.class).responseIds().length).sum());
        return new WorkloadMetricsDistributedTest.SumsWorkload(m);
    }

    static PhaseTimer rollout(long nanos) {
        long[] clock = {0};
        PhaseTimer timer = new PhaseTimer(() -> clock[0]);
        try (var rollout = timer.phase("rollout")) {
            clock[0] = nanos;
        }
        return timer;
    }

    @Test
    void twoRanksWithHalfABatchEachLogWhatOneProcessLogsForAllOfIt() throws Exception {
        RolloutBatch whole = RolloutBatch.of(RolloutBatchTest.TASKS, EPISODES, 2, new RolloutBatchTest.TableWorkload(REWARDS));
        Map<String, Double> one = StepMetrics.of(new StepMetrics.Step(1, whole, new Advantages.Result(ADV, StepMetricsTest.diagnostics(-1)),
                new PpoUpdater.Stats[0], 3, new long[] {110, 66, 44}, rollout(3_000_000_000L), 0), StepMetricsTest.TEAM, sums(EPISODES),
                List.of(), Collective.single());
        assertFalse(one.containsKey("time/collective_s"), "one process has no collectives: " + one.keySet());
        assertEquals(3.0, one.get("time/rollout_s"), 1e-12);

        // rank r: task r's two episodes, its rows' advantages and its segments; rank 0's rollout takes 2 s, rank 1's 3 s
        long[][] prefill = {{100, 60, 40}, {10, 6, 4}};
        List<Object> ranks = WorkloadMetricsDistributedTest.ranks(2, (r, pg) -> {
            List<Episode> eps = EPISODES.subList(2 * r, 2 * r + 2);
            RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS, eps, 2, new RolloutBatchTest.TableWorkload(REWARDS));
            pg.sum(new double[1], "warm-up");  // time in collectives before the step, which the step's own leaves out
            double before = pg.collectiveSeconds();
            Map<String, Double> m = StepMetrics.of(new StepMetrics.Step(1, b, new Advantages.Result(Arrays.copyOfRange(ADV, 4 * r, 4 * r + 4),
                    StepMetricsTest.diagnostics(r)), new PpoUpdater.Stats[0], 1 + r, prefill[r], rollout((2 + r) * 1_000_000_000L), before),
                    StepMetricsTest.TEAM, sums(eps), List.of(), pg);
            m.put("test/collective_s_after", pg.collectiveSeconds());
            return m;
        });
        for (int r = 0; r < 2; r++) {
            assertTrue(ranks.get(r) instanceof Map, "rank " + r + " failed: " + ranks.get(r));
            @SuppressWarnings("unchecked")
            Map<String, Double> m = (Map<String, Double>) ranks.get(r);
            double after = m.remove("test/collective_s_after"), inCollectives = m.remove("time/collective_s");
            assertTrue(inCollectives >= 0 && inCollectives <= after, "rank " + r + ": " + inCollectives + " s of the " + after + " s in all");
            assertEquals(one.keySet(), m.keySet(), "rank " + r);
            for (String k : one.keySet()) assertEquals(one.get(k), m.get(k), 1e-12, "rank " + r + ": " + k);
        }
        // the premise: the halves differ, so that a rank that logged its own half would be told apart
        Set<String> differ = new HashSet<>();
        RolloutBatch half = RolloutBatch.of(RolloutBatchTest.TASKS, EPISODES.subList(0, 2), 2, new RolloutBatchTest.TableWorkload(REWARDS));
        Map<String, Double> own = StepMetrics.of(new StepMetrics.Step(1, half, new Advantages.Result(Arrays.copyOfRange(ADV, 0, 4), StepMetricsTest.diagnostics(0)),
                new PpoUpdater.Stats[0], 1, prefill[0], rollout(2_000_000_000L), 0), StepMetricsTest.TEAM, sums(EPISODES.subList(0, 2)),
                List.of(), Collective.single());
        for (String k : one.keySet()) if (!one.get(k).equals(own.get(k))) differ.add(k);
        for (String k : List.of("reward/mean", "rows", "verifier/approve_rate", "traj", "reply_tokens", "prompt_truncated", "time/rollout_s",
                "perf/gen_tokens_per_s", "perf/prompt_tokens", "agent/solver/score_mean", "agent/verifier/adv_std",
                "agent/verifier/response_len", "agent/solver/response_clipped", "agent/solver/mu", "agent/solver/sigma",
                "agent/verifier/inflation")) {
            assertTrue(differ.contains(k), k + " is the same for the first half: " + own.get(k));
        }
    }
}
