// MemoryPlan.java — the arithmetic of `drmas plan`: what one GPU (one data-parallel rank) holds for
// each model of a run, and at the peak of each phase of a training step (generation, the log-prob
// pass, the update), from the run config and each model's config.json alone; whether that fits,
// and which setting to change where it does not. The activation figures are counted tensor by
// tensor from the code that makes them (Transformer.layer, CausalLm.hidden, TeacherForcing,
// Generator, PpoUpdater), not from a rule of thumb, and checked against the peaks the trainer
// measures on the CPU (MemoryPlanCheckTest); each formula's derivation is in its comment.
package dev.drmas.train;

import dev.drmas.algo.FusedLmHead;
import dev.drmas.config.ModelSpec;
import dev.drmas.config.RunConfig;
import dev.drmas.config.RunSettings;
import dev.drmas.model.CausalLm;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.Generator;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.LongPredicate;

/**
 * A run's memory, per GPU. Every model stays resident in every phase (nothing is offloaded);
 * agents sharing a model id count it once. A phase's peak is the resident bytes plus the largest
 * transient of its models (they run one after the other); in generation, plus the prompts the
 * other models keep for reuse (rollout.prefix_cache: each model's generator holds its kept prompts
 * until the rollout phase ends, Trainer's clearPrefixes, so while one model generates the others'
 * are still there). Worst cases throughout: every prompt at rollout.max_prompt_tokens, every
 * response at rollout.max_new_tokens.
 */
public final class MemoryPlan {
    /** The part of a GPU's memory a plan may fill; the rest is the CUDA context, cuBLAS and NCCL workspaces, fragmentation. */
    public static final double USABLE_FRACTION = 0.90;
    /** Bytes per token of a forward's int64 inputs (ids, mask, position ids and their cumsum, in TeacherForcing and CausalLm.positionIds). */
    static final long INPUT_BYTES_PER_TOKEN = 41;

    /**
     * Whether a forward without checkpointing holds every tensor its layers make until it returns.
     * It did while CausalLm.hidden ran all layers inside one PointerScope (the scope's Java handles
     * kept each intermediate alive, saved for the backward pass or not, in inference too); each
     * layer now runs in a scope of its own keeping only its output, so only what autograd saves
     * outlives a layer. MemoryPlanCheckTest tells whether this matches the code.
     */
    static final boolean FORWARD_HOLDS_EVERY_LAYER = false;

    /** Data-parallel ranks (one GPU each) and the memory of one GPU. */
    public record Machine(int gpus, long bytesPerGpu) {
        public Machine {
            if (gpus < 1) throw new IllegalArgumentException("--gpus must be >= 1, got " + gpus);
            if (bytesPerGpu <= 0) throw new IllegalArgumentException("--gpu-memory must be > 0, got " + bytesPerGpu + " bytes");
        }

        public long usableBytes() {
            return (long) (bytesPerGpu * USABLE_FRACTION);
        }
    }

    /** What a model keeps between phases, bytes per GPU. */
    public record Resident(long weights, long masterWeights, long moments, long gradients, long gradAccumulator, long reference) {
        public long total() {
            return weights + masterWeights + moments + gradients + gradAccumulator + reference;
        }
    }

    /**
     * One batch of generation: {@code rows} requests prefilled at {@code promptTokens} each, with
     * a KV cache of {@code capacity} slots per row; {@code prefill} is the prefill's forward at its
     * peak, {@code logits} the last position's logits with the sampler's work; {@code
     * prefillCache} the continuous engine's cache of one prefill forward (a quarter of the rows ×
     * prompt slots at most; on the CPU up to all rows' prompts within Generator.PREFILL_CACHE_BYTES); {@code prefixCache} its prompts kept for reuse (rollout.prefix_cache:
     * the budget's slots; 0 when it is off) and {@code stems} the stems of a joining group's prompts
     * (one a task: rows ÷ rollouts_per_task prompts), which its prefix cache holds whether
     * rollout.prefix_cache is on or off; all three 0 for the static engine, which prefills into the
     * batch's cache.
     */
    public record Generation(int rows, int promptTokens, int capacity, long kvCache, long prefill, long logits,
                             long prefillCache, long prefixCache, long stems) {
        public long added() {
            return kvCache + prefillCache + prefixCache + stems + Math.max(prefill, logits);
        }
    }

    /**
     * One micro-batch of a forward (log-prob pass or update): {@code tokens} = rows × the longest
     * row (the padded batch), {@code rowTokens} the longest row, {@code responseTokens} the tokens
     * that go through the LM head.
     */
    public record MicroBatch(long rows, long tokens, int rowTokens, long responseTokens) {
    }

    /**
     * What {@link dev.drmas.algo.FusedLmHead} holds for one micro-batch of {@code N} response tokens
     * (ppo.fused_lm_head), as its code allocates it: chunks of {@code chunkTokens} tokens
     * (FusedLmHead.defaultChunkTokens(V), at most N); {@code chunkBytes}, the transient of the largest
     * chunk (its logits, overwritten in place by dL/dz, with the products and casts made in the
     * chunk's scope); {@code heldBytes}, what lives across the chunks and through the rest of the
     * micro-batch (the update: dL/dh [N, H], a reduced dtype's float32 dL/dW [V, H], the per-token
     * vectors; the log-prob pass: the targets and log-probs); {@code finishBytes}, the transient after
     * the chunks (a reduced dtype's dL/dW added into .grad). The response positions' hidden states
     * [N, H] are not in here: they are counted with the micro-batch, as for the materialised head.
     */
    public record FusedHead(int chunkTokens, long chunkBytes, long heldBytes, long finishBytes) {
        /** The head's own bytes at its peak. */
        public long peak() {
            return heldBytes + Math.max(chunkBytes, finishBytes);
        }
    }

