// KeyIds.java — dense ids for the uid, traj and agent keys of `drmas normalize`, in order of first
// appearance: an open-addressing table over the keys' bytes (a kind byte, 's' string or 'i'
// integer, then the key), each optionally scoped by another id (a trajectory by its uid). The
// keys live in one byte array and the table in int arrays: a distinct key costs ~30 bytes plus
// its length and a row none, where a HashMap<String, Integer> costs ~100 bytes a key.
package dev.drmas.cli;

import java.util.Arrays;

final class KeyIds {
    /** The table's largest size: an int array's (2^31 slots is past it), so at most 2^29 keys at half load. */
    static final int MAX_SLOTS = 1 << 30;

    private final int maxSlots;
    private int[] slots = new int[1 << 10];  // id + 1, 0 = empty
    private int[] hashes = new int[256], scopes = new int[256], offsets = new int[256], lengths = new int[256];
    private byte[] store = new byte[1 << 12];
    private int used, size;
    // rows come grouped (a task's rollouts together, a trajectory's turns together): the last key is checked first
    private int last = -1;

    KeyIds() {
        this(MAX_SLOTS);
    }

    /** A table of at most {@code maxSlots} slots (a power of two, at least 1024; tests make it small). */
    KeyIds(int maxSlots) {
        if (Integer.bitCount(maxSlots) != 1 || maxSlots < slots.length || maxSlots > MAX_SLOTS) {
            throw new IllegalArgumentException("maxSlots " + maxSlots + " is not a power of two in [1024, 2^30]");
        }
        this.maxSlots = maxSlots;
    }

    int size() {
        return size;
    }

    /** Forgets every key, keeping the arrays (a block parser's table is reused for the next block). */
    void clear() {
        Arrays.fill(slots, 0);
        size = 0;
        used = 0;
        last = -1;
    }

    /** The id of key {@code kind, b[s, e)} within {@code scope} (-1: none), a new one if it is new. */
    int id(int scope, byte kind, byte[] b, int s, int e) {
        if (last >= 0 && same(last, scope, kind, b, s, e)) return last;
        int h = hash(scope, kind, b, s, e);
        int mask = slots.length - 1;
        for (int i = h & mask; ; i = (i + 1) & mask) {
            int v = slots[i];
            if (v == 0) {
                // (before anything grows: the arrays of 2^29 keys would take 16 GiB more first)
                if (size >= maxSlots / 2) {
                    throw new UserError("more than " + maxSlots / 2 + " distinct uid, traj or agent keys: too many to number in one run");
                }
                int id = add(h, scope, kind, b, s, e);
                slots[i] = id + 1;
                if (2 * size > slots.length) rehash();
                return last = id;
            }
            int id = v - 1;
            if (hashes[id] == h && same(id, scope, kind, b, s, e)) return last = id;
        }
    }

    /** The bytes that hold the keys: {@code id}'s is [keyStart(id), keyEnd(id)); valid until the next new key. */
    byte[] store() {
        return store;
    }

    int keyStart(int id) {
        return offsets[id] + 1;
    }

    int keyEnd(int id) {
        return offsets[id] + lengths[id];
    }

    int scope(int id) {
        return scopes[id];
    }

    /** The key of {@code id} without its kind byte. */
    byte[] key(int id) {
        return Arrays.copyOfRange(store, offsets[id] + 1, offsets[id] + lengths[id]);
    }

    /** The kind byte of {@code id}'s key ('s' or 'i'). */
    byte kind(int id) {
        return store[offsets[id]];
    }

    private boolean same(int id, int scope, byte kind, byte[] b, int s, int e) {
        int off = offsets[id], n = e - s;
        if (scopes[id] != scope || lengths[id] != n + 1 || store[off] != kind) return false;
        if (n > 16) return Arrays.equals(store, off + 1, off + 1 + n, b, s, e);
        // short keys (most are): a loop costs less than the call
        byte[] k = store;
        for (int i = 0; i < n; i++) if (k[off + 1 + i] != b[s + i]) return false;
        return true;
    }

    private int add(int h, int scope, byte kind, byte[] b, int s, int e) {
        if (size == hashes.length) {
            int n = size * 2;
            hashes = Arrays.copyOf(hashes, n);
            scopes = Arrays.copyOf(scopes, n);
            offsets = Arrays.copyOf(offsets, n);
            lengths = Arrays.copyOf(lengths, n);
        }
        int len = e - s + 1;
        if (used + len > store.length) {
            long want = Math.max((long) store.length * 2, (long) used + len);
            if (want > Integer.MAX_VALUE - 16) {
                throw new UserError("more than 2 GB of distinct uid, traj and agent keys: too many to number in one run");
            }
            store = Arrays.copyOf(store, (int) want);
        }
        store[used] = kind;
        System.arraycopy(b, s, store, used + 1, e - s);
        hashes[size] = h;
        scopes[size] = scope;
        offsets[size] = used;
        lengths[size] = len;
        used += len;
        return size++;
    }

    private void rehash() {
        int[] t = new int[slots.length * 2];
        int mask = t.length - 1;
        for (int id = 0; id < size; id++) {
            int i = hashes[id] & mask;
            while (t[i] != 0) i = (i + 1) & mask;
            t[i] = id + 1;
        }
        slots = t;
    }

    private static int hash(int scope, byte kind, byte[] b, int s, int e) {
        long h = (scope * 0x9E3779B97F4A7C15L) ^ kind;
        int i = s;
        for (; i + 8 <= e; i += 8) {
            h = (h ^ (long) LineReader.LONGS.get(b, i)) * 0xBF58476D1CE4E5B9L;
            h ^= h >>> 31;
        }
        for (; i < e; i++) h = (h ^ b[i]) * 0x100000001B3L;
        h ^= h >>> 33;
        h *= 0xFF51AFD7ED558CCDL;
        h ^= h >>> 33;
        return (int) h;
    }
}
