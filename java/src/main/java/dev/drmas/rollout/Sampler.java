// Sampler.java — turns a batch of next-token logits into tokens and their log-probabilities,
// on whatever device the logits are on: float32 logits on the CPU in one libdrmas call
// (drmas_sample_f32: the same warpers in fp64, no [B, V] tensor made), others by LibTorch's ops.
// Randomness comes in as one uniform number per row, drawn by the caller from a counter-based
// generator keyed by (seed, request, step): a request then gets the same tokens whatever batch,
// rank or world size it runs in.
package dev.drmas.rollout;

import dev.drmas.bindings.Kernels;
import dev.drmas.model.Tensors;
import java.lang.foreign.MemorySegment;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.LongOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.StringViewOptional;
import org.bytedeco.pytorch.T_TensorTensor_T;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

public final class Sampler {
    private Sampler() {
    }

    /**
     * Tokens chosen per row, and their log-probabilities under the temperature-scaled
     * distribution before top-k/top-p (what the trainer's forward pass recomputes as the old
     * log-prob); for greedy rows, under the unscaled distribution.
     */
    public record Draw(long[] tokens, float[] logprobs) {
    }

    /**
     * Picks one token per row of {@code logits} ([B, V], any float dtype, any device).
     * Sampling inverts the CDF of the filtered distribution at {@code uniforms[b]} in [0, 1).
     */
    public static Draw sample(Tensor logits, SamplingParams params, double[] uniforms) {
        return sample(logits, params, uniforms, null);
    }

    /**
     * As above, given also the uniforms as float64 [B, 1] on the logits' device (CausalLm.decode
     * uploads them with the step's inputs), so that LibTorch's sampler makes no copy of its own; null:
     * copied here when needed. They must hold the values of {@code uniforms}.
     */
    public static Draw sample(Tensor logits, SamplingParams params, double[] uniforms, Tensor deviceUniforms) {
        if (logits.dim() != 2) {
            throw new IllegalArgumentException("logits must be [batch, vocab], got " + logits.dim() + " dims");
        }
        final int rows = (int) logits.size(0);
        final long vocab = logits.size(1);
        if (uniforms.length != rows) {
            throw new IllegalArgumentException("need one uniform per row: " + rows + " rows, " + uniforms.length + " uniforms");
        }
        for (int b = 0; b < rows; b++) {
            if (!(uniforms[b] >= 0.0 && uniforms[b] < 1.0)) {
                throw new IllegalArgumentException("uniforms[" + b + "] = " + uniforms[b] + " is not in [0, 1)");
            }
        }
        if (rows == 0) return new Draw(new long[0], new float[0]);
        if (nativeOn && logits.is_cpu() && logits.scalar_type().intern() == ScalarType.Float && logits.stride(1) == 1
                && (rows == 1 || logits.stride(0) >= vocab)) {
            return sampleNative(logits, params, uniforms);
        }
        return sampleTorch(logits, params, uniforms, deviceUniforms);
    }

    /**
     * Whether CPU float32 logits go through libdrmas (the default) or LibTorch's ops: for tests and
     * the benchmark that compare both.
     */
    static volatile boolean nativeOn = true;

    /** Sets {@link #nativeOn} (the benchmark's A/B). */
    public static void useNative(boolean on) {
        nativeOn = on;
    }

    /** drmas_sample_f32 on the logits' own memory (rows stride(0) floats apart). */
    private static Draw sampleNative(Tensor logits, SamplingParams params, double[] uniforms) {
        int rows = (int) logits.size(0);
        long vocab = logits.size(1), stride = rows == 1 ? vocab : logits.stride(0);
        long[] tokens = new long[rows];
        float[] logprobs = new float[rows];
        MemorySegment data = MemorySegment.ofAddress(logits.data_ptr().address()).reinterpret(((rows - 1) * stride + vocab) * 4);
        Kernels.sample(rows, vocab, data, stride, params.temperature(), params.topK(), params.topP(), MemorySegment.ofArray(uniforms),
                MemorySegment.ofArray(tokens), MemorySegment.ofArray(logprobs));
        return new Draw(tokens, logprobs);
    }

    /** The same by LibTorch's ops, on any device and dtype. */
    static Draw sampleTorch(Tensor logits, SamplingParams params, double[] uniforms) {
        return sampleTorch(logits, params, uniforms, null);
    }

