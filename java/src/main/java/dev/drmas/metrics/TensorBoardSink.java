// TensorBoardSink.java — scalars as a TensorBoard event file (events.out.tfevents.<time>.<host>)
// that `tensorboard --logdir` reads, written without TensorFlow or protobuf-java: TFRecord framing
// with masked CRC32C, and the three small messages (Event, Summary, Summary.Value) encoded by hand.
// One record per step, flushed at once, so a crash loses nothing already logged; sync() forces the
// file to the disk before each checkpoint, so a power loss loses nothing the checkpoint has passed.
package dev.drmas.metrics;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.InstantSource;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.zip.CRC32C;

/**
 * The messages, as tensorflow/core/util/event.proto and summary.proto define them:
 * <pre>
 * Event   { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5;
 *           SessionLog session_log = 7; }
 * Summary { repeated Value value = 1; }     Value { string tag = 1; float simple_value = 2; }
 * SessionLog { SessionStatus status = 1; }  (START = 1)
 * </pre>
 * Each file begins with an Event whose file_version is "brain.Event:2", then SessionLog START at
 * the first step this writer will log (0 for a new run, the checkpoint's step + 1 for a resumed
 * one). TensorBoard takes a START after the first as a restart and discards the points at its step
 * and after from the files before it: what a crashed run logged past its last checkpoint, or a
 * whole earlier run when a new one reuses the directory. That is the counterpart of
 * {@link JsonlSink#open}'s truncation. (Its web loader ignores the first START it sees, its other
 * loader purges there too, so the first must be written even for a new run.) Checked by hand with
 * tensorboard 2.21.0: both EventAccumulators, and `tensorboard --logdir` serving the scalars with
 * --load_fast=true (its Rust data server) and false, after a crash and resume.
 *
 * <p>Non-finite values are left out: a chart has no place to draw NaN or an infinity, a missing
 * point is simply not drawn, and metrics.jsonl keeps what the values were. A finite value past
 * float's range is not one of them: it is written as ±Inf, what its conversion to float gives (and
 * TensorFlow's and PyTorch's writers store), so that TensorBoard marks it instead of drawing nothing
 * where the largest value was.
 */
public final class TensorBoardSink implements MetricsSink {
    static final String FILE_VERSION = "brain.Event:2";
    static final int SESSION_START = 1;
    private static final AtomicLong FILES_OPENED = new AtomicLong();

    private final Path file;
    private final InstantSource clock;
    private final FileChannel channel;  // what sync forces; out writes through it
    private OutputStream out;

    private TensorBoardSink(Path file, InstantSource clock, FileChannel channel) {
        this.file = file;
        this.clock = clock;
        this.channel = channel;
        this.out = Channels.newOutputStream(channel);
    }

    /** A new event file in {@code logDir} (created when missing) for a run starting afresh. */
    public static TensorBoardSink create(Path logDir) throws IOException {
        return open(logDir, -1, InstantSource.system());
    }

    /**
     * A new event file in {@code logDir} for a run resumed from the checkpoint of step
     * {@code resumeFromStep} (negative: a fresh run). Earlier files stay; see the class comment.
     */
    public static TensorBoardSink open(Path logDir, long resumeFromStep) throws IOException {
        return open(logDir, resumeFromStep, InstantSource.system());
    }

    /** As {@link #open(Path, long)}, with the clock that stamps wall_time and the file name. */
    public static TensorBoardSink open(Path logDir, long resumeFromStep, InstantSource clock) throws IOException {
        boolean made = !Files.isDirectory(logDir);
        Files.createDirectories(logDir);
        double now = JsonlSink.wallTime(clock.instant());
        // TensorFlow's name plus pid and a per-process count: a resumed run (or a second writer)
        // started within the same second must not append to another writer's file. TensorBoard
        // reads a directory's files in name order, which the zero-padded seconds make the order
        // they were started in.
        String name = "events.out.tfevents.%010d.%s.%d.%d".formatted((long) now, hostName(),
                ProcessHandle.current().pid(), FILES_OPENED.incrementAndGet());
        Path file = logDir.resolve(name);
        var sink = new TensorBoardSink(file, clock, FileChannel.open(file, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE));
        try {
            sink.writeRecord(fileVersionEvent(now));
            sink.writeRecord(sessionStartEvent(now, Math.max(resumeFromStep + 1, 0)));
            // the new names (the file; the folder when made now) must outlast a power loss as the records will
            JsonlSink.syncFolder(logDir);
            if (made) JsonlSink.syncFolder(logDir.toAbsolutePath().getParent());
        } catch (UncheckedIOException e) {
            sink.close();
            throw e.getCause();
        } catch (IOException e) {
            sink.close();
            throw e;
        }
        return sink;
    }

    public Path file() {
        return file;
    }

    /** The file is the run's record: a failed write stops the run (MetricsLogger). */
    @Override
    public boolean essential() {
        return true;
    }

    @Override
    public synchronized void log(long step, Map<String, Double> scalars) {
        if (out == null) throw new IllegalStateException(file + " is closed");
        byte[] event = scalarEvent(JsonlSink.wallTime(clock.instant()), step, scalars);
        if (event != null) writeRecord(event);
    }

