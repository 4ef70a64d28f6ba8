// TokenBudgetTest.java — the two token budgets of a training run on the toy math team:
// rollout.max_batch_tokens cuts every turn's generation into batches whose KV caches stay within it
// and changes no token and no metric (training and evaluation); ppo.max_tokens_per_micro_batch cuts
// the update's forwards and changes the trained weights only by summation order.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.rollout.Generator;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TokenBudgetTest {
    @TempDir
    static Path tmp;

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());
    /** A supervised warm start shared by the runs: a random model answers in no format, so every reward and advantage is 0. */
    static Path warm;
    /** The demo config: a solver and a verifier sharing one tiny model (prompts of the math team, responses up to 24 tokens). */
    static final Path CONFIG = Path.of("../configs/math-toy-drmas.yaml");

    @BeforeAll
    static void warmStart() throws Exception {
        RunConfig cfg = RunConfig.load(CONFIG, List.of("run.output_dir=" + tmp.resolve("sft"), "run.threads=2", "sft.steps=60",
                "sft.batch_size=16"));
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            t.sft();
        }
        warm = tmp.resolve("sft/math-toy-drmas/sft/models");
    }

    /** What a run of {@code steps} steps did: per step its metrics (clocks aside) and its rows' tokens. */
    record Run(List<Map<String, Double>> metrics, List<List<int[]>> tokens, List<Generator.Batch> lastBatches,
               Map<String, float[]> weights, Map<String, Double> eval) {
    }

    Run run(String name, int steps, String... overrides) {
        return run(name, steps, false, overrides);
    }

    /** {@code steps} training steps, then (if {@code eval}) an evaluation on 8 held-out tasks. */
    Run run(String name, int steps, boolean eval, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve(name), "trainer.steps=" + steps,
                "trainer.eval_freq=0", "trainer.save_freq=0", "metrics.tensorboard=false", "rollout.tasks_per_step=4", "run.threads=2",
                "ppo.mini_batch_size=16", "ppo.micro_batch_size=4", "models.policy.optim.lr=1.0e-3", "eval.tasks=8",
                "run.warm_start=" + warm));
        o.addAll(List.of(overrides));
        RunConfig cfg = RunConfig.load(CONFIG, o);
        List<Map<String, Double>> metrics = new ArrayList<>();
        List<List<int[]>> tokens = new ArrayList<>();
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            for (int s = 0; s < steps; s++) {
                Map<String, Double> m = new TreeMap<>(t.trainStep());
                m.keySet().removeIf(k -> k.startsWith("time/") || k.startsWith("perf/") || k.startsWith("memory/") || k.equals("wall_time"));
                metrics.add(m);
                List<int[]> rows = new ArrayList<>();
                RolloutBatch b = t.lastStep.batch();
                for (int i = 0; i < b.rows(); i++) {
                    rows.add(b.turn(i).promptIds());
                    rows.add(b.turn(i).responseIds());
                }
                tokens.add(rows);
            }
            Policies.Policy p = t.policiesForTest().get("policy");
            List<Generator.Batch> batches = p.generator().lastBatches();  // of the last training turn
            Map<String, Double> ev = eval ? new TreeMap<>(t.evaluate()) : Map.of();
            ev.keySet().removeIf(k -> k.startsWith("time/") || k.startsWith("perf/") || k.startsWith("memory/"));
            return new Run(metrics, tokens, batches, PpoUpdaterTest.snapshot(p.model()), ev);
        }
    }

    @Test
    void aRolloutBudgetChangesNoTokenAndNoMetric() {
        // 4 tasks × 4 rollouts: 16 requests a turn; 400 slots hold two or three rows of the team's
        // prompts (+ 24 new tokens) a batch, so every turn runs in several batches
        Run free = run("free", 2, true);
        assertEquals(1, free.lastBatches().size(), "unbounded: one batch a turn, " + free.lastBatches());
        assertEquals(16, free.lastBatches().get(0).rows());
        // the static engine: several batches, each request in one
        Run fixed = run("static", 2, true, "rollout.max_batch_tokens=400", "rollout.engine=static");
        assertTrue(fixed.lastBatches().size() >= 3, "bounded: " + fixed.lastBatches());
        int rows = 0;
        for (Generator.Batch b : fixed.lastBatches()) {
            assertTrue(b.slots() <= 400, "a batch of " + b + " = " + b.slots() + " KV cache slots, more than 400");
            rows += b.rows();
        }
        assertEquals(16, rows, "every request of the turn in one batch: " + fixed.lastBatches());
        // continuous batching (the default): one cache of the rows that fit, the others join as rows finish
        Run bounded = run("bounded", 2, true, "rollout.max_batch_tokens=400");
        assertEquals(1, bounded.lastBatches().size(), "continuous: one cache a turn, " + bounded.lastBatches());
        Generator.Batch one = bounded.lastBatches().get(0);
        assertTrue(one.slots() <= 400 && one.rows() < 16, "a cache of " + one + " within 400 slots, fewer rows than requests");
        for (Run other : List.of(fixed, bounded)) compare(free, other);
    }

    /** The same tokens, metrics, weights and evaluation. */
    static void compare(Run free, Run bounded) {
        for (int s = 0; s < 2; s++) {
            assertEquals(free.tokens().get(s).size(), bounded.tokens().get(s).size(), "rows of step " + (s + 1));
            for (int i = 0; i < free.tokens().get(s).size(); i++) {
                assertArrayEquals(free.tokens().get(s).get(i), bounded.tokens().get(s).get(i), "step " + (s + 1) + ", row " + i / 2
                        + (i % 2 == 0 ? " prompt" : " response"));
            }
            assertEquals(free.metrics().get(s), bounded.metrics().get(s), "metrics of step " + (s + 1));
        }
        // the comparison is of real updates: advantages and gradients that are not 0
        assertTrue(free.metrics().get(0).get("agent/solver/adv_sq_mean") > 0, "advantages " + free.metrics().get(0));
        assertTrue(free.metrics().get(0).get("model/policy/grad_norm") > 0, "grad norm " + free.metrics().get(0));
        for (String k : free.weights().keySet()) assertArrayEquals(free.weights().get(k), bounded.weights().get(k), k);
        // the evaluation generates through the same bounded engine: the same scores
        assertTrue(free.eval().containsKey("eval/pass@1"), "eval metrics: " + free.eval());
        assertEquals(free.eval(), bounded.eval(), "evaluation");
    }

    @Test
    void anUpdateBudgetChangesTheWeightsOnlyBySummationOrder() throws Exception {
        // micro-batches of at most 500 padded tokens (two or three rows) instead of micro_batch_size 4
        // rows. Adam's eps = 1e-3 keeps the rounding of a near-zero gradient from being scaled up to
        // an lr-sized step (with 1e-8 a weight differed by 2e-6 after one step).
        Run rows = run("rows", 1, "models.policy.optim.eps=1.0e-3");
        Run tokens = run("tokens", 1, "models.policy.optim.eps=1.0e-3", "ppo.max_tokens_per_micro_batch=500");
        assertEquals(rows.tokens().get(0).size(), tokens.tokens().get(0).size());
        for (int i = 0; i < rows.tokens().get(0).size(); i++) {
            assertArrayEquals(rows.tokens().get(0).get(i), tokens.tokens().get(0).get(i), "row " + i / 2);
        }
        Map<String, Double> a = rows.metrics().get(0), b = tokens.metrics().get(0);
        assertTrue(a.get("agent/solver/adv_sq_mean") > 0, "advantages " + a);
        assertEquals(a.keySet(), b.keySet());
        for (String k : a.keySet()) assertEquals(a.get(k), b.get(k), 1e-5 + 1e-5 * Math.abs(a.get(k)), k);
        for (String k : rows.weights().keySet()) {
            float[] x = rows.weights().get(k), y = tokens.weights().get(k);
            for (int i = 0; i < x.length; i++) assertEquals(x[i], y[i], 1e-6, k + "[" + i + "]");
        }
        try (CausalLm init = CausalLm.load(warm.resolve("policy"))) {
            double moved = PpoUpdaterTest.maxMove(PpoUpdaterTest.snapshot(init), rows.weights());
            assertTrue(moved > 1e-4, "the update moved no weight by more than 1e-4: " + moved);
        }
    }
}
