// PeakMemory.java — the peak memory of a phase of this process, as the trainer logs it and the
// benchmarks and `drmas plan`'s check read it. On the CPU LibTorch's allocator keeps no
// statistics. Where libdrmas_memcount.so is preloaded (LD_PRELOAD; `DRMAS_MEMCOUNT=1 ./drmas …`,
// the trainer's test suite) the measure is exact: the heap's live bytes, counted at every malloc
// and free, their high-water mark reset at the start of a phase. Elsewhere it is the process's
// resident high-water mark (VmHWM of /proc/self/status), reset through /proc/self/clear_refs
// ("5"), minus the resident size at that moment — which the kernel's batched counters, reclaimed
// file pages and the JVM's own heap can move by tens of MiB. Either way: what the phase added at
// its peak. Linux only; elsewhere the figures are absent (-1), never invented.
package dev.drmas.metrics;

import static java.lang.foreign.ValueLayout.ADDRESS;
import static java.lang.foreign.ValueLayout.JAVA_LONG;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.invoke.MethodHandle;
import java.nio.file.Files;
import java.nio.file.Path;

public final class PeakMemory {
    private static final Path STATUS = Path.of("/proc/self/status"), CLEAR_REFS = Path.of("/proc/self/clear_refs");

    /** Where the figures come from. */
    public enum Source {
        /** libdrmas_memcount's exact count of the heap's live bytes. */
        HEAP,
        /** The kernel's resident size of the process. */
        RESIDENT,
        /** Neither could be read. */
        NONE
    }

    /** drmas_memcount_live, _peak and _reset_peak, or null when the library is not preloaded. */
    private static final MethodHandle LIVE, PEAK, RESET;

    static {
        MethodHandle[] h = counter();
        LIVE = h == null ? null : h[0];
        PEAK = h == null ? null : h[1];
        RESET = h == null ? null : h[2];
    }

    private static MethodHandle[] counter() {
        try {
            Linker linker = Linker.nativeLinker();
            MethodHandle dlsym = linker.downcallHandle(linker.defaultLookup().find("dlsym").orElseThrow(),
                    FunctionDescriptor.of(ADDRESS, ADDRESS, ADDRESS));
            String[] names = {"drmas_memcount_live", "drmas_memcount_peak", "drmas_memcount_reset_peak"};
            MethodHandle[] out = new MethodHandle[names.length];
            try (Arena arena = Arena.ofConfined()) {
                for (int i = 0; i < names.length; i++) {
                    // RTLD_DEFAULT (NULL): the process's global scope, where a preloaded library is
                    MemorySegment fn = (MemorySegment) dlsym.invokeExact(MemorySegment.NULL, arena.allocateFrom(names[i]));
                    if (fn.address() == 0) return null;
                    out[i] = linker.downcallHandle(fn, FunctionDescriptor.of(JAVA_LONG));
                }
            }
            return out;
        } catch (Throwable e) {  // no dlsym, no native access: the resident size it is
            return null;
        }
    }

    private final Source source;
    private final long start;

    private PeakMemory(Source source, long start) {
        this.source = source;
        this.start = start;
    }

    /** Where this process's figures come from: the preloaded counter if there is one. */
    public static Source source() {
        return LIVE != null ? Source.HEAP : Files.isReadable(STATUS) ? Source.RESIDENT : Source.NONE;
    }

    /** Starts a phase: resets the high-water mark to the present figure. */
    public static PeakMemory start() {
        if (RESET != null) return new PeakMemory(Source.HEAP, call(RESET));
        try {
            Files.writeString(CLEAR_REFS, "5");
        } catch (IOException | UnsupportedOperationException | SecurityException e) {
            return new PeakMemory(Source.NONE, -1);
        }
        long rss = residentBytes();
        return new PeakMemory(rss < 0 ? Source.NONE : Source.RESIDENT, rss);
    }

    /** Whether the figures are real (the counter, or Linux with a resettable high-water mark). */
    public boolean available() {
        return source != Source.NONE;
    }

    /** Where this phase's figures come from. */
    public Source phaseSource() {
        return source;
    }

    /** The figure when the phase started, bytes (-1 when unknown). */
    public long startBytes() {
        return start;
    }

    /** The highest figure since the phase started, bytes (-1 when unknown). */
    public long peakBytes() {
        return switch (source) {
            case HEAP -> call(PEAK);
            case RESIDENT -> field("VmHWM:");
            case NONE -> -1;
        };
    }

    /** What the phase added at its peak: peak − start, bytes (-1 when unknown). */
    public long addedBytes() {
        long p = peakBytes();
        return p < 0 || !available() ? -1 : Math.max(0, p - start);
    }

    /** The process's resident size now, bytes (-1 when unknown). */
    public static long residentBytes() {
        return field("VmRSS:");
    }

    /** The heap's live bytes now by the preloaded counter (-1 when it is not preloaded). */
    public static long heapBytes() {
        return LIVE == null ? -1 : call(LIVE);
    }

    private static long call(MethodHandle h) {
        try {
            return (long) h.invokeExact();
        } catch (Throwable e) {
            throw new IllegalStateException("libdrmas_memcount: " + e, e);
        }
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
