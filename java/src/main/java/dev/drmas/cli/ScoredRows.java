// ScoredRows.java — the rows of a `drmas normalize` JSONL input: one JSON object per line with uid,
// traj, agent (strings or integers) and score (a number). The whole file is read and checked
// before anything is written, so that a malformed line is reported (file:line and field) with no
// partial output; but no line is kept: a row is its ids, its score and one bit (whether the line
// has whitespace to drop), and the output (JsonlOutput) reads the lines again to copy them. Input
// that cannot be read twice (stdin, a pipe) is copied to an unlinked temporary file as it is read.
// Keys become dense ids in order of first appearance; a trajectory id is scoped by its uid,
// so files that number rollouts 0..N-1 within each task work as they are.
// The file is cut into blocks of whole lines that the cores parse at once, each into its own ids;
// the blocks are then merged in file order (ids renumbered through the global tables), so ids, and
// which error is reported first, are those of a reading from the first line to the last.
package dev.drmas.cli;

import java.io.IOException;
import java.io.InputStream;
import java.nio.ByteBuffer;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

final class ScoredRows {
    /**
     * The least magnitude a score may not have: the midpoint between Float.MAX_VALUE and 2^128, from
     * which a double rounds to an infinite float (the tie too: MAX_VALUE's significand is odd). Below
     * it a score rounds to a finite float, as numpy's float32() of it does, so "3.4028235e38", which
     * float32 writers print for MAX_VALUE, is a score.
     */
    static final double FLOAT_LIMIT = 0x1.ffffffp127;

    /** Bytes of the blocks the cores parse (and format) at once; -Ddrmas.normalize.blockBytes for tests. */
    static int blockBytes() {
        return Math.max(256, Integer.getInteger("drmas.normalize.blockBytes", 1 << 20));
    }

    /** Threads that parse and format blocks: the CPUs, or -Ddrmas.normalize.threads. */
    static int threads() {
        return Math.max(1, Integer.getInteger("drmas.normalize.threads", Runtime.getRuntime().availableProcessors()));
    }

    final String source;
    final List<String> agentNames = new ArrayList<>();
    /** The rows; the columns below hold n values each, and may be longer until {@link #trim}. */
    int n;
    float[] scores;
    int[] uid;
    int[] traj;
    int[] agent;
    int numUids;
    int numTrajs;
    /** Bit i: row i's line has whitespace between tokens, which the output drops. */
    long[] spaced;
    /** Block k is bytes [blockOffset[k], + blockLength[k]) of the input, rows [blockRow[k], blockRow[k + 1]). */
    long[] blockOffset = new long[16];
    int[] blockLength = new int[16];
    int[] blockRow = new int[17];
    int blocks;
    // where the lines can be read again: the file, or the unlinked copy of a stream
    private final Path file;
    private final FileChannel spool;

    private ScoredRows(String source, Path file, FileChannel spool) {
        this.source = source;
        this.file = file;
        this.spool = spool;
    }

    int size() {
        return n;
    }

    /** Columns of exactly n values (a copy unless they are already): for callers that take an array's length as the row count. */
    ScoredRows trim() {
        if (scores.length != n) {
            scores = Arrays.copyOf(scores, n);
            uid = Arrays.copyOf(uid, n);
            traj = Arrays.copyOf(traj, n);
            agent = Arrays.copyOf(agent, n);
        }
        return this;
    }

    int numAgents() {
        return agentNames.size();
    }

    boolean spaced(int row) {
        return (spaced[row >>> 6] & (1L << row)) != 0;
    }

    /** The input's bytes again, for positional reads; give it back to {@link #closeText}. */
    FileChannel openText() throws IOException {
        return file != null ? FileChannel.open(file, StandardOpenOption.READ) : spool;
    }

    void closeText(FileChannel ch) throws IOException {
        if (file != null) ch.close();
    }

    /** The rows of {@code input}, columns of exactly n values. */
    static ScoredRows read(Path input) {
        return readColumns(input).trim();
    }

