// Transformer.java — the decoder layers of a CausalLm, written once: RMSNorm, q/k/v, Qwen3's
// per-head norm, rotary embedding, grouped-query attention over the KV cache, SwiGLU MLP, and the
// residuals. Every op takes the Pass that says how this forward is arranged: a general pass
// (training, prefill, GPUs: fresh tensors with autograd), or a CPU decoding step in LibTorch's ops,
// whose calls are fewer because at these sizes a call costs more than its arithmetic
// (bench/README.md, "Rollout engine"): it writes into buffers made once per KV cache, norms and
// rotates q and k as one block, adds the residual inside the output products, and for one row runs
// matrix-vector products with RMSNorm's factor as their alpha. Each op keeps the exact LibTorch
// calls of the code it replaced, so training is bit for bit what it was. The default CPU decoding
// step is decodeLayer: the same layer with every op but the products in libdrmas (residual and
// RMSNorm, attention, SwiGLU), which agrees with LibTorch's ops to rounding.
package dev.drmas.model;

import dev.drmas.bindings.Kernels;
import org.bytedeco.pytorch.DoubleOptional;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.ScalarTypeOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

final class Transformer {
    private final Layer[] layers;
    private final ScalarType dtype;
    private final int heads, kvHeads, headDim, group;
    private final long hidden, inter;
    private final float rmsEpsF;
    // made once: with small models a forward is hundreds of small LibTorch calls, each ~3–7 µs
    // through JavaCPP, allocations of these included (bench/README.md, "Rollout engine")
    private final Scalar zero = new Scalar(0.0), one = new Scalar(1.0), two = new Scalar(2.0), rmsEps, scale;
    private final ScalarTypeOptional noDtype = new ScalarTypeOptional();
    private final DoubleOptional noScale = new DoubleOptional();
    private static final long[] LAST_DIM = {-1};

    private final TensorOptional noMask = new TensorOptional();
    /**
     * Whether masked grouped-query attention of a general pass expands k and v to the query heads
     * (HF's repeat_kv) instead of passing enable_gqa: on CUDA, LibTorch 2.10's flash kernel refuses
     * any mask and its memory-efficient kernel unequal q/kv head counts, so enable_gqa with a mask
     * falls back to the math kernel, which materialises float32 scores [B, heads, T, S]; expanded
     * heads let the memory-efficient kernel run. On by default off the CPU (whose attention takes
     * the grouped form as it is); tests turn it on to compare both forms.
     */
    boolean expandKvHeads;

    Transformer(ModelConfig config, Layer[] layers, ScalarType dtype, boolean expandKvHeads) {
        this.layers = layers;
        this.dtype = dtype;
        this.expandKvHeads = expandKvHeads;
        heads = config.numHeads();
        hidden = config.hiddenSize();
        inter = config.intermediateSize();
        kvHeads = config.numKvHeads();
        headDim = config.headDim();
        group = heads / kvHeads;
        rmsEpsF = (float) config.rmsNormEps();
        rmsEps = new Scalar(config.rmsNormEps());
        scale = new Scalar(1.0 / Math.sqrt(headDim));  // scaled_dot_product_attention's default
    }

    int numLayers() {
        return layers.length;
    }

    /**
     * Decoder layer l: x → x + attention(norm(x)) → that + mlp(norm(that)). x is [B, T, hidden] in
     * a general pass (a new tensor is returned), [rows, hidden] or [hidden] (one row) in a
     * decoding step (x is updated in place and returned).
     */
    Tensor layer(int l, Tensor x, Pass p) {
        Layer w = layers[l];
        Normed h = norm(x, w.inputNorm, p);
        Tensor q = project(p.qOut, h, w.q, w.qT, w.qBias, p);
        Tensor k = project(p.kOut, h, w.k, w.kT, w.kBias, p);
        Tensor v = project(p.vOut, h, w.v, w.vT, w.vBias, p);
        x = addProjection(x, attention(l, q, k, v, w, p), w.o, w.oT, w.oBias, p);

        h = norm(x, w.postNorm, p);
        Tensor gate = project(p.gateOut, h, w.gate, w.gateT, w.gateBias, p);
        Tensor up = project(p.upOut, h, w.up, w.upT, w.upBias, p);
        Tensor gated = p.decoding ? torch.silu_(gate).mul_(up) : torch.silu(gate).mul(up);  // SwiGLU
        return addProjection(x, gated, w.down, w.downT, w.downBias, p);
    }

