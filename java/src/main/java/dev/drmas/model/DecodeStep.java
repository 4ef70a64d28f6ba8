// DecodeStep.java — CausalLm's decoding step on the CPU (one new token per row, float32): the
// buffers its layers write into, made once per KV cache, and the step's inputs made in Java (the
// embedding rows, the rotary angles, which slots each row attends to). By default every op but the
// matrix products is libdrmas's (Transformer.decodeLayer: the residual add with RMSNorm, the
// attention from Qwen3's per-head norm to the softmax over the cache, SwiGLU), so that a layer is
// seven LibTorch products and four native calls; the LibTorch arrangement of the same layer
// (Transformer.layer with Pass.decoding) stays for tests and the benchmark's A/B.
package dev.drmas.model;

import java.lang.foreign.MemorySegment;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * One decoding step of a float32 CPU model: B rows, one token each, keys and values appended to a
 * KV cache. Numerically it is HF's forward up to the order of float32 roundings (RMSNorm's sum of
 * squares in float64, the attention written out, the residual added outside the products);
 * {@code CausalLmTest} checks both arrangements against the full forward of the same sequences,
 * padded rows included.
 */
final class DecodeStep {
    private final ModelConfig config;
    private final Transformer transformer;
    private final Tensor embed, finalNorm;
    private final float[] invFreq;
    /**
     * Whether steps run libdrmas's ops between the products (Transformer.decodeLayer) rather than
     * LibTorch's (Transformer.layer, Pass.decoding); tests and the benchmark turn it off to compare.
     */
    boolean nativeStep = true;

    DecodeStep(ModelConfig config, Transformer transformer, Tensor embed, Tensor finalNorm, float[] invFreq) {
        this.config = config;
        this.transformer = transformer;
        this.embed = embed;
        this.finalNorm = finalNorm;
        this.invFreq = invFreq;
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
        /** More rows: the native attention's output [rows, heads·d] (drmas_decode_attention_f32). */
        final Tensor attnOut;
        /** The views the native ops read: qkv and attnOut, per layer the keys and values of the cache; null if the cache is not dense. */
        final MemorySegment qkvSeg, outSeg;
        final MemorySegment[] kSeg, vSeg;
        /**
         * The native step's residual stream x, normed input h and product output y, [rows, hidden]
         * each, and their data; h, attnOut and y as the products take them (flat for one row:
         * matrix-vector products; q, k, v, gate and up are flat for one row already); the
         * embedding's data (null: not contiguous, no native step).
         */
        final Tensor x, h, y, hIn, attnIn, yOut;
        final MemorySegment xSeg, hSeg, ySeg, gateSeg, upSeg, embedSeg;
        /** qkv's stride between rows, the cache's (in floats), and its slots a row. */
        final long qkvStride, cacheRowStride, capacity;
        /** Per layer, the stacked cache: one row [2, kvHeads, capacity, d], else [2, rows, kvHeads, capacity, d]. */
        final Tensor[] cache;
        /** Per layer: one row, keys as [kvHeads, d, capacity] and values [kvHeads, capacity, d]; else [rows, kvHeads, capacity, d] both. */
        final Tensor[] keys, values;
        final int slotDim;                        // the capacity dim of cache[l]

        Scratch(ModelConfig c, Tensor[] keysAndValues, Tensor embed) {
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
                attnOut = Scopes.retain(torch.empty(new long[]{rows, qd}, f32, null));
                long hidden = c.hiddenSize();
                x = Scopes.retain(torch.empty(new long[]{rows, hidden}, f32, null));
                h = Scopes.retain(torch.empty(new long[]{rows, hidden}, f32, null));
                y = Scopes.retain(torch.empty(new long[]{rows, hidden}, f32, null));
                hIn = Scopes.retain(single ? h.view(-1) : h.alias());
                attnIn = Scopes.retain(single ? attnOut.view(-1) : attnOut.alias());
                yOut = Scopes.retain(single ? y.view(-1) : y.alias());
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
                qkvStride = width;
                capacity = keysAndValues[0].size(3);
                // [2, rows, kvHeads, capacity, d] with the last three dims dense (a cache or its first rows)
                long[] st = keysAndValues[0].strides().vec().get();
                cacheRowStride = st[1];
                boolean dense = st[4] == 1 && st[3] == d && st[2] == capacity * d;
                if (!dense) {
                    qkvSeg = outSeg = null;
                    kSeg = vSeg = null;
                } else {
                    qkvSeg = floats(qkv, rows * width);
                    outSeg = floats(attnOut, rows * qd);
                    kSeg = new MemorySegment[layers];
                    vSeg = new MemorySegment[layers];
                    long extent = (rows - 1) * cacheRowStride + kvd * capacity;
                    for (int l = 0; l < layers; l++) {
                        // the stacked cache's halves: [rows, kvHeads, capacity, d] from their first element
                        kSeg[l] = floats(keysAndValues[l].select(0, 0), extent);
                        vSeg[l] = floats(keysAndValues[l].select(0, 1), extent);
                    }
                }
                xSeg = floats(x, rows * hidden);
                hSeg = floats(h, rows * hidden);
                ySeg = floats(y, rows * hidden);
                gateSeg = floats(gate, rows * inter);
                upSeg = floats(up, rows * inter);
                boolean embedOk = embed.is_contiguous() && embed.scalar_type().intern() == ScalarType.Float && embed.is_cpu();
                embedSeg = dense && embedOk ? floats(embed, embed.numel()) : null;
            }
        }

