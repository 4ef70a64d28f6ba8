// KvCacheTest.java — what continuous batching needs of the model and its KV cache: a token written
// at any slot (CausalLm.forwardAt) reads its row's keys wherever they lie, so a sequence whose
// keys were copied to other rows and to slots that wrap around the cache gives the logits of the
// plain decoding step; copyRows gathers rows (repeated, or within one cache), firstRows is a view
// that writes through; bad arguments are named.
package dev.drmas.model;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class KvCacheTest {
    static final int VOCAB = 53;

    @BeforeAll
    static void threads() {
        torch.set_num_threads(2);
    }

    static long[] ones(int n) {
        long[] a = new long[n];
        java.util.Arrays.fill(a, 1);
        return a;
    }

    static long[] iota(int from, int n) {
        long[] a = new long[n];
        for (int i = 0; i < n; i++) a[i] = from + i;
        return a;
    }

    static void assertClose(float[] want, float[] got, double tol, String what) {
        assertEquals(want.length, got.length, what);
        for (int i = 0; i < want.length; i++) {
            assertTrue(Math.abs(want[i] - got[i]) <= tol * (1 + Math.abs(want[i])), what + " [" + i + "]: " + want[i] + " vs " + got[i]);
        }
    }

    /** float32 takes the CPU decoding step, float64 the general layers (as on a GPU). */
    @ParameterizedTest
    @ValueSource(strings = {"float32", "float64"})
    void aTokenWrittenAnywhereReadsItsRowWhereverItsKeysLie(String dtype) {
        ScalarType st = dtype.equals("float32") ? ScalarType.Float : ScalarType.Double;
        int p = 7, cap = 12;
        long[] prompt = {4, 9, 1, 33, 17, 2, 40};
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.QWEN3, VOCAB), 5, st, new Device("cpu"));
             PointerScope scope = new PointerScope();
             KvCache plain = m.newCache(1, cap); KvCache ring = m.newCache(3, cap)) {
            m.hidden(Tensors.longs(prompt, 1, p), Tensors.longs(iota(0, p), 1, p), Tensors.longs(ones(p), 1, p), plain);
            // the reference: the next token decoded as the static engine does, at slot p
            Tensor next = Tensors.longs(new long[] {21}, 1, 1), at = Tensors.longs(new long[] {p}, 1, 1);
            float[] want = Tensors.toFloats(m.forward(next, at, Tensors.longs(ones(p + 1), 1, p + 1), plain).to(ScalarType.Float));
            // the same prompt's keys in row 2 of another cache at slots 9, 10, 11, 0, 1, 2, 3 (two pieces)
            ring.copyRows(plain, new long[] {0}, 0, 3, new long[] {2}, 9);
            ring.copyRows(plain, new long[] {0}, 3, 4, new long[] {2}, 0);
            long[] mask = new long[3 * cap];
            for (int s : new int[] {9, 10, 11, 0, 1, 2, 3}) mask[2 * cap + s] = 1;
            Tensor ids = Tensors.longs(new long[] {0, 0, 21}, 3, 1), pos = Tensors.longs(new long[] {0, 0, p}, 3, 1);
            Tensor got = m.forwardAt(ids, pos, Tensors.longs(mask, 3, cap), ring, 4).select(0, 2).to(ScalarType.Float);
            assertClose(want, Tensors.toFloats(got), 1e-4, dtype + " logits");
            // the token's own keys went to slot 4 of row 2: the row is the plain cache's, rotated
            Tensor a = plain.keys(0).select(0, 0).narrow(1, p, 1), b = ring.keys(0).select(0, 2).narrow(1, 4, 1);
            assertClose(Tensors.toFloats(a.to(ScalarType.Float).contiguous()), Tensors.toFloats(b.to(ScalarType.Float).contiguous()),
                    1e-5, "the written key");
            assertEquals(0, ring.length(), "forwardAt leaves the length as it is");
            // the same step from Java arrays (CausalLm.decodeAt: the engines' way), valid rows cap + 2 apart
            long[] wide = new long[3 * (cap + 2)];
            for (int r = 0; r < 3; r++) System.arraycopy(mask, r * cap, wide, r * (cap + 2), cap);
            Tensor arrays = m.decodeAt(new long[] {0, 0, 21}, new long[] {0, 0, p}, wide, cap + 2, cap, ring, 4);
            assertClose(want, Tensors.toFloats(arrays.select(0, 2).to(ScalarType.Float)), 1e-4, dtype + " logits from arrays");
            var e = assertThrows(IllegalArgumentException.class, () -> m.decodeAt(new long[] {0, 0, 21}, new long[] {0, 0, p}, wide, cap + 2,
                    cap, ring, cap));
            assertTrue(e.getMessage().contains("write slot 12 must lie in the 12 slots read"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.decodeAt(new long[] {0, 0, 21}, new long[] {0, 0, p},
                    new long[3 * cap - 1], cap, cap, ring, 4));
            assertTrue(e.getMessage().contains("must cover 3 rows"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.decodeAt(new long[] {0, 0}, new long[] {0, 0}, wide, cap + 2, cap, ring, 4));
            assertTrue(e.getMessage().contains("holds 3 rows"), e.getMessage());
        }
    }

    @ParameterizedTest
    @ValueSource(ints = {1, 2})
    void copyRowsGathersAndFirstRowsWritesThrough(int viewRows) {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.LLAMA, VOCAB), 6);
             PointerScope scope = new PointerScope(); KvCache c = m.newCache(4, 5)) {
            Tensor kv = c.keysAndValues(0);
            // row r, slot s of layer 0 holds 10 r + s
            for (int r = 0; r < 4; r++) {
                for (int s = 0; s < 5; s++) kv.select(1, r).select(2, s).fill_(new org.bytedeco.pytorch.Scalar(10.0 * r + s));
            }
            // rows 3 and 3 again, slots [1, 4), into rows 0 and 1 at slot 2 of the same cache
            c.copyRows(c, new long[] {3, 3}, 1, 3, new long[] {0, 1}, 2);
            for (int r : new int[] {0, 1}) {
                for (int s = 0; s < 5; s++) {
                    double want = s >= 2 ? 30 + s - 1 : 10 * r + s;
                    assertEquals(want, kv.select(1, r).select(2, s).select(0, 0).select(0, 0).select(0, 0).item_double(), "row " + r + " slot " + s);
                }
            }
            try (KvCache view = c.firstRows(viewRows)) {
                assertEquals(viewRows, view.batchSize());
                view.keysAndValues(0).select(1, viewRows - 1).fill_(new org.bytedeco.pytorch.Scalar(-1.0));
            }
            assertEquals(-1.0, kv.select(1, viewRows - 1).max().item_double(), "the view wrote into the cache");
            assertEquals(30.0, kv.select(1, 3).select(2, 0).max().item_double(), "and nowhere else");
            var e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {4}, 0, 1, new long[] {0}, 0));
            assertTrue(e.getMessage().contains("source row 4 of 4"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {0}, 3, 3, new long[] {1}, 0));
            assertTrue(e.getMessage().contains("slots [3, 6) of 5"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {0, 1}, 0, 1, new long[] {1}, 0));
            assertTrue(e.getMessage().contains("2 source rows but 1 destination rows"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> c.firstRows(5));
            assertTrue(e.getMessage().contains("first rows 5 of a KV cache of 4"), e.getMessage());
            e = assertThrows(IllegalArgumentException.class, () -> m.forwardAt(Tensors.longs(new long[] {1, 1, 1, 1}, 4, 1),
                    Tensors.longs(new long[4], 4, 1), Tensors.longs(new long[12], 4, 3), c, 3));
            assertTrue(e.getMessage().contains("write slot 3 must lie in the mask's 3 slots"), e.getMessage());
        }
    }

    // ================================================================== checks found untested (PIT review)

    @org.junit.jupiter.api.Test
    void cacheArgumentsAtTheirEdges() {
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.LLAMA, VOCAB), 6); PointerScope scope = new PointerScope()) {
            for (long[] bc : new long[][] {{0, 4}, {2, 0}, {-1, 4}}) {
                var e = assertThrows(IllegalArgumentException.class, () -> m.newCache(bc[0], bc[1]));
                assertEquals("KV cache needs batch > 0 and capacity > 0, got " + bc[0] + " and " + bc[1], e.getMessage());
            }
            try (KvCache one = m.newCache(1, 1); KvCache c = m.newCache(4, 5)) {
                assertEquals(1, one.capacity());
                assertEquals(1, one.batchSize());
                c.setLength(5);
                assertEquals(5, c.length());
                c.setLength(0);
                assertEquals(0, c.length());
                for (long n : new long[] {-1, 6}) {
                    var e = assertThrows(IllegalArgumentException.class, () -> c.setLength(n));
                    assertEquals("KV cache length " + n + " outside [0, 5]", e.getMessage());
                }
                try (KvCache all = c.firstRows(4)) {
                    assertEquals(4, all.batchSize());
                }
                var e = assertThrows(IllegalArgumentException.class, () -> c.firstRows(0));
                assertEquals("first rows 0 of a KV cache of 4", e.getMessage());
                // slot ranges may end at the capacity, at either end; not one past it
                c.copyRows(c, new long[] {0}, 2, 3, new long[] {1}, 2);
                e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {0}, 0, 3, new long[] {1}, 3));
                assertEquals("copyRows: slots [0, 3) of 5 to [3, 6) of 5", e.getMessage());
                c.copyRows(c, new long[] {0}, 5, 0, new long[] {1}, 5);  // no slots: nothing to do, even at the end
                e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {0}, 0, -1, new long[] {1}, 0));
                assertEquals("copyRows: slots [0, -1) of 5 to [0, -1) of 5", e.getMessage());
                e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {0}, 0, 1, new long[] {4}, 0));
                assertEquals("destination row 4 of 4", e.getMessage());
                e = assertThrows(IllegalArgumentException.class, () -> c.copyRows(c, new long[] {-1}, 0, 1, new long[] {0}, 0));
                assertEquals("source row -1 of 4", e.getMessage());
            }
        }
    }

    @org.junit.jupiter.api.Test
    void rowsSwappedWithinOneCache() {
        // every destination row is a source row too: the rows are gathered before any is written
        try (CausalLm m = CausalLm.random(ModelConfig.tiny(Family.LLAMA, VOCAB), 6);
             PointerScope scope = new PointerScope(); KvCache c = m.newCache(3, 4)) {
            int layers = m.config().numLayers();
            for (int l = 0; l < layers; l++) {
                for (int r = 0; r < 3; r++) {
                    for (int s = 0; s < 4; s++) {
                        c.keysAndValues(l).select(1, r).select(2, s).fill_(new org.bytedeco.pytorch.Scalar(100.0 * l + 10 * r + s));
                    }
                }
            }
            c.copyRows(c, new long[] {0, 1}, 1, 3, new long[] {1, 0}, 1);
            for (int l = 0; l < layers; l++) {
                for (int r = 0; r < 3; r++) {
                    for (int s = 0; s < 4; s++) {
                        int from = s == 0 || r == 2 ? r : 1 - r;
                        double want = 100.0 * l + 10 * from + s;
                        Tensor slot = c.keysAndValues(l).select(1, r).select(2, s);
                        assertEquals(want, slot.min().item_double(), "layer " + l + " row " + r + " slot " + s);
                        assertEquals(want, slot.max().item_double(), "layer " + l + " row " + r + " slot " + s);
                    }
                }
            }
        }
    }
}
