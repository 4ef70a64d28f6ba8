// CausalLmTest.java — the transformer against an independent op-by-op reference written here
// (one unpadded sequence at a time, per-head matmuls, rotation by explicit pair formulas, rotary
// frequencies from the paper's formulas), and KV-cache decoding against a full forward, for each
// family, with batches of mixed prompt lengths.
package dev.drmas.model;

import dev.drmas.testing.TorchScope;

import static dev.drmas.algo.TorchReference.bools;
import static dev.drmas.algo.TorchReference.floats;
import static dev.drmas.algo.TorchReference.longs;
import static dev.drmas.algo.TorchReference.toFloats;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.Tolerance;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@ExtendWith(TorchScope.class)
class CausalLmTest {
    static final int VOCAB = 97; // prime, so no dimension coincides with it
    static final double ATOL = 1e-4, RTOL = 1e-4;


    /** The variants under test: each family's tiny preset, plus Llama tied and biased variants. */
    static Stream<Arguments> variants() {
        ModelConfig llama = ModelConfig.tiny(Family.LLAMA, VOCAB);
        ModelConfig llamaBias = new ModelConfig(Family.LLAMA, 48, 96, 2, 4, 4, 12, 1e-6, 5e5, RopeScaling.linear(4), VOCAB,
                false, true, true, 128, "float32", 1, List.of(2, 3), Map.of());
        return Stream.of(
                Arguments.of("qwen2 (q/k/v bias, tied)", ModelConfig.tiny(Family.QWEN2, VOCAB)),
                Arguments.of("qwen3 (q/k norm, head_dim 32)", ModelConfig.tiny(Family.QWEN3, VOCAB)),
                Arguments.of("llama (llama3 rope, GQA 4:1)", llama),
                Arguments.of("llama tied", llama.withTiedEmbeddings(true)),
                Arguments.of("llama (attention/mlp bias, linear rope, MHA)", llamaBias));
    }

