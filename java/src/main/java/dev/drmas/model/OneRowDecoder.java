// OneRowDecoder.java — CausalLm's decoding step for one row on the CPU (batch-1 generation): the
// same transformer and the same LibTorch ops' arithmetic, arranged so that a step makes about half
// as many LibTorch calls. At this size a call costs more than its arithmetic (bench/README.md,
// "Rollout engine"), so the step writes into buffers made once per KV cache, folds each RMSNorm's
// scalar factor into the matrix-vector product that follows it, does q and k's per-head norm
// and rotation on one [heads + kvHeads, headDim] block, and adds the residual inside the product.
package dev.drmas.model;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * One decoding step of a float32 CPU model for a single row: the hidden state is a flat
 * [hidden] vector and every projection a matrix-vector product. Numerically it is HF's forward
 * up to the order of float32 roundings (RMSNorm's factor is applied to the product instead of its
 * input, and the attention is written out instead of {@code scaled_dot_product_attention});
 * {@code CausalLmTest} checks it against the full forward of the same sequence.
 */
final class OneRowDecoder {
    private final ModelConfig config;
    private final CausalLm.Layer[] layers;
    private final Tensor embed, finalNorm;
    private final float[] invFreq;
    private final Scalar zero = new Scalar(0.0), one = new Scalar(1.0), rmsEps, scale;
    private final ScalarTypeOptional noDtype = new ScalarTypeOptional();
    private final long[] lastDim = {-1}, half;

    OneRowDecoder(ModelConfig config, CausalLm.Layer[] layers, Tensor embed, Tensor finalNorm, float[] invFreq) {
        this.config = config;
        this.invFreq = invFreq;
        this.layers = layers;
        this.embed = embed;
        this.finalNorm = finalNorm;
        rmsEps = new Scalar(config.rmsNormEps());
        scale = new Scalar(1.0 / Math.sqrt(config.headDim()));  // scaled_dot_product_attention's default
        half = new long[]{config.headDim() / 2};
    }

    /**
     * Buffers and fixed views of one KV cache's batch-1 decoding, reused by every step: q and k of
     * all heads as one block (so the per-head norm and the rotation run once over both), v, the
     * attention output, the MLP's gate and up, and each layer's cache rows without the batch dim.
     */
    static final class Scratch implements AutoCloseable {
        final Tensor qk, qkHeads, qHeads, kHeads, qFlat, kFlat, qGroups, kSlot, v, vSlot, attn, attnGroups, gate, up;
        final Tensor[] keyRows, valueRows;

        Scratch(ModelConfig c, Tensor[] keys, Tensor[] values) {
            int heads = c.numHeads(), kvHeads = c.numKvHeads(), d = c.headDim();
            try (PointerScope scope = new PointerScope()) {
                TensorOptions f32 = new TensorOptions(ScalarType.Float);
                qk = Scopes.retain(torch.empty(new long[]{(long) (heads + kvHeads) * d}, f32, null));
                qkHeads = Scopes.retain(qk.view(heads + kvHeads, d));
                qHeads = Scopes.retain(qkHeads.narrow(0, 0, heads));
                kHeads = Scopes.retain(qkHeads.narrow(0, heads, kvHeads));
                qFlat = Scopes.retain(qk.narrow(0, 0, (long) heads * d));
                kFlat = Scopes.retain(qk.narrow(0, (long) heads * d, (long) kvHeads * d));
                // query head i reads kv head i / (heads / kvHeads), as HF's repeat_kv
                qGroups = Scopes.retain(qHeads.view(kvHeads, heads / kvHeads, d));
                kSlot = Scopes.retain(kHeads.view(kvHeads, 1, d));
                v = Scopes.retain(torch.empty(new long[]{(long) kvHeads * d}, f32, null));
                vSlot = Scopes.retain(v.view(kvHeads, 1, d));
                attn = Scopes.retain(torch.empty(new long[]{(long) heads * d}, f32, null));
                attnGroups = Scopes.retain(attn.view(kvHeads, heads / kvHeads, d));
                gate = Scopes.retain(torch.empty(new long[]{c.intermediateSize()}, f32, null));
                up = Scopes.retain(torch.empty(new long[]{c.intermediateSize()}, f32, null));
                keyRows = new Tensor[keys.length];
                valueRows = new Tensor[values.length];
                for (int l = 0; l < keys.length; l++) {
                    keyRows[l] = Scopes.retain(keys[l].select(0, 0));     // [kvHeads, capacity, d]
                    valueRows[l] = Scopes.retain(values[l].select(0, 0));
                }
            }
        }

        @Override
        public void close() {
            for (Tensor t : new Tensor[]{qk, qkHeads, qHeads, kHeads, qFlat, kFlat, qGroups, kSlot, v, vSlot, attn, attnGroups, gate, up}) {
                t.releaseReference();
            }
            for (int l = 0; l < keyRows.length; l++) {
                keyRows[l].releaseReference();
                valueRows[l].releaseReference();
            }
        }
    }