    /**
     * The rows of {@code input}, "-" for stdin, with columns that may be longer than n (sized
     * from the file's size before its end is seen): no copy of them at the end.
     */
    static ScoredRows readColumns(Path input) {
        boolean stdin = input.toString().equals("-");
        String name = stdin ? "<stdin>" : input.toString();
        if (!stdin && Files.isDirectory(input)) throw new UserError(name + ": is a folder, not a JSONL file");
        try {
            if (!stdin && Files.isRegularFile(input)) {
                try (FileChannel ch = FileChannel.open(input, StandardOpenOption.READ)) {
                    return read(new ScoredRows(name, input, null), ch, ch.size());
                }
            }
            // stdin, a pipe or a device: read once, so kept in a temporary file for the output's second reading
            try (InputStream in = stdin ? StdStreams.stdin() : Files.newInputStream(input)) {
                return readOnce(name, in);
            }
        } catch (NoSuchFileException e) {
            throw new UserError(name + ": no such file");
        } catch (IOException e) {
            throw new UserError(name + ": cannot read: " + Errors.reason(e), e);
        }
    }

    /**
     * Rows from a stream that can be read only once: tee'd into an unlinked temporary file in
     * SafetensorsRows.spoolFolder(). A copy that cannot be made or written (a full disk, a file-size
     * limit) is an error naming that folder and the way out, not "cannot read", which blamed stdin.
     */
    static ScoredRows readOnce(String name, InputStream in) throws IOException {
        Path dir = SafetensorsRows.spoolFolder();
        String why = "JSONL from a stream is read again from such a copy to write the output";
        FileChannel opened;
        try {
            Path tmp = Files.createTempFile(dir, "drmas-normalize-", ".jsonl");
            // DELETE_ON_CLOSE unlinks it at once on Linux: nothing stays behind, even after a crash; the
            // descriptor keeps the bytes until the rows are unreachable (FileChannel's cleaner closes it)
            opened = FileChannel.open(tmp, StandardOpenOption.READ, StandardOpenOption.WRITE, StandardOpenOption.DELETE_ON_CLOSE);
            Files.deleteIfExists(tmp);
        } catch (IOException e) {
            throw SafetensorsRows.noRoomForCopy(name, "", dir, e, why);
        }
        FileChannel spool = opened;
        ReadableByteChannel src = Channels.newChannel(in);
        ReadableByteChannel tee = new ReadableByteChannel() {
            @Override
            public int read(ByteBuffer dst) throws IOException {
                int at = dst.position(), r = src.read(dst);
                if (r > 0) {
                    ByteBuffer copy = dst.duplicate().position(at).limit(at + r);
                    try {
                        while (copy.hasRemaining()) spool.write(copy);
                    } catch (IOException e) {  // the copy's failure, not the stream's: a UserError naming the folder
                        throw SafetensorsRows.noRoomForCopy(name, "", dir, e, why);
                    }
                }
                return r;
            }

            @Override
            public boolean isOpen() {
                return true;
            }

            @Override
            public void close() {
            }
        };
        try {
            return read(new ScoredRows(name, null, spool), tee, -1);
        } catch (RuntimeException | IOException e) {
            spool.close();
            throw e;
        }
    }

    /** A block of whole lines and where it starts in the input. */
    record Block(byte[] data, int length, long offset) {
    }

