// PpoOracleTest.java — drmas's PPO update against an implementation that shares none of its code: HF
// transformers' own Qwen3 loaded from the folder drmas saved, verl's policy-loss formulas written out in
// Python (src/test/resources/dev/drmas/model/hf/ppo_oracle.py), torch autograd, clip_grad_norm_ and
// torch.optim.AdamW with drmas's warm-up. drmas runs PpoUpdater.update, the trainer's entry, on six rows of
// different prompt and response lengths with mixed-sign advantages: two epochs over the rows, so that the
// second epoch's steps are off-policy (the first moved the weights) and tokens clip on both sides, some
// dual-clipped; the oracle does the same from the same folder. Compared: the weights' changes, each step's
// gradient norm (mean and max) and the reported pg_loss, kl_loss, clipfrac, clipfrac_lower, ppo_kl, kl and
// entropy, over every loss_agg, dual clip on and off, each kl_type, the entropy bonus, an active grad clip,
// both LM heads (ppo.fused_lm_head), tied and untied embeddings, temperatures other than 1, warm-up and
// weight decay. A second test runs the update in bfloat16 and float16 (loss-scaled) with fp32 master weights
// (ModelOptimizer.create(mixed)) against the same recipe in torch (ppo_oracle.py: backward per micro-batch in
// the dtype, gradients added up and unscaled in fp32, clip and AdamW on fp32 masters, weights their
// rounding), comparing the masters' changes within the dtype's noise; it fails when the oracle keeps no
// masters, leaves the gradient scaled or keeps stale weights, not when it rounds the step's gradient sum to
// the dtype once (MixedPrecisionTest checks the fp32 sum). Tagged "hf"; skipped where DRMAS_HF_PYTHON is unset.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.Tolerance;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.Tensors;
import dev.drmas.testing.HfPython;
import dev.drmas.testing.TorchScope;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.function.Executable;
import org.junit.jupiter.api.io.TempDir;

@Tag("hf")
@ExtendWith(TorchScope.class)
class PpoOracleTest {
    /** A prime vocabulary, so that a transposed [V, H] head cannot pass for another tensor. */
    static final int VOCAB = 89;
    static final ObjectMapper JSON = new ObjectMapper();

    /** Prompt and response lengths of the six rows (all different), and their advantages (mixed signs, unequal). */
    static final int[] PROMPTS = {3, 6, 2, 5, 4, 3}, RESPONSES = {7, 2, 9, 4, 5, 3};
    static final float[] ADVANTAGES = {1.25f, -0.8f, 0.6f, -1.5f, 0.9f, -0.35f};

    /**
     * One configuration: the loss, the sampling temperature, the entropy bonus, grad_clip (0: off), the
     * Dr. GRPO constant, the mini-batch and micro-batch rows, the LM head, tied embeddings, the optimiser,
     * and what the case must exercise (checked on the oracle's counts, so that a case cannot silently stop
     * covering what it claims): grad clip active at the first step (the norm above grad_clip), tokens clipped on
     * both sides, dual-clipped ones.
     */
    record Case(String name, LossConfig loss, double temperature, double entropyCoef, double gradClip, double constant,
                int miniBatch, int microBatch, boolean fused, boolean tied, AdamW.Settings optim, boolean clipActive,
                boolean bothSides, boolean dual) {
        PpoUpdater.Settings settings() {
            return new PpoUpdater.Settings(EPOCHS, miniBatch, microBatch, temperature, entropyCoef, gradClip, loss, constant,
                    false, false, 0, fused, 0);
        }
    }

    static final int EPOCHS = 2;
    /** |Δ drmas − Δ hf| ≤ atol + rtol·|Δ hf|: atol a few float32 ulps of weights below 1 (the steps are up to ~2e-3). */
    static final double WEIGHT_ATOL = 1e-7, WEIGHT_RTOL = 1e-2;

