// LearningTest.java — training steps that learn, from a short warm start of the solver–verifier team
// on a tiny model (so that rows score differently and advantages are not all 0): weights move; on
// the same batch Dr. MAS and GRPO give different advantages and different updates; the logged
// inflation factor equals a hand computation from the batch's rows; the reference-model KL changes
// the update and is logged; and the per-agent gradient norms equal a separate backward per agent.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.AdvantageSummary;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class LearningTest {
    @TempDir
    static Path tmp;

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());
    static Path warm;

    static RunConfig config(String name, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp, "run.name=" + name, "+run.warm_start=" + warm));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o).withOverrides(List.of("trainer.steps=1", "trainer.eval_freq=0",
                "trainer.save_freq=0", "rollout.rollouts_per_task=4", "rollout.temperature=1.5", "rollout.max_new_tokens=20"));
    }

    @BeforeAll
    static void warmStart() throws Exception {
        RunConfig sft = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp, "run.name=warm",
                "sft.steps=200", "sft.batch_size=8", "sft.lr=5.0e-3", "sft.correct_prob=0.5", "run.resume=never"));
        try (Trainer t = Trainer.open(sft, QUIET)) {
            t.sft();
        }
        warm = tmp.resolve("warm").resolve("sft").resolve("models");
    }

    static Map<String, float[]> weights(Trainer t) {
        Map<String, float[]> w = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            t.policiesForTest().get("policy").model().parameters().forEach((k, v) -> w.put(k, Tensors.toFloats(v)));
        }
        return w;
    }

    static boolean same(Map<String, float[]> a, Map<String, float[]> b) {
        for (String k : a.keySet()) if (!Arrays.equals(a.get(k), b.get(k))) return false;
        return true;
    }

    /** One step of a fresh run of {@code cfg}: its metrics, its last step, the weights before and after. */
    record Step(Map<String, Double> metrics, Trainer.LastStep last, Map<String, float[]> before, Map<String, float[]> after) {
    }

    static Step step(RunConfig cfg) {
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            Map<String, float[]> before = weights(t);
            Map<String, Double> m = t.trainStep();
            return new Step(m, t.lastStep, before, weights(t));
        }
    }

    @Test
    void drmasAndGrpoUpdateTheSameBatchDifferently() {
        Step d = step(config("d", "algorithm.mode=drmas"));
        Step g = step(config("g", "algorithm.mode=grpo"));
        assertTrue(same(d.before(), g.before()), "both start from the warm start");
        assertArrayEquals(d.last().batch().scores, g.last().batch().scores, "the same weights and seeds: the same batch");
        float[] ad = d.last().adv().advantages(), ag = g.last().adv().advantages();
        assertTrue(Arrays.stream(box(ad)).anyMatch(a -> a != 0), "Dr. MAS: non-zero advantages");
        assertTrue(Arrays.stream(box(ag)).anyMatch(a -> a != 0), "GRPO: non-zero advantages");
        assertFalse(Arrays.equals(ad, ag), "different advantages for the same rows");
        assertFalse(same(d.before(), d.after()), "the update moved the weights");
        assertFalse(same(d.after(), g.after()), "and the modes moved them differently");
    }

    @Test
    void loggedInflationIsLemma42OfTheBatch() {
        Step s = step(config("i", "algorithm.mode=grpo"));
        RolloutBatch b = s.last().batch();
        int k = 2, groups = b.tasks.size(), n = b.rolloutsPerTask;
        for (int a = 0; a < k; a++) {
            double sum = 0;
            int count = 0;
            for (int u = 0; u < groups; u++) {
                // the group's statistics over trajectory means (trajectory pooling); Lemma 4.2's factor is a
                // ratio of mean squares, so population variances (n), not the normalisation's n − 1
                double[] traj = new double[n];
                int[] rows = new int[n];
                List<Double> agent = new ArrayList<>();
                for (int i = 0; i < b.rows(); i++) {
                    if (b.uid[i] != u) continue;
                    traj[b.traj[i] - u * n] += b.scores[i];
                    rows[b.traj[i] - u * n]++;
                    if (b.agent[i] == a) agent.add((double) b.scores[i]);
                }
                for (int t = 0; t < n; t++) traj[t] /= rows[t];
                double mu = mean(traj), var = variance(traj, mu);
                // undefined where the group's std (the normalisation's, n − 1) is 0 or rounding noise
                // (AdvantageSummary's floor)
                if (agent.isEmpty() || !(Math.sqrt(var) > AdvantageSummary.RELATIVE_STD_FLOOR * Math.abs(mu))) continue;
                double[] ak = agent.stream().mapToDouble(Double::doubleValue).toArray();
                double muK = mean(ak), varK = populationVariance(ak, muK);
                var = populationVariance(traj, mu);
                sum += (varK + (muK - mu) * (muK - mu)) / var;
                count++;
            }
            String key = "agent/" + (a == 0 ? "solver" : "verifier") + "/inflation";
            if (count == 0) {
                assertFalse(s.metrics().containsKey(key), key + ": no group with a defined factor");
            } else {
                assertEquals(sum / count, s.metrics().get(key), 1e-9 * Math.max(1, sum / count), key);
            }
        }
        assertTrue(s.metrics().containsKey("agent/solver/inflation") || s.metrics().containsKey("agent/verifier/inflation"),
                "the warm start gives groups with spread: " + s.metrics());
    }

    @Test
    void referenceKlChangesTheUpdateAndIsLogged() {
        Step plain = step(config("p"));
        Step kl = step(config("k", "ppo.reference_model=true", "ppo.kl_coef=0.5", "ppo.kl_type=low_var_kl", "ppo.epochs=2"));
        Step plain2 = step(config("p2", "ppo.epochs=2"));
        assertFalse(plain.metrics().containsKey("model/policy/kl"));
        assertTrue(kl.metrics().containsKey("model/policy/kl") && Double.isFinite(kl.metrics().get("model/policy/kl")));
        assertTrue(kl.metrics().get("model/policy/kl") > 0, "the second epoch has moved away from the reference");
        assertArrayEquals(plain2.last().batch().scores, kl.last().batch().scores, "the same batch");
        assertFalse(same(plain2.after(), kl.after()), "the KL term changed the update");
    }

    @Test
    void perAgentGradientNormsEqualASeparateBackward() {
        Step s = step(config("n", "trainer.grad_norm_per_agent=true"));
        RolloutBatch b = s.last().batch();
        float[] adv = s.last().adv().advantages();
        double measured = 0;
        try (CausalLm model = CausalLm.load(warm.resolve("policy"), org.bytedeco.pytorch.global.torch.ScalarType.Float,
                new org.bytedeco.pytorch.Device("cpu"))) {
            for (int a = 0; a < 2; a++) {
                List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
                List<Float> perToken = new ArrayList<>();
                for (int i = 0; i < b.rows(); i++) {
                    if (b.agent[i] != a) continue;
                    prompts.add(b.turn(i).promptIds());
                    responses.add(b.turn(i).responseIds());
                    for (int t = 0; t < b.turn(i).responseIds().length; t++) perToken.add(adv[i]);
                }
                if (perToken.isEmpty()) continue;
                float[] at = new float[perToken.size()];
                for (int i = 0; i < at.length; i++) at[i] = perToken.get(i);
                double norm;
                model.setRequiresGrad(true);
                try (PointerScope scope = new PointerScope()) {
                    // at the rollout policy the ratio is 1 and no clip is active: L = −Σ A·logp / tokens
                    Tensor lp = TeacherForcing.logProbs(model, prompts, responses, 1.5, false).logprobs();
                    Tensor loss = lp.mul(Tensors.floats(at)).sum().neg().div(new org.bytedeco.pytorch.Scalar((double) at.length));
                    loss.backward();
                    norm = GradNorm.of(model.parameters());
                }
                for (Tensor p : model.parameters().values()) if (p.grad().defined()) p.grad().zero_();
                model.setRequiresGrad(false);
                String id = a == 0 ? "solver" : "verifier";
                assertEquals(norm, s.metrics().get("agent/" + id + "/grad_norm"), 1e-4 * norm + 1e-7, id);
                measured = Math.max(measured, norm);
            }
        }
        assertTrue(measured > 0, "some agent has a gradient to measure");
    }

    static Float[] box(float[] a) {
        Float[] out = new Float[a.length];
        for (int i = 0; i < a.length; i++) out[i] = a[i];
        return out;
    }

    static double mean(double[] x) {
        return Arrays.stream(x).average().orElse(Double.NaN);
    }

    static double variance(double[] x, double mean) {
        double ss = 0;
        for (double v : x) ss += (v - mean) * (v - mean);
        return x.length > 1 ? ss / (x.length - 1) : 0;
    }

    static double populationVariance(double[] x, double mean) {
        double ss = 0;
        for (double v : x) ss += (v - mean) * (v - mean);
        return ss / x.length;
    }
}
