// FileSpace.java — reserves a new file's blocks (posix_fallocate, through FFM) before OutputFile
// writes it through a mapping. A store into a mapped page the filesystem cannot back (a full disk,
// a quota) is a SIGBUS, and from libdrmas's native code that would end the JVM; with the blocks
// reserved first, a full disk is an IOException before anything is computed. Where the space
// cannot be reserved this way (no posix_fallocate, a filesystem that refuses it), the caller
// writes through a buffer instead.
package dev.drmas.cli;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.FunctionDescriptor;
import java.lang.foreign.Linker;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.SymbolLookup;
import java.lang.foreign.ValueLayout;
import java.lang.invoke.MethodHandle;
import java.nio.file.Path;
import java.util.Optional;

final class FileSpace {
    private FileSpace() {
    }

    private static final int O_WRONLY = 1, O_CLOEXEC = 0x80000;
    // errno values (Linux): the ones that mean "no room", and the ones that mean "not here"
    private static final int EFBIG = 27, ENOSPC = 28, EDQUOT = 122, EINVAL = 22, EOPNOTSUPP = 95, ENODEV = 19;

    /** open, posix_fallocate and close from the C library; null where they cannot be linked. */
    private static final MethodHandle[] LIBC = link();

    private static MethodHandle[] link() {
        try {
            Linker linker = Linker.nativeLinker();
            SymbolLookup libc = linker.defaultLookup();
            Optional<MemorySegment> open = libc.find("open"), fallocate = libc.find("posix_fallocate"), close = libc.find("close");
            if (open.isEmpty() || fallocate.isEmpty() || close.isEmpty()) return null;
            return new MethodHandle[] {
                // int open(const char*, int, ...): the mode as its one variadic argument
                linker.downcallHandle(open.get(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.ADDRESS, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_INT), Linker.Option.firstVariadicArg(2)),
                // int posix_fallocate(int, off_t, off_t): 0 or an errno value (errno itself is not set)
                linker.downcallHandle(fallocate.get(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT,
                        ValueLayout.JAVA_LONG, ValueLayout.JAVA_LONG)),
                linker.downcallHandle(close.get(), FunctionDescriptor.of(ValueLayout.JAVA_INT, ValueLayout.JAVA_INT)),
            };
        } catch (RuntimeException | LinkageError e) {  // another platform, or native access denied
            return null;
        }
    }

    /**
     * Reserves bytes [0, size) of the existing file {@code file} (growing it to size). Returns false
     * where that cannot be done here (the caller must then not write it through a mapping); throws
     * an IOException with the system's reason where there is no room.
     */
    static boolean reserve(Path file, long size) throws IOException {
        if (LIBC == null) return false;
        if (size == 0) return true;
        int rc;
        try (Arena arena = Arena.ofConfined()) {
            int fd = (int) LIBC[0].invokeExact(arena.allocateFrom(file.toAbsolutePath().toString()), O_WRONLY | O_CLOEXEC, 0);
            if (fd < 0) return false;
            try {
                rc = (int) LIBC[1].invokeExact(fd, 0L, size);
            } finally {
                int ignored = (int) LIBC[2].invokeExact(fd);
            }
        } catch (Throwable t) {
            if (t instanceof Error e) throw e;
            return false;
        }
        return switch (rc) {
            case 0 -> true;
            case ENOSPC -> throw new IOException("No space left on device");
            case EDQUOT -> throw new IOException("Disk quota exceeded");
            case EFBIG -> throw new IOException("File too large");
            case EINVAL, EOPNOTSUPP, ENODEV -> false;
            default -> throw new IOException("cannot reserve " + size + " bytes (posix_fallocate: error " + rc + ")");
        };
    }
}