    /**
     * Reads and checks every line of {@code in} (of {@code size} bytes when known, else -1) into
     * {@code rows}: blocks go to a pool of parsers, at most two a thread in flight, and are merged
     * in order as they come back.
     */
    private static ScoredRows read(ScoredRows rows, ReadableByteChannel in, long size) throws IOException {
        Merger m = new Merger(rows, size);
        Cutter cut = new Cutter(in);
        int threads = threads(), block = blockBytes();
        ExecutorService pool = null;
        ArrayDeque<Future<Parsed>> inflight = new ArrayDeque<>();
        ArrayDeque<byte[]> free = new ArrayDeque<>();
        ConcurrentLinkedQueue<Parsed> spare = new ConcurrentLinkedQueue<>();
        try {
            long offset = 0;
            while (true) {
                byte[] buf = free.isEmpty() ? new byte[block] : free.pop();
                int len;
                try {
                    len = cut.next(buf);
                } catch (LineTooLong e) {
                    // the line opens the block being cut: the lines before it are in the blocks handed out,
                    // whose errors come first and whose count numbers it
                    while (!inflight.isEmpty()) m.merge(take(inflight.removeFirst()), free, spare, block);
                    throw new UserError(rows.source + ":" + (m.lines + 1) + ": " + tooLong(e.limit));
                }
                if (len < 0) break;
                Block b = new Block(cut.buffer(), len, offset);
                offset += len;
                if (pool == null && (threads == 1 || cut.atEnd())) {
                    // one block (or one thread): parsed here, no pool
                    m.merge(parse(b, spare), free, spare, block);
                    continue;
                }
                if (pool == null) pool = Executors.newFixedThreadPool(threads, r -> {
                    Thread t = new Thread(r, "normalize-parse");
                    t.setDaemon(true);
                    return t;
                });
                inflight.add(pool.submit(() -> parse(b, spare)));
                while (inflight.size() >= 2 * threads) m.merge(take(inflight.removeFirst()), free, spare, block);
            }
            while (!inflight.isEmpty()) m.merge(take(inflight.removeFirst()), free, spare, block);
        } finally {
            if (pool != null) pool.shutdownNow();
        }
        return m.finish();
    }

    /** A parser's result, or what it threw (an I/O or programming error: data errors come back in Parsed). */
    static <T> T take(Future<T> f) throws IOException {
        try {
            return f.get();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted", e);
        } catch (ExecutionException e) {
            Throwable c = e.getCause();
            if (c instanceof RuntimeException r) throw r;
            if (c instanceof Error err) throw err;
            if (c instanceof IOException io) throw io;
            throw new IllegalStateException(c);
        }
    }

    static String tooLong(int limit) {
        return "line too long: more than " + limit + " bytes";
    }

    /** A line longer than {@code limit} bytes, found where it outgrows the buffer that cuts the blocks. */
    static final class LineTooLong extends IOException {
        final int limit;

        LineTooLong(int limit) {
            super(tooLong(limit));
            this.limit = limit;
        }
    }

    /**
     * Cuts a channel into blocks of whole lines (the last one may lack its \n). A line longer than
     * a block grows the buffer, up to LineReader.maxLineBytes() + 1 bytes: past that, LineTooLong.
     */
    private static final class Cutter {
        private final ReadableByteChannel in;
        private final int maxLine = LineReader.maxLineBytes();
        private byte[] buf, carry = new byte[1 << 12];
        private int carryLen;
        private boolean eof;

        Cutter(ReadableByteChannel in) {
            this.in = in;
        }

        /** The next block, in {@code into} or a larger buffer (see {@link #buffer}); -1 at the end. */
        int next(byte[] into) throws IOException {
            buf = into.length >= carryLen ? into : new byte[grow(carryLen)];
            System.arraycopy(carry, 0, buf, 0, carryLen);
            int filled = carryLen;
            carryLen = 0;
            while (true) {
                while (!eof && filled < buf.length) {
                    int r = in.read(ByteBuffer.wrap(buf, filled, buf.length - filled));
                    if (r < 0) eof = true;
                    else filled += r;
                }
                if (filled == 0) return -1;
                if (eof) return filled;
                int nl = filled - 1;
                while (nl >= 0 && buf[nl] != '\n') nl--;
                if (nl >= 0) {
                    int len = nl + 1;
                    carryLen = filled - len;
                    if (carry.length < carryLen) carry = new byte[Math.max(carryLen, (int) Math.min(2L * carry.length, maxLine + 1L))];
                    System.arraycopy(buf, len, carry, 0, carryLen);
                    return len;
                }
                buf = Arrays.copyOf(buf, grow(buf.length));  // a line longer than the block
            }
        }

        /** The size of the buffer after one of {@code length} bytes that holds only part of a line. */
        private int grow(int length) throws LineTooLong {
            int size = LineReader.grown(length, maxLine);
            if (size < 0) throw new LineTooLong(maxLine);
            return size;
        }

