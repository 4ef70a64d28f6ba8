// Generator.java — the in-process rollout engine: a call's requests decoded one token per step
// from a KV cache allocated once; each request stops at a stop token, a stop string or its token
// budget. Continuous batching (ContinuousEngine, the default) or static batches (here: left-padded,
// prefilled in one forward, decoded until the last row stops; with a token budget,
// rollout.max_batch_tokens, as many batches as it needs). Every step's native memory is released
// before the next (PointerScope).
package dev.drmas.rollout;

import dev.drmas.model.CausalLm;
import dev.drmas.model.KvCache;
import dev.drmas.model.Tensors;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.InferenceMode;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * Batched generation with one model. The static engine: padding is on the left, so the next
 * token of every row goes into the same cache slot; position ids count real tokens only, so a request's logits do
 * not depend on the padding (up to floating-point summation order). Rows that have stopped keep
 * being computed until the whole batch stops (their outputs are ignored): simple, and on a GPU
 * cheaper than reshaping the cache.
 * <p>
 * A request's draws are keyed by (seed, its stream, its token index) alone ({@link Sampler#uniform}),
 * so the batches it is cut into change no token. With a budget of {@code maxBatchTokens} token
 * slots, a batch holds rows × (its longest prompt + max new tokens) slots, which is what its KV
 * cache and its id arrays allocate; the requests are taken longest prompt first, so that rows of
 * like length share a batch and little of the budget goes to padding.
 */
public final class Generator {
    /**
     * How a call's requests are batched. STATIC: batches of the budget's rows, each prefilled
     * together and decoded until its last row stops (rows that stopped keep being computed).
     * CONTINUOUS (the default): one batch whose rows take the next waiting request as they
     * finish, shared prompt prefixes prefilled once, and the rows still generating compacted
     * once nothing waits ({@link ContinuousEngine}). Both give the same tokens for the same seeds.
     * Without a KV cache (GenerationConfig.useCache false) every call runs STATIC.
     */
    public enum Engine { STATIC, CONTINUOUS }

    /**
     * On the CPU the continuous engine's prefill forward may hold all the batch's rows of prompts
     * within this many bytes, beyond its bound of a quarter of them (so that small models prefill
     * in fewer, larger forwards); MemoryPlan counts it for CPU runs.
     */
    public static final long PREFILL_CACHE_BYTES = 256L << 20;

    private final CausalLm model;
    private final long maxBatchTokens;
    private final Engine engine;
    private volatile List<Batch> lastBatches = List.of();
    private PrefixCache prefixes;  // kept across calls (keepPrefixes), else null
    private volatile Stats lastStats;

    /** A batch as allocated: {@code rows} × {@code capacity} token slots (KV cache and id arrays). */
    public record Batch(int rows, int capacity) {
        public long slots() {
            return (long) rows * capacity;
        }
    }

    /**
     * What a call did: the prompts' tokens, the tokens it prefilled (the continuous engine: fewer
     * where prompts or their prefixes were shared; the static one: its batches' padded prompts),
     * the tokens copied from the prefix cache instead, its prefill forwards, the groups of
     * requests that joined (the first included; the static engine: its batches), the compactions,
     * and whether the write column went round the cache.
     */
    public record Stats(long promptTokens, long prefilledTokens, long reusedTokens, long prefills, int admissions,
                        int compactions, boolean wrapped) {
    }

    /** Every call generates its requests in one batch. */
    public Generator(CausalLm model) {
        this(model, 0);
    }

    /**
     * @param maxBatchTokens the most token slots (rows × (longest prompt + max new tokens)) of one
     *                       batch; 0 = no bound (one batch per call)
     */
    public Generator(CausalLm model, long maxBatchTokens) {
        this(model, maxBatchTokens, Engine.CONTINUOUS);
    }

    /** As above, batching as {@code engine} says. */
    public Generator(CausalLm model, long maxBatchTokens, Engine engine) {
        if (maxBatchTokens < 0) throw new IllegalArgumentException("max_batch_tokens must be >= 0 (0 = no bound), got " + maxBatchTokens);
        if (engine == null) throw new IllegalArgumentException("engine must be given");
        this.model = model;
        this.maxBatchTokens = maxBatchTokens;
        this.engine = engine;
    }

    public Engine engine() {
        return engine;
    }

    public long maxBatchTokens() {
        return maxBatchTokens;
    }

