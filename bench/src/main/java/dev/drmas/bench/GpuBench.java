// GpuBench.java — times the CUDA kernels (advantage, validated and trusted, clipped loss) at 16M and
// 64M on device buffers (nanoTime around N calls, each followed by a device synchronise) next to the
// native CPU kernel: ms, GB/s and speed-up, and beside them each path's launches and the bytes a row
// its kernels move against the bytes it must move (a model of the kernels' reads and writes: see cost()). Without a usable CUDA device it prints that it skipped and exits 0, or
// fails (exit 1) when DRMAS_REQUIRE_GPU=1. It needs only the bindings, the bench classes and the
// trainer's dev.drmas.algo classes (no LibTorch), so that it runs on bench/gpu-prepare.sh's runtime.
package dev.drmas.bench;

import dev.drmas.algo.ClippedLoss;
import dev.drmas.bindings.AbiIndices;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.DeviceBuffer;
import dev.drmas.bindings.Kernels;
import dev.drmas.bindings.LibDrmas;
import dev.drmas.bindings.NativeLibrary;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

public final class GpuBench {
    private GpuBench() {}

    static final String USAGE = """
            usage: GpuBench [--sizes N,N,...] [--threads N] [--time MS] [--out FILE.md]
              --sizes    element counts (default 16777216,67108864)
              --threads  threads of the CPU kernel it is compared with (default 2)
              --time     target measuring time per case in ms (default 1000; at least 5 calls)
              --out      also write the table as Markdown""";

    record Row(String op, long n, String layout, int bytesPerElement, double gpuMs, double cpuMs, Cost cost) {}

    /**
     * A CUDA path's launches (kernels that work + gated-off ones, memsets, host synchronisations, as
     * test_cuda's "counts" lines report them under the emulator) and the bytes a row its kernels move
     * from and to memory: each array streamed by a kernel at its size, each scattered access of a row
     * (an atomic or a gather at the row's segment) as one 32-byte sector; per-segment passes (a few
     * bytes a row at ~28 rows a group) are left out. An estimate from the code, not a measurement.
     */
    record Cost(String launches, double bytesPerRow) {}

    static final int SECTOR = 32;

    /** The model of {@link Cost} for the advantage paths of cuda_backend.cu (trajectory pooling, no diagnostics). */
    static Cost advantageCost(boolean trusted, boolean sorted) {
        int rowArrays = 16;  // scores, uid, traj, agent
        if (sorted) {
            // advantage_sorted_kernel: the tile check reads uid, agent, traj; its run passes read the
            // scores (the ids again from L1) and write the advantages
            double onePass = rowArrays + 4;
            return trusted ? new Cost("1 kernel (+10 gated off), 1 memset, 0 syncs", onePass)
                           : new Cost("2 kernels (+3 gated off), 1 memset, 1 sync", rowArrays + onePass);
        }
        double validate = rowArrays;  // (its second uid read, 4096 rows back for the long-run check, hits L2)
        double firstRow = 8 + SECTOR;                   // uid, traj; atomicMin at the trajectory
        double consistency = 8 + 2 * SECTOR;            // uid, traj; first_row[t], uid[first]
        double sums = rowArrays + 4 * SECTOR;           // agent count and sum, trajectory count and sum
        double m2 = rowArrays + 2 * SECTOR;             // agent mean; agent M2
        double advantage = rowArrays + 7 * SECTOR + 4;  // agent and group count/mean/M2, trajectory mean
        double fallback = firstRow + sums + m2 + advantage;
        return trusted ? new Cost("9 kernels + 1 empty one-pass check, 1 memset, 0 syncs", rowArrays - 4 + fallback)
                       : new Cost("12 kernels, 2 memsets, 1 sync", validate + consistency + fallback);
    }

    /** The model of {@link Cost} for drmas_clipped_loss_f32 (device offsets: validated, one sync), per token. */
    static Cost lossCost(double tokensPerRow) {
        // the offsets twice (validation, rows) and the row's 8 partials written and read once more
        double perRow = 2 * 8 + 2 * 8 * AbiIndices.LOSS_SUMS;
        return new Cost("2 kernels, 2 memsets, 1 sync", ClippedLossBench.BYTES_PER_TOKEN + perRow / tokensPerRow);
    }

