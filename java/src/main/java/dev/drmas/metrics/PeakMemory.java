// PeakMemory.java — the peak memory of a phase of this process, as the trainer logs it and the
// benchmarks and `drmas plan`'s check read it. On the CPU LibTorch's allocator keeps no
// statistics, so the measure is the process's resident high-water mark (VmHWM of
// /proc/self/status), reset at the start of a phase through /proc/self/clear_refs ("5"), minus the
// resident size at that moment: what the phase added at its peak. Linux only; elsewhere the
// figures are absent (-1), never invented.
package dev.drmas.metrics;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

public final class PeakMemory {
    private static final Path STATUS = Path.of("/proc/self/status"), CLEAR_REFS = Path.of("/proc/self/clear_refs");

    private final long startRss;
    private final boolean reset;

    private PeakMemory(long startRss, boolean reset) {
        this.startRss = startRss;
        this.reset = reset;
    }

    /** Starts a phase: resets the high-water mark to the present resident size. */
    public static PeakMemory start() {
        boolean reset;
        try {
            Files.writeString(CLEAR_REFS, "5");
            reset = true;
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            reset = false;
        }
        return new PeakMemory(residentBytes(), reset);
    }

    /** Whether the figures are real (Linux with a resettable high-water mark). */
    public boolean available() {
        return reset && startRss >= 0;
    }

    /** The resident size when the phase started, bytes (-1 when unknown). */
    public long startBytes() {
        return startRss;
    }

    /** The highest resident size since the phase started, bytes (-1 when unknown). */
    public long peakBytes() {
        return available() ? field("VmHWM:") : -1;
    }

    /** What the phase added at its peak: peak − start, bytes (-1 when unknown). */
    public long addedBytes() {
        long p = peakBytes();
        return p < 0 ? -1 : Math.max(0, p - startRss);
    }

    /** The process's resident size now, bytes (-1 when unknown). */
    public static long residentBytes() {
        return field("VmRSS:");
    }

    private static long field(String name) {
        try {
            for (String line : Files.readAllLines(STATUS)) {
                if (!line.startsWith(name)) continue;
                String[] f = line.substring(name.length()).trim().split("\\s+");
                return Long.parseLong(f[0]) * 1024;  // "kB"
            }
        } catch (IOException | NumberFormatException | SecurityException e) {
            return -1;
        }
        return -1;
    }
}