    static Draw sampleTorch(Tensor logits, SamplingParams params, double[] uniforms, Tensor deviceUniforms) {
        final int rows = (int) logits.size(0);
        final long vocab = logits.size(1);
        try (PointerScope scope = new PointerScope()) {
            Tensor x = logits.scalar_type().intern() == ScalarType.Float ? logits : logits.to(ScalarType.Float);
            Tensor tokens;
            Tensor logp;
            if (params.greedy()) {
                tokens = x.argmax(new LongOptional(1), true);  // [B, 1]
                logp = x.log_softmax(1).gather(1, tokens);
            } else {
                // x / 1 is x exactly: a decoding step at batch 1 is a few hundred small calls, so skip it
                Tensor scaled = params.temperature() == 1.0 ? x : x.div(new Scalar(params.temperature()));
                Tensor keep = keepMask(scaled, params.topK(), params.topP());
                Tensor masked = keep == null ? scaled : scaled.masked_fill(keep.logical_not(), new Scalar(Double.NEGATIVE_INFINITY));
                // CDF in float64 so that a 150K-token vocabulary does not lose the tail
                Tensor cdf = masked.softmax(1).to(ScalarType.Double).cumsum(1);
                Tensor total = cdf.narrow(1, vocab - 1, 1);                          // [B, 1]
                Tensor u = deviceUniforms != null && deviceUniforms.device().equals(cdf.device()) ? deviceUniforms
                        : Tensors.upload(uniforms, cdf.device(), rows, 1);
                Tensor target = u.mul(total);
                // first index whose CDF exceeds the target: a token of positive probability...
                Tensor idx = torch.searchsorted(cdf, target, false, true, new StringViewOptional(), new TensorOptional());
                // ...unless rounding put the target at the total: then the last kept token
                Tensor last = cdf.lt(total).sum(new long[] {1}, true, new ScalarTypeOptional(ScalarType.Long));
                tokens = torch.minimum(idx, last);
                logp = scaled.log_softmax(1).gather(1, tokens);
            }
            // One read into Java for both (on a GPU, one copy and one wait instead of two): the
            // tokens and log-probs side by side as float64, which holds both exactly (ids below
            // 2^53, every float32), [B, 2]
            double[] both = Tensors.toDoubles(torch.cat(new TensorVector(tokens.to(ScalarType.Double), logp.to(ScalarType.Double)), 1));
            long[] tok = new long[rows];
            float[] lp = new float[rows];
            for (int b = 0; b < rows; b++) {
                tok[b] = (long) both[2 * b];
                lp[b] = (float) both[2 * b + 1];
            }
            return new Draw(tok, lp);
        }
    }

    /**
     * The tokens that survive top-k then top-p on {@code scaled} ([B, V] float logits already
     * divided by the temperature), as a bool [B, V] tensor; null when neither filter is on.
     * The result belongs to the caller's PointerScope.
     */
    public static Tensor keepMask(Tensor scaled, int topK, double topP) {
        final long vocab = scaled.size(1);
        Tensor keep = null;
        if (topK > 0 && topK < vocab) {
            T_TensorTensor_T top = scaled.topk(topK, 1, true, true);
            Tensor kth = top.get0().narrow(1, topK - 1, 1);
            keep = scaled.ge(kth);  // ties with the k-th stay, as HF's TopKLogitsWarper
        }
        if (topP < 1.0) {
            Tensor masked = keep == null ? scaled : scaled.masked_fill(keep.logical_not(), new Scalar(Double.NEGATIVE_INFINITY));
            T_TensorTensor_T sorted = masked.sort(1, true);
            Tensor probs = sorted.get0().softmax(1).to(ScalarType.Double);
            Tensor before = probs.cumsum(1).sub(probs);  // mass of the strictly more likely tokens
            Tensor keepSorted = before.lt(new Scalar(topP));
            Tensor keepP = torch.zeros_like(keepSorted).scatter(1, sorted.get1(), keepSorted);
            keep = keep == null ? keepP : keep.logical_and(keepP);
        }
        return keep;
    }

    /**
     * A uniform number in [0, 1) that depends only on (seed, stream, step): SplitMix64's
     * finaliser over a combination of the three, 53 bits of it. Stateless, so generation can
     * be batched and sharded freely without changing any request's draws.
     */
    public static double uniform(long seed, long stream, long step) {
        long z = mix(seed + 0x9E3779B97F4A7C15L);
        z = mix(z ^ (stream * 0xBF58476D1CE4E5B9L + 0x632BE59BD9B4E019L));
        z = mix(z ^ (step * 0x94D049BB133111EBL + 0x2545F4914F6CDD1DL));
        return (z >>> 11) * 0x1.0p-53;
    }

    private static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }
}
