// ActivationCheckpointingTest.java — models.<id>.activation_checkpointing: a checkpointed training
// forward (layers run without autograd, recomputed in the backward pass) gives the gradients of the
// plain one, through the trainer's own path (TeacherForcing, the native clipped loss, the entropy
// bonus), for every family, tied and untied heads, rows of different lengths; a PPO update and a
// warm start land on the same weights with it on and off; and the config key reaches the models.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
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

class ActivationCheckpointingTest {
    static final int VOCAB = 61;
    static final double ATOL = 1e-5, RTOL = 1e-4;

    @TempDir
    Path tmp;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** Qwen2 (q/k/v biases), Qwen3 (q/k norms), Llama (llama3 rope scaling, and once with every bias), tied and untied. */
    static Stream<Arguments> models() {
        List<Arguments> out = new ArrayList<>();
        for (Family f : Family.values()) {
            for (boolean tied : new boolean[] {true, false}) {
                out.add(Arguments.of(f + (tied ? " tied" : " untied"), ModelConfig.tiny(f, VOCAB).withTiedEmbeddings(tied)));
            }
        }
        ModelConfig l = ModelConfig.tiny(Family.LLAMA, VOCAB);
        out.add(Arguments.of("LLAMA with attention and mlp biases", new ModelConfig(l.family(), l.hiddenSize(), l.intermediateSize(),
                l.numLayers(), l.numHeads(), l.numKvHeads(), l.headDim(), l.rmsNormEps(), l.ropeTheta(), l.ropeScaling(), VOCAB, false,
                true, true, l.maxPositionEmbeddings(), "float32", null, List.of(), Map.of())));
        return out.stream();
    }

    /** Rows of different prompt and response lengths (one response empty), so the batch is right-padded. */
    static final List<int[]> PROMPTS = List.of(new int[] {3, 1, 4}, new int[] {1, 5, 9, 2, 6, 5, 3}, new int[] {5},
            new int[] {8, 9, 7, 9, 3});
    static final List<int[]> RESPONSES = List.of(new int[] {2, 3, 8, 4}, new int[] {}, new int[] {6, 2, 6, 4, 3, 3},
            new int[] {8, 3});

    /** What one forward and backward left: log-probs, entropies, the loss sums, and every parameter's gradient. */
    record Pass(float[] logprobs, float[] entropy, double[] lossSums, Map<String, float[]> grads) {
    }

    /**
     * The trainer's micro-batch step on a fresh model of {@code cfg}: TeacherForcing, the native
     * clipped loss against perturbed old log-probs, the entropy bonus, backward, finishBackward.
     */
    static Pass forwardBackward(ModelConfig cfg, boolean checkpointing) {
        return forwardBackward(cfg, checkpointing, true, PROMPTS, RESPONSES);
    }

    /** As above, the right-padded batch's attention causal (the default) or masked, over the given rows. */
    static Pass forwardBackward(ModelConfig cfg, boolean checkpointing, boolean causal, List<int[]> prompts, List<int[]> responses) {
        try (CausalLm m = CausalLm.random(cfg, 11); PointerScope scope = new PointerScope()) {
            m.setActivationCheckpointing(checkpointing);
            m.rightPaddedAsCausal(causal);
            m.setRequiresGrad(true);
            TeacherForcing.Result tf = TeacherForcing.logProbs(m, prompts, responses, 0.8, true);
            long[] off = tf.offsets();
            int n = (int) off[off.length - 1];
            SplittableRandom rng = new SplittableRandom(5);
            float[] shift = new float[n], adv = new float[off.length - 1];  // one advantage per row
            for (int i = 0; i < n; i++) shift[i] = (float) (rng.nextDouble() * 0.6 - 0.3);  // some ratios outside the clip range
            for (int r = 0; r < adv.length; r++) adv[r] = (float) (rng.nextDouble() * 4 - 2);
            Tensor old = tf.logprobs().detach().add(Tensors.floats(shift));
            PpoUpdater.LossOut loss = PpoUpdater.NATIVE.apply(LossConfig.defaults(), n, off, Tensors.longs(off), tf.logprobs(), old,
                    Tensors.floats(adv), null);
            Tensor surrogate = loss.surrogate().sub(tf.entropy().sum().mul(new Scalar(0.01 / n)));
            surrogate.backward();
            assertEquals(checkpointing, tf.pending().checkpointed());
            if (checkpointing) {
                // the caller's backward reached the final norm, not the layers: the checkpointed path really ran
                assertTrue(m.parameters().get("model.norm.weight").grad().defined());
                assertFalse(m.parameters().get("model.layers.0.mlp.down_proj.weight").grad().defined(),
                        "a layer has a gradient before finishBackward: the layers were not checkpointed");
            }
            tf.finishBackward();
            Map<String, float[]> grads = new LinkedHashMap<>();
            m.parameters().forEach((k, t) -> {
                if (!t.grad().defined()) fail(k + " has no gradient (checkpointing " + checkpointing + ")");
                grads.put(k, Tensors.toFloats(t.grad()));
            });
            double[] sums = new double[(int) loss.deviceSums().numel()];
            loss.deviceSums().data_ptr_double().get(sums);
            return new Pass(Tensors.toFloats(tf.logprobs()), Tensors.toFloats(tf.entropy()), sums, grads);
        }
    }

