// KernelsTest.java — the FFM bindings on the CPU backend: the library loads, calls read Java
// arrays in place, every documented bad input gives its status and a message naming the
// argument and index, and after an error the output buffers still hold their guard values.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

class KernelsTest {
    // Dr. MAS: mean and std of the agent segment, the row's own score
    static final Kernels.NormParams DRMAS = new Kernels.NormParams(true, true, false, 0, 0, 1, true, 1e-6);
    static final float GUARD = -12345f;

    static MemorySegment seg(float[] a) {
        return MemorySegment.ofArray(a);
    }

    static MemorySegment seg(int[] a) {
        return MemorySegment.ofArray(a);
    }

    static float[] guards(int n) {
        float[] g = new float[n];
        Arrays.fill(g, GUARD);
        return g;
    }

    static void assertUntouched(float[] out) {
        for (int i = 0; i < out.length; i++) assertEquals(GUARD, out[i], "output[" + i + "] was written despite the error");
    }

    @Test
    void loadsAndReportsItself() {
        assertFalse(LibDrmas.version().isEmpty());
        assertTrue(NativeLibrary.get().path().toString().endsWith("libdrmas.so"));
        assertTrue(LibDrmas.numThreads() >= 1);
        assertEquals(Backend.CPU, Backend.choose("cpu"));
        assertThrows(IllegalArgumentException.class, () -> Backend.choose("tpu"));
        if (!LibDrmas.cudaAvailable()) {
            IllegalStateException e = assertThrows(IllegalStateException.class, () -> Backend.choose("cuda"));
            assertTrue(e.getMessage().contains("not usable"), e.getMessage());
            assertEquals(Backend.CPU, Backend.choose("auto"));
        }
    }

