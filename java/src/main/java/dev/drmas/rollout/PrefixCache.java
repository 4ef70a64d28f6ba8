// PrefixCache.java — the keys and values of token sequences prefilled earlier, so that a prompt
// that starts with the same tokens copies them instead of computing them again (automatic prefix
// caching, as vLLM's): a task's N rollouts, the stems that a group's prompts share, and the later
// calls of a multi-turn workflow, whose prompts extend the earlier ones (the question, then the
// history). Each sequence is stored once, contiguous in a row of a store cache; entries are found
// by the hashes of their first k·BLOCK tokens.
package dev.drmas.rollout;

import dev.drmas.model.CausalLm;
import dev.drmas.model.KvCache;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Deque;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What is stored is only valid for the weights it was computed with: {@link #checkWeights()}
 * compares the model's {@link CausalLm#weightsVersion()} with the one the entries were made under
 * and forgets them all when it moved (an optimiser step, a checkpoint load); the engine calls it
 * at the start of every generate call. {@code budgetTokens} bounds the slots of the store caches
 * (0: no bound): the oldest go first, except those holding pinned entries (the stems of the group
 * being admitted, which its prompts are still to be copied from: the store may exceed its budget
 * by them until {@link #unpinAll()}). A full prompt is only read between its lookup and the copy
 * that follows, so evicting never disturbs a copy.
 */
final class PrefixCache implements AutoCloseable {
    /** Entries are indexed at multiples of this many tokens: a match is found to within this, then extended token by token. */
    static final int BLOCK = 16;
    /** Rows of a store cache. */
    static final int CHUNK_ROWS = 16;

    /** A stored sequence: its tokens' keys and values at slots [0, tokens.length) of row {@code row} of {@code chunk}. */
    record Entry(int[] tokens, Chunk chunk, int row) {
    }

    /** The longest stored prefix of a sequence: {@code length} tokens of {@code entry} (null and 0: none). */
    record Match(Entry entry, int length) {
        static final Match NONE = new Match(null, 0);
    }

    static final class Chunk {
        final KvCache cache;
        final List<Entry> entries = new ArrayList<>();
        final List<Long> keys = new ArrayList<>();
        boolean pinned;

        Chunk(KvCache cache) {
            this.cache = cache;
        }

        long slots() {
            return cache.batchSize() * cache.capacity();
        }
    }

    private final CausalLm model;
    private final long budgetTokens;
    private final boolean keepPrompts;
    private final Deque<Chunk> chunks = new ArrayDeque<>();  // oldest first
    // key(k, hash of the first k·BLOCK tokens) → the entries with them, oldest first (at most MAX_CANDIDATES)
    private final Map<Long, List<Entry>> index = new HashMap<>();
    /** Entries a block key keeps: the newest ones (a match is then extended along each of them). */
    static final int MAX_CANDIDATES = 64;
    private long version = Long.MIN_VALUE;
    private long slots;                                      // of all store caches

    /**
     * @param budgetTokens the most slots of its store caches, pinned ones aside; 0: no bound
     * @param keepPrompts  whether unpinned sequences (full prompts) are kept at all; false: only the
     *                     pinned stems of the group being admitted (a generate call's own cache)
     */
    PrefixCache(CausalLm model, long budgetTokens, boolean keepPrompts) {
        if (budgetTokens < 0) throw new IllegalArgumentException("prefix cache budget must be >= 0 (0 = no bound), got " + budgetTokens);
        this.model = model;
        this.budgetTokens = budgetTokens;
        this.keepPrompts = keepPrompts;
    }

    /** Forgets every entry if the model's weights changed since they were stored. */
    void checkWeights() {
        long v = model.weightsVersion();
        if (v != version) {
            clear();
            version = v;
        }
    }

    /** Entries stored. */
    int size() {
        int n = 0;
        for (Chunk c : chunks) n += c.entries.size();
        return n;
    }

    /** Slots of the store caches (what the budget bounds). */
    long slots() {
        return slots;
    }

    /** The store caches, oldest first (for tests: what the slots count, what eviction frees). */
    List<KvCache> storeCaches() {
        List<KvCache> out = new ArrayList<>();
        for (Chunk c : chunks) out.add(c.cache);
        return out;
    }

    /**
     * The longest stored prefix of {@code seq}, at most {@code max} tokens. The block index finds
     * the longest stored multiple of BLOCK by bisection (a stored sequence is indexed at every
     * block boundary, so the property is monotone), then the match is extended along each entry
     * with those blocks (by fewer than BLOCK tokens: a longer one would be indexed a block further).
     */
    Match longest(int[] seq, int max) {
        int limit = Math.min(seq.length, max), blocks = limit / BLOCK;
        if (blocks == 0 || index.isEmpty()) return Match.NONE;
        long[] h = blockHashes(seq, blocks);
        int lo = 0, hi = blocks;  // the longest verified k lies in [lo, hi]
        List<Entry> at = null;
        while (lo < hi) {
            int mid = (lo + hi + 1) >>> 1;
            List<Entry> es = index.get(key(mid, h[mid - 1]));
            if (es != null && samePrefix(es.get(es.size() - 1).tokens(), seq, mid * BLOCK)) {
                lo = mid;
                at = es;
            } else {
                hi = mid - 1;
            }
        }
        if (at == null) return Match.NONE;
        Entry best = null;
        int bestN = -1;
        for (int i = at.size() - 1; i >= 0; i--) {  // newest first
            Entry e = at.get(i);
            if (!samePrefix(e.tokens(), seq, lo * BLOCK)) continue;  // a hash collision
            int n = lo * BLOCK, end = Math.min(limit, e.tokens().length);
            while (n < end && e.tokens()[n] == seq[n]) n++;
            if (n > bestN) {
                bestN = n;
                best = e;
            }
        }
        return best == null ? Match.NONE : new Match(best, bestN);
    }

    /**
     * Stores {@code seqs}: sequence i's keys and values lie in row {@code rows[i]} of {@code src} in
     * pieces: {@code pieces[i][2j]} is the first slot of its piece j and {@code pieces[i][2j + 1]}
     * its length, in token order. Rows whose pieces are alike and whose store rows share a store
     * cache are copied together (one copy a piece, not a row). With {@code pin} their store caches
     * stay until {@link #unpinAll()}; else the oldest go until the budget holds. Nothing is stored
     * for a sequence already stored, nor (unpinned) for one longer than the budget or when only
     * pinned sequences are kept.
     */
    void addAll(boolean pin, List<int[]> seqs, KvCache src, long[] rows, long[][] pieces) {
        record Pending(Chunk chunk, int row, long srcRow, long[] pieces) {
        }
        List<Pending> pending = new ArrayList<>();
        java.util.Set<Chunk> touched = java.util.Collections.newSetFromMap(new java.util.IdentityHashMap<>());
        for (int i = 0; i < seqs.size(); i++) {
            int[] tokens = seqs.get(i);
            long total = 0;
            for (int j = 1; j < pieces[i].length; j += 2) total += pieces[i][j];
            if (total != tokens.length) throw new IllegalArgumentException("pieces of " + total + " slots for " + tokens.length + " tokens");
            if (!pin && (!keepPrompts || budgetTokens > 0 && tokens.length > budgetTokens)) continue;
            Match m = longest(tokens, tokens.length);
            if (m.entry() != null && m.length() == tokens.length && m.entry().tokens().length == tokens.length) {
                if (pin) m.entry().chunk().pinned = true;
                continue;
            }
            Chunk c = chunkFor(tokens.length);
            if (pin) c.pinned = true;
            touched.add(c);
            Entry e = new Entry(tokens.clone(), c, c.entries.size());
            c.entries.add(e);
            long[] h = blockHashes(tokens, tokens.length / BLOCK);
            for (int k = 1; k <= h.length; k++) {
                long key = key(k, h[k - 1]);
                List<Entry> es = index.computeIfAbsent(key, x -> new ArrayList<>());
                es.add(e);
                if (es.size() > MAX_CANDIDATES) es.remove(0);
                c.keys.add(key);
            }
            pending.add(new Pending(c, e.row(), rows[i], pieces[i]));
        }
        Map<List<Object>, List<Pending>> groups = new java.util.LinkedHashMap<>();
        for (Pending q : pending) {
            List<Object> key = new ArrayList<>();
            key.add(q.chunk());
            for (long x : q.pieces()) key.add(x);
            groups.computeIfAbsent(key, x -> new ArrayList<>()).add(q);
        }
        for (List<Pending> g : groups.values()) {
            long[] from = new long[g.size()], to = new long[g.size()];
            for (int j = 0; j < g.size(); j++) {
                from[j] = g.get(j).srcRow();
                to[j] = g.get(j).row();
            }
            long[] pc = g.get(0).pieces();
            long at = 0;
            for (int j = 0; j < pc.length; j += 2) {
                if (pc[j + 1] > 0) g.get(0).chunk().cache.copyRows(src, from, pc[j], pc[j + 1], to, at);
                at += pc[j + 1];
            }
        }
        evict(touched);
    }

    /** Unpins every store cache; then the oldest go until the budget holds. */
    void unpinAll() {
        for (Chunk c : chunks) c.pinned = false;
        evict(java.util.Set.of());
    }

    // the oldest unpinned store caches other than those just written go until the budget holds
    private void evict(java.util.Set<Chunk> keep) {
        if (!keepPrompts) {  // nothing but pinned stems is kept
            List<Chunk> loose = new ArrayList<>();
            for (Chunk c : chunks) if (!c.pinned && !keep.contains(c)) loose.add(c);
            for (Chunk c : loose) drop(c);
            return;
        }
        if (budgetTokens == 0) return;
        List<Chunk> victims = new ArrayList<>();
        long over = slots - budgetTokens;
        for (Chunk c : chunks) {
            if (over <= 0) break;
            if (c.pinned || keep.contains(c)) continue;
            victims.add(c);
            over -= c.slots();
        }
        for (Chunk c : victims) drop(c);
    }

    private void drop(Chunk c) {
        for (long k : c.keys) {
            List<Entry> es = index.get(k);
            if (es == null) continue;
            es.removeIf(e -> e.chunk() == c);
            if (es.isEmpty()) index.remove(k);
        }
        chunks.remove(c);
        slots -= c.slots();
        c.cache.close();
    }

    // the newest store cache with a free row as long as the sequence, or a new one (of fewer rows
    // where the budget is small, so that one store cache fits it)
    private Chunk chunkFor(int length) {
        Chunk last = chunks.peekLast();
        if (last != null && last.entries.size() < last.cache.batchSize() && last.cache.capacity() >= length) return last;
        long cap = Math.max(length, last == null ? length : last.cache.capacity());
        if (budgetTokens > 0 && cap > budgetTokens) cap = length;  // (a pinned stem may be longer than the budget)
        long rowsPer = budgetTokens == 0 || !keepPrompts ? CHUNK_ROWS : Math.max(1, Math.min(CHUNK_ROWS, budgetTokens / cap));
        Chunk c = new Chunk(model.newCache(rowsPer, cap));
        chunks.addLast(c);
        slots += c.slots();
        return c;
    }

    /** Forgets every entry and frees the store caches. */
    void clear() {
        for (Chunk c : chunks) c.cache.close();
        chunks.clear();
        index.clear();
        slots = 0;
    }

    @Override
    public void close() {
        clear();
    }

    private static boolean samePrefix(int[] a, int[] b, int n) {
        return a.length >= n && b.length >= n && Arrays.equals(a, 0, n, b, 0, n);
    }

    // h[k - 1]: a 64-bit hash of the first k·BLOCK tokens (FNV-1a, then a SplitMix finaliser per block)
    private static long[] blockHashes(int[] seq, int blocks) {
        long[] h = new long[blocks];
        long x = 0xcbf29ce484222325L;
        for (int k = 0; k < blocks; k++) {
            for (int j = k * BLOCK; j < (k + 1) * BLOCK; j++) x = (x ^ seq[j]) * 0x100000001b3L;
            long z = x + 0x9E3779B97F4A7C15L;
            z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
            z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
            h[k] = z ^ (z >>> 31);
        }
        return h;
    }

    private static long key(int blocks, long hash) {
        return hash * 31 + blocks;
    }
}
