// FusedLmHeadCudaTest.java — FusedLmHeadTest's comparisons on CUDA tensors: the fused LM head on a
// GPU (LibTorch's cuBLAS products, the drmas CUDA kernel on LibTorch's current stream) against the
// materialised path on the same GPU, for every aggregation, clip setting and KL estimator, with the
// same awkward shapes, bf16 inputs; and against the fused path on the CPU (the two backends differ
// by rounding: expf, the order of the sums). Errors on CUDA name the bad token as on the CPU, a bad
// target leaves .grad untouched, tensors on two devices are refused. Tagged "gpu"; skipped with a
// message where LibTorch or libdrmas has no usable CUDA device, failed instead when
// DRMAS_REQUIRE_GPU=1 (a GPU check).
package dev.drmas.algo;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.FusedLmHeadTest.Inputs;
import dev.drmas.algo.FusedLmHeadTest.Out;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.DrmasException;
import dev.drmas.model.Tensors;
import dev.drmas.testing.TorchScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

@Tag("gpu")
@ExtendWith(TorchScope.class)
class FusedLmHeadCudaTest {
    static final int N = FusedLmHeadTest.N, V = FusedLmHeadTest.V;
    static final long[] OFFSETS = FusedLmHeadTest.OFFSETS;
    static final float[] ROW_ADV = FusedLmHeadTest.ROW_ADV;

    /** Why CUDA cannot run here, or null when it can: LibTorch's build and libdrmas's both need a GPU. */
    static String noCuda() {
        boolean torchCuda = torch.cuda_is_available(), drmasCuda = Backend.CUDA.available();
        if (torchCuda && drmasCuda) return null;
        return "no CUDA device (LibTorch sees one: " + torchCuda + ", libdrmas's CUDA backend usable: " + drmasCuda + ")";
    }

