// LmHeadAsyncKernelsTest.java — Kernels.lmheadChunkAsync (drmas_lmhead_chunk_async_f32/_bf16: host
// copy of the offsets, data errors into an errors array instead of a wait on CUDA) on the CPU backend:
// chunk by chunk the bits of lmheadChunk, the errors set to UINT64_MAX (-1L), bad host offsets and a
// bad target refused with the plain op's messages (the CPU reports data errors at once), and the
// arguments the async form adds checked by name. Its CUDA side runs in native/test/test_cuda.cpp
// (the emulated backend: the same bits as the plain op, and no wait for the device).
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.MemorySegment;
import org.junit.jupiter.api.Test;

class LmHeadAsyncKernelsTest {
    static MemorySegment seg(float[] a) {
        return MemorySegment.ofArray(a);
    }

    @Test
    void theAsyncChunkGivesThePlainChunksBits() {
        LmHeadKernelsTest.Batch b = LmHeadKernelsTest.batch(29, 53, 11);
        int t = b.t(), v = b.v();
        for (boolean bf16 : new boolean[] {false, true}) {
            short[] zb = LmHeadKernelsTest.toBf16(b.z());
            float[] zf1 = b.z().clone(), zf2 = b.z().clone();
            short[] zb1 = zb.clone(), zb2 = zb.clone();
            float[] lp1 = new float[t], lp2 = new float[t], e1 = new float[t], e2 = new float[t];
            for (int c0 = 0; c0 < t; c0 += 8) {
                int n = Math.min(8, t - c0);
                double[] s1 = new double[AbiIndices.LMHEAD_SUMS], s2 = new double[AbiIndices.LMHEAD_SUMS];
                long[] errors = {5, 5};
                MemorySegment z1 = bf16 ? MemorySegment.ofArray(zb1).asSlice(2L * c0 * v) : MemorySegment.ofArray(zf1).asSlice(4L * c0 * v);
                MemorySegment z2 = bf16 ? MemorySegment.ofArray(zb2).asSlice(2L * c0 * v) : MemorySegment.ofArray(zf2).asSlice(4L * c0 * v);
                MemorySegment l1 = seg(lp1).asSlice(4L * c0), l2 = seg(lp2).asSlice(4L * c0);
                MemorySegment h1 = seg(e1).asSlice(4L * c0), h2 = seg(e2).asSlice(4L * c0);
                if (bf16) {
                    Kernels.lmheadChunkBf16(Backend.CPU, LmHeadKernelsTest.PARAMS, 4, MemorySegment.ofArray(b.off()), t, c0, n, v, z1,
                            MemorySegment.ofArray(b.y()), seg(b.old()), seg(b.adv()), seg(b.ref()), MemorySegment.ofArray(b.mask()), l1, h1,
                            MemorySegment.ofArray(s1), null);
                } else {
                    Kernels.lmheadChunk(Backend.CPU, LmHeadKernelsTest.PARAMS, 4, MemorySegment.ofArray(b.off()), t, c0, n, v, z1,
                            MemorySegment.ofArray(b.y()), seg(b.old()), seg(b.adv()), seg(b.ref()), MemorySegment.ofArray(b.mask()), l1, h1,
                            MemorySegment.ofArray(s1), null);
                }
                Kernels.lmheadChunkAsync(Backend.CPU, bf16, LmHeadKernelsTest.PARAMS, 4, MemorySegment.ofArray(b.off()),
                        MemorySegment.ofArray(b.off()), t, c0, n, v, z2, MemorySegment.ofArray(b.y()), seg(b.old()), seg(b.adv()),
                        seg(b.ref()), MemorySegment.ofArray(b.mask()), l2, h2, MemorySegment.ofArray(s2), MemorySegment.ofArray(errors), null);
                assertArrayEquals(s1, s2, "sums of the chunk at " + c0);
                assertArrayEquals(new long[] {-1L, -1L}, errors, "errors of the chunk at " + c0);
            }
            assertArrayEquals(lp1, lp2, "log-probs");
            assertArrayEquals(e1, e2, "entropies");
            if (bf16) assertArrayEquals(zb1, zb2, "dL/dz");
            else assertArrayEquals(zf1, zf2, "dL/dz");
        }
    }

