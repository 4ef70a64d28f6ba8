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

    /** Skips the test (a JUnit assumption) unless peaks come from the exact heap counter. */
    public static void require() {
        assumeTrue(PeakMemory.source() == PeakMemory.Source.HEAP,
                "needs the exact heap counter (LD_PRELOAD libdrmas_memcount.so, as the pom sets)");
    }
}