    /**
     * The update of one micro-batch: its peak without and with activation checkpointing, with the
     * materialised LM head ({@code peak}, {@code peakCheckpointed}) and with the fused one ({@code
     * fusedPeak}, {@code fusedPeakCheckpointed}), and the parts of it: the layers' activations (the
     * forward's, at its end), the [N, V] float32 logits that the materialised head has alive at its
     * peak ({@code logitsTensors} of {@code logitsBytes} each), what the fused head holds instead,
     * and the optimiser step's own transient (after the micro-batches). {@code checkpointing} and
     * {@code fused} are the configured settings.
     */
    public record Update(MicroBatch mb, long activations, long activationsCheckpointed, long logitsBytes, int logitsTensors,
                         FusedHead fusedHead, long peak, long peakCheckpointed, long fusedPeak, long fusedPeakCheckpointed,
                         long stepTransient, boolean checkpointing, boolean fused) {
        /** The micro-batch's peak with and without checkpointing and the fused or the materialised head. */
        public long peak(boolean withCheckpointing, boolean withFusedHead) {
            if (withFusedHead) return withCheckpointing ? fusedPeakCheckpointed : fusedPeak;
            return withCheckpointing ? peakCheckpointed : peak;
        }

        /** The materialised head's [N, V] tensors at its peak. */
        public long materialisedHeadBytes() {
            return logitsTensors * logitsBytes;
        }

        /** What the update adds to the resident bytes at its peak, with the configured checkpointing and head. */
        public long added() {
            return Math.max(peak(checkpointing, fused), stepTransient);
        }
    }

    /**
     * One model of the run; the log-prob pass's peak with the materialised and with the fused LM
     * head ({@code logProbFusedHead} is what the fused head holds there).
     */
    public record ModelPlan(String id, List<String> agents, ModelConfig shape, ModelSpec spec, long params, Resident resident,
                            Generation generation, MicroBatch logProbBatch, long logProbPeakMaterialised, long logProbPeakFused,
                            FusedHead logProbFusedHead, int logProbPasses, Update update) {
        /** The log-prob pass's peak with the configured head. */
        public long logProbPeak() {
            return update.fused() ? logProbPeakFused : logProbPeakMaterialised;
        }

        public long logProbAdded() {
            return logProbPeak();
        }
    }

    /**
     * A phase of the step: its peak per GPU; what it adds to the resident bytes there ({@code
     * added}: the largest model's transient and {@code held}); which model that is; {@code held},
     * what the other models keep through the phase while it runs (generation: their prompts kept
     * for reuse; 0 in the other phases and with one model).
     */
    public record Phase(String name, long peak, long added, String largestModel, long held) {
        /** The largest model's own transient. */
        public long transientOfLargest() {
            return added - held;
        }
    }

    private final RunConfig cfg;
    private final Map<String, ModelConfig> shapes;
    private final Machine machine;
    private final List<ModelPlan> models;
    private final List<Phase> phases;
    private final long resident;

    private MemoryPlan(RunConfig cfg, Map<String, ModelConfig> shapes, Machine machine, List<ModelPlan> models) {
        this.cfg = cfg;
        this.shapes = Map.copyOf(shapes);
        this.machine = machine;
        this.models = List.copyOf(models);
        long r = 0;
        for (ModelPlan m : models) r += m.resident().total();
        this.resident = r;
        long kept = 0;
        for (ModelPlan m : models) kept += m.generation().prefixCache();
        final long allKept = kept;
        this.phases = List.of(phase("generation", m -> m.generation().added(), m -> allKept - m.generation().prefixCache()),
                phase("log-prob", ModelPlan::logProbAdded, m -> 0), phase("update", m -> m.update().added(), m -> 0));
    }

    /** The phase's peak: the model whose transient plus what the others hold meanwhile ({@code held}) is largest. */
    private Phase phase(String name, java.util.function.ToLongFunction<ModelPlan> added, java.util.function.ToLongFunction<ModelPlan> held) {
        long best = 0, bestHeld = 0;
        String who = "";
        for (ModelPlan m : models) {
            long h = held.applyAsLong(m), a = added.applyAsLong(m) + h;
            if (a > best || who.isEmpty()) {
                best = a;
                bestHeld = h;
                who = m.id();
            }
        }
        return new Phase(name, resident + best, best, who, bestHeld);
    }

    public RunConfig config() {
        return cfg;
    }

    public Machine machine() {
        return machine;
    }

    public List<ModelPlan> models() {
        return models;
    }

    public List<Phase> phases() {
        return phases;
    }

    public long residentBytes() {
        return resident;
    }

    /** The phase with the highest peak. */
    public Phase largestPhase() {
        Phase p = phases.get(0);
        for (Phase q : phases) if (q.peak() > p.peak()) p = q;
        return p;
    }

    public boolean fits() {
        return largestPhase().peak() <= machine.usableBytes();
    }

    // ------------------------------------------------------------------ building

