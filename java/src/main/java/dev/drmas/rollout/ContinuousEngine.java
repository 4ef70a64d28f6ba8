// ContinuousEngine.java — the rollout engine's continuous batching (Generator.Engine.CONTINUOUS):
// one KV cache per generate call, of the static engine's first-batch shape; requests join rows as
// earlier ones finish (within the token budget), each group of new requests prefilled from the
// prefix cache (what earlier calls and groups prefilled, and the stems the group's prompts share)
// and copied into its rows; once nothing waits, the rows still generating are moved to the front
// and only they are stepped. Same tokens as the static engine for the same seeds.
package dev.drmas.rollout;

import dev.drmas.model.CausalLm;
import dev.drmas.model.KvCache;
import dev.drmas.model.Scopes;
import java.util.ArrayList;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Comparator;
import java.util.Deque;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.InferenceMode;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch;
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
 * Prefill of the requests that join together: identical prompts (a task's N rollouts) once; a
 * prefix that several distinct prompts share (the workflows' system prompts, a task's question
 * followed by different histories), at least {@link #MIN_SHARED_PREFIX} tokens, once; and every
 * prompt from the longest prefix of it that the prefix cache holds ({@link PrefixCache}: kept
 * across calls when the generator keeps prefixes, so that a workflow's later turns start from
 * their earlier prompts). What is computed goes into the prefix cache; the rows' keys and values
 * are copied from there. Draws are keyed by (seed, stream, token index), as in the static engine,
 * so the tokens are the same up to floating-point summation order (the products' shapes differ).
 */
final class ContinuousEngine {
    /** The shortest common prefix of distinct prompts that is prefilled once (shorter: not worth a forward). */
    static final int MIN_SHARED_PREFIX = 16;
    /**
     * What a prefill forward's fixed cost (its calls, at small sizes; kernel launches on a GPU) is
     * worth in token slots, about: the buckets are cut to spend the fewest slots with this per
     * forward, and a stem must save this many tokens (its sharers less one, times its length
     * beyond what is computed already) to be worth a forward of its own.
     */
    static final int PREFILL_FORWARD_TOKENS = 256;

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
    private long prefills, prefillTokens, promptTokens, reusedTokens;
    /** The prompts prefilled so far: the generator's own (kept across calls), or this call's. */
    private final PrefixCache prefixes;
    private final boolean ownPrefixes;
    private final long prefillBound;          // slots of one prefill forward's cache
    private int admissions, compactions;

    /** @param prefixes the generator's prefix cache, kept across calls; null: one for this call alone */
    ContinuousEngine(CausalLm model, List<Request> requests, GenerationConfig cfg, long maxBatchTokens, PrefixCache prefixes) {
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
        // a cache of this call's own, when the generator keeps none, bounded by the batch's slots
        // a prefill forward's cache holds at most a quarter of the rows' prompts, or on the CPU all of
        // them within PREFILL_CACHE_BYTES (small models: fewer, larger prefill forwards); when the
        // generator keeps no prompts, this call's prefix cache holds the stems of the group being admitted
        long quarter = (long) Math.max(1, rows / 4) * longest;
        prefillBound = model.device().is_cpu()
                ? Math.max(quarter, Math.min((long) rows * longest, Generator.PREFILL_CACHE_BYTES / slotBytes(model))) : quarter;
        this.ownPrefixes = prefixes == null;
        this.prefixes = prefixes != null ? prefixes : new PrefixCache(model, 0, false);
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
        return new Generator.Stats(promptTokens, prefillTokens, reusedTokens, prefills, admissions, compactions, wrapped);
    }

    List<Completion> run() {
        try {
            return runBatch();
        } finally {
            if (ownPrefixes) prefixes.close();
        }
    }

    private List<Completion> runBatch() {
        prefixes.checkWeights();
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

    /**
     * Requests into the free rows, as many as there are (all when nothing is generating), prefilled
     * together: each request's prompt ends just before the column (an empty batch starts its column
     * after the group's longest prompt), and its first token is drawn.
     */
    private void admit(KvCache cache) {
        int k = Math.min(rows - live, order.length - next);
        // beside a running batch at most a quarter of the rows join at a time
        if (live > 0) k = Math.min(k, Math.max(1, rows / 4));
        admissions++;
        int[] who = new int[k];
        for (int i = 0; i < k; i++) who[i] = order[next + i];
        next += k;
        try (PointerScope scope = new PointerScope()) {
            Map<IntsKey, Integer> index = new HashMap<>();
            List<int[]> distinct = new ArrayList<>();
            long[] distinctOf = new long[k];
            int longest = 0;
            for (int i = 0; i < k; i++) {
                int[] p = requests.get(who[i]).promptIds();
                promptTokens += p.length;
                longest = Math.max(longest, p.length);
                Integer d = index.putIfAbsent(new IntsKey(p), distinct.size());
                if (d == null) {
                    d = distinct.size();
                    distinct.add(p);
                }
                distinctOf[i] = d;
            }
            if (live == 0) {
                column = longest;
                wrapped = false;
            }
            long[] dst = new long[k];
            for (int r = 0, i = 0; i < k; r++) if (req[r] < 0) dst[i++] = r;
            List<List<Long>> rowsOf = new ArrayList<>();
            for (int d = 0; d < distinct.size(); d++) rowsOf.add(new ArrayList<>());
            for (int i = 0; i < k; i++) rowsOf.get((int) distinctOf[i]).add(dst[i]);
            Tensor logits;
            try {
                prefillStems(distinct);
                logits = compute(distinct, rowsOf, cache);
            } finally {
                prefixes.unpinAll();  // the stems were needed by this group only
            }
            Tensor last = logits.index_select(0, onDevice(distinctOf, k));
            Sampler.Draw draw = Sampler.sample(last, cfg.sampling(), uniforms(who, new int[k]));
            for (int i = 0; i < k; i++) {
                int r = (int) dst[i];
                int len = requests.get(who[i]).promptIds().length;
                Arrays.fill(valid, r * capacity, (r + 1) * capacity, 0);
                for (int j = 1; j <= len; j++) valid[(int) (r * (long) capacity + Math.floorMod(column - j, (long) capacity))] = 1;
                req[r] = who[i];
                out[r] = new Generator.Row(maxNew);
                pos[r] = len;
                live++;
                accept(r, draw, i);
            }
        }
    }

    /** One token for every row of {@code view}: fed at the column's slot, the next one drawn. */
    private void step(KvCache view) {
        int k = (int) view.batchSize();
        int slot = (int) (column % capacity);
        int slots = wrapped ? capacity : slot + 1;
        try (PointerScope scope = new PointerScope()) {
            long[] ids = new long[k], at = new long[k];
            for (int r = 0; r < k; r++) {
                if (req[r] < 0) continue;  // a free row computes on zeros; its output is not read
                ids[r] = pending[r];
                at[r] = pos[r];
                valid[r * capacity + slot] = 1;
            }
            int[] index = new int[k];
            for (int r = 0; r < k; r++) index[r] = req[r] < 0 ? 0 : out[r].n;
            double[] u = uniforms(Arrays.copyOf(req, k), index);
            // on a GPU the uniforms go with the step's inputs (one copy); greedy draws need none. The
            // rows are ring segments ending at the column by construction (the class comment), so
            // the mask is made on the device without checking all of valid each step
            CausalLm.Decoded step = model.decodeRing(ids, at, valid, capacity, slots, view, slot, cfg.sampling().greedy() ? null : u);
            Sampler.Draw draw = Sampler.sample(Generator.allowed(step.logits().select(1, 0), cfg), cfg.sampling(), u, step.uniforms());
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
     * The stems of {@code seqs} into the prefix cache (pinned until the admission ends): the
     * prefixes that several distinct prompts share (the workflows' system prompts; a task's question
     * before different histories), each computed once and then copied instead of computed per
     * prompt. In two rounds at most, so that a stem inside another copies it: the outermost first.
     */
    private void prefillStems(List<int[]> seqs) {
        List<int[]> stems = stems(seqs);
        if (stems.isEmpty()) return;
        List<int[]> outer = new ArrayList<>(), inner = new ArrayList<>();
        for (int[] st : stems) {
            boolean inside = false;
            for (int[] o : stems) inside |= o.length < st.length && Arrays.equals(o, 0, o.length, st, 0, o.length);
            (inside ? inner : outer).add(st);
        }
        compute(outer, null, null);
        if (!inner.isEmpty()) compute(inner, null, null);
    }

    /**
     * The stems worth computing for {@code seqs}: the nodes of their prefix tree (the lcp intervals
     * of the sorted sequences: a prefix of depth d that c ≥ 2 of them share, and one more token of
     * theirs differs), each kept short of its sequences' last tokens, when computing it once saves
     * at least PREFILL_FORWARD_TOKENS tokens: (c − 1) × (d − what is computed already: its parent node's
     * depth, or what the prefix cache holds of it), of at least MIN_SHARED_PREFIX tokens.
     */
    private List<int[]> stems(List<int[]> seqs) {
        int n = seqs.size();
        if (n < 2) return List.of();
        Integer[] sorted = new Integer[n];
        for (int i = 0; i < n; i++) sorted[i] = i;
        Arrays.sort(sorted, (a, b) -> Arrays.compare(seqs.get(a), seqs.get(b)));
        int[] lcp = new int[n];  // lcp[i]: of sorted i - 1 and i, short of both last tokens
        for (int i = 1; i < n; i++) {
            int[] x = seqs.get(sorted[i - 1]), y = seqs.get(sorted[i]);
            lcp[i] = Math.min(commonPrefix(x, y), Math.min(x.length, y.length) - 1);
        }
        List<int[]> out = new ArrayList<>();
        // the lcp intervals by a stack of (depth, first sequence); an interval ends where the lcp drops below its depth
        Deque<int[]> stack = new ArrayDeque<>();
        stack.push(new int[] {0, 0});
        for (int i = 1; i <= n; i++) {
            int cur = i < n ? lcp[i] : 0, lb = i - 1;
            while (cur < stack.peek()[0]) {
                int[] node = stack.pop();
                int parent = Math.max(cur, stack.peek()[0]);
                int[] seq = seqs.get(sorted[node[1]]);
                int depth = node[0], count = i - node[1];
                int base = Math.max(parent, prefixes.longest(seq, depth).length());
                if (depth - base >= MIN_SHARED_PREFIX && (long) (count - 1) * (depth - base) >= PREFILL_FORWARD_TOKENS) {
                    out.add(Arrays.copyOf(seq, depth));
                }
                lb = node[1];
            }
            if (cur > stack.peek()[0]) stack.push(new int[] {cur, lb});
        }
        return out;
    }

    /**
     * Computes {@code seqs} from the longest prefix of each that the prefix cache holds, and puts
     * them into it. With {@code rowsOf} (the distinct prompts of a group: each one's rows of
     * {@code batch}) each sequence is computed up to its last token, its keys and values are copied
     * into its rows, ending just before the column, and the last tokens' logits are returned (in
     * sequence order); else (stems) nothing is returned. The rest of each sequence is prefilled in
     * buckets of like length, so that little goes to padding and a bucket's cache stays within a
     * quarter of the batch's rows of prompts.
     */
    private Tensor compute(List<int[]> seqs, List<List<Long>> rowsOf, KvCache batch) {
        boolean group = rowsOf != null;
        int n = seqs.size();
        int[] rest = new int[n], cached = new int[n];
        List<Integer> todo = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            int[] p = seqs.get(i);
            cached[i] = prefixes.longest(p, group ? p.length - 1 : p.length).length();
            rest[i] = p.length - cached[i];
            if (rest[i] > 0) todo.add(i);
        }
        todo.sort(Comparator.comparingInt((Integer i) -> -rest[i]));  // longest rest first, stable
        List<Tensor> logits = new ArrayList<>();
        long[] position = new long[n];  // where sequence i's logits are in the concatenation of the buckets'
        int done = 0;
        int[] ends = buckets(todo, rest, cached);
        for (int s = 0, b = 0; b < ends.length; s = ends[b++]) {
            List<Integer> bucket = todo.subList(s, ends[b]);
            Tensor l = bucket(seqs, bucket, group, rowsOf, batch);
            if (l != null) logits.add(l);
            for (int i : bucket) position[i] = done++;
        }
        if (!group) return null;
        Tensor cat = logits.size() == 1 ? logits.get(0) : torch.cat(new TensorVector(logits.toArray(new Tensor[0])), 0);
        return cat.index_select(0, onDevice(position, n));
    }

    /**
     * The cheapest cut of {@code todo} (longest rest first) into buckets of consecutive sequences,
     * a bucket costing a forward's fixed PREFILL_FORWARD_TOKENS plus its rows × its longest rest
     * (padding included), none holding more than prefillBound slots (rows × (longest stored prefix
     * + longest rest)): by dynamic programming over the cut points. Returns each bucket's end.
     */
    private int[] buckets(List<Integer> todo, int[] rest, int[] cached) {
        int n = todo.size();
        long[] cost = new long[n + 1];
        int[] from = new int[n + 1];
        for (int j = 1; j <= n; j++) {
            cost[j] = Long.MAX_VALUE;
            int p = 0;
            for (int i = j - 1; i >= 0; i--) {  // bucket [i, j): its longest rest is todo[i]'s
                p = Math.max(p, cached[todo.get(i)]);
                long t = rest[todo.get(i)], rows = j - i;
                if (rows > 1 && rows * (p + t) > prefillBound) break;
                long c = cost[i] + PREFILL_FORWARD_TOKENS + rows * t;
                if (c < cost[j]) {
                    cost[j] = c;
                    from[j] = i;
                }
            }
        }
        List<Integer> ends = new ArrayList<>();
        for (int j = n; j > 0; j = from[j]) ends.add(0, j);
        return ends.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * One prefill forward: the sequences {@code bucket} in a cache of P + T slots, row b holding the
     * stored prefix of its sequence (looked up again now: an earlier bucket's entries may have sent
     * older ones out of the prefix cache) just before slot P and its rest, left-padded, in [P, P +
     * T). Each row then goes into the prefix cache and, for a group, into its batch rows. Returns
     * the last tokens' logits (or null), in the caller's scope: nothing else of the forward outlives it.
     */
    private Tensor bucket(List<int[]> seqs, List<Integer> bucket, boolean group, List<List<Long>> rowsOf, KvCache batch) {
        int nb = bucket.size();
        PrefixCache.Match[] from = new PrefixCache.Match[nb];
        int[] rest = new int[nb];
        int p = 0, t = 0;
        for (int b = 0; b < nb; b++) {
            int[] q = seqs.get(bucket.get(b));
            from[b] = prefixes.longest(q, group ? q.length - 1 : q.length);
            rest[b] = q.length - from[b].length();
            p = Math.max(p, from[b].length());
            t = Math.max(t, rest[b]);
        }
        int span = p + t;
        Tensor logits = null;
        // A scope of the bucket's own: its hidden states [nb, T, hidden] and the forward's inputs go
        // once its rows are placed and stored; only the last tokens' logits outlive it (the caller's
        // scope held every bucket's hidden states until the admission ended, beside the next forward).
        try (PointerScope scope = new PointerScope(); KvCache c = model.newCache(nb, span)) {
            // the stored prefixes in, one copy per store cache and length
            Map<CopyKey, List<Integer>> copies = new LinkedHashMap<>();
            for (int b = 0; b < nb; b++) {
                if (from[b].length() > 0) copies.computeIfAbsent(new CopyKey(from[b].entry().chunk(), from[b].length(), 0), x -> new ArrayList<>()).add(b);
            }
            for (Map.Entry<CopyKey, List<Integer>> cp : copies.entrySet()) {
                List<Integer> bs = cp.getValue();
                long[] src = new long[bs.size()], to = new long[bs.size()];
                for (int j = 0; j < bs.size(); j++) {
                    src[j] = from[bs.get(j)].entry().row();
                    to[j] = bs.get(j);
                }
                int len = cp.getKey().cached();
                c.copyRows(cp.getKey().chunk().cache, src, 0, len, to, p - len);
                reusedTokens += (long) len * bs.size();
            }
            c.setLength(p);
            long[] ids = new long[nb * t], at = new long[nb * t], mask = new long[nb * span];
            for (int b = 0; b < nb; b++) {
                int[] q = seqs.get(bucket.get(b));
                int have = from[b].length(), pad = t - rest[b];
                for (int j = 0; j < have; j++) mask[b * span + p - have + j] = 1;
                for (int col = 0; col < pad; col++) at[b * t + col] = 1;  // padding: never read
                for (int j = 0; j < rest[b]; j++) {
                    ids[b * t + pad + j] = q[have + j];
                    at[b * t + pad + j] = have + j;
                    mask[b * span + p + pad + j] = 1;
                }
                prefillTokens += rest[b];
            }
            prefills++;
            Tensor h = model.hidden(onDevice(ids, nb, t), onDevice(at, nb, t), onDevice(mask, nb, span), c);
            if (group) logits = Scopes.retain(Generator.allowed(model.logits(h.narrow(1, t - 1, 1)).select(1, 0), cfg));
            if (group) place(c, p, t, bucket, from, rest, rowsOf, batch);
            List<int[]> stored = new ArrayList<>(nb);
            long[] srcRows = new long[nb];
            long[][] pieces = new long[nb][];
            for (int b = 0; b < nb; b++) {
                int have = from[b].length();
                stored.add(seqs.get(bucket.get(b)));
                srcRows[b] = b;
                pieces[b] = new long[] {p - have, have, p + t - rest[b], rest[b]};
            }
            prefixes.addAll(!group, stored, c, srcRows, pieces);  // stems pinned for the admission
        } catch (RuntimeException | Error e) {
            if (logits != null) logits.releaseReference();
            throw e;
        }
        return logits == null ? null : Scopes.adopt(logits);
    }

    /**
     * The bucket's rows into their batch rows: row b's prefix piece [P − cached, P) and rest piece
     * [P + T − rest, P + T) to the slots [column − length, column) (round the cache where they wrap);
     * one copy per (cached, rest) pair and piece.
     */
    private void place(KvCache c, int p, int t, List<Integer> bucket, PrefixCache.Match[] from, int[] rest, List<List<Long>> rowsOf,
                       KvCache batch) {
        Map<CopyKey, List<Integer>> pieces = new LinkedHashMap<>();
        for (int b = 0; b < bucket.size(); b++) pieces.computeIfAbsent(new CopyKey(null, from[b].length(), rest[b]), x -> new ArrayList<>()).add(b);
        for (Map.Entry<CopyKey, List<Integer>> e : pieces.entrySet()) {
            int have = e.getKey().cached(), more = e.getKey().rest(), len = have + more;
            List<Long> src = new ArrayList<>(), to = new ArrayList<>();
            for (int b : e.getValue()) {
                for (long r : rowsOf.get(bucket.get(b))) {
                    src.add((long) b);
                    to.add(r);
                }
            }
            long[] s = src.stream().mapToLong(Long::longValue).toArray(), d = to.stream().mapToLong(Long::longValue).toArray();
            copyRound(batch, c, s, p - have, have, d, column - len);
            copyRound(batch, c, s, p + t - more, more, d, column - more);
        }
    }

    // slots [from, from + len) of rows src of c into rows dst of the batch from slot `at` on, modulo its capacity
    private void copyRound(KvCache batch, KvCache c, long[] src, long from, long len, long[] dst, long at) {
        if (len == 0) return;
        long start = Math.floorMod(at, (long) capacity), first = Math.min(len, capacity - start);
        batch.copyRows(c, src, from, first, dst, start);
        if (first < len) batch.copyRows(c, src, from + first, len - first, dst, 0);
    }

    /** A store cache (or none) and the lengths of a copy's pieces, as a grouping key. */
    private record CopyKey(PrefixCache.Chunk chunk, int cached, int rest) {
    }

    /** Bytes of one token slot of a KV cache of {@code model}: keys and values of every layer. */
    static long slotBytes(CausalLm model) {
        var c = model.config();
        long b = switch (model.dtype()) {
            case Double, Long -> 8;
            case BFloat16, Half -> 2;
            default -> 4;
        };
        return 2L * c.numLayers() * c.numKvHeads() * c.headDim() * b;
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
