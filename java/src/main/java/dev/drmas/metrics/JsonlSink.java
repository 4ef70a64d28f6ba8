// JsonlSink.java — metrics.jsonl: one JSON object per log call, {"step": 3, "wall_time": ...,
// then the scalars by name}, written with one unbuffered write per line so a crash loses at most
// the line being written. On resume the entries past the checkpoint's step are cut, so the file
// of a resumed run equals that of an uninterrupted one (wall_time aside). sync() forces it to the
// disk before each checkpoint, so that a power loss does not take lines the checkpoint has passed.
package dev.drmas.metrics;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonGenerator;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.StringWriter;
import java.io.UncheckedIOException;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.time.Instant;
import java.time.InstantSource;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * Keys are written in sorted order after {@code step} and {@code wall_time}, whatever the map's
 * iteration order, so two runs that log the same scalars write the same lines. JSON has no NaN or
 * infinity: a non-finite value is written as {@code null}, and the object gets a
 * {@code "nonfinite"} member naming what it was ({@code {"pg_loss": "NaN"}}), so that strict JSON
 * readers accept every line and nothing is lost.
 */
public final class JsonlSink implements MetricsSink {
    public static final String FILE_NAME = "metrics.jsonl";
    /** Members the sink writes itself; a scalar may not take one of these names. */
    public static final Set<String> RESERVED = Set.of("step", "wall_time", "nonfinite");

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final JsonFactory FACTORY = JSON.getFactory();

    private final Path file;
    private final InstantSource clock;
    private final FileChannel channel;  // what sync forces; out writes through it
    private final boolean regular;  // a device (a link to /dev/null) has nothing to sync, and fsync refuses it
    private OutputStream out;

    private JsonlSink(Path file, InstantSource clock, FileChannel channel) {
        this.file = file;
        this.clock = clock;
        this.channel = channel;
        this.regular = Files.isRegularFile(file);
        this.out = Channels.newOutputStream(channel);
    }

    /** A new run: the file is created, or emptied when it exists. */
    public static JsonlSink create(Path file) throws IOException {
        return open(file, -1, InstantSource.system());
    }

    /**
     * A run resumed from the checkpoint of step {@code resumeFromStep}: entries with a larger step
     * (logged after that checkpoint by the run that crashed) are removed, those up to it are kept
     * byte for byte, and new entries are appended. A last line cut short by a crash is dropped.
     * A negative step keeps nothing, as {@link #create} does.
     *
     * @throws IOException when the file cannot be read or rewritten, or a line other than the last
     *                     is not a JSON object with an integral {@code step} (message: file:line)
     */
    public static JsonlSink open(Path file, long resumeFromStep) throws IOException {
        return open(file, resumeFromStep, InstantSource.system());
    }

