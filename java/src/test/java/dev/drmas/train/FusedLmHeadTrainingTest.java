// FusedLmHeadTrainingTest.java — ppo.fused_lm_head through the trainer: one micro-batch step of a
// real model (the fused LM head against TeacherForcing's materialised logits + the native clipped
// loss + the entropy bonus) leaves the same gradient on every parameter, for every family, tied and
// untied heads, with and without activation checkpointing, with a KL term; a PPO update lands on the
// same weights, under a vocabulary limit too (the head's rows past it untouched); and, in Liger's
// manner, 10 steps of the toy math run from a short warm start give the same losses at every step
// and the same final weights with the key on and off.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import dev.drmas.algo.FusedLmHead;
import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

class FusedLmHeadTrainingTest {
    static final int VOCAB = ActivationCheckpointingTest.VOCAB;  // 61: not a multiple of 8
    static final double ATOL = 1e-5, RTOL = 1e-4;

    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    static Stream<Arguments> models() {
        List<Arguments> out = new ArrayList<>();
        for (Family f : Family.values()) {
            for (boolean tied : new boolean[] {true, false}) {
                for (boolean ckpt : new boolean[] {false, true}) {
                    out.add(Arguments.of(f + (tied ? " tied" : " untied") + (ckpt ? " checkpointed" : ""),
                            ModelConfig.tiny(f, VOCAB).withTiedEmbeddings(tied), ckpt));
                }
            }
        }
        return out.stream();
    }

    /** Loss sums and every parameter's gradient after one micro-batch step, fused or materialised. */
    record Step(double[] sums, Map<String, float[]> grads) {
    }

