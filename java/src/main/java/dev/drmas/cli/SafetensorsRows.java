// SafetensorsRows.java — `drmas normalize`'s columnar input and output. The input holds 1-D tensors
// uid, traj, agent (I32 or I64) and score (F32 or F64), as safetensors.numpy.save_file writes
// them; the file is memory-mapped (a stream, such as stdin, once its header is checked, is copied
// to an unlinked temporary file and mapped) and tensors that are already int32 / float32 go to the kernel
// as slices of the mapping, without a copy; I64 and F64 are narrowed once, with an error naming
// the tensor and the row where a value does not fit. The ids are the caller's dense ids: each
// count is the largest id + 1, and ids must lie in [0, rows), so that the kernel's per-segment
// statistics stay proportional to the rows. Checks and narrowing run in chunks on both cores; an
// error names the first bad row in file order all the same. The output is one F32 tensor,
// advantage, row for row, which the kernel writes into the output file's own pages (Output).
package dev.drmas.cli;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import dev.drmas.model.ModelFileException;
import dev.drmas.model.SafeTensorsHeader;
import java.io.IOException;
import java.io.InputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import java.util.function.Consumer;
import java.util.function.LongUnaryOperator;
import java.util.stream.IntStream;

final class SafetensorsRows implements AutoCloseable {
    /** The tensors a normalize input holds, in the order errors list them. */
    static final String[] COLUMNS = {"uid", "traj", "agent", "score"};
    /** More (uid, agent) segments a row than this is not a dense numbering but ids spread over a range. */
    static final long MAX_SEGMENTS_PER_ROW = 64;

    /** Whether {@code segments} (uid, agent) statistics are too many for {@code rows} rows (MAX_SEGMENTS_PER_ROW a row, 1024 rows at least). */
    static boolean tooManySegments(long segments, long rows) {
        return segments > MAX_SEGMENTS_PER_ROW * Math.max(rows, 1024);
    }