    /**
     * A random model whose weights are 5× the init scale (so attention is far from uniform and every
     * path moves the logits well above the tolerance) and whose norm weights are not all 1 (so a
     * misplaced norm weight shows).
     */
    static CausalLm model(ModelConfig c, long seed) {
        CausalLm m = CausalLm.random(c, seed);
        try (PointerScope s = new PointerScope(); NoGradGuard g = new NoGradGuard()) {
            Random rnd = new Random(seed);
            for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                if (!e.getKey().endsWith("norm.weight")) {
                    e.getValue().mul_(new Scalar(5.0));
                    continue;
                }
                float[] w = new float[(int) e.getValue().numel()];
                for (int i = 0; i < w.length; i++) w[i] = 1f + 0.3f * (float) rnd.nextGaussian();
                e.getValue().copy_(floats(w));
            }
        }
        return m;
    }

    // ================================================================== the reference

    /** Rotary inverse frequencies from the formulas (theta^(-2i/d), then the scaling). */
    static double[] handInverseFrequencies(ModelConfig c) {
        int d = c.headDim();
        double[] f = new double[d / 2];
        for (int i = 0; i < d / 2; i++) f[i] = Math.pow(c.ropeTheta(), -2.0 * i / d);
        RopeScaling s = c.ropeScaling();
        if (s == null) return f;
        for (int i = 0; i < f.length; i++) {
            if (s.type() == RopeScaling.Type.LINEAR) {
                f[i] = f[i] / s.factor();
                continue;
            }
            double wavelength = 2 * Math.PI / f[i];
            double lowFreqWavelength = s.originalMaxPositions() / s.lowFreqFactor();
            double highFreqWavelength = s.originalMaxPositions() / s.highFreqFactor();
            if (wavelength < highFreqWavelength) continue; // high frequencies: unchanged
            if (wavelength > lowFreqWavelength) {
                f[i] = f[i] / s.factor();                  // low frequencies: interpolated
            } else {
                double alpha = (s.originalMaxPositions() / wavelength - s.lowFreqFactor())
                        / (s.highFreqFactor() - s.lowFreqFactor());
                f[i] = (1 - alpha) * f[i] / s.factor() + alpha * f[i];
            }
        }
        return f;
    }

    static Tensor rms(Tensor x, Tensor w, double eps) {
        Tensor ms = x.mul(x).mean(new long[]{-1}, true, new org.bytedeco.pytorch.ScalarTypeOptional());
        return x.mul(ms.add(new Scalar(eps)).pow(new Scalar(-0.5))).mul(w);
    }

    /** Rotates pairs (j, j + d/2) of each row of x [n, d] by angle position[row] · freq[j]. */
    static Tensor rotate(Tensor x, double[] cos, double[] sin, int n, int half) {
        float[] c = new float[n * half], s = new float[n * half];
        for (int i = 0; i < c.length; i++) {
            c[i] = (float) cos[i];
            s[i] = (float) sin[i];
        }
        Tensor ct = floats(c).view(n, half), st = floats(s).view(n, half);
        Tensor x1 = x.narrow(1, 0, half), x2 = x.narrow(1, half, half);
        Tensor y1 = x1.mul(ct).sub(x2.mul(st));
        Tensor y2 = x2.mul(ct).add(x1.mul(st));
        return torch.cat(new TensorVector(y1, y2), 1);
    }

    static Tensor proj(Map<String, Tensor> p, String name, Tensor x) {
        Tensor y = x.matmul(p.get(name + ".weight").t());
        Tensor b = p.get(name + ".bias");
        return b == null ? y : y.add(b);
    }

    /** Logits [n, V] of one unpadded sequence at positions 0..n−1, composed op by op. */
    static Tensor referenceLogits(CausalLm m, long[] tokens) {
        ModelConfig c = m.config();
        Map<String, Tensor> p = m.parameters();
        int n = tokens.length, d = c.headDim(), half = d / 2, group = c.numHeads() / c.numKvHeads();
        double eps = c.rmsNormEps();
        double[] f = handInverseFrequencies(c);
        double[] cos = new double[n * half], sin = new double[n * half];
        for (int i = 0; i < n; i++) {
            for (int j = 0; j < half; j++) {
                cos[i * half + j] = Math.cos(i * f[j]);
                sin[i * half + j] = Math.sin(i * f[j]);
            }
        }
        // causal: row i sees columns 0..i
        boolean[] future = new boolean[n * n];
        for (int i = 0; i < n; i++) for (int j = i + 1; j < n; j++) future[i * n + j] = true;
        Tensor futureMask = bools(future).view(n, n);

        Tensor x = p.get("model.embed_tokens.weight").index_select(0, longs(tokens));
        for (int l = 0; l < c.numLayers(); l++) {
            String a = "model.layers." + l + ".self_attn.";
            Tensor h = rms(x, p.get("model.layers." + l + ".input_layernorm.weight"), eps);
            Tensor q = proj(p, a + "q_proj", h), k = proj(p, a + "k_proj", h), v = proj(p, a + "v_proj", h);
            List<Tensor> heads = new ArrayList<>();
            for (int hd = 0; hd < c.numHeads(); hd++) {
                int kvh = hd / group;
                Tensor qh = q.narrow(1, (long) hd * d, d), kh = k.narrow(1, (long) kvh * d, d);
                Tensor vh = v.narrow(1, (long) kvh * d, d);
                if (c.family() == Family.QWEN3) {
                    qh = rms(qh, p.get(a + "q_norm.weight"), eps);
                    kh = rms(kh, p.get(a + "k_norm.weight"), eps);
                }
                qh = rotate(qh, cos, sin, n, half);
                kh = rotate(kh, cos, sin, n, half);
                Tensor scores = qh.matmul(kh.t()).div(new Scalar(Math.sqrt(d)))
                        .masked_fill(futureMask, new Scalar(Double.NEGATIVE_INFINITY));
                heads.add(scores.softmax(1).matmul(vh));
            }
            Tensor attn = torch.cat(new TensorVector(heads.toArray(new Tensor[0])), 1);
            x = x.add(proj(p, a + "o_proj", attn));
            String mlp = "model.layers." + l + ".mlp.";
            Tensor h2 = rms(x, p.get("model.layers." + l + ".post_attention_layernorm.weight"), eps);
            Tensor g = proj(p, mlp + "gate_proj", h2);
            Tensor silu = g.mul(g.sigmoid());
            x = x.add(proj(p, mlp + "down_proj", silu.mul(proj(p, mlp + "up_proj", h2))));
        }
        x = rms(x, p.get("model.norm.weight"), eps);
        Tensor head = c.tieWordEmbeddings() ? p.get("model.embed_tokens.weight") : p.get("lm_head.weight");
        return x.matmul(head.t());
    }

    // ================================================================== batches

    /** A padded batch: tokens [B, S], key-validity mask, and where each row's real tokens are. */
    record Batch(long[][] tokens, boolean[][] valid) {
        int rows() {
            return tokens.length;
        }

        int slots() {
            return tokens[0].length;
        }

        Tensor ids() {
            return longs(flat(tokens)).view(rows(), slots());
        }

        Tensor mask() {
            boolean[] f = new boolean[rows() * slots()];
            for (int b = 0; b < rows(); b++) System.arraycopy(valid[b], 0, f, b * slots(), slots());
            return bools(f).view(rows(), slots());
        }

        long[] realTokens(int b) {
            List<Long> t = new ArrayList<>();
            for (int s = 0; s < slots(); s++) if (valid[b][s]) t.add(tokens[b][s]);
            return t.stream().mapToLong(Long::longValue).toArray();
        }

        static long[] flat(long[][] a) {
            return java.util.Arrays.stream(a).flatMapToLong(java.util.Arrays::stream).toArray();
        }
    }

    /** Rows of the given lengths padded to the longest, on the left or right; pads hold token 0. */
    static Batch batch(int[] lengths, boolean left, long seed) {
        Random rnd = new Random(seed);
        int s = java.util.Arrays.stream(lengths).max().orElseThrow();
        long[][] tokens = new long[lengths.length][s];
        boolean[][] valid = new boolean[lengths.length][s];
        for (int b = 0; b < lengths.length; b++) {
            int start = left ? s - lengths[b] : 0;
            for (int i = 0; i < lengths[b]; i++) {
                tokens[b][start + i] = 1 + rnd.nextInt(VOCAB - 1);
                valid[b][start + i] = true;
            }
        }
        return new Batch(tokens, valid);
    }

    /** Logits of the real tokens of row b of a [B, S, V] result, as [n, V]. */
    static float[] rowLogits(Tensor logits, Batch batch, int b) {
        List<Long> slots = new ArrayList<>();
        for (int s = 0; s < batch.slots(); s++) if (batch.valid[b][s]) slots.add((long) s);
        Tensor idx = longs(slots.stream().mapToLong(Long::longValue).toArray());
        return toFloats(logits.select(0, b).index_select(0, idx));
    }

    // ================================================================== tests

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void forwardMatchesReferenceForEachSequenceAlone(String name, ModelConfig c) {
        try (CausalLm m = model(c, 11)) {
            for (boolean left : new boolean[]{true, false}) {
                Batch batch = batch(new int[]{7, 3, 1, 6}, left, 5);
                Tensor mask = batch.mask();
                Tensor logits = m.forward(batch.ids(), CausalLm.positionIds(mask), mask, null);
                assertEquals(List.of(4L, 7L, (long) VOCAB), List.of(logits.size(0), logits.size(1), logits.size(2)));
                for (int b = 0; b < batch.rows(); b++) {
                    Tolerance.assertClose(name + (left ? " left" : " right") + "-padded row " + b,
                            rowLogits(logits, batch, b), toFloats(referenceLogits(m, batch.realTokens(b))), ATOL, RTOL);
                }
            }
        }
    }

    @ParameterizedTest(name = "{0}")
    @MethodSource("variants")
    void kvCacheDecodingMatchesFullForward(String name, ModelConfig c) {
        try (CausalLm m = model(c, 12)) {
            int prompt = 6, generated = 5;
            // prompts of 6, 2 and 4 tokens, left-padded, then 5 tokens appended to every row
            Batch prompts = batch(new int[]{prompt, 2, 4}, true, 7);
            Random rnd = new Random(8);
            long[][] tokens = new long[3][prompt + generated];
            boolean[][] valid = new boolean[3][prompt + generated];
            for (int b = 0; b < 3; b++) {
                System.arraycopy(prompts.tokens[b], 0, tokens[b], 0, prompt);
                System.arraycopy(prompts.valid[b], 0, valid[b], 0, prompt);
                for (int s = prompt; s < prompt + generated; s++) {
                    tokens[b][s] = 1 + rnd.nextInt(VOCAB - 1);
                    valid[b][s] = true;
                }
            }
            Batch all = new Batch(tokens, valid);
            Tensor ids = all.ids(), mask = all.mask(), pos = CausalLm.positionIds(mask);
            float[] full = toFloats(m.forward(ids, pos, mask, null));

            // decoding on the CPU goes through DecodeStep, whose steps of more rows run libdrmas's
            // attention (or LibTorch's ops); the general path (GPUs, bfloat16) must agree too
            for (int mode = 0; mode < 3; mode++) {
                boolean decodeStep = mode < 2;
                m.decodeStepOn = decodeStep;
                m.decodeNative(mode == 0);
                String path = mode == 0 ? " (DecodeStep, native attention)" : mode == 1 ? " (DecodeStep, LibTorch attention)" : " (general path)";
                try (KvCache cache = m.newCache(3, prompt + generated + 2)) {
                    long keysAddress = cache.keys(0).data_ptr().address();
                    for (int round = 0; round < 2; round++) { // the second round reuses the cache after reset()
                        cache.reset();
                        List<Tensor> pieces = new ArrayList<>();
                        // prefill in two chunks (4 + 2 slots), then decode one token per step
                        int[] steps = {4, 2, 1, 1, 1, 1, 1};
                        int at = 0;
                        for (int t : steps) {
                            pieces.add(m.forward(ids.narrow(1, at, t), pos.narrow(1, at, t), mask.narrow(1, 0, at + t), cache));
                            at += t;
                            assertEquals(at, cache.length());
                        }
                        float[] incremental = toFloats(torch.cat(new TensorVector(pieces.toArray(new Tensor[0])), 1));
                        Tolerance.assertClose(name + path + " cached vs full, round " + round, incremental, full, ATOL, RTOL);
                        assertEquals(keysAddress, cache.keys(0).data_ptr().address(), "the cache was reallocated");
                    }
                    // two more slots fit, three do not
                    Tensor three = ids.narrow(1, 0, 3);
                    IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                            () -> m.forward(three, pos.narrow(1, 0, 3), torch.ones(new long[]{3, prompt + generated + 3},
                                    new org.bytedeco.pytorch.TensorOptions(torch.ScalarType.Bool)), cache));
                    assertTrue(e.getMessage().contains("KV cache is full: 11 + 3 tokens exceed its capacity 13"), e.getMessage());
                }
                // one row alone: its decoding steps (DecodeStep: its one-row path) must agree with
                // the full forward of the same row; row 1 is left-padded (4 pad slots
                // its decoding steps must not attend to)
                for (int row : new int[]{0, 1}) {
                    Tensor ids1 = ids.narrow(0, row, 1), mask1 = mask.narrow(0, row, 1), pos1 = pos.narrow(0, row, 1);
                    float[] full1 = toFloats(m.forward(ids1, pos1, mask1, null));
                    try (KvCache cache = m.newCache(1, prompt + generated)) {
                        List<Tensor> pieces = new ArrayList<>();
                        int at = 0;
                        for (int t : new int[]{4, 2, 1, 1, 1, 1, 1}) {
                            pieces.add(m.forward(ids1.narrow(1, at, t), pos1.narrow(1, at, t), mask1.narrow(1, 0, at + t), cache));
                            at += t;
                        }
                        float[] incremental = toFloats(torch.cat(new TensorVector(pieces.toArray(new Tensor[0])), 1));
                        Tolerance.assertClose(name + path + " row " + row + " alone, cached vs full", incremental, full1, ATOL, RTOL);
                    }
                }
            }
        }
    }

    @Test
    void oneRowDecodingRestoresTheThreadCount() {
        // a one-row decoding step runs with one intra-op thread and must hand the caller's back
        int before = torch.get_num_threads();
        torch.set_num_threads(2);
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 1); KvCache cache = m.newCache(1, 4)) {
            Tensor ids = longs(1, 2).view(1, 2), mask = longs(1, 1, 1).view(1, 3);
            m.forward(ids, longs(0, 1).view(1, 2), mask.narrow(1, 0, 2), cache);
            m.forward(longs(3).view(1, 1), longs(2).view(1, 1), mask, cache);
            assertEquals(3, cache.length());
            assertEquals(2, torch.get_num_threads());
        } finally {
            torch.set_num_threads(before);
        }
    }

    @Test
    void badInputsAreRejectedWithTheirShape() {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 1); KvCache cache = m.newCache(2, 8)) {
            Tensor ids = longs(1, 2, 3, 4).view(2, 2);
            Tensor pos = longs(0, 1, 0, 1).view(2, 2);
            cacheWithOne(m, cache);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                    () -> m.forward(ids, pos, bools(true, true, true, true).view(2, 2), cache));
            assertTrue(e.getMessage().contains("attention_mask must have shape [2, 3], got [2, 2]"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forward(ids, longs(0, 1), bools(true, true), null));
            assertTrue(e.getMessage().contains("position_ids must have shape [2, 2], got [2]"), e.getMessage());
            try (KvCache other = m.newCache(3, 8)) {
                e = assertThrows(IllegalArgumentException.class,
                        () -> m.forward(ids, pos, bools(true, true, true, true).view(2, 2), other));
                assertTrue(e.getMessage().contains("KV cache holds 3 rows but input_ids has 2"), e.getMessage());
            }
        }
    }

    /** Fills one slot of {@code cache}, so that the next forward must cover 1 + T mask slots. */
    private static void cacheWithOne(CausalLm m, KvCache cache) {
        m.forward(longs(1, 1).view(2, 1), longs(0, 0).view(2, 1), bools(true, true).view(2, 1), cache);
    }

    @Test
    void gradientsReachEveryParameter() {
        // tied Llama: the embedding receives gradient both as the input table and as the LM head
        for (ModelConfig c : List.of(ModelConfig.tiny(Family.LLAMA, VOCAB).withTiedEmbeddings(true),
                ModelConfig.tiny(Family.QWEN3, VOCAB))) {
            try (CausalLm m = model(c, 3)) {
                m.setRequiresGrad(true);
                Batch batch = batch(new int[]{5, 3}, false, 4);
                Tensor mask = batch.mask();
                Tensor logits = m.forward(batch.ids(), CausalLm.positionIds(mask), mask, null);
                Tensor loss = torch.log_softmax(logits, -1).select(2, 5).mul(mask.to(torch.ScalarType.Float)).sum();
                loss.backward();
                for (Map.Entry<String, Tensor> e : m.parameters().entrySet()) {
                    Tensor g = e.getValue().grad();
                    assertTrue(g.defined(), e.getKey() + " has no gradient");
                    assertTrue(g.abs().sum().item_double() > 0, e.getKey() + " has a zero gradient");
                }
                // a forward with a KV cache is inference: no graph, even with trainable parameters
                try (KvCache cache = m.newCache(2, 5)) {
                    Tensor cached = m.forward(batch.ids(), CausalLm.positionIds(mask), mask, cache);
                    assertTrue(logits.requires_grad(), "logits");
                    assertTrue(!cached.requires_grad(), "cached");
                }
            }
        }
    }

    // ================================================================== checks found untested (PIT review)

    @Test
    void aLeftPaddedPairIsMaskedNotCausal() {
        // two slots, the first padding: the real token must not read the padding slot (a mask of
        // two slots is checked for right padding like a longer one)
        try (CausalLm m = model(ModelConfig.tiny(Family.QWEN3, VOCAB), 12)) {
            Tensor mask = bools(false, true).view(1, 2);
            Tensor logits = m.forward(longs(40, 7).view(1, 2), CausalLm.positionIds(mask), mask, null);
            Tolerance.assertClose("the real token", toFloats(logits.select(1, 1)), toFloats(referenceLogits(m, new long[]{7})), ATOL, RTOL);
        }
    }

    @Test
    void inputShapesAreNamedExactly() {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN2, VOCAB), 1); KvCache cache = m.newCache(2, 8)) {
            Tensor ids = longs(1, 2, 3, 4).view(2, 2), pos = longs(0, 1, 0, 1).view(2, 2), mask = bools(true, true, true, true).view(2, 2);
            IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> m.forward(longs(1, 2), pos, mask, null));
            assertEquals("input_ids must be [batch, tokens], got [2]", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forward(null, pos, mask, null));
            assertEquals("input_ids must be [batch, tokens], got null", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forward(ids, pos.view(2, 2, 1), mask, null));
            assertEquals("position_ids must have shape [2, 2], got [2, 2, 1]", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forward(ids, pos, null, null));
            assertEquals("attention_mask must have shape [2, 2], got null (it covers the cached slots plus the new tokens)", e.getMessage());

            // forwardAt: one token per row, the write slot among the mask's slots, those within the cache
            Tensor one = longs(1, 2).view(2, 1), onePos = longs(0, 0).view(2, 1), slots = bools(true, true, true, true).view(2, 2);
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, slots, null, 0));
            assertEquals("forwardAt needs a KV cache", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(ids, pos, slots, cache, 0));
            assertEquals("forwardAt takes one token per row: input_ids must be [batch, 1], got [2, 2]", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, bools(true, true), cache, 0));
            assertEquals("attention_mask must be [batch, slots], got [2]", e.getMessage());
            for (long at : new long[] {-1, 2}) {
                e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, slots, cache, at));
                assertEquals("forwardAt: write slot " + at + " must lie in the mask's 2 slots, and they within the cache's capacity 8",
                        e.getMessage());
            }
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, bools(new boolean[18]).view(2, 9), cache, 0));
            assertEquals("forwardAt: write slot 0 must lie in the mask's 9 slots, and they within the cache's capacity 8", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, longs(0, 0, 0).view(3, 1), slots, cache, 0));
            assertEquals("position_ids must have shape [2, 1], got [3, 1]", e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, bools(new boolean[6]).view(3, 2), cache, 0));
            assertEquals("attention_mask must have shape [2, 2], got [3, 2] (it covers the cached slots plus the new tokens)", e.getMessage());
            try (KvCache three = m.newCache(3, 8)) {
                e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(one, onePos, slots, three, 0));
                assertEquals("KV cache holds 3 rows but input_ids has 2", e.getMessage());
            }
            // the mask may cover the whole cache, the write slot its last
            Tensor out = m.forwardAt(one, onePos, bools(new boolean[16]).view(2, 8), cache, 7);
            assertEquals(List.of(2L, 1L, (long) VOCAB), List.of(out.size(0), out.size(1), out.size(2)));
        }
    }
}
