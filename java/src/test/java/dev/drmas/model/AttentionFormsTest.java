// AttentionFormsTest.java — the forms a general pass's attention takes, against the masked
// grouped-query form they stand in for: causal attention without a mask (a forward without cache
// over a right-padded batch) gives the same outputs at every real token, is taken for exactly the
// batches where that holds (not for left padding, a hole, or a cache), and changes only padding
// outputs; k and v expanded to the query heads (masked GQA off the CPU) give the grouped form's
// outputs, caches and gradients. Each family's tiny preset (GQA 2:1 and 4:1) and an MHA Llama.
package dev.drmas.model;

import static dev.drmas.algo.TorchReference.bools;
import static dev.drmas.algo.TorchReference.longs;
import static dev.drmas.algo.TorchReference.toFloats;
import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.Tolerance;
import dev.drmas.testing.TorchScope;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@ExtendWith(TorchScope.class)
class AttentionFormsTest {
    static final int VOCAB = CausalLmTest.VOCAB;
    /** Lengths of unequal rows (one of a single token) padded to 7 slots. */
    static final int[] LENGTHS = {7, 3, 1, 6};

    static Stream<Arguments> variants() {
        ModelConfig mha = new ModelConfig(Family.LLAMA, 48, 96, 2, 4, 4, 12, 1e-6, 5e5, RopeScaling.linear(4), VOCAB,
                false, true, true, 128, "float32", 1, List.of(2, 3), Map.of());
        return Stream.of(
                Arguments.of("qwen2 (q/k/v bias, GQA 2:1)", ModelConfig.tiny(Family.QWEN2, VOCAB)),
                Arguments.of("qwen3 (q/k norm, GQA 2:1)", ModelConfig.tiny(Family.QWEN3, VOCAB)),
                Arguments.of("llama (GQA 4:1)", ModelConfig.tiny(Family.LLAMA, VOCAB)),
                Arguments.of("llama (biases, MHA)", mha));
    }

    static boolean causal(CausalLm m, Tensor mask) {
        long b = mask.size(0), s = mask.size(1);
        try (PointerScope scope = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
            return m.generalPass(b, s, 0, s, CausalLm.positionIds(mask), mask, null).causal;
        }
    }