    /** The first of {@code count} float32 values in {@code values} that is not finite, or -1. */
    static long firstNonFinite(MemorySegment values, long count) {
        for (long i = 0; i < count; i++) {
            if (!Float.isFinite(values.getAtIndex(ValueLayout.JAVA_FLOAT_UNALIGNED, i))) return i;
        }
        return -1;
    }
    // the file's little-endian values, at any alignment (SafetensorsStream reads the same ones)
    static final ValueLayout.OfInt I32 = ValueLayout.JAVA_INT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfLong I64 = ValueLayout.JAVA_LONG_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfFloat F32 = ValueLayout.JAVA_FLOAT_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);
    static final ValueLayout.OfDouble F64 = ValueLayout.JAVA_DOUBLE_UNALIGNED.withOrder(ByteOrder.LITTLE_ENDIAN);

    final String source;
    final long n;
    /** float32 scores and int32 ids, n each, 4-byte aligned: slices of the mapping or narrowed copies. */
    final MemorySegment scores, uid, traj, agent;
    final int numUids, numTrajs, numAgents;
    /** The input's dtypes, by tensor (for messages and the output's metadata). */
    final Map<String, String> dtypes = new LinkedHashMap<>();
    // owns the mapping and the narrowed copies: they live until close(), after the output is written
    private final Arena arena;

    private SafetensorsRows(String source, Arena arena, long n, MemorySegment[] cols, int[] counts) {
        this.source = source;
        this.arena = arena;
        this.n = n;
        this.uid = cols[0];
        this.traj = cols[1];
        this.agent = cols[2];
        this.scores = cols[3];
        this.numUids = counts[0];
        this.numTrajs = counts[1];
        this.numAgents = counts[2];
    }

    @Override
    public void close() {
        if (arena.scope().isAlive()) arena.close();
    }

    /**
     * Maps and checks {@code input}. "-" (stdin) and other streams (a FIFO) cannot be mapped: their
     * length and header are read and checked first, then the rest is copied to an unlinked
     * temporary file (spool).
     */
    static SafetensorsRows open(Path input) {
        boolean stdin = input.toString().equals("-");
        String name = stdin ? "<stdin>" : input.toString();
        if (!stdin && Files.isDirectory(input)) throw new UserError(name + ": is a folder, not a safetensors file");
        Arena arena = Arena.ofShared();
        try {
            MemorySegment seg;
            if (!stdin && Files.isRegularFile(input)) {
                try (FileChannel ch = FileChannel.open(input, StandardOpenOption.READ)) {
                    seg = ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size(), arena);
                }
            } else {
                try (InputStream in = stdin ? StdStreams.stdin() : Files.newInputStream(input)) {
                    seg = spool(name, in, arena);
                }
            }
            return from(name, Path.of(name), seg, arena);
        } catch (NoSuchFileException e) {
            arena.close();
            throw new UserError(name + ": no such file");
        } catch (IOException e) {
            arena.close();
            throw new UserError(name + ": cannot read: " + Errors.reason(e), e);
        } catch (RuntimeException e) {
            arena.close();
            throw e;
        }
    }

    /** Where stdin is copied: java.io.tmpdir (/tmp unless DRMAS_JAVA_OPTS=-Djava.io.tmpdir=DIR says otherwise). */
    static Path spoolFolder() {
        return Path.of(System.getProperty("java.io.tmpdir"));
    }

    /**
     * A stream's safetensors bytes, mapped from an unlinked temporary file in spoolFolder(). The
     * 8-byte length and the header are read and checked first (the columns this command needs
     * included), so a bad header fails before anything is copied; then the file the header describes
     * is copied, its blocks reserved first, so that a folder without room fails at once, naming
     * itself. The file loses its name as soon as it is open: nothing stays in the folder on any path
     * (an error, a kill), and its blocks are freed when the mapping is (the command's end).
     * IOExceptions are the stream's; the copy's own failures are UserErrors.
     */
    static MemorySegment spool(String name, InputStream in, Arena arena) throws IOException {
        Path file = Path.of(name);
        byte[] len = in.readNBytes(8);
        if (len.length < 8) {
            throw new UserError(name + ": " + len.length + " bytes, too short for a safetensors file (8-byte header length, JSON header, data)");
        }
        long n = ByteBuffer.wrap(len).order(ByteOrder.LITTLE_ENDIAN).getLong();
        try {
            SafeTensorsHeader.checkHeaderLength(file, n);  // (before anything more is read)
            byte[] json = in.readNBytes((int) n);
            if (json.length < n) {
                throw new UserError(name + ": header length " + n + " exceeds the input (it ended after " + (8 + json.length)
                        + " bytes): not a safetensors file, or truncated");
            }
            SafeTensorsHeader.Parsed h = SafeTensorsHeader.header(file, json, SafeTensorsHeader.ALL_DTYPES);
            columns(name, h);
            long size = SafeTensorsHeader.tile(file, h, -1);  // the file the header describes
            Path dir = spoolFolder();
            Path tmp;
            try {
                tmp = Files.createTempFile(dir, "drmas-normalize-", ".safetensors");
            } catch (IOException e) {
                throw noRoom(name, size, dir, e);
            }
            FileChannel opened = null;
            try {
                opened = FileChannel.open(tmp, StandardOpenOption.READ, StandardOpenOption.WRITE);
                FileSpace.reserve(tmp, size);  // (by name: before the name goes)
            } catch (IOException e) {
                if (opened != null) opened.close();
                throw noRoom(name, size, dir, e);
            } finally {
                Files.deleteIfExists(tmp);  // unlinked at once: the descriptor, then the mapping, keep the blocks
            }
            FileChannel ch = opened;
            try (ch) {
                long at = write(ch, ByteBuffer.wrap(len), 0, name, size, dir);
                at = write(ch, ByteBuffer.wrap(json), at, name, size, dir);
                byte[] buf = new byte[1 << 20];
                while (at < size) {
                    int r = in.read(buf, 0, (int) Math.min(buf.length, size - at));
                    if (r < 0) break;
                    at = write(ch, ByteBuffer.wrap(buf, 0, r), at, name, size, dir);
                }
                if (at == size && in.read() >= 0) {  // one byte tells: a stream need not be read to its end to be refused
                    throw new UserError(name + ": the input goes on after the last tensor's data, which ends at byte " + size
                            + " (not a safetensors file as its header describes)");
                }
                ch.truncate(at);  // (the reservation's zeros past a short input: from() names the tensor it cut)
                // the mapping keeps the pages after the channel (and the last name) are gone
                return ch.map(FileChannel.MapMode.READ_ONLY, 0, at, arena);
            }
        } catch (ModelFileException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /** {@code b} written at {@code pos} of the temporary copy; returns the position after it. A failure names the folder. */
    private static long write(FileChannel ch, ByteBuffer b, long pos, String name, long size, Path dir) {
        try {
            while (b.hasRemaining()) pos += ch.write(b, pos);
            return pos;
        } catch (IOException e) {
            throw noRoom(name, size, dir, e);
        }
    }

    private static UserError noRoom(String name, long size, Path dir, IOException e) {
        return noRoomForCopy(name, " (" + size + " bytes)", dir, e, "safetensors from a stream is mapped from such a copy");
    }

    /**
     * A stream's temporary copy in {@code dir} that could not be made or written (a full disk, a
     * file-size limit): the folder, why, and the ways out. {@code size} is " (N bytes)" where known;
     * {@code why} says what the copy is for. JSONL from a stream (ScoredRows) says it so too.
     */
    static UserError noRoomForCopy(String name, String size, Path dir, IOException e, String why) {
        return new UserError(name + ": cannot keep a copy of the input" + size + " in a temporary file in " + dir + ": "
                + Errors.reason(e) + " (" + why + "; make room there, point "
                + "DRMAS_JAVA_OPTS=-Djava.io.tmpdir=DIR at a folder with room, or give the file's name instead)", e);
    }

    /** The rows of the safetensors bytes {@code seg}; errors name {@code name}. */
    static SafetensorsRows from(String name, Path file, MemorySegment seg, Arena arena) {
        SafeTensorsHeader.Tensor[] t = columns(name, file, seg);
        long n = t[0].shape()[0];
        MemorySegment[] cols = new MemorySegment[4];
        int[] counts = new int[3];
        for (int c = 0; c < 3; c++) {
            String where = name + ": tensor '" + COLUMNS[c] + "'";
            MemorySegment data = seg.asSlice(t[c].offset(), t[c].bytes());
            if (t[c].dtype().equals("I32")) {
                counts[c] = countOf(data, n, where);
                cols[c] = aligned(data, arena);
            } else {
                cols[c] = RawMemory.allocate(arena, 4 * Math.max(1, n));  // every value is written by narrow
                counts[c] = narrow(data, cols[c], n, where, t[c].offset());
            }
        }
        MemorySegment sdata = seg.asSlice(t[3].offset(), t[3].bytes());
        if (t[3].dtype().equals("F32")) {
            cols[3] = aligned(sdata, arena);
        } else {
            cols[3] = RawMemory.allocate(arena, 4 * Math.max(1, n));  // every value is written by narrowScores
            narrowScores(sdata, cols[3], n, name + ": tensor 'score'", t[3].offset());
        }
        long segments = (long) counts[0] * Math.max(1, counts[2]);
        if (tooManySegments(segments, n)) {
            throw new UserError(String.format(Locale.ROOT, "%s: uid and agent ids span %d x %d = %d (uid, agent) segments for %d rows: "
                    + "the ids must be dense (0..count-1 for each), as the statistics are sized by the largest id + 1",
                    name, counts[0], counts[2], segments, n));
        }
        SafetensorsRows rows = new SafetensorsRows(name, arena, n, cols, counts);
        for (int c = 0; c < 4; c++) rows.dtypes.put(COLUMNS[c], t[c].dtype());
        return rows;
    }

    /**
     * The uid, traj, agent and score tensors of the safetensors bytes {@code seg} (only the header is
     * read), checked: present, of the allowed dtypes, 1-D, of one length; errors name {@code name}.
     */
    static SafeTensorsHeader.Tensor[] columns(String name, Path file, MemorySegment seg) {
        try {
            return columns(name, SafeTensorsHeader.parse(file, seg, SafeTensorsHeader.ALL_DTYPES));
        } catch (ModelFileException e) {
            throw new UserError(e.getMessage(), e);
        }
    }

    /** The columns of the parsed header {@code h}, checked as above (the data is not looked at). */
    static SafeTensorsHeader.Tensor[] columns(String name, SafeTensorsHeader.Parsed h) {
        SafeTensorsHeader.Tensor[] t = new SafeTensorsHeader.Tensor[4];
        for (SafeTensorsHeader.Tensor x : h.tensors()) {
            int c = Arrays.asList(COLUMNS).indexOf(x.name());
            if (c >= 0) t[c] = x;
        }
        for (int c = 0; c < 4; c++) {
            if (t[c] == null) {
                throw new UserError(name + ": no tensor '" + COLUMNS[c] + "' (a normalize input holds uid, traj and agent, "
                        + "I32 or I64, and score, F32 or F64, each of shape [rows]; it has " + names(h) + ")");
            }
            String want = c < 3 ? "I32 or I64" : "F32 or F64";
            String d = t[c].dtype();
            if (c < 3 ? !d.equals("I32") && !d.equals("I64") : !d.equals("F32") && !d.equals("F64")) {
                throw new UserError(name + ": tensor '" + COLUMNS[c] + "' is " + d + "; it must be " + want);
            }
            if (t[c].shape().length != 1) {
                throw new UserError(name + ": tensor '" + COLUMNS[c] + "' has shape " + Arrays.toString(t[c].shape())
                        + "; it must be 1-D, one value a row");
            }
        }
        for (int c = 1; c < 4; c++) {
            if (t[c].shape()[0] != t[0].shape()[0]) {
                throw new UserError(name + ": tensor '" + COLUMNS[c] + "' has " + t[c].shape()[0] + " rows, but 'uid' has " + t[0].shape()[0]
                        + " (every tensor holds one value a row)");
            }
        }
        return t;
    }

    private static String names(SafeTensorsHeader.Parsed h) {
        if (h.tensors().isEmpty()) return "no tensors";
        StringBuilder sb = new StringBuilder();
        for (SafeTensorsHeader.Tensor x : h.tensors()) sb.append(sb.isEmpty() ? "" : ", ").append("'").append(x.name()).append("'");
        return sb.toString();
    }

    /** The mapping's slice where it is 4-byte aligned (as the kernel reads it), else an aligned copy. */
    private static MemorySegment aligned(MemorySegment data, Arena arena) {
        if (data.address() % 4 == 0) return data;
        MemorySegment copy = arena.allocate(Math.max(4, data.byteSize()), 64);
        MemorySegment.copy(data, 0, copy, 0, data.byteSize());
        return copy;
    }

    /** Values are checked and narrowed a block at a time through heap arrays, where the loops vectorise. */
    private static final int BLOCK = 1 << 13;
    /** The columns are checked in chunks of this many values, on both cores (the common pool and the caller). */
    private static final long CHUNK = 1 << 20;

    /** The largest of {@code chunk}'s answers for the chunks of [0, n) (each the offset of its first value), in parallel. */
    private static long maxOverChunks(long n, LongUnaryOperator chunk) {
        int chunks = Math.toIntExact((n + CHUNK - 1) / CHUNK);
        return IntStream.range(0, chunks).parallel().mapToLong(c -> chunk.applyAsLong(c * CHUNK)).max().orElse(-1);
    }

    /**
     * The count of an int32 id column (largest id + 1) after checking every id is in [0, n). As
     * unsigned numbers the ids are all below n exactly when their unsigned maximum is (a negative
     * id is a huge unsigned one): one reduction a value. The first bad row is then found in order.
     */
    private static int countOf(MemorySegment data, long n, String where) {
        long max = maxOverChunks(n, off -> {
            int[] buf = new int[BLOCK];
            int m = Integer.MIN_VALUE;  // the unsigned maximum, its sign bit flipped so that a signed max computes it
            for (long end = Math.min(n, off + CHUNK); off < end; off += BLOCK) {
                int len = (int) Math.min(BLOCK, end - off);
                MemorySegment.copy(data, I32, 4 * off, buf, 0, len);
                for (int k = 0; k < len; k++) m = Math.max(m, buf[k] ^ Integer.MIN_VALUE);
            }
            return Integer.toUnsignedLong(m ^ Integer.MIN_VALUE);
        });
        if (n > 0 && max >= n) {
            for (long i = 0; i < n; i++) {
                int v = data.get(I32, 4 * i);
                if (v < 0 || v >= n) throw outOfRange(where, i, v, n);
            }
        }
        return n == 0 ? 0 : countFrom(max, where);
    }

    /**
     * The count of an id column whose largest id is {@code max}: max + 1, which must fit int32 as
     * the kernel's counts do (a column of more than 2^31 rows can hold a larger id in [0, n)).
     */
    static int countFrom(long max, String where) {
        if (max >= Integer.MAX_VALUE) {
            throw new UserError(where + ": id " + max + " makes a count of " + (max + 1) + ", above 2^31 - 1 (ids are dense, "
                    + "0..count-1, and each count must fit int32)");
        }
        return (int) (max + 1);
    }

    /** int64 ids to int32 in {@code out}, checking each is in [0, n); returns the count. */
    private static int narrow(MemorySegment data, MemorySegment out, long n, String where, long fileOffset) {
        long max = maxOverChunks(n, off -> {
            long[] in = new long[BLOCK];
            int[] ints = new int[BLOCK];
            long hi = -1;
            for (long end = Math.min(n, off + CHUNK); off < end; off += BLOCK) {
                int len = (int) Math.min(BLOCK, end - off);
                MemorySegment.copy(data, I64, 8 * off, in, 0, len);
                long lo = Long.MAX_VALUE;
                for (int k = 0; k < len; k++) {
                    long v = in[k];
                    lo = Math.min(lo, v);
                    hi = Math.max(hi, v);
                    ints[k] = (int) v;
                }
                if (lo < 0) return Long.MAX_VALUE;  // (a bad chunk: the rows are searched in order below)
                MemorySegment.copy(ints, 0, out, ValueLayout.JAVA_INT, 4 * off, len);
            }
            return hi;
        });
        if (max >= n || max > Integer.MAX_VALUE) {
            for (long i = 0; i < n; i++) {
                long v = data.get(I64, 8 * i);
                if (v > Integer.MAX_VALUE || v < Integer.MIN_VALUE) {
                    throw new UserError(where + ": row " + i + " (byte " + (fileOffset + 8 * i) + " of the file) holds " + v
                            + ", which does not fit int32 (ids are dense, 0..count-1)");
                }
                if (v < 0 || v >= n) throw outOfRange(where, i, v, n);
            }
        }
        return countFrom(max, where);
    }

    private static UserError outOfRange(String where, long row, long v, long n) {
        return new UserError(where + ": row " + row + " holds " + v + ", but ids must lie in [0, " + n + ") for " + n
                + " rows: ids are dense (0..count-1) and each count is the largest id + 1");
    }

    /** float64 scores to float32, refusing what is not a finite float (as the JSONL reader does). */
    private static void narrowScores(MemorySegment data, MemorySegment out, long n, String where, long fileOffset) {
        long bad = maxOverChunks(n, off -> {
            double[] in = new double[BLOCK];
            float[] fs = new float[BLOCK];
            for (long end = Math.min(n, off + CHUNK); off < end; off += BLOCK) {
                int len = (int) Math.min(BLOCK, end - off);
                MemorySegment.copy(data, F64, 8 * off, in, 0, len);
                double big = 0;  // NaN-sticky: Math.max returns NaN once one is seen
                for (int k = 0; k < len; k++) {
                    double v = in[k];
                    big = Math.max(big, Math.abs(v));
                    fs[k] = (float) v;
                }
                if (!(big < ScoredRows.FLOAT_LIMIT)) return 1;  // (the rows are searched in order below)
                MemorySegment.copy(fs, 0, out, ValueLayout.JAVA_FLOAT, 4 * off, len);
            }
            return 0;
        });
        if (bad > 0) {
            for (long i = 0; i < n; i++) {
                double v = data.get(F64, 8 * i);
                if (!(Math.abs(v) < ScoredRows.FLOAT_LIMIT)) {
                    throw new UserError(where + ": row " + i + " (byte " + (fileOffset + 8 * i) + " of the file) = " + v
                            + " is not a finite float");
                }
            }
        }
    }

    /** Heap copies for AdvantageSummary (--summary only). */
    float[] scoresArray() {
        return copyFloats(scores, n);
    }

    int[] agentArray() {
        int[] a = new int[Math.toIntExact(n)];
        MemorySegment.copy(agent, I32, 0, a, 0, a.length);
        return a;
    }

    static float[] copyFloats(MemorySegment s, long n) {
        float[] a = new float[Math.toIntExact(n)];
        MemorySegment.copy(s, F32, 0, a, 0, a.length);
        return a;
    }

    // ------------------------------------------------------------------ output

    /**
     * The output file's content: the 8-byte length, a header with __metadata__ (the normalisation
     * and the input) and one F32 tensor "advantage" of shape [n], padded with spaces to a multiple
     * of 8 as safetensors pads it, then the advantages.
     */
    static byte[] outputHeader(long n, Map<String, String> metadata) {
        ObjectMapper json = new ObjectMapper();
        ObjectNode root = json.createObjectNode();
        ObjectNode meta = root.putObject("__metadata__");
        metadata.forEach(meta::put);
        ObjectNode adv = root.putObject("advantage");
        adv.put("dtype", "F32");
        adv.putArray("shape").add(n);
        adv.putArray("data_offsets").add(0).add(4 * n);
        byte[] text;
        try {
            text = json.writeValueAsBytes(root);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        int padded = (text.length + 7) & ~7;
        ByteBuffer b = ByteBuffer.allocate(8 + padded).order(ByteOrder.LITTLE_ENDIAN);
        b.putLong(padded).put(text);
        while (b.hasRemaining()) b.put((byte) ' ');
        return b.array();
    }

    /**
     * The output: the header, then the n advantages, which {@code compute} writes into the 4n bytes
     * after it: the new file's own pages for -o, a buffer for stdout or a device (OutputFile).
     * The header is a multiple of 8 bytes long, so the advantages are as aligned as the segment.
     */
    static final class Output implements OutputFile.MappedBody {
        private final byte[] header;
        private final long n;
        private final Consumer<MemorySegment> compute;

        Output(byte[] header, long n, Consumer<MemorySegment> compute) {
            this.header = header;
            this.n = n;
            this.compute = compute;
        }

        @Override
        public long size() {
            return header.length + 4 * n;
        }

        @Override
        public void fill(MemorySegment dst) {
            MemorySegment.copy(header, 0, dst, ValueLayout.JAVA_BYTE, 0, header.length);
            compute.accept(dst.asSlice(header.length, 4 * n));
        }
    }
}