    @Test
    void drmasAdvantagesOfOneGroupFromHeapAndNativeMemory() {
        // one uid, agents 0/1 interleaved over 3 trajectories; agent 0 scores {1,1,0}, agent 1 {0,1,0}
        float[] s = {1, 0, 1, 1, 0, 0};
        int[] uid = {0, 0, 0, 0, 0, 0}, traj = {0, 0, 1, 1, 2, 2}, ag = {0, 1, 0, 1, 0, 1};
        float[] heapOut = new float[6];
        Kernels.advantage(Backend.CPU, DRMAS, 6, seg(s), seg(uid), seg(traj), seg(ag), 1, 3, 2, seg(heapOut), null, null);
        double m0 = 2.0 / 3, s0 = Math.sqrt((2 * (1 - m0) * (1 - m0) + m0 * m0) / 2);
        assertEquals((1 - m0) / (s0 + 1e-6), heapOut[0], 1e-6);
        assertEquals((0 - m0) / (s0 + 1e-6), heapOut[4], 1e-6);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment ns = arena.allocateFrom(ValueLayout.JAVA_FLOAT, s);
            MemorySegment nu = arena.allocateFrom(ValueLayout.JAVA_INT, uid);
            MemorySegment nt = arena.allocateFrom(ValueLayout.JAVA_INT, traj);
            MemorySegment na = arena.allocateFrom(ValueLayout.JAVA_INT, ag);
            MemorySegment out = arena.allocate(ValueLayout.JAVA_FLOAT, 6);
            Kernels.advantage(Backend.CPU, DRMAS, 6, ns, nu, nt, na, 1, 3, 2, out, null, null);
            assertArrayEquals(heapOut, out.toArray(ValueLayout.JAVA_FLOAT));
        }
    }

    @Test
    void badAdvantageInputsNameTheRowAndLeaveOutputsUntouched() {
        float[] s = {1, 0, 1, 1};
        int[] uid = {0, 0, 1, 1}, traj = {0, 0, 1, 1}, ag = {0, 1, 0, 1};
        float[] out = guards(4);

        int[] badUid = {0, 0, 1, 2};
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 4, seg(s),
                seg(badUid), seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertEquals(DrmasException.ERR_RANGE, e.status());
        assertTrue(e.getMessage().contains("uid[3] = 2 is outside [0, 2)"), e.getMessage());

        float[] nan = {1, Float.NaN, 1, 1};
        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 4, seg(nan), seg(uid),
                seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertEquals(DrmasException.ERR_NONFINITE, e.status());
        assertTrue(e.getMessage().contains("scores[1]"), e.getMessage());

        float[] inf = {1, 0, Float.POSITIVE_INFINITY, 1};
        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 4, seg(inf), seg(uid),
                seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertTrue(e.getMessage().contains("scores[2] is not finite (+inf)"), e.getMessage());

        int[] splitTraj = {0, 1, 1, 1};  // trajectory 1 has rows in uid 0 and uid 1
        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 4, seg(s), seg(uid),
                seg(splitTraj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertEquals(DrmasException.ERR_INCONSISTENT, e.status());
        assertTrue(e.getMessage().contains("traj[2] = 1"), e.getMessage());

        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 4, seg(s), seg(uid),
                null, seg(ag), 2, 2, 2, seg(out), null, null));
        assertEquals(DrmasException.ERR_NULL, e.status());

        Kernels.NormParams badPooling = new Kernels.NormParams(true, true, false, 7, 0, 1, true, 1e-6);
        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, badPooling, 4, seg(s), seg(uid),
                seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertEquals(DrmasException.ERR_CONFIG, e.status());
        assertTrue(e.getMessage().contains("cfg.global_pooling"), e.getMessage());

        Kernels.NormParams zeroEps = new Kernels.NormParams(true, true, false, 0, 0, 1, true, 0.0);
        e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, zeroEps, 4, seg(s), seg(uid),
                seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertTrue(e.getMessage().contains("eps"), e.getMessage());

        // a buffer too short for n is refused on the Java side, before any native call
        IllegalArgumentException short1 = assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CPU,
                DRMAS, 5, seg(new float[5]), seg(new int[5]), seg(new int[5]), seg(new int[4]), 2, 2, 2, seg(new float[5]), null, null));
        assertTrue(short1.getMessage().startsWith("agent holds 16 bytes"), short1.getMessage());
        assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, -1, seg(s), seg(uid),
                seg(traj), seg(ag), 2, 2, 2, seg(out), null, null));
        assertUntouched(out);
    }

    @Test
    void badStatsAndOffsetsAreRefused() {
        long[] count = {-1, -1};
        double[] mean = {-1, -1}, m2 = {-1, -1};
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.segmentStats(Backend.CPU, 3,
                seg(new float[] {1, 2, 3}), seg(new int[] {0, 1, -1}), 2, true, MemorySegment.ofArray(count),
                MemorySegment.ofArray(mean), MemorySegment.ofArray(m2), null, null));
        assertTrue(e.getMessage().contains("segment_ids[2] = -1"), e.getMessage());
        assertEquals(-1, count[0]);
        assertEquals(-1, mean[1]);

        float[] tokens = guards(5);
        e = assertThrows(DrmasException.class, () -> Kernels.broadcastRows(Backend.CPU, 2, seg(new float[] {1, 2}),
                MemorySegment.ofArray(new long[] {0, 4, 3}), 5, seg(tokens), null));
        assertEquals(DrmasException.ERR_RANGE, e.status());
        assertTrue(e.getMessage().contains("row_offsets[2] = 3 < row_offsets[1] = 4"), e.getMessage());
        e = assertThrows(DrmasException.class, () -> Kernels.broadcastRows(Backend.CPU, 1, seg(new float[] {1}),
                MemorySegment.ofArray(new long[] {-2, 3}), 5, seg(tokens), null));
        assertTrue(e.getMessage().contains("row_offsets[0] = -2"), e.getMessage());
        assertUntouched(tokens);

        float[] grad = guards(4);
        double[] sums = new double[AbiIndices.LOSS_SUMS];
        Kernels.LossParams kNoRef = new Kernels.LossParams(0.2, 0.2, 3, 0.1, 4, 3, false);
        e = assertThrows(DrmasException.class, () -> Kernels.clippedLoss(Backend.CPU, kNoRef, 1,
                MemorySegment.ofArray(new long[] {0, 4}), 4, seg(new float[4]), seg(new float[4]), seg(new float[4]),
                null, null, seg(grad), MemorySegment.ofArray(sums), null));
        assertEquals(DrmasException.ERR_NULL, e.status());
        Kernels.LossParams badClip = new Kernels.LossParams(1.5, 0.2, 3, 0, 4, 0, false);
        e = assertThrows(DrmasException.class, () -> Kernels.clippedLoss(Backend.CPU, badClip, 1,
                MemorySegment.ofArray(new long[] {0, 4}), 4, seg(new float[4]), seg(new float[4]), seg(new float[4]),
                null, null, seg(grad), MemorySegment.ofArray(sums), null));
        assertTrue(e.getMessage().contains("clip_low"), e.getMessage());
        assertUntouched(grad);
    }

    /**
     * A segment that does not start on its element type's alignment (a byte slice one off, in native or heap
     * memory) is a DrmasException naming the argument, with nothing written: libdrmas checks the alignment
     * of every pointer before it reads one (on CUDA a misaligned float is a fault that ends the process's
     * CUDA context), and the bindings pass segments on as they are.
     */
    @Test
    void aMisalignedSegmentIsAClearError() {
        long[] off = {0, 3, 7};
        float[] lp = {-1, -0.5f, -2, -0.1f, -0.3f, -1.2f, -0.7f}, old = {-1.1f, -0.4f, -2.5f, -0.1f, -0.9f, -1, -0.6f};
        float[] adv = {1, 1, 1, -2, -2, -2, -2};
        Kernels.LossParams p = new Kernels.LossParams(0.2, 0.28, 3, 0, 7, 0, false);
        double[] sums = new double[AbiIndices.LOSS_SUMS];
        float[] grad = guards(7);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment logp = arena.allocate(4 * 7 + 8, 8).asSlice(1, 4 * 7);  // native memory, 1 byte off
            logp.copyFrom(seg(lp));
            DrmasException e = assertThrows(DrmasException.class, () -> Kernels.clippedLoss(Backend.CPU, p, 2, MemorySegment.ofArray(off),
                    7, logp, seg(old), seg(adv), null, null, seg(grad), MemorySegment.ofArray(sums), null));
            assertEquals(DrmasException.ERR_CONFIG, e.status());
            assertTrue(e.getMessage().startsWith("drmas_clipped_loss_f32: logp (0x")
                    && e.getMessage().contains(") is not aligned to 4 bytes (a float array must start on a multiple of 4)"), e.getMessage());
            assertUntouched(grad);
            // the same values aligned: accepted
            Kernels.clippedLoss(Backend.CPU, p, 2, MemorySegment.ofArray(off), 7, seg(lp), seg(old), seg(adv), null, null, seg(grad),
                    MemorySegment.ofArray(sums), null);
        }
        // heap memory: a byte array's slice one byte on, as the int64 row offsets (a heap array's own
        // elements are aligned for their type; one byte off is misaligned whatever the array's base)
        MemorySegment bytes = MemorySegment.ofArray(new byte[8 * 3 + 8]).asSlice(1, 8 * 3);
        bytes.copyFrom(MemorySegment.ofArray(off));
        float[] tokens = guards(7);
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.broadcastRows(Backend.CPU, 2, seg(new float[] {1, 2}), bytes, 7,
                seg(tokens), null));
        assertEquals(DrmasException.ERR_CONFIG, e.status());
        assertTrue(e.getMessage().startsWith("drmas_broadcast_rows_f32: row_offsets (0x")
                && e.getMessage().contains(") is not aligned to 8 bytes (an int64_t array must start on a multiple of 8)"), e.getMessage());
        assertUntouched(tokens);
    }

    @Test
    void lossWithHostOffsetsIsTheSameCallAndChecksThem() {
        long[] off = {0, 3, 3, 7};
        float[] lp = {-1, -0.5f, -2, -0.1f, -0.3f, -1.2f, -0.7f}, old = {-1.1f, -0.4f, -2.5f, -0.1f, -0.9f, -1, -0.6f};
        float[] adv = {1, 1, 1, -2, -2, -2, -2};
        Kernels.LossParams p = new Kernels.LossParams(0.2, 0.28, 3, 0, 7, 0, true);  // seq-mean-token-mean
        float[] g1 = new float[7], g2 = new float[7];
        double[] s1 = new double[AbiIndices.LOSS_SUMS], s2 = new double[AbiIndices.LOSS_SUMS];
        Kernels.clippedLoss(Backend.CPU, p, 3, MemorySegment.ofArray(off), 7, seg(lp), seg(old), seg(adv), null, null,
                seg(g1), MemorySegment.ofArray(s1), null);
        Kernels.clippedLoss(Backend.CPU, p, 3, MemorySegment.ofArray(off), MemorySegment.ofArray(off), 7, seg(lp), seg(old),
                seg(adv), null, null, seg(g2), MemorySegment.ofArray(s2), null);
        assertTrue(java.util.Arrays.equals(g1, g2) && java.util.Arrays.equals(s1, s2), "host offsets changed the result");
        float[] grad = guards(7);
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.clippedLoss(Backend.CPU, p, 3,
                MemorySegment.ofArray(new long[] {0, 3, 2, 7}), MemorySegment.ofArray(off), 7, seg(lp), seg(old), seg(adv),
                null, null, seg(grad), MemorySegment.ofArray(s2), null));
        assertEquals(DrmasException.ERR_RANGE, e.status());
        assertTrue(e.getMessage().contains("drmas_clipped_loss_async_f32: row_offsets[2] = 2 < row_offsets[1] = 3"),
                e.getMessage());
        assertUntouched(grad);
    }

    @Test
    void perRowAdvantagesGiveTheBroadcastsBitsAndAreChecked() {
        long[] off = {1, 4, 4, 9};  // token 0 and 9 belong to no row
        float[] lp = {0, -1, -0.5f, -2, -0.1f, -0.3f, -1.2f, -0.7f, -0.2f, 0}, old = {0, -1.1f, -0.4f, -2.5f, -0.1f, -0.9f, -1, -0.6f, -0.9f, 0};
        float[] rowAdv = {1.5f, 0.25f, -2};
        float[] tokAdv = {0, 1.5f, 1.5f, 1.5f, -2, -2, -2, -2, -2, 0};
        byte[] mask = {1, 1, 0, 1, 1, 1, 1, 0, 1, 1};
        Kernels.LossParams p = new Kernels.LossParams(0.2, 0.28, 3, 0, 7, 0, true);
        float[] g1 = new float[10], g2 = new float[10], g3 = new float[10];
        double[] s1 = new double[AbiIndices.LOSS_SUMS], s2 = new double[AbiIndices.LOSS_SUMS], s3 = new double[AbiIndices.LOSS_SUMS];
        Kernels.clippedLoss(Backend.CPU, p, 3, MemorySegment.ofArray(off), 10, seg(lp), seg(old), seg(tokAdv), null,
                MemorySegment.ofArray(mask), seg(g1), MemorySegment.ofArray(s1), null);
        Kernels.clippedLossRows(Backend.CPU, p, 3, MemorySegment.ofArray(off), MemorySegment.ofArray(off), 10, seg(lp), seg(old),
                seg(rowAdv), null, MemorySegment.ofArray(mask), seg(g2), MemorySegment.ofArray(s2), null);
        Kernels.clippedLossRows(Backend.CPU, p, 3, null, MemorySegment.ofArray(off), 10, seg(lp), seg(old), seg(rowAdv), null,
                MemorySegment.ofArray(mask), seg(g3), MemorySegment.ofArray(s3), null);
        assertArrayEquals(g1, g2);
        assertArrayEquals(g1, g3);
        assertArrayEquals(s1, s2);
        assertArrayEquals(s1, s3);
        assertTrue(s1[AbiIndices.LOSS_TOKENS] == 6 && g1[4] != 0, "the rows' valid tokens were counted and moved");
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.clippedLossRows(Backend.CPU, p, 3,
                null, MemorySegment.ofArray(off), 10, seg(lp), seg(old), seg(new float[2]), null, null, seg(g3),
                MemorySegment.ofArray(s3), null));
        assertTrue(e.getMessage().contains("row_advantages"), e.getMessage());
        float[] grad = guards(10);
        DrmasException d = assertThrows(DrmasException.class, () -> Kernels.clippedLossRows(Backend.CPU, p, 3, null,
                MemorySegment.ofArray(new long[] {1, 4, 3, 9}), 10, seg(lp), seg(old), seg(rowAdv), null, null, seg(grad),
                MemorySegment.ofArray(s3), null));
        assertTrue(d.getMessage().contains("drmas_clipped_loss_rows_f32: row_offsets[2] = 3 < row_offsets[1] = 4"), d.getMessage());
        assertUntouched(grad);
    }

    @Test
    void trustedAdvantagesAreTheValidatedOnesAndStillNameABadRow() {
        float[] s = {1, 0, 1, 1, 0, 0, 0.5f, 0.25f};
        int[] uid = {0, 0, 0, 0, 0, 0, 2, 2}, traj = {0, 0, 1, 1, 2, 2, 3, 3}, ag = {0, 1, 0, 1, 0, 1, 0, 1};
        float[] a = new float[8], b = new float[8];
        double[] da = new double[AbiIndices.DIAG_FIELDS * 3 * 2], db = new double[da.length];
        Kernels.advantage(Backend.CPU, DRMAS, 8, seg(s), seg(uid), seg(traj), seg(ag), 3, 4, 2, seg(a), MemorySegment.ofArray(da), null);
        Kernels.advantage(Backend.CPU, DRMAS, true, 8, seg(s), seg(uid), seg(traj), seg(ag), 3, 4, 2, seg(b), MemorySegment.ofArray(db),
                null);
        assertArrayEquals(a, b);
        assertArrayEquals(da, db);
        assertTrue(a[0] != 0, "non-zero advantages");
        int[] badAgent = ag.clone();
        badAgent[5] = 7;
        DrmasException e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, true, 8, seg(s), seg(uid),
                seg(traj), seg(badAgent), 3, 4, 2, seg(new float[8]), null, null));
        assertTrue(e.getMessage().contains("drmas_advantage_trusted_f32: agent[5] = 7 is outside [0, 2)"), e.getMessage());
    }

    @Test
    void cudaBackendWithoutAGpuIsAClearError() {
        if (LibDrmas.cudaAvailable()) return;  // covered by CudaKernelsTest on GPU machines
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = arena.allocate(16), i = arena.allocate(16), out = arena.allocate(16);
            DrmasException e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CUDA, DRMAS, 4, s, i,
                    i, i, 1, 1, 1, out, null, null));
            assertEquals(DrmasException.ERR_UNSUPPORTED, e.status());
            assertTrue(e.getMessage().contains("CUDA"), e.getMessage());
        }
        assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CUDA, DRMAS, 1, seg(new float[1]),
                seg(new int[1]), seg(new int[1]), seg(new int[1]), 1, 1, 1, seg(new float[1]), null, null));
    }

    /** The trainer's check at start (Policies.device) on a library or machine without CUDA: why not, in words. */
    @Test
    void cudaDeviceCheckWithoutAGpuSaysWhy() {
        if (LibDrmas.cudaAvailable()) return;  // CudaKernelsTest checks the devices
        DrmasException e = assertThrows(DrmasException.class, () -> LibDrmas.cudaCheckDevice(0));
        assertEquals(DrmasException.ERR_UNSUPPORTED, e.status());
        if (LibDrmas.cudaCompiled()) {
            // CUDA's own words, which depend on the machine: without a driver, "CUDA driver version is insufficient for CUDA
            // runtime version"; with one and no GPU, "no CUDA-capable device is detected"
            assertTrue(e.getMessage().matches("drmas_cuda_check_device: no usable CUDA device \\(no GPU or no driver; CUDA says: "
                    + "[^()]+\\) \\(status 6\\)"), e.getMessage());
        } else {
            assertEquals("drmas_cuda_check_device: this libdrmas was built without CUDA (nvcc was not found at build time) (status 6)",
                    e.getMessage());
        }
    }
    /**
     * An output that is a read-only segment (a read-only file mapping would fault in native code: a dead
     * JVM) is refused before the call; read-only inputs are fine. Found by review.
     */
    @Test
    void aReadOnlyOutputIsRefusedAndReadOnlyInputsAccepted() {
        MemorySegment ro = Arena.ofAuto().allocate(16).asReadOnly();
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class,
                () -> Kernels.broadcastRows(Backend.CPU, 0, null, MemorySegment.ofArray(new long[] {0}), 4, ro, null));
        assertTrue(e.getMessage().contains("token_values is read-only"), e.getMessage());
        float[] adv = new float[2];
        MemorySegment scores = Arena.ofAuto().allocate(8).copyFrom(MemorySegment.ofArray(new float[] {1, 0})).asReadOnly();
        Kernels.NormParams p = new Kernels.NormParams(true, true, false, 1, 0, 1, true, 1e-6);  // Dr. MAS, row pooling
        e = assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CPU, p, 2, scores,
                MemorySegment.ofArray(new int[2]), null, MemorySegment.ofArray(new int[2]), 1, 0, 1, scores, null, null));
        assertTrue(e.getMessage().contains("advantages is read-only"), e.getMessage());
        Kernels.advantage(Backend.CPU, p, 2, scores, MemorySegment.ofArray(new int[2]).asReadOnly(), null,
                MemorySegment.ofArray(new int[2]), 1, 0, 1, MemorySegment.ofArray(adv), null, null);
        assertTrue(adv[0] > 0 && adv[1] < 0, Arrays.toString(adv));
    }
    /**
     * Sizes whose byte counts overflow a long are refused as IllegalArgumentExceptions naming the
     * argument, the factors and their values, before any native call: they were bare
     * ArithmeticExceptions ("long overflow"), or (heads x headDim) wrapped round unchecked.
     */
    @Test
    void sizesPastALongAreIllegalArgumentsNamingThem() {
        long big = 1L << 32;
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.lmheadLogprobs(Backend.CPU, big, big,
                seg(new float[4]), MemorySegment.ofArray(new long[1]), seg(new float[1]), null, null));
        assertTrue(e.getMessage().startsWith("logits: numTokens x vocab = 4294967296 x 4294967296 overflows a 64-bit size"), e.getMessage());

        float[] out = guards(1);
        e = assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 1L << 62, seg(new float[1]),
                seg(new int[1]), seg(new int[1]), seg(new int[1]), 1, 1, 1, seg(out), null, null));
        assertTrue(e.getMessage().startsWith("scores: 4611686018427387904 elements x 4 bytes overflows a 64-bit size"), e.getMessage());

        e = assertThrows(IllegalArgumentException.class, () -> Kernels.advantage(Backend.CPU, DRMAS, 1, seg(new float[1]),
                seg(new int[1]), seg(new int[1]), seg(new int[1]), 1L << 40, 1, 1L << 40, seg(out), MemorySegment.ofArray(new double[1]), null));
        assertTrue(e.getMessage().startsWith("numUids x numAgents = 1099511627776 x 1099511627776 overflows a 64-bit size"), e.getMessage());
        assertUntouched(out);

        e = assertThrows(IllegalArgumentException.class, () -> Kernels.broadcastRows(Backend.CPU, Long.MAX_VALUE, seg(new float[1]),
                MemorySegment.ofArray(new long[2]), 1, seg(new float[1]), null));
        assertTrue(e.getMessage().startsWith("row_values: 9223372036854775807 elements x 4 bytes overflows a 64-bit size"), e.getMessage());

        e = assertThrows(IllegalArgumentException.class, () -> Kernels.decodeAttention(1, big, 1, big, seg(new float[8]), 8, null, null,
                1e-6, seg(new float[1]), seg(new float[1]), seg(new float[8]), seg(new float[8]), 8, 1, 0, 1, null, 1,
                seg(new float[8])));
        assertTrue(e.getMessage().startsWith("qkv: (heads + 2 x kvHeads) x headDim = 4294967298 x 4294967296 overflows a 64-bit size"),
                e.getMessage());
    }
}