    /**
     * The plan of {@code cfg} on {@code machine}; {@code shapes} holds each used model's shape
     * (its config.json, or ModelSpec.toModelConfig for a model without path).
     */
    public static MemoryPlan of(RunConfig cfg, Map<String, ModelConfig> shapes, Machine machine) {
        List<ModelPlan> out = new ArrayList<>();
        for (String id : cfg.usedModels()) {
            ModelConfig c = shapes.get(id);
            if (c == null) throw new IllegalArgumentException("no shape for model " + id + " (shapes: " + shapes.keySet() + ")");
            out.add(model(cfg, id, c, machine));
        }
        return new MemoryPlan(cfg, shapes, machine, out);
    }

    private static ModelPlan model(RunConfig cfg, String id, ModelConfig c, Machine machine) {
        ModelSpec spec = cfg.models().get(id);
        int b = bytes(spec.dtype());
        long params = 0, largest = 0;
        for (long[] s : CausalLm.parameterShapes(c).values()) {
            long n = 1;
            for (long d : s) n *= d;
            params += n;
            largest = Math.max(largest, n);
        }
        int w = machine.gpus();
        boolean shard = cfg.distributed().shardOptimizer() && w > 1;
        boolean mixed = spec.mixedPrecision();
        int masterB = bytes(spec.masterDtype());
        // As train/ModelOptimizer keeps them. Unsharded, reduced dtype with fp32 master: the model's
        // weights and .grad in the dtype, fp32 masters, two fp32 moments and an fp32 gradient
        // accumulator; dtype float32: the weights are the masters and .grad the only gradient.
        // Sharded (ZeRO-2, any dtype): fp32 masters, moments and gradient of this rank's chunk
        // (1/W; gradients are reduced after every micro-batch in small buckets), the model's weights
        // and .grad whole.
        Resident res = shard
                ? new Resident(params * b, ceilDiv(params * 4, w), 2 * ceilDiv(params * 4, w), params * b, ceilDiv(params, w) * 4,
                        cfg.ppo().referenceModel() ? params * b : 0)
                : new Resident(params * b, mixed ? params * 4 : 0, 2 * params * masterB, params * b, mixed ? params * 4 : 0,
                        cfg.ppo().referenceModel() ? params * b : 0);

        var rc = cfg.rollout();
        var pc = cfg.ppo();
        int prompt = rc.maxPromptTokens(), fresh = rc.maxNewTokens(), row = prompt + fresh;
        // generation: one agent turn's requests of every trajectory on this rank (or of the
        // evaluation, when it has more), cut by rollout.max_batch_tokens into batches of rows ×
        // (longest prompt + max_new_tokens) slots
        long rows = cfg.turnRows(w);
        long prefixBudget = rc.prefixCacheBudget(rows);
        if (rc.maxBatchTokens() > 0) rows = Math.min(rows, rc.maxBatchTokens() / row);
        boolean filters = rc.topK() > 0 || rc.topP() < 1;
        Generation gen = generation(c, b, (int) rows, prompt, fresh, filters, rc.engine() == Generator.Engine.CONTINUOUS, prefixBudget,
                rc.rolloutsPerTask(), cfg.run().device() == RunSettings.Device.CPU);

        boolean div = rc.temperature() != 1.0;
        MicroBatch mb = microBatch(pc.microBatchSize(), pc.maxTokensPerMicroBatch(), prompt, fresh);
        long logProb = inferencePeak(c, b, mb, div);
        FusedHead inferHead = fusedHead(c, b, mb, false, false);
        long logProbFused = inferencePeakFused(c, b, mb, inferHead);
        boolean usesRef = pc.referenceModel() && cfg.lossConfig().usesReference();
        int passes = 1 + (usesRef ? 1 : 0);
        boolean entropy = pc.entropyCoef() > 0;
        long peak = trainingPeak(c, b, mb, div, entropy, false, null);
        long peakCk = trainingPeak(c, b, mb, div, entropy, true, null);
        FusedHead head = fusedHead(c, b, mb, true, usesRef);
        long fusedPeak = trainingPeak(c, b, mb, div, entropy, false, head);
        long fusedPeakCk = trainingPeak(c, b, mb, div, entropy, true, head);
        // AdamW's temporaries of its largest tensor (sharded: the one flat chunk, and the bucket
        // the updated masters are all-gathered through)
        long stepTransient = shard ? ceilDiv(params, w) * 16 + (long) (cfg.distributed().bucketMb() * (1 << 20)) : largest * 16;
        long nv = mb.responseTokens() * c.vocabSize() * 4L;
        Update up = new Update(mb, forwardEnd(c, b, mb, false), forwardEnd(c, b, mb, true), nv, 4 + (div ? 1 : 0), head, peak, peakCk,
                fusedPeak, fusedPeakCk, stepTransient, spec.activationCheckpointing(), pc.fusedLmHead());
        List<String> agents = cfg.agentsOf(id).stream().map(a -> a.id()).toList();
        return new ModelPlan(id, agents, c, spec, params, res, gen, mb, logProb, logProbFused, inferHead, passes, up);
    }

    static int bytes(ModelSpec.Dtype d) {
        return d == ModelSpec.Dtype.FLOAT32 ? 4 : 2;
    }

    private static long shard(long bytes, int w, boolean shard) {
        return shard ? ceilDiv(bytes, w) : bytes;
    }

    static long ceilDiv(long a, long b) {
        return (a + b - 1) / b;
    }

