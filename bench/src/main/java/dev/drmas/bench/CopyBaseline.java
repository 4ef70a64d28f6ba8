// CopyBaseline.java — the memory-copy yardstick: MemorySegment.copy split across the kernels'
// thread count (persistent pool). A copy of m bytes reads m and writes m, so to move the traffic
// of a kernel that touches B bytes (read + written) it copies B/2 bytes.
package dev.drmas.bench;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

final class CopyBaseline implements AutoCloseable {
    /** Below this many bytes per thread one thread copies (as the kernels: ~64K elements per thread). */
    static final long MIN_BYTES_PER_THREAD = 512 * 1024;

    private final Arena arena = Arena.ofShared();
    private final MemorySegment src, dst;
    private final long bytes;
    private final int threads;
    private final ExecutorService pool;

    /** A baseline that moves {@code trafficBytes} (read + written): it copies half of them. */
    static CopyBaseline forTraffic(long trafficBytes, int threads) {
        return new CopyBaseline((trafficBytes + 1) / 2, threads);
    }

    CopyBaseline(long bytes, int threads) {
        this.bytes = bytes;
        this.src = arena.allocate(Math.max(1, bytes), 64);
        this.dst = arena.allocate(Math.max(1, bytes), 64);
        src.fill((byte) 0x5a); // touch every page of both buffers before timing
        int t = (int) Math.max(1, Math.min(threads, bytes / MIN_BYTES_PER_THREAD));
        this.threads = t;
        this.pool = t > 1 ? Executors.newFixedThreadPool(t - 1, r -> {
            Thread th = new Thread(r, "copy-baseline");
            th.setDaemon(true);
            return th;
        }) : null;
    }

    long bytesCopied() {
        return bytes;
    }

    /** One copy of all the bytes; chunks are 64-byte aligned, thread 0's on the caller. */
    void run() {
        if (pool == null) {
            MemorySegment.copy(src, 0, dst, 0, bytes);
            return;
        }
        long chunk = ((bytes / threads) + 63) & ~63L;
        List<Future<?>> pending = new ArrayList<>(threads - 1);
        for (int i = 1; i < threads; i++) {
            long off = Math.min(bytes, i * chunk), len = Math.min(chunk, bytes - off);
            if (len > 0) pending.add(pool.submit(() -> MemorySegment.copy(src, off, dst, off, len)));
        }
        MemorySegment.copy(src, 0, dst, 0, Math.min(chunk, bytes));
        try {
            for (Future<?> f : pending) f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        } catch (ExecutionException e) {
            throw new IllegalStateException(e.getCause());
        }
    }

    /** A byte of the destination, so that the copy has an observable result. */
    byte probe() {
        return dst.get(java.lang.foreign.ValueLayout.JAVA_BYTE, Math.max(0, bytes - 1));
    }

    @Override
    public void close() {
        if (pool != null) pool.shutdownNow();
        arena.close();
    }
}
