// HeapCounter.java — what the memory tests share: they need the exact native heap counter
// (native/memcount's libdrmas_memcount.so, which the trainer module's pom preloads) and skip with a
// message without it, and they allow the JVM's own native allocations the same room.
package dev.drmas.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.metrics.PeakMemory;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;

public final class HeapCounter {
    private HeapCounter() {
    }

    /** Room for the JVM's own native allocations meanwhile (its compiler's arenas: a few MiB at any time). */
    public static final long JVM_SLACK = 8L << 20;

    /**
     * The least and the most that {@code work} added to the heap at its peak over {@code times} runs,
     * each started once the JIT is quiet ({@link #awaitQuietJit}). The counter sees every thread's
     * allocations, and compilations the call itself starts still move a reading (an admission's
     * prefill read 219.1 MB, and up to 228 where the JIT compiled beside it): a test that holds one
     * reading under a bound made of another compares the least of the one with the most of the
     * other. A regression that holds more holds it in every run.
     */
    public static long[] addedRange(int times, Runnable work) {
        long least = Long.MAX_VALUE, most = Long.MIN_VALUE;
        for (int i = 0; i < times; i++) {
            awaitQuietJit();
            PeakMemory phase = PeakMemory.start();
            work.run();
            long added = phase.addedBytes();
            least = Math.min(least, added);
            most = Math.max(most, added);
        }
        return new long[] {least, most};
    }

    /**
     * Waits, up to ten seconds, until the JIT has finished no compilation for 200 ms. A compiler
     * thread's arenas are malloc'd and freed beside the measured call: one freed inside the window
     * lowers a reading, one made there raises it (a prefill bucket read 181 to 208 MB around its
     * usual 203). Starting while none is in flight leaves only compilations the call itself starts.
     */
    static void awaitQuietJit() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        if (jit == null || !jit.isCompilationTimeMonitoringSupported()) return;
        long spent = jit.getTotalCompilationTime();
        for (int i = 0; i < 50; i++) {
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            long now = jit.getTotalCompilationTime();
            if (now == spent) return;
            spent = now;
        }
    }

    /** The least of {@link #addedRange}: for a reading held under a fixed bound. */
    public static long leastAdded(int times, Runnable work) {
        return addedRange(times, work)[0];
    }

    /** Skips the test (a JUnit assumption) unless peaks come from the exact heap counter. */
    public static void require() {
        assumeTrue(PeakMemory.source() == PeakMemory.Source.HEAP,
                "needs the exact heap counter (LD_PRELOAD libdrmas_memcount.so, as the pom sets)");
    }
}