    /**
     * The worst micro-batch of the update and log-prob passes. Without a token bound:
     * micro_batch_size rows of max_prompt + max_new tokens. With ppo.max_tokens_per_micro_batch M:
     * rows are packed while rows × the longest stays within M (a longer row alone), so the padded
     * batch holds max(M, one row) tokens; its response tokens are at most all but one prompt token
     * per row (rows of ≤ max_new + 1 tokens).
     */
    static MicroBatch microBatch(int rows, int maxTokens, int prompt, int fresh) {
        int row = prompt + fresh;
        if (maxTokens == 0) return new MicroBatch(rows, (long) rows * row, row, (long) rows * fresh);
        long tokens = Math.max(maxTokens, row);
        // R rows of ≥ 1 prompt and ≤ max_new response tokens: min(tokens − R, R·max_new) ≤ tokens·max_new/(max_new + 1)
        return new MicroBatch(Math.max(1, tokens / row), tokens, row, tokens * fresh / (fresh + 1L));
    }

    // ------------------------------------------------------------------ the tensors of a forward, per token

    /** Bytes per token a part of the forward creates, and those of them autograd saves for the backward pass. */
    record PerToken(long created, long saved) {
        PerToken plus(PerToken o) {
            return new PerToken(created + o.created, saved + o.saved);
        }

        PerToken times(long k) {
            return new PerToken(created * k, saved * k);
        }
    }

    /**
     * Transformer.rmsNorm over n values per token. float32: x² (pow), x·factor, weight·that: 3n
     * floats made; autograd saves the normed values (weight.mul) and, when its consumer is a
     * linear, the output (the norm's input x is saved too, by pow and mul: counted by whoever made
     * x). Reduced dtype: x.to(float32) (saved by pow and mul), x², the normed float32, its cast
     * (saved by weight.mul) and the output: n(12 + 2b) bytes. Plus the factor, one float (saved).
     */
    static PerToken norm(long n, int b, boolean outputSaved) {
        if (b == 4) return new PerToken(12 * n + 4, 4 * n + (outputSaved ? 4 * n : 0) + 4);
        return new PerToken(n * (12 + 2L * b) + 4, 4 * n + b * n + (outputSaved ? b * n : 0) + 4);
    }

    /**
     * One decoder layer of the general pass (Transformer.layer), per token, b bytes per value:
     * <pre>
     *   input norm (h)                                   norm(h), its output saved (q/k/v linears)
     *   q, k, v = linear(·)          b(qd + 2kvd)        v saved (SDPA); q, k saved in float32 with
     *                                                    Qwen3's q/k norm (its pow and mul save self)
     *   Qwen3 q/k norm               norm(qd) + norm(kvd), outputs not saved (rotation saves cos only)
     *   rotation of q and k          4b(qd + kvd)        x·cos, roll(x), ·sin, sum; the sum saved (SDPA)
     *   attention (flash, CPU)       b·qd + 4·heads      output and logsumexp saved
     *   o linear, residual add       2b·h                the sum (x_mid) saved in float32 (next norm)
     *   post norm (h)                norm(h), output saved (gate/up linears)
     *   gate, up, silu, silu·up      4b·I                all four saved (silu, mul, down linear)
     *   down linear, residual add    2b·h                the sum (x_out) saved in float32 (next norm)
     * </pre>
     * so float32 makes 10h + 6qd + 6kvd + 4I values per token (+ 9qd + 9kvd in all with Qwen3's
     * q/k norm) and saves 6h + 2qd + 2kvd + 4I (Qwen3: 4qd + 4kvd). The attention mask is not in
     * here: it is per token pair ({@link #masks}), and only a prefill makes one (a training or
     * log-prob forward is right-padded without cache: causal attention, no mask). Only the saved
     * part outlives a layer: each layer runs in a PointerScope of its own
     * ({@link #FORWARD_HOLDS_EVERY_LAYER}).
     */
    static PerToken layer(ModelConfig c, int b) {
        long h = c.hiddenSize(), inter = c.intermediateSize(), heads = c.numHeads(), kvh = c.numKvHeads();
        long qd = heads * c.headDim(), kvd = kvh * c.headDim();
        boolean qk = c.family().qkNorm(), f32 = b == 4;
        PerToken p = norm(h, b, true);
        p = p.plus(new PerToken(b * (qd + 2 * kvd), b * kvd + (qk && f32 ? b * (qd + kvd) : 0)));
        if (qk) p = p.plus(norm(qd, b, false)).plus(norm(kvd, b, false)).plus(new PerToken(4 * (heads + kvh) - 8, 4 * (heads + kvh) - 8));
        p = p.plus(new PerToken(4L * b * (qd + kvd), (long) b * (qd + kvd)));
        p = p.plus(new PerToken(b * qd + 4 * heads, b * qd + 4 * heads));
        p = p.plus(new PerToken(2L * b * h, f32 ? b * h : 0));
        p = p.plus(norm(h, b, true));
        p = p.plus(new PerToken(4L * b * inter, 4L * b * inter));
        p = p.plus(new PerToken(2L * b * h, f32 ? b * h : 0));
        return p;
    }

    /** The embedding lookup's output: saved in float32 (by the first norm's pow and mul), not in a reduced dtype (the norm saves its float32 copy). */
    static PerToken embedding(ModelConfig c, int b) {
        return new PerToken((long) b * c.hiddenSize(), b == 4 ? 4L * c.hiddenSize() : 0);
    }