        byte[] buffer() {
            return buf;
        }

        /** Whether the block just returned was the last. */
        boolean atEnd() {
            return eof && carryLen == 0;
        }
    }

    /** One block's rows with the block's own ids (keys numbered in order of first appearance in the block). */
    static final class Parsed {
        Block block;
        int rows, lines;
        float[] scores;
        int[] uid, traj, agent;
        long[] spaced;
        final KeyIds uids = new KeyIds(), trajs = new KeyIds(), agents = new KeyIds();
        /** The first bad line, counted from 1 within the block, and what is wrong with it; or -1. */
        int errorLine = -1;
        String error;
    }

    /**
     * Parses and checks one block's lines; the first bad line ends it (reported when the block is
     * merged). The columns and tables come from a merged block's Parsed in {@code spare} when there
     * is one, so that a file makes a few of them, not one a block.
     */
    static Parsed parse(Block b, ConcurrentLinkedQueue<Parsed> spare) {
        Parsed p = spare.poll();
        if (p == null) {
            p = new Parsed();
            int cap = Math.max(64, b.length() / 48);
            p.scores = new float[cap];
            p.uid = new int[cap];
            p.traj = new int[cap];
            p.agent = new int[cap];
            p.spaced = new long[(cap + 63) >>> 6];
        } else {
            Arrays.fill(p.spaced, 0, Math.min(p.spaced.length, (p.rows + 63) >>> 6), 0L);
            p.rows = 0;
            p.lines = 0;
            p.errorLine = -1;
            p.error = null;
            p.uids.clear();
            p.trajs.clear();
            p.agents.clear();
        }
        p.block = b;
        JsonLine line = new JsonLine();
        LineReader lines = new LineReader(b.data(), b.length());
        int maxLine = LineReader.maxLineBytes();
        try {
            while (lines.next()) {
                p.lines++;
                // a byte-order mark is skipped where it may be: at the start of the file (as Jackson does)
                int bom = b.offset() == 0 && p.lines == 1 ? bomLength(lines.buf, lines.start, lines.end) : 0;
                String bad = parseLine(p, line, lines, bom, maxLine);
                if (bad != null) {
                    p.errorLine = p.lines;
                    p.error = bad;
                    return p;
                }
            }
        } catch (IOException e) {
            throw new IllegalStateException("reading a block in memory", e);  // no channel: cannot happen
        }
        return p;
    }

    /**
     * Checks the current line and adds its row to {@code p}; returns what is wrong with it, or null.
     * Its first {@code bom} bytes are a byte-order mark, skipped (positions in messages count them).
     */
    private static String parseLine(Parsed p, JsonLine line, LineReader lines, int bom, int maxLine) {
        byte[] b = lines.buf;
        int s = lines.start, e = lines.end;
        // (a line in a block: the cutter refuses only lines longer than a block, this every one)
        if (e - s > maxLine) return tooLong(maxLine);
        if (e > s && b[e - 1] == '\r') e--;
        if (lines.nonAscii && firstInvalidUtf8(b, s, e) >= 0) return notUtf8(Arrays.copyOfRange(b, s, e));
        s += bom;
        if (blank(b, s, e)) return null;
        try {
            line.scan(b, s, e);
        } catch (JsonLine.Malformed m) {
            return "not valid JSON: " + m.getMessage() + " (byte " + (m.at + 1 + bom) + " of the line)";
        }
        if (line.top != JsonLine.OBJECT) return "expected a JSON object, got " + JsonLine.kindName(line.top);
        String bad = checkKey(line, JsonLine.UID);
        if (bad == null) bad = checkKey(line, JsonLine.TRAJ);
        if (bad == null) bad = checkKey(line, JsonLine.AGENT);
        if (bad != null) return bad;
        int sk = line.kind[JsonLine.SCORE];
        if (sk == JsonLine.MISSING) return "field 'score' is missing";
        if (sk != JsonLine.INTEGER && sk != JsonLine.DECIMAL) return "field 'score' must be a number, got " + line.valueText(JsonLine.SCORE);
        double v = toDouble(b, line.from[JsonLine.SCORE], line.to[JsonLine.SCORE]);
        if (!(Math.abs(v) < FLOAT_LIMIT)) {
            return "field 'score' = " + line.valueText(JsonLine.SCORE) + " is not a finite float";
        }
        if (line.kind[JsonLine.ADVANTAGE] != JsonLine.MISSING) return "the row already has a field 'advantage'";
        int u = intern(p.uids, -1, line, JsonLine.UID, b);
        int t = intern(p.trajs, u, line, JsonLine.TRAJ, b);
        int a = intern(p.agents, -1, line, JsonLine.AGENT, b);
        if (p.rows == p.scores.length) {
            int cap = p.rows * 2;
            p.scores = Arrays.copyOf(p.scores, cap);
            p.uid = Arrays.copyOf(p.uid, cap);
            p.traj = Arrays.copyOf(p.traj, cap);
            p.agent = Arrays.copyOf(p.agent, cap);
            p.spaced = Arrays.copyOf(p.spaced, (cap + 63) >>> 6);
        }
        int i = p.rows++;
        // a decimal zero is +0 (BigDecimal has no -0, and the old reader went through it)
        p.scores[i] = v == 0 ? 0f : (float) v;
        p.uid[i] = u;
        p.traj[i] = t;
        p.agent[i] = a;
        if (line.whitespace) p.spaced[i >>> 6] |= 1L << i;
        return null;
    }

