// ContinuousEngine.java — the rollout engine's continuous batching (Generator.Engine.CONTINUOUS):
// one KV cache per generate call, of the static engine's first-batch shape; requests join rows as
// earlier ones finish (within the token budget), each group of new requests prefilled with shared
// prompt prefixes computed once; once nothing waits, the rows still generating are moved to the
// front and only they are stepped. Same tokens as the static engine for the same seeds.
package dev.drmas.rollout;

import dev.drmas.model.CausalLm;
import dev.drmas.model.KvCache;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.InferenceMode;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch.ScalarType;

/**
 * The layout: the cache has R rows of C = longest prompt + max new tokens slots. All rows write
 * their next token's keys and values into the same column, which advances by one each step and
 * wraps around at C: a row's tokens are a ring segment of its row, at most C − 1 slots long, so it
 * never overwrites itself. A query does not care where its keys lie (positions were applied when
 * they were written, and the mask says which slots are its row's), so a request can join any free
 * row at any step: its prompt goes into the slots just before the current column. This is what
 * paged attention does with pages, with one page a row; it needs no attention kernel of its own.
 * <p>
 * Prefill of the requests that join together: identical prompts (a task's N rollouts) once, and
 * when the distinct prompts share a prefix of at least {@link #MIN_SHARED_PREFIX} tokens (the
 * workflows' system prompts and instructions) that prefix once, in a cache of its own; the keys
 * and values are then copied into the rows. Draws are keyed by (seed, stream, token index), as
 * in the static engine, so the tokens are the same up to floating-point summation order (the
 * products' shapes differ).
 */
final class ContinuousEngine {
    /** The shortest common prefix of distinct prompts that is prefilled once (shorter: not worth a forward). */
    static final int MIN_SHARED_PREFIX = 16;

    private final CausalLm model;
    private final List<Request> requests;
    private final GenerationConfig cfg;
    private final int capacity, rows, maxNew;
    private final Integer[] order;            // admission order: longest prompt first, ties in request order
    private int next;                         // the first request of `order` not admitted yet
    private final Completion[] done;

    // per row of the cache
    private final int[] req;                  // request index, or -1 for a free row
    private final Generator.Row[] out;
    private final long[] pos, pending;        // position id and id of the token to feed next
    private final long[] valid;               // [rows × capacity]: slots holding the row's tokens
    private int live;
    private long column;                      // columns written so far: the next token goes to slot column % capacity
    private boolean wrapped;                  // the column has gone round: every slot may be in use

    // the call's account (Generator.Stats)
    private long prefills, prefillTokens, promptTokens;
    private int admissions, compactions;

    ContinuousEngine(CausalLm model, List<Request> requests, GenerationConfig cfg, long maxBatchTokens) {
        this.model = model;
        this.requests = requests;
        this.cfg = cfg;
        int n = requests.size();
        int longest = 0;
        for (Request r : requests) longest = Math.max(longest, r.promptIds().length);
        maxNew = cfg.maxNewTokens();
        long cap = (long) longest + maxNew;
        long r = maxBatchTokens == 0 ? n : Math.min(n, maxBatchTokens / cap);
        if (r * cap > Integer.MAX_VALUE - 8) {
            throw new IllegalArgumentException(r + (maxBatchTokens == 0 ? " requests" : " rows") + " × (longest prompt " + longest + " + max new tokens " + maxNew + ") = "
                    + r * cap + " token slots, more than one batch can hold (" + (Integer.MAX_VALUE - 8) + ")");
        }
        capacity = (int) cap;
        rows = (int) r;
        order = new Integer[n];
        for (int i = 0; i < n; i++) order[i] = i;
        Arrays.sort(order, Comparator.comparingInt((Integer i) -> -requests.get(i).promptIds().length));  // stable
        done = new Completion[n];
        req = new int[rows];
        Arrays.fill(req, -1);
        out = new Generator.Row[rows];
        pos = new long[rows];
        pending = new long[rows];
        valid = new long[rows * capacity];
    }

    Generator.Batch shape() {
        return new Generator.Batch(rows, capacity);
    }

