// JsonLine.java — checks that one JSONL line is one JSON value (RFC 8259, as strictly as Jackson's
// defaults: no comments, NaN, leading zeros or trailing commas; duplicate keys refused at any depth)
// and, for an object, where its uid, traj, agent, score and advantage values lie in the line. It
// works on the line's bytes and keeps offsets, never a String or a tree, so a row costs no garbage;
// it also notes whether the line has whitespace between tokens, which the output then drops.
package dev.drmas.cli;

import java.io.ByteArrayOutputStream;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.HashSet;
import java.util.Set;

final class JsonLine {
    /** What a value is. */
    static final int MISSING = 0, STRING = 1, INTEGER = 2, DECIMAL = 3, OBJECT = 4, ARRAY = 5, BOOLEAN = 6, NULL = 7;
    /** The fields drmas reads, as indices into {@link #kind}, {@link #from}, {@link #to}. */
    static final int UID = 0, TRAJ = 1, AGENT = 2, SCORE = 3, ADVANTAGE = 4;
    static final String[] FIELD_NAMES = {"uid", "traj", "agent", "score", "advantage"};
    /** Jackson's default limit (StreamReadConstraints), so that a deep line is refused, not a stack overflow. */
    static final int MAX_DEPTH = 1000;

    /** A line that is not valid JSON: what is wrong, and where (an offset into the line). */
    static final class Malformed extends Exception {
        final int at;

        Malformed(String message, int at) {
            super(message, null, false, false);
            this.at = at;
        }
    }

    // ---- results for the line last scanned
    /** The kind of the whole line's value. */
    int top;
    /** Per field: its value's kind (MISSING when absent); the value's bytes, a string's without its quotes. */
    final int[] kind = new int[5], from = new int[5], to = new int[5];
    /** Per field: whether its string value has escapes (then it must be decoded to compare it). */
    final boolean[] escaped = new boolean[5];
    /** Whether any whitespace lies between tokens (the output is written without it). */
    boolean whitespace;

    private byte[] b;
    private int end, base, depth;
    // the keys of the objects being scanned, as a stack of [start, end) with their escape flags
    private int[] keyFrom = new int[64], keyTo = new int[64];
    private boolean[] keyEscaped = new boolean[64];
    private int keys;
    private boolean lastEscaped;

    /** Scans {@code line[start, end)}, which is not blank. */
    void scan(byte[] line, int start, int end) throws Malformed {
        this.b = line;
        this.base = start;
        this.end = end;
        this.depth = 0;
        this.keys = 0;
        this.whitespace = false;
        Arrays.fill(kind, MISSING);
        int p = ws(start);
        if (p < end && b[p] == '{') {
            top = OBJECT;
            p = object(p, true);
        } else {
            p = value(p);
            top = valueKind;
        }
        p = ws(p);
        if (p < end) throw error(p, "unexpected " + describe(p) + " after the " + (top == OBJECT ? "object" : "value")
                + " (one JSON object a line)");
    }

    // The parser passes the position along (p in, new p out) so that it stays in a register; a
    // value's kind comes back in valueKind.
    private int valueKind;

    /** Past the whitespace at p. */
    private int ws(int p) {
        byte[] b = this.b;
        int end = this.end, q = p;
        while (q < end) {
            byte c = b[q];
            if (c != ' ' && c != '\t' && c != '\r' && c != '\n') break;
            q++;
        }
        if (q != p) whitespace = true;
        return q;
    }

    private Malformed error(int p, String what) {
        return new Malformed(what, p - base);
    }

    private Malformed unexpected(int p, String expected) {
        return p >= end ? error(p, "unexpected end of line: expected " + expected)
                : error(p, "unexpected " + describe(p) + ": expected " + expected);
    }

    /** The byte at {@code i} as a reader sees it: 'x', or a code for a control or non-ASCII byte. */
    private String describe(int i) {
        int c = b[i] & 0xff;
        if (c >= 0x20 && c < 0x7f) return "'" + (char) c + "'";
        return String.format("byte 0x%02x", c);
    }

