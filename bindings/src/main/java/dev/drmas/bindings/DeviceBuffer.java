// DeviceBuffer.java — a block of CUDA device memory owned from Java, through libdrmas's own
// cudaMalloc/cudaMemcpy wrappers, so that the CUDA kernels can be driven and tested with
// nothing but a JRE. Its segment() is an address for the kernels, never dereferenced by Java.
package dev.drmas.bindings;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.Map;
import java.util.concurrent.ConcurrentSkipListMap;

public final class DeviceBuffer implements AutoCloseable {
    private static final int H2D = 1, D2H = 2;
    /** The address ranges of the live buffers (start -> end), so that a CPU call can refuse them. */
    private static final ConcurrentSkipListMap<Long, Long> LIVE = new ConcurrentSkipListMap<>();

    private final long bytes;
    private MemorySegment ptr;

    private DeviceBuffer(MemorySegment ptr, long bytes) {
        this.ptr = ptr;
        this.bytes = bytes;
    }

    /** Allocates {@code bytes} of device memory (uninitialised). */
    public static DeviceBuffer allocate(long bytes) {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment out = arena.allocate(ValueLayout.ADDRESS);
            LibDrmas.check(LibDrmas.cudaMalloc(Math.max(1, bytes), out));
            MemorySegment p = out.get(ValueLayout.ADDRESS, 0).reinterpret(bytes);
            LIVE.put(p.address(), p.address() + Math.max(1, bytes));
            return new DeviceBuffer(p, bytes);
        }
    }

    /** A device copy of {@code host} (a heap or native segment). */
    public static DeviceBuffer of(MemorySegment host) {
        DeviceBuffer d = allocate(host.byteSize());
        d.upload(host);
        return d;
    }

    /** Whether any byte of {@code s} lies in a live DeviceBuffer: device memory, which host code must not touch. */
    static boolean holdsDeviceMemory(MemorySegment s) {
        if (!s.isNative() || s.byteSize() == 0 || LIVE.isEmpty()) return false;
        long a = s.address(), e = a + s.byteSize();
        Map.Entry<Long, Long> below = LIVE.lowerEntry(e);  // the last buffer that starts before s ends
        return below != null && below.getValue() > a;
    }

    public MemorySegment segment() {
        if (ptr == null) throw new IllegalStateException("device buffer already freed");
        return ptr;
    }

    public long byteSize() {
        return bytes;
    }

    public void upload(MemorySegment host) {
        copy(segment(), host, Math.min(bytes, host.byteSize()), H2D);
    }

    public void download(MemorySegment host) {
        copy(host, segment(), Math.min(bytes, host.byteSize()), D2H);
    }

    // cudaMemcpy needs a native host address: heap segments go through a native bounce buffer.
    private static void copy(MemorySegment dst, MemorySegment src, long n, int kind) {
        if (n == 0) return;
        try (Arena arena = Arena.ofConfined()) {
            if (kind == H2D && !src.isNative()) {
                MemorySegment tmp = arena.allocate(n, 8);
                tmp.copyFrom(src.asSlice(0, n));
                LibDrmas.check(LibDrmas.cudaMemcpy(dst, tmp, n, kind));
            } else if (kind == D2H && !dst.isNative()) {
                MemorySegment tmp = arena.allocate(n, 8);
                LibDrmas.check(LibDrmas.cudaMemcpy(tmp, src, n, kind));
                dst.asSlice(0, n).copyFrom(tmp);
            } else {
                LibDrmas.check(LibDrmas.cudaMemcpy(dst, src, n, kind));
            }
        }
    }

    public static void synchronize() {
        LibDrmas.check(LibDrmas.cudaSynchronize(MemorySegment.NULL));
    }

    @Override
    public void close() {
        if (ptr != null) {
            MemorySegment p = ptr;
            ptr = null;
            LIVE.remove(p.address());
            LibDrmas.check(LibDrmas.cudaFree(p));
        }
    }
}
