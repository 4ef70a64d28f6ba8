// FusedLmHead.java — the LM head, log-probs, entropy and the clipped PPO loss of ARCHITECTURE §6
// and §7a without an [N, V] tensor: the response tokens' hidden states go through the head a chunk
// of tokens at a time. Per chunk, the logits z = h·Wᵀ/T (a LibTorch product in the weight's dtype,
// then fp32, as CausalLm.logits), one drmas kernel that turns them into log-probs, entropies, the
// loss sums and dL/dz in place, then dL/dh = dz·W/T and dL/dW += dzᵀ·h/T. At the end, one
// hidden.backward(dL/dh) carries the gradient into the model. At most one chunk of logits is alive.
// CPU and CUDA tensors alike: the backend comes from the tensors, the products are LibTorch's (its
// BLAS, cuBLAS), the kernel runs on LibTorch's current stream, and every array it reads or writes
// (offsets, row advantages and the sums included) lives on the tensors' device, so that one code
// path serves both and the CPU tests exercise what runs on a GPU. A vocabulary limit narrows the
// head to its first rows (the ids the rollout engine samples), the gradient going into those rows.
package dev.drmas.algo;

import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.DrmasException;
import dev.drmas.bindings.Kernels;
import java.lang.foreign.MemorySegment;
import java.lang.ref.Reference;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class FusedLmHead {
    private FusedLmHead() {
    }

    /** Bytes of fp32 logits a chunk may hold by default (the chunk is the only [tokens, V] tensor alive). */
    public static final long DEFAULT_CHUNK_BYTES = 128L << 20;

    /**
     * Rows of the weight per block when a reduced dtype's .grad gets the float32 sum of dL/dW: adding
     * a float32 tensor into a bfloat16 one makes float32 temporaries of both (LibTorch's CPU kernels),
     * so the add goes block by block (two [4096, H] float32, not two [V, H]).
     */
    public static final int GRAD_ADD_ROWS = 4096;

    /** Tokens per chunk for a vocabulary of {@code vocab}: {@link #DEFAULT_CHUNK_BYTES} of logits, at least 16. */
    public static int defaultChunkTokens(long vocab) {
        return (int) Math.max(16, Math.min(1 << 16, DEFAULT_CHUNK_BYTES / (4 * Math.max(1, vocab))));
    }

    /** Log-probs (and entropies, or null) float32 [N] of a forward-only pass. */
    public record Forward(Tensor logprobs, Tensor entropy) {
    }

    /**
     * The update's pass: log-probs and entropies float32 [N] (detached), and the sums of all chunks
     * ({@link AbiIndices}{@code .LMHEAD_SUMS}: the loss's, then the entropy sum).
     */
    public record Update(Tensor logprobs, Tensor entropy, double[] sums) {
        public double loss() {
            return sums[AbiIndices.LOSS_LOSS];
        }
    }

    /**
     * Forward only (old and reference log-probs, scoring), without autograd. {@code hidden} [N, H] and
     * {@code weight} [V, H] of one dtype, {@code targets} int64 [N] in [0, V), all on one device (CPU
     * or CUDA); temperature 0 counts as 1. The results are on that device and belong to the caller's
     * innermost PointerScope. With CUDA the chunks do not wait for the device: their data errors (a
     * target outside [0, V), a non-finite logit) come back in one read after the last chunk, named
     * with their chunk as on the CPU, where the chunk's kernel reports them at once.
     */
    public static Forward logProbs(Tensor hidden, Tensor weight, Tensor targets, double temperature, boolean withEntropy,
                                   int chunkTokens) {
        return logProbs(hidden, weight, targets, temperature, withEntropy, chunkTokens, 0);
    }

    /**
     * As above over the weight's first {@code vocabLimit} rows (0: all): the softmax of a rollout
     * engine that samples only those ids (GenerationConfig.vocabLimit); targets must lie below it.
     */
    public static Forward logProbs(Tensor hidden, Tensor weight, Tensor targets, double temperature, boolean withEntropy,
                                   int chunkTokens, long vocabLimit) {
        final long n = checkShapes(hidden, weight, targets, chunkTokens);
        final long vocab = rows(weight, vocabLimit);
        final Backend b = TensorViews.backendOf("hidden", hidden);
        final MemorySegment stream = TorchStreams.current(hidden);
        TensorOptions f32 = options(ScalarType.Float, hidden.device());
        Tensor lp = torch.empty(new long[] {n}, f32, null);
        Tensor ent = withEntropy ? torch.empty(new long[] {n}, f32, null) : null;
        Tensor y = targets.contiguous();
        // each chunk's 2 error slots (drmas_lmhead_logprobs_async_f32), read once after the last chunk:
        // with CUDA no chunk waits for the device (the plain op waited once per chunk)
        final long chunks = (n + chunkTokens - 1) / chunkTokens;
        Tensor errors = torch.empty(new long[] {chunks, 2}, options(ScalarType.Long, hidden.device()), null);
        try (NoGradGuard noGrad = new NoGradGuard()) {
            Tensor w = weight.narrow(0, 0, vocab);
            for (long k = 0, c0 = 0; c0 < n; k++, c0 += chunkTokens) {
                long c = Math.min(chunkTokens, n - c0);
                try (PointerScope scope = new PointerScope()) {
                    Tensor z = logits(hidden.narrow(0, c0, c), w, temperature);
                    try {
                        Kernels.lmheadLogprobsAsync(b, false, c, vocab, TensorViews.view("logits", z, ScalarType.Float, c * vocab, b),
                                TensorViews.view("targets", y.narrow(0, c0, c), ScalarType.Long, c, b),
                                TensorViews.view("logp", lp.narrow(0, c0, c), ScalarType.Float, c, b),
                                ent == null ? null : TensorViews.view("entropy", ent.narrow(0, c0, c), ScalarType.Float, c, b),
                                TensorViews.view("errors", errors.select(0, k), ScalarType.Long, 2, b), stream);
                    } catch (DrmasException e) {
                        // the kernel counts the tokens of its chunk: say which chunk
                        throw chunkError(c0, c, e.getMessage(), e);
                    }
                }
            }
            if (chunks > 0) {
                long[] bad = new long[(int) (2 * chunks)];
                (errors.is_cpu() ? errors : errors.cpu()).data_ptr_long().get(bad);  // with CUDA: the one read back
                for (int k = 0; k < chunks; k++) {
                    long c0 = (long) k * chunkTokens, c = Math.min(chunkTokens, n - c0);
                    if (bad[2 * k] != -1L) {  // UINT64_MAX: none
                        long t = bad[2 * k];
                        throw chunkError(c0, c, "drmas_lmhead_logprobs_async_f32: targets[" + t + "] = " + y.select(0, c0 + t).item_long()
                                + " is outside the vocabulary [0, " + vocab + ")", null);
                    }
                    if (bad[2 * k + 1] != -1L) {
                        long i = bad[2 * k + 1] / vocab, v = bad[2 * k + 1] % vocab;
                        throw chunkError(c0, c, "drmas_lmhead_logprobs_async_f32: " + nonFinite(hidden, weight, vocab, temperature, c0, i, v),
                                null);
                    }
                }
            }
        }
        return new Forward(lp, ent);
    }

    private static IllegalArgumentException chunkError(long c0, long c, String message, Exception cause) {
        return new IllegalArgumentException("the LM head's chunk of tokens [" + c0 + ", " + (c0 + c) + "): " + message, cause);
    }

    /**
     * "logits[i][v] (token i, vocabulary index v) is nan" (or ±inf), as the kernels word it, of the
     * logit of the chunk from c0: computed again from hidden and weight for its value (the chunk's
     * logits are gone, or dL/dz by now).
     */
    private static String nonFinite(Tensor hidden, Tensor weight, long vocab, double temperature, long c0, long i, long v) {
        double x;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = new NoGradGuard()) {
            x = logits(hidden.detach().narrow(0, c0 + i, 1), weight.detach().narrow(0, 0, vocab), temperature).select(1, v).item_double();
        }
        return "logits[" + i + "][" + v + "] (token " + i + ", vocabulary index " + v + ") is "
                + (Double.isNaN(x) ? "nan" : Double.isInfinite(x) ? (x > 0 ? "+inf" : "-inf") : "not finite");
    }

    /**
     * The loss over the tokens of {@code hidden} and its backward pass: dL/dW accumulates into
     * {@code weight}'s .grad (when it requires grad; a tied embedding's is the embedding's), and
     * {@code hidden.backward(dL/dh)} runs when hidden requires grad (a caller with checkpointed
     * layers then finishes their part). The loss is that of {@link ClippedLoss} over these log-probs
     * with {@code normalizer}, minus {@code entropyCoef} · Σ entropies of the valid tokens. The
     * tensors are all on hidden's device (CPU or CUDA); the host arrays are copied there. With CUDA
     * nothing in the chunk loop waits for the device (drmas_lmhead_chunk_async_f32): the offsets are
     * checked on the host, the targets once before the loop (one read of the first bad one), and the
     * chunks' data errors (a non-finite logit) come back with their sums in one read after the loop,
     * before the backward pass into the model. A non-finite logit then fails the call after every
     * chunk's dL/dW went into .grad (on the CPU: after the earlier chunks'); either way the exception
     * ends the update.
     *
     * @param offsets       row r owns tokens [offsets[r], offsets[r + 1]) (host)
     * @param oldLogp       float32 [N]
     * @param rowAdvantages one advantage per row (host)
     * @param refLogp       float32 [N], or null without a KL term
     * @param mask          bool or uint8 [N], or null (all valid)
     */
    public static Update lossAndBackward(Tensor hidden, Tensor weight, Tensor targets, double temperature, LossConfig c,
                                         double normalizer, double entropyCoef, long[] offsets, Tensor oldLogp,
                                         float[] rowAdvantages, Tensor refLogp, Tensor mask, int chunkTokens) {
        return lossAndBackward(hidden, weight, targets, temperature, c, normalizer, entropyCoef, offsets, oldLogp, rowAdvantages,
                refLogp, mask, chunkTokens, 0);
    }

    /**
     * As above with the softmax over the weight's first {@code vocabLimit} rows (0: all), as {@link
     * #logProbs(Tensor, Tensor, Tensor, double, boolean, int, long)}: dL/dW goes into those rows of
     * .grad, the others get none from the head.
     */
    public static Update lossAndBackward(Tensor hidden, Tensor weight, Tensor targets, double temperature, LossConfig c,
                                         double normalizer, double entropyCoef, long[] offsets, Tensor oldLogp,
                                         float[] rowAdvantages, Tensor refLogp, Tensor mask, int chunkTokens, long vocabLimit) {
        return lossAndBackward(hidden, weight, targets, temperature, c, normalizer, entropyCoef, offsets, oldLogp, rowAdvantages,
                refLogp, mask, chunkTokens, vocabLimit, 1);
    }

    /**
     * As above with the backward of the loss times {@code gradScale} (float16's loss scale): dL/dW
     * and dL/dh are those of gradScale · L, scaled in fp32 before they are rounded to the weight's
     * dtype, so that small ones survive float16; the sums (the loss, the metrics) are L's.
     */
    public static Update lossAndBackward(Tensor hidden, Tensor weight, Tensor targets, double temperature, LossConfig c,
                                         double normalizer, double entropyCoef, long[] offsets, Tensor oldLogp,
                                         float[] rowAdvantages, Tensor refLogp, Tensor mask, int chunkTokens, long vocabLimit,
                                         double gradScale) {
        if (!(gradScale > 0) || Double.isInfinite(gradScale)) {
            throw new IllegalArgumentException("gradScale must be a finite number > 0, got " + gradScale);
        }
        final long n = checkShapes(hidden, weight, targets, chunkTokens);
        final long vocab = rows(weight, vocabLimit);
        if (offsets.length != rowAdvantages.length + 1) {
            throw new IllegalArgumentException("offsets has " + offsets.length + " entries but " + rowAdvantages.length
                    + " row advantages need " + (rowAdvantages.length + 1));
        }
        if (!Double.isFinite(entropyCoef)) throw new IllegalArgumentException("entropyCoef must be finite, got " + entropyCoef);
        Kernels.LmHeadParams p = new Kernels.LmHeadParams(ClippedLoss.params(c, normalizer), entropyCoef);
        final Backend b = TensorViews.backendOf("hidden", hidden);
        final MemorySegment stream = TorchStreams.current(hidden);
        final Device dev = hidden.device();
        // drmas.h: with CUDA every array is a device pointer, the offsets and the advantages too
        Tensor offT = upload(offsets, dev), advT = upload(rowAdvantages, dev);
        MemorySegment off = TensorViews.view("offsets", offT, ScalarType.Long, offsets.length, b);
        MemorySegment adv = TensorViews.view("rowAdvantages", advT, ScalarType.Float, rowAdvantages.length, b);
        Tensor y = targets.contiguous();
        MemorySegment ys = TensorViews.view("targets", y, ScalarType.Long, n, b);
        Tensor old = oldLogp.contiguous();
        MemorySegment olds = TensorViews.view("oldLogp", old, ScalarType.Float, n, b);
        Tensor ref = refLogp == null ? null : refLogp.contiguous();
        MemorySegment refs = TensorViews.view("refLogp", ref, ScalarType.Float, n, b);
        Tensor m = null;
        if (mask != null) {
            m = mask.to(ScalarType.Byte).contiguous();
        }
        MemorySegment ms = TensorViews.view("mask", m, ScalarType.Byte, n, b);
        checkTargets(y, m, offsets, n, vocab);
        TensorOptions f32 = options(ScalarType.Float, dev);
        Tensor lp = torch.empty(new long[] {n}, f32, null), ent = torch.empty(new long[] {n}, f32, null);
        // each chunk writes its own row of sums where the kernel can (the device), then its 2 error slots
        // (uint64 bits); added in chunk order at the end, after the one read of them all
        final long chunks = (n + chunkTokens - 1) / chunkTokens;
        final int width = AbiIndices.LMHEAD_SUMS + 2;
        Tensor partSums = torch.zeros(new long[] {chunks, width}, options(ScalarType.Double, dev));
        MemorySegment hostOff = MemorySegment.ofArray(offsets);
        final boolean wantW = weight.requires_grad(), wantH = hidden.requires_grad();
        final double invT = temperature > 0 ? 1.0 / temperature : 1.0;
        final double zScale = invT * gradScale;  // dL/dz → d(gradScale · L)/d(h·Wᵀ)
        Tensor dh = null, dw = null;
        boolean intoGrad = false;
        try (NoGradGuard noGrad = new NoGradGuard()) {
            Tensor h = hidden.detach(), w = weight.detach().narrow(0, 0, vocab);
            if (wantH) dh = torch.empty_like(h);
            if (wantW) {
                // fp32 weights: straight into .grad; else an fp32 sum of the chunks, added to .grad once
                if (w.scalar_type().intern() == ScalarType.Float) {
                    if (!weight.grad().defined()) weight.mutable_grad().put(torch.zeros_like(weight.detach()));
                    dw = weight.grad().narrow(0, 0, vocab);
                    intoGrad = true;
                } else {
                    dw = torch.zeros(new long[] {w.size(0), w.size(1)}, f32);
                }
            }
            Scalar alpha = new Scalar(zScale);
            for (long k = 0, c0 = 0; c0 < n; k++, c0 += chunkTokens) {
                long cn = Math.min(chunkTokens, n - c0);
                try (PointerScope scope = new PointerScope()) {
                    Tensor hc = h.narrow(0, c0, cn);
                    Tensor z = logits(hc, w, temperature);
                    Tensor row = partSums.select(0, k);
                    Kernels.lmheadChunkAsync(b, false, p, rowAdvantages.length, hostOff, off, n, c0, cn, vocab,
                            TensorViews.view("logits", z, ScalarType.Float, cn * vocab, b), ys, olds, adv, refs, ms,
                            TensorViews.view("logp", lp.narrow(0, c0, cn), ScalarType.Float, cn, b),
                            TensorViews.view("entropy", ent.narrow(0, c0, cn), ScalarType.Float, cn, b),
                            TensorViews.view("sums", row.narrow(0, 0, AbiIndices.LMHEAD_SUMS), ScalarType.Double,
                                    AbiIndices.LMHEAD_SUMS, b),
                            TensorViews.view("errors", row.narrow(0, AbiIndices.LMHEAD_SUMS, 2), ScalarType.Double, 2, b), stream);
                    // z now holds dL/dz; the logits were (h·Wᵀ)/T: dL/d(h·Wᵀ) = dz/T in fp32 (times the loss
                    // scale), then in the weight's dtype for dL/dh as autograd of the materialised path rounds it
                    if (zScale != 1.0) z.mul_(alpha);
                    if (wantH) dh.narrow(0, c0, cn).copy_(torch.mm(z.to(w.scalar_type().intern()), w));
                    if (wantW) dw.addmm_(z.t(), hc.scalar_type().intern() == ScalarType.Float ? hc : hc.to(ScalarType.Float));
                }
            }
            // The loop reads these tensors' memory only through the segments above: the Tensor objects
            // must stay reachable until it ends, or JavaCPP's GC-driven deallocator may free their
            // storage under the kernel when no PointerScope of the caller holds them (found by review).
            Reference.reachabilityFence(offT);
            Reference.reachabilityFence(advT);
            Reference.reachabilityFence(y);
            Reference.reachabilityFence(old);
            Reference.reachabilityFence(ref);
            Reference.reachabilityFence(m);
            if (wantW && !intoGrad) {
                if (weight.grad().defined()) {
                    Tensor g = weight.grad();
                    for (long r0 = 0; r0 < vocab; r0 += GRAD_ADD_ROWS) {
                        try (PointerScope scope = new PointerScope()) {
                            long rb = Math.min(GRAD_ADD_ROWS, vocab - r0);
                            g.narrow(0, r0, rb).add_(dw.narrow(0, r0, rb));
                        }
                    }
                } else if (vocab == weight.size(0)) {
                    weight.mutable_grad().put(dw.to(w.scalar_type().intern()));
                } else {
                    Tensor g = torch.zeros_like(weight.detach());
                    g.narrow(0, 0, vocab).copy_(dw);
                    weight.mutable_grad().put(g);
                }
            }
        }
        double[] sums = new double[AbiIndices.LMHEAD_SUMS];
        if (chunks > 0) {
            double[] parts = new double[(int) (chunks * width)];
            (partSums.is_cpu() ? partSums : partSums.cpu()).data_ptr_double().get(parts);  // with CUDA: the one read back
            for (int k = 0; k < chunks; k++) {
                checkChunk(parts, k, width, chunkTokens, vocab, y, hidden, weight, temperature);
                for (int j = 0; j < sums.length; j++) sums[j] += parts[k * width + j];
            }
        }
        if (wantH) {
            hidden.backward(dh, new BoolOptional(false), false, new TensorArrayRefOptional());
        }
        return new Update(lp, ent, sums);
    }

    /**
     * The error slots of chunk k (drmas_lmhead_chunk_async_f32's, after the sums in its row of
     * {@code parts}): a bad target (found by checkTargets before the loop, so not expected here) or
     * a non-finite logit, named as the kernel names them; that logit is computed again for its value
     * (the chunk's logits are dL/dz by now).
     */
    private static void checkChunk(double[] parts, int k, int width, int chunkTokens, long vocab, Tensor y, Tensor hidden,
                                   Tensor weight, double temperature) {
        long badTarget = Double.doubleToRawLongBits(parts[k * width + AbiIndices.LMHEAD_SUMS]);
        long badLogit = Double.doubleToRawLongBits(parts[k * width + AbiIndices.LMHEAD_SUMS + 1]);
        long c0 = (long) k * chunkTokens;
        if (badTarget != -1L) {  // UINT64_MAX: none
            long t = c0 + badTarget;
            throw new IllegalArgumentException("drmas_lmhead_chunk_async_f32: targets[" + t + "] = " + y.select(0, t).item_long()
                    + " (a valid token of the chunk) is outside the vocabulary [0, " + vocab + ")");
        }
        if (badLogit != -1L) {
            // the chunk op names the token by its index in the micro-batch: c0 + i
            long i = badLogit / vocab, v = badLogit % vocab;
            String m = nonFinite(hidden, weight, vocab, temperature, c0, i, v).replace("(token " + i + ",", "(token " + (c0 + i) + ",");
            throw new IllegalArgumentException("drmas_lmhead_chunk_async_f32: " + m);
        }
    }

    /**
     * The kernel checks the targets too, but chunk by chunk: checked here first, so that a bad one
     * fails before any chunk has added to .grad. Tensor ops on the targets' device (no host copy of
     * them; with CUDA one read of the first bad position, a synchronisation); the same for both
     * backends, so the CPU tests run the code that a GPU runs. (A non-finite logit still fails at its
     * chunk, after the earlier chunks' dL/dW went into .grad: the exception ends the update.)
     */
    private static void checkTargets(Tensor y, Tensor mask, long[] offsets, long n, long vocab) {
        // rows are back to back (the kernel refuses offsets that are not): the valid tokens lie in [lo, hi)
        long lo = Math.max(0, offsets[0]), hi = Math.min(n, offsets[offsets.length - 1]);
        if (hi <= lo) return;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = new NoGradGuard()) {
            Tensor ys = y.narrow(0, lo, hi - lo);
            Tensor bad = ys.lt(new Scalar(0L)).logical_or(ys.ge(new Scalar(vocab)));
            if (mask != null) bad = bad.logical_and(mask.narrow(0, lo, hi - lo).ne(new Scalar(0L)));
            // the first bad position: hi - lo when there is none
            Tensor pos = torch.arange(new Scalar(hi - lo), options(ScalarType.Long, y.device()));
            long first = pos.masked_fill(bad.logical_not(), new Scalar(hi - lo)).min().item_long();
            if (first < hi - lo) {
                long t = lo + first;
                throw new IllegalArgumentException("targets[" + t + "] = " + y.select(0, t).item_long()
                        + " (a valid token) is outside the vocabulary [0, " + vocab + ")");
            }
        }
    }

    /** The rows of {@code weight} a softmax under {@code vocabLimit} runs over: all when it is 0 or not below them. */
    private static long rows(Tensor weight, long vocabLimit) {
        if (vocabLimit < 0) throw new IllegalArgumentException("vocabLimit must be >= 0 (0 = none), got " + vocabLimit);
        return vocabLimit > 0 && vocabLimit < weight.size(0) ? vocabLimit : weight.size(0);
    }

    private static TensorOptions options(ScalarType dtype, Device device) {
        return new TensorOptions(dtype).device(new DeviceOptional(device));
    }

    /** {@code a} as an int64 tensor on {@code dev} (a copy from the host). */
    private static Tensor upload(long[] a, Device dev) {
        Tensor t = torch.empty(new long[] {a.length}, new TensorOptions(ScalarType.Long), null);
        if (a.length > 0) t.data_ptr_long().put(a);
        return dev.is_cpu() ? t : t.to(dev, ScalarType.Long);
    }

    /** {@code a} as a float32 tensor on {@code dev} (a copy from the host). */
    private static Tensor upload(float[] a, Device dev) {
        Tensor t = torch.empty(new long[] {a.length}, new TensorOptions(ScalarType.Float), null);
        if (a.length > 0) t.data_ptr_float().put(a);
        return dev.is_cpu() ? t : t.to(dev, ScalarType.Float);
    }

    /**
     * h·Wᵀ in the weight's dtype, then float32 divided by the temperature: CausalLm.logits and
     * TeacherForcing's order. The division is in place, so the chunk holds one fp32 [tokens, V]
     * tensor, not two.
     */
    private static Tensor logits(Tensor h, Tensor w, double temperature) {
        Tensor y = torch.linear(h, w);
        if (y.scalar_type().intern() != ScalarType.Float) y = y.to(ScalarType.Float);
        if (temperature > 0 && temperature != 1.0) y.div_(new Scalar(temperature));
        return y.contiguous();
    }

    private static long checkShapes(Tensor hidden, Tensor weight, Tensor targets, int chunkTokens) {
        if (chunkTokens < 1) throw new IllegalArgumentException("chunkTokens must be >= 1, got " + chunkTokens);
        if (hidden.dim() != 2 || weight.dim() != 2 || hidden.size(1) != weight.size(1)) {
            throw new IllegalArgumentException("hidden must be [N, H] and weight [V, H]");
        }
        if (targets.dim() != 1 || targets.size(0) != hidden.size(0)) {
            throw new IllegalArgumentException("targets must be [N] with N = " + hidden.size(0) + " rows of hidden");
        }
        Device d = hidden.device();
        if (!weight.device().equals(d) || !targets.device().equals(d)) {
            throw new IllegalArgumentException("hidden, weight and targets must be on one device, but they are on "
                    + d.str().getString() + ", " + weight.device().str().getString() + " and " + targets.device().str().getString());
        }
        return hidden.size(0);
    }
}