    private int object(int p, boolean top) throws Malformed {
        if (++depth > MAX_DEPTH) throw error(p, "nesting deeper than " + MAX_DEPTH + " levels");
        byte[] b = this.b;
        int end = this.end;
        p = ws(p + 1);
        if (p < end && b[p] == '}') {
            depth--;
            return p + 1;
        }
        int first = keys;
        Set<String> many = null;  // the keys as text, once an object has too many for pairwise checks
        while (true) {
            if (p >= end || b[p] != '"') throw unexpected(p, "a field name in double quotes");
            int ks = p + 1;
            p = string(p);
            boolean esc = lastEscaped;
            int ke = p - 1;
            if (keys - first < 32) {
                for (int k = first; k < keys; k++) {
                    if (sameKey(keyFrom[k], keyTo[k], keyEscaped[k], ks, ke, esc)) {
                        throw error(ks - 1, "Duplicate field '" + text(ks, ke, esc) + "'");
                    }
                }
            } else {
                if (many == null) {
                    many = new HashSet<>();
                    for (int k = first; k < keys; k++) many.add(text(keyFrom[k], keyTo[k], keyEscaped[k]));
                }
                if (!many.add(text(ks, ke, esc))) throw error(ks - 1, "Duplicate field '" + text(ks, ke, esc) + "'");
            }
            pushKey(ks, ke, esc);
            if (p < end && b[p] != ':') p = ws(p);
            if (p >= end || b[p] != ':') throw unexpected(p, "':' after the field name");
            p++;
            if (p < end && b[p] == ' ') {  // the usual one space, without a call
                whitespace = true;
                p++;
            }
            p = ws(p);
            int vs = p;
            p = value(p);
            if (top) field(ks, ke, esc, valueKind, vs, p);
            if (p < end && b[p] != ',' && b[p] != '}') p = ws(p);
            if (p < end && b[p] == ',') {
                p++;
                if (p < end && b[p] == ' ') {
                    whitespace = true;
                    p++;
                }
                p = ws(p);
                continue;
            }
            if (p < end && b[p] == '}') {
                p++;
                break;
            }
            throw unexpected(p, "',' or '}' after a field's value");
        }
        keys = first;
        depth--;
        return p;
    }

    private int array(int p) throws Malformed {
        if (++depth > MAX_DEPTH) throw error(p, "nesting deeper than " + MAX_DEPTH + " levels");
        byte[] b = this.b;
        int end = this.end;
        p = ws(p + 1);
        if (p < end && b[p] == ']') {
            depth--;
            return p + 1;
        }
        while (true) {
            p = ws(value(p));
            if (p < end && b[p] == ',') {
                p = ws(p + 1);
                continue;
            }
            if (p < end && b[p] == ']') {
                p++;
                break;
            }
            throw unexpected(p, "',' or ']' after an array element");
        }
        depth--;
        return p;
    }

    /** One value at p (no whitespace before it); returns the position after it, its kind in valueKind. */
    private int value(int p) throws Malformed {
        if (p >= end) throw unexpected(p, "a value");
        byte c = b[p];
        if (c == '"') {
            p = string(p);
            valueKind = STRING;
            return p;
        }
        if (c == '-' || c >= '0' && c <= '9') return number(p);
        switch (c) {
            case '{' -> {
                p = object(p, false);
                valueKind = OBJECT;
                return p;
            }
            case '[' -> {
                p = array(p);
                valueKind = ARRAY;
                return p;
            }
            case 't' -> {
                valueKind = BOOLEAN;
                return literal(p, "true");
            }
            case 'f' -> {
                valueKind = BOOLEAN;
                return literal(p, "false");
            }
            case 'n' -> {
                valueKind = NULL;
                return literal(p, "null");
            }
            default -> throw unexpected(p, "a value (a string, number, object, array, true, false or null)");
        }
    }

    private int literal(int p, String word) throws Malformed {
        int n = word.length();
        for (int i = 0; i < n; i++) {
            if (p + i >= end || b[p + i] != word.charAt(i)) throw error(p, "unrecognised token: expected " + word);
        }
        int q = p + n;
        // "trueish" is not true followed by garbage but a bad token, as Jackson says
        if (q < end && (Character.isLetterOrDigit(b[q]) || b[q] == '_')) throw error(p, "unrecognised token: expected " + word);
        return q;
    }