    public static void main(String[] argv) throws IOException {
        List<Long> sizes = List.of(1L << 24, 1L << 26);
        Path out = null;
        int timeMs = 1000;
        for (int i = 0; i < argv.length; i++) {
            String k = argv[i];
            if (k.equals("-h") || k.equals("--help")) {
                System.out.println(USAGE);
                return;
            }
            if (i + 1 >= argv.length) throw new IllegalArgumentException(k + " needs a value\n" + USAGE);
            String v = argv[++i];
            switch (k) {
                case "--sizes" -> sizes = java.util.Arrays.stream(v.split(",")).map(s -> Long.parseLong(s.trim())).toList();
                case "--threads" -> System.setProperty(BenchSupport.THREADS_PROPERTY, v);
                case "--time" -> timeMs = Integer.parseInt(v);
                case "--out" -> out = Path.of(v);
                default -> throw new IllegalArgumentException("unknown option " + k + "\n" + USAGE);
            }
        }
        if (!Backend.CUDA.available()) {
            String why = "no CUDA device (libdrmas " + NativeLibrary.get().path() + ", CUDA compiled "
                    + LibDrmas.cudaCompiled() + ")";
            if ("1".equals(System.getenv("DRMAS_REQUIRE_GPU"))) {
                System.err.println("GpuBench: DRMAS_REQUIRE_GPU=1 but " + why);
                System.exit(1);
            }
            System.out.println(why + ": GPU benchmark skipped");
            return;
        }
        BenchSupport.configureNativeThreads();
        List<Row> rows = new ArrayList<>();
        for (long n : sizes) {
            for (String layout : List.of("grouped", "random")) {
                // the rows made once for both entries (a single-threaded shuffle of 64M rows takes seconds of the budget)
                AdvantageBench.Data d = AdvantageBench.Data.generate(Math.toIntExact(n), layout, BenchSupport.SEED);
                for (boolean trusted : new boolean[] {false, true}) rows.add(advantage(d, layout, trusted, timeMs));
            }
            rows.add(loss(Math.toIntExact(n), timeMs));
        }
        String table = table(rows, timeMs);
        System.out.println(table);
        if (out != null) {
            Files.writeString(out, table);
            System.out.println("written to " + out.toAbsolutePath());
        }
    }

    // ------------------------------------------------------------------ cases

