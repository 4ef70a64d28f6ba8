// ClippedLoss.java — the fused clipped PPO loss (ARCHITECTURE §6), forward and backward in
// one native pass: it returns dL/dlogp per token, which the trainer feeds to
// logp.backward(grad), and the sums behind pg_loss, clipfrac, ppo_kl and kl. The normaliser
// is passed in so that token-mean divides by the token count of the whole mini-batch. CUDA calls
// run on LibTorch's current stream of the tensors' device; computeOnDevice keeps the sums there
// and, given the offsets on the host too, never synchronises the device (the trainer's form).
package dev.drmas.algo;

import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class ClippedLoss {
    private ClippedLoss() {}

    /** dL/dlogp per token, and the sums, indexed by {@link AbiIndices}{@code .LOSS_*}. */
    public record Result(float[] grad, double[] sums) {
        public double loss() {
            return sums[AbiIndices.LOSS_LOSS];
        }
    }

    /** Tensor form: grad is a float32 tensor on the device of logp. */
    public record TensorResult(Tensor grad, double[] sums) {
        public double loss() {
            return sums[AbiIndices.LOSS_LOSS];
        }
    }

    /** Device form: grad (float32 [N]) and sums (float64 [LOSS_SUMS]) on the device of logp, not yet read. */
    public record DeviceResult(Tensor grad, Tensor sums) {
    }

    /**
     * {@code c} as the kernel's config, dividing by {@code normalizer} (see
     * {@link LossAggregation#normalizer}). A KL estimator without reference log-probs is refused by
     * the kernel (drmas.h), not here.
     */
    public static Kernels.LossParams params(LossConfig c, double normalizer) {
        if (!(normalizer > 0) || !Double.isFinite(normalizer)) {
            throw new IllegalArgumentException("normalizer must be finite and > 0, got " + normalizer);
        }
        return new Kernels.LossParams(c.clipLow(), c.clipHigh(), c.dualClip(), c.klCoef(), normalizer,
                c.kl().ordinal(), c.aggregation().perRowMean());
    }

    /**
     * @param offsets row r owns tokens [offsets[r], offsets[r+1])
     * @param refLogp reference log-probs, or null (no KL term)
     * @param mask    valid tokens, or null (all valid)
     */
    public static Result compute(LossConfig c, double normalizer, long[] offsets, float[] logp, float[] oldLogp,
                                 float[] adv, float[] refLogp, boolean[] mask) {
        int n = logp.length;
        TensorViews.requireSameLength("logp", n, "oldLogp", oldLogp.length);
        TensorViews.requireSameLength("logp", n, "adv", adv.length);
        if (refLogp != null) TensorViews.requireSameLength("logp", n, "refLogp", refLogp.length);
        if (offsets.length == 0) throw new IllegalArgumentException("offsets needs numRows + 1 >= 1 entries");
        byte[] m = null;
        if (mask != null) {
            TensorViews.requireSameLength("logp", n, "mask", mask.length);
            m = new byte[n];
            for (int i = 0; i < n; i++) m[i] = (byte) (mask[i] ? 1 : 0);
        }
        Result r = new Result(new float[n], new double[AbiIndices.LOSS_SUMS]);
        Kernels.clippedLoss(Backend.CPU, params(c, normalizer), offsets.length - 1,
                MemorySegment.ofArray(offsets), n, MemorySegment.ofArray(logp), MemorySegment.ofArray(oldLogp),
                MemorySegment.ofArray(adv), refLogp == null ? null : MemorySegment.ofArray(refLogp),
                m == null ? null : MemorySegment.ofArray(m), MemorySegment.ofArray(r.grad), MemorySegment.ofArray(r.sums), null);
        return r;
    }

    /**
     * Tensor form. logp, oldLogp, adv (and refLogp) are float32 1-D contiguous token tensors;
     * offsets is int64 with numRows + 1 entries (on the same device); mask is bool or uint8.
     * logp may require grad: only its data is read. Reads the sums back (a device synchronisation
     * with CUDA); the trainer uses {@link #computeOnDevice} instead.
     */
    public static TensorResult compute(LossConfig c, double normalizer, Tensor offsets, Tensor logp, Tensor oldLogp,
                                       Tensor adv, Tensor refLogp, Tensor mask) {
        DeviceResult r = computeOnDevice(c, normalizer, null, offsets, logp, oldLogp, adv, refLogp, mask);
        Tensor hostSums = r.sums().is_cpu() ? r.sums() : r.sums().cpu();
        double[] sums = new double[AbiIndices.LOSS_SUMS];
        hostSums.data_ptr_double().get(sums);
        return new TensorResult(r.grad(), sums);
    }

    /**
     * As {@link #compute(LossConfig, double, Tensor, Tensor, Tensor, Tensor, Tensor, Tensor)}, with
     * the sums left on logp's device. {@code hostOffsets} (may be null) holds the values of
     * {@code offsets} on the host: the kernel then validates them there and a CUDA call is only
     * queued on the current stream, never synchronised (drmas_clipped_loss_async_f32).
     */
    public static DeviceResult computeOnDevice(LossConfig c, double normalizer, long[] hostOffsets, Tensor offsets,
                                               Tensor logp, Tensor oldLogp, Tensor adv, Tensor refLogp, Tensor mask) {
        return onDevice(c, normalizer, hostOffsets, offsets, logp, oldLogp, adv, false, refLogp, mask);
    }

    /**
     * As {@link #computeOnDevice}, with one advantage per row ({@code rowAdv}: float32, numRows
     * entries) read through the offsets by the kernel (drmas_clipped_loss_rows_f32), so that no
     * per-token advantage tensor is built: the training step's form. Bit for bit the result of the
     * advantages broadcast to the tokens.
     */
    public static DeviceResult computeRowsOnDevice(LossConfig c, double normalizer, long[] hostOffsets, Tensor offsets,
                                                   Tensor logp, Tensor oldLogp, Tensor rowAdv, Tensor refLogp, Tensor mask) {
        return onDevice(c, normalizer, hostOffsets, offsets, logp, oldLogp, rowAdv, true, refLogp, mask);
    }

    private static DeviceResult onDevice(LossConfig c, double normalizer, long[] hostOffsets, Tensor offsets, Tensor logp,
                                         Tensor oldLogp, Tensor adv, boolean perRow, Tensor refLogp, Tensor mask) {
        Backend b = TensorViews.backendOf("logp", logp);
        long n = logp.numel();
        if (offsets.numel() < 1) throw new IllegalArgumentException("offsets needs numRows + 1 >= 1 entries");
        if (hostOffsets != null && hostOffsets.length != offsets.numel()) {
            throw new IllegalArgumentException("hostOffsets has " + hostOffsets.length + " entries but offsets has "
                    + offsets.numel());
        }
        MemorySegment off = TensorViews.view("offsets", offsets, ScalarType.Long, -1, b);
        MemorySegment lp = TensorViews.view("logp", logp, ScalarType.Float, n, b);
        MemorySegment olp = TensorViews.view("oldLogp", oldLogp, ScalarType.Float, n, b);
        MemorySegment a = perRow ? TensorViews.view("rowAdv", adv, ScalarType.Float, offsets.numel() - 1, b)
                : TensorViews.view("adv", adv, ScalarType.Float, n, b);
        MemorySegment ref = TensorViews.view("refLogp", refLogp, ScalarType.Float, n, b);
        MemorySegment m = null;
        if (mask != null) {
            ScalarType mt = mask.scalar_type().intern();
            if (mt != ScalarType.Bool && mt != ScalarType.Byte) {
                throw new IllegalArgumentException("mask must be bool or uint8 but is " + mt);
            }
            m = TensorViews.view("mask", mask, mt, n, b);
        }
        Tensor grad = torch.empty_like(logp.detach());
        MemorySegment g = TensorViews.view("grad", grad, ScalarType.Float, n, b);
        // from LibTorch's caching allocator: no cudaMalloc/cudaFree (which synchronises) per call
        Tensor sums = torch.empty(new long[] {AbiIndices.LOSS_SUMS},
                new TensorOptions(ScalarType.Double).device(new DeviceOptional(logp.device())), null);
        MemorySegment s = TensorViews.view("sums", sums, ScalarType.Double, AbiIndices.LOSS_SUMS, b);
        Kernels.LossParams p = params(c, normalizer);
        MemorySegment host = hostOffsets == null ? null : MemorySegment.ofArray(hostOffsets);
        if (perRow) {
            Kernels.clippedLossRows(b, p, offsets.numel() - 1, host, off, n, lp, olp, a, ref, m, g, s, TorchStreams.current(logp));
        } else {
            Kernels.clippedLoss(b, p, offsets.numel() - 1, host, off, n, lp, olp, a, ref, m, g, s, TorchStreams.current(logp));
        }
        // the call reads the tensors' memory through the segments: they must outlive it (as in Advantages.compute)
        Reference.reachabilityFence(offsets);
        Reference.reachabilityFence(logp);
        Reference.reachabilityFence(oldLogp);
        Reference.reachabilityFence(adv);
        Reference.reachabilityFence(refLogp);
        Reference.reachabilityFence(mask);
        return new DeviceResult(grad, sums);
    }
}
