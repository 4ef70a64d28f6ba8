// SafetensorsStream.java — `drmas normalize` on a safetensors file whose rows are sorted as rollouts
// write them (uids ascending, each trajectory's rows together, trajectory ids ascending), in chunks
// of whole uid runs through small reused buffers: each chunk is read with positional reads, checked,
// normalised by one kernel call with its ids rebased to 0, and its advantages written at their place
// in the output; two workers take a half of the rows each (chunks small enough that the kernel runs
// one thread on each). No column is mapped or held whole: memory stays a few MiB whatever the rows
// (a mapped page's first touch cost more than reading it, and int64/float64 columns needed a
// narrowed copy of every row; bench/README.md, eighth session).
//
// Why the result is the whole-file call's, bit for bit: every statistic the modes use lies within one
// uid (its agents' segments, its group over trajectories or rows), on sorted rows the kernel takes its
// sorted path, which computes each uid run from that run's rows alone in a fixed order, and every
// chunk is called with the whole file's agent count. Anything this path does not cover — rows that
// are not sorted that way, an id out of range, a score that is not a finite float, a kernel error, a
// uid with more rows than a chunk — stops it with Fallback before the output is renamed into place;
// the caller then runs the whole-file path, which reports the error exactly as before (or handles the
// order). NormalizeSafetensorsTest compares both paths on multi-chunk inputs.
package dev.drmas.cli;

import static dev.drmas.cli.SafetensorsRows.F64;
import static dev.drmas.cli.SafetensorsRows.I32;
import static dev.drmas.cli.SafetensorsRows.I64;

import dev.drmas.algo.Advantages;
import dev.drmas.algo.NormConfig;
import dev.drmas.bindings.Backend;
import dev.drmas.bindings.DrmasException;
import dev.drmas.bindings.Kernels;
import dev.drmas.model.SafeTensorsHeader;
import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.LongFunction;

final class SafetensorsStream {
    private SafetensorsStream() {
    }

    /** This path does not cover the input (or a chunk failed): the caller runs the whole-file path. */
    static class Fallback extends RuntimeException {
        Fallback(String why) {
            super(why, null, false, false);
        }
    }

    /** Rows a chunk reads (a chunk normalises the whole uid runs among them); -Ddrmas.normalize.chunkRows for tests. */
    static int chunkRows() {
        return Math.max(64, Integer.getInteger("drmas.normalize.chunkRows", 1 << 16));
    }

    /**
     * Normalises {@code input} (a regular file) into {@code output} (replaced by rename: OutputFile)
     * chunk by chunk. Returns false, having written nothing, where the input is small (one chunk or
     * two: the whole-file path is as good) or its header is not one this path reads; throws Fallback
     * (the temporary output removed) where a chunk is not covered; other errors are the output's.
     */
    static boolean normalize(Path input, Path output, NormConfig cfg, LongFunction<Map<String, String>> metadata) throws IOException {
        FileChannel opened;
        try {
            opened = FileChannel.open(input, StandardOpenOption.READ);
        } catch (IOException e) {
            return false;  // (unreadable: the whole-file path reports it as the input's error)
        }
        try (FileChannel in = opened; Arena arena = Arena.ofShared()) {
            SafeTensorsHeader.Tensor[] t;
            try {
                // the mapping is only read where the header is: the data pages are never touched through it
                t = SafetensorsRows.columns(input.toString(), input, in.map(FileChannel.MapMode.READ_ONLY, 0, in.size(), arena));
            } catch (UserError e) {
                return false;  // the whole-file path reports it
            }
            long n = t[0].shape()[0];
            int chunk = chunkRows();
            if (n <= 2L * chunk) return false;
            byte[] header = SafetensorsRows.outputHeader(n, metadata.apply(n));
            var params = Advantages.params(cfg);
            OutputFile.write(output, (OutputFile.ChannelBody) ch -> {
                if (!(ch instanceof FileChannel out)) throw new Fallback("not a file");
                write(out, ByteBuffer.wrap(header), 0);
                // two workers, each on its own half (split where a uid run starts), with chunks small
                // enough that the kernel takes one thread for them: both cores read, check and normalise
                AtomicBoolean failed = new AtomicBoolean();  // one worker's failure stops the other at its next chunk
                Chunks a = new Chunks(input.toString(), in, t, n, chunk, arena, failed),
                        b = new Chunks(input.toString(), in, t, n, chunk, arena, failed);
                long split = a.runStartNear(n / 2);
                long[] agents = new long[2];
                both(failed, () -> agents[0] = a.agentMax(0, split), () -> agents[1] = b.agentMax(split, n));
                int numAgents = (int) Math.max(agents[0], agents[1]) + 1;
                long[] lastUid = new long[2];
                both(failed, () -> lastUid[0] = a.stream(0, split, params, numAgents, out, header.length),
                        () -> lastUid[1] = b.stream(split, n, params, numAgents, out, header.length));
                long maxUid = Math.max(lastUid[0], lastUid[1]);
                if (SafetensorsRows.tooManySegments((maxUid + 1) * Math.max(1, numAgents), n)) {
                    throw new Fallback("ids spread over a wide range");  // the whole-file path refuses it, naming the counts
                }
            });
            return true;
        }
    }