    /** The final norm; its output (the hidden states) is not saved but held by TeacherForcing until the LM head has run. */
    static PerToken finalNorm(ModelConfig c, int b) {
        return norm(c.hiddenSize(), b, false);
    }

    /**
     * Rope.angles for d = head_dim: positions as floats, angles [d/2], cat [d], sin and cos [d] in
     * float32, their casts to the dtype (none in float32), sin's negated half [d/2] and the signed
     * sin [d]; cos and the signed sin are saved (shared by every layer's rotation).
     */
    static PerToken rope(ModelConfig c, int b) {
        long d = c.headDim();
        long casts = b == 4 ? 0 : 2L * b * d;
        return new PerToken(4 + 4 * (d / 2) + 12 * d + casts + b * (d / 2) + b * d, (b == 4 ? 4 * d : b * d) + b * d);
    }

    /**
     * The attention masks of one masked forward of n = r·t tokens (r rows of t) over s = t key
     * slots (CausalLm's general pass with a cache: the prefill): the bool validity [r, s], the slot
     * comparisons [t, s] twice, the slot numbers (int64) and the bool masks [r, 1, t, s] twice.
     * scaled_dot_product_attention turns the bool mask into an additive one of the dtype in every
     * layer ({@link #convertedMask}), through a bool negation of the same size ({@link
     * #negatedMask}). The forwards of TeacherForcing (training, old and reference log-probs) are
     * right-padded without cache, so CausalLm runs them causal without a mask: none of these
     * (its check of the padding, a few bytes a token, is freed before the layers run).
     */
    static long masks(long n, long t) {
        return 2 * n * t + 2 * t * t + n + 16 * t;
    }

    /** One layer's additive mask [r, 1, t, t] in b bytes: saved by every layer of a training forward, one at a time otherwise. */
    static long convertedMask(long n, long t, int b) {
        return n * t * b;
    }

    /** The bool negation made while converting the mask (freed when the attention returns). */
    static long negatedMask(long n, long t) {
        return n * t;
    }

    // ------------------------------------------------------------------ peaks

    /**
     * The layers' part of a training forward of {@code mb} at its end (causal: no mask): without
     * checkpointing what each layer saved and the last layer's other tensors; with it, each
     * layer's input (and the last output) plus one layer at a time (CausalLm.trainingHidden: the
     * layers run without autograd, each in its own scope).
     */
    static long forwardEnd(ModelConfig c, int b, MicroBatch mb, boolean checkpointing) {
        long n = mb.tokens(), layers = c.numLayers();
        long common = n * (INPUT_BYTES_PER_TOKEN + rope(c, b).created());
        if (checkpointing) {
            return common + n * (layers + 1) * b * c.hiddenSize() + n * layer(c, b).created();
        }
        PerToken lay = layer(c, b);
        long perLayer = FORWARD_HOLDS_EVERY_LAYER ? layers * lay.created() : layers * lay.saved() + lay.created() - lay.saved();
        return common + n * (embedding(c, b).created() + perLayer + finalNorm(c, b).created());
    }

    /**
     * The peak of one micro-batch's forward, loss and backward (PpoUpdater.microBatch), the
     * largest of four moments:
     * <ol>
     *   <li>the end of the layers' forward ({@link #forwardEnd});</li>
     *   <li>the end of TeacherForcing: what autograd saved, the hidden states, the gathered
     *       response positions [N, h] and the LM head's [N, V] float32 tensors: the logits, their
     *       division by the temperature (when it is not 1), log_softmax, exp and exp·logp for the
     *       entropy (all in one scope);</li>
     *   <li>the backward pass at the head: the saved log_softmax, the gather's gradient and
     *       log_softmax's, and when ppo.entropy_coef &gt; 0 the entropy's graph (its saved exp)
     *       and its two gradients; with the coefficient 0 the entropy is computed without
     *       autograd and holds nothing;</li>
     *   <li>the backward pass in the last layer: the gradient of its output and three [tokens,
     *       I] gradients of the MLP.</li>
     * </ol>
     * With {@code fused} (PpoUpdater.fusedMicroBatch), moments 2 and 3 are one: FusedLmHead's
     * chunks, on top of what autograd saved and the response positions' hidden states (which
     * TeacherForcing.responseHidden keeps; the whole final hidden states went with its scope); and
     * what the fused head holds across its chunks ({@link FusedHead#heldBytes}: dL/dh above all) is
     * still alive in moment 4, through hidden.backward and the checkpointed layers' part.
     */
    static long trainingPeak(ModelConfig c, int b, MicroBatch mb, boolean div, boolean entropy, boolean checkpointing,
                             FusedHead fused) {
        long n = mb.tokens(), layers = c.numLayers(), h = c.hiddenSize();
        long nv = mb.responseTokens() * c.vocabSize() * 4L, picked = mb.responseTokens() * h * b, hiddenOut = n * h * b;
        PerToken lay = layer(c, b);
        long saved;
        long backLayer;
        if (checkpointing) {
            saved = n * (layers + 1) * b * h + n * finalNorm(c, b).saved();
            long backOfLayer = n * b * (h + Math.max(3L * c.intermediateSize(), (long) c.numHeads() * c.headDim()
                    + 2L * c.numKvHeads() * c.headDim() + h));
            backLayer = saved + n * b * h + n * (INPUT_BYTES_PER_TOKEN + rope(c, b).created()) + n * lay.created() + backOfLayer;
            // the fused path's scope keeps the response positions' hidden states until the micro-batch ends
            if (fused != null) backLayer += picked;
        } else {
            saved = n * (rope(c, b).saved() + embedding(c, b).saved() + layers * lay.saved() + finalNorm(c, b).saved());
            backLayer = saved + picked + n * b * (h + 3L * c.intermediateSize());
        }
        long fwd = forwardEnd(c, b, mb, checkpointing);
        if (fused != null) {
            return Math.max(fwd, Math.max(saved + picked + fused.peak(), backLayer + fused.heldBytes()));
        }
        long head = saved + hiddenOut + picked + nv * (4 + (div ? 1 : 0));
        long backHead = saved + picked + nv * (entropy ? 6 : 3);
        return Math.max(Math.max(fwd, head), Math.max(backHead, backLayer));
    }