    /** As {@link #open(Path, long)}, with the clock that stamps wall_time (tests fix it). */
    public static JsonlSink open(Path file, long resumeFromStep, InstantSource clock) throws IOException {
        Path parent = file.toAbsolutePath().getParent();
        if (parent != null) Files.createDirectories(parent);
        if (resumeFromStep < 0 || !Files.exists(file)) {
            Files.write(file, new byte[0]);
        } else {
            truncateAfter(file, resumeFromStep);
        }
        FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE, StandardOpenOption.APPEND);
        try {
            // the file's name, created or renamed just now, must outlast a power loss as its lines will
            syncFolder(file.toAbsolutePath().getParent());
        } catch (IOException e) {
            ch.close();
            throw e;
        }
        return new JsonlSink(file, clock, ch);
    }

    public Path file() {
        return file;
    }

    /**
     * The scalars whose names start with {@code prefix} that {@code file}'s lines of step {@code step}
     * hold (non-finite values as written in a line's "nonfinite" member); empty when there are none or
     * the file is not there. A trainer resumed before it could record that a step's evaluation ran
     * reads here whether its line was logged. One pass, a line at a time; lines without the prefix
     * are not parsed.
     *
     * @throws IOException when the file cannot be read, or a line holding the prefix is not a JSON object
     */
    public static Map<String, Double> loggedAt(Path file, long step, String prefix) throws IOException {
        Map<String, Double> out = new TreeMap<>();
        if (!Files.isRegularFile(file)) return out;
        String quoted = "\"" + prefix;
        try (var in = Files.newBufferedReader(file, StandardCharsets.UTF_8)) {
            int lineNo = 0;
            for (String line; (line = in.readLine()) != null; ) {
                lineNo++;
                if (!line.contains(quoted)) continue;
                JsonNode n;
                try {
                    n = JSON.readTree(line);
                } catch (JsonProcessingException e) {
                    throw damaged(file, lineNo, "not a JSON object");
                }
                if (n == null || !n.isObject() || !n.path("step").canConvertToLong() || n.path("step").asLong() != step) continue;
                for (var it = n.fields(); it.hasNext(); ) {
                    var e = it.next();
                    if (!e.getKey().startsWith(prefix)) continue;
                    if (e.getValue().isNumber()) {
                        out.put(e.getKey(), e.getValue().asDouble());
                    } else if (e.getValue().isNull() && n.path("nonfinite").path(e.getKey()).isTextual()) {
                        out.put(e.getKey(), ReportRuns.Run.nonFinite(n.path("nonfinite").path(e.getKey()).asText()));
                    }
                }
            }
        }
        return out;
    }


    /** The file is the run's record: a failed write stops the run (MetricsLogger). */
    @Override
    public boolean essential() {
        return true;
    }

    @Override
    public synchronized void log(long step, Map<String, Double> scalars) {
        if (out == null) throw new IllegalStateException(file + " is closed");
        String line = toLine(step, wallTime(clock.instant()), scalars);
        try {
            // One write of the whole line, no buffer in between: what a crash can leave is a
            // line cut short, which open() recognises and drops.
            out.write(line.getBytes(StandardCharsets.UTF_8));
        } catch (IOException e) {
            throw new UncheckedIOException("cannot append to " + file + ": " + e.getMessage(), e);
        }
    }

    @Override
    public synchronized void sync() {
        if (out == null) throw new IllegalStateException(file + " is closed");
        if (!regular) return;
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

    static double wallTime(Instant t) {
        return t.getEpochSecond() + t.getNano() / 1e9;
    }

    /** The line for one log call, newline included. */
    static String toLine(long step, double wallTime, Map<String, Double> scalars) {
        var sorted = new TreeMap<String, Double>();
        for (var e : scalars.entrySet()) {
            String key = e.getKey();
            if (key == null) throw new IllegalArgumentException("metric name is null at step " + step);
            if (RESERVED.contains(key)) {
                throw new IllegalArgumentException("metric name '" + key + "' is reserved in " + FILE_NAME
                        + " (it holds " + RESERVED + "); rename the metric");
            }
            if (e.getValue() == null) {
                throw new IllegalArgumentException("metric '" + key + "' has no value (null) at step " + step);
            }
            sorted.put(key, e.getValue());
        }
        var text = new StringWriter();
        try (JsonGenerator g = FACTORY.createGenerator(text)) {
            g.writeStartObject();
            g.writeNumberField("step", step);
            g.writeNumberField("wall_time", wallTime);
            var nonFinite = new ArrayList<Map.Entry<String, Double>>();
            for (var e : sorted.entrySet()) {
                double v = e.getValue();
                if (Double.isFinite(v)) {
                    g.writeNumberField(e.getKey(), v);
                } else {
                    g.writeNullField(e.getKey());
                    nonFinite.add(e);
                }
            }
            if (!nonFinite.isEmpty()) {
                g.writeObjectFieldStart("nonfinite");
                // Double.toString spells these NaN, Infinity and -Infinity, as Python's json does.
                for (var e : nonFinite) g.writeStringField(e.getKey(), Double.toString(e.getValue()));
                g.writeEndObject();
            }
            g.writeEndObject();
        } catch (IOException e) {
            throw new UncheckedIOException(e); // a StringWriter does not fail
        }
        return text + "\n";
    }

    private static void truncateAfter(Path file, long resumeFromStep) throws IOException {
        // One pass, a line at a time (a run of 100K steps has a metrics file of ~160 MB, which need
        // not be in the heap at once). Until the first line to drop, the file stays as it is; from
        // there on, a copy of what came before and the kept lines go to a file beside it, which
        // replaces the file at the end: a crash now leaves the old file or the new one.
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        OutputStream kept = null;
        boolean done = false;
        try (InputStream in = Files.newInputStream(file)) {
            var line = new LineBytes(in);
            long before = 0; // the bytes of the file before the current line
            for (int lineNo = 1; line.read(); lineNo++) {
                // a last line without its newline is one a crash cut short: dropped, not read
                boolean keep = line.ended;
                if (keep) {
                    String text = new String(line.bytes, 0, line.length, StandardCharsets.UTF_8);
                    keep = !text.isBlank() && stepOf(file, lineNo, text) <= resumeFromStep;
                }
                if (!keep && kept == null) kept = startCopy(file, tmp, before);
                if (keep && kept != null) {
                    kept.write(line.bytes, 0, line.length);
                    kept.write('\n');
                }
                before += line.length + (line.ended ? 1 : 0);
            }
            if (kept == null) return; // every line kept: nothing to rewrite
            kept.close();
            // the new file synced before the rename, or a power loss could leave the name on a file
            // short of its lines
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.READ)) {
                ch.force(true);
            }
            Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            done = true;
        } finally {
            if (!done && kept != null) {
                try {
                    kept.close();
                } catch (IOException ignored) {
                    // the error on the way here is the one to report
                }
                Files.deleteIfExists(tmp);
            }
        }
    }

    /** A new file beside {@code file} holding its first {@code bytes} bytes, open for appending. */
    private static OutputStream startCopy(Path file, Path tmp, long bytes) throws IOException {
        FileChannel out = FileChannel.open(tmp, StandardOpenOption.CREATE, StandardOpenOption.TRUNCATE_EXISTING,
                StandardOpenOption.WRITE);
        try (FileChannel src = FileChannel.open(file, StandardOpenOption.READ)) {
            for (long at = 0; at < bytes; ) {
                long moved = src.transferTo(at, bytes - at, out);
                if (moved <= 0) throw new IOException(file + " shrank while it was read; nothing changed");
                at += moved;
            }
        } catch (IOException e) {
            out.close();
            throw e;
        }
        return new BufferedOutputStream(Channels.newOutputStream(out), 1 << 16);
    }

    /** The lines of a byte stream one at a time, each without its newline, in a reused buffer. */
    private static final class LineBytes {
        private final InputStream in;
        private final byte[] chunk = new byte[1 << 16];
        private int pos, end;
        byte[] bytes = new byte[4096];
        int length;
        boolean ended; // a newline ended it (else the stream did)

        LineBytes(InputStream in) {
            this.in = in;
        }

        /** Reads the next line; false at the end of the stream with nothing read. */
        boolean read() throws IOException {
            length = 0;
            ended = false;
            while (true) {
                if (pos == end) {
                    end = in.read(chunk);
                    pos = 0;
                    if (end <= 0) {
                        end = 0;
                        return length > 0;
                    }
                }
                int nl = pos;
                while (nl < end && chunk[nl] != '\n') nl++;
                int n = nl - pos;
                if (length + n > bytes.length) bytes = Arrays.copyOf(bytes, Math.max(2 * bytes.length, length + n));
                System.arraycopy(chunk, pos, bytes, length, n);
                length += n;
                pos = nl;
                if (nl < end) {
                    pos++;
                    ended = true;
                    return true;
                }
            }
        }
    }

    /**
     * Forces a folder's entries (names created, renamed in it) to the device, as
     * dev.drmas.train.Durable does (which this package cannot use: train depends on it); a no-op
     * where folders cannot be opened (not Linux).
     */
    static void syncFolder(Path dir) throws IOException {
        if (dir == null) return;
        try (FileChannel ch = FileChannel.open(dir, StandardOpenOption.READ)) {
            ch.force(true);
        } catch (IOException e) {
            if (!Files.isDirectory(dir)) throw e;
        }
    }

    private static long stepOf(Path file, int lineNo, String line) throws IOException {
        JsonNode node;
        try {
            node = JSON.readTree(line);
        } catch (JsonProcessingException e) {
            throw damaged(file, lineNo, "not JSON (" + dev.drmas.model.JsonProblem.describe(e) + ")"
                    + dev.drmas.model.JsonProblem.atColumn(e.getLocation()));
        }
        if (node == null || !node.isObject()) throw damaged(file, lineNo, "not a JSON object");
        JsonNode step = node.get("step");
        if (step == null || !step.isIntegralNumber() || step.asLong() < 0) {
            throw damaged(file, lineNo, "no integral \"step\" >= 0");
        }
        return step.asLong();
    }

    private static IOException damaged(Path file, int lineNo, String what) {
        return new IOException(file + ":" + lineNo + ": " + what + "; cannot resume its metrics. "
                + "Move the file away to start them afresh, or repair that line.");
    }
}
