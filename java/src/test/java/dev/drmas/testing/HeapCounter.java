// HeapCounter.java — what the memory tests share: they need the exact native heap counter
// (native/memcount's libdrmas_memcount.so, which the trainer module's pom preloads) and skip with a
// message without it, and they allow the JVM's own native allocations the same room.
package dev.drmas.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.metrics.PeakMemory;

public final class HeapCounter {
    private HeapCounter() {
    }

    /** Room for the JVM's own native allocations meanwhile (its compiler's arenas: a few MiB at any time). */
    public static final long JVM_SLACK = 8L << 20;

    /**
     * The least and the most that {@code work} added to the heap at its peak over {@code times} runs.
     * The counter sees every thread's allocations, and the same call's peak moves between runs (a
     * single prefill bucket read 181 to 208 MB over four runs of one test): a test that holds one
     * reading under a bound made of another compares the least of the one with the most of the
     * other. A regression that holds more holds it in every run.
     */
    public static long[] addedRange(int times, Runnable work) {
        long least = Long.MAX_VALUE, most = Long.MIN_VALUE;
        for (int i = 0; i < times; i++) {
            PeakMemory phase = PeakMemory.start();
            work.run();
            long added = phase.addedBytes();
            least = Math.min(least, added);
            most = Math.max(most, added);
        }
        return new long[] {least, most};
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
