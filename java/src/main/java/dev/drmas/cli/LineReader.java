// LineReader.java — the lines of a JSONL input, from a channel read in big blocks into one reusable
// byte buffer, or from a block already in memory (a line is buf[start, end), without its \n), so
// that reading 10^7 rows makes no object per row. The newline search looks at 8 bytes at a time and
// also tells whether the line holds any byte >= 0x80, so that only such lines pay for a UTF-8 check.
package dev.drmas.cli;

import java.io.IOException;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ReadableByteChannel;
import java.util.Arrays;

final class LineReader {
    static final VarHandle LONGS = MethodHandles.byteArrayViewVarHandle(long[].class, ByteOrder.LITTLE_ENDIAN);
    private static final long NEWLINES = 0x0A0A0A0A0A0A0A0AL, ONES = 0x0101010101010101L, HIGH_BITS = 0x8080808080808080L;

    /**
     * The longest line an input may have, in bytes without its \n. A line is held whole in one byte
     * array, and Java's stop short of 2^31 bytes; a buffer that doubles from 2^30 would have a
     * negative size. A longer line is an error that names it (file:line), not a crash.
     */
    static final int MAX_LINE_BYTES = 1 << 30;

    /** MAX_LINE_BYTES, or less where a test sets -Ddrmas.normalize.maxLineBytes (no test can write a GiB line). */
    static int maxLineBytes() {
        return Math.max(16, Math.min(MAX_LINE_BYTES, Integer.getInteger("drmas.normalize.maxLineBytes", MAX_LINE_BYTES)));
    }

    /**
     * The next size of a full buffer of {@code length} bytes whose line has no \n yet: twice as
     * large, up to {@code limit} + 1 bytes (the longest line and its \n); -1 when it is that large
     * already, so the line is longer than {@code limit}. In longs: 2 x 2^30 is no int.
     */
    static int grown(int length, int limit) {
        if (length > limit) return -1;
        return (int) Math.min(2L * length, limit + 1L);
    }

    private final ReadableByteChannel in;
    /** The current line is {@code buf[start, end)}; valid until the next call of {@link #next}. */
    byte[] buf;
    int start, end;
    /** Whether the current line has a byte >= 0x80 (it may then not be UTF-8). */
    boolean nonAscii;
    private int pos, lim;
    private boolean eof;

    LineReader(ReadableByteChannel in, int blockBytes) {
        this.in = in;
        this.buf = new byte[Math.max(16, blockBytes)];
    }

    /** The lines of {@code data[0, len)}, already in memory. */
    LineReader(byte[] data, int len) {
        this.in = null;
        this.buf = data;
        this.lim = len;
        this.eof = true;
    }

    /** Moves to the next line; false at the end. The last line need not end with \n. */
    boolean next() throws IOException {
        int from = pos, scan = pos;
        long seen = 0;
        while (true) {
            int nl = -1, i = scan;
            byte[] b = buf;
            for (; i + 8 <= lim; i += 8) {
                long w = (long) LONGS.get(b, i);
                long x = w ^ NEWLINES;
                // the lowest flagged byte is exactly the first \n (borrows only run upwards)
                long m = (x - ONES) & ~x & HIGH_BITS;
                if (m != 0) {
                    int k = Long.numberOfTrailingZeros(m) >>> 3;
                    if (k > 0) seen |= w & (-1L >>> (64 - 8 * k));
                    nl = i + k;
                    break;
                }
                seen |= w;
            }
            if (nl < 0) {
                for (; i < lim; i++) {
                    byte c = b[i];
                    if (c == '\n') {
                        nl = i;
                        break;
                    }
                    seen |= c;
                }
            }
            if (nl >= 0) {
                start = from;
                end = nl;
                pos = nl + 1;
                nonAscii = (seen & HIGH_BITS) != 0;
                return true;
            }
            if (eof) {
                if (from == lim) return false;
                start = from;
                end = lim;
                pos = lim;
                nonAscii = (seen & HIGH_BITS) != 0;
                return true;
            }
            // the line goes on past the block: keep its start, then read more behind it
            int keep = lim - from;
            if (from > 0) {
                System.arraycopy(buf, from, buf, 0, keep);
            } else if (keep == buf.length) {
                // (the first reading refused such a line: here the file changed since)
                int size = grown(buf.length, maxLineBytes());
                if (size < 0) throw new IOException("line too long: more than " + maxLineBytes() + " bytes");
                buf = Arrays.copyOf(buf, size);
            }
            from = 0;
            scan = keep;
            lim = keep;
            pos = 0;
            int r;
            do {
                r = in.read(ByteBuffer.wrap(buf, lim, buf.length - lim));
            } while (r == 0);
            if (r < 0) eof = true;
            else lim += r;
        }
    }
}
