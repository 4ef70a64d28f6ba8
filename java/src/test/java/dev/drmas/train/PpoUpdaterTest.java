// PpoUpdaterTest.java — PPO updates of a tiny model: the native fused loss and a pure-LibTorch
// composition of the same loss (TorchReference, autograd) give the same parameters after several
// optimiser steps; the optimiser moves only what has gradients; a non-finite gradient skips the
// step; the update raises the log-probability of positively advantaged responses; and ppo.shuffle
// (false: mini-batches in row order) goes from the run config to the update; micro-batches cut by
// tokens (ppo.max_tokens_per_micro_batch) give the update of whole mini-batches; ppo.updates_per_step
// fixes the optimiser steps per epoch whatever a model's row count.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.TorchReference;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.Tensors;
import dev.drmas.rollout.TeacherForcing;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.Test;

class PpoUpdaterTest {
    static final int VOCAB = 61;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    /** The same loss composed from LibTorch ops (the rows' advantages broadcast to their tokens); autograd gives dL/dlogp. */
    static final PpoUpdater.LossBackend TORCH = (c, normalizer, offsets, logp, old, adv, ref) ->
            new PpoUpdater.LossOut(TorchReference.clippedLossTensor(c, normalizer, offsets, logp, old,
                    perToken(adv, offsets, logp.numel()), ref, null), new double[AbiIndices.LOSS_SUMS]);

    /** Row values (float32, one per row) repeated over each row's tokens of {@code offsets}; 0 outside the rows. */
    static Tensor perToken(Tensor rowValues, Tensor offsets, long tokens) {
        long[] off = new long[(int) offsets.numel()];
        offsets.cpu().contiguous().data_ptr_long().get(off);
        float[] rows = new float[off.length - 1];
        rowValues.cpu().contiguous().data_ptr_float().get(rows);
        float[] tok = new float[(int) tokens];
        for (int r = 0; r < rows.length; r++) java.util.Arrays.fill(tok, (int) off[r], (int) off[r + 1], rows[r]);
        return Tensors.floats(tok).to(rowValues.device(), org.bytedeco.pytorch.global.torch.ScalarType.Float);
    }