    /**
     * The fused LM head of a micro-batch, from FusedLmHead's code. N response tokens, H hidden, V
     * vocabulary, b bytes per value of the model's dtype, chunks of c = min(N,
     * FusedLmHead.defaultChunkTokens(V)) tokens. A chunk's scope holds the logits h·Wᵀ [c, V] in the
     * dtype and their float32 copy (a reduced dtype only), divided by the temperature in place: the
     * kernel overwrites the float32 one with dL/dz. The update's chunk adds dL/dz in the
     * dtype for dL/dh's product (a reduced dtype only), that product [c, H] in the dtype, and the
     * chunk's hidden states in float32 for dL/dW's (a reduced dtype only); dL/dW goes straight into
     * a float32 .grad. Across the chunks the update holds dL/dh [N, H] in the dtype, the float32
     * sum of dL/dW [V, H] (a reduced dtype only), the log-probs and entropies (float32), the
     * targets and the rows' token positions (int64) and the gathered old (and reference) log-probs
     * (float32): 28 (32) bytes a token. After the chunks, a reduced dtype's .grad.add_(dL/dW), in
     * blocks of FusedLmHead.GRAD_ADD_ROWS rows, makes two float32 [block, H] temporaries on the CPU
     * (TensorIterator promotes the bf16 .grad, as input and as output, to the float32 of the sum). The log-prob pass (no autograd) holds the chunk's
     * logits alone, and across the chunks the targets and log-probs: 12 bytes a token.
     */
    static FusedHead fusedHead(ModelConfig c, int b, MicroBatch mb, boolean update, boolean reference) {
        long n = mb.responseTokens(), h = c.hiddenSize(), v = c.vocabSize();
        boolean reduced = b != 4;
        int chunk = (int) Math.min(Math.max(1, n), FusedLmHead.defaultChunkTokens(v));
        long logits = (long) chunk * v * (b + (reduced ? 4 : 0));
        if (!update) return new FusedHead(chunk, logits, 12 * n, 0);
        long chunkBytes = logits + (reduced ? (long) chunk * v * b : 0) + (long) chunk * h * b + (reduced ? (long) chunk * h * 4 : 0);
        long held = n * h * b + (reduced ? v * h * 4 : 0) + n * (28 + (reference ? 4 : 0));
        return new FusedHead(chunk, chunkBytes, held, reduced ? 2 * Math.min(v, FusedLmHead.GRAD_ADD_ROWS) * h * 4 : 0);
    }

    /**
     * The log-prob pass with the fused head (PpoUpdater.logProbs): the layers' forward as in {@link
     * #inferencePeak}, then the response positions' hidden states [N, H] and the head's chunks.
     */
    static long inferencePeakFused(ModelConfig c, int b, MicroBatch mb, FusedHead head) {
        return Math.max(inferenceForward(c, b, mb, false, false), mb.responseTokens() * c.hiddenSize() * b + head.peak());
    }

    /**
     * The layers of a forward without autograd at its peak: one layer's tensors at a time and its
     * input; with {@code masked} (a prefill: a cache, left padding) the masks and one layer's
     * converted mask, and with {@code expandedKv} (a masked GPU forward of a GQA model:
     * Transformer.expandKvHeads) k and v copied to every query head, [n, heads·d] each, in the layer.
     */
    static long inferenceForward(ModelConfig c, int b, MicroBatch mb, boolean masked, boolean expandedKv) {
        long n = mb.tokens(), t = mb.rowTokens(), h = c.hiddenSize();
        long layer = layer(c, b).created() + (expandedKv ? 2L * b * c.numHeads() * c.headDim() : 0);
        long layers = FORWARD_HOLDS_EVERY_LAYER ? c.numLayers() * layer : layer + (long) b * h;
        return n * (INPUT_BYTES_PER_TOKEN + rope(c, b).created() + embedding(c, b).created() + layers + finalNorm(c, b).created())
                + (masked ? masks(n, t) + convertedMask(n, t, b) + negatedMask(n, t) : 0);
    }

    /**
     * A forward without autograd (the old and reference log-probs, PpoUpdater.logProbs: right-padded
     * without cache, so causal and unmasked): every tensor of the layers until CausalLm.hidden
     * returns; then the hidden states, the response positions and the logits, their division by
     * the temperature and log_softmax, [N, V] float32 each.
     */
    static long inferencePeak(ModelConfig c, int b, MicroBatch mb, boolean div) {
        return inferencePeak(c, b, mb, div, false, false);
    }