    /** The file-wide columns and ids, grown block by block in file order. */
    private static final class Merger {
        final ScoredRows rows;
        final long size;
        final KeyIds uids = new KeyIds(), trajs = new KeyIds(), agents = new KeyIds();
        int n;
        long lines, bytes;
        float[] scores = new float[0];
        int[] uid = new int[0], traj = new int[0], agent = new int[0];
        long[] spaced = new long[0];

        Merger(ScoredRows rows, long size) {
            this.rows = rows;
            this.size = size;
        }

        void merge(Parsed p, ArrayDeque<byte[]> free, ConcurrentLinkedQueue<Parsed> spare, int block) {
            merge(p);
            if (p.block.data().length == block) free.push(p.block.data());
            p.block = null;
            spare.add(p);
        }

        void merge(Parsed p) {
            if (p.error != null) throw new UserError(rows.source + ":" + (lines + p.errorLine) + ": " + p.error);
            int[] um = renumber(p.uids, uids, null), tm = renumber(p.trajs, trajs, um), am = renumber(p.agents, agents, null);
            while (rows.agentNames.size() < agents.size()) rows.agentNames.add(name(agents, rows.agentNames.size()));
            long need = (long) n + p.rows;
            if (need > Integer.MAX_VALUE - 16) throw new UserError(rows.source + ": more than 2^31 rows in one file");
            bytes += p.block.length();
            if (need > scores.length) grow((int) need);
            for (int r = 0; r < p.rows; r++) {
                int i = n + r;
                scores[i] = p.scores[r];
                uid[i] = um[p.uid[r]];
                traj[i] = tm[p.traj[r]];
                agent[i] = am[p.agent[r]];
                if ((p.spaced[r >>> 6] & (1L << r)) != 0) spaced[i >>> 6] |= 1L << i;
            }
            int k = rows.blocks++;
            if (k + 1 >= rows.blockOffset.length) {
                rows.blockOffset = Arrays.copyOf(rows.blockOffset, 2 * (k + 1));
                rows.blockLength = Arrays.copyOf(rows.blockLength, 2 * (k + 1));
                rows.blockRow = Arrays.copyOf(rows.blockRow, 2 * (k + 1) + 1);
            }
            rows.blockOffset[k] = p.block.offset();
            rows.blockLength[k] = p.block.length();
            rows.blockRow[k] = n;
            n += p.rows;
            rows.blockRow[k + 1] = n;
            lines += p.lines;
        }

