// StepMetricsTest.java — the per-agent metrics of a step from its rows and the kernel's
// diagnostics: Lemma 4.2's inflation is logged by the rule `drmas compare` reports it by
// (AdvantageSummary), so that a group whose std is only float rounding noise does not log a factor
// of ~1e14, and is the ratio of population variances (an agent acting in 2 of 8 trajectories, one
// success and one failure, logs 1 like the agent acting in all); σ_k averages only the agent
// segments of two rows or more, where a std is defined.
// The rows come from RolloutBatchTest's table of rewards; the advantages from libdrmas.
// Per model, from real PPO updates of a tiny model: the learning rate the step used (not the next
// one), the dual clip's fraction (clipfrac_lower), and no PPO statistics for a model that had no rows;
// from hand-made statistics of two models, each model's own under its id (KL only with a reference)
// and each agent's gradient norm under the agent's name.
// The step's own figures (reward, verdict rates, per-agent moments, lengths, generation speed) on a
// hand-made batch with hand-made advantages, and μ_k, σ_k and the factor as means over their groups
// on hand-made diagnostics, against values worked out by hand.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Agent;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Message;
import dev.drmas.agent.PromptTemplate;
import dev.drmas.agent.Step;
import dev.drmas.agent.Team;
import dev.drmas.agent.Turn;
import dev.drmas.algo.AdvantageSummary;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.dist.Collective;
import dev.drmas.metrics.PhaseTimer;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.Completion;
import dev.drmas.workflow.Workload;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

class StepMetricsTest {
    static final Team TEAM = new Team(List.of(agent("solver", 0), agent("verifier", 1)));

    static Agent agent(String id, int index) {
        return new Agent(id, index, "m", "", PromptTemplate.of("Q: {question}"), null, null);
    }

    static Step step(int agent, boolean valid) {
        TurnData d = new TurnData(new int[] {1, 2}, new int[] {3, 4, 5}, new float[] {-1, -1, -1}, Completion.FinishReason.STOP_TOKEN, false);
        return new Step(agent, agent, 0, List.of(new Message("user", "q")), new Turn("a", d), valid);
    }

    static Episode episode(int uid, int traj, boolean verifierValid) {
        return new Episode(uid, traj, "q", "a", List.of(step(0, true), step(1, verifierValid)), "", true, Map.of());
    }

    @Test
    void inflationLeavesOutGroupsWhoseStdIsRoundingNoise() {
        // Task 0: trajectory 0 scores 0.71 and, its verifier malformed (penalty 0.25), 0.46; trajectory 1
        // scores 0.585 twice. As float32 scores the trajectory means differ by 1.5e-8: the group's std
        // (trajectory pooling) is rounding noise, and the solver's factor there would be ~1e14.
        // Task 1: rewards 1 and 0, a real spread.
        List<Episode> eps = List.of(episode(0, 0, false), episode(0, 1, true), episode(1, 2, true), episode(1, 3, true));
        RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS, eps, 2,
                new RolloutBatchTest.TableWorkload(new double[] {0.71, 0.585, 1, 0}));
        Advantages.Result adv = b.advantages(NormConfig.of(NormMode.DRMAS), 2);
        double[] d = adv.diagnostics();
        // the premise: the kernel's group std of task 0 is tiny but not 0, and its raw factor huge
        double raw = d[AbiIndices.DIAG_INFLATION * 4 + 0];
        assertTrue(raw > 1e10, "task 0's raw solver factor: " + raw);

