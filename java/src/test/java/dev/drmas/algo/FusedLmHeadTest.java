// FusedLmHeadTest.java — the fused LM head (FusedLmHead) against the materialised path: LibTorch
// autograd of the same formula (full [N, V] logits, log_softmax, gather, the entropy, the native
// clipped loss's dL/dlogp fed back through logp, the entropy bonus) for every aggregation, three
// clip settings and every KL estimator, at temperature 0.7 and 1, with chunks that do not divide N,
// N < chunk and one token per chunk, a vocabulary that is not a multiple of 8, tokens outside every
// row and masked tokens (whose targets are invalid: they must never be read). Log-probs, entropies,
// loss sums, dL/dh and dL/dW within fp32 atol 1e-5 + rtol 1e-4; the sums of one chunk bit for bit
// equal to ClippedLoss on the fused log-probs; errors name the bad token.
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.DrmasException;
import dev.drmas.model.Tensors;
import dev.drmas.testing.TorchScope;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.stream.Stream;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;

@ExtendWith(TorchScope.class)
class FusedLmHeadTest {
    static final int N = 23, H = 16, V = 37;
    static final long[] OFFSETS = {1, 6, 6, 13, 21};  // token 0 and tokens 21, 22 belong to no row; row 1 is empty
    static final float[] ROW_ADV = {1.3f, -0.7f, 0.4f, -2.1f};
    static final int MASKED = 8;
    static final double ATOL = 1e-5, RTOL = 1e-4;

    static Stream<Arguments> cases() {
        List<Arguments> out = new ArrayList<>();
        double[][] clips = {{0.2, 0.2, 3.0}, {0.2, 0.28, 0.0}, {0.1, 0.3, 2.0}};
        int i = 0;
        for (LossAggregation agg : LossAggregation.values()) {
            for (double[] clip : clips) {
                for (KlEstimator kl : KlEstimator.values()) {
                    LossConfig c = new LossConfig(clip[0], clip[1], clip[2], kl, kl == KlEstimator.NONE ? 0 : 0.1, agg);
                    out.add(Arguments.of(agg + " clip " + clip[0] + "/" + clip[1] + " dual " + clip[2] + " kl " + kl, c,
                            i++ % 2 == 0 ? 0.7 : 1.0));
                }
            }
        }
        return out.stream();
    }

    /** The inputs of one case: hidden and weight leaves, targets, old/ref log-probs near the policy's, the mask. */
    record Inputs(Tensor hidden, Tensor weight, long[] targets, Tensor old, Tensor ref, boolean[] mask) {
        /** The same inputs on {@code dev} (FusedLmHeadCudaTest). */
        Inputs on(Device dev) {
            return new Inputs(hidden.to(dev, hidden.scalar_type().intern()), weight.to(dev, weight.scalar_type().intern()), targets,
                    old.to(dev, ScalarType.Float), ref.to(dev, ScalarType.Float), mask);
        }
    }

    static final Device CPU = new Device("cpu");

    static Inputs inputs(long seed, double temperature) {
        torch.manual_seed(seed);
        Tensor h = torch.randn(new long[] {N, H}).mul(new Scalar(1.5));
        Tensor w = torch.randn(new long[] {V, H}).mul(new Scalar(0.7));
        SplittableRandom rng = new SplittableRandom(seed);
        long[] y = new long[N];
        for (int t = 0; t < N; t++) y[t] = rng.nextInt(V);
        Tensor lp = FusedLmHead.logProbs(h, w, Tensors.longs(y), temperature, false, 64).logprobs();
        float[] shiftOld = new float[N], shiftRef = new float[N];
        for (int t = 0; t < N; t++) {
            shiftOld[t] = (float) (rng.nextDouble() * 0.6 - 0.3);  // some ratios outside the clip range
            shiftRef[t] = (float) (rng.nextDouble() * 0.8 - 0.4);
        }
        boolean[] mask = new boolean[N];
        java.util.Arrays.fill(mask, true);
        mask[MASKED] = false;
        return new Inputs(h, w, y, lp.add(Tensors.floats(shiftOld)), lp.add(Tensors.floats(shiftRef)),
                mask);
    }

    static boolean valid(int t) {
        return t >= OFFSETS[0] && t < OFFSETS[OFFSETS.length - 1] && t != MASKED;
    }

