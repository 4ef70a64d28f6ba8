// KvCache.java — keys and values of every layer for a batch of sequences, allocated once for the
// longest total length, so that decoding appends one slot per step instead of reallocating or
// recomputing the prefix. Slot s of every row is sequence position s of the (left-padded) batch.
package dev.drmas.model;

import java.lang.foreign.MemorySegment;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Per layer K and V of shape [batch, kvHeads, capacity, headDim], the two halves of one
 * [2, batch, kvHeads, capacity, headDim] tensor (so that a decoding step writes a slot of both
 * with one copy). {@link #length()} slots are
 * filled; a forward with the cache writes its T new keys and values at slots
 * [length, length + T) and advances length by T. {@link #reset()} makes the cache reusable for
 * another batch of the same size. The tensors are owned by this object: {@link #close()} frees them.
 */
public final class KvCache implements AutoCloseable {
    private final Tensor[] keysAndValues, keys, values;
    private final long batch, capacity, kvHeads, headDim;
    private final ScalarType dtype;
    private long length;
    private DecodeStep.Scratch decode; // CPU decoding's buffers, made on first use

    KvCache(ModelConfig c, long batch, long capacity, ScalarType dtype, Device device) {
        if (batch <= 0 || capacity <= 0) {
            throw new IllegalArgumentException("KV cache needs batch > 0 and capacity > 0, got " + batch + " and " + capacity);
        }
        this.batch = batch;
        this.capacity = capacity;
        this.kvHeads = c.numKvHeads();
        this.headDim = c.headDim();
        this.dtype = dtype;
        keysAndValues = new Tensor[c.numLayers()];
        keys = new Tensor[c.numLayers()];
        values = new Tensor[c.numLayers()];
        try (PointerScope scope = new PointerScope()) {
            long[] shape = {2, batch, kvHeads, capacity, headDim};
            // Made where it lives, for any device: zeros first made on the host and then copied cost all
            // layers' size in host memory at once and a host-to-device copy per cache.
            TensorOptions onDevice = new TensorOptions(dtype).device(new DeviceOptional(device));
            for (int l = 0; l < keys.length; l++) {
                // zeros, not empty: slots never written stay finite
                keysAndValues[l] = Scopes.retain(torch.zeros(shape, onDevice));
                keys[l] = Scopes.retain(keysAndValues[l].select(0, 0));
                values[l] = Scopes.retain(keysAndValues[l].select(0, 1));
            }
        }
    }

    public long batchSize() {
        return batch;
    }

    public long capacity() {
        return capacity;
    }

    /** Slots filled so far: the attention mask of the next forward covers length() + T keys. */
    public long length() {
        return length;
    }

    /** Forgets the contents (no reallocation). */
    public void reset() {
        length = 0;
    }

    Tensor keys(int layer) {
        return keys[layer];
    }

    Tensor values(int layer) {
        return values[layer];
    }

    /** [2, batch, kvHeads, capacity, headDim]: keys(layer) and values(layer) stacked. */
    Tensor keysAndValues(int layer) {
        return keysAndValues[layer];
    }

    /** Checks that a forward of [b, t] tokens of a model shaped like {@code c} fits. */
    void checkFits(ModelConfig c, ScalarType modelDtype, long b, long t) {
        checkShape(c, modelDtype, b);
        if (length + t > capacity) {
            throw new IllegalArgumentException("KV cache is full: " + length + " + " + t + " tokens exceed its capacity "
                    + capacity);
        }
    }

    /** Checks that this cache is of a model shaped like {@code c} and holds {@code b} rows. */
    void checkShape(ModelConfig c, ScalarType modelDtype, long b) {
        if (keys.length != c.numLayers() || kvHeads != c.numKvHeads() || headDim != c.headDim() || dtype != modelDtype) {
            throw new IllegalArgumentException("KV cache (" + keys.length + " layers, " + kvHeads + " kv heads, head_dim "
                    + headDim + ", " + dtype + ") does not fit the model (" + c.numLayers() + ", " + c.numKvHeads() + ", "
                    + c.headDim() + ", " + modelDtype + ")");
        }
        if (b != batch) throw new IllegalArgumentException("KV cache holds " + batch + " rows but input_ids has " + b);
    }

    /** Sets the slots counted as filled (0 ≤ n ≤ capacity): for an engine that wrote them itself ({@link #copyRows}). */
    public void setLength(long n) {
        if (n < 0 || n > capacity) throw new IllegalArgumentException("KV cache length " + n + " outside [0, " + capacity + "]");
        length = n;
    }

    /**
     * A cache of this one's first {@code rows} rows, sharing its memory (a view: writes go
     * through both ways), of the same capacity and length. Closing it frees nothing of this
     * cache's. The rollout engine steps only the rows still generating this way.
     */
    public KvCache firstRows(long rows) {
        if (rows <= 0 || rows > batch) throw new IllegalArgumentException("first rows " + rows + " of a KV cache of " + batch);
        return new KvCache(this, rows);
    }

    private KvCache(KvCache of, long rows) {
        batch = rows;
        capacity = of.capacity;
        kvHeads = of.kvHeads;
        headDim = of.headDim;
        dtype = of.dtype;
        length = of.length;
        int layers = of.keys.length;
        keysAndValues = new Tensor[layers];
        keys = new Tensor[layers];
        values = new Tensor[layers];
        try (PointerScope scope = new PointerScope()) {
            for (int l = 0; l < layers; l++) {
                keysAndValues[l] = Scopes.retain(of.keysAndValues[l].narrow(1, 0, rows));
                keys[l] = Scopes.retain(keysAndValues[l].select(0, 0));
                values[l] = Scopes.retain(keysAndValues[l].select(0, 1));
            }
        }
    }

    /**
     * Copies slots [srcFrom, srcFrom + len) of rows {@code srcRows} of {@code src} (the same
     * cache allowed; a row may repeat) to slots [dstFrom, dstFrom + len) of rows {@code dstRows}
     * of this cache, every layer's keys and values, two LibTorch calls a layer (the source rows
     * are gathered first, so source and destination may overlap when they are different rows).
     */
    public void copyRows(KvCache src, long[] srcRows, long srcFrom, long len, long[] dstRows, long dstFrom) {
        if (srcRows.length != dstRows.length) {
            throw new IllegalArgumentException(srcRows.length + " source rows but " + dstRows.length + " destination rows");
        }
        if (src.keys.length != keys.length || src.kvHeads != kvHeads || src.headDim != headDim || src.dtype != dtype) {
            throw new IllegalArgumentException("copyRows between KV caches of different models");
        }
        if (len < 0 || srcFrom < 0 || dstFrom < 0 || srcFrom + len > src.capacity || dstFrom + len > capacity) {
            throw new IllegalArgumentException("copyRows: slots [" + srcFrom + ", " + (srcFrom + len) + ") of " + src.capacity
                    + " to [" + dstFrom + ", " + (dstFrom + len) + ") of " + capacity);
        }
        for (long r : srcRows) if (r < 0 || r >= src.batch) throw new IllegalArgumentException("source row " + r + " of " + src.batch);
        for (long r : dstRows) if (r < 0 || r >= batch) throw new IllegalArgumentException("destination row " + r + " of " + batch);
        if (srcRows.length == 0 || len == 0) return;
        if (copyInPlace(src, srcRows, srcFrom, len, dstRows, dstFrom)) return;
        try (PointerScope scope = new PointerScope()) {
            Tensor from = Tensors.longs(srcRows, srcRows.length), to = Tensors.longs(dstRows, dstRows.length);
            Device dev = keysAndValues[0].device();
            if (!dev.is_cpu()) {
                from = from.to(dev, ScalarType.Long);
                to = to.to(dev, ScalarType.Long);
            }
            for (int l = 0; l < keys.length; l++) {
                Tensor part = src.keysAndValues[l].narrow(3, srcFrom, len).index_select(1, from);
                keysAndValues[l].narrow(3, dstFrom, len).index_copy_(1, to, part);
            }
        }
    }

    /**
     * copyRows on the CPU in float32 as plain memory copies: per layer, keys and values, pair of
     * rows and kv head, one contiguous run of len × headDim floats (the rollout engine copies many
     * short prompts, for which the gather and scatter calls cost more than the bytes). Not when a
     * destination row is also a source row of the same cache (the gather must come first then), nor
     * on other devices or dtypes: false, and copyRows gathers.
     */
    private boolean copyInPlace(KvCache src, long[] srcRows, long srcFrom, long len, long[] dstRows, long dstFrom) {
        Tensor first = keysAndValues[0];
        if (dtype != ScalarType.Float || !first.is_cpu() || !src.keysAndValues[0].is_cpu()) return false;
        if (src.sameStorage(this)) {
            for (long d : dstRows) for (long r : srcRows) if (d == r) return false;
        }
        for (int l = 0; l < keys.length; l++) {
            long[] a = src.keysAndValues[l].strides().vec().get(), b = keysAndValues[l].strides().vec().get();
            if (a[4] != 1 || a[3] != headDim || b[4] != 1 || b[3] != headDim) return false;
            MemorySegment from = DecodeStep.floats(src.keysAndValues[l], extent(src.keysAndValues[l], a)),
                    to = DecodeStep.floats(keysAndValues[l], extent(keysAndValues[l], b));
            long run = len * headDim * 4;
            for (int kv = 0; kv < 2; kv++) {
                for (int i = 0; i < srcRows.length; i++) {
                    for (long g = 0; g < kvHeads; g++) {
                        long fo = (kv * a[0] + srcRows[i] * a[1] + g * a[2] + srcFrom * headDim) * 4;
                        long to4 = (kv * b[0] + dstRows[i] * b[1] + g * b[2] + dstFrom * headDim) * 4;
                        MemorySegment.copy(from, fo, to, to4, run);
                    }
                }
            }
        }
        return true;
    }

    // floats from a [2, batch, kvHeads, capacity, d] tensor's first element to its last, by its strides
    private static long extent(Tensor t, long[] st) {
        long e = 1;
        for (int i = 0; i < st.length; i++) e += (t.size(i) - 1) * st[i];
        return e;
    }

    // whether the two caches' tensors share memory (a cache and its firstRows view)
    private boolean sameStorage(KvCache o) {
        return keysAndValues[0].storage().data().address() == o.keysAndValues[0].storage().data().address();
    }

    /** The buffers of {@link DecodeStep} for this cache, made on first use and freed by close(). */
    DecodeStep.Scratch decodeScratch(ModelConfig c, Tensor embed) {
        if (decode == null) decode = new DecodeStep.Scratch(c, keysAndValues, embed);
        return decode;
    }

    void advance(long t) {
        length += t;
    }

    /** Whether {@link #close} has let go of the tensors (a cache of no layers counts as open). */
    public boolean isClosed() {
        return keysAndValues.length > 0 && keysAndValues[0] == null;
    }

    @Override
    public void close() {
        if (decode != null) decode.close();
        decode = null;
        for (int l = 0; l < keys.length; l++) {
            for (Tensor t : new Tensor[]{keys[l], values[l], keysAndValues[l]}) {
                if (t != null) t.releaseReference();
            }
            keys[l] = values[l] = keysAndValues[l] = null;
        }
    }
}