        /** The global id of each of a block's keys, in the block's order of first appearance (so new ids keep file order). */
        private static int[] renumber(KeyIds local, KeyIds global, int[] scopes) {
            int[] m = new int[local.size()];
            for (int id = 0; id < m.length; id++) {
                int scope = scopes == null ? -1 : scopes[local.scope(id)];
                m[id] = global.id(scope, local.kind(id), local.store(), local.keyStart(id), local.keyEnd(id));
            }
            return m;
        }

        /** Room for {@code need} rows: the file's size at the bytes a row so far tells how many there will be. */
        private void grow(int need) {
            long want = Math.max(need, (long) scores.length * 3 / 2);
            if (size > 0 && bytes > 0) {
                long estimate = (long) (size / ((double) bytes / need) * 1.02) + 1024;
                want = Math.max(need, estimate);
            }
            int cap = (int) Math.min(Integer.MAX_VALUE - 16, want);
            scores = Arrays.copyOf(scores, cap);
            uid = Arrays.copyOf(uid, cap);
            traj = Arrays.copyOf(traj, cap);
            agent = Arrays.copyOf(agent, cap);
            spaced = Arrays.copyOf(spaced, (cap + 63) >>> 6);
        }

        ScoredRows finish() {
            rows.n = n;
            rows.scores = scores;
            rows.uid = uid;
            rows.traj = traj;
            rows.agent = agent;
            rows.spaced = spaced.length >= (n + 63) >>> 6 ? spaced : Arrays.copyOf(spaced, (n + 63) >>> 6);
            rows.numUids = uids.size();
            rows.numTrajs = trajs.size();
            return rows;
        }
    }

    private static String checkKey(JsonLine line, int f) {
        int k = line.kind[f];
        if (k == JsonLine.MISSING) return "field '" + JsonLine.FIELD_NAMES[f] + "' is missing";
        if (k != JsonLine.STRING && k != JsonLine.INTEGER) {
            return "field '" + JsonLine.FIELD_NAMES[f] + "' must be a string or an integer, got " + line.valueText(f);
        }
        return null;
    }

    // A key is a string or an integer; the type is part of the key ("1" and 1 differ). Strings are
    // compared as decoded text ("\u00e9" is "é"), integers by value (-0 is 0).
    private static int intern(KeyIds ids, int scope, JsonLine line, int f, byte[] b) {
        int s = line.from[f], e = line.to[f];
        if (line.kind[f] == JsonLine.INTEGER) {
            if (e - s == 2 && b[s] == '-' && b[s + 1] == '0') s++;
            return ids.id(scope, (byte) 'i', b, s, e);
        }
        if (!line.escaped[f]) return ids.id(scope, (byte) 's', b, s, e);
        byte[] k = JsonLine.canonical(JsonLine.decode(b, s, e));
        return ids.id(scope, (byte) 's', k, 0, k.length);
    }

    private static String name(KeyIds ids, int id) {
        // the canonical bytes of a string key are its text in UTF-8 (a lone surrogate aside)
        return new String(ids.key(id), StandardCharsets.UTF_8);
    }

    /**
     * 3 when {@code b[s, e)} opens with a UTF-8 byte-order mark (EF BB BF), else 0. Only the file's
     * first line may have one skipped: elsewhere it is text (and not JSON).
     */
    static int bomLength(byte[] b, int s, int e) {
        return e - s >= 3 && b[s] == (byte) 0xef && b[s + 1] == (byte) 0xbb && b[s + 2] == (byte) 0xbf ? 3 : 0;
    }

    /** Whether the line holds only whitespace (as String.isBlank: the old reader's test, on the decoded line). */
    static boolean blank(byte[] b, int s, int e) {
        for (int i = s; i < e; i++) {
            int c = b[i] & 0xff;
            if (c == ' ' || c >= 0x09 && c <= 0x0d || c >= 0x1c && c <= 0x1f) continue;
            return c >= 0x80 && new String(b, s, e - s, StandardCharsets.UTF_8).isBlank();
        }
        return true;
    }