    Generator.Stats stats() {
        return new Generator.Stats(promptTokens, prefillTokens, prefills, admissions, compactions, wrapped);
    }

    List<Completion> run() {
        try (PointerScope guardScope = new PointerScope(); InferenceMode inference = new InferenceMode();
             KvCache cache = model.newCache(rows, capacity)) {
            KvCache view = cache;  // the rows stepped: all of them, or the first ones once compacted
            try {
                while (true) {
                    int free = rows - live;
                    if (next < order.length && (live == 0 || free >= Math.max(1, rows / 8))) {
                        admit(cache);
                        continue;
                    }
                    if (live == 0) break;
                    if (next == order.length && live <= view.batchSize() * 3 / 4) {
                        // nothing waits: the rows still generating move to the front, and only they are stepped
                        compact(cache, (int) view.batchSize());
                        compactions++;
                        if (view != cache) view.close();
                        view = cache.firstRows(live);
                    }
                    step(view);
                }
            } finally {
                if (view != cache) view.close();
            }
        }
        return Arrays.asList(done);
    }

    /** Requests into the free rows, as many as there are (all when nothing is generating), prefilled together. */
    private void admit(KvCache cache) {
        int k = Math.min(rows - live, order.length - next);
        // beside a running batch the group is prefilled in a cache of its own: at most a quarter
        // of the rows at a time bounds that cache (MemoryPlan counts it); an empty batch is
        // prefilled in place
        if (live > 0) k = Math.min(k, Math.max(1, rows / 4));
        admissions++;
        int[] who = new int[k];
        for (int i = 0; i < k; i++) who[i] = order[next + i];
        next += k;
        try (PointerScope scope = new PointerScope()) {
            Prefill pf = prefill(who, live == 0 ? cache : null);
            try {
                place(cache, pf, who);
            } finally {
                pf.cache.close();
            }
        }
    }

    /** The prefilled group {@code who} into the free rows, in row order, and its first tokens drawn. */
    private void place(KvCache cache, Prefill pf, int[] who) {
        int k = who.length, span = pf.span;
        long[] dst = new long[k];
        long start;
        if (pf.inPlace) {
            // an empty batch starts afresh: distinct prompt d is in row d, its prompts end at the
            // column; the other rows copy their prompt's row
            column = span;
            wrapped = false;
            start = 0;
            boolean[] seen = new boolean[k];
            int spare = (int) Arrays.stream(pf.distinctOf).max().orElse(-1) + 1, copies = k - spare;
            long[] from = new long[copies], to = new long[copies];
            for (int i = 0, c = 0; i < k; i++) {
                int d = (int) pf.distinctOf[i];
                if (!seen[d]) {
                    seen[d] = true;
                    dst[i] = d;
                } else {
                    dst[i] = spare++;
                    from[c] = d;
                    to[c++] = dst[i];
                }
            }
            cache.copyRows(cache, from, 0, span, to, 0);
        } else {
            // the prefilled slots go just before the column, into the first free rows: one piece,
            // or two where they wrap
            start = Math.floorMod(column - span, (long) capacity);
            long first = Math.min(span, capacity - start);
            for (int r = 0, i = 0; i < k; r++) if (req[r] < 0) dst[i++] = r;
            cache.copyRows(pf.cache, pf.distinctOf, 0, first, dst, start);
            if (first < span) cache.copyRows(pf.cache, pf.distinctOf, first, span - first, dst, 0);
        }
        Tensor last = pf.logits.index_select(0, onDevice(pf.distinctOf, k));
        Sampler.Draw draw = Sampler.sample(last, cfg.sampling(), uniforms(who, new int[k]));
        for (int i = 0; i < k; i++) {
            int r = (int) dst[i], d = (int) pf.distinctOf[i];
            Arrays.fill(valid, r * capacity, (r + 1) * capacity, 0);
            for (int j = 0; j < span; j++) {
                valid[(int) (r * (long) capacity + Math.floorMod(start + j, (long) capacity))] = pf.mask[d * span + j];
            }
            req[r] = who[i];
            out[r] = new Generator.Row(maxNew);
            pos[r] = requests.get(who[i]).promptIds().length;
            live++;
            accept(r, draw, i);
        }
    }