    static Row advantage(AdvantageBench.Data d, String layout, boolean trusted, int timeMs) {
        final int n = d.n();
        Kernels.NormParams p = AdvantageBench.normParams(AdvantageBench.CONFIG);
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment s = BenchSupport.offHeap(arena, d.scores()), u = BenchSupport.offHeap(arena, d.uid());
            MemorySegment t = BenchSupport.offHeap(arena, d.traj()), a = BenchSupport.offHeap(arena, d.agent());
            MemorySegment cpuOut = BenchSupport.zeroed(arena, 4L * n), gpuOut = BenchSupport.zeroed(arena, 4L * n);
            try (DeviceBuffer ds = DeviceBuffer.of(s); DeviceBuffer du = DeviceBuffer.of(u);
                 DeviceBuffer dt = DeviceBuffer.of(t); DeviceBuffer da = DeviceBuffer.of(a);
                 DeviceBuffer dout = DeviceBuffer.allocate(4L * n)) {
                Runnable gpu = () -> Kernels.advantage(Backend.CUDA, p, trusted, n, ds.segment(), du.segment(), dt.segment(),
                        da.segment(), d.numUids(), d.numTrajs(), d.numAgents(), dout.segment(), null, null);
                // the CPU's same entry (the trusted rows were compared with the validating CPU kernel)
                Runnable cpu = () -> Kernels.advantage(Backend.CPU, p, trusted, n, s, u, t, a, d.numUids(), d.numTrajs(),
                        d.numAgents(), cpuOut, null, null);
                double gpuMs = time(gpu, true, timeMs), cpuMs = time(cpu, false, timeMs);
                dout.download(gpuOut);
                BenchSupport.check("CUDA advantage", BenchSupport.floats(cpuOut, n), BenchSupport.floats(gpuOut, n), 1e-4);
                return new Row(trusted ? "advantage (trusted)" : "advantage", n, layout, AdvantageBench.BYTES_PER_ROW, gpuMs,
                        cpuMs, advantageCost(trusted, layout.equals("grouped")));
            }
        }
    }

    static Row loss(int n, int timeMs) {
        ClippedLossBench.Data d = ClippedLossBench.Data.generate(n, BenchSupport.SEED);
        Kernels.LossParams p = ClippedLossBench.lossParams(ClippedLossBench.CONFIG, d.normalizer());
        long rows = d.numRows();
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment off = BenchSupport.offHeap(arena, d.offsets()), lp = BenchSupport.offHeap(arena, d.logp());
            MemorySegment old = BenchSupport.offHeap(arena, d.old()), adv = BenchSupport.offHeap(arena, d.adv());
            MemorySegment mask = BenchSupport.offHeap(arena, d.maskBytes());
            MemorySegment cpuGrad = BenchSupport.zeroed(arena, 4L * n), gpuGrad = BenchSupport.zeroed(arena, 4L * n);
            MemorySegment cpuSums = BenchSupport.zeroed(arena, 8L * AbiIndices.LOSS_SUMS);
            MemorySegment gpuSums = BenchSupport.zeroed(arena, 8L * AbiIndices.LOSS_SUMS);
            try (DeviceBuffer doff = DeviceBuffer.of(off); DeviceBuffer dlp = DeviceBuffer.of(lp);
                 DeviceBuffer dold = DeviceBuffer.of(old); DeviceBuffer dadv = DeviceBuffer.of(adv);
                 DeviceBuffer dmask = DeviceBuffer.of(mask); DeviceBuffer dgrad = DeviceBuffer.allocate(4L * n);
                 DeviceBuffer dsums = DeviceBuffer.allocate(8L * AbiIndices.LOSS_SUMS)) {
                Runnable gpu = () -> Kernels.clippedLoss(Backend.CUDA, p, rows, doff.segment(), n, dlp.segment(),
                        dold.segment(), dadv.segment(), null, dmask.segment(), dgrad.segment(), dsums.segment(), null);
                Runnable cpu = () -> Kernels.clippedLoss(Backend.CPU, p, rows, off, n, lp, old, adv, null, mask,
                        cpuGrad, cpuSums, null);
                double gpuMs = time(gpu, true, timeMs), cpuMs = time(cpu, false, timeMs);
                dgrad.download(gpuGrad);
                dsums.download(gpuSums);
                BenchSupport.check("CUDA loss grad", BenchSupport.floats(cpuGrad, n), BenchSupport.floats(gpuGrad, n), 1e-4);
                BenchSupport.check("CUDA loss", cpuSums.get(ValueLayout.JAVA_DOUBLE, 0), gpuSums.get(ValueLayout.JAVA_DOUBLE, 0), 1e-4);
                return new Row("clipped loss", n, "", ClippedLossBench.BYTES_PER_TOKEN, gpuMs, cpuMs,
                        lossCost((double) n / Math.max(1, rows)));
            }
        }
    }

    /**
     * Mean ms per call: 3 warm-up calls, a timed call to size the run, then enough calls
     * (at least 5) to fill about {@code timeMs}, each followed by a synchronise on the GPU.
     */
    static double time(Runnable op, boolean gpu, int timeMs) {
        for (int i = 0; i < 3; i++) call(op, gpu);
        long t0 = System.nanoTime();
        call(op, gpu);
        double est = Math.max(1e-6, (System.nanoTime() - t0) / 1e6);
        int calls = (int) Math.max(5, Math.min(10_000, timeMs / est));
        t0 = System.nanoTime();
        for (int i = 0; i < calls; i++) call(op, gpu);
        return (System.nanoTime() - t0) / 1e6 / calls;
    }

    private static void call(Runnable op, boolean gpu) {
        op.run();
        if (gpu) DeviceBuffer.synchronize();
    }

    static String table(List<Row> rows, int timeMs) {
        StringBuilder sb = new StringBuilder();
        sb.append("# drmas CUDA kernels\n\n");
        sb.append(String.format(Locale.ROOT, "libdrmas %s · CPU kernel threads %d · about %d ms of calls per case, each "
                + "followed by a device synchronise (GPU) · GB/s = bytes the kernel must minimally touch / time.%n%n",
                LibDrmas.version(), BenchSupport.threads(), timeMs));
        sb.append("| operation | n | layout | GPU ms | GPU GB/s | CPU native ms | CPU GB/s | GPU speed-up | CUDA launches "
                + "| B/row needed | B/row moved (est.) |\n");
        sb.append("|---|---:|---|---:|---:|---:|---:|---:|---|---:|---:|\n");
        for (Row r : rows) {
            double gb = (double) r.bytesPerElement() * r.n() / 1e9;
            sb.append(String.format(Locale.ROOT, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %d | %s |%n", r.op(),
                    BenchSupport.human(r.n()), r.layout().isEmpty() ? "—" : r.layout(), BenchSupport.ms(r.gpuMs()),
                    BenchSupport.num(gb / (r.gpuMs() * 1e-3)), BenchSupport.ms(r.cpuMs()), BenchSupport.num(gb / (r.cpuMs() * 1e-3)),
                    BenchSupport.ratio(r.cpuMs() / r.gpuMs()), r.cost().launches(), r.bytesPerElement(),
                    BenchSupport.num(r.cost().bytesPerRow())));
        }
        return sb.toString();
    }
}
