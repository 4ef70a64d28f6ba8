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
     * The least that {@code work} added to the heap at its peak over {@code times} runs. The counter
     * sees every thread's allocations, and while a fresh JVM runs its first tests the JIT's compiler
     * threads take and free arenas of many MiB that can fall inside one run's window (a clone's CI
     * read a prefill 22 MB and an AdamW step 2 MB over their bounds once, and not in three runs
     * alone). The code under test allocates the same in every run, so its own peak is the least
     * reading; a regression that holds more holds it in every run.
     */
    public static long leastAdded(int times, Runnable work) {
        long least = Long.MAX_VALUE;
        for (int i = 0; i < times; i++) {
            PeakMemory phase = PeakMemory.start();
            work.run();
            least = Math.min(least, phase.addedBytes());
        }
        return least;
    }

    /** Skips the test (a JUnit assumption) unless peaks come from the exact heap counter. */
    public static void require() {
        assumeTrue(PeakMemory.source() == PeakMemory.Source.HEAP,
                "needs the exact heap counter (LD_PRELOAD libdrmas_memcount.so, as the pom sets)");
    }
}