        Map<String, Double> m = new LinkedHashMap<>();
        StepMetrics.agents(new StepMetrics.Step(1, b, adv, new PpoUpdater.Stats[0], 0, new long[3], null, 0), TEAM, Collective.single(), m);
        AdvantageSummary[] summary = AdvantageSummary.perAgent(b.scores, b.agent, adv.advantages(), d, 2, 2);
        for (int a = 0; a < 2; a++) {
            String key = "agent/" + TEAM.agent(a).id() + "/inflation";
            assertEquals(1, summary[a].inflationGroups(), key + ": task 1 alone");
            assertEquals(summary[a].inflationMean(), m.get(key), 1e-12, key);
            assertTrue(m.get(key) < 10, key + " = " + m.get(key));
        }
    }

    @Test
    void inflationIsTheRatioOfPopulationVariances() {
        // One task, 8 trajectories, 4 succeed; the solver acts in each, the verifier in trajectories 0
        // and 4 only (one success, one failure). Under GRPO both agents' rows have E[A²] = 0.25/σ², so
        // Lemma 4.2's factor is 1 for both: trajectories {1,1,1,1,0,0,0,0} have variance 2/8, the
        // verifier's {1, 0} 0.5/2, its shift 0. With n − 1 variances the verifier logged 0.5/(2/7) = 1.75.
        List<Episode> eps = new ArrayList<>();
        for (int t = 0; t < 8; t++) {
            eps.add(t % 4 == 0 ? episode(0, t, true) : new Episode(0, t, "q", "a", List.of(step(0, true)), "", true, Map.of()));
        }
        RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS.subList(0, 1), eps, 8,
                new RolloutBatchTest.TableWorkload(new double[] {1, 1, 1, 1, 0, 0, 0, 0}));
        Advantages.Result adv = b.advantages(NormConfig.of(NormMode.GRPO), 2);
        Map<String, Double> m = new LinkedHashMap<>();
        StepMetrics.agents(new StepMetrics.Step(1, b, adv, new PpoUpdater.Stats[0], 0, new long[3], null, 0), TEAM, Collective.single(), m);
        assertEquals(2.0, m.get("agent/verifier/rows"), "the premise: the verifier acts twice");
        assertEquals(m.get("agent/solver/adv_sq_mean"), m.get("agent/verifier/adv_sq_mean"), 1e-6, "the premise: equal E[A²]");
        assertEquals(1.0, m.get("agent/solver/inflation"), "agent/solver/inflation");
        assertEquals(1.0, m.get("agent/verifier/inflation"), "agent/verifier/inflation");
    }

    @Test
    void sigmaLeavesOutAgentSegmentsOfOneRow() {
        // Task 0: the verifier acts in trajectory 0 only (rewards 1 and 0.25): its segment there has
        // one row, whose std is undefined (0 by the kernels' convention), as ARCHITECTURE §5's single
        // segments. Task 1: both act in both trajectories, rewards 1 and 0: σ = √0.5 (unbiased).
        Episode solo = new Episode(0, 1, "q", "a", List.of(step(0, true)), "", true, Map.of());
        List<Episode> eps = List.of(episode(0, 0, true), solo, episode(1, 2, true), episode(1, 3, true));
        RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS, eps, 2, new RolloutBatchTest.TableWorkload(new double[] {1, 0.25, 1, 0}));
        Advantages.Result adv = b.advantages(NormConfig.of(NormMode.DRMAS), 2);
        double[] d = adv.diagnostics();
        // the premise: the verifier's segment of task 0 (seg 1) has one row and a std of exactly 0
        assertEquals(1.0, d[AbiIndices.DIAG_AGENT_COUNT * 4 + 1]);
        assertEquals(0.0, d[AbiIndices.DIAG_AGENT_STD * 4 + 1]);

        Map<String, Double> m = new LinkedHashMap<>();
        StepMetrics.agents(new StepMetrics.Step(1, b, adv, new PpoUpdater.Stats[0], 0, new long[3], null, 0), TEAM, Collective.single(), m);
        assertEquals(Math.sqrt(0.5), m.get("agent/verifier/sigma"), 1e-7, "task 1 alone, not (0 + √0.5) / 2");
        assertEquals((1 + 0.5) / 2, m.get("agent/verifier/mu"), 1e-7, "μ_k of a single row is that row: every group counts");
        // the solver has two rows in each task: task 0's 1 and 0.25 (σ = 0.53), task 1's 1 and 0 (σ = 0.71)
        assertEquals((Math.sqrt(2 * 0.375 * 0.375) + Math.sqrt(0.5)) / 2, m.get("agent/solver/sigma"), 1e-7);

        // no segment of two rows at all: no σ logged (as no inflation without a defined group std), not 0
        List<Episode> alone = List.of(episode(0, 0, true), solo);
        RolloutBatch one = RolloutBatch.of(RolloutBatchTest.TASKS.subList(0, 1), alone, 2,
                new RolloutBatchTest.TableWorkload(new double[] {1, 0.25}));
        Advantages.Result adv1 = one.advantages(NormConfig.of(NormMode.DRMAS), 2);
        m.clear();
        StepMetrics.agents(new StepMetrics.Step(1, one, adv1, new PpoUpdater.Stats[0], 0, new long[3], null, 0), TEAM, Collective.single(), m);
        assertTrue(m.containsKey("agent/verifier/mu") && !m.containsKey("agent/verifier/sigma"), m.toString());
        assertTrue(m.containsKey("agent/solver/sigma"), m.toString());
    }

    static Step step(int agent, boolean valid, int responseLen, Completion.FinishReason why) {
        TurnData d = new TurnData(new int[] {1, 2}, new int[responseLen], new float[responseLen], why, false);
        return new Step(agent, agent, 0, List.of(new Message("user", "q")), new Turn("a", d), valid);
    }

    static Episode episode(int uid, int traj, Map<String, Integer> counters, Step... steps) {
        return new Episode(uid, traj, "q", "a", List.of(steps), "", true, counters);
    }

    @Test
    void aStepsFiguresAreTheRowsMeansAndRates() {
        var stop = Completion.FinishReason.STOP_TOKEN;
        // rewards by trajectory 1, 0, 0.5, 0.75; the verifier's turns in trajectories 1 and 3 are invalid
        // (its row there scores the reward − 0.25); the solver's reply in trajectory 1 hit max_new_tokens.
        // Verdicts: 2 approvals, 2 rejections, 1 malformed (trajectory 3 had two rounds).
        List<Episode> eps = List.of(
                episode(0, 0, Map.of(Episode.APPROVALS, 1), step(0, true, 2, stop), step(1, true, 4, stop)),
                episode(0, 1, Map.of(Episode.MALFORMED_VERDICTS, 1), step(0, true, 6, Completion.FinishReason.LENGTH),
                        step(1, false, 1, stop)),
                episode(1, 2, Map.of(Episode.REJECTIONS, 1), step(0, true, 3, stop), step(1, true, 5, stop)),
                episode(1, 3, Map.of(Episode.APPROVALS, 1, Episode.REJECTIONS, 1), step(0, true, 5, stop), step(1, false, 2, stop)));
        RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS, eps, 2, new RolloutBatchTest.TableWorkload(new double[] {1, 0, 0.5, 0.75}));
        assertEquals(28, b.generatedTokens(), "solver 2 + 6 + 3 + 5, verifier 4 + 1 + 5 + 2");
        // rows in episode order (solver, verifier per episode): solver advantages 1, −1, 2, 0; verifier 0.5, 0.5, −1, 3.
        // No segment statistics (agent counts 0): μ_k, σ_k and the inflation have their own tests above.
        float[] adv = {1, 0.5f, -1, 0.5f, 2, -1, 0, 3};
        Advantages.Result result = new Advantages.Result(adv, new double[AbiIndices.DIAG_FIELDS * 4]);
        long[] clock = {0};
        PhaseTimer timer = new PhaseTimer(() -> clock[0]);
        try (var rollout = timer.phase("rollout")) {
            clock[0] = 2_000_000_000L;  // two seconds of rollout
        }
        // the workload's own metrics: its sums over the 4 episodes, logged per episode in its order
        Workload sums = (Workload) java.lang.reflect.Proxy.newProxyInstance(Workload.class.getClassLoader(), new Class<?>[] {Workload.class},
                (proxy, method, args) -> {
                    if (!method.getName().equals("episodeSums")) throw new UnsupportedOperationException(method.getName());
                    Map<String, Double> out = new LinkedHashMap<>();
                    out.put("solved", 3.0);
                    out.put("rounds", 6.0);
                    return out;
                });
        Map<String, Double> m = StepMetrics.of(new StepMetrics.Step(1, b, result, new PpoUpdater.Stats[0], 3, new long[] {100, 60, 40}, timer, 0),
                TEAM, sums, List.of(), Collective.single());

        assertEquals((1 + 0 + 0.5 + 0.75) / 4, m.get("reward/mean"), 1e-12);
        assertEquals(8.0, m.get("rows"));
        assertEquals(0.75, m.get("solved"), 1e-12);
        assertEquals(1.5, m.get("rounds"), 1e-12);
        assertEquals(List.of("reward/mean", "rows", "verifier/approve_rate", "verifier/reject_rate", "verifier/malformed_rate", "solved", "rounds"),
                m.keySet().stream().limit(7).toList(), "the workload's metrics in its own order");
        assertEquals(2 / 5.0, m.get("verifier/approve_rate"), 1e-12);
        assertEquals(2 / 5.0, m.get("verifier/reject_rate"), 1e-12);
        assertEquals(1 / 5.0, m.get("verifier/malformed_rate"), 1e-12);
        assertEquals(3.0, m.get("prompt_truncated"));
        assertEquals(2.0, m.get("time/rollout_s"), 1e-12);
        assertEquals(28 / 2.0, m.get("perf/gen_tokens_per_s"), 1e-12);
        assertEquals(100.0, m.get("perf/prompt_tokens"));
        assertEquals(60.0, m.get("perf/prefilled_tokens"));
        assertEquals(40.0, m.get("perf/prefix_reused_tokens"));

        // solver: scores 1, 0, 0.5, 0.75 (mean 0.5625, E[s²] 0.453125); advantages mean 0.5, E[A²] (1 + 1 + 4 + 0)/4
        assertEquals(4.0, m.get("agent/solver/rows"));
        assertEquals(0.5625, m.get("agent/solver/score_mean"), 1e-12);
        assertEquals(Math.sqrt(0.453125 - 0.5625 * 0.5625), m.get("agent/solver/score_std"), 1e-12);
        assertEquals(0.5, m.get("agent/solver/adv_mean"), 1e-12);
        assertEquals(Math.sqrt(1.5 - 0.25), m.get("agent/solver/adv_std"), 1e-12);
        assertEquals(1.5, m.get("agent/solver/adv_sq_mean"), 1e-12);
        assertEquals(1.0, m.get("agent/solver/valid_ratio"), 1e-12);
        assertEquals(4.0, m.get("agent/solver/response_len"), 1e-12);
        assertEquals(0.25, m.get("agent/solver/response_clipped"), 1e-12);
        // verifier: scores 1, −0.25, 0.5, 0.5; advantages mean 0.75, E[A²] (0.25 + 0.25 + 1 + 9)/4; half its turns valid
        assertEquals(0.4375, m.get("agent/verifier/score_mean"), 1e-12);
        assertEquals(0.75, m.get("agent/verifier/adv_mean"), 1e-12);
        assertEquals(2.625, m.get("agent/verifier/adv_sq_mean"), 1e-12);
        assertEquals(Math.sqrt(2.625 - 0.75 * 0.75), m.get("agent/verifier/adv_std"), 1e-12);
        assertEquals(0.5, m.get("agent/verifier/valid_ratio"), 1e-12);
        assertEquals(3.0, m.get("agent/verifier/response_len"), 1e-12);
        assertEquals(0.0, m.get("agent/verifier/response_clipped"));
        assertTrue(!m.containsKey("agent/solver/mu") && !m.containsKey("agent/solver/inflation"), "no segment statistics: " + m);

        // no verdict at all: no rates (not 0/0)
        List<Episode> silent = List.of(episode(0, 0, Map.of(), step(0, true, 2, stop)), episode(0, 1, Map.of(), step(0, true, 2, stop)));
        RolloutBatch q = RolloutBatch.of(RolloutBatchTest.TASKS.subList(0, 1), silent, 2, new RolloutBatchTest.TableWorkload(new double[] {1, 0}));
        Map<String, Double> n = StepMetrics.of(new StepMetrics.Step(2, q, new Advantages.Result(new float[] {0.5f, -0.5f},
                        new double[AbiIndices.DIAG_FIELDS * 2]), new PpoUpdater.Stats[0], 0, new long[3],
                new PhaseTimer(), 0), TEAM, new RolloutBatchTest.TableWorkload(new double[] {1, 0}), List.of(), Collective.single());
        assertEquals(0.5, n.get("reward/mean"), 1e-12);
        assertTrue(n.keySet().stream().noneMatch(k -> k.startsWith("verifier/")), n.toString());
        assertTrue(!n.containsKey("perf/gen_tokens_per_s") && !n.containsKey("agent/verifier/rows"), "no rollout time, no verifier rows: " + n);
    }

    @Test
    void muSigmaAndInflationAreMeansOverTheirGroups() {
        // Hand-made diagnostics of 2 tasks × 2 agents (segment = task · 2 + agent), both groups with a real
        // spread. Agent rows per segment 2, 1, 2, 2; agent means 0.5, 0.25, 1, 0.75; agent stds 0.5, 0 (one row),
        // 0.25, 0.125; factors 1.5, 0.5, 2.5, 5.5.
        var stop = Completion.FinishReason.STOP_TOKEN;
        List<Episode> eps = new ArrayList<>();
        for (int t = 0; t < 4; t++) eps.add(episode(t / 2, t, Map.of(), step(0, true, 1, stop), step(1, true, 1, stop)));
        RolloutBatch b = RolloutBatch.of(RolloutBatchTest.TASKS, eps, 2, new RolloutBatchTest.TableWorkload(new double[] {1, 0, 1, 0}));
        double[] d = diagnostics(-1);
        Map<String, Double> m = new LinkedHashMap<>();
        StepMetrics.agents(new StepMetrics.Step(1, b, new Advantages.Result(new float[8], d), new PpoUpdater.Stats[0], 0, new long[3], null, 0),
                TEAM, Collective.single(), m);
        assertEquals((0.5 + 1) / 2, m.get("agent/solver/mu"), 1e-12);
        assertEquals((0.5 + 0.25) / 2, m.get("agent/solver/sigma"), 1e-12);
        assertEquals((1.5 + 2.5) / 2, m.get("agent/solver/inflation"), 1e-12);
        assertEquals((0.25 + 0.75) / 2, m.get("agent/verifier/mu"), 1e-12);
        assertEquals(0.125, m.get("agent/verifier/sigma"), 1e-12, "task 1 alone: task 0's segment has one row");
        assertEquals((0.5 + 5.5) / 2, m.get("agent/verifier/inflation"), 1e-12);
    }

    /** lr 1e-3 warmed up over 4 steps: the first step uses 2.5e-4, the second 5e-4. */
    static final AdamW.Settings WARM = new AdamW.Settings(1e-3, 0.9, 0.999, 1e-8, 0, 4);
    static final PpoUpdater.Settings ONE_STEP = new PpoUpdater.Settings(1, 4, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1);

    @Test
    void aModelLogsTheLearningRateItsStepUsed() {
        try (CausalLm lm = CausalLm.random(ModelConfig.tiny(Family.LLAMA, PpoUpdaterTest.VOCAB), 1);
             AdamW adam = new AdamW(lm.parameters(), WARM); ModelOptimizer o = ModelOptimizer.wrap(adam)) {
            for (int step = 1; step <= 2; step++) {
                PpoUpdater.Stats st = new PpoUpdater(lm, adam, null, ONE_STEP).update(PpoUpdaterTest.rows(step, 4), step);
                assertEquals(1, st.optimizerSteps());
                Map<String, Double> m = new LinkedHashMap<>();
                StepMetrics.model("policy", st, false, o, TEAM, m);
                assertEquals(step * 2.5e-4, m.get("model/policy/lr"), 1e-15, "step " + step);
            }
        }
    }

    @Test
    void aModelLogsTheDualClipsFraction() {
        // verl's pg_clipfrac_lower: tokens with A < 0 whose ratio passed the dual clip c. With c = 1.05 (just
        // above 1 + clip_high would clip) and two epochs of large steps, the second epoch's ratios move past it
        LossConfig lowDual = LossConfig.defaults().withDualClip(1.05);
        PpoUpdater.Settings twoEpochs = new PpoUpdater.Settings(2, 3, 3, 1.0, 0, 1.0, lowDual, 1);
        try (CausalLm lm = CausalLm.random(ModelConfig.tiny(Family.LLAMA, PpoUpdaterTest.VOCAB), 1);
             AdamW adam = new AdamW(lm.parameters(), AdamW.Settings.of(2e-2)); ModelOptimizer o = ModelOptimizer.wrap(adam)) {
            PpoUpdater.Stats st = new PpoUpdater(lm, adam, null, twoEpochs).update(PpoUpdaterTest.rowsWithResponses(8, 12), 4);
            Map<String, Double> m = new LinkedHashMap<>();
            StepMetrics.model("policy", st, false, o, TEAM, m);
            double lower = m.getOrDefault("model/policy/clipfrac_lower", Double.NaN);
            assertTrue(lower > 0 && lower < 1, "clipfrac_lower " + lower + " in " + m);
            assertEquals(st.clipfracLower(), lower);
        }
    }

    @Test
    void aModelWithoutRowsLogsNoPpoStatistics() {
        try (CausalLm lm = CausalLm.random(ModelConfig.tiny(Family.LLAMA, PpoUpdaterTest.VOCAB), 1);
             AdamW adam = new AdamW(lm.parameters(), WARM); ModelOptimizer o = ModelOptimizer.wrap(adam)) {
            // no rows before any step: no statistics and no learning rate (none was used yet)
            Map<String, Double> m = new LinkedHashMap<>();
            StepMetrics.model("policy", new PpoUpdater(lm, adam, null, ONE_STEP).update(List.of(), 1), false, o, TEAM, m);
            assertEquals(Set.of("model/policy/skipped_steps", "memory/policy/optimizer_bytes"), m.keySet());
            // a step with rows logs them
            m.clear();
            StepMetrics.model("policy", new PpoUpdater(lm, adam, null, ONE_STEP).update(PpoUpdaterTest.rows(3, 4), 2), false, o, TEAM, m);
            Set<String> stats = Set.of("pg_loss", "clipfrac", "clipfrac_lower", "ppo_kl", "entropy", "grad_norm", "grad_norm_max");
            for (String k : stats) assertTrue(Double.isFinite(m.getOrDefault("model/policy/" + k, Double.NaN)), k + " in " + m.keySet());
            // then a step without rows: the statistics are absent, not 0.0; lr stays the one the latest step used
            m.clear();
            StepMetrics.model("policy", new PpoUpdater(lm, adam, null, ONE_STEP).update(List.of(), 3), false, o, TEAM, m);
            for (String k : stats) assertTrue(!m.containsKey("model/policy/" + k), k + " logged without rows: " + m);
            assertEquals(0.0, m.get("model/policy/skipped_steps"));
            assertEquals(2.5e-4, m.get("model/policy/lr"), 1e-15);
        }
    }

    @Test
    void eachModelLogsItsOwnStatisticsAndEachAgentItsGradientNorm() {
        try (CausalLm lm = CausalLm.random(ModelConfig.tiny(Family.LLAMA, PpoUpdaterTest.VOCAB), 1);
             AdamW adam = new AdamW(lm.parameters(), WARM); ModelOptimizer o = ModelOptimizer.wrap(adam)) {
            // model a trains the solver (agent 0); model b the verifier (agent 1), against a reference model. Every number differs
            PpoUpdater.Stats a = new PpoUpdater.Stats(0.1, 0, 0.2, 0.05, 0.01, 0.3, 1.2, 1.5, 2.5, 2, 1, 10, Map.of(0, 1.25));
            PpoUpdater.Stats b = new PpoUpdater.Stats(0.4, 0, 0.6, 0.15, 0.02, 0.7, 0.9, 3.5, 4.5, 1, 3, 20, Map.of(1, 0.75));
            List<Policies.Policy> models = List.of(new Policies.Policy("a", lm, null, null, null, null, o, 1.0, null),
                    new Policies.Policy("b", lm, null, null, null, null, o, 1.0, lm));
            var stop = Completion.FinishReason.STOP_TOKEN;
            List<Episode> eps = List.of(episode(0, 0, Map.of(), step(0, true, 2, stop)), episode(0, 1, Map.of(), step(0, true, 2, stop)));
            RolloutBatch q = RolloutBatch.of(RolloutBatchTest.TASKS.subList(0, 1), eps, 2, new RolloutBatchTest.TableWorkload(new double[] {1, 0}));
            Map<String, Double> m = StepMetrics.of(new StepMetrics.Step(1, q, new Advantages.Result(new float[] {0.5f, -0.5f},
                    new double[AbiIndices.DIAG_FIELDS * 2]), new PpoUpdater.Stats[] {a, b}, 0, new long[3], new PhaseTimer(), 0), TEAM,
                    new RolloutBatchTest.TableWorkload(new double[] {1, 0}), models, Collective.single());
            assertEquals(1.25, m.get("agent/solver/grad_norm"), "the solver's own norm, under its agent's name");
            assertEquals(0.75, m.get("agent/verifier/grad_norm"));
            Map<String, double[]> expected = new LinkedHashMap<>();
            expected.put("pg_loss", new double[] {0.1, 0.4});
            expected.put("clipfrac", new double[] {0.2, 0.6});
            expected.put("clipfrac_lower", new double[] {0.05, 0.15});
            expected.put("ppo_kl", new double[] {0.01, 0.02});
            expected.put("entropy", new double[] {1.2, 0.9});
            expected.put("grad_norm", new double[] {1.5, 3.5});
            expected.put("grad_norm_max", new double[] {2.5, 4.5});
            expected.put("skipped_steps", new double[] {1, 3});
            expected.forEach((k, v) -> {
                assertEquals(v[0], m.get("model/a/" + k), "model/a/" + k);
                assertEquals(v[1], m.get("model/b/" + k), "model/b/" + k);
            });
            assertEquals(0.7, m.get("model/b/kl"), "KL to the reference of the model that has one");
            assertTrue(!m.containsKey("model/a/kl"), "no reference, no KL: " + m.keySet());
        }
    }

    /** Kernel diagnostics of 2 tasks × 2 agents (segment = task · 2 + agent); only the segments of {@code task} where ≥ 0. */
    static double[] diagnostics(int task) {
        int segs = 4;
        double[] d = new double[AbiIndices.DIAG_FIELDS * segs];
        double[][] perSeg = {
            {AbiIndices.DIAG_AGENT_COUNT, 2, 1, 2, 2},
            {AbiIndices.DIAG_AGENT_MEAN, 0.5, 0.25, 1, 0.75},
            {AbiIndices.DIAG_AGENT_STD, 0.5, 0, 0.25, 0.125},
            {AbiIndices.DIAG_GROUP_MEAN, 0.5, 0.5, 0.8, 0.8},
            {AbiIndices.DIAG_GROUP_STD, 0.5, 0.5, 0.4, 0.4},
            {AbiIndices.DIAG_INFLATION, 1.5, 0.5, 2.5, 5.5}};
        for (double[] f : perSeg) {
            for (int seg = 0; seg < segs; seg++) if (task < 0 || seg / 2 == task) d[(int) f[0] * segs + seg] = f[1 + seg];
        }
        return d;
    }
}