    // ------------------------------------------------------------------ the native decoding step

    /**
     * Decoder layer l of a native CPU decoding step (DecodeStep's default) on its scratch: x += y
     * (the previous layer's last product; none before the first layer) and h = RMSNorm(x) in one
     * libdrmas call; q, k, v; the attention (libdrmas: Qwen3's per-head norm, the rotation, the
     * cache write, softmax attention over the cache); o into y; x += y and h = RMSNorm(x); gate and
     * up; SwiGLU (libdrmas, into gate); down into y, whose residual the next layer (or {@link
     * #finalNorm}) adds. The products are LibTorch's (matrix-vector ones for one row), as in {@link #layer}.
     */
    void decodeLayer(int l, DecodeStep.Scratch sc, DecodeStep.NativeStep ns, long past, long slots) {
        Layer w = layers[l];
        long rows = sc.rows;
        boolean flat = rows == 1;
        Kernels.rmsNorm(rows, hidden, sc.xSeg, hidden, l == 0 ? null : sc.ySeg, hidden, DecodeStep.floats(w.inputNorm, hidden), rmsEpsF,
                sc.hSeg, hidden);
        product(sc.qFlat, sc.hIn, w.q, w.qT, w.qBias, flat);
        product(sc.kFlat, sc.hIn, w.k, w.kT, w.kBias, flat);
        product(sc.vFlat, sc.hIn, w.v, w.vT, w.vBias, flat);
        Kernels.decodeAttention(rows, heads, kvHeads, headDim, sc.qkvSeg, sc.qkvStride,
                w.qNorm == null ? null : DecodeStep.floats(w.qNorm, headDim), w.kNorm == null ? null : DecodeStep.floats(w.kNorm, headDim),
                rmsEpsF, ns.cos(), ns.sinSigned(), sc.kSeg[l], sc.vSeg[l], sc.cacheRowStride, sc.capacity, past, slots, ns.mask(),
                1.0 / Math.sqrt(headDim), sc.outSeg);
        product(sc.yOut, sc.attnIn, w.o, w.oT, w.oBias, flat);
        Kernels.rmsNorm(rows, hidden, sc.xSeg, hidden, sc.ySeg, hidden, DecodeStep.floats(w.postNorm, hidden), rmsEpsF, sc.hSeg, hidden);
        product(sc.gate, sc.hIn, w.gate, w.gateT, w.gateBias, flat);
        product(sc.up, sc.hIn, w.up, w.upT, w.upBias, flat);
        Kernels.swiglu(rows, inter, sc.gateSeg, inter, sc.upSeg, inter, sc.gateSeg, inter);
        product(sc.yOut, sc.gate, w.down, w.downT, w.downBias, flat);
    }

    /** The native step's end: x += y (the last layer's down product) and h = RMSNorm(x)·weight. */
    void finalNorm(DecodeStep.Scratch sc, Tensor weight) {
        Kernels.rmsNorm(sc.rows, hidden, sc.xSeg, hidden, sc.ySeg, hidden, DecodeStep.floats(weight, hidden), rmsEpsF, sc.hSeg, hidden);
    }

    /** out = in·wᵀ (+ bias): a matrix-vector product with w for one row, else a matrix product with the pre-transposed wT. */
    private void product(Tensor out, Tensor in, Tensor w, Tensor wT, Tensor bias, boolean flat) {
        if (flat) {
            if (bias == null) torch.mv_out(out, w, in);
            else torch.addmv_out(out, bias, w, in, one, one);
        } else {
            if (bias == null) torch.mm_out(out, in, wT);
            else torch.addmm_out(out, bias, in, wT, one, one);
        }
    }

    // ------------------------------------------------------------------ RMSNorm

    /**
     * The input of a projection: RMSNorm(x)·weight, and the factor the product is to be scaled by.
     * One row: x·weight with RMSNorm's factor as that alpha (a dot product and one multiply instead
     * of a norm's five ops; the rounding differs from HF's in the order of the products).
     */
    record Normed(Tensor h, Scalar alpha) {
    }