    static Step step(ModelConfig cfg, boolean checkpointing, boolean fused, int chunk) {
        List<int[]> prompts = ActivationCheckpointingTest.PROMPTS, responses = ActivationCheckpointingTest.RESPONSES;
        LossConfig loss = LossConfig.defaults().withKl(KlEstimator.K2, 0.1).withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        double temperature = 0.8, entCoef = 0.01;
        try (CausalLm m = CausalLm.random(cfg, 11); PointerScope scope = new PointerScope()) {
            m.setActivationCheckpointing(checkpointing);
            m.setRequiresGrad(true);
            long[] off = new long[prompts.size() + 1];
            for (int r = 0; r < prompts.size(); r++) off[r + 1] = off[r] + responses.get(r).length;
            int n = (int) off[prompts.size()];
            float[] lp0;
            try (PointerScope s = new PointerScope(); org.bytedeco.pytorch.NoGradGuard ng = new org.bytedeco.pytorch.NoGradGuard()) {
                lp0 = Tensors.toFloats(TeacherForcing.logProbs(m, prompts, responses, temperature, false).logprobs());
            }
            SplittableRandom rng = new SplittableRandom(5);
            float[] old = new float[n], ref = new float[n], advRow = new float[prompts.size()];
            for (int r = 0; r < advRow.length; r++) advRow[r] = (float) (rng.nextDouble() * 4 - 2);
            for (int i = 0; i < n; i++) {
                old[i] = lp0[i] + (float) (rng.nextDouble() * 0.6 - 0.3);
                ref[i] = lp0[i] + (float) (rng.nextDouble() * 0.6 - 0.3);
            }
            double normalizer = loss.aggregation().normalizer(n, prompts.size(), 1);
            double[] sums;
            if (fused) {
                TeacherForcing.Hidden hd = TeacherForcing.responseHidden(m, prompts, responses);
                FusedLmHead.Update u = FusedLmHead.lossAndBackward(hd.hidden(), m.lmHeadWeight(), hd.targets(), temperature, loss,
                        normalizer, entCoef / n, off, Tensors.floats(old), advRow, Tensors.floats(ref), null, chunk);
                hd.pending().finishBackward();
                sums = java.util.Arrays.copyOf(u.sums(), AbiIndices.LOSS_SUMS);
            } else {
                TeacherForcing.Result tf = TeacherForcing.logProbs(m, prompts, responses, temperature, true);
                PpoUpdater.LossOut lo = PpoUpdater.NATIVE.apply(loss, normalizer, off, Tensors.longs(off), tf.logprobs(),
                        Tensors.floats(old), Tensors.floats(advRow), Tensors.floats(ref));
                lo.surrogate().sub(tf.entropy().sum().mul(new Scalar(entCoef / n))).backward();
                tf.finishBackward();
                sums = new double[AbiIndices.LOSS_SUMS];
                lo.deviceSums().data_ptr_double().get(sums);
            }
            Map<String, float[]> grads = new LinkedHashMap<>();
            m.parameters().forEach((k, t) -> {
                if (!t.grad().defined()) fail(k + " has no gradient (fused " + fused + ")");
                grads.put(k, Tensors.toFloats(t.grad()));
            });
            return new Step(sums, grads);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void fusedGradientsEqualTheMaterialisedOnes(String name, ModelConfig cfg, boolean checkpointing) {
        Step want = step(cfg, checkpointing, false, 0);
        for (int chunk : new int[] {5, 1024}) {  // 5 does not divide the 12 tokens; 1024 > N
            Step got = step(cfg, checkpointing, true, chunk);
            for (int k = 0; k < AbiIndices.LOSS_SUMS; k++) {
                assertEquals(want.sums()[k], got.sums()[k], ATOL + RTOL * Math.abs(want.sums()[k]), name + " chunk " + chunk + " sums[" + k + "]");
            }
            ActivationCheckpointingTest.assertClose(want.grads(), got.grads(), ATOL, RTOL);
        }
        // the head's gradient (the embedding's when tied) is not ~0: something was compared
        float[] g = want.grads().get(cfg.tieWordEmbeddings() ? "model.embed_tokens.weight" : "lm_head.weight");
        double max = 0;
        for (float v : g) max = Math.max(max, Math.abs(v));
        assertTrue(max > 1e-4, "LM head gradient ~0: " + max);
    }

    /**
     * The two paths' gradients differ by rounding; Adam's eps = 1e-3 keeps that rounding from being
     * scaled up to lr-sized steps where a gradient is near zero (as PpoUpdaterTest's micro-batching test).
     */
    static final AdamW.Settings OPT = new AdamW.Settings(3e-3, 0.9, 0.999, 1e-3, 0.01, 0);

    @Test
    void aPpoUpdateWithTheFusedHeadLandsOnTheSameWeights() {
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        LossConfig loss = LossConfig.defaults().withKl(KlEstimator.K3, 0.05);
        PpoUpdater.Settings plainS = new PpoUpdater.Settings(2, 5, 2, 0.9, 0.01, 1.0, loss, 8, true, true, 0, false);
        PpoUpdater.Settings fusedS = new PpoUpdater.Settings(2, 5, 2, 0.9, 0.01, 1.0, loss, 8, true, true, 0, true);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(7, 10)) {
            rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), r.advantage(), rows.size() % 2));
        }
        Map<String, float[]> initial, plain, fused;
        PpoUpdater.Stats a, b;
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5); CausalLm ref = CausalLm.random(cfg, 6);
             AdamW o1 = new AdamW(m1.parameters(), OPT); AdamW o2 = new AdamW(m2.parameters(), OPT)) {
            initial = PpoUpdaterTest.snapshot(m1);
            a = new PpoUpdater(m1, o1, ref, plainS).update(rows, 42);
            b = new PpoUpdater(m2, o2, ref, fusedS).update(rows, 42);
            plain = PpoUpdaterTest.snapshot(m1);
            fused = PpoUpdaterTest.snapshot(m2);
        }
        assertEquals(a.optimizerSteps(), b.optimizerSteps());
        assertEquals(a.pgLoss(), b.pgLoss(), 1e-5 + 1e-4 * Math.abs(a.pgLoss()), "pg_loss");
        assertEquals(a.kl(), b.kl(), 1e-5 + 1e-4 * Math.abs(a.kl()), "kl");
        assertEquals(a.entropy(), b.entropy(), 1e-5 + 1e-4 * Math.abs(a.entropy()), "entropy");
        assertEquals(a.clipfrac(), b.clipfrac(), 1e-9, "clipfrac");
        for (var e : a.agentGradNorms().entrySet()) {
            assertEquals(e.getValue(), b.agentGradNorms().get(e.getKey()), 1e-5 + 1e-4 * e.getValue(), "agent " + e.getKey() + " grad norm");
        }
        ActivationCheckpointingTest.assertClose(plain, fused, 1e-5, 1e-4);
        // the weights moved: equal weights mean something
        double moved = 0;
        for (String k : initial.keySet()) {
            for (int i = 0; i < initial.get(k).length; i++) moved = Math.max(moved, Math.abs(plain.get(k)[i] - initial.get(k)[i]));
        }
        assertTrue(moved > 1e-3, "the update did not move the weights: " + moved);
    }

    /**
     * Under a vocabulary limit (a head padded past its tokenizer) both heads score over the ids below
     * it: the same update, and the head's rows past the limit get no gradient (weight decay 0, so a
     * row without gradient keeps its value); the entropy is at most that of the limited vocabulary.
     */
    @Test
    void underAVocabularyLimitBothHeadsLeaveTheRowsPastItAlone() {
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);  // an untied head
        int limit = VOCAB - 8;
        AdamW.Settings noDecay = new AdamW.Settings(3e-3, 0.9, 0.999, 1e-3, 0.0, 0);
        LossConfig loss = LossConfig.defaults().withKl(KlEstimator.K3, 0.05);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(7, 10)) {
            int[] a = r.responseIds().clone();
            for (int j = 0; j < a.length; j++) a[j] %= limit;  // tokens the engine could sample
            rows.add(new PpoUpdater.Row(r.promptIds(), a, r.advantage(), rows.size() % 2));
        }
        Map<String, float[]> initial = null, plain = null;
        for (boolean fusedHead : new boolean[] {false, true}) {
            PpoUpdater.Settings s = new PpoUpdater.Settings(2, 5, 2, 0.9, 0.01, 1.0, loss, 8, false, true, 0, fusedHead);
            try (CausalLm m = CausalLm.random(cfg, 5); CausalLm ref = CausalLm.random(cfg, 6); AdamW o = new AdamW(m.parameters(), noDecay)) {
                if (initial == null) initial = PpoUpdaterTest.snapshot(m);
                PpoUpdater.Stats st = new PpoUpdater(m, o, ref, s).vocabLimit(limit).update(rows, 42);
                assertTrue(st.entropy() <= Math.log(limit) + 1e-5, "entropy " + st.entropy() + " over " + limit + " ids");
                Map<String, float[]> w = PpoUpdaterTest.snapshot(m);
                float[] head0 = initial.get("lm_head.weight"), head = w.get("lm_head.weight");
                int cut = limit * cfg.hiddenSize();
                assertArrayEquals(java.util.Arrays.copyOfRange(head0, cut, head0.length), java.util.Arrays.copyOfRange(head, cut, head.length),
                        "fused " + fusedHead + ": the head's rows past the limit");
                double moved = 0;
                for (int i = 0; i < cut; i++) moved = Math.max(moved, Math.abs(head[i] - head0[i]));
                assertTrue(moved > 1e-3, "fused " + fusedHead + ": the rows below the limit did not move: " + moved);
                if (plain == null) plain = w;
                else ActivationCheckpointingTest.assertClose(plain, w, 1e-5, 1e-4);
            }
        }
    }

    @Test
    void theConfigKeyReachesTheUpdateAndIsOnByDefault() {
        PpoUpdater.Settings off = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, List.of("ppo.fused_lm_head=false")), 1.0);
        PpoUpdater.Settings on = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, List.of()), 1.0);
        assertFalse(off.fusedLmHead());
        assertTrue(on.fusedLmHead(), "on by default");
        assertEquals(new PpoUpdater.Settings(off.epochs(), off.miniBatchRows(), off.microBatchRows(), off.temperature(), off.entropyCoef(),
                off.gradClip(), off.loss(), off.constantNormalizer(), off.gradNormPerAgent(), off.shuffle(), off.maxTokensPerMicroBatch(),
                true), on, "the key changes that field and nothing else");
        assertThrows(RuntimeException.class, () -> RunConfig.parse(TrainerEndToEndTest.YAML, List.of("ppo.fused_lm_head=maybe")));
    }

    /**
     * Liger's convergence test: the toy math run, fused and materialised, step by step (Adam's eps
     * 1e-3 for the reason of {@link #OPT}). Ten steps: the two heads round differently, and sampling
     * turns a rounding difference into another rollout sooner or later, after which the runs part for
     * good. From one warm start the runs stayed within 2e-4 for 20 steps; from another (the warm start's
     * tasks in another order) they stayed within 1e-4 for 16 steps and parted at step 17 (pg_loss 2.8%
     * apart, then the rewards). A wrong gradient differs by far more from step 1. Where the runs part
     * is a property of the CPU's kernels (another host rounds otherwise), so the update's figures are
     * compared at the steps whose rollouts were the same (their rollout figures bit for bit), at least
     * three of them, and the weights when all ten were.
     */
    @Test
    void tenStepsOfTheToyRunGiveTheSameLossesAndWeights() throws Exception {
        // the warm start of LearningTest: rows then score differently and advantages are not all 0
        RunConfig sft = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp, "run.name=warm", "sft.steps=200",
                "sft.batch_size=8", "sft.lr=5.0e-3", "sft.correct_prob=0.5", "run.resume=never"));
        try (Trainer t = Trainer.open(sft, TrainerEndToEndTest.QUIET)) {
            t.sft();
        }
        Path warm = tmp.resolve("warm").resolve("sft").resolve("models");
        Map<String, float[]> wPlain = new LinkedHashMap<>(), wFused = new LinkedHashMap<>();
        List<JsonNode> plain = run(tmp.resolve("plain"), warm, false, wPlain), fused = run(tmp.resolve("fused"), warm, true, wFused);
        assertEquals(plain.size(), fused.size());
        int compared = 0, steps = 0, parted = -1;
        double maxAbsPg = 0;
        StringBuilder seen = new StringBuilder();
        for (int i = 0; i < plain.size(); i++) {
            JsonNode p = plain.get(i), f = fused.get(i);
            if (!p.has("model/policy/pg_loss")) continue;
            steps++;
            assertEquals(p.get("step").asInt(), f.get("step").asInt());
            if (parted < 0 && !rolloutFigures(p).equals(rolloutFigures(f))) parted = p.get("step").asInt();
            if (parted >= 0) continue;
            for (String key : List.of("model/policy/pg_loss", "model/policy/entropy", "model/policy/ppo_kl", "model/policy/grad_norm")) {
                double want = p.get(key).asDouble(), got = f.get(key).asDouble();
                // the relative differences seen in the first ten steps: ~1e-7 to 3e-5
                assertEquals(want, got, 1e-5 + 1e-4 * Math.abs(want), "step " + p.get("step") + " " + key);
            }
            maxAbsPg = Math.max(maxAbsPg, Math.abs(p.get("model/policy/pg_loss").asDouble()));
            seen.append(String.format(" %s:%.3g/%.3g/%.3g", p.get("step"), p.get("model/policy/pg_loss").asDouble(),
                    p.get("model/policy/grad_norm").asDouble(), p.get("reward/mean").asDouble()));
            compared++;
        }
        assertEquals(10, steps, "a pg_loss per step");
        assertTrue(compared >= 3, "the runs' rollouts parted at step " + parted + ": too soon to compare their updates" + seen);
        assertTrue(maxAbsPg > 1e-4, "the losses were ~0 at every step (no advantages): nothing was compared; step:pg/grad_norm/reward" + seen);
        if (parted < 0) {
            ActivationCheckpointingTest.assertClose(wPlain, wFused, 1e-5, 1e-4);
        } else {
            System.out.println("FusedLmHeadTrainingTest: the runs' rollouts parted at step " + parted + "; the updates of steps 1-"
                    + compared + " agreed; the weights are not compared");
        }
    }

    /** What a step's metrics say of its rollouts alone (sampled before its update): the same rollouts give the same bits. */
    private static Map<String, String> rolloutFigures(JsonNode step) {
        Map<String, String> out = new java.util.TreeMap<>();
        step.fields().forEachRemaining(e -> {
            String k = e.getKey();
            boolean rollout = k.equals("reward/mean") || k.startsWith("verifier/") || k.startsWith("agent/")
                    && List.of("rows", "score_mean", "score_std", "valid_ratio", "response_len", "response_clipped", "mu")
                    .contains(k.substring(k.lastIndexOf('/') + 1));
            if (rollout) out.put(k, e.getValue().asText());
        });
        assertTrue(out.containsKey("reward/mean") && out.keySet().stream().anyMatch(k -> k.endsWith("/response_len")), "rollout figures: " + out);
        return out;
    }

    private List<JsonNode> run(Path out, Path warm, boolean fused, Map<String, float[]> weights) throws Exception {
        RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + out, "+run.warm_start=" + warm,
                "trainer.steps=10", "trainer.eval_freq=0", "trainer.save_freq=0", "rollout.rollouts_per_task=4",
                "rollout.temperature=1.5", "rollout.max_new_tokens=20", "run.resume=never", "models.policy.optim.eps=1.0e-3",
                "ppo.fused_lm_head=" + fused));
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            t.train();
            try (PointerScope scope = new PointerScope()) {
                t.policiesForTest().get("policy").model().parameters().forEach((k, v) -> weights.put(k, Tensors.toFloats(v)));
            }
        }
        return TrainerEndToEndTest.metrics(out.resolve("e2e"));
    }
}