    /**
     * From now on the continuous engine keeps the prompts it prefilled across calls (a prefix
     * cache of at most {@code budgetTokens} token slots; 0: no bound), so that a call whose prompts
     * start with an earlier call's prompt (a multi-turn workflow's next turn: the same question,
     * a longer history) copies that part's keys and values instead of computing them. Entries are
     * dropped by themselves when the model's weights change ({@link CausalLm#weightsVersion}); the
     * memory is held until {@link #clearPrefixes} (the trainer calls it after each rollout
     * phase). The static engine ignores it.
     */
    public Generator keepPrefixes(long budgetTokens) {
        clearPrefixes();
        prefixes = new PrefixCache(model, budgetTokens, true);
        return this;
    }

    /** Frees what the prefix cache holds (it stays on, empty). */
    public void clearPrefixes() {
        if (prefixes != null) prefixes.clear();
    }

    /** The prefix cache kept across calls, or null (for tests). */
    PrefixCache prefixCache() {
        return prefixes;
    }

    /**
     * The account of the latest call: the continuous engine's, or the static engine's (its batches
     * prefilled whole, padding included; no prefills counted without a KV cache).
     */
    public Stats lastStats() {
        return lastStats;
    }

    /** The batches of the latest {@link #generate} call, in the order they ran. */
    public List<Batch> lastBatches() {
        return lastBatches;
    }

    public CausalLm model() {
        return model;
    }

    /** Generates a completion for every request, in order. */
    public List<Completion> generate(List<Request> requests, GenerationConfig cfg) {
        final int b = requests.size();
        if (b == 0) {
            lastBatches = List.of();
            return List.of();
        }
        final int vocab = model.config().vocabSize(), positions = model.config().maxPositionEmbeddings();
        for (int r = 0; r < b; r++) {
            int[] p = requests.get(r).promptIds();
            for (int j = 0; j < p.length; j++) {
                if (p[j] < 0 || p[j] >= vocab) {
                    throw new IllegalArgumentException("request " + r + ": prompt token " + j + " = " + p[j]
                            + " is outside the vocabulary [0, " + vocab + ")");
                }
            }
            // past them the RoPE positions are ones the model never saw: refused, not generated quietly
            if ((long) p.length + cfg.maxNewTokens() > positions) {
                throw new IllegalArgumentException("request " + r + ": its prompt of " + p.length + " tokens + max new tokens "
                        + cfg.maxNewTokens() + " = " + ((long) p.length + cfg.maxNewTokens()) + " positions, more than the model takes ("
                        + positions + ", max_position_embeddings)");
            }
            if (maxBatchTokens > 0 && (long) p.length + cfg.maxNewTokens() > maxBatchTokens) {
                throw new IllegalArgumentException("request " + r + ": its prompt of " + p.length + " tokens + max new tokens "
                        + cfg.maxNewTokens() + " = " + ((long) p.length + cfg.maxNewTokens()) + " token slots, more than a batch may hold"
                        + " (max_batch_tokens " + maxBatchTokens + ")");
            }
        }
        List<Batch> shapes = new ArrayList<>();
        List<Completion> out;
        lastStats = null;
        if (engine == Engine.CONTINUOUS && cfg.useCache()) {
            ContinuousEngine e = new ContinuousEngine(model, requests, cfg, maxBatchTokens, prefixes);
            shapes.add(e.shape());
            out = e.run();
            lastStats = e.stats();
        } else if (maxBatchTokens == 0) {
            out = generateBatch(requests, null, cfg, shapes);
        } else {
            Completion[] done = new Completion[b];
            for (int[] batch : plan(requests, cfg.maxNewTokens(), maxBatchTokens)) {
                List<Request> part = new ArrayList<>(batch.length);
                for (int i : batch) part.add(requests.get(i));
                List<Completion> got = generateBatch(part, batch, cfg, shapes);
                for (int k = 0; k < batch.length; k++) done[batch[k]] = got.get(k);
            }
            out = Arrays.asList(done);
        }
        lastBatches = List.copyOf(shapes);
        if (lastStats == null) {
            // the static engine: each batch prefilled whole, padding included, with a KV cache (else every step is a forward of all slots)
            long prompt = 0, prefilled = 0;
            for (Request r : requests) prompt += r.promptIds().length;
            for (Batch s : shapes) prefilled += (long) s.rows() * (s.capacity() - cfg.maxNewTokens());
            lastStats = new Stats(prompt, cfg.useCache() ? prefilled : 0, 0, cfg.useCache() ? shapes.size() : 0, shapes.size(), 0, false);
        }
        return out;
    }