    /**
     * AdamW's eps is as large as these gradients' typical entries (norms 2 to 20 over ~110k weights: ~1e-2
     * RMS), so that a step is not lr·sign(g) but grows with |g|: plain Adam would hide a wrong scale of the
     * loss from the weights (the gradient norms still show it). warmup 3 over 2 or 4 steps: lr/3, 2lr/3, (lr, lr).
     */
    static AdamW.Settings adam(double lr) {
        return new AdamW.Settings(lr, 0.9, 0.95, 1e-2, 0.1, 3);
    }

    /**
     * Each case's lr and clip range put a part of the second epoch's tokens past the clip bounds on both
     * sides (asymmetric bounds, so that swapping them shows) and leave the rest inside (the weights move a
     * lot per unit of lr here: drawn with std 0.15, the log-probs are steep). The dual clip's c = 1.1 is
     * reached by the last row's tokens (rows()).
     */
    static List<Case> cases() {
        LossConfig base = LossConfig.defaults();
        return List.of(
                new Case("token_mean_dual_clip", base.withClip(0.08, 0.15).withDualClip(1.1), 1.0, 0, 3.0, 1, 6, 2, false,
                        false, adam(0.0008), true, true, true),
                new Case("token_mean_fused_k3_entropy_t07_tied", base.withClip(0.1, 0.28).withKl(KlEstimator.K3, 0.3)
                        .withDualClip(1.1), 0.7, 0.02, 5.0, 1, 6, 2, true, true, adam(0.0008), true, true, true),
                new Case("seq_mean_token_sum_k1_entropy_no_dual_t13", base.withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM)
                        .withClip(0.05, 0.2).withKl(KlEstimator.K1, 0.2).withDualClip(0), 1.3, 0.2, 0, 1, 6, 4, false, false,
                        adam(0.0005), false, true, false),
                new Case("seq_mean_token_mean_fused_k2_entropy", base.withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN)
                        .withClip(0.1, 0.28).withKl(KlEstimator.K2, 0.5).withDualClip(1.1), 1.0, 0.05, 3.0, 1, 6, 2, true, false,
                        adam(0.002), true, true, true),
                new Case("seq_mean_token_sum_norm_fused_two_mini_batches_t08", base
                        .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM).withClip(0.1, 0.28).withDualClip(0), 0.8, 0, 0,
                        12, 3, 2, true, false, adam(0.0002), false, true, false));
    }

    @TempDir
    Path dir;

    @Test
    void oneUpdateMatchesTransformersWithVerlsFormulas() throws Exception {
        HfPython python = HfPython.require();
        List<PpoUpdater.Row> rows = rows();
        Map<Boolean, Path[]> folders = folders();
        Map<String, Map<String, float[]>> before = new LinkedHashMap<>(), after = new LinkedHashMap<>();
        Map<String, PpoUpdater.Stats> stats = new LinkedHashMap<>();
        Map<String, Double> lastLr = new LinkedHashMap<>();
        ObjectNode manifest = manifest(rows);
        ArrayNode caseList = manifest.putArray("cases");
        for (Case c : cases()) {
            Path[] f = folders.get(c.tied());
            try (CausalLm m = CausalLm.load(f[0]); CausalLm ref = CausalLm.load(f[1]); AdamW o = new AdamW(m.parameters(), c.optim())) {
                before.put(c.name(), PpoUpdaterTest.snapshot(m));
                stats.put(c.name(), new PpoUpdater(m, o, c.loss().usesReference() ? ref : null, c.settings()).update(rows, 3));
                after.put(c.name(), PpoUpdaterTest.snapshot(m));
                lastLr.put(c.name(), o.lastLr());
            }
            putCase(caseList, c, f, "float32", 0);
        }

        Path out = python.run("ppo_oracle.py", manifest, dir.resolve("oracle"));
        JsonNode report = JSON.readTree(out.resolve("report.json").toFile());
        List<Executable> checks = new ArrayList<>();
        StringBuilder summary = new StringBuilder();
        for (Case c : cases()) {
            checks.add(() -> {
                JsonNode hf = report.path("cases").path(c.name());
                PpoUpdater.Stats st = stats.get(c.name());
                String what = c.name() + " (transformers " + report.path("transformers").asText() + ", torch "
                        + report.path("torch").asText() + ")";
                // what the case claims to exercise
                JsonNode sides = hf.path("sides");
                assertEquals(c.tied(), hf.path("tied").asBoolean(), what + ": tied embeddings in transformers");
                if (c.bothSides()) {
                    assertTrue(sides.path("clipped_high").asInt() > 0 && sides.path("clipped_low").asInt() > 0,
                            what + ": tokens clipped on both sides, " + sides);
                }
                assertEquals(c.dual(), sides.path("dual_clipped").asInt() > 0, what + ": dual-clipped tokens, " + sides);
                assertEquals(c.clipActive(), c.gradClip() > 0 && hf.path("grad_norms").get(0).asDouble() > c.gradClip(),
                        what + ": grad clip active at the first step, norms " + hf.path("grad_norms"));

                int steps = hf.path("steps").asInt();
                assertEquals(steps, st.optimizerSteps(), what + ": optimiser steps");
                assertEquals(0, st.skippedSteps(), what + ": skipped steps");
                assertEquals(hf.path("tokens").asLong(), st.tokens(), what + ": response tokens");
                double tokens = st.tokens();
                JsonNode lrs = hf.path("lrs");
                Tolerance.assertClose(what + ": the last step's lr", new double[] {lastLr.get(c.name())},
                        new double[] {lrs.get(lrs.size() - 1).asDouble()}, 0, 1e-12);
                // the metrics: float32 log-probs on both sides, summed in different orders
                Tolerance.assertClose(what + ": grad norm mean, max",
                        new double[] {st.gradNormMean(), st.gradNormMax()},
                        new double[] {hf.path("grad_norm_mean").asDouble(), hf.path("grad_norm_max").asDouble()}, 1e-6, 2e-4);
                Tolerance.assertClose(what + ": pg_loss, kl_loss, ppo_kl, kl, entropy",
                        new double[] {st.pgLoss(), st.klLoss(), st.ppoKl(), st.kl(), st.entropy()},
                        new double[] {hf.path("pg_loss").asDouble(), hf.path("kl_loss").asDouble(), hf.path("ppo_kl").asDouble(),
                                hf.path("kl").asDouble(), hf.path("entropy").asDouble()}, 1e-5, 2e-4);
                // fractions of whole tokens: a token within rounding of a clip bound may fall either way
                Tolerance.assertClose(what + ": clipfrac, clipfrac_lower", new double[] {st.clipfrac(), st.clipfracLower()},
                        new double[] {hf.path("clipfrac").asDouble(), hf.path("clipfrac_lower").asDouble()}, 1.01 / tokens, 0);

                Agreement a = compareChanges(what + ": the change of ", before.get(c.name()), after.get(c.name()),
                        out.resolve(c.name() + ".safetensors"), WEIGHT_ATOL, WEIGHT_RTOL, Double.POSITIVE_INFINITY);
                synchronized (summary) {
                    summary.append(String.format("%n  %-50s steps %d, norms %s, clipfrac %.3f, lower %.3f, sides %s, "
                                    + "largest change %.3g, largest |Δ drmas − Δ hf| %.3g (%.0f%% of its tolerance)", c.name(), steps,
                            hf.path("grad_norms"), st.clipfrac(), st.clipfracLower(), sides, a.largest(), a.worst(), 100 * a.used()));
                }
            });
        }
        try {
            assertAll("drmas's PPO update vs transformers + verl's formulas", checks);
        } finally {
            System.out.println("PpoOracleTest:" + summary);
        }
    }

    /** The initial and reference folders, untied and tied: tied → {initial, reference}. */
    Map<Boolean, Path[]> folders() throws java.io.IOException {
        Map<Boolean, Path[]> folders = new LinkedHashMap<>();
        for (boolean tied : new boolean[] {false, true}) {
            Path init = dir.resolve(tied ? "init_tied" : "init"), ref = dir.resolve(tied ? "ref_tied" : "ref");
            ModelConfig cfg = ModelConfig.tiny(Family.QWEN3, VOCAB).withTiedEmbeddings(tied);
            try (CausalLm m = CausalLm.random(cfg, 7)) {
                spread(m, 11, 0.15, 0.3, false);  // away from the near-uniform init: peaked, unequal log-probs
                m.save(init);
                spread(m, 12, 0.05, 0.05, true);  // the reference: near the policy, not at it, so the KL is not 0
                m.save(ref);
            }
            folders.put(tied, new Path[] {init, ref});
        }

        return folders;
    }

    /**
     * A case in a reduced dtype with fp32 masters (models.id.dtype bfloat16 or float16, master_dtype float32:
     * ModelOptimizer.create(mixed)); float16 with a fixed loss scale.
     */
    record Mixed(Case c, ScalarType dtype, double lossScale) {
    }

    /**
     * The mixed-precision cases keep every token inside the clip bounds (a small lr, wide bounds: the oracle
     * counts none clipped, and the test checks it): in a reduced dtype the two sides' log-probs differ by its
     * rounding, and a token that one side clips and the other not changes whole rows of the embedding's
     * gradient. The clip itself is the float32 cases' to check.
     */
    static List<Mixed> mixedCases() {
        LossConfig base = LossConfig.defaults().withClip(0.3, 0.4).withDualClip(3);
        return List.of(
                new Mixed(new Case("bf16_token_mean_k3_entropy_micro2", base.withKl(KlEstimator.K3, 0.3), 1.0, 0.02, 3.0, 1,
                        6, 2, false, false, adam(0.0003), true, false, false), ScalarType.BFloat16, 0),
                new Mixed(new Case("bf16_seq_mean_token_mean_fused_tied_t07_micro3", base.withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN),
                        0.7, 0, 0, 1, 6, 3, true, true, adam(0.0003), false, false, false), ScalarType.BFloat16, 0),
                new Mixed(new Case("fp16_seq_mean_token_sum_norm_two_mini_batches_scaled", base
                        .withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM).withKl(KlEstimator.K2, 0.5), 1.0, 0, 0, 2, 3, 2,
                        false, false, adam(0.0001), false, false, false), ScalarType.Half, 1024),
                new Mixed(new Case("fp16_token_mean_fused_tied_entropy_scaled", base, 1.3, 0.05, 5.0, 1, 6, 2, true, true,
                        adam(0.0003), true, false, false), ScalarType.Half, 1024));
    }

    /**
     * |Δ drmas − Δ hf| of the masters ≤ atol + rtol·|Δ hf|. Both sides compute forward and backward in the
     * reduced dtype with different kernels and orders, so gradients differ by a few of its roundings; AdamW
     * turns that into a share of each step (eps 1e-2: a step grows with |g|). What the test must see is an
     * update of the masters by the fp32 sum of unscaled gradients: a step applied to the rounded weights, a
     * gradient left scaled, or masters not kept are off by whole steps.
     */
    /**
     * Per element: in bfloat16 the bound is about the largest change a master makes in these cases (lr 3e-4,
     * two steps), so there the norm bound below is the check that counts; in float16 it is ~8× the largest
     * difference measured.
     */
    static double masterAtol(ScalarType dtype) {
        return dtype == ScalarType.BFloat16 ? 2.5e-4 : 4e-5;
    }

    static final double MASTER_RTOL = 0.1;

    /**
     * ‖Δ drmas − Δ hf‖ ≤ this · ‖Δ hf‖ for each tensor's masters: the whole update's agreement, which the
     * few elements that rounding moves most (small gradients that cancel) hardly change. bfloat16 keeps 8
     * significant bits, float16 11.
     */
    static double masterNormRtol(ScalarType dtype) {
        return dtype == ScalarType.BFloat16 ? 0.1 : 0.02;
    }

    @Test
    void aMixedPrecisionUpdateMatchesTransformersWithFp32Masters() throws Exception {
        HfPython python = HfPython.require();
        List<PpoUpdater.Row> rows = rows();
        Map<Boolean, Path[]> folders = folders();
        Map<String, Map<String, float[]>> before = new LinkedHashMap<>(), after = new LinkedHashMap<>(), weights = new LinkedHashMap<>();
        Map<String, PpoUpdater.Stats> stats = new LinkedHashMap<>();
        ObjectNode manifest = manifest(rows);
        ArrayNode caseList = manifest.putArray("cases");
        Device cpu = new Device("cpu");
        for (Mixed mc : mixedCases()) {
            Case c = mc.c();
            Path[] f = folders.get(c.tied());
            try (CausalLm m = CausalLm.load(f[0], mc.dtype(), cpu); CausalLm ref = CausalLm.load(f[1], mc.dtype(), cpu);
                 ModelOptimizer o = ModelOptimizer.create(m.parameters(), c.optim(), true)) {
                if (mc.lossScale() > 0) o.useLossScaler(LossScaler.fixed(mc.lossScale()));
                before.put(c.name(), floats(o.masterWeights()));
                stats.put(c.name(), new PpoUpdater(m, o, c.loss().usesReference() ? ref : null, c.settings()).update(rows, 3));
                after.put(c.name(), floats(o.masterWeights()));
                weights.put(c.name(), floats(m.parameters()));
            }
            putCase(caseList, c, f, CausalLm.dtypeName(mc.dtype()), mc.lossScale());
        }

        Path out = python.run("ppo_oracle.py", manifest, dir.resolve("oracle"));
        JsonNode report = JSON.readTree(out.resolve("report.json").toFile());
        List<Executable> checks = new ArrayList<>();
        StringBuilder summary = new StringBuilder();
        for (Mixed mc : mixedCases()) {
            Case c = mc.c();
            checks.add(() -> {
                JsonNode hf = report.path("cases").path(c.name());
                PpoUpdater.Stats st = stats.get(c.name());
                String what = c.name() + " (transformers " + report.path("transformers").asText() + ", torch "
                        + report.path("torch").asText() + ")";
                JsonNode sides = hf.path("sides");
                assertEquals(0, sides.path("clipped_high").asInt() + sides.path("clipped_low").asInt() + sides.path("dual_clipped").asInt(),
                        what + ": no token at a clip bound (mixedCases), " + sides);
                assertEquals(c.clipActive(), c.gradClip() > 0 && hf.path("grad_norms").get(0).asDouble() > c.gradClip(),
                        what + ": grad clip active at the first step, norms " + hf.path("grad_norms"));
                assertEquals(c.tied(), hf.path("tied").asBoolean(), what + ": tied embeddings in transformers");
                assertEquals(hf.path("steps").asInt(), st.optimizerSteps(), what + ": optimiser steps");
                assertEquals(0, st.skippedSteps(), what + ": skipped steps");
                assertEquals(hf.path("tokens").asLong(), st.tokens(), what + ": response tokens");
                Tolerance.assertClose(what + ": grad norm mean, max", new double[] {st.gradNormMean(), st.gradNormMax()},
                        new double[] {hf.path("grad_norm_mean").asDouble(), hf.path("grad_norm_max").asDouble()}, 1e-3, 0.05);
                Tolerance.assertClose(what + ": pg_loss, kl_loss, entropy", new double[] {st.pgLoss(), st.klLoss(), st.entropy()},
                        new double[] {hf.path("pg_loss").asDouble(), hf.path("kl_loss").asDouble(), hf.path("entropy").asDouble()},
                        2e-3, 0.05);
                Agreement a = compareChanges(what + ": the change of master ", before.get(c.name()), after.get(c.name()),
                        out.resolve(c.name() + ".masters.safetensors"), masterAtol(mc.dtype()), MASTER_RTOL, masterNormRtol(mc.dtype()));
                // drmas's weights are its masters rounded to the dtype
                for (Map.Entry<String, float[]> e : after.get(c.name()).entrySet()) {
                    float[] mine = e.getValue(), w1 = weights.get(c.name()).get(e.getKey());
                    for (int i = 0; i < mine.length; i++) {
                        float r = roundTo(mine[i], mc.dtype());
                        if (Float.floatToIntBits(r) != Float.floatToIntBits(w1[i])) {
                            throw new AssertionError(what + ": weight " + e.getKey() + "[" + i + "] " + w1[i] + " is not its master "
                                    + mine[i] + " rounded (" + r + ")");
                        }
                    }
                }
                synchronized (summary) {
                    summary.append(String.format("%n  %-52s steps %d, norms %s (hf) vs mean %.4g max %.4g, largest master change %.3g, "
                                    + "largest |Δ drmas − Δ hf| %.3g (%.0f%% of its tolerance), largest ‖Δ drmas − Δ hf‖ / ‖Δ hf‖ of a "
                                    + "tensor %.3g", c.name(), hf.path("steps").asInt(),
                            hf.path("grad_norms"), st.gradNormMean(), st.gradNormMax(), a.largest(), a.worst(), 100 * a.used(), a.worstRel()));
                }
            });
        }
        try {
            assertAll("drmas's mixed-precision PPO update vs transformers with fp32 masters", checks);
        } finally {
            System.out.println("PpoOracleTest (mixed precision):" + summary);
        }
    }

    /** The manifest's rows (prompt, response, advantage) of both tests; each adds its "cases". */
    static ObjectNode manifest(List<PpoUpdater.Row> rows) {
        ObjectNode manifest = JSON.createObjectNode();
        ArrayNode rowList = manifest.putArray("rows");
        for (PpoUpdater.Row r : rows) {
            ObjectNode n = rowList.addObject();
            n.set("prompt", JSON.valueToTree(r.promptIds()));
            n.set("response", JSON.valueToTree(r.responseIds()));
            n.put("advantage", (double) r.advantage());
        }
        return manifest;
    }

    /**
     * How drmas's changes agreed with the oracle's: the largest |Δ drmas − Δ hf|, its largest share of the
     * tolerance, the largest |Δ hf|, the largest ‖Δ drmas − Δ hf‖ / ‖Δ hf‖ of a tensor.
     */
    record Agreement(double worst, double used, double largest, double worstRel) {
    }

    /**
     * Asserts, per tensor, that drmas's changes from {@code before} to {@code after} are the oracle's (its
     * tensors in {@code file}, the same names) within atol + rtol·|Δ hf| per element and normRtol·‖Δ hf‖ in
     * norm: the changes, not the values, which are ~100× larger than a step.
     */
    static Agreement compareChanges(String what, Map<String, float[]> before, Map<String, float[]> after, Path file, double atol,
                                    double rtol, double normRtol) {
        double worst = 0, used = 0, largest = 0, worstRel = 0;
        try (SafeTensors w = SafeTensors.open(file)) {
            assertEquals(after.keySet(), w.tensors().keySet(), what + "the parameters");
            for (Map.Entry<String, float[]> e : after.entrySet()) {
                float[] x0 = before.get(e.getKey()), mine = e.getValue(), theirs;
                try (PointerScope scope = new PointerScope()) {
                    theirs = Tensors.toFloats(w.get(e.getKey(), ScalarType.Float, new Device("cpu")));
                }
                double[] dm = new double[x0.length], dt = new double[x0.length];
                double dd = 0, tt = 0;
                for (int i = 0; i < x0.length; i++) {
                    dm[i] = (double) mine[i] - x0[i];
                    dt[i] = (double) theirs[i] - x0[i];
                    worst = Math.max(worst, Math.abs(dm[i] - dt[i]));
                    used = Math.max(used, Math.abs(dm[i] - dt[i]) / (atol + rtol * Math.abs(dt[i])));
                    largest = Math.max(largest, Math.abs(dt[i]));
                    dd += (dm[i] - dt[i]) * (dm[i] - dt[i]);
                    tt += dt[i] * dt[i];
                }
                double rel = tt > 0 ? Math.sqrt(dd / tt) : dd == 0 ? 0 : Double.POSITIVE_INFINITY;
                worstRel = Math.max(worstRel, rel);
                assertTrue(rel <= normRtol, what + e.getKey() + ": ‖Δ drmas − Δ hf‖ is " + rel + " of ‖Δ hf‖ (at most " + normRtol + ")");
                Tolerance.assertClose(what + e.getKey(), dm, dt, atol, rtol);
            }
        }
        return new Agreement(worst, used, largest, worstRel);
    }

    /** Each tensor as float32 values. */
    static Map<String, float[]> floats(Map<String, Tensor> tensors) {
        Map<String, float[]> out = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            tensors.forEach((k, t) -> out.put(k, Tensors.toFloats(t.to(ScalarType.Float))));
        }
        return out;
    }

    /** {@code x} rounded to {@code dtype} (round to nearest even, as LibTorch's conversion), back in float32. */
    static float roundTo(float x, ScalarType dtype) {
        try (PointerScope scope = new PointerScope()) {
            return Tensors.toFloats(Tensors.floats(new float[] {x}).to(dtype).to(ScalarType.Float))[0];
        }
    }

    /** The oracle's settings of case {@code c} from folders {@code f} (initial, reference), in {@code dtype} with loss scale {@code scale} (0: none). */
    static void putCase(ArrayNode caseList, Case c, Path[] f, String dtype, double scale) {
        ObjectNode n = caseList.addObject();
        n.put("name", c.name());
        n.put("init", f[0].toString());
        n.put("ref", f[1].toString());
        n.put("dtype", dtype);
        n.put("loss_scale", scale);
        n.put("micro_batch", c.microBatch());
        n.put("temperature", c.temperature());
        n.put("entropy_coef", c.entropyCoef());
        n.put("grad_clip", c.gradClip());
        n.put("clip_low", c.loss().clipLow());
        n.put("clip_high", c.loss().clipHigh());
        n.put("dual_clip", c.loss().dualClip());
        n.put("kl_type", c.loss().kl().configName());
        n.put("kl_coef", c.loss().klCoef());
        n.put("loss_agg", c.loss().aggregation().configName());
        n.put("constant", c.constant());
        n.put("epochs", EPOCHS);
        n.put("mini_batch", c.miniBatch());
        n.put("lr", c.optim().lr());
        n.put("beta1", c.optim().beta1());
        n.put("beta2", c.optim().beta2());
        n.put("eps", c.optim().eps());
        n.put("weight_decay", c.optim().weightDecay());
        n.put("warmup_steps", c.optim().warmupSteps());
    }

    /** Six rows of random ids (seeded) of the lengths above. */
    static List<PpoUpdater.Row> rows() {
        SplittableRandom r = new SplittableRandom(5);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (int i = 0; i < PROMPTS.length; i++) {
            int[] p = r.ints(PROMPTS[i], 0, VOCAB).toArray(), a = r.ints(RESPONSES[i], 0, VOCAB).toArray();
            rows.add(new PpoUpdater.Row(p, a, ADVANTAGES[i]));
        }
        // the last row, A < 0, is another sample of the first row's prompt that begins as the first's
        // response does (as a group's samples often do): the first row's larger positive advantage raises
        // these tokens in the first step, so that the second step sees them at ratios above the dual clip's c
        PpoUpdater.Row first = rows.get(0);
        rows.set(5, new PpoUpdater.Row(first.promptIds(), java.util.Arrays.copyOf(first.responseIds(), RESPONSES[5]), ADVANTAGES[5]));
        return rows;
    }

    /**
     * Draws the weights anew (or, with {@code add}, adds to them): N(0, std) for matrices, 1 + N(0, normStd)
     * (or + N(0, normStd)) for the RMSNorm weights.
     */
    static void spread(CausalLm m, long seed, double std, double normStd, boolean add) {
        SplittableRandom r = new SplittableRandom(seed);
        try (PointerScope scope = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
            Map<String, long[]> shapes = CausalLm.parameterShapes(m.config());
            for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                Tensor p = e.getValue();
                float[] a = add ? Tensors.toFloats(p) : new float[(int) p.numel()];
                boolean norm = e.getKey().endsWith("norm.weight");
                for (int i = 0; i < a.length; i++) a[i] += (float) ((norm && !add ? 1 : 0) + r.nextGaussian() * (norm ? normStd : std));
                p.copy_(Tensors.floats(a).reshape(shapes.get(e.getKey())));
            }
        }
    }
}
