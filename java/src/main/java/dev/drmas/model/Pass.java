// Pass.java — how one forward through the layers is arranged, the parameter of Transformer's ops:
// a general pass (training, prefill, decoding on GPUs or in bfloat16: fresh tensors, autograd,
// any dtype and device; masked attention, or plain causal attention where the batch allows it)
// or a CPU decoding step in LibTorch's ops (one token per row, float32, into DecodeStep's
// buffers, in place), whose one-row case runs matrix-vector products instead of matrix products.
// (The default CPU decoding step, Transformer.decodeLayer, needs no Pass.)
package dev.drmas.model;

import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptional;

final class Pass {
    /** A CPU decoding step (else a general pass). */
    final boolean decoding;
    /** A decoding step of one row: hidden states are flat [hidden] vectors. */
    final boolean oneRow;
    /**
     * Rows, new tokens per row (1 in a decoding step), and the first slot the new keys and values
     * go to (the slots already in the cache, unless one token is written elsewhere: {@link
     * CausalLm#forwardAt}).
     */
    final long batch, tokens, past;
    /** Key slots a query may read, [0, slots): past + tokens, or the whole mask for a write at a given slot. */
    private final long slots;
    final Rope.Angles angles;
    /**
     * General pass: query t attends to key slots 0..t and no mask is made (null): a forward
     * without cache over a right-padded batch, where this is what the mask would say for every
     * real query (CausalLm.generalPass). Fused attention kernels take it where they refuse a mask.
     */
    final boolean causal;
    /**
     * Which key slots each query attends to. General pass: bool [B, 1, T, past + T] ([B, 1, 1,
     * past + 1] for one query), null when {@link #causal}; decoding step: an additive float bias
     * (0 or −∞) [rows, 1, 1, past + 1], or [1, 1, past + 1] for one row.
     */
    final Tensor mask;
    /** {@link #mask} for scaled_dot_product_attention (null for one row, whose attention is written out). */
    final TensorOptional maskOpt;
    /** General pass: the KV cache or null. */
    final KvCache cache;
    /** Decoding step: its buffers and fixed views. */
    final DecodeStep.Scratch scratch;
    /** Decoding step: where the projections go (views of the scratch buffers); null in a general pass. */
    final Tensor qOut, kOut, vOut, gateOut, upOut;

    private Pass(boolean decoding, boolean causal, long batch, long tokens, long past, long slots, Rope.Angles angles, Tensor mask,
                 KvCache cache, DecodeStep.Scratch sc) {
        this.decoding = decoding;
        this.causal = causal;
        this.oneRow = decoding && sc.rows == 1;
        this.batch = batch;
        this.tokens = tokens;
        this.past = past;
        this.slots = slots;
        this.angles = angles;
        this.mask = mask;
        this.maskOpt = oneRow || mask == null ? null : new TensorOptional(mask);
        this.cache = cache;
        this.scratch = sc;
        qOut = sc == null ? null : sc.qFlat;
        kOut = sc == null ? null : sc.kFlat;
        vOut = sc == null ? null : sc.vFlat;
        gateOut = sc == null ? null : sc.gate;
        upOut = sc == null ? null : sc.up;
    }

    /** A forward of [batch, tokens] new tokens after {@code past} cached slots (cache null: none). */
    static Pass general(long batch, long tokens, long past, Rope.Angles angles, Tensor attend, KvCache cache) {
        return general(batch, tokens, past, past + tokens, angles, attend, cache);
    }

    /** As above, the queries reading key slots [0, slots) (one token written at slot past < slots). */
    static Pass general(long batch, long tokens, long past, long slots, Rope.Angles angles, Tensor attend, KvCache cache) {
        return new Pass(false, false, batch, tokens, past, slots, angles, attend, cache, null);
    }

    /**
     * A forward of [batch, tokens] tokens without cache in which query t attends to key slots
     * 0..t: tokens queries over as many keys, so that scaled_dot_product_attention's is_causal
     * (whose triangle starts at the top left) is exactly that.
     */
    static Pass causal(long batch, long tokens, Rope.Angles angles) {
        return new Pass(false, true, batch, tokens, 0, tokens, angles, null, null, null);
    }

    /**
     * A CPU decoding step of {@code sc.rows} rows in LibTorch's ops, whose new keys and values go
     * to slot {@code past} < slots, rotated by {@code angles}, attending as {@code bias} says.
     */
    static Pass decoding(DecodeStep.Scratch sc, long past, long slots, Rope.Angles angles, Tensor bias) {
        return new Pass(true, false, sc.rows, 1, past, slots, angles, bias, null, sc);
    }

    /** Key slots a query may read: [0, slots()), the cached ones and the new tokens. */
    long slots() {
        return slots;
    }
}