    /** |got − want| ≤ atol + rtol·|want| for every element, naming the first mismatches. */
    static void assertClose(Map<String, float[]> want, Map<String, float[]> got, double atol, double rtol) {
        assertEquals(want.keySet(), got.keySet());
        StringBuilder bad = new StringBuilder();
        int mismatches = 0;
        for (String k : want.keySet()) {
            float[] w = want.get(k), g = got.get(k);
            assertEquals(w.length, g.length, k);
            for (int i = 0; i < w.length; i++) {
                if (!(Math.abs(g[i] - w[i]) <= atol + rtol * Math.abs(w[i])) && mismatches++ < 10) {
                    bad.append(String.format("%n  %s[%d]: %.9g, want %.9g", k, i, g[i], w[i]));
                }
            }
        }
        assertEquals(0, mismatches, mismatches + " elements outside atol " + atol + " + rtol " + rtol + ":" + bad);
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("models")
    void checkpointedGradientsEqualThePlainOnes(String name, ModelConfig cfg) {
        Pass plain = forwardBackward(cfg, false), ckpt = forwardBackward(cfg, true);
        // the forward is the same computation either way
        assertArrayEquals(plain.logprobs(), ckpt.logprobs(), "log-probs");
        assertArrayEquals(plain.entropy(), ckpt.entropy(), "entropy");
        assertArrayEquals(plain.lossSums(), ckpt.lossSums(), "loss sums");
        assertClose(plain.grads(), ckpt.grads(), ATOL, RTOL);
        // equal gradients mean something only if they are not all zero: every layer got one
        for (int l = 0; l < cfg.numLayers(); l++) {
            float[] g = plain.grads().get("model.layers." + l + ".mlp.up_proj.weight");
            double max = 0;
            for (float v : g) max = Math.max(max, Math.abs(v));
            assertTrue(max > 1e-6, "layer " + l + "'s gradient is ~0 (" + max + "): nothing was compared");
        }
    }

    @Test
    void finishBackwardRunsOnceAndIsANoOpWithoutCheckpointing() {
        ModelConfig cfg = ModelConfig.tiny(Family.QWEN3, VOCAB);
        try (CausalLm m = CausalLm.random(cfg, 3); PointerScope scope = new PointerScope()) {
            m.setRequiresGrad(true);
            TeacherForcing.Result plain = TeacherForcing.logProbs(m, PROMPTS, RESPONSES, 1.0, false);
            assertFalse(plain.pending().checkpointed());
            plain.logprobs().sum().backward();
            plain.finishBackward();
            plain.finishBackward();  // nothing to do, twice
            m.setActivationCheckpointing(true);
            TeacherForcing.Result ckpt = TeacherForcing.logProbs(m, PROMPTS, RESPONSES, 1.0, false);
            assertTrue(ckpt.pending().checkpointed());
            ckpt.logprobs().sum().backward();
            ckpt.finishBackward();
            IllegalStateException e = assertThrows(IllegalStateException.class, ckpt::finishBackward);
            assertTrue(e.getMessage().contains("already"), e.getMessage());
            // without grad (the old log-probs of an update) nothing is checkpointed
            m.setRequiresGrad(false);
            assertFalse(TeacherForcing.logProbs(m, PROMPTS, RESPONSES, 1.0, false).pending().checkpointed());
        }
    }

    @Test
    void aPpoUpdateWithCheckpointingLandsOnTheSameWeights() {
        // Llama (3 layers, no biases: Qwen2's k bias has an exactly zero gradient in theory, which
        // Adam turns into rounding noise of lr size; see PpoUpdaterTest)
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        LossConfig loss = LossConfig.defaults().withKl(KlEstimator.K3, 0.05);
        // per-agent gradient norms too: they take the same micro-batch path
        PpoUpdater.Settings s = new PpoUpdater.Settings(2, 5, 2, 0.9, 0.01, 1.0, loss, 8, true);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : PpoUpdaterTest.rows(7, 10)) {
            rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), r.advantage(), rows.size() % 2));
        }
        Map<String, float[]> initial, plain, ckpt;
        PpoUpdater.Stats a, b;
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5); CausalLm ref = CausalLm.random(cfg, 6);
             AdamW o1 = new AdamW(m1.parameters(), AdamW.Settings.of(3e-3));
             AdamW o2 = new AdamW(m2.parameters(), AdamW.Settings.of(3e-3))) {
            m2.setActivationCheckpointing(true);
            initial = PpoUpdaterTest.snapshot(m1);
            a = new PpoUpdater(m1, o1, ref, s).update(rows, 42);
            b = new PpoUpdater(m2, o2, ref, s).update(rows, 42);
            plain = PpoUpdaterTest.snapshot(m1);
            ckpt = PpoUpdaterTest.snapshot(m2);
        }
        assertEquals(a.optimizerSteps(), b.optimizerSteps());
        assertEquals(4, a.optimizerSteps());  // 2 epochs x ceil(10 / 5)
        assertEquals(a.pgLoss(), b.pgLoss(), 1e-6);
        assertEquals(a.agentGradNorms().keySet(), b.agentGradNorms().keySet());
        for (int agent : a.agentGradNorms().keySet()) {
            double x = a.agentGradNorms().get(agent), y = b.agentGradNorms().get(agent);
            assertTrue(x > 0, "agent " + agent + "'s gradient norm is 0");
            assertEquals(x, y, 1e-5 * x, "agent " + agent + "'s gradient norm");
        }
        assertClose(plain, ckpt, 1e-5, 1e-4);
        assertTrue(PpoUpdaterTest.maxMove(initial, plain) > 1e-3, "the update moved no weight by more than 1e-3");
    }

    @Test
    void theConfigKeyReachesTheModelsAndTheWarmStart() throws Exception {
        PrintStream quiet = new PrintStream(new ByteArrayOutputStream());
        Map<String, Map<String, float[]>> weights = new LinkedHashMap<>();
        for (boolean on : new boolean[] {false, true}) {
            RunConfig cfg = RunConfig.parse(TrainerEndToEndTest.YAML, List.of("run.output_dir=" + tmp.resolve("r" + on),
                    "models.policy.activation_checkpointing=" + on, "models.policy.size.layers=2", "sft.steps=3",
                    "sft.batch_size=4", "sft.lr=3.0e-3", "run.resume=never"));
            try (Trainer t = Trainer.open(cfg, quiet)) {
                CausalLm m = t.policiesForTest().get("policy").model();
                assertEquals(on, m.activationCheckpointing(), "models.policy.activation_checkpointing=" + on);
                Map<String, float[]> before = PpoUpdaterTest.snapshot(m);
                t.sft();
                Map<String, float[]> after = PpoUpdaterTest.snapshot(m);
                assertTrue(PpoUpdaterTest.maxMove(before, after) > 1e-3, "the warm start moved no weight (checkpointing " + on + ")");
                weights.put("ckpt " + on, after);
            }
        }
        assertClose(weights.get("ckpt false"), weights.get("ckpt true"), 1e-5, 1e-4);
    }
}