    /** One token for every row of {@code view}: fed at the column's slot, the next one drawn. */
    private void step(KvCache view) {
        int k = (int) view.batchSize();
        int slot = (int) (column % capacity);
        int slots = wrapped ? capacity : slot + 1;
        try (PointerScope scope = new PointerScope()) {
            long[] ids = new long[k], at = new long[k], mask = new long[k * slots];
            for (int r = 0; r < k; r++) {
                if (req[r] < 0) continue;  // a free row computes on zeros; its output is not read
                ids[r] = pending[r];
                at[r] = pos[r];
                valid[r * capacity + slot] = 1;
                System.arraycopy(valid, r * capacity, mask, r * slots, slots);
            }
            Tensor logits = model.forwardAt(onDevice(ids, k, 1), onDevice(at, k, 1),
                    onDevice(mask, k, slots), view, slot);
            int[] index = new int[k];
            for (int r = 0; r < k; r++) index[r] = req[r] < 0 ? 0 : out[r].n;
            Sampler.Draw draw = Sampler.sample(Generator.allowed(logits.select(1, 0), cfg), cfg.sampling(),
                    uniforms(Arrays.copyOf(req, k), index));
            column++;
            if (column % capacity == 0) wrapped = true;
            for (int r = 0; r < k; r++) {
                if (req[r] < 0) continue;
                pos[r]++;
                accept(r, draw, r);
            }
        }
    }

    /** Row r's token from draw row i: kept, and the row finishes if it stops there. */
    private void accept(int r, Sampler.Draw draw, int i) {
        Generator.Row row = out[r];
        int tok = (int) draw.tokens()[i];
        row.add(tok, draw.logprobs()[i], req[r]);
        row.reason = Generator.stopReason(row, tok, cfg);
        if (row.reason == null) {
            pending[r] = tok;
            return;
        }
        done[req[r]] = row.completion();
        req[r] = -1;
        out[r] = null;
        Arrays.fill(valid, r * capacity, (r + 1) * capacity, 0);
        live--;
    }

    /** Rows of [0, k) still generating move into the free rows below {@code live}, keys, values and state. */
    private void compact(KvCache cache, int k) {
        int moves = 0;
        for (int r = live; r < k; r++) if (req[r] >= 0) moves++;
        long[] from = new long[moves], to = new long[moves];
        for (int r = live, hole = 0, m = 0; r < k; r++) {
            if (req[r] < 0) continue;
            while (req[hole] >= 0) hole++;
            from[m] = r;
            to[m++] = hole;
            moveState(r, hole);
        }
        int slots = wrapped ? capacity : (int) (column % capacity);
        cache.copyRows(cache, from, 0, slots, to, 0);
    }

    private void moveState(int from, int to) {
        req[to] = req[from];
        out[to] = out[from];
        pos[to] = pos[from];
        pending[to] = pending[from];
        System.arraycopy(valid, from * capacity, valid, to * capacity, capacity);
        req[from] = -1;
        out[from] = null;
        Arrays.fill(valid, from * capacity, (from + 1) * capacity, 0);
    }

    /**
     * The prefilled prompts of a group joining: a cache of their distinct prompts (its own, or
     * a view of the batch's first rows when prefilled in place), {@code span} slots of each, its
     * masks and last logits.
     */
    private record Prefill(KvCache cache, boolean inPlace, int span, long[] mask, long[] distinctOf, Tensor logits) {
    }