        @Override
        public void close() {
            for (Tensor t : new Tensor[]{qkv, qkHeads, qHeads, kHeads, qFlat, kFlat, vFlat, qGroups, kvSlot, gate, up, attn,
                    attnGroups, attnOut, x, h, y, hIn, attnIn, yOut}) {
                if (t != null) t.releaseReference();
            }
            for (Tensor[] ts : new Tensor[][]{cache, keys, values}) {
                for (Tensor t : ts) t.releaseReference();
            }
        }
    }

    /** A float32 CPU tensor's data from its first element, {@code count} floats long (the tensor stays alive). */
    static MemorySegment floats(Tensor t, long count) {
        return MemorySegment.ofAddress(t.data_ptr().address()).reinterpret(count * 4);
    }

    /**
     * The native attention's per-step inputs (drmas_decode_attention_f32): the rows' rotation and
     * which slots each attends to, as Java arrays read in place.
     */
    record NativeStep(MemorySegment cos, MemorySegment sinSigned, MemorySegment mask) {
    }

    /**
     * The final hidden states [B, 1, hidden] of the tokens {@code ids} [B, 1] at positions
     * {@code positions} [B, 1], whose keys and values go to slot {@code past} of {@code cache};
     * {@code mask} [B, past + 1] says which slots hold real tokens (a token's own slot always
     * counts). Runs in the caller's PointerScope, without autograd.
     */
    Tensor hidden(Tensor ids, Tensor positions, Tensor mask, KvCache cache, long past) {
        return hidden(ids, positions, mask, cache, past, past + 1);
    }

    /**
     * As above, the new keys and values going to slot {@code past} of a mask of {@code slots}
     * ≥ past + 1 slots: the query reads every valid slot of [0, slots) and its own.
     */
    Tensor hidden(Tensor ids, Tensor positions, Tensor mask, KvCache cache, long past, long slots) {
        Scratch sc = cache.decodeScratch(config, embed);
        int rows = (int) sc.rows;
        boolean single = rows == 1;
        // the per-step inputs are read into Java and made there: a handful of numbers, for which
        // the dozen LibTorch calls of the general path cost more than a layer's arithmetic
        long[] valid = Tensors.toLongs(mask), pos = Tensors.toLongs(positions);
        if (nativeStep && sc.embedSeg != null) {
            // a copy: CausalLm.hidden's callers may keep it past the next step, which reuses the scratch
            return nativeLayers(Tensors.toLongs(ids), pos, valid, (int) slots, sc, past, slots).clone();
        }
        Tensor x = torch.embedding(embed, ids).view(single ? new long[]{-1} : new long[]{rows, -1});
        float[] bias = new float[(int) (rows * slots)];
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < slots; j++) {
                if (j != past && valid[(int) (r * slots + j)] == 0) bias[(int) (r * slots + j)] = Float.NEGATIVE_INFINITY;
            }
        }
        // cos and sin broadcast over the heads of a row
        long d = config.headDim();
        Rope.Angles angles = Rope.angles(pos, invFreq, single ? new long[]{d} : new long[]{rows, 1, d});
        // One LibTorch thread for a single row: its ops are too small for a second thread to pay
        // for waking it (batched attention products split 4 heads over 2 threads), so one-row
        // decoding ran 13–16% faster with 1 than with 2 (bench/README.md). Intra-op threads are
        // OpenMP's per-thread setting, restored at once (0.2 µs for both calls); OpenBLAS's own
        // threads for the matrix-vector products are not affected.
        int threads = single ? torch.get_num_threads() : 1;
        if (threads > 1) torch.set_num_threads(1);
        try {
            Tensor attnBias = Tensors.floats(bias).view(single ? new long[]{1, 1, slots} : new long[]{rows, 1, 1, slots});
            return layers(x, Pass.decoding(sc, past, slots, angles, attnBias), rows);
        } finally {
            if (threads > 1) torch.set_num_threads(threads);
        }
    }

    /**
     * The step from Java arrays (CausalLm.decodeAt): the native step's final hidden states, or null
     * when it does not run (turned off, or a cache or embedding it cannot read in place).
     */
    Tensor hiddenFromArrays(long[] ids, long[] pos, long[] valid, int validStride, KvCache cache, long past, long slots) {
        if (!nativeStep) return null;
        Scratch sc = cache.decodeScratch(config, embed);
        return sc.embedSeg == null ? null : nativeLayers(ids, pos, valid, validStride, sc, past, slots);
    }

    /**
     * The native step: the rows' embeddings into the scratch's x, the layers (Transformer.decodeLayer),
     * then the last residual and the final norm in one call: [rows, 1, hidden], a view of the
     * scratch (valid until the next step). Row r attends to slot j < slots where valid[r ·
     * validStride + j] is set, and to its own slot past.
     */
    private Tensor nativeLayers(long[] ids, long[] pos, long[] valid, int validStride, Scratch sc, long past, long slots) {
        int rows = (int) sc.rows;
        long hidden = config.hiddenSize(), vocab = embed.size(0), rowBytes = hidden * 4;
        for (int r = 0; r < rows; r++) {
            if (ids[r] < 0 || ids[r] >= vocab) {
                throw new IllegalArgumentException("token id " + ids[r] + " of row " + r + " is outside the vocabulary [0, " + vocab + ")");
            }
            MemorySegment.copy(sc.embedSeg, ids[r] * rowBytes, sc.xSeg, r * rowBytes, rowBytes);
        }
        int s = (int) slots;
        byte[] attend = new byte[rows * s];
        for (int r = 0; r < rows; r++) {
            for (int j = 0; j < s; j++) attend[r * s + j] = (byte) (valid[r * validStride + j] != 0 || j == past ? 1 : 0);
        }
        float[][] cs = Rope.angleArrays(pos, invFreq);
        NativeStep ns = new NativeStep(MemorySegment.ofArray(cs[0]), MemorySegment.ofArray(cs[1]), MemorySegment.ofArray(attend));
        for (int l = 0; l < transformer.numLayers(); l++) transformer.decodeLayer(l, sc, ns, past, slots);
        transformer.finalNorm(sc, finalNorm);
        return sc.h.view(rows, 1, -1);
    }

    /** The layers over x (in place), then the final norm: [rows, 1, hidden]. */
    private Tensor layers(Tensor x, Pass p, int rows) {
        for (int l = 0; l < transformer.numLayers(); l++) transformer.layer(l, x, p);
        return transformer.rmsNorm(x, finalNorm, p).view(rows, 1, -1);
    }
}
