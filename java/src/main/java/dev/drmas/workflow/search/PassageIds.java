// PassageIds.java — the passage ids a corpus has used so far, for CorpusFile's duplicate check.
// A corpus holds tens of millions of passages (Search-R1's wiki-18: 21M), where a map from id to
// line costs about a hundred bytes an id; this keeps only a 64-bit hash of each id, in an
// open-addressed table of longs (8–21 bytes an id). A hash seen before is a suspect, not a
// verdict: the caller confirms it against the file, so two ids that share a hash are not refused.
package dev.drmas.workflow.search;

import java.util.function.ToLongFunction;

final class PassageIds {
    private static final int MAX_SLOTS = 1 << 30;  // a long[] of 2^30 (8 GiB): ~800M ids at the load below

    private final ToLongFunction<String> hash;
    private long[] slots = new long[1 << 10];  // 0: empty (a hash of 0 is stored as 1)
    private long size;

    PassageIds() {
        this(PassageIds::hash64);
    }

    /** With another hash: for tests that need ids that share one. */
    PassageIds(ToLongFunction<String> hash) {
        this.hash = hash;
    }

    /**
     * Adds {@code id}'s hash. Returns false when the hash was there already: the id may have been
     * used before (or shares its hash with one that was), which the caller settles.
     */
    boolean add(String id) {
        long h = hash.applyAsLong(id);
        if (h == 0) h = 1;
        if (size + 1 > (long) slots.length * 3 / 4) grow();
        int mask = slots.length - 1;
        for (int i = spread(h) & mask; ; i = (i + 1) & mask) {
            if (slots[i] == h) return false;
            if (slots[i] == 0) {
                slots[i] = h;
                size++;
                return true;
            }
        }
    }

    private void grow() {
        if (slots.length >= MAX_SLOTS) {
            throw new IllegalStateException("a corpus of more than " + size + " passages: more than drmas's duplicate-id check holds");
        }
        long[] old = slots;
        slots = new long[old.length * 2];
        int mask = slots.length - 1;
        for (long h : old) {
            if (h == 0) continue;
            int i = spread(h) & mask;
            while (slots[i] != 0) i = (i + 1) & mask;
            slots[i] = h;
        }
    }

    // the slot from the hash's high bits: the low bits are what the table compares
    private static int spread(long h) {
        return (int) (h >>> 32) ^ (int) h * 0x9E3779B9;
    }

    /** FNV-1a over the UTF-16 units, then a 64-bit finaliser (Murmur3's) so that near ids part in every bit. */
    static long hash64(String s) {
        long h = 0xcbf29ce484222325L;
        for (int i = 0; i < s.length(); i++) h = (h ^ s.charAt(i)) * 0x100000001b3L;
        h ^= s.length();
        h ^= h >>> 33;
        h *= 0xff51afd7ed558ccdL;
        h ^= h >>> 33;
        h *= 0xc4ceb9fe1a85ec53L;
        return h ^ (h >>> 33);
    }
}