    /**
     * The number {@code b[s, e)} (JSON grammar, already checked) as the nearest double, as
     * Double.parseDouble (and BigDecimal.doubleValue, which the old reader used) give it. Most
     * scores have few digits: then one exact product or quotient of doubles is the correctly rounded
     * result (Clinger's fast path); the rest go to Double.parseDouble.
     */
    static double toDouble(byte[] b, int s, int e) {
        int i = s;
        boolean neg = b[i] == '-';
        if (neg) i++;
        long mant = 0;
        int digits = 0, exp = 0;
        for (; i < e && b[i] >= '0' && b[i] <= '9'; i++) {
            if (digits < 18) {
                mant = mant * 10 + (b[i] - '0');
                if (mant != 0) digits++;
            } else {
                digits++;
                exp++;
            }
        }
        if (i < e && b[i] == '.') {
            for (i++; i < e && b[i] >= '0' && b[i] <= '9'; i++) {
                if (digits < 18) {
                    mant = mant * 10 + (b[i] - '0');
                    if (mant != 0) digits++;
                    exp--;
                } else {
                    digits++;
                }
            }
        }
        if (i < e) {
            i++;  // e or E
            boolean eneg = false;
            if (b[i] == '+' || b[i] == '-') eneg = b[i++] == '-';
            int x = 0;
            for (; i < e; i++) x = Math.min(100_000, x * 10 + (b[i] - '0'));
            exp += eneg ? -x : x;
        }
        if (digits <= 15 && exp >= -22 && exp <= 22) {
            double d = mant;  // exact: below 10^15 < 2^53
            d = exp >= 0 ? d * POW10[exp] : d / POW10[-exp];
            return neg ? -d : d;
        }
        if (mant == 0 && digits == 0) return neg ? -0.0 : 0.0;
        return Double.parseDouble(new String(b, s, e - s, StandardCharsets.ISO_8859_1));
    }

    private static final double[] POW10 = new double[23];

    static {
        POW10[0] = 1;
        for (int i = 1; i < POW10.length; i++) POW10[i] = POW10[i - 1] * 10;  // exact up to 10^22
    }

    /** The index of the first byte of {@code b[s, e)} that starts no valid UTF-8 sequence, or -1. */
    static int firstInvalidUtf8(byte[] b, int s, int e) {
        int i = s;
        while (i < e) {
            int c = b[i];
            if (c >= 0) {
                i++;
                continue;
            }
            c &= 0xff;
            int need, min2 = 0x80, max2 = 0xbf;
            if (c >= 0xc2 && c <= 0xdf) {
                need = 1;
            } else if (c >= 0xe0 && c <= 0xef) {
                need = 2;
                if (c == 0xe0) min2 = 0xa0;        // overlong
                else if (c == 0xed) max2 = 0x9f;   // surrogates
            } else if (c >= 0xf0 && c <= 0xf4) {
                need = 3;
                if (c == 0xf0) min2 = 0x90;        // overlong
                else if (c == 0xf4) max2 = 0x8f;   // above U+10FFFF
            } else {
                return i;
            }
            if (i + need >= e) return i;  // cut short by the end of the line
            int c2 = b[i + 1] & 0xff;
            if (c2 < min2 || c2 > max2) return i;
            for (int k = 2; k <= need; k++) {
                int ck = b[i + k] & 0xff;
                if (ck < 0x80 || ck > 0xbf) return i;
            }
            i += need + 1;
        }
        return -1;
    }

    /** The old reader's message for a line that is not UTF-8: the position Java's decoder reports. */
    private static String notUtf8(byte[] raw) {
        CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
                .onMalformedInput(CodingErrorAction.REPORT).onUnmappableCharacter(CodingErrorAction.REPORT);
        ByteBuffer in = ByteBuffer.wrap(raw);
        var r = d.decode(in, java.nio.CharBuffer.allocate(raw.length + 1), true);
        int at = r.isError() ? in.position() : 0;
        return "not UTF-8 text (byte " + (at + 1) + " of the line, 0x" + String.format("%02x", raw[at] & 0xff)
                + ", is not valid UTF-8)";
    }
}