    /**
     * Prefills the prompts of requests {@code who}: each distinct prompt once, and a prefix that all
     * distinct prompts share (≥ MIN_SHARED_PREFIX tokens, short of the shortest) once, broadcast to
     * their rows before their suffixes are prefilled. Row d of the cache holds distinct prompt d as
     * [shared prefix | padding | suffix], its slots marked in {@code mask} [D × span]. With
     * {@code batch} (an empty batch) the distinct prompts go into its first rows.
     */
    private Prefill prefill(int[] who, KvCache batch) {
        Map<IntsKey, Integer> index = new HashMap<>();
        List<int[]> distinct = new ArrayList<>();
        long[] distinctOf = new long[who.length];
        for (int i = 0; i < who.length; i++) {
            int[] p = requests.get(who[i]).promptIds();
            promptTokens += p.length;
            Integer d = index.putIfAbsent(new IntsKey(p), distinct.size());
            if (d == null) {
                d = distinct.size();
                distinct.add(p);
            }
            distinctOf[i] = d;
        }
        int dn = distinct.size();
        int shortest = Integer.MAX_VALUE, lcp = Integer.MAX_VALUE;
        for (int[] p : distinct) {
            shortest = Math.min(shortest, p.length);
            lcp = Math.min(lcp, commonPrefix(distinct.get(0), p));
        }
        int shared = dn >= 2 && lcp >= MIN_SHARED_PREFIX ? Math.min(lcp, shortest - 1) : 0;
        int suffix = 0;
        for (int[] p : distinct) suffix = Math.max(suffix, p.length - shared);
        int span = shared + suffix;
        KvCache c = batch != null ? batch.firstRows(dn) : model.newCache(dn, span);
        c.setLength(0);
        try {
            if (shared > 0) {
                try (KvCache prefix = model.newCache(1, shared)) {
                    long[] ids = new long[shared], at = new long[shared], ones = new long[shared];
                    for (int j = 0; j < shared; j++) {
                        ids[j] = distinct.get(0)[j];
                        at[j] = j;
                        ones[j] = 1;
                    }
                    model.hidden(onDevice(ids, 1, shared), onDevice(at, 1, shared), onDevice(ones, 1, shared), prefix);
                    c.copyRows(prefix, new long[dn], 0, shared, iota(dn), 0);
                    c.setLength(shared);
                }
                prefills++;
                prefillTokens += shared;
            }
            long[] ids = new long[dn * suffix], at = new long[dn * suffix], mask = new long[dn * span];
            for (int d = 0; d < dn; d++) {
                int[] p = distinct.get(d);
                int pad = suffix - (p.length - shared);
                for (int j = 0; j < shared; j++) mask[d * span + j] = 1;
                for (int j = shared; j < p.length; j++) {
                    int col = pad + j - shared;
                    ids[d * suffix + col] = p[j];
                    at[d * suffix + col] = j;
                    mask[d * span + shared + col] = 1;
                }
                for (int col = 0; col < pad; col++) at[d * suffix + col] = 1;  // padding: never read
                prefillTokens += p.length - shared;
            }
            prefills++;
            Tensor h = model.hidden(onDevice(ids, dn, suffix), onDevice(at, dn, suffix), onDevice(mask, dn, span), c);
            Tensor logits = Generator.allowed(model.logits(h.narrow(1, suffix - 1, 1)).select(1, 0), cfg);
            return new Prefill(c, batch != null, span, mask, distinctOf, logits);
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    private double[] uniforms(int[] who, int[] tokenIndex) {
        double[] u = new double[who.length];
        for (int i = 0; i < who.length; i++) {
            u[i] = who[i] < 0 ? 0.5 : Sampler.uniform(cfg.seed(), requests.get(who[i]).stream(), tokenIndex[i]);
        }
        return u;
    }

    private Tensor onDevice(long[] a, long... shape) {
        return Generator.onDevice(model, a, shape);
    }

    private static long[] iota(int n) {
        long[] a = new long[n];
        for (int i = 0; i < n; i++) a[i] = i;
        return a;
    }

    private static int commonPrefix(int[] a, int[] b) {
        int n = Math.min(a.length, b.length), i = 0;
        while (i < n && a[i] == b[i]) i++;
        return i;
    }

    /** An int[] as a map key by content. */
    private record IntsKey(int[] a) {
        @Override
        public boolean equals(Object o) {
            return o instanceof IntsKey k && Arrays.equals(a, k.a);
        }

        @Override
        public int hashCode() {
            return Arrays.hashCode(a);
        }
    }
}
