// BenchSupport.java — what the benchmarks share: one thread count for every implementation
// (-Ddrmas.bench.threads, default 2), off-heap copies of the inputs, and the result checks each
// @Setup runs, so that no benchmark times a computation that differs from the native kernel's.
package dev.drmas.bench;

import dev.drmas.bindings.LibDrmas;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Locale;

final class BenchSupport {
    private BenchSupport() {}

    /** System property with the thread count of every implementation (the launcher also sets OMP_NUM_THREADS). */
    static final String THREADS_PROPERTY = "drmas.bench.threads";
    /** Inputs are generated from this seed, so every fork (and GpuBench) sees the same rows. */
    static final long SEED = 20250101L;
    /** Plain-Java oracles (ReferenceKernels) box every value: they are run at most at this size. */
    static final int REFERENCE_MAX = 1 << 20;

    static int threads() {
        return Math.max(1, Integer.getInteger(THREADS_PROPERTY, 2));
    }

    /** Sets libdrmas's CPU thread count to {@link #threads()}. */
    static void configureNativeThreads() {
        LibDrmas.setNumThreads(threads());
    }

    // ------------------------------------------------------------------ off-heap copies

    static MemorySegment offHeap(Arena arena, float[] a) {
        MemorySegment s = arena.allocate(4L * Math.max(1, a.length), 64);
        MemorySegment.copy(a, 0, s, ValueLayout.JAVA_FLOAT, 0, a.length);
        return s;
    }

    static MemorySegment offHeap(Arena arena, int[] a) {
        MemorySegment s = arena.allocate(4L * Math.max(1, a.length), 64);
        MemorySegment.copy(a, 0, s, ValueLayout.JAVA_INT, 0, a.length);
        return s;
    }

    static MemorySegment offHeap(Arena arena, long[] a) {
        MemorySegment s = arena.allocate(8L * Math.max(1, a.length), 64);
        MemorySegment.copy(a, 0, s, ValueLayout.JAVA_LONG, 0, a.length);
        return s;
    }

    static MemorySegment offHeap(Arena arena, byte[] a) {
        MemorySegment s = arena.allocate(Math.max(1, a.length), 64);
        MemorySegment.copy(a, 0, s, ValueLayout.JAVA_BYTE, 0, a.length);
        return s;
    }

    /** A zeroed off-heap buffer (Arena.allocate zeroes, so its pages are touched before timing). */
    static MemorySegment zeroed(Arena arena, long bytes) {
        return arena.allocate(Math.max(1, bytes), 64);
    }

    static float[] floats(MemorySegment s, int n) {
        float[] a = new float[n];
        MemorySegment.copy(s, ValueLayout.JAVA_FLOAT, 0, a, 0, n);
        return a;
    }

    // ------------------------------------------------------------------ result checks

    /**
     * Throws unless |actual − expected| ≤ relTol · max|expected| everywhere (NaN must match NaN).
     * A loose, scale-aware check: it catches wiring errors (wrong config, layout, lengths), not
     * last-bit differences between float and double evaluation orders.
     */
    static void check(String what, float[] expected, float[] actual, double relTol) {
        if (expected.length != actual.length) {
            throw new IllegalStateException(what + ": " + actual.length + " values, expected " + expected.length);
        }
        double scale = 0;
        for (float e : expected) if (Float.isFinite(e)) scale = Math.max(scale, Math.abs(e));
        double tol = relTol * Math.max(scale, Float.MIN_NORMAL);
        for (int i = 0; i < expected.length; i++) {
            float e = expected[i], a = actual[i];
            boolean ok = Float.isNaN(e) ? Float.isNaN(a) : Math.abs((double) a - e) <= tol;
            if (!ok) {
                throw new IllegalStateException(what + " differs from the native kernel at [" + i + "]: " + a
                        + " vs " + e + " (tolerance " + tol + "); this benchmark would not time the same computation");
            }
        }
    }

    static void check(String what, double expected, double actual, double relTol) {
        if (!(Math.abs(actual - expected) <= relTol * Math.max(Math.abs(expected), 1e-12))) {
            throw new IllegalStateException(what + " = " + actual + " differs from the native kernel's " + expected);
        }
    }

    // ------------------------------------------------------------------ table cells (BenchReport, GpuBench)

    /** The median of {@code v} (the mean of the middle two for an even count); {@code v} is left as it is. */
    static double median(double[] v) {
        double[] s = v.clone();
        java.util.Arrays.sort(s);
        return s.length % 2 == 1 ? s[s.length / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
    }

    static String human(long n) {
        if (n % (1L << 20) == 0) return (n >> 20) + "M";
        if (n % (1L << 10) == 0) return (n >> 10) + "K";
        return Long.toString(n);
    }

    static String ms(double v) {
        if (Double.isNaN(v)) return "—";
        return String.format(Locale.ROOT, v >= 100 ? "%.1f" : v >= 1 ? "%.3f" : "%.4f", v);
    }

    static String num(double v) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, v >= 10 ? "%.1f" : "%.2f", v) : "—";
    }

    static String ratio(double v) {
        return Double.isFinite(v) ? String.format(Locale.ROOT, v >= 10 ? "%.0f×" : "%.2f×", v) : "—";
    }

    /**
     * Runs a child JVM ({@code cmd}), passing its other output lines to stderr, and returns the fields
     * of the line it printed as "RESULT f1 f2 ..." (index 0 is "RESULT"); {@code what} names the run in
     * the error when the child fails or prints none.
     */
    static String[] childResult(List<String> cmd, String what) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).redirectError(ProcessBuilder.Redirect.INHERIT).start();
        String result = null;
        try (BufferedReader r = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (line.startsWith("RESULT ")) result = line;
                else System.err.println(line);
            }
        }
        int rc = p.waitFor();
        if (rc != 0 || result == null) throw new IllegalStateException(what + " failed with exit code " + rc);
        return result.split(" ");
    }
}