    /** A worker stopped because the other failed (that failure is the one reported). */
    private static final class Stopped extends Fallback {
        Stopped() {
            super("the other worker failed");
        }
    }

    private interface Work {
        void run() throws IOException;
    }

    /** {@code x} on a new thread and {@code y} on this one; the first failure is thrown once both have ended. */
    private static void both(AtomicBoolean failed, Work x, Work y) throws IOException {
        Throwable[] err = new Throwable[2];
        Thread other = Thread.ofPlatform().name("drmas-normalize").start(() -> {
            try {
                x.run();
            } catch (Throwable e) {
                failed.set(true);
                err[0] = e;
            }
        });
        try {
            y.run();
        } catch (Throwable e) {
            failed.set(true);
            err[1] = e;
        }
        try {
            other.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        }
        if (err[0] instanceof Stopped && err[1] != null) err[0] = null;  // report the cause, not the stop
        for (Throwable e : err) {
            if (e instanceof IOException io) throw io;
            if (e instanceof RuntimeException re) throw re;
            if (e instanceof Error er) throw er;
        }
    }

    private static void write(FileChannel out, ByteBuffer b, long pos) throws IOException {
        while (b.hasRemaining()) out.write(b, pos + b.position());
    }

    /** The chunk buffers (reused for every chunk) and the walk over the rows. */
    private static final class Chunks {
        final String source;  // the input, in messages
        final FileChannel in;
        final AtomicBoolean failed;
        final SafeTensorsHeader.Tensor[] t;
        final long n;
        final int cap;
        final boolean[] wide = new boolean[4];
        final MemorySegment[] raw = new MemorySegment[4];  // a chunk of each column as the file holds it
        final MemorySegment uid, traj, agent, narrowed, adv;  // the kernel's int32 columns, float64 scores as float32
        final int[] u, tr, ag;
        final long[] w;
        final double[] d;
        final float[] f;

        Chunks(String source, FileChannel in, SafeTensorsHeader.Tensor[] t, long n, int cap, Arena arena, AtomicBoolean failed) {
            this.source = source;
            this.in = in;
            this.failed = failed;
            this.t = t;
            this.n = n;
            this.cap = cap;
            for (int k = 0; k < 4; k++) {
                wide[k] = t[k].dtype().equals("I64") || t[k].dtype().equals("F64");
                raw[k] = arena.allocate((long) cap * (wide[k] ? 8 : 4), 64);
            }
            uid = arena.allocate(4L * cap, 64);
            traj = arena.allocate(4L * cap, 64);
            agent = arena.allocate(4L * cap, 64);
            narrowed = arena.allocate(4L * cap, 64);
            adv = arena.allocate(4L * cap, 64);
            u = new int[cap];
            tr = new int[cap];
            ag = new int[cap];
            w = new long[cap];
            d = new double[cap];
            f = new float[cap];
        }

        /** Reads rows [r, r + len) of column k into raw[k]. */
        void read(int k, long r, int len) throws IOException {
            int size = wide[k] ? 8 : 4;
            ByteBuffer b = raw[k].asSlice(0, (long) len * size).asByteBuffer();
            long pos = t[k].offset() + r * size;
            while (b.hasRemaining()) {
                int got;
                try {
                    got = in.read(b, pos + b.position());
                } catch (IOException e) {  // the input's error, not the output's (OutputFile reports IOExceptions as its own)
                    throw new UserError(source + ": cannot read: " + e.getMessage());
                }
                if (got < 0) throw new Fallback("the file ended early");
            }
        }

        /** Column k's rows [0, len) of the chunk as ids in [0, n) into dst; Fallback for any other value. */
        void ids(int k, int len, int[] dst) {
            if (wide[k]) {
                MemorySegment.copy(raw[k], I64, 0, w, 0, len);
                long bad = 0;
                for (int i = 0; i < len; i++) {
                    long v = w[i];
                    bad |= v | (n - 1 - v);  // negative exactly where v < 0 or v >= n
                    dst[i] = (int) v;
                }
                if (bad < 0) throw new Fallback("an id out of range");
            } else {
                MemorySegment.copy(raw[k], I32, 0, dst, 0, len);
                long bad = 0;
                for (int i = 0; i < len; i++) bad |= dst[i] | (n - 1 - dst[i]);  // negative exactly where out of [0, n)
                if (bad < 0) throw new Fallback("an id out of range");
            }
        }

        /** The first row at or after {@code mid} where a uid run starts (within a chunk), else n (one worker). */
        long runStartNear(long mid) throws IOException {
            if (mid <= 0 || mid >= n) return n;
            int len = (int) Math.min(cap, n - mid + 1);
            read(0, mid - 1, len);
            for (int i = 1; i < len; i++) {
                long prev = wide[0] ? raw[0].getAtIndex(I64, i - 1) : raw[0].getAtIndex(I32, i - 1);
                long cur = wide[0] ? raw[0].getAtIndex(I64, i) : raw[0].getAtIndex(I32, i);
                if (cur != prev) return mid - 1 + i;
            }
            return n;
        }

