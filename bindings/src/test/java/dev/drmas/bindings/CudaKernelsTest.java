// CudaKernelsTest.java — the CUDA backend against the CPU oracle through the Java bindings
// alone (device memory via DeviceBuffer), so that a GPU server with only a JRE can run it:
// every mode descriptor x pooling x singleton x std option, awkward sizes, shuffled rows, both
// row weightings of the loss x KL estimator x dual clip, the fused LM head on fp32 and bf16 logits
// (chunks that do not divide the tokens), and bad inputs leaving device outputs untouched. Tagged "gpu"; skipped with a message where no GPU is visible, failed instead when
// DRMAS_REQUIRE_GPU=1 (a GPU check). The build also runs it on the emulated CUDA backend
// (libdrmas_emu) with DRMAS_TEST_SCALE=small, which shrinks the large cases.
package dev.drmas.bindings;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Tag;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Assumptions;

@Tag("gpu")
class CudaKernelsTest {

    /** The large cases at a size the SIMT emulator runs in seconds (DRMAS_TEST_SCALE=small). */
    static final boolean SMALL = "small".equals(System.getenv("DRMAS_TEST_SCALE"));

    static int scaled(int full, int small) {
        return SMALL ? small : full;
    }

    @BeforeEach
    void needsGpu() {
        String why = "no CUDA device (libdrmas " + NativeLibrary.get().path() + ", CUDA compiled: " + LibDrmas.cudaCompiled() + ")";
        if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
            assertTrue(LibDrmas.cudaAvailable(), "DRMAS_REQUIRE_GPU=1 but " + why);
        } else {
            Assumptions.assumeTrue(LibDrmas.cudaAvailable(), why + ": skipping CUDA kernel tests");
        }
    }

    record Rows(float[] s, int[] uid, int[] traj, int[] agent, int u, int t, int k) {}

    // uid-major rollouts; trajectories of 1..turns rounds over k agents; scores on a coarse grid
    // so that constant and single segments are common.
    static Rows rollouts(int uids, int n, int k, int turns, boolean shuffle, long seed) {
        SplittableRandom r = new SplittableRandom(seed);
        List<int[]> keys = new ArrayList<>();
        List<Float> scores = new ArrayList<>();
        for (int u = 0; u < uids; u++)
            for (int j = 0; j < n; j++) {
                int rounds = 1 + r.nextInt(turns);
                float reward = r.nextInt(2);
                for (int t = 0; t < rounds; t++)
                    for (int a = 0; a < k; a++) {
                        if (r.nextInt(5) == 0) continue;  // agents skipped now and then
                        keys.add(new int[] {u, u * n + j, a});
                        scores.add(reward - (r.nextInt(4) == 0 ? 0.1f : 0f));
                    }
            }
        int m = keys.size();
        int[] perm = new int[m];
        for (int i = 0; i < m; i++) perm[i] = i;
        if (shuffle)
            for (int i = m - 1; i > 0; i--) {
                int j = r.nextInt(i + 1), x = perm[i];
                perm[i] = perm[j];
                perm[j] = x;
            }
        float[] s = new float[m];
        int[] uid = new int[m], traj = new int[m], agent = new int[m];
        for (int i = 0; i < m; i++) {
            s[i] = scores.get(perm[i]);
            uid[i] = keys.get(perm[i])[0];
            traj[i] = keys.get(perm[i])[1];
            agent[i] = keys.get(perm[i])[2];
        }
        return new Rows(s, uid, traj, agent, uids, uids * n, k);
    }

    static void assertClose(String what, float[] gpu, float[] cpu, double atol, double rtol) {
        int bad = 0;
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < cpu.length && bad < 10; i++) {
            if (!(Math.abs(gpu[i] - cpu[i]) <= atol + rtol * Math.abs(cpu[i]))) {
                bad++;
                sb.append(String.format("  [%d] cuda %.9g cpu %.9g%n", i, gpu[i], cpu[i]));
            }
        }
        if (bad > 0) fail(what + ": " + bad + "+ mismatches\n" + sb);
    }

    static void assertClose(String what, double[] gpu, double[] cpu, double atol, double rtol) {
        for (int i = 0; i < cpu.length; i++) {
            boolean ok = (Double.isNaN(cpu[i]) && Double.isNaN(gpu[i])) || Math.abs(gpu[i] - cpu[i]) <= atol + rtol * Math.abs(cpu[i]);
            if (!ok) fail(what + "[" + i + "]: cuda " + gpu[i] + " cpu " + cpu[i]);
        }
    }

    static float[] cudaAdvantage(Kernels.NormParams p, Rows r, double[] diagOut) {
        int n = r.s.length;
        float[] out = new float[n];
        try (DeviceBuffer s = DeviceBuffer.of(MemorySegment.ofArray(r.s)); DeviceBuffer u = DeviceBuffer.of(MemorySegment.ofArray(r.uid));
             DeviceBuffer t = DeviceBuffer.of(MemorySegment.ofArray(r.traj)); DeviceBuffer a = DeviceBuffer.of(MemorySegment.ofArray(r.agent));
             DeviceBuffer o = DeviceBuffer.allocate(4L * n); DeviceBuffer d = DeviceBuffer.allocate(8L * diagOut.length)) {
            Kernels.advantage(Backend.CUDA, p, n, s.segment(), u.segment(), p.globalPooling() == 0 ? t.segment() : null,
                    a.segment(), r.u, r.t, r.k, o.segment(), d.segment(), null);
            o.download(MemorySegment.ofArray(out));
            d.download(MemorySegment.ofArray(diagOut));
        }
        return out;
    }

    @Test
    void advantagesMatchTheCpuForEveryOption() {
        Rows[] cases = {rollouts(1, 1, 1, 1, false, 1), rollouts(3, 5, 2, 2, false, 2), rollouts(101, 7, 3, 2, true, 3),
                rollouts(1, 997, 2, 3, false, 4), rollouts(scaled(10007, 211), 8, 2, 2, false, 5),
                rollouts(scaled(10007, 211), 8, 2, 2, true, 6)};
        for (Rows r : cases) {
            for (int mode = 0; mode < 8; mode++)  // every descriptor: mean, std from agent, trajectory numerator
                for (int pool = 0; pool < 2; pool++)
                    for (int single = 0; single < 3; single++)
                        for (int ddof = 0; ddof < 2; ddof++)
                            for (boolean scale : new boolean[] {true, false}) {
                                Kernels.NormParams p = new Kernels.NormParams((mode & 1) != 0, (mode & 2) != 0, (mode & 4) != 0, pool, single, ddof, scale, 1e-6);
                                int n = r.s.length;
                                float[] cpu = new float[n];
                                double[] cpuDiag = new double[AbiIndices.DIAG_FIELDS * r.u * r.k];
                                Kernels.advantage(Backend.CPU, p, n, MemorySegment.ofArray(r.s), MemorySegment.ofArray(r.uid),
                                        MemorySegment.ofArray(r.traj), MemorySegment.ofArray(r.agent), r.u, r.t, r.k,
                                        MemorySegment.ofArray(cpu), MemorySegment.ofArray(cpuDiag), null);
                                double[] gpuDiag = new double[cpuDiag.length];
                                float[] gpu = cudaAdvantage(p, r, gpuDiag);
                                String what = "n=" + n + " " + p;
                                assertClose(what, gpu, cpu, 1e-5, 1e-5);
                                assertClose(what + " diagnostics", gpuDiag, cpuDiag, 1e-9, 1e-9);
                                for (int i = 0; i < n; i++)
                                    if (cpu[i] == 0f) assertEquals(0f, gpu[i], what + ": exact zero at row " + i);
                            }
        }
    }

    @Test
    void segmentStatsAndBroadcastMatchTheCpu() {
        SplittableRandom r = new SplittableRandom(9);
        for (int n : new int[] {1, 1009, scaled(1_000_000, 30011)}) {
            int segs = Math.max(1, n / 100) + 3;  // a few segments stay empty
            float[] v = new float[n];
            int[] id = new int[n];
            for (int i = 0; i < n; i++) {
                id[i] = r.nextInt(segs - 3);
                v[i] = id[i] % 7 == 0 ? 0.3f : (float) r.nextGaussian();
            }
            long[] cc = new long[segs], gc = new long[segs];
            double[] cm = new double[segs], cm2 = new double[segs], cs = new double[segs];
            double[] gm = new double[segs], gm2 = new double[segs], gs = new double[segs];
            Kernels.segmentStats(Backend.CPU, n, MemorySegment.ofArray(v), MemorySegment.ofArray(id), segs, true,
                    MemorySegment.ofArray(cc), MemorySegment.ofArray(cm), MemorySegment.ofArray(cm2), MemorySegment.ofArray(cs), null);
            try (DeviceBuffer dv = DeviceBuffer.of(MemorySegment.ofArray(v)); DeviceBuffer di = DeviceBuffer.of(MemorySegment.ofArray(id));
                 DeviceBuffer dc = DeviceBuffer.allocate(8L * segs); DeviceBuffer dm = DeviceBuffer.allocate(8L * segs);
                 DeviceBuffer dm2 = DeviceBuffer.allocate(8L * segs); DeviceBuffer ds = DeviceBuffer.allocate(8L * segs)) {
                Kernels.segmentStats(Backend.CUDA, n, dv.segment(), di.segment(), segs, true, dc.segment(), dm.segment(),
                        dm2.segment(), ds.segment(), null);
                dc.download(MemorySegment.ofArray(gc));
                dm.download(MemorySegment.ofArray(gm));
                dm2.download(MemorySegment.ofArray(gm2));
                ds.download(MemorySegment.ofArray(gs));
            }
            for (int s = 0; s < segs; s++) assertEquals(cc[s], gc[s], "count[" + s + "]");
            assertClose("mean n=" + n, gm, cm, 1e-9, 1e-9);
            assertClose("m2 n=" + n, gm2, cm2, 1e-9, 1e-9);
            assertClose("std n=" + n, gs, cs, 1e-9, 1e-9);

            int rows = Math.max(1, n / 50);
            long[] off = new long[rows + 1];
            off[0] = 3;
            for (int i = 0; i < rows; i++) off[i + 1] = off[i] + r.nextInt(0, 100);
            int tokens = (int) off[rows] + 5;
            float[] rv = new float[rows];
            for (int i = 0; i < rows; i++) rv[i] = (float) r.nextGaussian();
            float[] cpu = new float[tokens], gpu = new float[tokens];
            Kernels.broadcastRows(Backend.CPU, rows, MemorySegment.ofArray(rv), MemorySegment.ofArray(off), tokens, MemorySegment.ofArray(cpu), null);
            try (DeviceBuffer drv = DeviceBuffer.of(MemorySegment.ofArray(rv)); DeviceBuffer doff = DeviceBuffer.of(MemorySegment.ofArray(off));
                 DeviceBuffer dout = DeviceBuffer.allocate(4L * tokens)) {
                Kernels.broadcastRows(Backend.CUDA, rows, drv.segment(), doff.segment(), tokens, dout.segment(), null);
                dout.download(MemorySegment.ofArray(gpu));
            }
            assertClose("broadcast n=" + n, gpu, cpu, 0, 0);
        }
    }

    @Test
    void clippedLossMatchesTheCpuForEveryOption() {
        SplittableRandom r = new SplittableRandom(13);
        for (int rows : new int[] {1, 17, scaled(4099, 101)}) {
            long[] off = new long[rows + 1];
            for (int i = 0; i < rows; i++) off[i + 1] = off[i] + (i % 5 == 0 ? 0 : r.nextInt(1, 300));
            int n = (int) off[rows] + 2;
            float[] lp = new float[n], old = new float[n], adv = new float[n], ref = new float[n];
            byte[] mask = new byte[n];
            for (int i = 0; i < n; i++) {
                old[i] = (float) -r.nextDouble(0, 5);
                lp[i] = old[i] + (float) (r.nextInt(20) == 0 ? r.nextDouble(-30, 30) : r.nextGaussian() * 0.3);
                ref[i] = old[i] + (float) (r.nextGaussian() * 0.5);
                adv[i] = (float) r.nextGaussian();
                mask[i] = (byte) (r.nextInt(10) == 0 ? 0 : 1);
                if (mask[i] == 0) lp[i] = Float.NaN;  // padding must never leak into results
            }
            for (boolean perRowMean : new boolean[] {false, true})
                for (int kl = 0; kl < 4; kl++)
                    for (double dual : new double[] {0, 3}) {
                        Kernels.LossParams p = new Kernels.LossParams(0.2, 0.28, dual, 0.05, 1000, kl, perRowMean);
                        float[] cg = new float[n], gg = new float[n];
                        double[] cs = new double[AbiIndices.LOSS_SUMS], gs = new double[AbiIndices.LOSS_SUMS];
                        MemorySegment refSeg = kl == 0 ? null : MemorySegment.ofArray(ref);
                        Kernels.clippedLoss(Backend.CPU, p, rows, MemorySegment.ofArray(off), n, MemorySegment.ofArray(lp),
                                MemorySegment.ofArray(old), MemorySegment.ofArray(adv), refSeg, MemorySegment.ofArray(mask),
                                MemorySegment.ofArray(cg), MemorySegment.ofArray(cs), null);
                        try (DeviceBuffer dOff = DeviceBuffer.of(MemorySegment.ofArray(off)); DeviceBuffer dLp = DeviceBuffer.of(MemorySegment.ofArray(lp));
                             DeviceBuffer dOld = DeviceBuffer.of(MemorySegment.ofArray(old)); DeviceBuffer dAdv = DeviceBuffer.of(MemorySegment.ofArray(adv));
                             DeviceBuffer dRef = DeviceBuffer.of(MemorySegment.ofArray(ref)); DeviceBuffer dMask = DeviceBuffer.of(MemorySegment.ofArray(mask));
                             DeviceBuffer dG = DeviceBuffer.allocate(4L * n); DeviceBuffer dS = DeviceBuffer.allocate(8L * AbiIndices.LOSS_SUMS)) {
                            Kernels.clippedLoss(Backend.CUDA, p, rows, dOff.segment(), n, dLp.segment(), dOld.segment(), dAdv.segment(),
                                    kl == 0 ? null : dRef.segment(), dMask.segment(), dG.segment(), dS.segment(), null);
                            dG.download(MemorySegment.ofArray(gg));
                            dS.download(MemorySegment.ofArray(gs));
                            // the form with host offsets (never synchronises): the same bits
                            float[] ag = new float[n];
                            double[] as = new double[AbiIndices.LOSS_SUMS];
                            Kernels.clippedLoss(Backend.CUDA, p, rows, MemorySegment.ofArray(off), dOff.segment(), n, dLp.segment(),
                                    dOld.segment(), dAdv.segment(), kl == 0 ? null : dRef.segment(), dMask.segment(), dG.segment(),
                                    dS.segment(), null);
                            dG.download(MemorySegment.ofArray(ag));
                            dS.download(MemorySegment.ofArray(as));
                            assertTrue(java.util.Arrays.equals(ag, gg) && java.util.Arrays.equals(as, gs),
                                    "rows=" + rows + " " + p + ": host offsets give other bits");
                        }
                        assertClose("grad rows=" + rows + " " + p, gg, cg, 1e-7, 1e-5);
                        assertClose("sums rows=" + rows + " " + p, gs, cs, 1e-7, 1e-6);
                    }
        }
    }

    @Test
    void callsRunOnTheDeviceOfTheirArrays() {
        int count = LibDrmas.cudaDeviceCount();
        assertTrue(count >= 1, "cudaAvailable but no device counted");
        DrmasException range = assertThrows(DrmasException.class, () -> LibDrmas.cudaSetDevice(count));
        assertEquals(DrmasException.ERR_RANGE, range.status());
        assertEquals(0, LibDrmas.cudaGetDevice());
        if (count < 2) return;  // one GPU: nothing else to choose (the emulated backend has two)
        float[] s = {1, 0, 0.5f, 1}, out = new float[4], cpu = new float[4];
        int[] u = {0, 0, 1, 1}, a = {0, 1, 0, 1};
        Kernels.NormParams p = new Kernels.NormParams(false, false, true, 1, 0, 1, true, 1e-6);  // GRPO
        Kernels.advantage(Backend.CPU, p, 4, MemorySegment.ofArray(s), MemorySegment.ofArray(u), null, MemorySegment.ofArray(a),
                2, 0, 2, MemorySegment.ofArray(cpu), null, null);
        LibDrmas.cudaSetDevice(1);
        try (DeviceBuffer ds = DeviceBuffer.of(MemorySegment.ofArray(s)); DeviceBuffer du = DeviceBuffer.of(MemorySegment.ofArray(u));
             DeviceBuffer da = DeviceBuffer.of(MemorySegment.ofArray(a)); DeviceBuffer o = DeviceBuffer.allocate(16)) {
            LibDrmas.cudaSetDevice(0);
            Kernels.advantage(Backend.CUDA, p, 4, ds.segment(), du.segment(), null, da.segment(), 2, 0, 2, o.segment(), null, null);
            assertEquals(0, LibDrmas.cudaGetDevice(), "the call must leave the caller's device current");
            o.download(MemorySegment.ofArray(out));
            assertClose("advantages of device-1 arrays", out, cpu, 1e-6, 1e-6);
            try (DeviceBuffer a0 = DeviceBuffer.of(MemorySegment.ofArray(a))) {
                DrmasException e = assertThrows(DrmasException.class, () -> Kernels.advantage(Backend.CUDA, p, 4, ds.segment(),
                        du.segment(), null, a0.segment(), 2, 0, 2, o.segment(), null, null));
                assertTrue(e.getMessage().contains("argument 'agent' is memory of device 0 but 'scores' is memory of device 1"),
                        e.getMessage());
            }
        } finally {
            LibDrmas.cudaSetDevice(0);
        }
    }

    /** Every visible device has a kernel image (the emulated ones are 9.0); an ordinal past them is a range error. */
    @Test
    void everyDevicePassesTheKernelImageCheck() {
        int count = LibDrmas.cudaDeviceCount();
        for (int d = 0; d < count; d++) {
            LibDrmas.cudaCheckDevice(d);
            assertEquals(0, LibDrmas.cudaGetDevice(), "the check of device " + d + " must leave device 0 current");
        }
        DrmasException e = assertThrows(DrmasException.class, () -> LibDrmas.cudaCheckDevice(count));
        assertEquals(DrmasException.ERR_RANGE, e.status());
        assertEquals("drmas_cuda_check_device: device " + count + " is not in [0, " + count + ") (status 3)", e.getMessage());
    }

    /**
     * A call whose scratch does not fit (a GPU that LibTorch's cache has filled) runs the reclaimer
     * once and is made again; a second failure is the error, outputs untouched. The emulator fails
     * the scratch allocations on request (drmas_emu_fail_next_mallocs); a real GPU is not filled here.
     */
    @Test
    void aCallWhoseScratchDoesNotFitReclaimsOnceAndIsMadeAgain() throws Throwable {
        var fail = NativeLibrary.get().lookup().find("drmas_emu_fail_next_mallocs");
        Assumptions.assumeTrue(fail.isPresent(), "needs the emulated backend's drmas_emu_fail_next_mallocs (a real GPU is not filled here)");
        java.lang.invoke.MethodHandle failNext = java.lang.foreign.Linker.nativeLinker().downcallHandle(fail.get(),
                java.lang.foreign.FunctionDescriptor.ofVoid(java.lang.foreign.ValueLayout.JAVA_INT));
        float[] s = {1, 0, 0.5f, 1}, cpu = new float[4], out = new float[4], guard = {-7, -7, -7, -7};
        int[] u = {0, 0, 1, 1}, a = {0, 1, 0, 1};
        Kernels.NormParams p = new Kernels.NormParams(false, false, true, 1, 0, 1, true, 1e-6);  // GRPO
        Kernels.advantage(Backend.CPU, p, 4, MemorySegment.ofArray(s), MemorySegment.ofArray(u), null, MemorySegment.ofArray(a),
                2, 0, 2, MemorySegment.ofArray(cpu), null, null);
        int[] reclaimed = {0};
        try (DeviceBuffer ds = DeviceBuffer.of(MemorySegment.ofArray(s)); DeviceBuffer du = DeviceBuffer.of(MemorySegment.ofArray(u));
             DeviceBuffer da = DeviceBuffer.of(MemorySegment.ofArray(a)); DeviceBuffer o = DeviceBuffer.of(MemorySegment.ofArray(guard))) {
            Runnable call = () -> Kernels.advantage(Backend.CUDA, p, 4, ds.segment(), du.segment(), null, da.segment(), 2, 0, 2,
                    o.segment(), null, null);
            // no reclaimer: the error, as before
            failNext.invokeExact(1);
            DrmasException e = assertThrows(DrmasException.class, call::run);
            assertEquals(DrmasException.ERR_ALLOC, e.status());
            assertTrue(e.getMessage().contains("out of memory (in cudaMallocAsync)"), e.getMessage());
            LibDrmas.setCudaReclaimer(() -> reclaimed[0]++);
            // twice full: reclaimed once, then the error; the outputs untouched
            failNext.invokeExact(2);
            e = assertThrows(DrmasException.class, call::run);
            assertEquals(DrmasException.ERR_ALLOC, e.status());
            assertEquals(1, reclaimed[0]);
            o.download(MemorySegment.ofArray(out));
            assertArrayEquals(guard, out);
            // once full: reclaimed, made again, the CPU's advantages
            failNext.invokeExact(1);
            call.run();
            assertEquals(2, reclaimed[0]);
            o.download(MemorySegment.ofArray(out));
            assertClose("advantages after a reclaim", out, cpu, 1e-6, 1e-6);
            // room enough: the reclaimer is not run
            call.run();
            assertEquals(2, reclaimed[0]);
        } finally {
            LibDrmas.setCudaReclaimer(null);
            failNext.invokeExact(0);
        }
    }

    /**
     * A device segment one byte off its float alignment is refused by name before any launch (a GPU would
     * fault on it, and the fault would end the process's CUDA context), nothing is written, and the device
     * still works after it.
     */
    @Test
    void aMisalignedDeviceSegmentIsAClearErrorAndTheDeviceLivesOn() {
        int t = 3, v = 5;
        float[] z = new float[t * v];
        for (int i = 0; i < z.length; i++) z[i] = 0.25f * (i % 7) - 0.5f;
        long[] y = {0, 4, 2};
        float[] cpuLp = new float[t], lp = new float[t];
        Kernels.lmheadLogprobs(Backend.CPU, t, v, MemorySegment.ofArray(z), MemorySegment.ofArray(y), MemorySegment.ofArray(cpuLp), null,
                null);
        try (DeviceBuffer dz = DeviceBuffer.allocate(4L * z.length + 8); DeviceBuffer dy = DeviceBuffer.of(MemorySegment.ofArray(y));
             DeviceBuffer dlp = DeviceBuffer.of(MemorySegment.ofArray(new float[] {-7, -7, -7}))) {
            MemorySegment off = dz.segment().asSlice(1, 4L * z.length);
            DrmasException e = assertThrows(DrmasException.class, () -> Kernels.lmheadLogprobs(Backend.CUDA, t, v, off, dy.segment(),
                    dlp.segment(), null, null));
            assertEquals(DrmasException.ERR_CONFIG, e.status());
            assertTrue(e.getMessage().startsWith("drmas_lmhead_logprobs_f32: logits (0x")
                    && e.getMessage().contains(") is not aligned to 4 bytes"), e.getMessage());
            DeviceBuffer.synchronize();
            dlp.download(MemorySegment.ofArray(lp));
            assertArrayEquals(new float[] {-7, -7, -7}, lp, "logp written by a refused call");
            MemorySegment aligned = dz.segment().asSlice(4, 4L * z.length);  // 4 bytes on: a float's alignment
            try (DeviceBuffer host = DeviceBuffer.of(MemorySegment.ofArray(z))) {
                LibDrmas.check(LibDrmas.cudaMemcpy(aligned, host.segment(), 4L * z.length, 3));
            }
            Kernels.lmheadLogprobs(Backend.CUDA, t, v, aligned, dy.segment(), dlp.segment(), null, null);
            dlp.download(MemorySegment.ofArray(lp));
            assertClose("logp after a refused misaligned call", lp, cpuLp, 1e-5, 1e-5);
        }
    }

    @Test
    void badInputsOnCudaLeaveDeviceOutputsUntouched() {
        float[] guard = {-7, -7, -7, -7};
        try (DeviceBuffer s = DeviceBuffer.of(MemorySegment.ofArray(new float[] {1, Float.NaN, 0, 1}));
             DeviceBuffer u = DeviceBuffer.of(MemorySegment.ofArray(new int[] {0, 0, 1, 1}));
             DeviceBuffer a = DeviceBuffer.of(MemorySegment.ofArray(new int[] {0, 1, 0, 1}));
             DeviceBuffer o = DeviceBuffer.of(MemorySegment.ofArray(guard))) {
            Kernels.NormParams p = new Kernels.NormParams(true, true, false, 1, 0, 1, true, 1e-6);
            DrmasException e = assertThrows(DrmasException.class,
                    () -> Kernels.advantage(Backend.CUDA, p, 4, s.segment(), u.segment(), null, a.segment(), 2, 0, 2, o.segment(), null, null));
            assertEquals(DrmasException.ERR_NONFINITE, e.status());
            assertTrue(e.getMessage().contains("scores[1]"), e.getMessage());
            float[] back = new float[4];
            o.download(MemorySegment.ofArray(back));
            assertEquals(-7f, back[0]);
            assertEquals(-7f, back[3]);
        }
    }

    static void assertClose(String what, short[] gpuBf16, short[] cpuBf16, double atol, double rtol) {
        assertClose(what, LmHeadKernelsTest.widen(gpuBf16), LmHeadKernelsTest.widen(cpuBf16), atol, rtol);
    }

    /** One LM-head update's chunks on the CPU (heap arrays) or CUDA (device copies), fp32 or bf16 logits. */
    record HeadResult(float[] dz, short[] dzBf16, float[] logp, float[] entropy, double[] sums) {}

    static HeadResult lmheadChunks(Backend be, boolean bf16, LmHeadKernelsTest.Batch b, int chunk, Kernels.LmHeadParams p) {
        int t = b.t(), v = b.v();
        float[] dz = bf16 ? null : b.z().clone();
        short[] dzb = bf16 ? LmHeadKernelsTest.toBf16(b.z()) : null;
        float[] lp = new float[t], ent = new float[t];
        double[] sums = new double[AbiIndices.LMHEAD_SUMS];
        MemorySegment ref = p.loss().klType() == 0 ? null : MemorySegment.ofArray(b.ref());
        if (be == Backend.CPU) {
            for (int c0 = 0; c0 < t; c0 += chunk) {
                int n = Math.min(chunk, t - c0);
                double[] s = new double[AbiIndices.LMHEAD_SUMS];
                MemorySegment lpS = MemorySegment.ofArray(lp).asSlice(4L * c0), entS = MemorySegment.ofArray(ent).asSlice(4L * c0);
                if (bf16) {
                    Kernels.lmheadChunkBf16(be, p, 4, MemorySegment.ofArray(b.off()), t, c0, n, v, MemorySegment.ofArray(dzb).asSlice(2L * c0 * v),
                            MemorySegment.ofArray(b.y()), MemorySegment.ofArray(b.old()), MemorySegment.ofArray(b.adv()), ref,
                            MemorySegment.ofArray(b.mask()), lpS, entS, MemorySegment.ofArray(s), null);
                } else {
                    Kernels.lmheadChunk(be, p, 4, MemorySegment.ofArray(b.off()), t, c0, n, v, MemorySegment.ofArray(dz).asSlice(4L * c0 * v),
                            MemorySegment.ofArray(b.y()), MemorySegment.ofArray(b.old()), MemorySegment.ofArray(b.adv()), ref,
                            MemorySegment.ofArray(b.mask()), lpS, entS, MemorySegment.ofArray(s), null);
                }
                for (int k = 0; k < s.length; k++) sums[k] += s[k];
            }
            return new HeadResult(dz, dzb, lp, ent, sums);
        }
        try (DeviceBuffer dZ = DeviceBuffer.of(bf16 ? MemorySegment.ofArray(dzb) : MemorySegment.ofArray(dz));
             DeviceBuffer dOff = DeviceBuffer.of(MemorySegment.ofArray(b.off())); DeviceBuffer dY = DeviceBuffer.of(MemorySegment.ofArray(b.y()));
             DeviceBuffer dOld = DeviceBuffer.of(MemorySegment.ofArray(b.old())); DeviceBuffer dAdv = DeviceBuffer.of(MemorySegment.ofArray(b.adv()));
             DeviceBuffer dRef = DeviceBuffer.of(MemorySegment.ofArray(b.ref())); DeviceBuffer dMask = DeviceBuffer.of(MemorySegment.ofArray(b.mask()));
             DeviceBuffer dLp = DeviceBuffer.allocate(4L * t); DeviceBuffer dEnt = DeviceBuffer.allocate(4L * t);
             DeviceBuffer dS = DeviceBuffer.allocate(8L * AbiIndices.LMHEAD_SUMS)) {
            long elem = bf16 ? 2 : 4;
            for (int c0 = 0; c0 < t; c0 += chunk) {
                int n = Math.min(chunk, t - c0);
                MemorySegment z = dZ.segment().asSlice(elem * c0 * v, elem * n * v);
                MemorySegment lpS = dLp.segment().asSlice(4L * c0), entS = dEnt.segment().asSlice(4L * c0);
                MemorySegment refS = ref == null ? null : dRef.segment();
                if (bf16) {
                    Kernels.lmheadChunkBf16(be, p, 4, dOff.segment(), t, c0, n, v, z, dY.segment(), dOld.segment(), dAdv.segment(), refS,
                            dMask.segment(), lpS, entS, dS.segment(), null);
                } else {
                    Kernels.lmheadChunk(be, p, 4, dOff.segment(), t, c0, n, v, z, dY.segment(), dOld.segment(), dAdv.segment(), refS,
                            dMask.segment(), lpS, entS, dS.segment(), null);
                }
                double[] s = new double[AbiIndices.LMHEAD_SUMS];
                dS.download(MemorySegment.ofArray(s));
                for (int k = 0; k < s.length; k++) sums[k] += s[k];
            }
            dZ.download(bf16 ? MemorySegment.ofArray(dzb) : MemorySegment.ofArray(dz));
            dLp.download(MemorySegment.ofArray(lp));
            dEnt.download(MemorySegment.ofArray(ent));
        }
        return new HeadResult(dz, dzb, lp, ent, sums);
    }

    @Test
    void lmheadMatchesTheCpuInFp32AndBf16() {
        // a vocabulary that is not a multiple of 8 and spans many blocks; chunks that do not divide the tokens
        LmHeadKernelsTest.Batch b = LmHeadKernelsTest.batch(scaled(301, 37), scaled(50_261, 1_031), 17);
        int t = b.t(), v = b.v();
        for (int kl : new int[] {0, 3})
            for (boolean perRowMean : new boolean[] {false, true}) {
                Kernels.LmHeadParams p = new Kernels.LmHeadParams(new Kernels.LossParams(0.2, 0.28, 3.0, 0.05, 1000, kl, perRowMean), 0.01);
                int chunk = scaled(128, 10);
                HeadResult cf = lmheadChunks(Backend.CPU, false, b, chunk, p), gf = lmheadChunks(Backend.CUDA, false, b, chunk, p);
                String what = "fp32 " + p;
                assertClose(what + " logp", gf.logp(), cf.logp(), 1e-5, 1e-4);
                assertClose(what + " entropy", gf.entropy(), cf.entropy(), 1e-5, 1e-4);
                assertClose(what + " dL/dz", gf.dz(), cf.dz(), 1e-5, 1e-4);
                assertClose(what + " sums", gf.sums(), cf.sums(), 1e-6, 1e-5);
                HeadResult cb = lmheadChunks(Backend.CPU, true, b, chunk, p), gb = lmheadChunks(Backend.CUDA, true, b, chunk, p);
                what = "bf16 " + p;
                assertClose(what + " logp", gb.logp(), cb.logp(), 1e-5, 1e-4);
                assertClose(what + " entropy", gb.entropy(), cb.entropy(), 1e-5, 1e-4);
                // the two backends' fp32 dL/dz differ by rounding (expf), so their bf16 values by at most one bf16 step
                assertClose(what + " dL/dz", gb.dzBf16(), cb.dzBf16(), 1e-5, 1.0 / 128);
                assertClose(what + " sums", gb.sums(), cb.sums(), 1e-6, 1e-5);
                assertTrue(cb.sums()[AbiIndices.LOSS_TOKENS] > t / 2.0, "valid tokens " + cb.sums()[AbiIndices.LOSS_TOKENS]);
            }
        // forward only, bf16 on CUDA against the CPU
        short[] zb = LmHeadKernelsTest.toBf16(b.z());
        long[] yOk = java.util.Arrays.stream(b.y()).map(x -> Math.min(Math.max(x, 0), v - 1)).toArray();
        float[] lp = new float[t], ent = new float[t], glp = new float[t], gent = new float[t];
        Kernels.lmheadLogprobsBf16(Backend.CPU, t, v, MemorySegment.ofArray(zb), MemorySegment.ofArray(yOk), MemorySegment.ofArray(lp),
                MemorySegment.ofArray(ent), null);
        try (DeviceBuffer dZ = DeviceBuffer.of(MemorySegment.ofArray(zb)); DeviceBuffer dY = DeviceBuffer.of(MemorySegment.ofArray(yOk));
             DeviceBuffer dLp = DeviceBuffer.allocate(4L * t); DeviceBuffer dEnt = DeviceBuffer.allocate(4L * t)) {
            Kernels.lmheadLogprobsBf16(Backend.CUDA, t, v, dZ.segment(), dY.segment(), dLp.segment(), dEnt.segment(), null);
            dLp.download(MemorySegment.ofArray(glp));
            dEnt.download(MemorySegment.ofArray(gent));
        }
        assertClose("bf16 forward logp", glp, lp, 1e-5, 1e-4);
        assertClose("bf16 forward entropy", gent, ent, 1e-5, 1e-4);
    }

    @Test
    void lmheadErrorsOnCudaAreTheCpusAndLeaveDeviceOutputsUntouched() {
        LmHeadKernelsTest.Batch b = LmHeadKernelsTest.batch(12, 37, 18);
        int t = b.t(), v = b.v();
        long[] y = b.y().clone();
        y[5] = v;  // a valid token's target outside the vocabulary
        Kernels.LmHeadParams p = LmHeadKernelsTest.PARAMS;
        for (boolean bf16 : new boolean[] {false, true}) {
            MemorySegment host = bf16 ? MemorySegment.ofArray(LmHeadKernelsTest.toBf16(b.z())) : MemorySegment.ofArray(b.z().clone());
            DrmasException cpu = assertThrows(DrmasException.class, () -> chunk(Backend.CPU, bf16, p, b, y, host, null, null));
            float[] guard = new float[t];
            java.util.Arrays.fill(guard, -7f);
            double[] sumsGuard = new double[AbiIndices.LMHEAD_SUMS];
            java.util.Arrays.fill(sumsGuard, 9);
            byte[] before = host.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE);
            try (DeviceBuffer dZ = DeviceBuffer.of(host); DeviceBuffer dLp = DeviceBuffer.of(MemorySegment.ofArray(guard));
                 DeviceBuffer dS = DeviceBuffer.of(MemorySegment.ofArray(sumsGuard))) {
                DrmasException gpu = assertThrows(DrmasException.class, () -> chunk(Backend.CUDA, bf16, p, b, y, dZ.segment(), dLp.segment(), dS.segment()));
                assertEquals(DrmasException.ERR_RANGE, gpu.status());
                assertEquals(cpu.getMessage(), gpu.getMessage());
                assertTrue(gpu.getMessage().contains((bf16 ? "drmas_lmhead_chunk_bf16" : "drmas_lmhead_chunk_f32") + ": targets[5] = 37"),
                        gpu.getMessage());
                byte[] after = new byte[before.length];
                dZ.download(MemorySegment.ofArray(after));
                assertArrayEquals(before, after, "CUDA wrote the logits before failing");
                float[] lp = new float[t];
                dLp.download(MemorySegment.ofArray(lp));
                assertArrayEquals(guard, lp, "CUDA wrote logp before failing");
                double[] s = new double[AbiIndices.LMHEAD_SUMS];
                dS.download(MemorySegment.ofArray(s));
                assertArrayEquals(sumsGuard, s, "CUDA wrote the sums before failing");
            }
        }
        // a Java array is no device memory: refused by the bindings, naming the argument
        IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.lmheadLogprobsBf16(Backend.CUDA, t, v,
                MemorySegment.ofArray(new short[t * v]), MemorySegment.ofArray(new long[t]), MemorySegment.ofArray(new float[t]), null, null));
        assertTrue(e.getMessage().startsWith("logits: a Java array cannot be passed to the CUDA backend"), e.getMessage());
    }

    // One chunk of all tokens; on CUDA the token arrays are device copies (freed before returning).
    private static void chunk(Backend be, boolean bf16, Kernels.LmHeadParams p, LmHeadKernelsTest.Batch b, long[] y, MemorySegment z,
                              MemorySegment logp, MemorySegment sums) {
        int t = b.t(), v = b.v();
        if (be == Backend.CPU) {
            MemorySegment lp = MemorySegment.ofArray(new float[t]), s = MemorySegment.ofArray(new double[AbiIndices.LMHEAD_SUMS]);
            if (bf16) {
                Kernels.lmheadChunkBf16(be, p, 4, MemorySegment.ofArray(b.off()), t, 0, t, v, z, MemorySegment.ofArray(y),
                        MemorySegment.ofArray(b.old()), MemorySegment.ofArray(b.adv()), MemorySegment.ofArray(b.ref()), MemorySegment.ofArray(b.mask()),
                        lp, null, s, null);
            } else {
                Kernels.lmheadChunk(be, p, 4, MemorySegment.ofArray(b.off()), t, 0, t, v, z, MemorySegment.ofArray(y),
                        MemorySegment.ofArray(b.old()), MemorySegment.ofArray(b.adv()), MemorySegment.ofArray(b.ref()), MemorySegment.ofArray(b.mask()),
                        lp, null, s, null);
            }
            return;
        }
        try (DeviceBuffer dOff = DeviceBuffer.of(MemorySegment.ofArray(b.off())); DeviceBuffer dY = DeviceBuffer.of(MemorySegment.ofArray(y));
             DeviceBuffer dOld = DeviceBuffer.of(MemorySegment.ofArray(b.old())); DeviceBuffer dAdv = DeviceBuffer.of(MemorySegment.ofArray(b.adv()));
             DeviceBuffer dRef = DeviceBuffer.of(MemorySegment.ofArray(b.ref())); DeviceBuffer dMask = DeviceBuffer.of(MemorySegment.ofArray(b.mask()))) {
            if (bf16) {
                Kernels.lmheadChunkBf16(be, p, 4, dOff.segment(), t, 0, t, v, z, dY.segment(), dOld.segment(), dAdv.segment(), dRef.segment(),
                        dMask.segment(), logp, null, sums, null);
            } else {
                Kernels.lmheadChunk(be, p, 4, dOff.segment(), t, 0, t, v, z, dY.segment(), dOld.segment(), dAdv.segment(), dRef.segment(),
                        dMask.segment(), logp, null, sums, null);
            }
        }
    }
    /**
     * Device memory (a DeviceBuffer, or a slice of one) where the host would read or write it: refused
     * before the call, for the CPU backend and for the CUDA loss's host offsets. Host code faults on
     * device memory (on a GPU as under the emulator, which keeps it inaccessible to the host): this was a
     * dead JVM. Found by review.
     */
    @Test
    void deviceMemoryIsRefusedWhereTheHostWouldTouchIt() {
        long[] count = new long[1];
        double[] mean = new double[1], m2 = new double[1];
        try (DeviceBuffer d = DeviceBuffer.allocate(64)) {
            for (MemorySegment dev : new MemorySegment[] {d.segment(), d.segment().asSlice(16, 16)}) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.segmentStats(Backend.CPU, 4, dev,
                        MemorySegment.ofArray(new int[4]), 1, true, MemorySegment.ofArray(count), MemorySegment.ofArray(mean),
                        MemorySegment.ofArray(m2), null, null));
                assertTrue(e.getMessage().contains("values: device memory"), e.getMessage());
            }
            Kernels.LossParams lp = new Kernels.LossParams(0.2, 0.2, 0, 0, 4, 0, false);
            try (DeviceBuffer f = DeviceBuffer.allocate(64)) {
                IllegalArgumentException e = assertThrows(IllegalArgumentException.class, () -> Kernels.clippedLossRows(Backend.CUDA, lp,
                        1, d.segment(), d.segment(), 4, f.segment(), f.segment(), f.segment(), null, null, f.segment(), f.segment(), null));
                assertTrue(e.getMessage().contains("host_row_offsets: device memory"), e.getMessage());
            }
        }
        // the same host arrays are accepted (the buffers are gone: their ranges are free again)
        Kernels.segmentStats(Backend.CPU, 4, MemorySegment.ofArray(new float[] {1, 2, 3, 4}), MemorySegment.ofArray(new int[4]), 1, true,
                MemorySegment.ofArray(count), MemorySegment.ofArray(mean), MemorySegment.ofArray(m2), null, null);
        assertEquals(2.5, mean[0]);
    }
}