    /** As above, masked (a prefill) and with k and v expanded to the query heads (a masked GPU forward of a GQA model) as said. */
    static long inferencePeak(ModelConfig c, int b, MicroBatch mb, boolean div, boolean masked, boolean expandedKv) {
        long n = mb.tokens(), h = c.hiddenSize();
        long fwd = inferenceForward(c, b, mb, masked, expandedKv);
        long nv = mb.responseTokens() * c.vocabSize() * 4L;
        long head = n * h * b + mb.responseTokens() * h * b + nv * (2 + (div ? 1 : 0));
        return Math.max(fwd, head);
    }

    /**
     * One generation batch (Generator): the KV cache, [2, rows, kv_heads, capacity, head_dim] per
     * layer in the dtype, made before the prefill and held to the end (the continuous engine's
     * prefill cache and its prefix cache of {@code prefixBudget} slots, or the batch's, beside
     * it); the prefill, a forward of
     * rows × prompt tokens without autograd; then the last position's logits [rows, V] (in the
     * dtype, then float32) and the sampler's float32 and float64 copies of them (division by the
     * temperature, softmax, its float64 cumulative sum: 28 bytes a logit; top-k/top-p add a sort).
     */
    static Generation generation(ModelConfig c, int b, int rows, int prompt, int fresh, boolean filters, boolean continuous,
                                 long prefixBudget, int rolloutsPerTask, boolean cpu) {
        long cap = (long) prompt + fresh;
        long slot = 2L * c.numLayers() * c.numKvHeads() * c.headDim() * b;
        long kv = slot * rows * cap;
        MicroBatch pre = new MicroBatch(rows, (long) rows * prompt, prompt, 0);
        // the prefill is masked (left-padded prompts into a cache); on a GPU with grouped-query
        // heads its k and v are expanded to the query heads for the memory-efficient kernel
        long prefill = inferencePeak(c, b, pre, false, true, !cpu && c.numHeads() != c.numKvHeads());
        long logits = (long) rows * prompt * c.hiddenSize() * b + (long) rows * c.vocabSize() * (b + 4 + 28 + (filters ? 24 : 0));
        long bucket = Math.max(Math.max(1, rows / 4) * (long) prompt,
                cpu ? Math.min((long) rows * prompt, Generator.PREFILL_CACHE_BYTES / Math.max(1, slot)) : 0), stems = Math.max(1, rows / Math.max(1, rolloutsPerTask)) * (long) prompt;
        return new Generation(rows, prompt, (int) cap, kv, prefill, logits, continuous ? slot * bucket : 0,
                continuous ? slot * prefixBudget : 0, continuous ? slot * stems : 0);
    }

    // ------------------------------------------------------------------ advice