    /**
     * The batches of a bounded call, as indices into {@code requests}: longest prompt first (ties in
     * request order), each batch as many rows as fit in {@code budget} slots at the capacity of its
     * first (longest) row. Every request fits alone (checked by the caller).
     */
    static List<int[]> plan(List<Request> requests, int maxNewTokens, long budget) {
        Integer[] order = new Integer[requests.size()];
        for (int i = 0; i < order.length; i++) order[i] = i;
        Arrays.sort(order, Comparator.comparingInt((Integer i) -> -requests.get(i).promptIds().length));  // stable
        List<int[]> batches = new ArrayList<>();
        for (int from = 0; from < order.length; ) {
            long capacity = (long) requests.get(order[from]).promptIds().length + maxNewTokens;
            int rows = (int) Math.min(order.length - from, budget / capacity);
            int[] batch = new int[rows];
            for (int k = 0; k < rows; k++) batch[k] = order[from + k];
            batches.add(batch);
            from += rows;
        }
        return batches;
    }

    /**
     * One batch: prefill and decode until every row has stopped; its shape goes into {@code shapes}.
     * Row r is request {@code index[r]} of the call (null: r), for error messages.
     */
    private List<Completion> generateBatch(List<Request> requests, int[] index, GenerationConfig cfg, List<Batch> shapes) {
        final int b = requests.size();
        int longest = 0;
        for (Request r : requests) longest = Math.max(longest, r.promptIds().length);
        long slots = (long) b * (longest + (long) cfg.maxNewTokens());
        if (slots > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(b + " requests × (longest prompt " + longest + " + max new tokens " + cfg.maxNewTokens()
                    + ") = " + slots + " token slots, more than one batch can hold (" + (Integer.MAX_VALUE - 8) + ")");
        }
        final int capacity = longest + cfg.maxNewTokens();
        // the whole batch as it grows, left-padded: ids and key validity per slot
        long[] ids = new long[b * capacity];
        long[] valid = new long[b * capacity];
        long[] nextPos = new long[b];  // position id of each row's next token
        for (int r = 0; r < b; r++) {
            int[] p = requests.get(r).promptIds();
            int pad = longest - p.length;
            for (int j = 0; j < p.length; j++) {
                ids[r * capacity + pad + j] = p[j];
                valid[r * capacity + pad + j] = 1;
            }
            nextPos[r] = p.length;
        }
        Row[] rows = new Row[b];
        for (int r = 0; r < b; r++) rows[r] = new Row(cfg.maxNewTokens());
        int filled = longest;  // slots in use
        int active = b;
        // Inference mode rather than no-grad: LibTorch then skips autograd's and the version
        // counters' bookkeeping on every call, which made batch-1 decoding ~20% faster
        // (bench/README.md). Nothing made here leaves the call (completions are Java arrays),
        // so no inference tensor can meet autograd later. (The guard lives in a scope of its own,
        // so that it does not attach to the caller's.)
        try (PointerScope guardScope = new PointerScope(); InferenceMode inference = new InferenceMode();
             KvCache cache = cfg.useCache() ? model.newCache(b, capacity) : null) {
            // the shape as allocated: the cache's own (the id arrays above have the same)
            shapes.add(cache == null ? new Batch(b, capacity) : new Batch((int) cache.batchSize(), (int) cache.capacity()));
            Tensor logits;
            for (int step = 0; ; step++) {
                try (PointerScope scope = new PointerScope()) {
                    double[] u = new double[b];
                    for (int r = 0; r < b; r++) u[r] = Sampler.uniform(cfg.seed(), requests.get(r).stream(), step);
                    Tensor deviceU = null;  // the uniforms, when the decoding step took them to the device
                    if (step == 0 || cache == null) {
                        // prefill (or, without a cache, the whole sequence again)
                        Tensor in = slots(ids, b, capacity, 0, filled);
                        Tensor mask = slots(valid, b, capacity, 0, filled);
                        // the LM head only at the last position: [B, 1, V] instead of [B, T, V]
                        Tensor h = model.hidden(in, CausalLm.positionIds(mask), mask, cache);
                        logits = model.logits(h.narrow(1, h.size(1) - 1, 1));
                    } else {
                        long[] in = new long[b], pos = new long[b];
                        for (int r = 0; r < b; r++) {
                            in[r] = ids[r * capacity + filled - 1];
                            pos[r] = nextPos[r] - 1;
                        }
                        // the token at slot filled - 1, reading slots [0, filled): each row's tokens end
                        // there at consecutive positions (left padding before them), the ring layout
                        CausalLm.Decoded d = model.decodeRing(in, pos, valid, capacity, filled, cache, filled - 1,
                                cfg.sampling().greedy() ? null : u);  // on a GPU: with the step's inputs, one copy
                        logits = d.logits();
                        deviceU = d.uniforms();
                        cache.setLength(filled);
                    }
                    Tensor last = logits.select(1, logits.size(1) - 1);  // [B, V]
                    last = allowed(last, cfg);
                    Sampler.Draw draw = Sampler.sample(last, cfg.sampling(), u, deviceU);
                    for (int r = 0; r < b; r++) {
                        Row row = rows[r];
                        int tok = (int) draw.tokens()[r];
                        if (row.reason == null) {
                            row.add(tok, draw.logprobs()[r], index == null ? r : index[r]);
                            row.reason = stopReason(row, tok, cfg);
                            if (row.reason != null) active--;
                        }
                        // every row gets a slot, so the batch stays rectangular
                        ids[r * capacity + filled] = tok;
                        valid[r * capacity + filled] = 1;
                        nextPos[r]++;
                    }
                    filled++;
                }
                if (active == 0) break;
            }
        }
        List<Completion> out = new ArrayList<>(b);
        for (Row row : rows) {
            out.add(row.completion());
        }
        return out;
    }