    static double normalizer(LossConfig c) {
        long tokens = 0;
        for (int t = 0; t < N; t++) tokens += valid(t) ? 1 : 0;
        return c.aggregation().normalizer(tokens, ROW_ADV.length, 12.0);
    }

    static float[] tokenAdvantages() {
        float[] a = new float[N];
        for (int r = 0; r < ROW_ADV.length; r++) {
            for (long t = OFFSETS[r]; t < OFFSETS[r + 1]; t++) a[(int) t] = ROW_ADV[r];
        }
        return a;
    }

    static Tensor maskTensor(boolean[] m) {
        byte[] b = new byte[m.length];
        for (int i = 0; i < m.length; i++) b[i] = (byte) (m[i] ? 1 : 0);
        return torch.from_blob(new org.bytedeco.javacpp.BytePointer(b), new long[] {m.length},
                new TensorOptions(ScalarType.Byte)).clone();
    }

    /** What a pass leaves: log-probs, entropies, loss sums (LMHEAD_SUMS), dL/dh, dL/dW. */
    record Out(float[] logp, float[] entropy, double[] sums, float[] dh, float[] dw) {
    }

    /** The materialised path: autograd through [N, V] logits, ClippedLoss's dL/dlogp, the entropy bonus. */
    static Out materialised(Inputs in, LossConfig c, double temperature, double entCoef) {
        return materialised(in, c, temperature, entCoef, CPU);
    }

    /** {@link #materialised(Inputs, LossConfig, double, double)} with in's tensors on {@code dev} and every other there too. */
    static Out materialised(Inputs in, LossConfig c, double temperature, double entCoef, Device dev) {
        Tensor h = in.hidden().detach().clone().requires_grad_(true);
        Tensor w = in.weight().detach().clone().requires_grad_(true);
        Tensor logits = torch.linear(h, w).to(ScalarType.Float);  // CausalLm.logits: the product in the weights' dtype, then fp32
        if (temperature != 1.0) logits = logits.div(new Scalar(temperature));
        Tensor logp = logits.log_softmax(1);
        long[] y = in.targets().clone();
        Tensor lp = logp.gather(1, Tensors.longs(y).to(dev, ScalarType.Long).unsqueeze(1)).squeeze(1);
        Tensor ent = logp.exp().mul(logp).sum(new long[] {1}, false, new ScalarTypeOptional()).neg();
        ClippedLoss.TensorResult r = ClippedLoss.compute(c, normalizer(c), Tensors.longs(OFFSETS).to(dev, ScalarType.Long),
                lp.detach().contiguous(), in.old(), Tensors.floats(tokenAdvantages()).to(dev, ScalarType.Float),
                c.usesReference() ? in.ref() : null, maskTensor(in.mask()).to(dev, ScalarType.Byte));
        float[] vm = new float[N];
        for (int t = 0; t < N; t++) vm[t] = valid(t) ? 1 : 0;
        Tensor surrogate = lp.mul(r.grad()).sum().sub(ent.mul(Tensors.floats(vm).to(dev, ScalarType.Float)).sum().mul(new Scalar(entCoef)));
        surrogate.backward();
        double[] sums = java.util.Arrays.copyOf(r.sums(), AbiIndices.LMHEAD_SUMS);
        float[] e = Tensors.toFloats(ent.detach());
        for (int t = 0; t < N; t++) if (valid(t)) sums[AbiIndices.LMHEAD_ENTROPY] += e[t];
        return new Out(Tensors.toFloats(lp.detach()), e, sums, Tensors.toFloats(h.grad().to(ScalarType.Float)),
                Tensors.toFloats(w.grad().to(ScalarType.Float)));
    }

    static Out fused(Inputs in, LossConfig c, double temperature, double entCoef, int chunk) {
        return fused(in, c, temperature, entCoef, chunk, CPU);
    }

    /** {@link #fused(Inputs, LossConfig, double, double, int)} with in's tensors on {@code dev}, the targets and mask there too. */
    static Out fused(Inputs in, LossConfig c, double temperature, double entCoef, int chunk, Device dev) {
        Tensor h = in.hidden().detach().clone().requires_grad_(true);
        Tensor w = in.weight().detach().clone().requires_grad_(true);
        long[] y = in.targets().clone();
        y[MASKED] = V + 5;  // never read: outside the vocabulary
        y[0] = -1;          // outside every row
        FusedLmHead.Update u = FusedLmHead.lossAndBackward(h, w, Tensors.longs(y).to(dev, ScalarType.Long), temperature, c,
                normalizer(c), entCoef, OFFSETS, in.old(), ROW_ADV, c.usesReference() ? in.ref() : null,
                maskTensor(in.mask()).to(dev, ScalarType.Byte), chunk);
        return new Out(Tensors.toFloats(u.logprobs()), Tensors.toFloats(u.entropy()), u.sums(),
                Tensors.toFloats(h.grad().to(ScalarType.Float)), Tensors.toFloats(w.grad().to(ScalarType.Float)));
    }

