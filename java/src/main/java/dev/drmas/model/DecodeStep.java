// DecodeStep.java — CausalLm's decoding step on the CPU (one new token per row, float32): the same
// transformer and the same LibTorch ops' arithmetic, arranged so that a step makes about half as
// many LibTorch calls. At these sizes a call costs more than its arithmetic (bench/README.md,
// "Rollout engine"), so the step writes into buffers made once per KV cache, does q and k's
// per-head norm and rotation on one [heads + kvHeads, headDim] block per row, and adds the
// residual inside the output products. One row (batch-1 generation) goes through matrix-vector
// products with each RMSNorm's factor as their alpha; several rows through addmm.
package dev.drmas.model;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * One decoding step of a float32 CPU model: B rows, one token each, keys and values appended to a
 * KV cache. Numerically it is HF's forward up to the order of float32 roundings (for one row,
 * RMSNorm's factor scales the product instead of its input, and the attention is written out
 * instead of {@code scaled_dot_product_attention}); {@code CausalLmTest} checks it against the
 * full forward of the same sequences, padded rows included.
 */
final class DecodeStep {
    private final ModelConfig config;
    private final CausalLm.Layer[] layers;
    private final Tensor embed, finalNorm;
    private final float[] invFreq;
    /** Per layer, the transposed views of q, k, v, o, gate, up and down (for addmm). */
    private final Tensor[][] transposed;
    private final Scalar zero = new Scalar(0.0), one = new Scalar(1.0), rmsEps, scale;
    private final ScalarTypeOptional noDtype = new ScalarTypeOptional();
    private final DoubleOptional noScale = new DoubleOptional();
    private final long[] lastDim = {-1}, half;

    DecodeStep(ModelConfig config, CausalLm.Layer[] layers, Tensor embed, Tensor finalNorm, float[] invFreq) {
        this.config = config;
        this.invFreq = invFreq;
        this.layers = layers;
        this.embed = embed;
        this.finalNorm = finalNorm;
        rmsEps = new Scalar(config.rmsNormEps());
        scale = new Scalar(1.0 / Math.sqrt(config.headDim()));  // scaled_dot_product_attention's default
        half = new long[]{config.headDim() / 2};
        transposed = new Tensor[layers.length][];
        try (PointerScope scope = new PointerScope()) {
            for (int l = 0; l < layers.length; l++) {
                CausalLm.Layer w = layers[l];
                Tensor[] t = {w.q(), w.k(), w.v(), w.o(), w.gate(), w.up(), w.down()};
                for (int i = 0; i < t.length; i++) t[i] = Scopes.retain(t[i].t());
                transposed[l] = t;
            }
        }
    }

    /**
     * Buffers and fixed views of one KV cache's decoding, reused by every step. Each row's q, k
     * and v go side by side into one buffer, [q | k | v]: q and k of all heads form one block (so
     * the per-head norm and the rotation run once over both), and k and v one [2, kvHeads, d]
     * block that a single copy appends to the cache's stacked keys and values. Also the MLP's
     * gate and up, and for one row the attention output and the cache without its batch dim.
     * Shapes have a leading [rows] dim unless rows is 1.
     */
    static final class Scratch implements AutoCloseable {
        final long rows;
        final Tensor qkv, qkHeads, qHeads, kHeads, qFlat, kFlat, vFlat, qGroups, kvSlot, gate, up;
        final Tensor attn, attnGroups;            // one row only
        /** Per layer, the stacked cache: one row [2, kvHeads, capacity, d], else [2, rows, kvHeads, capacity, d]. */
        final Tensor[] cache;
        /** Per layer: one row, keys as [kvHeads, d, capacity] and values [kvHeads, capacity, d]; else [rows, kvHeads, capacity, d] both. */
        final Tensor[] keys, values;
        final int slotDim;                        // the capacity dim of cache[l]