    @Test
    void theAsyncLogprobsGiveThePlainOnesBits() {
        LmHeadKernelsTest.Batch b = LmHeadKernelsTest.batch(17, 41, 3);
        int t = b.t(), v = b.v();
        long[] y = b.y().clone();
        for (int i = 0; i < t; i++) y[i] = Math.floorMod(y[i], v);
        for (boolean bf16 : new boolean[] {false, true}) {
            MemorySegment z = bf16 ? MemorySegment.ofArray(LmHeadKernelsTest.toBf16(b.z())) : MemorySegment.ofArray(b.z());
            float[] lp1 = new float[t], lp2 = new float[t], e1 = new float[t], e2 = new float[t];
            long[] errors = {5, 5};
            if (bf16) Kernels.lmheadLogprobsBf16(Backend.CPU, t, v, z, MemorySegment.ofArray(y), seg(lp1), seg(e1), null);
            else Kernels.lmheadLogprobs(Backend.CPU, t, v, z, MemorySegment.ofArray(y), seg(lp1), seg(e1), null);
            Kernels.lmheadLogprobsAsync(Backend.CPU, bf16, t, v, z, MemorySegment.ofArray(y), seg(lp2), seg(e2), MemorySegment.ofArray(errors),
                    null);
            assertArrayEquals(lp1, lp2, "log-probs");
            assertArrayEquals(e1, e2, "entropies");
            assertArrayEquals(new long[] {-1L, -1L}, errors);
            long[] bad = y.clone();
            bad[3] = v;
            DrmasException e = assertThrows(DrmasException.class, () -> Kernels.lmheadLogprobsAsync(Backend.CPU, bf16, t, v, z,
                    MemorySegment.ofArray(bad), seg(lp2), null, MemorySegment.ofArray(new long[2]), null));
            assertTrue(e.getMessage().contains("targets[3] = 41"), e.getMessage());
        }
    }

    @Test
    void badHostOffsetsTargetsAndArgumentsAreNamed() {
        LmHeadKernelsTest.Batch b = LmHeadKernelsTest.batch(12, 37, 6);
        int t = b.t(), v = b.v();
        long[] bad = b.off().clone();
        bad[4] = 40;
        DrmasException e = assertThrows(DrmasException.class, () -> call(b, bad, b.y(), new long[2]));
        assertTrue(e.getMessage().contains("drmas_lmhead_chunk_async_f32: row_offsets[4] = 40 is past num_tokens = 12"), e.getMessage());
        long[] y = b.y().clone();
        y[5] = v;
        DrmasException f = assertThrows(DrmasException.class, () -> call(b, b.off(), y, new long[2]));
        assertTrue(f.getMessage().contains("targets[5] = 37"), f.getMessage());
        IllegalArgumentException g = assertThrows(IllegalArgumentException.class, () -> call(b, b.off(), b.y(), new long[1]));
        assertTrue(g.getMessage().contains("errors"), g.getMessage());
        IllegalArgumentException h = assertThrows(IllegalArgumentException.class, () -> call(b, new long[] {1, 3}, b.y(), new long[2]));
        assertTrue(h.getMessage().contains("host_row_offsets"), h.getMessage());
    }

    private static void call(LmHeadKernelsTest.Batch b, long[] hostOff, long[] y, long[] errors) {
        int t = b.t(), v = b.v();
        Kernels.lmheadChunkAsync(Backend.CPU, false, LmHeadKernelsTest.PARAMS, 4, MemorySegment.ofArray(hostOff),
                MemorySegment.ofArray(hostOff.length == 5 ? hostOff : b.off()), t, 0, t, v, MemorySegment.ofArray(b.z().clone()),
                MemorySegment.ofArray(y), seg(b.old()), seg(b.adv()), seg(b.ref()), MemorySegment.ofArray(b.mask()), seg(new float[t]),
                seg(new float[t]), MemorySegment.ofArray(new double[AbiIndices.LMHEAD_SUMS]), MemorySegment.ofArray(errors), null);
    }
}