    /** Columns [from, to) of a [B, capacity] Java matrix as an int64 tensor on the model's device. */
    private Tensor slots(long[] m, int b, int capacity, int from, int to) {
        long[] part = new long[b * (to - from)];
        for (int r = 0; r < b; r++) System.arraycopy(m, r * capacity + from, part, r * (to - from), to - from);
        return onDevice(part, b, to - from);
    }

    private Tensor onDevice(long[] a, int rows, int cols) {
        return onDevice(model, a, rows, cols);  // a decoding step makes three
    }

    /** {@code a} as an int64 tensor of {@code shape} on {@code model}'s device. */
    static Tensor onDevice(CausalLm model, long[] a, long... shape) {
        return Tensors.upload(a, model.device(), shape);
    }

    /** The logits [B, V] of the ids a request may generate (GenerationConfig.vocabLimit). */
    static Tensor allowed(Tensor logits, GenerationConfig cfg) {
        return cfg.vocabLimit() > 0 && cfg.vocabLimit() < logits.size(1) ? logits.narrow(1, 0, cfg.vocabLimit()) : logits;
    }

    /** Why a request whose latest token is {@code tok} stops there, or null. */
    static Completion.FinishReason stopReason(Row row, int tok, GenerationConfig cfg) {
        if (cfg.stopTokenIds().contains(tok)) return Completion.FinishReason.STOP_TOKEN;
        if (!cfg.stopStrings().isEmpty()) {
            String text = cfg.decoder().apply(Arrays.copyOf(row.tokens, row.n));
            for (String s : cfg.stopStrings()) {
                if (text.contains(s)) return Completion.FinishReason.STOP_STRING;
            }
        }
        if (row.n == cfg.maxNewTokens()) return Completion.FinishReason.LENGTH;
        return null;
    }

    /** One request's output so far (both engines'); reason is set once it stops. */
    static final class Row {
        final int[] tokens;
        final float[] logprobs;
        int n;
        Completion.FinishReason reason;

        Row(int budget) {
            tokens = new int[budget];
            logprobs = new float[budget];
        }

        /** The next token of request {@code request} (for the error), drawn at log-prob {@code lp}. */
        void add(int tok, float lp, long request) {
            if (Float.isNaN(lp)) {
                // log_softmax of finite logits is never NaN: the model's output is not finite
                throw new IllegalStateException("the model produced non-finite logits (NaN or infinity) for request "
                        + request + " at generated token " + n + "; its weights or activations are not finite");
            }
            tokens[n] = tok;
            logprobs[n] = lp;
            n++;
        }

        Completion completion() {
            return new Completion(Arrays.copyOf(tokens, n), Arrays.copyOf(logprobs, n), reason);
        }
    }
}
