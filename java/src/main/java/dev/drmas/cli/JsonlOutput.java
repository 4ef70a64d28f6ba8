// JsonlOutput.java — writes `drmas normalize`'s JSONL output as it goes: each input line again, its
// bytes copied (numbers and strings exactly as written, whitespace between tokens dropped, as the
// Jackson writer of the old reader did), with ,"advantage":A spliced in before its closing brace;
// the reader's blocks are read again by position and formatted on all cores, written in order.
// A is the float's shortest decimal form as java.math.BigDecimal prints it, which is what the
// old writer produced (1.0E-5 became 0.000010; 2.5E19 became 2.5E+19).
package dev.drmas.cli;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.channels.ReadableByteChannel;
import java.nio.charset.StandardCharsets;
import java.util.ArrayDeque;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.Future;

final class JsonlOutput {
    private JsonlOutput() {
    }

    private static final byte[] FIELD = ",\"advantage\":".getBytes(StandardCharsets.US_ASCII);

    /**
     * The rows of {@code rows} with their advantages, in input order: the reader's blocks are
     * formatted on all cores at once (at most two a thread in flight) and written in order.
     */
    static void write(ScoredRows rows, float[] adv, OutputStream os) throws IOException {
        FileChannel ch = rows.openText();
        ExecutorService pool = null;
        try {
            long total = 0;
            for (int k = 0; k < rows.blocks; k++) total += rows.blockLength[k];
            if (ch.size() != total) throw changed(rows);
            int threads = ScoredRows.threads();
            if (rows.blocks <= 1 || threads == 1) {
                ConcurrentLinkedQueue<byte[]> free = new ConcurrentLinkedQueue<>();
                ThreadLocal<byte[]> input = new ThreadLocal<>();
                for (int k = 0; k < rows.blocks; k++) {
                    Formatted f = format(rows, adv, ch, k, free, input);
                    os.write(f.bytes(), 0, f.length());
                    free.add(f.bytes());
                }
            } else {
                pool = Executors.newFixedThreadPool(threads, r -> {
                    Thread t = new Thread(r, "normalize-write");
                    t.setDaemon(true);
                    return t;
                });
                ArrayDeque<Future<Formatted>> inflight = new ArrayDeque<>();
                // written buffers go back to the formatters: a few blocks' worth of memory, not a stream of garbage
                ConcurrentLinkedQueue<byte[]> free = new ConcurrentLinkedQueue<>();
                ThreadLocal<byte[]> input = new ThreadLocal<>();
                for (int k = 0; k < rows.blocks; k++) {
                    int block = k;
                    inflight.add(pool.submit(() -> format(rows, adv, ch, block, free, input)));
                    while (inflight.size() >= 2 * threads) {
                        Formatted f = ScoredRows.take(inflight.removeFirst());
                        os.write(f.bytes(), 0, f.length());
                        free.add(f.bytes());
                    }
                }
                while (!inflight.isEmpty()) {
                    Formatted f = ScoredRows.take(inflight.removeFirst());
                    os.write(f.bytes(), 0, f.length());
                }
            }
            os.flush();
        } finally {
            if (pool != null) pool.shutdownNow();
            rows.closeText(ch);
        }
    }

    record Formatted(byte[] bytes, int length) {
    }

    /**
     * Block k of the input, its lines with their advantages (in a buffer from {@code free} if one is
     * big enough); {@code input} holds the thread's input buffer (one per thread of this write).
     */
    private static Formatted format(ScoredRows rows, float[] adv, FileChannel ch, int k, ConcurrentLinkedQueue<byte[]> free,
                                    ThreadLocal<byte[]> input) throws IOException {
        int len = rows.blockLength[k], row = rows.blockRow[k], end = rows.blockRow[k + 1];
        byte[] in = input.get();
        if (in == null || in.length < len) {
            in = new byte[len];
            input.set(in);
        }
        ByteBuffer bb = ByteBuffer.wrap(in, 0, len);
        long at = rows.blockOffset[k];
        while (bb.hasRemaining()) {
            if (ch.read(bb, at + bb.position()) < 0) throw changed(rows);
        }
        // each row grows by ,"advantage": (13 bytes), at most 18 characters of number and a newline
        int need = len + (end - row) * 40 + 64;
        byte[] out = free.poll();
        if (out == null || out.length < need) out = new byte[Math.max(need, out == null ? 0 : out.length)];
        int o = 0;
        StringBuilder digits = new StringBuilder(32);
        LineReader lines = new LineReader(in, len);
        boolean first = at == 0;  // the file's first line, whose byte-order mark the reading skipped (and so the output drops)
        while (lines.next()) {
            byte[] b = lines.buf;
            int s = lines.start, e = lines.end;
            if (first) s += ScoredRows.bomLength(b, s, e);
            first = false;
            if (e > s && b[e - 1] == '\r') e--;
            if (ScoredRows.blank(b, s, e)) continue;
            if (row >= end) throw changed(rows);
            int from = o;
            if (rows.spaced(row)) {
                o = JsonLine.compact(b, s, e, out, o) - 1;
            } else {
                System.arraycopy(b, s, out, o, e - 1 - s);
                o += e - 1 - s;
            }
            // the line was checked to be one object: it ends with its closing brace
            if (o < from + 1 || (rows.spaced(row) ? out[o] : b[e - 1]) != '}') throw changed(rows);
            System.arraycopy(FIELD, 0, out, o, FIELD.length);
            o += FIELD.length;
            o = appendDecimal(adv[row], out, o, digits);
            out[o++] = '}';
            out[o++] = '\n';
            row++;
        }
        if (row != end) throw changed(rows);
        return new Formatted(out, o);
    }