    private Normed norm(Tensor x, Tensor weight, Pass p) {
        return p.oneRow ? new Normed(x.mul(weight), new Scalar(rowFactor(x))) : new Normed(rmsNorm(x, weight, p), one);
    }

    /** HF's RMSNorm over the last dim: normalised in float32, cast back, then scaled by the weight. */
    Tensor rmsNorm(Tensor x, Tensor weight, Pass p) {
        if (p.oneRow) return x.mul(new Scalar(rowFactor(x))).mul_(weight);
        boolean f32 = dtype == ScalarType.Float; // then both casts would return x itself: skip the calls
        Tensor xf = f32 ? x : x.to(ScalarType.Float);
        Tensor normed = xf.mul(factor(xf));
        if (!f32) normed = normed.to(dtype);
        return p.decoding ? normed.mul_(weight) : weight.mul(normed);
    }

    /** RMSNorm's factor 1/sqrt(mean(x²) + eps) over the last dim, keeping it (float32 x). */
    private Tensor factor(Tensor x) {
        return x.pow(two).mean(LAST_DIM, true, noDtype).add_(rmsEps).rsqrt_();
    }

    /** The same for one flat float32 row, computed from its dot product with itself. */
    private float rowFactor(Tensor x) {
        float meanSquare = torch.dot(x, x).item_float() / x.size(0);
        return (float) (1.0 / Math.sqrt(meanSquare + rmsEpsF));
    }

    // ------------------------------------------------------------------ projections

    /**
     * bias + alpha·(h·wᵀ). General pass: a new tensor (torch.linear). Decoding step: into
     * {@code out}, a view of its buffer (BLAS writes with the buffer's row stride), by addmv
     * for one row or addmm with the pre-transposed {@code wT}; beta 0 without a bias, so out's
     * old contents are ignored.
     */
    private Tensor project(Tensor out, Normed h, Tensor w, Tensor wT, Tensor bias, Pass p) {
        if (!p.decoding) return linear(h.h(), w, bias);
        Tensor base = bias == null ? out : bias;
        Scalar beta = bias == null ? zero : one;
        if (p.oneRow) torch.addmv_out(out, base, w, h.h(), beta, h.alpha());
        else torch.addmm_out(out, base, h.h(), wT, beta, h.alpha());
        return out;
    }

    /** x + a·wᵀ + bias: a new tensor in a general pass; in a decoding step x itself, the product added by addmv_/addmm_. */
    private Tensor addProjection(Tensor x, Tensor a, Tensor w, Tensor wT, Tensor bias, Pass p) {
        if (!p.decoding) return x.add(linear(a, w, bias));
        if (p.oneRow) x.addmv_(w, a);
        else x.addmm_(a, wT);
        if (bias != null) x.add_(bias);
        return x;
    }

    private static Tensor linear(Tensor x, Tensor w, Tensor bias) {
        return bias == null ? torch.linear(x, w) : torch.linear(x, w, new TensorOptional(bias));
    }

    // ------------------------------------------------------------------ attention