        Scratch(ModelConfig c, Tensor[] keysAndValues) {
            int heads = c.numHeads(), kvHeads = c.numKvHeads(), d = c.headDim(), group = heads / kvHeads;
            rows = keysAndValues[0].size(1);
            boolean single = rows == 1;
            slotDim = single ? 2 : 3;
            try (PointerScope scope = new PointerScope()) {
                TensorOptions f32 = new TensorOptions(ScalarType.Float);
                long qd = (long) heads * d, kvd = (long) kvHeads * d, width = qd + 2 * kvd;
                qkv = Scopes.retain(torch.empty(single ? new long[]{width} : new long[]{rows, width}, f32, null));
                int last = single ? 0 : 1;  // the dim along a row
                Tensor qk = qkv.narrow(last, 0, qd + kvd);
                qkHeads = Scopes.retain(single ? qk.view(heads + kvHeads, d) : qk.view(rows, heads + kvHeads, d));
                qHeads = Scopes.retain(qkHeads.narrow(last, 0, heads));
                kHeads = Scopes.retain(qkHeads.narrow(last, heads, kvHeads));
                qFlat = Scopes.retain(qkv.narrow(last, 0, qd));
                kFlat = Scopes.retain(qkv.narrow(last, qd, kvd));
                vFlat = Scopes.retain(qkv.narrow(last, qd + kvd, kvd));
                // query head i reads kv head i / group, as HF's repeat_kv
                qGroups = Scopes.retain(single ? qHeads.view(kvHeads, group, d) : qHeads.view(rows, kvHeads, group, d));
                Tensor kv = qkv.narrow(last, qd, 2 * kvd);
                // [2, (rows,) kvHeads, 1, d]: the layout of one slot of the stacked cache
                kvSlot = Scopes.retain(single ? kv.view(2, kvHeads, 1, d)
                        : kv.view(rows, 2, kvHeads, 1, d).permute(1, 0, 2, 3, 4));
                long inter = c.intermediateSize();
                gate = Scopes.retain(torch.empty(single ? new long[]{inter} : new long[]{rows, inter}, f32, null));
                up = Scopes.retain(torch.empty(single ? new long[]{inter} : new long[]{rows, inter}, f32, null));
                attn = single ? Scopes.retain(torch.empty(new long[]{qd}, f32, null)) : null;
                attnGroups = single ? Scopes.retain(attn.view(kvHeads, group, d)) : null;
                int layers = keysAndValues.length;
                cache = new Tensor[layers];
                keys = new Tensor[layers];
                values = new Tensor[layers];
                for (int l = 0; l < layers; l++) {
                    Tensor all = keysAndValues[l];
                    cache[l] = Scopes.retain(single ? all.select(1, 0) : all.alias());
                    keys[l] = Scopes.retain(single ? cache[l].select(0, 0).transpose(1, 2) : all.select(0, 0));
                    values[l] = Scopes.retain(single ? cache[l].select(0, 1) : all.select(0, 1));
                }
            }
        }

        @Override
        public void close() {
            for (Tensor t : new Tensor[]{qkv, qkHeads, qHeads, kHeads, qFlat, kFlat, vFlat, qGroups, kvSlot, gate, up, attn,
                    attnGroups}) {
                if (t != null) t.releaseReference();
            }
            for (Tensor[] ts : new Tensor[][]{cache, keys, values}) {
                for (Tensor t : ts) t.releaseReference();
            }
        }
    }