    /** A string at p (its opening quote); returns the position after the closing quote, whether it has escapes in lastEscaped. */
    private int string(int p) throws Malformed {
        boolean esc = false;
        byte[] b = this.b;
        int i = p + 1, end = this.end;
        while (true) {
            // 8 bytes at a time up to the first quote, backslash or control byte
            while (i + 8 <= end) {
                long w = (long) LineReader.LONGS.get(b, i);
                long m = zeroByte(w ^ QUOTES) | zeroByte(w ^ BACKSLASHES) | below(w, 0x20);
                if (m != 0) {
                    i += Long.numberOfTrailingZeros(m) >>> 3;
                    break;
                }
                i += 8;
            }
            if (i >= end) throw error(i, "unexpected end of line inside a string");
            byte c = b[i];
            if (c == '"') {
                lastEscaped = esc;
                return i + 1;
            }
            if (c == '\\') {
                esc = true;
                if (i + 1 >= end) throw error(i, "unexpected end of line inside a string");
                byte e = b[i + 1];
                if (e == 'u') {
                    for (int h = 2; h < 6; h++) {
                        if (i + h >= end || Character.digit(b[i + h], 16) < 0) {
                            throw error(i, "invalid escape in a string: \\u must be followed by 4 hex digits");
                        }
                    }
                    i += 6;
                } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't') {
                    i += 2;
                } else {
                    throw error(i, "invalid escape in a string: \\" + (e >= 0x20 && e < 0x7f ? String.valueOf((char) e) : describe(i + 1)));
                }
            } else if (c >= 0 && c < 0x20) {
                throw error(i, "control character " + String.format("0x%02x", c) + " inside a string (it must be escaped)");
            } else {
                i++;
            }
        }
    }

    static final long ONES = 0x0101010101010101L, HIGH_BITS = 0x8080808080808080L, QUOTES = 0x2222222222222222L,
            BACKSLASHES = 0x5C5C5C5C5C5C5C5CL;

    /** The high bit of each zero byte of w (exact for the lowest one; above it a flag may be spurious). */
    static long zeroByte(long w) {
        return (w - ONES) & ~w & HIGH_BITS;
    }

    /** The high bit of each byte of w below n (n <= 128; bytes >= 0x80 never count; exact for the lowest one). */
    static long below(long w, int n) {
        return (w - ONES * n) & ~w & HIGH_BITS;
    }

    /** A number at p, by JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?; its kind in valueKind. */
    private int number(int p) throws Malformed {
        byte[] b = this.b;
        int end = this.end, kind = INTEGER;
        if (b[p] == '-') p++;
        if (p >= end || !digit(b[p])) throw unexpected(p, "a digit after '-'");
        if (b[p] == '0') {
            p++;
            if (p < end && digit(b[p])) throw error(p, "leading zeroes are not allowed in a number");
        } else {
            while (p < end && digit(b[p])) p++;
        }
        if (p < end && b[p] == '.') {
            p++;
            if (p >= end || !digit(b[p])) throw unexpected(p, "a digit after the decimal point");
            while (p < end && digit(b[p])) p++;
            kind = DECIMAL;
        }
        if (p < end && (b[p] == 'e' || b[p] == 'E')) {
            p++;
            if (p < end && (b[p] == '+' || b[p] == '-')) p++;
            if (p >= end || !digit(b[p])) throw unexpected(p, "a digit in the exponent");
            while (p < end && digit(b[p])) p++;
            kind = DECIMAL;
        }
        valueKind = kind;
        return p;
    }

    private static boolean digit(byte c) {
        return c >= '0' && c <= '9';
    }

    private void pushKey(int ks, int ke, boolean esc) {
        if (keys == keyFrom.length) {
            keyFrom = Arrays.copyOf(keyFrom, keys * 2);
            keyTo = Arrays.copyOf(keyTo, keys * 2);
            keyEscaped = Arrays.copyOf(keyEscaped, keys * 2);
        }
        keyFrom[keys] = ks;
        keyTo[keys] = ke;
        keyEscaped[keys] = esc;
        keys++;
    }

    private boolean sameKey(int as, int ae, boolean aEsc, int bs, int be, boolean bEsc) {
        if (!aEsc && !bEsc) {
            // most keys differ in length or at an end: no call for those
            int n = ae - as;
            if (n != be - bs || n > 0 && (b[as] != b[bs] || b[ae - 1] != b[be - 1])) return false;
            return Arrays.equals(b, as, ae, b, bs, be);
        }
        return text(as, ae, aEsc).equals(text(bs, be, bEsc));
    }

    /** A top-level member: if its name is one drmas reads, where its value lies. */
    private void field(int ks, int ke, boolean esc, int k, int vs, int ve) {
        int f = esc ? fieldOf(text(ks, ke, true)) : fieldOf(b, ks, ke);
        if (f < 0) return;
        kind[f] = k;
        if (k == STRING) {
            from[f] = vs + 1;
            to[f] = ve - 1;
            escaped[f] = lastEscaped;
        } else {
            from[f] = vs;
            to[f] = ve;
            escaped[f] = false;
        }
    }

    private static int fieldOf(byte[] b, int s, int e) {
        switch (e - s) {
            case 3:
                return b[s] == 'u' && b[s + 1] == 'i' && b[s + 2] == 'd' ? UID : -1;
            case 4:
                return b[s] == 't' && b[s + 1] == 'r' && b[s + 2] == 'a' && b[s + 3] == 'j' ? TRAJ : -1;
            case 5:
                if (b[s] == 'a') return Arrays.equals(b, s, e, AGENT_BYTES, 0, 5) ? AGENT : -1;
                if (b[s] == 's') return Arrays.equals(b, s, e, SCORE_BYTES, 0, 5) ? SCORE : -1;
                return -1;
            case 9:
                return Arrays.equals(b, s, e, ADVANTAGE_BYTES, 0, 9) ? ADVANTAGE : -1;
            default:
                return -1;
        }
    }

    private static final byte[] AGENT_BYTES = "agent".getBytes(StandardCharsets.US_ASCII),
            SCORE_BYTES = "score".getBytes(StandardCharsets.US_ASCII), ADVANTAGE_BYTES = "advantage".getBytes(StandardCharsets.US_ASCII);

    private static int fieldOf(String name) {
        for (int f = 0; f < FIELD_NAMES.length; f++) if (FIELD_NAMES[f].equals(name)) return f;
        return -1;
    }

    /** A string's content (without quotes) as text: escapes decoded, the rest UTF-8 (already checked). */
    String text(int s, int e, boolean esc) {
        if (!esc) return new String(b, s, e - s, StandardCharsets.UTF_8);
        return decode(b, s, e);
    }

    /** Decodes a JSON string's content, whose escapes have been checked. */
    static String decode(byte[] b, int s, int e) {
        StringBuilder sb = new StringBuilder(e - s);
        int run = s;
        for (int i = s; i < e; ) {
            if (b[i] != '\\') {
                i++;
                continue;
            }
            sb.append(new String(b, run, i - run, StandardCharsets.UTF_8));
            byte c = b[i + 1];
            switch (c) {
                case 'u' -> {
                    sb.append((char) Integer.parseInt(new String(b, i + 2, 4, StandardCharsets.US_ASCII), 16));
                    i += 6;
                }
                case 'b' -> { sb.append('\b'); i += 2; }
                case 'f' -> { sb.append('\f'); i += 2; }
                case 'n' -> { sb.append('\n'); i += 2; }
                case 'r' -> { sb.append('\r'); i += 2; }
                case 't' -> { sb.append('\t'); i += 2; }
                default -> { sb.append((char) c); i += 2; }
            }
            run = i;
        }
        sb.append(new String(b, run, e - run, StandardCharsets.UTF_8));
        return sb.toString();
    }

    /**
     * A string's content as bytes that are equal exactly when the decoded texts are: UTF-8, with a
     * lone surrogate (only an escape can make one) encoded on its own (WTF-8), so that "\u00e9"
     * and "é" are one key and two different lone surrogates stay two.
     */
    static byte[] canonical(String text) {
        ByteArrayOutputStream out = new ByteArrayOutputStream(text.length() + 8);
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            int cp = c;
            if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
                cp = Character.toCodePoint(c, text.charAt(++i));
            }
            if (cp < 0x80) {
                out.write(cp);
            } else if (cp < 0x800) {
                out.write(0xc0 | cp >> 6);
                out.write(0x80 | cp & 0x3f);
            } else if (cp < 0x10000) {
                out.write(0xe0 | cp >> 12);
                out.write(0x80 | cp >> 6 & 0x3f);
                out.write(0x80 | cp & 0x3f);
            } else {
                out.write(0xf0 | cp >> 18);
                out.write(0x80 | cp >> 12 & 0x3f);
                out.write(0x80 | cp >> 6 & 0x3f);
                out.write(0x80 | cp & 0x3f);
            }
        }
        return out.toByteArray();
    }

    /**
     * {@code b[s, e)} without the whitespace between tokens (strings kept whole), appended to
     * {@code out} at {@code o}; returns the new end. {@code b[s, e)} is valid JSON; {@code out}
     * needs 8 bytes of room beyond the result (whole words are stored). Eight bytes at a time and
     * without branches (a byte-wise loop mispredicts at every token): the quotes' prefix parity
     * says which bytes are inside strings, those and the bytes that are not whitespace are kept,
     * and Long.compress (PEXT) packs them. A word with a backslash goes to the byte-wise loop.
     */
    static int compact(byte[] b, int s, int e, byte[] out, int o) {
        int i = s, inside = 0;  // 0xFF while the word starts inside a string, else 0
        while (i + 8 <= e) {
            long w = (long) LineReader.LONGS.get(b, i);
            long q = equalBytes(w, QUOTES);
            if (equalBytes(w, BACKSLASHES) != 0) break;
            int qb = (int) Long.compress(q, HIGH_BITS);
            int wsb = (int) Long.compress(lessThan21(w), HIGH_BITS);
            int p = qb ^ (qb << 1);
            p ^= p << 2;
            p ^= p << 4;
            int keep = ((p ^ inside) | ~wsb) & 0xFF;
            LineReader.LONGS.set(out, o, Long.compress(w, Long.expand(keep, ONES) * 0xFF));
            o += Integer.bitCount(keep);
            if ((Integer.bitCount(qb) & 1) != 0) inside ^= 0xFF;
            i += 8;
        }
        return compactTail(b, i, e, out, o, inside != 0);
    }

    /** The high bit of exactly the bytes of w equal to the byte repeated in {@code pattern}. */
    static long equalBytes(long w, long pattern) {
        long x = w ^ pattern;
        return ~(((x & LOW7) + LOW7) | x) & HIGH_BITS;
    }

    /** The high bit of exactly the bytes of w below 0x21 (space and the control bytes; not bytes >= 0x80). */
    static long lessThan21(long w) {
        return ~(((w & LOW7) + 0x5F5F5F5F5F5F5F5FL) | w) & HIGH_BITS;
    }

    private static final long LOW7 = 0x7F7F7F7F7F7F7F7FL;

    private static int compactTail(byte[] b, int i, int e, byte[] out, int o) {
        return compactTail(b, i, e, out, o, false);
    }

    private static int compactTail(byte[] b, int i, int e, byte[] out, int o, boolean inString) {
        for (; i < e; i++) {
            byte c = b[i];
            if (inString) {
                out[o++] = c;
                if (c == '\\' && i + 1 < e) out[o++] = b[++i];
                else if (c == '"') inString = false;
            } else if (c != ' ' && c != '\t' && c != '\r' && c != '\n') {
                out[o++] = c;
                if (c == '"') inString = true;
            }
        }
        return o;
    }

    /** A value's text as the user wrote it, without whitespace between tokens (for messages). */
    String valueText(int f) {
        int s = kind[f] == STRING ? from[f] - 1 : from[f], e = kind[f] == STRING ? to[f] + 1 : to[f];
        byte[] out = new byte[e - s + 8];
        int n = compact(b, s, e, out, 0);
        String t = new String(out, 0, n, StandardCharsets.UTF_8);
        return t.length() > 80 ? t.substring(0, 77) + "..." : t;
    }

    /** The name of a kind, as in "expected a JSON object, got array". */
    static String kindName(int k) {
        return switch (k) {
            case STRING -> "string";
            case INTEGER, DECIMAL -> "number";
            case OBJECT -> "object";
            case ARRAY -> "array";
            case BOOLEAN -> "boolean";
            case NULL -> "null";
            default -> "nothing";
        };
    }
}
