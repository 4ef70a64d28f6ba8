// KeyIdsTest.java — the key table of `drmas normalize`'s JSONL reader: dense ids in order of first
// appearance, keys of another kind or scope apart, ids that survive the table's growth, and a table
// that cannot grow further is a clear error, not a NegativeArraySizeException (the table's int
// arrays end at 2^30 slots, 2^29 keys; a small limit here stands for it).
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class KeyIdsTest {
    private static int id(KeyIds k, int scope, char kind, String key) {
        byte[] b = ("xx" + key + "y").getBytes(StandardCharsets.UTF_8);
        return k.id(scope, (byte) kind, b, 2, b.length - 1);
    }

    @Test
    void idsAreDenseInOrderOfFirstAppearanceAndSurviveGrowth() {
        KeyIds k = new KeyIds();
        int n = 5000;  // past the first table of 1024 slots, several times
        for (int i = 0; i < n; i++) assertEquals(i, id(k, -1, 's', "task-" + i));
        for (int i = n; i-- > 0; ) assertEquals(i, id(k, -1, 's', "task-" + i), "task-" + i + " after the table grew");
        assertEquals(n, k.size());
        assertEquals(n, id(k, -1, 'i', "task-7"), "an integer key is not the string of the same text");
        assertEquals(n + 1, id(k, 3, 's', "task-7"), "a key in another scope is another key");
        assertEquals(n + 1, id(k, 3, 's', "task-7"));
        assertArrayEquals("task-7".getBytes(StandardCharsets.UTF_8), k.key(n + 1));
        assertEquals('s', k.kind(n + 1));
        assertEquals(3, k.scope(n + 1));
    }

    @Test
    void aTableThatCannotGrowIsAClearError() {
        KeyIds k = new KeyIds(2048);  // 1024 keys at most at half load
        for (int i = 0; i < 1024; i++) id(k, -1, 's', "u" + i);
        UserError e = assertThrows(UserError.class, () -> id(k, -1, 's', "u1024"));
        assertTrue(e.getMessage().contains("more than 1024 distinct uid, traj or agent keys"), e.getMessage());
        assertEquals(1024, k.size(), "refused before it was added");
        assertThrows(IllegalArgumentException.class, () -> new KeyIds(3000));
        assertEquals(1 << 29, KeyIds.MAX_SLOTS / 2, "the default limit: 2^29 keys");
    }
}
