// HeapCounter.java — what the memory tests share: they need the exact native heap counter
// (native/memcount's libdrmas_memcount.so, which the trainer module's pom preloads) and skip with a
// message without it, and they allow the JVM's own native allocations the same room.
package dev.drmas.testing;

import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.metrics.PeakMemory;
import java.lang.management.CompilationMXBean;
import java.lang.management.ManagementFactory;
import javax.management.JMException;
import javax.management.ObjectName;

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
     * Waits, up to ten seconds, until no compilation is running or queued (HotSpot's compiler
     * queue, as {@code jcmd Compiler.queue} prints it, empty at two looks 50 ms apart; where that
     * cannot be read, until the JIT has finished no compilation for 200 ms). A compiler thread's
     * arenas are malloc'd and freed beside the measured call: one freed inside the window lowers a
     * reading, one made there raises it (a prefill bucket read 181 to 208 MB around its usual 203;
     * an unsharded save 9.42 MB against 0.07-0.25 in a fresh-clone CI run). The queue, not the
     * compilation time, because that time grows only when a compilation ends: one long C2
     * compilation looks quiet for as long as it runs. Starting while none is in flight leaves only
     * compilations the call itself starts.
     */
    public static void awaitQuietJit() {
        CompilationMXBean jit = ManagementFactory.getCompilationMXBean();
        long spent = jit != null && jit.isCompilationTimeMonitoringSupported() ? jit.getTotalCompilationTime() : -1;
        int quiet = 0;
        for (long end = System.nanoTime() + 10_000_000_000L; System.nanoTime() < end; ) {
            int pending = pendingCompilations();
            if (pending < 0 && spent < 0) return;
            if (pending == 0 && ++quiet == 2) return;
            if (pending > 0) quiet = 0;
            try {
                Thread.sleep(pending < 0 ? 200 : 50);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
            if (pending < 0) {
                long now = jit.getTotalCompilationTime();
                if (now == spent) return;
                spent = now;
            }
        }
    }

    /**
     * The compilations running or queued now, by the JVM's diagnostic command {@code compilerQueue}
     * (its lines other than the section heads and "Empty"); -1 where it cannot be read.
     */
    static int pendingCompilations() {
        String out;
        try {
            out = (String) ManagementFactory.getPlatformMBeanServer().invoke(
                    new ObjectName("com.sun.management:type=DiagnosticCommand"), "compilerQueue",
                    new Object[] {null}, new String[] {String[].class.getName()});
        } catch (JMException | RuntimeException e) {
            return -1;
        }
        return out == null ? -1 : countCompilations(out);
    }

    /** The compilations {@code compilerQueue}'s text lists; -1 when it is not that command's text. */
    static int countCompilations(String out) {
        if (!out.contains("Current compiles:")) return -1;
        int n = 0;
        for (String line : out.split("\n")) {
            String l = line.strip();
            if (!l.isEmpty() && !l.equals("Empty") && !l.endsWith("Current compiles:") && !l.endsWith("compile queue:")) n++;
        }
        return n;
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