    /**
     * What to change when the plan does not fit, one line each, in order and each on top of the
     * ones before it, so that together they fit (the last line says whether they do): the
     * optimiser state sharded, or more GPUs, when the resident models alone overflow; a generation
     * budget; the fused LM head, when the materialised one is a big part of a phase that does not
     * fit (on a GPU run marked as not yet run on a GPU); activation checkpointing; a micro-batch
     * token bound. Each value
     * is the largest that fits, found by planning the changed config again. Empty when the plan fits.
     */
    public List<String> advice() {
        List<String> out = new ArrayList<>();
        if (fits()) return out;
        final long usable = machine.usableBytes();
        final List<String> changes = new ArrayList<>();
        MemoryPlan p = this;
        if (p.resident > usable && machine.gpus() > 1 && !cfg.distributed().shardOptimizer()) {
            changes.add("distributed.shard_optimizer=true");
            MemoryPlan q = with(changes);
            out.add("distributed.shard_optimizer: true (the models' resident bytes per GPU: " + gib(p.resident) + " -> "
                    + gib(q.resident) + ")");
            p = q;
        }
        if (p.resident > usable) {
            String more = "the models alone need " + gib(p.resident) + " per GPU, more than the usable " + gib(usable);
            RunConfig sharded = cfg.withOverrides(List.of("distributed.shard_optimizer=true"));
            for (int g = Math.max(2, machine.gpus() + 1); g <= 4096; g++) {
                MemoryPlan q = of(sharded, shapes, new Machine(g, machine.bytesPerGpu()));
                if (q.resident <= usable) {
                    more += ": at least --gpus " + g + " with distributed.shard_optimizer: true (" + gib(q.resident) + " each)";
                    break;
                }
            }
            if (cfg.ppo().referenceModel()) more += "; ppo.reference_model: false frees each model's frozen copy";
            out.add(more);
            return out;
        }
        var rc = cfg.rollout();
        final int row = rc.maxPromptTokens() + rc.maxNewTokens();
        if (p.phases.get(0).peak() > usable) {
            long rows = largest(r -> with(changes, "rollout.max_batch_tokens=" + r * row).phases.get(0).peak() <= usable, 1,
                    Math.max(1, p.models.stream().mapToLong(m -> m.generation().rows()).max().orElse(1)));
            if (rows == 0) {
                out.add("one generation row of rollout.max_prompt_tokens + rollout.max_new_tokens (" + row + " tokens) does not fit:"
                        + " lower them");
                return out;
            }
            changes.add("rollout.max_batch_tokens=" + rows * row);
            out.add("rollout.max_batch_tokens: " + rows * row + " (at most " + rows + (rows == 1 ? " row" : " rows") + " of " + row
                    + " tokens per generation batch)");
            p = with(changes);
        }
        if ((p.phases.get(1).peak() > usable || p.phases.get(2).peak() > usable) && !cfg.ppo().fusedLmHead()) {
            // the fused head first: the same losses and gradients at the materialised head's speed
            // (bench/README.md, "Fused LM head"), where checkpointing costs a forward
            ModelPlan big = null;
            for (ModelPlan m : p.models) {
                if (headMatters(p, m, usable) && (big == null || m.update().materialisedHeadBytes() > big.update().materialisedHeadBytes())) {
                    big = m;
                }
            }
            if (big != null) {
                Update u = big.update();
                String what = "the LM head's [N, V] float32 tensors, " + gib(u.materialisedHeadBytes()) + " of " + big.id()
                        + "'s update micro-batch, become chunks of " + u.fusedHead().chunkTokens() + " tokens: " + gib(u.fusedHead().peak())
                        + " in all; its update micro-batch: " + gib(u.peak(u.checkpointing(), false)) + " -> "
                        + gib(u.peak(u.checkpointing(), true));
                changes.add("ppo.fused_lm_head=true");
                out.add("ppo.fused_lm_head: true (" + what + (cfg.run().device() == RunSettings.Device.CPU ? ""
                        : "; its CUDA path is tested against the CPU's but has not run on a GPU yet") + ")");
                p = with(changes);
            }
        }
        if (p.phases.get(2).peak() > usable) {
            for (ModelPlan m : p.models) {
                if (m.spec().activationCheckpointing() || resident(p) + m.update().added() <= usable) continue;
                Update u = m.update();
                changes.add("models." + m.id() + ".activation_checkpointing=true");
                out.add("models." + m.id() + ".activation_checkpointing: true (its update micro-batch: " + gib(u.peak(false, u.fused()))
                        + " -> " + gib(u.peak(true, u.fused())) + ")");
            }
            p = with(changes);
        }
        if (p.phases.get(1).peak() > usable || p.phases.get(2).peak() > usable) {
            LongPredicate ok = k -> {
                MemoryPlan q = with(changes, "ppo.max_tokens_per_micro_batch=" + k);
                return q.phases.get(1).peak() <= usable && q.phases.get(2).peak() <= usable;
            };
            long hi = p.models.stream().mapToLong(m -> m.update().mb().tokens()).max().orElse(row);
            long tokens = ok.test(row) ? largest(ok, row, Math.max(row, hi)) : 0;
            if (tokens == 0) {
                MemoryPlan one = with(changes, "ppo.max_tokens_per_micro_batch=" + row);
                Phase worse = one.phases.get(1).peak() > one.phases.get(2).peak() ? one.phases.get(1) : one.phases.get(2);
                Update u = one.models.get(0).update();
                String head = u.fused() ? "its fused LM head holds " + gib(u.fusedHead().peak())
                        : "its LM head alone makes [N, V] float32 tensors of " + gib(u.logitsBytes())
                        + "; ppo.fused_lm_head would hold " + gib(u.fusedHead().peak());
                out.add("one row of " + row + " tokens does not fit: its " + worse.name() + " pass peaks at " + gib(worse.peak())
                        + " (" + head + "): lower rollout.max_prompt_tokens or rollout.max_new_tokens, or use more GPUs");
                return out;
            }
            changes.add("ppo.max_tokens_per_micro_batch=" + tokens);
            out.add("ppo.max_tokens_per_micro_batch: " + tokens + " (the log-prob and update passes in micro-batches of at most "
                    + tokens + " tokens)");
            p = with(changes);
        }
        Phase top = p.largestPhase();
        out.add((p.fits() ? "with all of these it fits: " : "with all of these it still does not fit: ") + top.name() + " peaks at "
                + gib(top.peak()) + " of " + gib(usable));
        return out;
    }

    /**
     * Whether the materialised LM head's [N, V] tensors are a big part of a phase of {@code m} that
     * does not fit: at least a tenth of what the model adds in the log-prob or the update phase.
     * (A tenth is a judgement: below it the fused head changes little of what else must change.)
     */
    private static boolean headMatters(MemoryPlan p, ModelPlan m, long usable) {
        Update u = m.update();
        boolean update = p.resident + u.added() > usable && u.materialisedHeadBytes() * 10 >= u.added();
        boolean logProb = p.resident + m.logProbAdded() > usable
                && m.update().logitsBytes() * (2 + (p.cfg.rollout().temperature() != 1.0 ? 1 : 0)) * 10 >= m.logProbAdded();
        return update || logProb;
    }

    private static long resident(MemoryPlan p) {
        return p.resident;
    }

    private MemoryPlan with(List<String> overrides, String... more) {
        List<String> all = new ArrayList<>(overrides);
        all.addAll(List.of(more));
        return of(cfg.withOverrides(all), shapes, machine);
    }

    /** The largest k in [lo, hi] with ok(k), for ok true up to some k and false after; 0 when ok(lo) is false. */
    private static long largest(LongPredicate ok, long lo, long hi) {
        if (!ok.test(lo)) return 0;
        if (ok.test(hi)) return hi;
        while (hi - lo > 1) {
            long mid = lo + (hi - lo) / 2;
            if (ok.test(mid)) lo = mid;
            else hi = mid;
        }
        return lo;
    }

    // ------------------------------------------------------------------ printing

    public static String gib(long bytes) {
        return String.format(java.util.Locale.ROOT, "%.2f GiB", bytes / (double) (1L << 30));
    }
}