    /**
     * The final hidden states [B, 1, hidden] of the tokens {@code ids} [B, 1] at positions
     * {@code positions} [B, 1], whose keys and values go to slot {@code past} of {@code cache};
     * {@code mask} [B, past + 1] says which slots hold real tokens (a token's own slot always
     * counts). Runs in the caller's PointerScope, without autograd.
     */
    Tensor hidden(Tensor ids, Tensor positions, Tensor mask, KvCache cache, long past) {
        Scratch sc = cache.decodeScratch(config);
        int rows = (int) sc.rows, d = config.headDim();
        long slots = past + 1;
        // the per-step inputs are read into Java and made there: a handful of numbers, for which
        // the dozen LibTorch calls of the general path cost more than a layer's arithmetic
        float[] bias = new float[(int) (rows * slots)];
        long[] valid = Tensors.toLongs(mask), pos = Tensors.toLongs(positions);
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < past; j++) bias[(int) (r * slots + j)] = valid[(int) (r * slots + j)] != 0 ? 0f : Float.NEGATIVE_INFINITY;
        }
        float[] cos = new float[rows * d], sin = new float[rows * d];
        for (int r = 0; r < rows; r++) angles(pos[r], cos, sin, r * d);
        Tensor cosT = Tensors.floats(cos), sinT = Tensors.floats(sin);
        if (rows > 1) {
            cosT = cosT.view(rows, 1, d);  // broadcast over the heads of a row
            sinT = sinT.view(rows, 1, d);
        }
        Tensor x = rows == 1 ? torch.embedding(embed, ids).view(-1) : torch.embedding(embed, ids).view(rows, -1);
        if (rows == 1) {
            // One LibTorch thread for a single row: its ops are too small for a second thread to pay
            // for waking it (batched attention products split 4 heads over 2 threads), so one-row
            // decoding ran 13–16% faster with 1 than with 2 (bench/README.md). Intra-op threads are
            // OpenMP's per-thread setting, restored at once (0.2 µs for both calls); OpenBLAS's own
            // threads for the matrix-vector products are not affected.
            int threads = torch.get_num_threads();
            if (threads > 1) torch.set_num_threads(1);
            try {
                Tensor attnBias = Tensors.floats(bias).view(1, 1, slots);
                for (int l = 0; l < layers.length; l++) oneRow(l, x, sc, cosT, sinT, attnBias, past, slots);
                return x.mul(rmsFactor(x)).mul_(finalNorm).view(1, 1, -1);
            } finally {
                if (threads > 1) torch.set_num_threads(threads);
            }
        }
        TensorOptional attnBias = new TensorOptional(Tensors.floats(bias).view(rows, 1, 1, slots));
        for (int l = 0; l < layers.length; l++) rowsLayer(l, x, sc, cosT, sinT, attnBias, past, slots);
        return x.mul(rmsFactors(x)).mul_(finalNorm).view(rows, 1, -1);
    }

    /** A layer for one row, x [hidden] updated in place: matrix-vector products, RMSNorm's factor as their alpha. */
    private void oneRow(int l, Tensor x, Scratch sc, Tensor cos, Tensor sinSigned, Tensor attnBias, long past, long slots) {
        CausalLm.Layer w = layers[l];
        Tensor h = x.mul(w.inputNorm());
        Scalar r = rmsFactor(x);
        project(sc.qFlat, w.q(), w.qBias(), h, r);
        project(sc.kFlat, w.k(), w.kBias(), h, r);
        project(sc.vFlat, w.v(), w.vBias(), h, r);
        normAndRotate(w, sc, cos, sinSigned);
        appendToCache(l, sc, past);
        // [kvHeads, group, slots]: each kv head's keys against the query heads that read it
        Tensor scores = torch.baddbmm(attnBias, sc.qGroups, sc.keys[l].narrow(2, 0, slots), one, scale);
        torch.bmm_out(sc.attnGroups, torch.softmax(scores, -1), sc.values[l].narrow(1, 0, slots));
        x.addmv_(w.o(), sc.attn);  // the residual, added by the product itself
        if (w.oBias() != null) x.add_(w.oBias());
        h = x.mul(w.postNorm());
        r = rmsFactor(x);
        project(sc.gate, w.gate(), w.gateBias(), h, r);
        project(sc.up, w.up(), w.upBias(), h, r);
        torch.silu_(sc.gate).mul_(sc.up);
        x.addmv_(w.down(), sc.gate);
        if (w.downBias() != null) x.add_(w.downBias());
    }

    /** A layer for several rows, x [rows, hidden] updated in place: addmm into the buffers. */
    private void rowsLayer(int l, Tensor x, Scratch sc, Tensor cos, Tensor sinSigned, TensorOptional attnBias, long past,
                           long slots) {
        CausalLm.Layer w = layers[l];
        Tensor[] t = transposed[l];
        Tensor h = x.mul(rmsFactors(x)).mul_(w.inputNorm());  // HF's RMSNorm: (x·factor)·weight
        projectRows(sc.qFlat, t[0], w.qBias(), h);
        projectRows(sc.kFlat, t[1], w.kBias(), h);
        projectRows(sc.vFlat, t[2], w.vBias(), h);
        normAndRotate(w, sc, cos, sinSigned);
        appendToCache(l, sc, past);
        // the query heads of a kv head go in as its rows: one query attends to the same slots
        // whatever its row, and LibTorch's CPU attention then reads each kv head once
        Tensor a = torch.scaled_dot_product_attention(sc.qGroups, sc.keys[l].narrow(2, 0, slots),
                sc.values[l].narrow(2, 0, slots), attnBias, 0.0, false, noScale, false);
        x.addmm_(a.reshape(sc.rows, -1), t[3]);  // the residual, added by the product itself
        if (w.oBias() != null) x.add_(w.oBias());
        h = x.mul(rmsFactors(x)).mul_(w.postNorm());
        projectRows(sc.gate, t[4], w.gateBias(), h);
        projectRows(sc.up, t[5], w.upBias(), h);
        torch.silu_(sc.gate).mul_(sc.up);
        x.addmm_(sc.gate, t[6]);
        if (w.downBias() != null) x.add_(w.downBias());
    }

    /** Qwen3's per-head RMSNorm of q and k (one block), then the rotary embedding of both. */
    private void normAndRotate(CausalLm.Layer w, Scratch sc, Tensor cos, Tensor sinSigned) {
        if (w.qNorm() != null) {
            Tensor f = sc.qkHeads.square().mean(lastDim, true, noDtype).add_(rmsEps).rsqrt_();
            sc.qkHeads.mul_(f);
            sc.qHeads.mul_(w.qNorm());
            sc.kHeads.mul_(w.kNorm());
        }
        // x·cos + rotate_half(x)·sin = x·cos + roll(x, d/2)·sinSigned
        Tensor rot = sc.qkHeads.roll(half, lastDim);
        sc.qkHeads.mul_(cos).addcmul_(rot, sinSigned);
    }

    /** k (rotated) and v of this step into slot {@code past} of layer l's stacked cache, one copy. */
    private void appendToCache(int l, Scratch sc, long past) {
        sc.cache[l].narrow(sc.slotDim, past, 1).copy_(sc.kvSlot);
    }

    /** out = bias + alpha·(w·h), into out. */
    private void project(Tensor out, Tensor w, Tensor bias, Tensor h, Scalar alpha) {
        if (bias == null) torch.addmv_out(out, out, w, h, zero, alpha);  // beta 0: out's old contents are ignored
        else torch.addmv_out(out, bias, w, h, one, alpha);
    }

    /** out = bias + h·wᵀ, into out (rows of a wider buffer are fine: BLAS writes with its row stride). */
    private void projectRows(Tensor out, Tensor wT, Tensor bias, Tensor h) {
        if (bias == null) torch.addmm_out(out, out, h, wT, zero, one);
        else torch.addmm_out(out, bias, h, wT, one, one);
    }

    /** HF RMSNorm's factor 1/sqrt(mean(x²) + eps) of a flat row, in float32. */
    private Scalar rmsFactor(Tensor x) {
        float meanSquare = torch.dot(x, x).item_float() / x.size(0);
        float r = (float) (1.0 / Math.sqrt(meanSquare + (float) config.rmsNormEps()));
        return new Scalar(r);
    }

    /** The same per row of x [rows, hidden], as [rows, 1]. */
    private Tensor rmsFactors(Tensor x) {
        return x.square().mean(lastDim, true, noDtype).add_(rmsEps).rsqrt_();
    }

    /**
     * cos and signed sin of one position into {@code cos} and {@code sin} at {@code at}, as
     * {@link Rope#angles} computes them: the angle position × frequency rounded to float32, then
     * its cos and sin (here in double, rounded to float32: within an ulp of LibTorch's float32).
     */
    private void angles(long position, float[] cos, float[] sin, int at) {
        int h = config.headDim() / 2;
        for (int i = 0; i < h; i++) {
            float angle = (float) position * invFreq[i];
            cos[at + i] = cos[at + i + h] = (float) Math.cos(angle);
            float s = (float) Math.sin(angle);
            sin[at + i] = -s;
            sin[at + i + h] = s;
        }
    }

    void close() {
        for (Tensor[] t : transposed) {
            for (Tensor x : t) x.releaseReference();
        }
        zero.close();
        one.close();
        rmsEps.close();
        scale.close();
        noDtype.close();
        noScale.close();
    }
}