    @Test
    void rightPaddingIsRecognisedFromTheMask() {
        // bool and 0/1 int64 masks; a row may be all real tokens or all padding
        assertTrue(CausalLm.rightPadded(bools(true, true, false, true, true, true).view(2, 3)));
        assertTrue(CausalLm.rightPadded(longs(1, 0, 0, 0, 0, 0, 1, 1, 1).view(3, 3)));
        assertTrue(CausalLm.rightPadded(longs(1, 1, 0, 0).view(1, 4)));
        assertTrue(CausalLm.rightPadded(longs(1).view(1, 1)));
        // left padding, and a hole in an otherwise right-padded row, are not
        assertFalse(CausalLm.rightPadded(longs(1, 1, 1, 0, 1, 1).view(2, 3)));
        assertFalse(CausalLm.rightPadded(bools(true, false, true, false).view(1, 4)));
        assertFalse(CausalLm.rightPadded(longs(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 1).view(3, 4)));
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void aRightPaddedForwardIsCausalWithTheMaskedOutputsAtRealTokens(String name, ModelConfig c) {
        try (CausalLm m = CausalLmTest.model(c, 11)) {
            CausalLmTest.Batch batch = CausalLmTest.batch(LENGTHS, false, 5);
            Tensor ids = batch.ids(), mask = batch.mask(), pos = CausalLm.positionIds(mask);
            assertTrue(causal(m, mask), "a right-padded batch without cache is not sent down the causal path");
            float[] causal = toFloats(m.hidden(ids, pos, mask, null));
            m.rightPaddedAsCausal(false);
            assertFalse(causal(m, mask));
            float[] masked = toFloats(m.hidden(ids, pos, mask, null));
            compare(name, batch, c.hiddenSize(), causal, masked);
            // the training forward with checkpointing makes its pass itself: the same there
            m.rightPaddedAsCausal(true);
            m.setActivationCheckpointing(true);
            m.setRequiresGrad(true);
            float[] ckpt = toFloats(m.trainingHidden(ids, pos, mask).hidden().detach());
            compare(name + " (checkpointed)", batch, c.hiddenSize(), ckpt, masked);
        }
    }

    /**
     * Hidden states [B, S, h] of the two forms: bit for bit the same at every real token (CPU
     * LibTorch: the kernels add the same products in the same order, and a masked key adds
     * exp(−∞) = 0 where causal attention skips it), and different at some padding token, which
     * the masked form lets read only itself: so the causal form really ran.
     */
    static void compare(String name, CausalLmTest.Batch batch, int h, float[] causal, float[] masked) {
        int paddingDiffers = 0;
        for (int b = 0; b < batch.rows(); b++) {
            for (int s = 0; s < batch.slots(); s++) {
                float[] x = java.util.Arrays.copyOfRange(causal, (b * batch.slots() + s) * h, (b * batch.slots() + s + 1) * h);
                float[] y = java.util.Arrays.copyOfRange(masked, (b * batch.slots() + s) * h, (b * batch.slots() + s + 1) * h);
                if (batch.valid()[b][s]) assertArrayEquals(y, x, name + ": row " + b + ", real token " + s);
                else if (!java.util.Arrays.equals(x, y)) paddingDiffers++;
            }
        }
        assertTrue(paddingDiffers > 0, name + ": no padding output differs between the forms: the causal form did not run");
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void batchesThatAreNotRightPaddedStayMasked(String name, ModelConfig c) {
        try (CausalLm m = CausalLmTest.model(c, 12)) {
            CausalLmTest.Batch left = CausalLmTest.batch(LENGTHS, true, 6);
            // right padding but for one hole: slot 2 of row 0 is padding between real tokens
            CausalLmTest.Batch holed = CausalLmTest.batch(LENGTHS, false, 6);
            holed.valid()[0][2] = false;
            for (CausalLmTest.Batch batch : List.of(left, holed)) {
                Tensor ids = batch.ids(), mask = batch.mask(), pos = CausalLm.positionIds(mask);
                assertFalse(causal(m, mask), name + ": a batch that is not right-padded went down the causal path");
                Tensor logits = m.forward(ids, pos, mask, null);
                float[] auto = toFloats(logits);
                m.rightPaddedAsCausal(false);
                float[] masked = toFloats(m.forward(ids, pos, mask, null));
                m.rightPaddedAsCausal(true);
                // the same path: every output, padding included, bit for bit
                assertArrayEquals(masked, auto, name + (batch == left ? " left-padded" : " with a hole"));
                // and the masked outputs are the right ones: each real row as a sequence alone
                for (int b = 0; b < batch.rows(); b++) {
                    Tolerance.assertClose(name + " row " + b, CausalLmTest.rowLogits(logits, batch, b),
                            toFloats(CausalLmTest.referenceLogits(m, batch.realTokens(b))), CausalLmTest.ATOL, CausalLmTest.RTOL);
                }
            }
            // a cache: masked even when right-padded
            CausalLmTest.Batch right = CausalLmTest.batch(LENGTHS, false, 6);
            try (KvCache cache = m.newCache(right.rows(), right.slots());
                 PointerScope scope = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
                Tensor mask = right.mask();
                long b = right.rows(), s = right.slots();
                assertFalse(m.generalPass(b, s, 0, s, CausalLm.positionIds(mask), mask, cache).causal);
            }
        }
    }

    /** The GQA configs only: with as many kv heads as query heads there is nothing to expand. */
    static Stream<Arguments> grouped() {
        return variants().filter(a -> {
            ModelConfig c = (ModelConfig) a.get()[1];
            return c.numHeads() != c.numKvHeads();
        });
    }

    /** What a prefill, its next chunk and a masked training forward leave, with k and v expanded or not. */
    record Run(float[] prefill, float[] cacheKeys, float[] cacheValues, float[] forward, Map<String, float[]> grads) {
    }

    static Run run(ModelConfig c, boolean expand) {
        try (CausalLm m = CausalLmTest.model(c, 13); PointerScope scope = new PointerScope()) {
            m.expandKvHeads(expand);
            // the rollout engine's prefill: left-padded prompts into a cache, in chunks of 4 and 2 slots
            CausalLmTest.Batch prompts = CausalLmTest.batch(new int[] {6, 2, 4}, true, 7);
            Tensor ids = prompts.ids(), mask = prompts.mask(), pos = CausalLm.positionIds(mask);
            List<Tensor> pieces = new ArrayList<>();
            float[] keys, values;
            try (KvCache cache = m.newCache(3, 8)) {
                pieces.add(m.forward(ids.narrow(1, 0, 4), pos.narrow(1, 0, 4), mask.narrow(1, 0, 4), cache));
                pieces.add(m.forward(ids.narrow(1, 4, 2), pos.narrow(1, 4, 2), mask, cache));
                // the last layer's: its input went through every earlier layer's attention
                keys = toFloats(cache.keys(c.numLayers() - 1).narrow(2, 0, 6));
                values = toFloats(cache.values(c.numLayers() - 1).narrow(2, 0, 6));
            }
            float[] prefill = toFloats(torch.cat(new TensorVector(pieces.toArray(new Tensor[0])), 1));
            // a left-padded forward without cache, differentiated: masked, so expanded too
            m.setRequiresGrad(true);
            CausalLmTest.Batch left = CausalLmTest.batch(AttentionFormsTest.LENGTHS, true, 8);
            Tensor lmask = left.mask();
            Tensor logits = m.forward(left.ids(), CausalLm.positionIds(lmask), lmask, null);
            // the real tokens' logits only, weighted so that every one counts differently
            Tensor w = torch.arange(new org.bytedeco.pytorch.Scalar(logits.numel()),
                    new org.bytedeco.pytorch.TensorOptions(torch.ScalarType.Float)).view(logits.sizes()).cos();
            logits.mul(w).mul(lmask.to(torch.ScalarType.Float).unsqueeze(2)).sum().backward();
            Map<String, float[]> grads = new LinkedHashMap<>();
            m.parameters().forEach((k, t) -> grads.put(k, toFloats(t.grad())));
            return new Run(prefill, keys, values, toFloats(logits.detach()), grads);
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("grouped")
    void expandedKvHeadsGiveTheGroupedForm(String name, ModelConfig c) {
        Run grouped = run(c, false), expanded = run(c, true);
        // The same products and softmax, by another LibTorch kernel (the grouped form on the CPU
        // goes through the math kernel's own repeat of k and v, or a fused kernel that indexes the
        // kv head; the expanded one through the fused kernel): equal to float32 rounding.
        double atol = 1e-5, rtol = 1e-5;
        Tolerance.assertClose(name + ": prefill logits", expanded.prefill(), grouped.prefill(), atol, rtol);
        Tolerance.assertClose(name + ": cached keys of the last layer", expanded.cacheKeys(), grouped.cacheKeys(), atol, rtol);
        Tolerance.assertClose(name + ": cached values of the last layer", expanded.cacheValues(), grouped.cacheValues(), atol, rtol);
        Tolerance.assertClose(name + ": masked forward logits", expanded.forward(), grouped.forward(), atol, rtol);
        for (String k : grouped.grads().keySet()) {
            Tolerance.assertClose(name + ": gradient of " + k, expanded.grads().get(k), grouped.grads().get(k), 1e-4, 1e-4);
        }
    }
}