    static List<PpoUpdater.Row> rows(long seed, int count) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int[] p = new int[1 + rng.nextInt(5)], a = new int[rng.nextInt(7)];  // some empty responses
            for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
            for (int j = 0; j < a.length; j++) a[j] = rng.nextInt(VOCAB);
            rows.add(new PpoUpdater.Row(p, a, (float) (rng.nextDouble() * 4 - 2)));
        }
        return rows;
    }

    static Map<String, float[]> snapshot(CausalLm m) {
        Map<String, float[]> out = new java.util.LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            m.parameters().forEach((k, t) -> out.put(k, Tensors.toFloats(t)));
        }
        return out;
    }

    enum Variant { TOKEN_MEAN_DUAL_CLIP, SEQ_MEAN_KL_K3_ENTROPY, SEQ_TOKEN_SUM_NORM_WIDE_CLIP }

    @ParameterizedTest
    @EnumSource(Variant.class)
    void nativeLossAndLibTorchLossGiveTheSameParameters(Variant v) {
        // Not Qwen2: its k_proj bias has an exactly zero gradient in theory (softmax ignores a
        // per-query constant), so both paths feed Adam rounding noise, which it scales up to lr-sized
        // steps of random sign: equal losses, different parameters.
        ModelConfig cfg = ModelConfig.tiny(v == Variant.SEQ_MEAN_KL_K3_ENTROPY ? Family.LLAMA : Family.QWEN3, VOCAB);
        LossConfig loss = switch (v) {
            case TOKEN_MEAN_DUAL_CLIP -> LossConfig.defaults();
            case SEQ_MEAN_KL_K3_ENTROPY -> LossConfig.defaults().withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN)
                    .withKl(KlEstimator.K3, 0.1);
            case SEQ_TOKEN_SUM_NORM_WIDE_CLIP -> LossConfig.defaults().withAggregation(LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM)
                    .withClip(0.1, 0.3).withDualClip(0);
        };
        double entropy = v == Variant.SEQ_MEAN_KL_K3_ENTROPY ? 0.01 : 0.0;
        PpoUpdater.Settings s = new PpoUpdater.Settings(2, 5, 5, 0.8, entropy, 1.0, loss, 8);
        List<PpoUpdater.Row> rows = rows(3, 12);
        Map<String, float[]> initial, a, b;
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5);
             CausalLm ref = CausalLm.random(cfg, 6);
             AdamW o1 = new AdamW(m1.parameters(), AdamW.Settings.of(3e-3));
             AdamW o2 = new AdamW(m2.parameters(), AdamW.Settings.of(3e-3))) {
            CausalLm r = loss.kl() == KlEstimator.NONE ? null : ref;
            initial = snapshot(m1);
            PpoUpdater.Stats st = new PpoUpdater(m1, o1, r, s).update(rows, 42);
            new PpoUpdater(m2, o2, r, s, TORCH).update(rows, 42);
            assertEquals(6, st.optimizerSteps());  // 2 epochs x ceil(12 / 5)
            a = snapshot(m1);
            b = snapshot(m2);
        }
        for (String k : a.keySet()) {
            float[] x = a.get(k), y = b.get(k);
            for (int i = 0; i < x.length; i++) assertEquals(y[i], x[i], 1e-5 + 1e-5 * Math.abs(y[i]), k + "[" + i + "]");
        }
        // equal parameters mean something only if the update moved them: six Adam steps at lr 3e-3
        // move most weights by about 1e-2 (the tolerance above is 1e-5)
        assertTrue(maxMove(initial, a) > 1e-3, "the native update moved no parameter by more than 1e-3: "
                + maxMove(initial, a));
    }

    /** The largest |after − before| over all parameters. */
    static double maxMove(Map<String, float[]> before, Map<String, float[]> after) {
        double max = 0;
        for (String k : before.keySet()) {
            float[] x = before.get(k), y = after.get(k);
            for (int i = 0; i < x.length; i++) max = Math.max(max, Math.abs(x[i] - y[i]));
        }
        return max;
    }

    @Test
    void withoutShuffleTheMiniBatchesAreCutInRowOrder() {
        // 12 rows in mini-batches of 3, 2 epochs. Shuffled, the seed orders the mini-batches, so two
        // seeds give different parameters; unshuffled, the order is the rows' and the seed changes
        // nothing (bit for bit), and it is the order of seed-free updates of rows 0-2, 3-5, …
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = rows(21, 12);
        PpoUpdater.Settings shuffled = new PpoUpdater.Settings(2, 3, 3, 1.0, 0, 1.0, LossConfig.defaults(), 1);
        PpoUpdater.Settings inOrder = new PpoUpdater.Settings(2, 3, 3, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, false);
        assertTrue(shuffled.shuffle(), "shuffling is the default");
        Map<String, float[]> s1 = trained(cfg, rows, shuffled, 1), s2 = trained(cfg, rows, shuffled, 2);
        assertTrue(maxMove(s1, s2) > 1e-4, "shuffled: the seed must matter, " + maxMove(s1, s2));
        Map<String, float[]> o1 = trained(cfg, rows, inOrder, 1), o2 = trained(cfg, rows, inOrder, 2);
        assertEquals(0.0, maxMove(o1, o2), "unshuffled: the seed must not matter");
        assertTrue(maxMove(o1, s1) > 1e-4 && maxMove(o1, s2) > 1e-4, "unshuffled differs from both shuffled orders");
        // the rows in a seeded order, unshuffled, are that order's shuffled update
        int[] perm = PpoUpdater.permutation(rows.size(), new SplittableRandom(7));
        List<PpoUpdater.Row> permuted = new ArrayList<>();
        for (int i : perm) permuted.add(rows.get(i));
        PpoUpdater.Settings oneEpochShuffled = new PpoUpdater.Settings(1, 3, 3, 1.0, 0, 1.0, LossConfig.defaults(), 1);
        PpoUpdater.Settings oneEpochInOrder = new PpoUpdater.Settings(1, 3, 3, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, false);
        // (old log-probs come from forward passes over other batches of rows: equal up to rounding,
        // which AdamW's normalised steps carry into the weights: ~2e-5 on an AMD EPYC's OpenBLAS
        // kernels, against ~4e-2 between two different orders above)
        double d = maxMove(trained(cfg, rows, oneEpochShuffled, 7), trained(cfg, permuted, oneEpochInOrder, 0));
        assertTrue(d < 1e-3, "the permuted rows in order vs the shuffled update: " + d);
    }

    @Test
    void ppoShuffleOfTheRunConfigReachesTheUpdate() {
        // The trainer's settings from a run config: without the key they are what every run had
        // before ppo.shuffle was read (shuffling), and ppo.shuffle=false changes that one field,
        // which the updater then honours (the seed no longer matters).
        List<String> small = List.of("ppo.mini_batch_size=3", "ppo.micro_batch_size=3");
        List<String> unshuffled = new ArrayList<>(small);
        unshuffled.add("ppo.shuffle=false");
        PpoUpdater.Settings on = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, small), 1.0);
        PpoUpdater.Settings off = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, unshuffled), 1.0);
        // (the config's default head is the fused one; the settings' short constructors keep the materialised reference)
        assertEquals(new PpoUpdater.Settings(on.epochs(), on.miniBatchRows(), on.microBatchRows(), on.temperature(),
                on.entropyCoef(), on.gradClip(), on.loss(), on.constantNormalizer(), on.gradNormPerAgent(), true, 0, true), on,
                "the default is the settings' own default");
        assertEquals(new PpoUpdater.Settings(on.epochs(), on.miniBatchRows(), on.microBatchRows(), on.temperature(),
                on.entropyCoef(), on.gradClip(), on.loss(), on.constantNormalizer(), on.gradNormPerAgent(), false, 0, true), off,
                "ppo.shuffle=false changes the shuffle and nothing else");
        assertTrue(on.shuffle() && on.epochs() == 2 && on.miniBatchRows() == 3, "the config's values: " + on);
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = rows(23, 12);
        assertEquals(0.0, maxMove(trained(cfg, rows, off, 1), trained(cfg, rows, off, 2)), "unshuffled: the seed must not matter");
        double d = maxMove(trained(cfg, rows, on, 1), trained(cfg, rows, on, 2));
        assertTrue(d > 1e-4, "shuffled: the seed must matter, " + d);
    }

    static Map<String, float[]> trained(ModelConfig cfg, List<PpoUpdater.Row> rows, PpoUpdater.Settings s, long seed) {
        try (CausalLm m = CausalLm.random(cfg, 3); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(3e-3))) {
            new PpoUpdater(m, o, null, s).update(rows, seed);
            return snapshot(m);
        }
    }

    @Test
    void microBatchingDoesNotChangeTheUpdate() {
        // token-mean over the whole mini-batch: 6 rows in one forward or in micro-batches of 2.
        // The gradients then differ only by summation order; Adam's eps = 1e-3 keeps that rounding
        // from being scaled up to lr-sized steps where a gradient is near zero.
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = rows(11, 12);
        LossConfig loss = LossConfig.defaults();
        AdamW.Settings opt = new AdamW.Settings(3e-3, 0.9, 0.999, 1e-3, 0.01, 0);
        Map<String, float[]> a, b;
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5);
             AdamW o1 = new AdamW(m1.parameters(), opt);
             AdamW o2 = new AdamW(m2.parameters(), opt)) {
            new PpoUpdater(m1, o1, null, new PpoUpdater.Settings(2, 6, 6, 1.0, 0.01, 1.0, loss, 8)).update(rows, 9);
            new PpoUpdater(m2, o2, null, new PpoUpdater.Settings(2, 6, 2, 1.0, 0.01, 1.0, loss, 8)).update(rows, 9);
            a = snapshot(m1);
            b = snapshot(m2);
        }
        for (String k : a.keySet()) {
            float[] x = a.get(k), y = b.get(k);
            for (int i = 0; i < x.length; i++) assertEquals(y[i], x[i], 1e-5 + 1e-5 * Math.abs(y[i]), k + "[" + i + "]");
        }
    }

    @Test
    void tokenMicroBatchesDoNotChangeTheUpdate() {
        // ppo.max_tokens_per_micro_batch: the same two epochs of 6-row mini-batches, once a whole
        // mini-batch per forward, once in micro-batches of at most 14 padded tokens (rows of 1 to 11
        // prompt + response tokens), with a reference model so that its log-prob pass is cut too.
        // The loss is normalised over the mini-batch, so only summation order differs.
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = rows(11, 12);
        LossConfig loss = LossConfig.defaults().withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN).withKl(KlEstimator.K3, 0.1);
        AdamW.Settings opt = new AdamW.Settings(3e-3, 0.9, 0.999, 1e-3, 0.01, 0);
        PpoUpdater.Settings whole = new PpoUpdater.Settings(2, 6, 6, 1.0, 0.01, 1.0, loss, 8, false, true, 0);
        PpoUpdater.Settings byTokens = new PpoUpdater.Settings(2, 6, 6, 1.0, 0.01, 1.0, loss, 8, false, true, 14);
        Map<String, float[]> initial, a, b;
        try (CausalLm m1 = CausalLm.random(cfg, 5); CausalLm m2 = CausalLm.random(cfg, 5); CausalLm ref = CausalLm.random(cfg, 6);
             AdamW o1 = new AdamW(m1.parameters(), opt);
             AdamW o2 = new AdamW(m2.parameters(), opt)) {
            initial = snapshot(m1);
            PpoUpdater tokenWise = new PpoUpdater(m2, o2, ref, byTokens);
            List<int[]> cuts = tokenWise.microBatches(rows);
            assertTrue(cuts.size() >= 6, "12 rows in micro-batches of at most 14 tokens: " + cuts.size() + " cuts");
            assertEquals(1, new PpoUpdater(m1, o1, ref, whole).microBatches(rows.subList(0, 6)).size());
            PpoUpdater.Stats s1 = new PpoUpdater(m1, o1, ref, whole).update(rows, 9);
            PpoUpdater.Stats s2 = tokenWise.update(rows, 9);
            a = snapshot(m1);
            b = snapshot(m2);
            assertEquals(s1.tokens(), s2.tokens());
            assertEquals(s1.pgLoss(), s2.pgLoss(), 1e-6);
            assertEquals(s1.kl(), s2.kl(), 1e-6);
            assertTrue(s1.kl() > 0, "the reference differs from the policy: KL " + s1.kl());
        }
        for (String k : a.keySet()) {
            float[] x = a.get(k), y = b.get(k);
            for (int i = 0; i < x.length; i++) assertEquals(x[i], y[i], 1e-6, k + "[" + i + "]");
        }
        assertTrue(maxMove(initial, a) > 1e-3, "the update moved no parameter by more than 1e-3: " + maxMove(initial, a));
    }

    @Test
    void tokenMicroBatchesCountThePaddedForward() {
        // prompt + response lengths 3 3 3 10 2 2 2 2 20 1, at most 9 tokens: three rows of 3 (9), the
        // 10 alone, four rows of 2 (8), the 20 alone, the last. Rows of 1 and 5 do not share a
        // micro-batch of 9: padded to the longest they are 10 tokens, though their sum is 6.
        int[] lengths = {3, 3, 3, 10, 2, 2, 2, 2, 20, 1};
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (int l : lengths) rows.add(new PpoUpdater.Row(new int[] {1}, new int[l - 1], 1f));
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.LLAMA, VOCAB), 1); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-3))) {
            PpoUpdater byTokens = new PpoUpdater(m, o, null, new PpoUpdater.Settings(1, 16, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1,
                    false, true, 9));
            assertEquals("[[0, 3], [3, 4], [4, 8], [8, 9], [9, 10]]", cuts(byTokens.microBatches(rows)));
            List<PpoUpdater.Row> padded = List.of(new PpoUpdater.Row(new int[] {1}, new int[0], 1f),
                    new PpoUpdater.Row(new int[] {1, 2}, new int[3], 1f), new PpoUpdater.Row(new int[] {1}, new int[0], 1f));
            assertEquals("[[0, 1], [1, 2], [2, 3]]", cuts(byTokens.microBatches(padded)));
            // 0: micro_batch_size rows, as before
            PpoUpdater byRows = new PpoUpdater(m, o, null, new PpoUpdater.Settings(1, 16, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1));
            assertEquals("[[0, 4], [4, 8], [8, 10]]", cuts(byRows.microBatches(rows)));
        }
        var e = assertThrows(IllegalArgumentException.class,
                () -> new PpoUpdater.Settings(1, 16, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, true, -1));
        assertEquals("ppo.max_tokens_per_micro_batch must be >= 0 (0 = off), got -1", e.getMessage());
    }

    static String cuts(List<int[]> cuts) {
        List<String> out = new ArrayList<>();
        for (int[] c : cuts) out.add(java.util.Arrays.toString(c));
        return out.toString();
    }

    @Test
    void maxTokensPerMicroBatchOfTheRunConfigReachesTheUpdate() {
        PpoUpdater.Settings off = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, List.of()), 1.0);
        PpoUpdater.Settings on = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML,
                List.of("ppo.max_tokens_per_micro_batch=400")), 1.0);
        assertEquals(0, off.maxTokensPerMicroBatch(), "off by default");
        assertEquals(400, on.maxTokensPerMicroBatch());
        assertEquals(new PpoUpdater.Settings(off.epochs(), off.miniBatchRows(), off.microBatchRows(), off.temperature(),
                off.entropyCoef(), off.gradClip(), off.loss(), off.constantNormalizer(), off.gradNormPerAgent(), off.shuffle(), 400,
                off.fusedLmHead()), on,
                "the key changes that field and nothing else");
    }

    /** {@code count} rows of 1 to 6 response tokens each (no empty response: every mini-batch reaches the loss), random advantages. */
    static List<PpoUpdater.Row> rowsWithResponses(long seed, int count) {
        SplittableRandom rng = new SplittableRandom(seed);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int[] p = new int[1 + rng.nextInt(4)], a = new int[1 + rng.nextInt(6)];
            for (int j = 0; j < p.length; j++) p[j] = rng.nextInt(VOCAB);
            for (int j = 0; j < a.length; j++) a[j] = rng.nextInt(VOCAB);
            rows.add(new PpoUpdater.Row(p, a, (float) (rng.nextDouble() * 4 - 2)));
        }
        return rows;
    }

    @Test
    void updatesPerStepFixesTheOptimiserStepsWhateverTheRowCount() {
        // ppo.updates_per_step (the Dr. MAS reference's adaptive mini-batch size): two models with
        // 7 and 20 rows take the same 3 steps per epoch (2 epochs: 6), a model with 2 rows one per
        // row; off (0), mini-batches of 4 rows give 2 and 5 steps per epoch as before
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        PpoUpdater.Settings fixed = new PpoUpdater.Settings(2, 4, 2, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, true, 0, false, 3);
        PpoUpdater.Settings off = new PpoUpdater.Settings(2, 4, 2, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, true, 0, false, 0);
        int[][] expected = {{7, 6, 4}, {20, 6, 10}, {2, 4, 2}};  // rows, steps with updates_per_step 3, steps with 4-row mini-batches
        for (int[] e : expected) {
            List<PpoUpdater.Row> rows = rowsWithResponses(31 + e[0], e[0]);
            for (PpoUpdater.Settings s : List.of(fixed, off)) {
                try (CausalLm m = CausalLm.random(cfg, 4); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(3e-3))) {
                    Map<String, float[]> before = snapshot(m);
                    PpoUpdater.Stats st = new PpoUpdater(m, o, null, s).update(rows, 5);
                    int want = s == fixed ? e[1] : e[2];
                    assertEquals(want, st.optimizerSteps(), e[0] + " rows, updates_per_step " + s.updatesPerStep());
                    assertEquals(0, st.skippedSteps());
                    assertTrue(maxMove(before, snapshot(m)) > 1e-3, "the update moved no weight by more than 1e-3");
                }
            }
        }
        // the cut: balanced, ⌈13 / 3⌉ or ⌊13 / 3⌋ rows, the same for every rank since it takes the global count
        try (CausalLm m = CausalLm.random(cfg, 4); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(3e-3))) {
            assertEquals("[0, 4, 8, 13]", java.util.Arrays.toString(new PpoUpdater(m, o, null, fixed).miniBatchCuts(13)));
            assertEquals("[0, 4, 8, 12, 13]", java.util.Arrays.toString(new PpoUpdater(m, o, null, off).miniBatchCuts(13)));
            assertEquals("[0, 1, 2]", java.util.Arrays.toString(new PpoUpdater(m, o, null, fixed).miniBatchCuts(2)));
        }
        var err = assertThrows(IllegalArgumentException.class,
                () -> new PpoUpdater.Settings(1, 4, 2, 1.0, 0, 1.0, LossConfig.defaults(), 1, false, true, 0, false, -1));
        assertEquals("ppo.updates_per_step must be >= 0 (0 = off), got -1", err.getMessage());
    }

    @Test
    void updatesPerStepOfTheRunConfigReachesTheUpdate() {
        PpoUpdater.Settings off = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, List.of()), 1.0);
        PpoUpdater.Settings on = Trainer.ppoSettings(RunConfig.parse(TrainerEndToEndTest.YAML, List.of("ppo.updates_per_step=5")), 1.0);
        assertEquals(0, off.updatesPerStep(), "off by default");
        assertEquals(new PpoUpdater.Settings(off.epochs(), off.miniBatchRows(), off.microBatchRows(), off.temperature(),
                off.entropyCoef(), off.gradClip(), off.loss(), off.constantNormalizer(), off.gradNormPerAgent(), off.shuffle(),
                off.maxTokensPerMicroBatch(), off.fusedLmHead(), 5), on, "the key changes that field and nothing else");
    }

    @Test
    void aSkippedStepLogsANaNNormNotZero() {
        // every gradient non-finite (a NaN advantage reaches every token): every step is skipped, and the
        // norm must not read as 0.0, a calm step (issue 20)
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : rows(3, 4)) rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), Float.NaN));
        try (CausalLm m = CausalLm.random(cfg, 1); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-3))) {
            Map<String, float[]> before = snapshot(m);
            PpoUpdater.Stats st = new PpoUpdater(m, o, null, new PpoUpdater.Settings(1, 4, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1))
                    .update(rows, 1);
            assertEquals(0, st.optimizerSteps());
            assertEquals(1, st.skippedSteps());
            assertTrue(Double.isNaN(st.gradNormMean()) && Double.isNaN(st.gradNormMax()), st.gradNormMean() + ", " + st.gradNormMax());
            Map<String, float[]> after = snapshot(m);
            for (String k : before.keySet()) org.junit.jupiter.api.Assertions.assertArrayEquals(before.get(k), after.get(k), k);
        }
    }

    @Test
    void positiveAdvantagesRaiseTheirLogProbs() {
        ModelConfig cfg = ModelConfig.tiny(Family.LLAMA, VOCAB);
        List<PpoUpdater.Row> rows = new ArrayList<>();
        for (PpoUpdater.Row r : rows(8, 8)) rows.add(new PpoUpdater.Row(r.promptIds(), r.responseIds(), 1.0f));
        try (CausalLm m = CausalLm.random(cfg, 1); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-3))) {
            double before = meanLogProb(m, rows);
            PpoUpdater.Stats st = new PpoUpdater(m, o, null,
                    new PpoUpdater.Settings(1, 8, 8, 1.0, 0, 0, LossConfig.defaults(), 1)).update(rows, 1);
            double after = meanLogProb(m, rows);
            assertTrue(after > before, "mean log-prob " + before + " -> " + after);
            assertTrue(st.gradNormMean() > 0 && Double.isFinite(st.pgLoss()));
            assertEquals(0.0, st.ppoKl(), 1e-6, "first mini-batch of the first epoch is on-policy");
        }
    }

    static double meanLogProb(CausalLm m, List<PpoUpdater.Row> rows) {
        List<int[]> p = new ArrayList<>(), a = new ArrayList<>();
        for (PpoUpdater.Row r : rows) {
            p.add(r.promptIds());
            a.add(r.responseIds());
        }
        try (PointerScope scope = new PointerScope(); var ng = new org.bytedeco.pytorch.NoGradGuard()) {
            return TeacherForcing.logProbs(m, p, a, 1.0, false).logprobs().mean().item_double();
        }
    }

    @Test
    void nonFiniteGradientSkipsTheStep() {
        ModelConfig cfg = ModelConfig.tiny(Family.QWEN3, VOCAB);
        try (CausalLm m = CausalLm.random(cfg, 2); AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-2))) {
            Map<String, float[]> before = snapshot(m);
            // a loss whose gradient is NaN everywhere
            PpoUpdater.LossBackend nan = (c, n, off, logp, old, adv, ref) -> new PpoUpdater.LossOut(
                    logp.mul(new org.bytedeco.pytorch.Scalar(Double.NaN)).sum(), new double[AbiIndices.LOSS_SUMS]);
            PpoUpdater.Stats st = new PpoUpdater(m, o, null,
                    new PpoUpdater.Settings(1, 4, 4, 1.0, 0, 1.0, LossConfig.defaults(), 1), nan).update(rows(4, 4), 0);
            assertEquals(1, st.skippedSteps());
            assertEquals(0, st.optimizerSteps());
            Map<String, float[]> after = snapshot(m);
            for (String k : before.keySet()) assertTrue(java.util.Arrays.equals(before.get(k), after.get(k)), k);
            assertEquals(0, o.steps());
        }
    }

    @Test
    void klNeedsAReferenceModel() {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 2);
             AdamW o = new AdamW(m.parameters(), AdamW.Settings.of(1e-2))) {
            var e = assertThrows(IllegalArgumentException.class, () -> new PpoUpdater(m, o, null,
                    new PpoUpdater.Settings(1, 4, 4, 1.0, 0, 1.0, LossConfig.defaults().withKl(KlEstimator.K1, 0.1), 1)));
            assertTrue(e.getMessage().contains("reference model"), e.getMessage());
        }
    }
}