    /**
     * Attention of layer l from its projections q, k, v ([B, T, heads·d] and [B, T, kvHeads·d] in
     * a general pass; in a decoding step the [q | k | v] buffer they were written to): Qwen3's
     * per-head norm of q and k, their rotation, the new keys and values into the cache, and the
     * attention output [B, T, heads·d] (decoding: [rows, heads·d], or [heads·d] for one row).
     */
    private Tensor attention(int l, Tensor q, Tensor k, Tensor v, Layer w, Pass p) {
        Tensor keys, values, queries;
        if (p.decoding) {
            // q and k of all heads as one [(rows,) heads + kvHeads, d] block: one norm, one rotation
            DecodeStep.Scratch sc = p.scratch;
            if (w.qNorm != null) {
                sc.qkHeads.mul_(factor(sc.qkHeads));
                sc.qHeads.mul_(w.qNorm);
                sc.kHeads.mul_(w.kNorm);
            }
            p.angles.rotate(sc.qkHeads, true);
            // k and v of this step into slot `past` of the stacked cache, one copy
            sc.cache[l].narrow(sc.slotDim, p.past, 1).copy_(sc.kvSlot);
            queries = sc.qGroups;
            keys = sc.keys[l].narrow(2, 0, p.slots());
            values = sc.values[l].narrow(p.oneRow ? 1 : 2, 0, p.slots());
        } else {
            long b = p.batch, t = p.tokens;
            q = q.view(b, t, heads, headDim);
            k = k.view(b, t, kvHeads, headDim);
            v = v.view(b, t, kvHeads, headDim).transpose(1, 2);
            if (w.qNorm != null) { // Qwen3: RMSNorm over each head before the rotation
                q = rmsNorm(q, w.qNorm, p);
                k = rmsNorm(k, w.kNorm, p);
            }
            q = p.angles.rotate(q.transpose(1, 2), false); // [B, heads, T, d]
            k = p.angles.rotate(k.transpose(1, 2), false); // [B, kvHeads, T, d]
            if (p.cache != null) {
                p.cache.keys(l).narrow(2, p.past, t).copy_(k);
                p.cache.values(l).narrow(2, p.past, t).copy_(v);
                k = p.cache.keys(l).narrow(2, 0, p.slots());
                v = p.cache.values(l).narrow(2, 0, p.slots());
            }
            if (t > 1 || heads == kvHeads) {
                // enable_gqa: query head i reads kv head i / group, as HF's repeat_kv
                Tensor a;
                if (p.causal) {
                    // no mask, T queries over T keys (Pass.causal): is_causal's top-left triangle
                    // is query t reading keys 0..t; CUDA's flash kernel takes it with enable_gqa
                    a = torch.scaled_dot_product_attention(q, k, v, noMask, 0.0, true, noScale, heads != kvHeads);
                } else if (heads != kvHeads && expandKvHeads) {
                    a = torch.scaled_dot_product_attention(q, repeatKv(k), repeatKv(v), p.maskOpt, 0.0, false, noScale, false);
                } else {
                    a = torch.scaled_dot_product_attention(q, k, v, p.maskOpt, 0.0, false, noScale, heads != kvHeads);
                }
                return a.transpose(1, 2).reshape(b, t, (long) heads * headDim); // [B, heads, T, d] -> [B, T, heads·d]
            }
            queries = q.reshape(b, kvHeads, group, headDim);
            keys = k;
            values = v;
        }
        if (p.oneRow) {
            // [kvHeads, group, slots]: each kv head's keys (a pre-transposed view) against the
            // query heads that read it, written out: fewer calls than scaled_dot_product_attention
            Tensor scores = torch.baddbmm(p.mask, queries, keys, one, scale);
            DecodeStep.Scratch sc = p.scratch;
            torch.bmm_out(sc.attnGroups, torch.softmax(scores, -1), values);
            return sc.attn;
        }
        // One query per row with grouped-query attention: the query heads that share a kv head
        // (head i reads kv head i / group, as HF's repeat_kv) go in as that head's rows, [B,
        // kvHeads, group, d]. One query attends to the same slots whatever its row, and
        // LibTorch's CPU attention then reads each kv head once instead of once per query head:
        // 1.8× faster at batch 64 (bench/README.md). The rows come out in head order.
        Tensor a = torch.scaled_dot_product_attention(queries, keys, values, p.maskOpt, 0.0, false, noScale, false);
        return p.decoding ? a.reshape(p.batch, -1) : a.reshape(p.batch, p.tokens, (long) heads * headDim);
    }

    /**
     * [B, kvHeads, S, d] → [B, heads, S, d], kv head j repeated for query heads j·group ..
     * (j + 1)·group − 1: HF's repeat_kv, the heads enable_gqa would read (one copy).
     */
    private Tensor repeatKv(Tensor x) {
        long b = x.size(0), s = x.size(2);
        return x.unsqueeze(2).expand(b, kvHeads, group, s, headDim).reshape(b, heads, s, headDim);
    }

    void close() {
        for (Scalar s : new Scalar[]{zero, one, two, rmsEps, scale}) s.close();
        noMask.close();
        noDtype.close();
        noScale.close();
    }
}
