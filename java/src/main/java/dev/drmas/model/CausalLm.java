// CausalLm.java — the decoder-only transformer of the Qwen2/2.5, Qwen3 and Llama families in
// LibTorch: embeddings, RMSNorm, rotary embeddings, grouped-query attention, SwiGLU MLP, LM head.
// Its parameters are an ordered map under HF tensor names, so that loading and saving HF
// checkpoints is a matter of names. The layers are Transformer's, one implementation for every
// forward: prefill, teacher-forced training and decoding on GPUs run its general pass, decoding on
// the CPU (one new token per row) its decoding arrangement through DecodeStep, which makes fewer
// LibTorch calls and is checked against the general pass.
package dev.drmas.model;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.AutoGradMode;
import org.bytedeco.pytorch.BoolOptional;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.Generator;
import org.bytedeco.pytorch.GeneratorOptional;
import org.bytedeco.pytorch.GradMode;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Scalar;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorArrayRefOptional;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * A causal language model.
 *
 * <p><b>Inputs.</b> {@code inputIds} and {@code positionIds} are int64 [B, T];
 * {@code attentionMask} (bool or integer 0/1) is [B, P + T] and says which key slots hold real
 * tokens, where P is the number of slots already in the KV cache (0 without one). Query t of a
 * row attends to the valid slots up to and including its own. Batches of prompts of different
 * lengths are left-padded, as HF generation does, so that the next token of every row goes
 * into the same slot; position ids then count only real tokens ({@link #positionIds}). Right
 * padding is as valid for a forward without cache (teacher forcing), and cheaper: when every row
 * is its real tokens then padding, the attention is plain causal attention without a mask (what
 * the mask says for every real query), which fused attention kernels take. A padding query
 * attends to itself only (masked) or to every slot up to its own (causal): its output is finite
 * and never to be read.
 *
 * <p><b>Memory.</b> Parameters are owned by the model (freed by {@link #close()}); the tensors of
 * {@link #parameters()} are the live ones (an optimiser may update them in place). Every forward
 * runs in its own PointerScope, so its intermediates are freed when it returns; the returned
 * tensor is attached to the caller's innermost PointerScope (with none open, the garbage
 * collector frees it), so callers wrap loops in {@code try (PointerScope s = new PointerScope())}.
 * The autograd graph keeps what backward needs.
 *
 * <p><b>Autograd.</b> Parameters do not require grad until {@link #setRequiresGrad}(true). A forward
 * with a KV cache is inference: it runs without autograd (the cache must not hold a graph).
 *
 * <p><b>Activation checkpointing.</b> A training forward ({@link #trainingHidden}) with
 * {@link #setActivationCheckpointing} on runs the decoder layers without autograd, keeping only
 * each layer's input; the caller back-propagates its loss into the final hidden states as usual,
 * then calls {@link PendingBackward#finishBackward()}, which recomputes the layers from last to
 * first with autograd and back-propagates through each (LibTorch's Java presets have no custom
 * autograd Function or saved-tensor hooks, so the recompute is driven from here).
 */
public final class CausalLm implements AutoCloseable {
    /** transformers' default max_shard_size ("5GB"). */
    public static final long DEFAULT_SHARD_BYTES = 5_000_000_000L;
    /** HF's initializer_range. */
    static final double INIT_STD = 0.02;

    private final ModelConfig config;
    private final ScalarType dtype;
    private final Device device;
    private final Map<String, Tensor> params;
    private final Layer[] layers;
    private final Transformer transformer;
    private final Tensor embed, finalNorm, lmHead, invFreq;
    private final DecodeStep decodeStep;
    /** Whether CPU decoding goes through decodeStep; tests turn it off to check the general path too. */
    boolean decodeStepOn = true;

    /**
     * Whether CPU decoding steps run libdrmas's ops between the matrix products (the residual and
     * RMSNorm, the attention, SwiGLU: the default) or LibTorch's: for tests and the benchmark that
     * compare both.
     */
    public void decodeNative(boolean on) {
        decodeStep.nativeStep = on;
    }
    private boolean activationCheckpointing;
    private boolean rightPaddedAsCausal = true;
    private boolean closed;

    /** Takes ownership of {@code params} (retained, attached to no scope), named and shaped as {@link #parameterShapes}. */
    private CausalLm(ModelConfig config, ScalarType dtype, Device device, Map<String, Tensor> params) {
        this.config = config;
        this.dtype = dtype;
        this.device = device;
        this.params = Collections.unmodifiableMap(params);
        layers = new Layer[config.numLayers()];
        for (int i = 0; i < layers.length; i++) layers[i] = new Layer(params, i);
        transformer = new Transformer(config, layers, dtype, !device.is_cpu());
        embed = params.get("model.embed_tokens.weight");
        finalNorm = params.get("model.norm.weight");
        lmHead = config.tieWordEmbeddings() ? embed : params.get("lm_head.weight");
        double[] f = Rope.inverseFrequencies(config.headDim(), config.ropeTheta(), config.ropeScaling());
        float[] f32 = new float[f.length];
        for (int i = 0; i < f.length; i++) f32[i] = (float) f[i];
        try (PointerScope scope = new PointerScope()) {
            invFreq = Scopes.retain(Tensors.floats(f32).to(device, ScalarType.Float));
        }
        decodeStep = new DecodeStep(config, transformer, embed, finalNorm, f32);
    }

    // ------------------------------------------------------------------ construction

    /**
     * The parameters a model of {@code c} has, in HF's state-dict order, with their shapes. The
     * LM head is absent when the embeddings are tied.
     */
    public static Map<String, long[]> parameterShapes(ModelConfig c) {
        long h = c.hiddenSize(), q = (long) c.numHeads() * c.headDim(), kv = (long) c.numKvHeads() * c.headDim();
        long inter = c.intermediateSize(), d = c.headDim();
        Map<String, long[]> s = new LinkedHashMap<>();
        s.put("model.embed_tokens.weight", new long[]{c.vocabSize(), h});
        for (int i = 0; i < c.numLayers(); i++) {
            String p = "model.layers." + i + ".";
            s.put(p + "self_attn.q_proj.weight", new long[]{q, h});
            if (c.qkvBias()) s.put(p + "self_attn.q_proj.bias", new long[]{q});
            s.put(p + "self_attn.k_proj.weight", new long[]{kv, h});
            if (c.qkvBias()) s.put(p + "self_attn.k_proj.bias", new long[]{kv});
            s.put(p + "self_attn.v_proj.weight", new long[]{kv, h});
            if (c.qkvBias()) s.put(p + "self_attn.v_proj.bias", new long[]{kv});
            s.put(p + "self_attn.o_proj.weight", new long[]{h, q});
            if (c.outputBias()) s.put(p + "self_attn.o_proj.bias", new long[]{h});
            if (c.family().qkNorm()) {
                s.put(p + "self_attn.q_norm.weight", new long[]{d});
                s.put(p + "self_attn.k_norm.weight", new long[]{d});
            }
            s.put(p + "mlp.gate_proj.weight", new long[]{inter, h});
            if (c.mlpBias()) s.put(p + "mlp.gate_proj.bias", new long[]{inter});
            s.put(p + "mlp.up_proj.weight", new long[]{inter, h});
            if (c.mlpBias()) s.put(p + "mlp.up_proj.bias", new long[]{inter});
            s.put(p + "mlp.down_proj.weight", new long[]{h, inter});
            if (c.mlpBias()) s.put(p + "mlp.down_proj.bias", new long[]{h});
            s.put(p + "input_layernorm.weight", new long[]{h});
            s.put(p + "post_attention_layernorm.weight", new long[]{h});
        }
        s.put("model.norm.weight", new long[]{h});
        if (!c.tieWordEmbeddings()) s.put("lm_head.weight", new long[]{c.vocabSize(), h});
        return s;
    }

    /** The dtype a model uses on {@code device}: bfloat16 on CUDA, float32 elsewhere. */
    public static ScalarType defaultDtype(Device device) {
        return device.is_cuda() ? ScalarType.BFloat16 : ScalarType.Float;
    }

    /** A float32 CPU model with seeded random weights. */
    public static CausalLm random(ModelConfig c, long seed) {
        return random(c, seed, ScalarType.Float, new Device("cpu"));
    }

    /**
     * Random weights from {@code seed}: norms 1, every other tensor (biases included) normal with
     * std 0.02. Drawn in float32 on the CPU in parameter order, so the same seed gives the same
     * model on every device.
     */
    public static CausalLm random(ModelConfig c, long seed, ScalarType dtype, Device device) {
        Map<String, Tensor> p = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            Generator gen = torch.createCPUGenerator(seed);
            TensorOptions f32 = new TensorOptions(ScalarType.Float);
            for (Map.Entry<String, long[]> e : parameterShapes(c).entrySet()) {
                // a scope per tensor: one around the loop held every float32 draw until the last,
                // a float32 host copy of the whole model where the model is on a GPU or in bfloat16
                try (PointerScope one = new PointerScope()) {
                    Tensor t = e.getKey().endsWith("norm.weight")
                            ? torch.ones(e.getValue(), f32)
                            : torch.normal(0.0, INIT_STD, e.getValue(), new GeneratorOptional(gen), f32);
                    p.put(e.getKey(), Scopes.retain(t.to(device, dtype)));
                }
            }
        } catch (RuntimeException e) {
            p.values().forEach(Tensor::releaseReference);
            throw e;
        }
        return new CausalLm(c, dtype, device, p);
    }

    /**
     * A model of {@code c} whose weights are allocated on {@code device} but not set (torch.empty):
     * for a copy that is about to be overwritten, such as the KL reference made from the policy's
     * weights, which would otherwise draw every weight on the CPU first.
     */
    public static CausalLm uninitialised(ModelConfig c, ScalarType dtype, Device device) {
        Map<String, Tensor> p = new LinkedHashMap<>();
        try (PointerScope scope = new PointerScope()) {
            TensorOptions o = new TensorOptions(dtype).device(new DeviceOptional(device));
            for (Map.Entry<String, long[]> e : parameterShapes(c).entrySet()) p.put(e.getKey(), Scopes.retain(torch.empty(e.getValue(), o, null)));
        } catch (RuntimeException e) {
            p.values().forEach(Tensor::releaseReference);
            throw e;
        }
        return new CausalLm(c, dtype, device, p);
    }

    /** Loads config.json and the safetensors weights of {@code dir} as a float32 CPU model. */
    public static CausalLm load(Path dir) {
        return load(dir, ScalarType.Float, new Device("cpu"));
    }

    /** Loads config.json and the safetensors weights (single or sharded) of {@code dir}. */
    public static CausalLm load(Path dir, ScalarType dtype, Device device) {
        ModelConfig c = ModelConfig.read(dir.resolve("config.json"));
        try (SafeTensors st = SafeTensors.open(dir)) {
            return fromCheckpoint(c, st, dtype, device);
        }
    }

    /**
     * A model of {@code c} with the weights of {@code st}, converted to {@code dtype}. Every
     * missing tensor, unexpected tensor and shape mismatch is reported at once, by name and file.
     * Ignored, as HF does: lm_head.weight when the embeddings are tied, and rotary inv_freq buffers.
     */
    public static CausalLm fromCheckpoint(ModelConfig c, SafeTensors st, ScalarType dtype, Device device) {
        Map<String, long[]> shapes = parameterShapes(c);
        List<String> missing = new ArrayList<>(), unexpected = new ArrayList<>(), mismatched = new ArrayList<>();
        for (Map.Entry<String, long[]> e : shapes.entrySet()) {
            SafeTensors.Info i = st.tensors().get(e.getKey());
            if (i == null) missing.add(e.getKey());
            else if (!Arrays.equals(i.shape(), e.getValue())) {
                mismatched.add(e.getKey() + " is " + Arrays.toString(i.shape()) + " in " + i.file().getFileName()
                        + ", config.json expects " + Arrays.toString(e.getValue()));
            }
        }
        for (SafeTensors.Info i : st.tensors().values()) {
            boolean ignored = i.name().endsWith(".rotary_emb.inv_freq")
                    || (c.tieWordEmbeddings() && i.name().equals("lm_head.weight"));
            if (!shapes.containsKey(i.name()) && !ignored) unexpected.add(i.name() + " (in " + i.file().getFileName() + ")");
        }
        if (!missing.isEmpty() || !unexpected.isEmpty() || !mismatched.isEmpty()) {
            StringBuilder m = new StringBuilder(st.source() + ": the weights do not fit config.json (" + c.family().architecture()
                    + ", " + c.numLayers() + " layers, hidden_size " + c.hiddenSize() + ", vocab_size " + c.vocabSize() + ")");
            list(m, "missing tensors", missing);
            list(m, "unexpected tensors", unexpected);
            list(m, "shape mismatches", mismatched);
            throw new ModelFileException(m.toString());
        }
        Map<String, Tensor> p = new LinkedHashMap<>();
        List<String> nonFinite = new ArrayList<>();
        try (PointerScope scope = new PointerScope()) {
            for (String name : shapes.keySet()) {
                Tensor t = st.get(name, dtype, device);
                // NaN or infinite weights load fine and then train into nothing (every step skipped)
                // or generate empty text; refuse them here, by name
                long bad = t.numel() == 0 ? 0 : t.isfinite().logical_not().sum().item_long();
                if (bad > 0) nonFinite.add(name + " (" + bad + " of " + t.numel() + " values, in " + st.info(name).file().getFileName() + ")");
                p.put(name, Scopes.retain(t));
            }
        }
        if (!nonFinite.isEmpty()) {
            p.values().forEach(Tensor::close);
            StringBuilder m = new StringBuilder(st.source() + ": weights that are NaN or infinite");
            list(m, "tensors", nonFinite);
            throw new ModelFileException(m.toString());
        }
        return new CausalLm(c, dtype, device, p);
    }

    private static void list(StringBuilder m, String what, List<String> items) {
        if (items.isEmpty()) return;
        m.append("; ").append(what).append(" (").append(items.size()).append("): ");
        m.append(String.join(", ", items.subList(0, Math.min(10, items.size()))));
        if (items.size() > 10) m.append(", ...");
    }

    // ------------------------------------------------------------------ saving

    /** Saves config.json and the weights in the parameter dtype, in shards of at most 5 GB. */
    public void save(Path dir) throws IOException {
        save(dir, dtype, DEFAULT_SHARD_BYTES);
    }

    /** The name config.json's torch_dtype (and torch) give a checkpoint dtype: float32, bfloat16 or float16. */
    public static String dtypeName(ScalarType dtype) {
        return switch (dtype) {
            case Float -> "float32";
            case BFloat16 -> "bfloat16";
            case Half -> "float16";
            default -> throw new IllegalArgumentException("checkpoints are float32, bfloat16 or float16, not " + dtype);
        };
    }

    /**
     * Saves config.json (torch_dtype set to {@code fileDtype}) and the weights converted to
     * {@code fileDtype} (float32, bfloat16 or float16) into {@code dir}, as save_pretrained does.
     */
    public void save(Path dir, ScalarType fileDtype, long maxShardBytes) throws IOException {
        String name = dtypeName(fileDtype);
        // tensor by tensor: the header (and shard plan) from names, dtypes and shapes, then each
        // weight converted and written in a scope of its own, so that a model saved in another
        // dtype than its own holds one tensor's copy at a time, not a copy of the whole model
        SafeTensors.Dtype d = SafeTensors.Dtype.of(fileDtype);
        List<SafeTensorsWriter.Spec> specs = new ArrayList<>();
        for (Map.Entry<String, Tensor> e : params.entrySet()) specs.add(new SafeTensorsWriter.Spec(e.getKey(), d, sizes(e.getValue())));
        try (SafeTensorsStreamWriter w = SafeTensorsStreamWriter.checkpoint(dir, specs, maxShardBytes)) {
            for (Map.Entry<String, Tensor> e : params.entrySet()) {
                try (PointerScope scope = new PointerScope()) {
                    w.put(e.getKey(), 0, e.getValue().detach().to(fileDtype));
                }
            }
            w.finish();
        }
        config.withTorchDtype(name).write(dir.resolve("config.json"));
    }

    // ------------------------------------------------------------------ accessors

    public ModelConfig config() {
        return config;
    }

    public ScalarType dtype() {
        return dtype;
    }

    public Device device() {
        return device;
    }

    /** The live parameters under their HF names, in state-dict order (the LM head absent when tied). */
    public Map<String, Tensor> parameters() {
        return params;
    }

    /**
     * A number that changes whenever a parameter is written in place (an optimiser step, a
     * checkpoint or warm-start load): the sum of LibTorch's version counters of the parameters.
     * What was computed from the weights (the rollout engine's prefix cache) is stale once it moves.
     */
    public long weightsVersion() {
        long v = 0;
        for (Tensor t : params.values()) v += t.__dispatch__version();
        return v;
    }

    /** Makes every parameter a trainable leaf (or not). */
    public void setRequiresGrad(boolean on) {
        for (Tensor t : params.values()) t.set_requires_grad(on);
    }

    /**
     * Whether training forwards ({@link #trainingHidden}) keep only each decoder layer's input and
     * recompute the layer in the backward pass (models.&lt;id&gt;.activation_checkpointing).
     */
    public void setActivationCheckpointing(boolean on) {
        activationCheckpointing = on;
    }

    public boolean activationCheckpointing() {
        return activationCheckpointing;
    }

    /**
     * Whether a forward without cache over a right-padded batch runs causal attention without a
     * mask (on by default; the same outputs at every real token as the masked form, {@link
     * #generalPass}). Off: every forward is masked, for tests and benchmarks that compare both.
     */
    public void rightPaddedAsCausal(boolean on) {
        rightPaddedAsCausal = on;
    }

    /**
     * Whether masked grouped-query attention expands k and v to the query heads (by default off the
     * CPU only, Transformer.expandKvHeads); tests set it to compare both forms on the CPU.
     */
    void expandKvHeads(boolean on) {
        transformer.expandKvHeads = on;
    }

    /** A KV cache for {@code batch} rows of up to {@code capacity} tokens (prompt + generated). */
    public KvCache newCache(long batch, long capacity) {
        return new KvCache(config, batch, capacity, dtype, device);
    }

    /**
     * HF's position ids for a key-validity mask [B, S]: the number of valid slots before each
     * slot (so a left-padded prompt starts at 0), and 1 on padding slots (never read).
     */
    public static Tensor positionIds(Tensor attentionMask) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            Tensor m = attentionMask.to(ScalarType.Long);
            Tensor pos = m.cumsum(-1).sub(new Scalar(1L));
            out = Scopes.retain(pos.masked_fill(m.eq(new Scalar(0L)), new Scalar(1L)));
        }
        return Scopes.adopt(out);
    }

    // ------------------------------------------------------------------ forward

    /** Logits [B, T, vocab] (float32) of every input position. See the class comment for the inputs. */
    public Tensor forward(Tensor inputIds, Tensor positionIds, Tensor attentionMask, KvCache cache) {
        Tensor out;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = cache == null ? null : new NoGradGuard()) {
            out = Scopes.retain(logits(hidden(inputIds, positionIds, attentionMask, cache)));
        }
        return Scopes.adopt(out);
    }

    /**
     * The final hidden states [B, T, hidden] (after the last RMSNorm, in the model dtype). With a
     * cache, the new keys and values are stored at slots [cache.length(), cache.length() + T) and
     * the cache advances by T.
     */
    public Tensor hidden(Tensor inputIds, Tensor positionIds, Tensor attentionMask, KvCache cache) {
        checkInputs(inputIds, positionIds, attentionMask, cache);
        long t = inputIds.size(1);
        long past = cache == null ? 0 : cache.length();
        Tensor out;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = cache == null ? null : new NoGradGuard()) {
            out = Scopes.retain(hiddenImpl(inputIds, positionIds, attentionMask, cache, past, past + t));
        }
        if (cache != null) cache.advance(t);
        return Scopes.adopt(out);
    }

    /**
     * Logits [B, 1, vocab] (float32) of one new token per row whose keys and values go to slot
     * {@code writeSlot} of every row of {@code cache}, reading the slots [0, S) of its row that
     * {@code attentionMask} [B, S] marks valid, and its own (writeSlot < S ≤ capacity; the cache's
     * length is left as it is). A query does not care where in the cache its keys lie (their
     * positions were applied when they were written), so an engine may place each row's tokens
     * anywhere: the rollout engine's continuous batching keeps the rows as rings over the cache's
     * slots (Generator). Inference only, as every forward with a cache.
     */
    public Tensor forwardAt(Tensor inputIds, Tensor positionIds, Tensor attentionMask, KvCache cache, long writeSlot) {
        if (cache == null) throw new IllegalArgumentException("forwardAt needs a KV cache");
        if (inputIds == null || inputIds.dim() != 2 || inputIds.size(1) != 1) {
            throw new IllegalArgumentException("forwardAt takes one token per row: input_ids must be [batch, 1], got "
                    + (inputIds == null ? "null" : Arrays.toString(sizes(inputIds))));
        }
        long b = inputIds.size(0);
        if (attentionMask == null || attentionMask.dim() != 2) {
            throw new IllegalArgumentException("attention_mask must be [batch, slots], got "
                    + (attentionMask == null ? "null" : Arrays.toString(sizes(attentionMask))));
        }
        long slots = attentionMask.size(1);
        if (writeSlot < 0 || writeSlot >= slots || slots > cache.capacity()) {
            throw new IllegalArgumentException("forwardAt: write slot " + writeSlot + " must lie in the mask's " + slots
                    + " slots, and they within the cache's capacity " + cache.capacity());
        }
        checkInput("input_ids", inputIds, new long[]{b, 1});
        checkInput("position_ids", positionIds, new long[]{b, 1});
        checkInput("attention_mask", attentionMask, new long[]{b, slots});
        cache.checkShape(config, dtype, b);
        Tensor out;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = new NoGradGuard()) {
            out = Scopes.retain(logits(hiddenImpl(inputIds, positionIds, attentionMask, cache, writeSlot, slots)));
        }
        return Scopes.adopt(out);
    }

    /**
     * Logits [B, 1, vocab] (float32) of one decoding step given as Java arrays, as {@link
     * #forwardAt} computes them: token {@code ids[r]} at position {@code positions[r]} goes to slot
     * {@code writeSlot} of row r and reads the slots j < {@code slots} with {@code valid[r *
     * validStride + j] != 0}, and its own. On the CPU in float32 (the rollout engines' case) the
     * arrays go to the decoding step as they are, without the tensors forwardAt takes and reads
     * back; elsewhere the ids and positions go to the device in one copy, and the mask is made
     * there from the positions when the rows have the rollout engines' layout ({@link
     * #ringLayout}; {@link #decodeRing} when the caller knows it), else copied too. The cache's length is
     * left as it is.
     */
    public Tensor decodeAt(long[] ids, long[] positions, long[] valid, int validStride, int slots, KvCache cache, long writeSlot) {
        return decode(ids, positions, valid, validStride, slots, cache, writeSlot, null).logits();
    }

    /**
     * A decoding step's logits [B, 1, vocab], and the sampler's uniforms as float64 [B, 1] on the
     * model's device when they went there with the step's ids and positions (else null: the CPU
     * decoding step, or none given).
     */
    public record Decoded(Tensor logits, Tensor uniforms) {
    }

    /**
     * {@link #decodeAt}, with the uniforms the step's tokens will be drawn with (one per row, or
     * null): on the general path (a GPU's) they go to the device in the same copy as the ids and
     * positions (their bits as int64, viewed as float64 there), so that the sampler
     * (Sampler.sample with them) makes no copy of its own. Both tensors belong to the caller's scope.
     */
    public Decoded decode(long[] ids, long[] positions, long[] valid, int validStride, int slots, KvCache cache, long writeSlot,
                          double[] uniforms) {
        return decode(ids, positions, valid, validStride, slots, cache, writeSlot, uniforms, false);
    }

    /**
     * {@link #decode} for a caller whose rows have the ring layout of {@link #ringLayout} by
     * construction (both rollout engines): on the general path the mask is made on the device from
     * the positions without the check, which reads every slot of every row each step. {@code valid}
     * must still say the same, as the CPU decoding step reads it. With {@link #checkRingClaims} on,
     * the claim is checked each step as decode checks it.
     */
    public Decoded decodeRing(long[] ids, long[] positions, long[] valid, int validStride, int slots, KvCache cache, long writeSlot,
                              double[] uniforms) {
        return decode(ids, positions, valid, validStride, slots, cache, writeSlot, uniforms, true);
    }

    /**
     * Whether {@link #decodeRing} checks its caller's claim each step (reading the whole mask, as
     * {@link #decode} does), failing with IllegalStateException when the rows are not so laid out:
     * for tests of the engines, which run without it.
     */
    public void checkRingClaims(boolean on) {
        checkRingClaims = on;
    }

    private volatile boolean checkRingClaims;

    private Decoded decode(long[] ids, long[] positions, long[] valid, int validStride, int slots, KvCache cache, long writeSlot,
                           double[] uniforms, boolean ring) {
        if (cache == null) throw new IllegalArgumentException("decodeAt needs a KV cache");
        int b = ids.length;
        if (positions.length != b) throw new IllegalArgumentException(b + " ids but " + positions.length + " positions");
        if (uniforms != null && uniforms.length != b) throw new IllegalArgumentException(b + " ids but " + uniforms.length + " uniforms");
        if (slots < 1 || slots > cache.capacity() || writeSlot < 0 || writeSlot >= slots || validStride < slots
                || (b > 0 && (long) (b - 1) * validStride + slots > valid.length)) {
            throw new IllegalArgumentException("decodeAt: write slot " + writeSlot + " must lie in the " + slots + " slots read, they"
                    + " within the cache's capacity " + cache.capacity() + ", and valid (" + valid.length + " values, rows "
                    + validStride + " apart) must cover " + b + " rows of them");
        }
        cache.checkShape(config, dtype, b);
        if (ring && checkRingClaims && !ringLayout(positions, valid, validStride, slots, cache.capacity(), writeSlot)) {
            throw new IllegalStateException("decodeRing: the rows are not ring segments of position + 1 slots ending at slot "
                    + writeSlot + " (" + slots + " slots read, capacity " + cache.capacity() + ")");
        }
        Tensor out, u = null;
        try (PointerScope scope = new PointerScope(); NoGradGuard noGrad = new NoGradGuard()) {
            Tensor h = decodeStepOn && device.is_cpu() && dtype == ScalarType.Float
                    ? decodeStep.hiddenFromArrays(ids, positions, valid, validStride, cache, writeSlot, slots) : null;
            if (h == null) {
                // the ids, the positions and the uniforms' bits in one upload, [2 or 3, B]
                int parts = uniforms == null ? 2 : 3;
                long[] inputs = new long[parts * b];
                System.arraycopy(ids, 0, inputs, 0, b);
                System.arraycopy(positions, 0, inputs, b, b);
                for (int r = 0; uniforms != null && r < b; r++) inputs[2 * b + r] = Double.doubleToRawLongBits(uniforms[r]);
                Tensor all = Tensors.upload(inputs, device, parts, b);
                Tensor idsT = all.select(0, 0).view(b, 1), posT = all.select(0, 1).view(b, 1);
                if (uniforms != null) u = Scopes.retain(all.select(0, 2).view(ScalarType.Double).view(b, 1));
                Tensor maskT;
                if (ring || ringLayout(positions, valid, validStride, slots, cache.capacity(), writeSlot)) {
                    maskT = ringMask(posT, slots, cache.capacity(), writeSlot);
                } else {
                    long[] mask = new long[b * slots];
                    for (int r = 0; r < b; r++) System.arraycopy(valid, r * validStride, mask, r * slots, slots);
                    maskT = Tensors.upload(mask, device, b, slots);
                }
                h = hiddenImpl(idsT, posT, maskT, cache, writeSlot, slots);
            }
            out = Scopes.retain(logits(h));
        } catch (RuntimeException | Error e) {
            if (u != null) u.releaseReference();
            throw e;
        }
        return new Decoded(Scopes.adopt(out), u == null ? null : Scopes.adopt(u));
    }

    /**
     * Whether every row r reads exactly the positions[r] + 1 slots that end at {@code writeSlot},
     * going back round the cache ({@code capacity} slots), its own included: slot j < slots is
     * valid when (writeSlot − j) mod capacity ≤ positions[r] (the decoding step always reads its
     * own slot, whatever valid says of it). Both rollout engines lay their rows out so (a row's
     * tokens at consecutive positions from 0, ending at the column written; a free row, at
     * position 0, reads only its own slot); {@link #ringMask} then makes the mask on the device.
     * Checked here in Java (no device work) so that any other layout still gets its own mask; the
     * engines say so instead ({@link #decodeRing}), as the check reads all of {@code valid}.
     */
    static boolean ringLayout(long[] positions, long[] valid, int validStride, int slots, long capacity, long writeSlot) {
        LAYOUT_CHECKS.get()[0]++;
        for (int r = 0; r < positions.length; r++) {
            long p = positions[r];
            int at = r * validStride;
            for (int j = 0; j < slots; j++) {
                if (j != writeSlot && (valid[at + j] != 0) != (Math.floorMod(writeSlot - j, capacity) <= p)) return false;
            }
        }
        return true;
    }

    /** This thread's count of {@link #ringLayout} checks, each of which reads every slot of every row. */
    private static final ThreadLocal<long[]> LAYOUT_CHECKS = ThreadLocal.withInitial(() -> new long[1]);

    /** Ring-layout checks made on this thread so far: a general-path step of {@link #decode} makes one, of {@link #decodeRing} none. */
    public static long layoutChecks() {
        return LAYOUT_CHECKS.get()[0];
    }

    /**
     * The key-validity mask bool [B, slots] of {@link #ringLayout} on the positions' device, from
     * the positions [B, 1] already there: no [B, slots] array is made in Java or copied.
     */
    private Tensor ringMask(Tensor positions, long slots, long capacity, long writeSlot) {
        Tensor j = torch.arange(new Scalar(slots), new TensorOptions(ScalarType.Long).device(new DeviceOptional(positions.device())));
        Tensor back = j.neg().add_(new Scalar(writeSlot)).remainder(new Scalar(capacity));  // in [0, capacity)
        return back.view(1, slots).le(positions);
    }

    /** The final hidden states of a training forward, and what remains of its backward pass. */
    public record TrainingForward(Tensor hidden, PendingBackward pending) {
    }

    /**
     * The final hidden states [B, T, hidden] of a forward without cache that is to be
     * differentiated, as {@link #hidden}. Without checkpointing (or when nothing requires grad) it
     * is that forward, and {@code pending} does nothing. With it, the layers run without autograd,
     * keeping their inputs; the returned states are computed with autograd from a leaf that stands
     * for the last layer's output, so the caller's backward pass reaches the final norm and the LM
     * head but not the layers: {@code pending.finishBackward()}, after it, does the rest. The
     * hidden states and the pending pass belong to the caller's innermost PointerScope.
     */
    public TrainingForward trainingHidden(Tensor inputIds, Tensor positionIds, Tensor attentionMask) {
        if (!activationCheckpointing || !GradMode.is_enabled() || !embed.requires_grad()) {
            return new TrainingForward(hidden(inputIds, positionIds, attentionMask, null), PendingBackward.NONE);
        }
        checkInputs(inputIds, positionIds, attentionMask, null);
        long b = inputIds.size(0), t = inputIds.size(1);
        Tensor out;
        TensorVector saved;
        try (PointerScope scope = new PointerScope()) {
            saved = Scopes.retain(new TensorVector());
            Tensor ids = inputIds.to(device, ScalarType.Long);
            saved.push_back(ids);
            saved.push_back(positionIds);
            saved.push_back(attentionMask);
            Tensor x;
            Pass p;
            try (NoGradGuard noGrad = new NoGradGuard()) {
                p = generalPass(b, t, 0, t, positionIds, attentionMask, null);
                x = torch.embedding(embed, ids);
                for (int l = 0; l < layers.length; l++) {
                    saved.push_back(x);
                    Tensor y;
                    try (PointerScope layer = new PointerScope()) {  // a layer's intermediates go at once
                        y = Scopes.retain(transformer.layer(l, x, p));
                    }
                    x = Scopes.adopt(y);
                }
            }
            Tensor last = x.detach().requires_grad_(true);
            saved.push_back(last);
            out = Scopes.retain(transformer.rmsNorm(last, finalNorm, p));
        }
        return new TrainingForward(Scopes.adopt(out), new PendingBackward(this, Scopes.adopt(saved)));
    }

    /**
     * The backward pass through the checkpointed decoder layers of one training forward, to run
     * after the caller's backward pass into its hidden states. It holds the tensors the recompute
     * needs (ids, position ids, mask, each layer's input, the leaf of the last layer's output) in
     * one vector in the caller's PointerScope: freed by {@link #finishBackward} as each layer is
     * done, or with that scope when the backward pass never comes (an exception).
     */
    public static final class PendingBackward {
        /** The pending pass of a forward that was not checkpointed: nothing to do. */
        public static final PendingBackward NONE = new PendingBackward(null, null);
        private static final int FIRST_INPUT = 3;  // after ids, position ids and mask

        private final CausalLm model;
        private TensorVector saved;

        private PendingBackward(CausalLm model, TensorVector saved) {
            this.model = model;
            this.saved = saved;
        }

        /** Whether the layers were checkpointed (there is a backward pass left to run). */
        public boolean checkpointed() {
            return model != null;
        }

        /**
         * As {@link Scopes#retain}: keeps the saved tensors past the close of the scope this was
         * made in (for a caller that returns it from inside its own scope).
         */
        public PendingBackward retain() {
            if (saved != null) Scopes.retain(saved);
            return this;
        }

        /** As {@link Scopes#adopt}: hands the saved tensors to the caller's innermost scope. */
        public PendingBackward adopt() {
            if (saved != null) Scopes.adopt(saved);
            return this;
        }

        /**
         * Back-propagates the gradient that reached the hidden states through the layers, last to
         * first (each recomputed from its input with autograd), and into the embeddings; the
         * parameters' gradients accumulate, as one backward pass without checkpointing would
         * leave them (up to summation order). Nothing happens when the hidden states received no
         * gradient. Once per forward; the saved tensors are freed, also when it throws.
         */
        public void finishBackward() {
            if (model == null) return;
            if (saved == null) throw new IllegalStateException("finishBackward was already called for this forward");
            TensorVector v = saved;
            saved = null;
            Tensor gradIn = null;  // retained: the gradient of the last layer's output, then of each layer's input
            try (PointerScope scope = new PointerScope(); AutoGradMode grad = new AutoGradMode(true)) {
                Layer[] layers = model.layers;
                Tensor leaf = v.get(FIRST_INPUT + layers.length);
                if (!leaf.grad().defined()) return;
                try (PointerScope first = new PointerScope()) {
                    gradIn = Scopes.retain(leaf.grad().detach());
                }
                leaf.mutable_grad().reset();
                leaf.reset();
                Tensor gradOut = gradIn;
                Tensor ids = v.get(0).detach();
                long b = ids.size(0), t = ids.size(1);
                Pass p;
                try (NoGradGuard noGrad = new NoGradGuard()) {
                    p = model.generalPass(b, t, 0, t, v.get(1), v.get(2), null);
                }
                v.get(1).reset();
                v.get(2).reset();
                BoolOptional noRetain = new BoolOptional(false);
                TensorArrayRefOptional allLeaves = new TensorArrayRefOptional();
                for (int l = layers.length - 1; l >= 0; l--) {
                    Tensor next;
                    try (PointerScope layer = new PointerScope()) {
                        Tensor in = v.get(FIRST_INPUT + l).detach().requires_grad_(true);
                        v.get(FIRST_INPUT + l).reset();
                        model.transformer.layer(l, in, p).backward(gradOut, noRetain, false, allLeaves);
                        next = Scopes.retain(in.grad().detach());
                    }
                    gradIn.releaseReference();
                    gradIn = next;
                    gradOut = next;
                }
                // the embedding lookup; with tied embeddings the LM head's gradient is already in embed's
                torch.embedding(model.embed, ids).backward(gradOut, noRetain, false, allLeaves);
            } finally {
                if (gradIn != null) gradIn.releaseReference();
                v.clear();
            }
        }
    }

    /**
     * Logits [B, T, vocab] (float32) of hidden states [B, T, hidden]: the LM head. It follows the
     * caller's grad mode: decoding code that calls {@link #hidden} with a cache and then this on
     * the last position wraps both in a NoGradGuard when the parameters require grad.
     */
    public Tensor logits(Tensor hidden) {
        Tensor out;
        try (PointerScope scope = new PointerScope()) {
            Tensor y;
            if (hidden.numel() == hidden.size(-1) && device.is_cpu()) {
                // one row: the matrix-vector product (LibTorch's gemm for one row cost ~60–75 µs
                // at 256×256 where mv took ~13 µs)
                long[] shape = sizes(hidden);
                shape[shape.length - 1] = lmHead.size(0);
                y = torch.mv(lmHead, hidden.reshape(-1)).view(shape);
            } else {
                y = torch.linear(hidden, lmHead);
            }
            out = Scopes.retain(dtype == ScalarType.Float ? y : y.to(ScalarType.Float));
        }
        return Scopes.adopt(out);
    }

    /**
     * The LM head's weight [vocab, hidden] that {@link #logits} multiplies by: lm_head.weight, or the
     * embedding itself when they are tied (its gradient is then the embedding's). The live parameter,
     * for the fused LM head (dev.drmas.algo.FusedLmHead), which accumulates into its .grad.
     */
    public Tensor lmHeadWeight() {
        return lmHead;
    }

    private Tensor hiddenImpl(Tensor ids, Tensor pos, Tensor mask, KvCache cache, long past, long slots) {
        long b = ids.size(0), t = ids.size(1);
        if (decodeStepOn && cache != null && t == 1 && device.is_cpu() && dtype == ScalarType.Float) {
            return decodeStep.hidden(ids.scalar_type().intern() == ScalarType.Long && ids.is_cpu() ? ids : ids.to(device, ScalarType.Long),
                    pos, mask, cache, past, slots);  // CPU decoding
        }
        Pass p = generalPass(b, t, past, slots, pos, mask, cache);
        Tensor x = torch.embedding(embed, ids.to(device, ScalarType.Long));
        // Each layer in a scope of its own, keeping only its output: the Java handles of a scope
        // keep every tensor they name alive, so one scope around all layers held every
        // intermediate of every layer until the forward returned (what autograd saves lives on in
        // the graph either way). The previous output is let go as soon as the next exists.
        Tensor held = null;  // this method's reference to the latest layer output
        try {
            for (int l = 0; l < layers.length; l++) {
                Tensor y;
                try (PointerScope layer = new PointerScope()) {
                    y = Scopes.retain(transformer.layer(l, x, p));
                }
                if (held != null) held.releaseReference();
                held = y;
                x = y;
            }
            return transformer.rmsNorm(x, finalNorm, p);
        } finally {
            if (held != null) held.releaseReference();
        }
    }

    /**
     * The arrangement of a general pass: which slots each query attends to, and the rotary angles.
     * A forward without cache (T queries over the same T slots) over a right-padded batch is
     * causal: each real query's valid slots up to its own are exactly slots 0..t (right padding
     * only follows a row's real tokens), so no mask is made; its padding queries read more than
     * their own slot, which changes only padding outputs, and those no real query reads (they lie
     * after it) and no caller reads (TeacherForcing picks the real positions). Any other batch
     * (left padding, a hole, a cache) is masked.
     */
    Pass generalPass(long b, long t, long past, long s, Tensor pos, Tensor mask, KvCache cache) {
        Rope.Angles angles = Rope.angles(pos.to(device, ScalarType.Long), invFreq, dtype);
        if (rightPaddedAsCausal && cache == null && past == 0 && s == t && t > 1 && rightPadded(mask)) return Pass.causal(b, t, angles);
        Tensor valid = mask.to(device, ScalarType.Bool).view(b, 1, 1, s);
        Tensor attend;
        if (t == 1) {
            // one query (decoding): every valid slot holds an earlier token of its row, wherever
            // it lies (forwardAt), so it attends to the valid ones and to its own
            attend = valid.clone();
            attend.narrow(3, past, 1).fill_(new Scalar(1L));
        } else {
            // attend[b, 0, i, j]: key slot j is valid and j ≤ past + i, or j is the query's own slot
            TensorOptions longs = new TensorOptions(ScalarType.Long);
            Tensor keySlot = torch.arange(new Scalar(s), longs).to(device, ScalarType.Long).view(1, s);
            Tensor querySlot = torch.arange(new Scalar(past), new Scalar(s), longs).to(device, ScalarType.Long).view(t, 1);
            attend = valid.logical_and(keySlot.le(querySlot)).logical_or(keySlot.eq(querySlot));
        }
        return Pass.general(b, t, past, s, angles, attend, cache);
    }

    /**
     * Whether every row of a key-validity mask [B, S] (bool or 0/1) is valid slots, then padding
     * only: no valid slot follows a padding one. One reduction and its read-back (a device sync),
     * its temporaries freed at once.
     */
    static boolean rightPadded(Tensor mask) {
        long s = mask.size(1);
        if (s < 2) return true;
        try (PointerScope scope = new PointerScope()) {
            Tensor valid = mask.to(ScalarType.Bool);
            Tensor validAfterPadding = valid.narrow(1, 1, s - 1).logical_and(valid.narrow(1, 0, s - 1).logical_not());
            return !validAfterPadding.any().item_bool();
        }
    }

    private void checkInputs(Tensor inputIds, Tensor positionIds, Tensor attentionMask, KvCache cache) {
        if (inputIds == null || inputIds.dim() != 2) {
            throw new IllegalArgumentException("input_ids must be [batch, tokens], got "
                    + (inputIds == null ? "null" : Arrays.toString(sizes(inputIds))));
        }
        long b = inputIds.size(0), t = inputIds.size(1);
        long past = cache == null ? 0 : cache.length();
        checkInput("input_ids", inputIds, new long[]{b, t});
        checkInput("position_ids", positionIds, new long[]{b, t});
        checkInput("attention_mask", attentionMask, new long[]{b, past + t});
        if (cache != null) cache.checkFits(config, dtype, b, t);
    }

    private static void checkInput(String name, Tensor t, long[] shape) {
        boolean ok = t != null && t.dim() == shape.length;
        for (int i = 0; ok && i < shape.length; i++) ok = shape[i] >= 0 && t.size(i) == shape[i];
        if (!ok) {
            String got = t == null ? "null" : Arrays.toString(sizes(t));
            throw new IllegalArgumentException(name + " must have shape " + Arrays.toString(shape) + ", got " + got
                    + (name.equals("attention_mask") ? " (it covers the cached slots plus the new tokens)" : ""));
        }
    }

    private static long[] sizes(Tensor t) {
        long[] s = new long[(int) t.dim()];
        for (int i = 0; i < s.length; i++) s[i] = t.size(i);
        return s;
    }

    /** Frees the parameters; the model is unusable afterwards. */
    @Override
    public void close() {
        if (closed) return;
        closed = true;
        for (Layer l : layers) l.close();
        for (Tensor t : params.values()) t.releaseReference();
        invFreq.releaseReference();
        transformer.close();
    }
}