    private static UserError changed(ScoredRows rows) {
        return new UserError(rows.source + ": the file changed while it was being read; run the command again");
    }

    /** The 1-based line of row {@code row} (error messages only: it reads the input again). */
    static long lineOf(ScoredRows rows, int row) throws IOException {
        long line = 0;
        int r = -1;
        FileChannel ch = rows.openText();
        try {
            LineReader lines = new LineReader(new PositionalChannel(ch), 1 << 20);
            while (lines.next()) {
                line++;
                int s = lines.start, e = lines.end;
                if (line == 1) s += ScoredRows.bomLength(lines.buf, s, e);  // as the reading did
                if (e > s && lines.buf[e - 1] == '\r') e--;
                if (!ScoredRows.blank(lines.buf, s, e) && ++r == row) return line;
            }
        } finally {
            rows.closeText(ch);
        }
        return -1;
    }

    /** Reads a channel from its start by position, leaving it as it is. */
    private static final class PositionalChannel implements ReadableByteChannel {
        private final FileChannel ch;
        private long pos;

        PositionalChannel(FileChannel ch) {
            this.ch = ch;
        }

        @Override
        public int read(ByteBuffer dst) throws IOException {
            int r = ch.read(dst, pos);
            if (r > 0) pos += r;
            return r;
        }

        @Override
        public boolean isOpen() {
            return ch.isOpen();
        }

        @Override
        public void close() {
        }
    }

    /**
     * {@code new BigDecimal(Float.toString(f)).toString()}, without the BigDecimal: Float.toString
     * writes d.dddE±n outside [1e-3, 1e7), which BigDecimal prints plain while the exponent is at
     * least -6 and the digits reach the decimal point, else as d.dddE±n with an explicit sign;
     * -0.0 becomes 0.0. f is finite.
     */
    static int appendDecimal(float f, byte[] out, int o, StringBuilder sb) {
        if (f == 0) {
            out[o++] = '0';
            out[o++] = '.';
            out[o++] = '0';
            return o;
        }
        sb.setLength(0);
        sb.append(f);
        int len = sb.length(), ePos = -1;
        for (int i = len - 1; i > 0; i--) {
            if (sb.charAt(i) == 'E') {
                ePos = i;
                break;
            }
        }
        if (ePos < 0) {
            for (int i = 0; i < len; i++) out[o++] = (byte) sb.charAt(i);
            return o;
        }
        int ds = 0;
        if (sb.charAt(0) == '-') {
            out[o++] = '-';
            ds = 1;
        }
        // the digits: sb[ds], then sb[ds + 2, ePos) after the point
        int fracLen = ePos - ds - 2, p = fracLen + 1;
        int exp = Integer.parseInt(sb, ePos + 1, len, 10);
        int scale = fracLen - exp;
        if (scale >= 0 && exp >= -6) {
            if (exp >= 0) {
                // p > scale: the point falls inside the digits (or after them when scale is 0)
                int intDigits = p - scale;
                for (int k = 0; k < intDigits; k++) out[o++] = (byte) digit(sb, ds, k);
                if (scale > 0) {
                    out[o++] = '.';
                    for (int k = intDigits; k < p; k++) out[o++] = (byte) digit(sb, ds, k);
                }
            } else {
                out[o++] = '0';
                out[o++] = '.';
                for (int k = 0; k < scale - p; k++) out[o++] = '0';
                for (int k = 0; k < p; k++) out[o++] = (byte) digit(sb, ds, k);
            }
            return o;
        }
        out[o++] = (byte) sb.charAt(ds);
        if (p > 1) {
            out[o++] = '.';
            for (int k = 1; k < p; k++) out[o++] = (byte) digit(sb, ds, k);
        }
        out[o++] = 'E';
        out[o++] = exp > 0 ? (byte) '+' : (byte) '-';
        int a = Math.abs(exp);
        if (a >= 10) out[o++] = (byte) ('0' + a / 10);
        out[o++] = (byte) ('0' + a % 10);
        return o;
    }

    /** The k-th significant digit of Float.toString's d.ddd form starting at ds. */
    private static char digit(StringBuilder sb, int ds, int k) {
        return sb.charAt(k == 0 ? ds : ds + 1 + k);
    }
}
