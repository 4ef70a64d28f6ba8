// RawMemory.java — off-heap memory that is not zeroed first, for columns that are written whole
// before they are read (the narrowed int64/float64 columns of a safetensors input). Arena.allocate
// zeroes every byte on the calling thread, which is also where a fresh page is first touched; from
// the C library's malloc the pages are first touched by the writers, on every core that writes.
package dev.drmas.cli;

import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;

final class RawMemory {
    private RawMemory() {
    }

    /** malloc and free from the C library; null where they cannot be linked (then Arena.allocate). */
    private static final MethodHandle MALLOC, FREE;

    static {
        MethodHandle m = null, f = null;
        try {
            Linker linker = Linker.nativeLinker();
            var libc = linker.defaultLookup();
            var ms = libc.find("malloc");
            var fs = libc.find("free");
            if (ms.isPresent() && fs.isPresent()) {
                m = linker.downcallHandle(ms.get(), FunctionDescriptor.of(ValueLayout.ADDRESS, ValueLayout.JAVA_LONG));
                f = linker.downcallHandle(fs.get(), FunctionDescriptor.ofVoid(ValueLayout.ADDRESS));
            }
        } catch (RuntimeException | LinkageError e) {  // another platform, or native access denied
            m = null;
            f = null;
        }
        MALLOC = m;
        FREE = f;
    }

    /**
     * {@code bytes} (> 0) of memory whose content is undefined until written, freed when {@code arena}
     * closes; at least 16-byte aligned (malloc's guarantee).
     */
    static MemorySegment allocate(Arena arena, long bytes) {
        if (MALLOC != null) {
            try {
                MemorySegment p = (MemorySegment) MALLOC.invokeExact(bytes);
                if (!p.equals(MemorySegment.NULL)) {
                    return p.reinterpret(bytes, arena, s -> {
                        try {
                            FREE.invokeExact(s);
                        } catch (Throwable t) {
                            throw new IllegalStateException("free failed", t);
                        }
                    });
                }
            } catch (Throwable t) {
                if (t instanceof Error e) throw e;
            }
        }
        return arena.allocate(bytes, 64);
    }
}