    static void assertClose(String what, float[] want, float[] got) {
        assertEquals(want.length, got.length, what);
        for (int i = 0; i < want.length; i++) {
            assertTrue(Math.abs(got[i] - want[i]) <= ATOL + RTOL * Math.abs(want[i]),
                    what + "[" + i + "]: " + got[i] + ", want " + want[i]);
        }
    }

    static void assertValidClose(String what, float[] want, float[] got) {
        for (int t = 0; t < N; t++) {
            if (valid(t)) {
                assertTrue(Math.abs(got[t] - want[t]) <= ATOL + RTOL * Math.abs(want[t]), what + "[" + t + "]: " + got[t] + ", want " + want[t]);
            } else {
                assertEquals(0.0f, got[t], what + " of invalid token " + t);
            }
        }
    }

    @ParameterizedTest(name = "{0} T {2}")
    @MethodSource("cases")
    void fusedEqualsTheMaterialisedPath(String name, LossConfig c, double temperature) {
        Inputs in = inputs(name.hashCode(), temperature);
        double entCoef = 0.01;
        Out want = materialised(in, c, temperature, entCoef);
        // the comparison means something: gradients are not ~0
        double maxDh = 0;
        for (float v : want.dh()) maxDh = Math.max(maxDh, Math.abs(v));
        assertTrue(maxDh > 1e-3, "dL/dh is ~0: nothing compared");
        for (int chunk : new int[] {5, 64, 1}) {  // 5 does not divide 23; 64 > N
            Out got = fused(in, c, temperature, entCoef, chunk);
            String at = name + ", chunk " + chunk + ": ";
            assertValidClose(at + "logp", want.logp(), got.logp());
            assertValidClose(at + "entropy", want.entropy(), got.entropy());
            for (int k = 0; k < AbiIndices.LMHEAD_SUMS; k++) {
                assertTrue(Math.abs(got.sums()[k] - want.sums()[k]) <= ATOL + RTOL * Math.abs(want.sums()[k]),
                        at + "sums[" + k + "] " + got.sums()[k] + ", want " + want.sums()[k]);
            }
            assertClose(at + "dL/dh", want.dh(), got.dh());
            assertClose(at + "dL/dW", want.dw(), got.dw());
        }
    }