    /** Skips the tests where no GPU is usable, fails them instead under DRMAS_REQUIRE_GPU=1. */
    static void needsCuda(String what) {
        String why = noCuda();
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(why == null, "DRMAS_REQUIRE_GPU=1 but " + why);
        } else {
            Assumptions.assumeTrue(why == null, () -> why + ": skipping " + what);
        }
    }

    static final Device CUDA = new Device("cuda:0");

    @BeforeEach
    void gpu() {
        needsCuda("the fused LM head's CUDA tests");
    }

    static void assertSumsClose(String at, double[] want, double[] got) {
        for (int k = 0; k < AbiIndices.LMHEAD_SUMS; k++) {
            assertTrue(Math.abs(got[k] - want[k]) <= FusedLmHeadTest.ATOL + FusedLmHeadTest.RTOL * Math.abs(want[k]),
                    at + "sums[" + k + "] " + got[k] + ", want " + want[k]);
        }
    }

    @ParameterizedTest(name = "{0} T {2}")
    @MethodSource("dev.drmas.algo.FusedLmHeadTest#cases")
    void fusedOnCudaEqualsTheMaterialisedPathOnCudaAndTheCpu(String name, LossConfig c, double temperature) {
        Inputs cpu = FusedLmHeadTest.inputs(name.hashCode(), temperature), in = cpu.on(CUDA);
        assertTrue(in.hidden().is_cuda() && in.old().is_cuda(), "the inputs are on the GPU");
        double entCoef = 0.01;
        Out want = FusedLmHeadTest.materialised(in, c, temperature, entCoef, CUDA);
        double maxDh = 0;
        for (float v : want.dh()) maxDh = Math.max(maxDh, Math.abs(v));
        assertTrue(maxDh > 1e-3, "dL/dh is ~0: nothing compared");
        for (int chunk : new int[] {5, 64, 1}) {  // 5 does not divide 23; 64 > N
            Out got = FusedLmHeadTest.fused(in, c, temperature, entCoef, chunk, CUDA);
            Out host = FusedLmHeadTest.fused(cpu, c, temperature, entCoef, chunk, FusedLmHeadTest.CPU);
            for (Out[] pair : new Out[][] {{want, got}, {host, got}}) {
                String at = name + ", chunk " + chunk + (pair[0] == want ? ", CUDA vs materialised on CUDA: " : ", CUDA vs CPU: ");
                FusedLmHeadTest.assertValidClose(at + "logp", pair[0].logp(), pair[1].logp());
                FusedLmHeadTest.assertValidClose(at + "entropy", pair[0].entropy(), pair[1].entropy());
                assertSumsClose(at, pair[0].sums(), pair[1].sums());
                FusedLmHeadTest.assertClose(at + "dL/dh", pair[0].dh(), pair[1].dh());
                FusedLmHeadTest.assertClose(at + "dL/dW", pair[0].dw(), pair[1].dw());
            }
        }
    }

    /** As FusedLmHeadTest's bf16 case, on the GPU: bf16 cuBLAS products on both paths, bf16 tolerances. */
    @Test
    void bf16InputsOnCudaAgreeWithTheMaterialisedPathToBf16Precision() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K1, 0.1);
        Inputs in = FusedLmHeadTest.inputs(21, 0.8);
        Inputs b = new Inputs(in.hidden().to(ScalarType.BFloat16), in.weight().to(ScalarType.BFloat16), in.targets(), in.old(), in.ref(),
                in.mask()).on(CUDA);
        Out want = FusedLmHeadTest.materialised(b, c, 0.8, 0.01, CUDA), got = FusedLmHeadTest.fused(b, c, 0.8, 0.01, 5, CUDA);
        float[][] w = {want.logp(), want.entropy(), want.dh(), want.dw()}, g = {got.logp(), got.entropy(), got.dh(), got.dw()};
        String[] what = {"logp", "entropy", "dh", "dw"};
        for (int k = 0; k < what.length; k++) {
            double max = 0;
            for (float v : w[k]) max = Math.max(max, Math.abs(v));
            assertTrue(max > 1e-4, what[k] + " is ~0");
            for (int i = 0; i < w[k].length; i++) {
                if (k < 2 && !FusedLmHeadTest.valid(i)) continue;
                assertTrue(Math.abs(g[k][i] - w[k][i]) <= 2e-2 * (Math.abs(w[k][i]) + max / 10),
                        "bf16 " + what[k] + "[" + i + "]: " + g[k][i] + ", want " + w[k][i]);
            }
        }
    }

    /**
     * The forward-only pass on CUDA (with and without entropies): the CPU's values and the update's to
     * rounding (cuBLAS may pick another algorithm for another chunk's row count, so chunkings agree
     * to rounding here, not bit for bit as on the CPU); the sums of one chunk of all tokens bit for bit
     * the CUDA clipped-loss kernel's on the same log-probs.
     */
    @Test
    void logProbsOnCudaEqualTheCpusAndTheUpdates() {
        LossConfig c = LossConfig.defaults().withKl(KlEstimator.K3, 0.05).withAggregation(LossAggregation.SEQ_MEAN_TOKEN_MEAN);
        Inputs cpu = FusedLmHeadTest.inputs(3, 0.9), in = cpu.on(CUDA);
        Tensor y = Tensors.longs(in.targets()).to(CUDA, ScalarType.Long);
        FusedLmHead.Forward f = FusedLmHead.logProbs(in.hidden(), in.weight(), y, 0.9, true, 5);
        FusedLmHead.Forward lpOnly = FusedLmHead.logProbs(in.hidden(), in.weight(), y, 0.9, false, 7);
        assertTrue(f.logprobs().is_cuda() && f.entropy().is_cuda(), "results stay on the GPU");
        assertNull(lpOnly.entropy(), "no entropies asked for");
        FusedLmHead.Forward h = FusedLmHead.logProbs(cpu.hidden(), cpu.weight(), Tensors.longs(cpu.targets()), 0.9, true, 5);
        FusedLmHeadTest.assertClose("logp CUDA vs CPU", Tensors.toFloats(h.logprobs()), Tensors.toFloats(f.logprobs()));
        FusedLmHeadTest.assertClose("entropy CUDA vs CPU", Tensors.toFloats(h.entropy()), Tensors.toFloats(f.entropy()));
        FusedLmHeadTest.assertClose("logp chunks of 5 vs 7", Tensors.toFloats(f.logprobs()), Tensors.toFloats(lpOnly.logprobs()));
        FusedLmHead.Update u = FusedLmHead.lossAndBackward(in.hidden(), in.weight(), y, 0.9, c, FusedLmHeadTest.normalizer(c), 0.0,
                OFFSETS, in.old(), ROW_ADV, in.ref(), FusedLmHeadTest.maskTensor(in.mask()).to(CUDA, ScalarType.Byte), 64);
        assertTrue(u.logprobs().is_cuda(), "the update's log-probs stay on the GPU");
        FusedLmHeadTest.assertValidClose("update vs forward logp", Tensors.toFloats(f.logprobs()), Tensors.toFloats(u.logprobs()));
        FusedLmHeadTest.assertValidClose("update vs forward entropy", Tensors.toFloats(f.entropy()), Tensors.toFloats(u.entropy()));
        // one chunk of all tokens: the CUDA clipped-loss kernel's sums on these log-probs, bit for bit (drmas.h §5)
        ClippedLoss.TensorResult r = ClippedLoss.compute(c, FusedLmHeadTest.normalizer(c), Tensors.longs(OFFSETS).to(CUDA, ScalarType.Long),
                u.logprobs(), in.old(), Tensors.floats(FusedLmHeadTest.tokenAdvantages()).to(CUDA, ScalarType.Float), in.ref(),
                FusedLmHeadTest.maskTensor(in.mask()).to(CUDA, ScalarType.Byte));
        assertArrayEquals(r.sums(), java.util.Arrays.copyOf(u.sums(), AbiIndices.LOSS_SUMS));
    }

    @Test
    void errorsOnCudaNameTheTokenAndLeaveTheGradientAlone() {
        Inputs in = FusedLmHeadTest.inputs(9, 1.0).on(CUDA);
        LossConfig c = LossConfig.defaults();
        Tensor w = in.weight().detach().clone().requires_grad_(true);
        Tensor h = in.hidden().detach();
        Tensor y = Tensors.longs(in.targets()).to(CUDA, ScalarType.Long);
        FusedLmHead.lossAndBackward(h, w, y, 1.0, c, FusedLmHeadTest.normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV, null, null, 7);
        float[] once = Tensors.toFloats(w.grad());
        FusedLmHead.lossAndBackward(h, w, y, 1.0, c, FusedLmHeadTest.normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV, null, null, 7);
        float[] twice = Tensors.toFloats(w.grad());
        for (int i = 0; i < once.length; i++) assertEquals(2 * once[i], twice[i], 1e-6 + 1e-6 * Math.abs(once[i]), "accumulated " + i);
        float[] before = Tensors.toFloats(w.grad());
        // a bad target in the last chunk: found before the first chunk adds to .grad
        long[] bad = in.targets().clone();
        bad[19] = V;
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.lossAndBackward(h, w,
                Tensors.longs(bad).to(CUDA, ScalarType.Long), 1.0, c, FusedLmHeadTest.normalizer(c), 0.0, OFFSETS, in.old(), ROW_ADV,
                null, null, 5));
        assertTrue(e.getMessage().contains("targets[19] = 37"), e.getMessage());
        // the kernel's own check on the device (row 4 ends past the tokens)
        DrmasException k = assertThrows(DrmasException.class, () -> FusedLmHead.lossAndBackward(h, w, y, 1.0, c,
                FusedLmHeadTest.normalizer(c), 0.0, new long[] {1, 6, 6, 13, 40}, in.old(), ROW_ADV, null, null, 5));
        assertTrue(k.getMessage().contains("row_offsets[4] = 40 is past num_tokens = 23"), k.getMessage());
        assertArrayEquals(before, Tensors.toFloats(w.grad()), "a failed call changed the gradient");
        // a non-finite logit, found by the CUDA kernel, named as on the CPU
        Tensor hn = in.hidden().detach().clone();
        hn.narrow(0, 16, 1).fill_(new Scalar(Double.NaN));
        IllegalArgumentException f = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.logProbs(hn, w.detach(), y, 1.0, false, 5));
        assertTrue(f.getMessage().contains("tokens [15, 20)") && f.getMessage().contains("token 1, vocabulary index 0"), f.getMessage());
        // one tensor on the host: refused with its name, not read through a host pointer by the GPU
        IllegalArgumentException mixed = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.lossAndBackward(h, w, y, 1.0, c,
                FusedLmHeadTest.normalizer(c), 0.0, OFFSETS, in.old().cpu(), ROW_ADV, null, null, 5));
        assertTrue(mixed.getMessage().contains("oldLogp"), mixed.getMessage());
        IllegalArgumentException split = assertThrows(IllegalArgumentException.class, () -> FusedLmHead.logProbs(h, w.detach(),
                Tensors.longs(in.targets()), 1.0, false, 5));
        assertTrue(split.getMessage().contains("one device"), split.getMessage());
        assertArrayEquals(before, Tensors.toFloats(w.grad()), "a refused call changed the gradient");
    }
}