        /** The largest agent id in rows [lo, hi) (-1 for none); Fallback for one out of range. */
        long agentMax(long lo, long hi) throws IOException {
            int max = -1;
            for (long r = lo; r < hi; r += cap) {
                int len = (int) Math.min(cap, hi - r);
                read(2, r, len);
                ids(2, len, ag);
                for (int i = 0; i < len; i++) max = Math.max(max, ag[i]);
            }
            return max;
        }

        /** One id of row r of column k (to continue the checks across a worker's first row). */
        long idAt(int k, long r) throws IOException {
            read(k, r, 1);
            return wide[k] ? raw[k].get(I64, 0) : raw[k].get(I32, 0);
        }

        /**
         * Normalises rows [lo, hi) (lo at a uid run's start) chunk by chunk and writes their advantages
         * at their place in the output; returns the last row's uid.
         */
        long stream(long lo, long hi, Kernels.NormParams params, int numAgents, FileChannel out, long dataStart) throws IOException {
            long r = lo;
            long prevUid = lo == 0 ? -1 : idAt(0, lo - 1), prevTraj = lo == 0 ? -1 : idAt(1, lo - 1);  // the row before's ids
            if (prevUid >= n || prevTraj >= n || prevUid < -1 || prevTraj < -1) throw new Fallback("an id out of range");
            while (r < hi) {
                if (failed.get()) throw new Stopped();
                int len = (int) Math.min(cap, hi - r);
                read(0, r, len);
                ids(0, len, u);
                int rows = len;
                if (r + len < hi) {  // end at the last uid run that starts in the chunk
                    rows = len - 1;
                    while (rows > 0 && u[rows] == u[rows - 1]) rows--;
                    if (rows == 0) throw new Fallback("a uid with more rows than a chunk");
                }
                for (int k = 1; k < 4; k++) read(k, r, rows);  // the rest of the columns for the whole runs only
                ids(1, rows, tr);
                ids(2, rows, ag);
                // sorted as rollouts write them: uids ascending, trajectory ids ascending and changing
                // where the uid does (so a trajectory lies in one uid), across chunks too
                // (the kernel's own order check: the uid never falls; the trajectory id never falls
                // within a uid and rises where the uid changes; negative where either fails)
                if (u[0] <= prevUid || tr[0] <= prevTraj) throw new Fallback("rows not sorted by uid and trajectory");
                int unsorted = 0;
                for (int i = 1; i < rows; i++) {
                    int du = u[i] - u[i - 1], dt = tr[i] - tr[i - 1];
                    unsorted |= du | (dt + (du == 0 ? 1 : 0) - 1);
                }
                if (unsorted < 0) throw new Fallback("rows not sorted by uid and trajectory");
                // ids rebased to the first uid and trajectory after the previous chunk's
                int ub = (int) (prevUid + 1), tb = (int) (prevTraj + 1);
                int numUids = u[rows - 1] - ub + 1, numTrajs = tr[rows - 1] - tb + 1;
                if (SafetensorsRows.tooManySegments((long) numUids * Math.max(1, numAgents), rows)) {
                    throw new Fallback("ids spread over a wide range");
                }
                for (int i = 0; i < rows; i++) {
                    u[i] -= ub;
                    tr[i] -= tb;
                }
                MemorySegment.copy(u, 0, uid, ValueLayout.JAVA_INT, 0, rows);
                MemorySegment.copy(tr, 0, traj, ValueLayout.JAVA_INT, 0, rows);
                MemorySegment.copy(ag, 0, agent, ValueLayout.JAVA_INT, 0, rows);
                MemorySegment score = raw[3];  // float32 scores as the file holds them (the kernel checks them)
                if (wide[3]) {
                    score = narrowed;
                    MemorySegment.copy(raw[3], F64, 0, d, 0, rows);
                    double big = 0;  // NaN-sticky
                    for (int i = 0; i < rows; i++) {
                        big = Math.max(big, Math.abs(d[i]));
                        f[i] = (float) d[i];
                    }
                    if (!(big < ScoredRows.FLOAT_LIMIT)) throw new Fallback("a score that is not a finite float");
                    MemorySegment.copy(f, 0, score, ValueLayout.JAVA_FLOAT, 0, rows);
                }
                try {
                    Kernels.advantage(Backend.CPU, params, rows, score, uid, traj, agent, numUids, numTrajs, Math.max(1, numAgents),
                            adv, null, null);
                } catch (DrmasException e) {
                    throw new Fallback("the kernel refused a chunk: " + e.getMessage());
                }
                if (SafetensorsRows.firstNonFinite(adv, rows) >= 0) {
                    throw new Fallback("an advantage past float32's range");  // the whole-file path names the row
                }
                write(out, adv.asSlice(0, 4L * rows).asByteBuffer(), dataStart + 4 * r);
                prevUid = u[rows - 1] + ub;
                prevTraj = tr[rows - 1] + tb;
                r += rows;
            }
            return prevUid;
        }

    }
}