    /**
     * The final hidden state [1, 1, hidden] of the one token of {@code ids} [1, 1] at position
     * {@code positions} [1, 1], whose key and value go to slot {@code past} of {@code cache};
     * {@code mask} [1, past + 1] says which slots hold real tokens (the token's own always
     * counts). Runs in the caller's PointerScope, without autograd.
     */
    Tensor hidden(Tensor ids, Tensor positions, Tensor mask, KvCache cache, long past) {
        Scratch sc = cache.oneRowScratch(config);
        long slots = past + 1;
        // the per-step inputs are read into Java and made there: a handful of numbers, for which
        // the dozen LibTorch calls of the batched path cost more than the layers' arithmetic
        float[] bias = new float[(int) slots];
        long[] valid = cpuLongs(mask);
        for (int j = 0; j < past; j++) bias[j] = valid[j] != 0 ? 0f : Float.NEGATIVE_INFINITY;
        Tensor attnBias = floats(bias).view(1, 1, slots);
        Tensor[] angles = angles(cpuLongs(positions)[0]);
        Tensor cos = angles[0], sinSigned = angles[1];

        Tensor x = torch.embedding(embed, ids).view(-1);  // a fresh [hidden] row, updated in place
        for (int l = 0; l < layers.length; l++) {
            CausalLm.Layer w = layers[l];
            // attention block: RMSNorm's weight on the input, its factor as the products' alpha
            Tensor h = x.mul(w.inputNorm());
            Scalar r = rmsFactor(x);
            project(sc.qFlat, w.q(), w.qBias(), h, r);
            project(sc.kFlat, w.k(), w.kBias(), h, r);
            project(sc.v, w.v(), w.vBias(), h, r);
            if (w.qNorm() != null) { // Qwen3: RMSNorm over each head of q and k, one block
                Tensor f = sc.qkHeads.square().mean(lastDim, true, noDtype).add_(rmsEps).rsqrt_();
                sc.qkHeads.mul_(f);
                sc.qHeads.mul_(w.qNorm());
                sc.kHeads.mul_(w.kNorm());
            }
            // rotary embedding of q and k at once: x·cos + rotate_half(x)·sin = x·cos + roll(x)·sinSigned
            Tensor rot = sc.qkHeads.roll(half, lastDim);
            sc.qkHeads.mul_(cos).addcmul_(rot, sinSigned);
            sc.keyRows[l].narrow(1, past, 1).copy_(sc.kSlot);
            sc.valueRows[l].narrow(1, past, 1).copy_(sc.vSlot);
            Tensor keys = sc.keyRows[l].narrow(1, 0, slots), values = sc.valueRows[l].narrow(1, 0, slots);
            // [kvHeads, group, slots]: each kv head's keys against the query heads that read it
            Tensor scores = torch.baddbmm(attnBias, sc.qGroups, keys.transpose(1, 2), one, scale);
            torch.bmm_out(sc.attnGroups, torch.softmax(scores, -1), values);
            x.addmv_(w.o(), sc.attn);  // the residual, added by the product itself
            if (w.oBias() != null) x.add_(w.oBias());
            // MLP block
            h = x.mul(w.postNorm());
            r = rmsFactor(x);
            project(sc.gate, w.gate(), w.gateBias(), h, r);
            project(sc.up, w.up(), w.upBias(), h, r);
            torch.silu_(sc.gate).mul_(sc.up);
            x.addmv_(w.down(), sc.gate);
            if (w.downBias() != null) x.add_(w.downBias());
        }
        return x.mul(rmsFactor(x)).mul_(finalNorm).view(1, 1, -1);
    }

    /**
     * cos and signed sin [headDim] of one position, as {@link Rope#angles} computes them: the
     * angle position × frequency rounded to float32, then its cos and sin (here in double,
     * rounded to float32: within an ulp of LibTorch's float32 cos and sin).
     */
    private Tensor[] angles(long position) {
        int d = config.headDim(), h = d / 2;
        float[] cos = new float[d], sin = new float[d];
        for (int i = 0; i < h; i++) {
            float angle = (float) position * invFreq[i];
            cos[i] = cos[i + h] = (float) Math.cos(angle);
            float s = (float) Math.sin(angle);
            sin[i] = -s;
            sin[i + h] = s;
        }
        return new Tensor[]{floats(cos), floats(sin)};
    }

    /** out = bias + alpha·(w·h), into out. */
    private void project(Tensor out, Tensor w, Tensor bias, Tensor h, Scalar alpha) {
        if (bias == null) torch.addmv_out(out, out, w, h, zero, alpha);  // beta 0: out's old contents are ignored
        else torch.addmv_out(out, bias, w, h, one, alpha);
    }

    /** HF RMSNorm's factor 1/sqrt(mean(x²) + eps) of a flat row, in float32. */
    private Scalar rmsFactor(Tensor x) {
        float meanSquare = torch.dot(x, x).item_float() / x.size(0);
        float r = (float) (1.0 / Math.sqrt(meanSquare + (float) config.rmsNormEps()));
        return new Scalar(r);
    }

    /** A float32 CPU tensor [a.length] holding {@code a}, in the caller's scope. */
    static Tensor floats(float[] a) {
        Tensor t = torch.empty(new long[]{a.length}, new TensorOptions(ScalarType.Float), null);
        if (a.length > 0) t.data_ptr_float().put(a);  // data_ptr of an empty tensor is null
        return t;
    }

    /** The values of an integer or bool tensor, row-major (a CPU int64 one is read in place). */
    private static long[] cpuLongs(Tensor t) {
        boolean ready = t.is_cpu() && t.scalar_type() == ScalarType.Long && t.is_contiguous();
        Tensor c = ready ? t : t.cpu().to(ScalarType.Long).contiguous();
        long[] a = new long[(int) c.numel()];
        if (a.length > 0) c.data_ptr_long().get(a);
        return a;
    }

    void close() {
        zero.close();
        one.close();
        rmsEps.close();
        scale.close();
        noDtype.close();
    }
}