    /**
     * bf16 hidden states and weight (mixed precision's forward): the products run in bf16 on both
     * paths, so they agree to bf16's precision, not fp32's: |got − want| ≤ 2e-2 (|want| + max|want|/10).
     */
    @Test
    void bf16InputsAgreeWithTheMaterialisedPathToBf16Precision() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K1, 0.1);
        Inputs in = inputs(21, 0.8);
        Inputs b = new Inputs(in.hidden().to(ScalarType.BFloat16), in.weight().to(ScalarType.BFloat16), in.targets(), in.old(), in.ref(),
                in.mask());
        Out want = materialised(b, c, 0.8, 0.01), got = fused(b, c, 0.8, 0.01, 5);
        for (String what : new String[] {"logp", "entropy", "dh", "dw"}) {
            float[] w = switch (what) {
                case "logp" -> want.logp();
                case "entropy" -> want.entropy();
                case "dh" -> want.dh();
                default -> want.dw();
            };
            float[] g = switch (what) {
                case "logp" -> got.logp();
                case "entropy" -> got.entropy();
                case "dh" -> got.dh();
                default -> got.dw();
            };
            double max = 0;
            for (float v : w) max = Math.max(max, Math.abs(v));
            assertTrue(max > 1e-4, what + " is ~0");
            for (int i = 0; i < w.length; i++) {
                if ((what.equals("logp") || what.equals("entropy")) && !valid(i)) continue;
                assertTrue(Math.abs(g[i] - w[i]) <= 2e-2 * (Math.abs(w[i]) + max / 10), "bf16 " + what + "[" + i + "]: " + g[i] + ", want " + w[i]);
            }
        }
    }

    @Test
    void oneChunkGivesTheClippedLossKernelsSumsBitForBit() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K3, 0.05).withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        Inputs in = inputs(3, 0.9);
        Tensor h = in.hidden().detach(), w = in.weight().detach();
        FusedLmHead.Update u = FusedLmHead.lossAndBackward(h, w, Tensors.longs(in.targets()), 0.9, c, normalizer(c), 0.0,
                OFFSETS, in.old(), ROW_ADV, in.ref(), maskTensor(in.mask()), 64);
        ClippedLoss.Result r = ClippedLoss.compute(c, normalizer(c), OFFSETS, Tensors.toFloats(u.logprobs()),
                Tensors.toFloats(in.old()), tokenAdvantages(), Tensors.toFloats(in.ref()), in.mask());
        assertArrayEquals(r.sums(), java.util.Arrays.copyOf(u.sums(), AbiIndices.LOSS_SUMS));
        assertEquals(r.loss(), u.loss(), "the update's loss is its loss sum");
        // the forward-only pass (chunks of 5 tokens) gives the update's log-probs and entropies (one
        // chunk of 64) to rounding: the logits are matrix products of other shapes, which some BLAS
        // kernels round differently (an AMD EPYC's OpenBLAS: the 8th digit)
        FusedLmHead.Forward f = FusedLmHead.logProbs(h, w, Tensors.longs(in.targets()), 0.9, true, 5);
        float[] flp = Tensors.toFloats(f.logprobs()), fent = Tensors.toFloats(f.entropy());
        float[] ulp = Tensors.toFloats(u.logprobs()), uent = Tensors.toFloats(u.entropy());
        for (int t = 0; t < N; t++) {
            if (!valid(t)) continue;
            assertEquals(ulp[t], flp[t], 1e-9 + 1e-6 * Math.abs(ulp[t]), "logp " + t);
            assertEquals(uent[t], fent[t], 1e-9 + 1e-6 * Math.abs(uent[t]), "entropy " + t);
        }
        // nothing required grad: no gradient appeared
        assertFalse(w.grad().defined());
    }

    /**
     * A bf16 weight whose .grad exists: the float32 sum of dL/dW is added into it a block of
     * FusedLmHead.GRAD_ADD_ROWS rows at a time; a vocabulary of two blocks and a part must give the
     * start .grad plus the dL/dW a weight without .grad gets (that one rounded to bf16 first, hence a
     * tolerance of bf16's precision on both terms), in every block.
     */
    @Test
    void aBf16GradGetsTheSumInBlocksOfRowsAsOneAddWould() {
        final int v = 2 * FusedLmHead.GRAD_ADD_ROWS + 37, hd = 8, n = 9;
        torch.manual_seed(5);
        Tensor h = torch.randn(new long[] {n, hd}).to(ScalarType.BFloat16);
        Tensor w0 = torch.randn(new long[] {v, hd}).mul(new Scalar(0.3)).to(ScalarType.BFloat16);
        long[] y = new long[n];
        for (int t = 0; t < n; t++) y[t] = (t * 1931L) % v;
        long[] off = {0, 4, 9};
        float[] adv = {0.9f, -0.6f};
        Tensor old = FusedLmHead.logProbs(h, w0, Tensors.longs(y), 1.0, false, 4).logprobs().add(new Scalar(0.1));
        LossConfig c = LossConfig.defaults();
        // the reference: the float32 dL/dW of a weight without .grad, added to the start .grad in one piece
        Tensor wr = w0.detach().clone().requires_grad_(true);
        FusedLmHead.lossAndBackward(h, wr, Tensors.longs(y), 1.0, c, n, 0.01 / n, off, old, adv, null, null, 4);
        Tensor start = torch.randn(new long[] {v, hd}).mul(new Scalar(1e-3)).to(ScalarType.BFloat16);
        Tensor want = start.to(ScalarType.Float).add(wr.grad().to(ScalarType.Float)).to(ScalarType.BFloat16);
        // the blocks: .grad exists (bf16) before the call
        Tensor w = w0.detach().clone().requires_grad_(true);
        w.mutable_grad().put(start.clone());
        FusedLmHead.lossAndBackward(h, w, Tensors.longs(y), 1.0, c, n, 0.01 / n, off, old, adv, null, null, 4);
        float[] got = Tensors.toFloats(w.grad().to(ScalarType.Float)), exp = Tensors.toFloats(want.to(ScalarType.Float));
        float[] st = Tensors.toFloats(start.to(ScalarType.Float)), d = Tensors.toFloats(wr.grad().to(ScalarType.Float));
        int[] moved = new int[3];
        for (int i = 0; i < got.length; i++) {
            assertEquals(exp[i], got[i], 8e-3 * (Math.abs(st[i]) + Math.abs(d[i])) + 1e-9, "grad[" + i + "]");
            if (Math.abs(got[i] - st[i]) > 8e-3 * Math.abs(st[i])) moved[i / hd / FusedLmHead.GRAD_ADD_ROWS]++;
        }
        for (int k = 0; k < 3; k++) assertTrue(moved[k] > 0, "block " + k + " of the rows must get its dL/dW: " + java.util.Arrays.toString(moved));
    }

    /**
     * A vocabulary limit on a bf16 weight (the reduced-precision paths: dL/dW summed in float32, then
     * rounded into a new .grad or added into an existing one): the head's first rows give what a
     * weight of only those rows gives, bit for bit, and the rows past the limit get no gradient (a new
     * .grad holds 0 there, an existing one keeps its values).
     */
    @Test
    void aVocabularyLimitOnABf16WeightActsAsTheNarrowerHead() {
        final int v = 2 * FusedLmHead.GRAD_ADD_ROWS + 37, lim = v - 5, hd = 8, n = 9;
        torch.manual_seed(7);
        Tensor h = torch.randn(new long[] {n, hd}).to(ScalarType.BFloat16);
        Tensor w0 = torch.randn(new long[] {v, hd}).mul(new Scalar(0.3)).to(ScalarType.BFloat16);
        long[] y = new long[n];
        for (int t = 0; t < n; t++) y[t] = (t * 1931L) % lim;
        long[] off = {0, 4, 9};
        float[] adv = {0.9f, -0.6f};
        LossConfig c = LossConfig.defaults();
        Tensor small = w0.narrow(0, 0, lim).clone();
        Tensor old = FusedLmHead.logProbs(h, small, Tensors.longs(y), 1.0, false, 4).logprobs().add(new Scalar(0.1));
        assertArrayEquals(Tensors.toFloats(old.sub(new Scalar(0.1))),
                Tensors.toFloats(FusedLmHead.logProbs(h, w0, Tensors.longs(y), 1.0, false, 4, lim).logprobs()), "log-probs");
        Tensor start = torch.randn(new long[] {v, hd}).mul(new Scalar(1e-3)).to(ScalarType.BFloat16);
        for (boolean hasGrad : new boolean[] {false, true}) {
            Tensor ws = small.detach().clone().requires_grad_(true), w = w0.detach().clone().requires_grad_(true);
            if (hasGrad) {
                ws.mutable_grad().put(start.narrow(0, 0, lim).clone());
                w.mutable_grad().put(start.clone());
            }
            FusedLmHead.lossAndBackward(h, ws, Tensors.longs(y), 1.0, c, n, 0.01 / n, off, old, adv, null, null, 4);
            FusedLmHead.lossAndBackward(h, w, Tensors.longs(y), 1.0, c, n, 0.01 / n, off, old, adv, null, null, 4, lim);
            float[] got = Tensors.toFloats(w.grad().to(ScalarType.Float));
            assertArrayEquals(Tensors.toFloats(ws.grad().to(ScalarType.Float)), java.util.Arrays.copyOfRange(got, 0, lim * hd),
                    "rows below the limit, .grad before: " + hasGrad);
            float[] past = hasGrad ? Tensors.toFloats(start.narrow(0, lim, v - lim).to(ScalarType.Float)) : new float[(v - lim) * hd];
            assertArrayEquals(past, java.util.Arrays.copyOfRange(got, lim * hd, got.length), "rows past the limit, .grad before: " + hasGrad);
        }
    }

    /**
     * The chunks' sums are added in chunk order: with one token a chunk (token-mean, so that a token's
     * terms do not depend on its row's length), the update's sums are, bit for bit, the fold in token
     * order of the clipped loss kernel's sums of each valid token alone on the fused log-probs.
     */
    @Test
    void theChunksSumsAreAddedInChunkOrder() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K3, 0.05);
        Inputs in = inputs(31, 1.0);
        Tensor h = in.hidden().detach(), w = in.weight().detach();
        FusedLmHead.Update u = FusedLmHead.lossAndBackward(h, w, Tensors.longs(in.targets()), 1.0, c, normalizer(c), 0.0,
                OFFSETS, in.old(), ROW_ADV, in.ref(), maskTensor(in.mask()), 1);
        float[] lp = Tensors.toFloats(u.logprobs()), old = Tensors.toFloats(in.old()), ref = Tensors.toFloats(in.ref());
        float[] adv = tokenAdvantages();
        double[] want = new double[AbiIndices.LOSS_SUMS];
        for (int t = 0; t < N; t++) {
            if (!valid(t)) continue;
            double[] one = ClippedLoss.compute(c, normalizer(c), new long[] {0, 1}, new float[] {lp[t]}, new float[] {old[t]},
                    new float[] {adv[t]}, new float[] {ref[t]}, null).sums();
            for (int j = 0; j < want.length; j++) want[j] += one[j];
        }
        assertArrayEquals(want, java.util.Arrays.copyOf(u.sums(), AbiIndices.LOSS_SUMS));
    }

    /** Temperature 0 counts as 1 (greedy rollouts score at T 1): the whole pass and the forward-only one. */
    @Test
    void temperatureZeroCountsAsOne() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K2, 0.1);
        Inputs in = inputs(17, 1.0);
        Out want = materialised(in, c, 1.0, 0.01), got = fused(in, c, 0.0, 0.01, 5);
        assertValidClose("T 0: logp", want.logp(), got.logp());
        assertValidClose("T 0: entropy", want.entropy(), got.entropy());
        for (int k = 0; k < AbiIndices.LMHEAD_SUMS; k++) {
            assertTrue(Math.abs(got.sums()[k] - want.sums()[k]) <= ATOL + RTOL * Math.abs(want.sums()[k]),
                    "T 0: sums[" + k + "] " + got.sums()[k] + ", want " + want.sums()[k]);
        }
        assertClose("T 0: dL/dh", want.dh(), got.dh());
        assertClose("T 0: dL/dW", want.dw(), got.dw());
        FusedLmHead.Forward f = FusedLmHead.logProbs(in.hidden().detach(), in.weight().detach(), Tensors.longs(in.targets()),
                0.0, true, 5);
        assertClose("T 0: forward-only logp", want.logp(), Tensors.toFloats(f.logprobs()));
        assertClose("T 0: forward-only entropy", want.entropy(), Tensors.toFloats(f.entropy()));
    }

    /** The forward-only pass with chunks that divide N (one token each, all N at once) and without entropies. */
    @Test
    void logProbsInChunksThatDivideTheTokens() {
        LossConfig c = LossConfig.defaults();
        Inputs in = inputs(19, 0.7);
        Out want = materialised(in, c, 0.7, 0.0);
        for (int chunk : new int[] {1, N}) {
            FusedLmHead.Forward f = FusedLmHead.logProbs(in.hidden().detach(), in.weight().detach(), Tensors.longs(in.targets()),
                    0.7, chunk == 1, chunk);
            assertClose("chunk " + chunk + ": logp", want.logp(), Tensors.toFloats(f.logprobs()));
            if (chunk == 1) assertClose("chunk 1: entropy", want.entropy(), Tensors.toFloats(f.entropy()));
            else assertEquals(null, f.entropy(), "no entropies asked for");
        }
    }

    /**
     * No valid token: rows that are all empty (the targets check has nothing to look at) or no rows
     * at all (no row advantages to copy). The loss, the entropy sum and every gradient are 0.
     */
    @Test
    void noValidTokensGiveNoLossAndNoGradient() {
        LossConfig c = LossConfig.defaults();
        Inputs in = inputs(23, 1.0);
        for (long[] off : new long[][] {{4, 4, 4}, {0}}) {
            float[] adv = new float[off.length - 1];
            java.util.Arrays.fill(adv, 1.5f);
            Tensor h = in.hidden().detach().clone().requires_grad_(true);
            Tensor w = in.weight().detach().clone().requires_grad_(true);
            FusedLmHead.Update u = FusedLmHead.lossAndBackward(h, w, Tensors.longs(in.targets()), 1.0, c, 1.0, 0.01, off, in.old(),
                    adv, null, null, 5);
            String what = "offsets " + java.util.Arrays.toString(off);
            assertArrayEquals(new double[AbiIndices.LMHEAD_SUMS], u.sums(), what + ": sums");
            assertArrayEquals(new float[N * H], Tensors.toFloats(h.grad()), what + ": dL/dh");
            assertArrayEquals(new float[V * H], Tensors.toFloats(w.grad()), what + ": dL/dW");
        }
    }

    @Test
    void offsetsOneLongerThanTheRowAdvantages() {
        Inputs in = inputs(29, 1.0);
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.lossAndBackward(
                in.hidden().detach(), in.weight().detach(), Tensors.longs(in.targets()), 1.0, LossConfig.defaults(), 1.0, 0.0,
                new long[] {0, 3, 5}, in.old(), new float[] {1f}, null, null, 5));
        assertEquals("offsets has 3 entries but 1 row advantages need 2", e.getMessage());
    }

    /** 128 MiB of fp32 logits a chunk, between 16 and 65536 tokens. */
    @Test
    void defaultChunkTokensForAVocabulary() {
        assertEquals(65536, FusedLmHead.defaultChunkTokens(0));
        assertEquals(65536, FusedLmHead.defaultChunkTokens(1));
        assertEquals(65536, FusedLmHead.defaultChunkTokens(512));     // 2^27 / 2^11 = 2^16
        assertEquals(32768, FusedLmHead.defaultChunkTokens(1024));
        assertEquals(220, FusedLmHead.defaultChunkTokens(151936));    // 134217728 / 607744 = 220.8
        assertEquals(16, FusedLmHead.defaultChunkTokens(1L << 21));   // exactly 16
        assertEquals(16, FusedLmHead.defaultChunkTokens(1L << 30));   // 0.125, raised to 16
    }

    @Test
    void weightGradientsAccumulateAndErrorsNameTheToken() {
        Inputs in = inputs(9, 1.0);
        LossConfig c = LossConfig.defaults();
        Tensor w = in.weight().detach().clone().requires_grad_(true);
        Tensor h = in.hidden().detach();
        FusedLmHead.lossAndBackward(h, w, Tensors.longs(in.targets()), 1.0, c, normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV,
                null, null, 7);
        float[] once = Tensors.toFloats(w.grad());
        FusedLmHead.lossAndBackward(h, w, Tensors.longs(in.targets()), 1.0, c, normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV,
                null, null, 7);
        float[] twice = Tensors.toFloats(w.grad());
        for (int i = 0; i < once.length; i++) assertEquals(2 * once[i], twice[i], 1e-6 + 1e-6 * Math.abs(once[i]), "accumulated " + i);
        long[] bad = in.targets().clone();
        bad[14] = V;
        float[] before = Tensors.toFloats(w.grad());
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.lossAndBackward(h, w, Tensors.longs(bad), 1.0,
                c, normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV, null, null, 5));
        assertTrue(e.getMessage().contains("targets[14] = 37"), e.getMessage());
        // the kernel's own check (offsets that the Java side does not read: row 2 ends past the tokens)
        DrmasException k = assertThrows(DrmasException.class, () -> FusedLmHead.lossAndBackward(h, w.detach(), Tensors.longs(in.targets()),
                1.0, c, normalizer(c), 0.0, new long[] {1, 6, 6, 13, 40}, in.old(), ROW_ADV, null, null, 5));
        assertTrue(k.getMessage().contains("row_offsets[4] = 40 is past num_tokens = 23"), k.getMessage());
        assertArrayEquals(before, Tensors.toFloats(w.grad()), "a failed call changed the gradient");
        Tensor hn = in.hidden().detach().clone();
        hn.narrow(0, 16, 1).fill_(new Scalar(Double.NaN));
        IllegalArgumentException f = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.logProbs(hn, w.detach(),
                Tensors.longs(in.targets()), 1.0, false, 5));
        // token 16 is row 1 of the chunk at 15
        assertTrue(f.getMessage().contains("tokens [15, 20)") && f.getMessage().contains("token 1, vocabulary index 0"), f.getMessage());
        // tensors on two devices are refused before anything runs (meta stands for a second device here)
        Tensor metaTargets = torch.empty(new long[] {N}, new TensorOptions(ScalarType.Long).device(
                new org.bytedeco.pytorch.DeviceOptional(new org.bytedeco.pytorch.Device("meta"))), null);
        IllegalArgumentException split = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.logProbs(h, w.detach(), metaTargets,
                1.0, false, 5));
        assertTrue(split.getMessage().contains("one device") && split.getMessage().contains("meta"), split.getMessage());
    }
}