    @Override
    public synchronized void sync() {
        if (out == null) throw new IllegalStateException(file + " is closed");
        try {
            channel.force(true);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot sync " + file + ": " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void close() {
        if (out == null) return;
        try {
            out.close();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot close " + file + ": " + e.getMessage(), e);
        } finally {
            out = null;
        }
    }

    private void writeRecord(byte[] data) {
        try {
            out.write(record(data));
            out.flush();
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write " + file + ": " + e.getMessage(), e);
        }
    }

    // ---- encoding (package-private for the tests) ----

    /** TFRecord framing: uint64 length, masked CRC32C of those 8 bytes, data, masked CRC32C of data (little-endian). */
    static byte[] record(byte[] data) {
        ByteBuffer b = ByteBuffer.allocate(8 + 4 + data.length + 4).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(data.length);
        b.putInt(maskedCrc32c(b.array(), 0, 8));
        b.put(data);
        b.putInt(maskedCrc32c(data, 0, data.length));
        return b.array();
    }

    /** TFRecord's mask: rotate right by 15 and add a constant, so that CRCs of CRCs stay useful. */
    static int maskedCrc32c(byte[] bytes, int offset, int length) {
        var crc = new CRC32C();
        crc.update(bytes, offset, length);
        int c = (int) crc.getValue();
        return ((c >>> 15) | (c << 17)) + 0xa282ead8;
    }

    static byte[] fileVersionEvent(double wallTime) {
        var e = new Proto();
        e.fixed64(1, Double.doubleToRawLongBits(wallTime));
        e.bytes(3, FILE_VERSION.getBytes(StandardCharsets.UTF_8));
        return e.toByteArray();
    }

    static byte[] sessionStartEvent(double wallTime, long step) {
        var log = new Proto();
        log.varint(1, SESSION_START);
        var e = new Proto();
        e.fixed64(1, Double.doubleToRawLongBits(wallTime));
        e.int64(2, step);
        e.bytes(7, log.toByteArray());
        return e.toByteArray();
    }

    /** The Event of one step, tags in sorted order; null when no value is finite. */
    static byte[] scalarEvent(double wallTime, long step, Map<String, Double> scalars) {
        var summary = new Proto();
        for (var s : new TreeMap<>(scalars).entrySet()) {
            if (s.getValue() == null) throw new IllegalArgumentException("metric '" + s.getKey() + "' has no value (null) at step " + step);
            double v = s.getValue();
            // a finite value past float's range (a gradient norm of 1e39, a run's largest spike) is written as the ±Inf
            // that (float) v gives, as TensorFlow's and PyTorch's writers store it in simple_value: TensorBoard marks such
            // a point on the chart, where leaving it out would hide the spike
            if (!Double.isFinite(v)) continue;
            var value = new Proto();
            value.bytes(1, s.getKey().getBytes(StandardCharsets.UTF_8));
            value.fixed32(2, Float.floatToRawIntBits((float) v));
            summary.bytes(1, value.toByteArray());
        }
        if (summary.size() == 0) return null;
        var e = new Proto();
        e.fixed64(1, Double.doubleToRawLongBits(wallTime));
        e.int64(2, step);
        e.bytes(5, summary.toByteArray());
        return e.toByteArray();
    }

    /** The few protobuf wire types an Event needs: varint (0), fixed64 (1), length-delimited (2), fixed32 (5). */
    static final class Proto {
        private final ByteArrayOutputStream buf = new ByteArrayOutputStream();

        void varint(int field, long value) {
            rawVarint(((long) field << 3) | 0);
            rawVarint(value);
        }

        /** proto3 leaves a field at its default (0) off the wire; so does TensorBoard's writer. */
        void int64(int field, long value) {
            if (value != 0) varint(field, value);
        }

        void fixed64(int field, long bits) {
            rawVarint(((long) field << 3) | 1);
            for (int i = 0; i < 8; i++) buf.write((int) (bits >>> (8 * i)));
        }

        void bytes(int field, byte[] data) {
            rawVarint(((long) field << 3) | 2);
            rawVarint(data.length);
            buf.writeBytes(data);
        }

        void fixed32(int field, int bits) {
            rawVarint(((long) field << 3) | 5);
            for (int i = 0; i < 4; i++) buf.write(bits >>> (8 * i));
        }

        /** Base-128, low group first, high bit set on all but the last byte; a negative int64 takes 10 bytes. */
        private void rawVarint(long v) {
            while ((v & ~0x7FL) != 0) {
                buf.write((int) ((v & 0x7F) | 0x80));
                v >>>= 7;
            }
            buf.write((int) v);
        }

        int size() {
            return buf.size();
        }

        byte[] toByteArray() {
            return buf.toByteArray();
        }
    }

    private static String hostName() {
        return Host.NAME;
    }

    /** The host name, looked up once. */
    private static final class Host {
        static final String NAME = lookUp();

        private static String lookUp() {
            String host = null;
            // What Python's socket.gethostname() gives (the kernel's node name), without the DNS
            // lookup InetAddress.getLocalHost() does, which can take seconds on a badly set up network.
            try {
                host = Files.readString(Path.of("/proc/sys/kernel/hostname")).strip();
            } catch (IOException | RuntimeException e) {
                // not Linux
            }
            if (host == null || host.isEmpty()) host = System.getenv("COMPUTERNAME"); // Windows
            if (host == null || host.isEmpty()) {
                try {
                    host = InetAddress.getLocalHost().getHostName();
                } catch (IOException e) {
                    host = "localhost";
                }
            }
            // TensorBoard only needs the file name to contain "tfevents"; keep it one path segment.
            host = host.replaceAll("[^A-Za-z0-9._-]", "_");
            return host.isEmpty() ? "localhost" : host;
        }
    }
}
