// JsonReader.java — a strict RFC 8259 reader for the golden files and tokenizer_config.json, so
// that this module's tests need nothing but JUnit. It builds the values Jackson's untyped
// readValue(in, Map.class) built before the module split (LinkedHashMap, ArrayList, String,
// Integer/Long/BigInteger by size, Double, Boolean, null), which is what the goldens were checked with.
package dev.drmas.tokenizer.template;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

final class JsonReader {
    private final String text;
    private final String where;
    private int i;

    private JsonReader(String text, String where) {
        this.text = text;
        this.where = where;
    }

    /** The one JSON value in text; where names the source in errors (a file name). */
    static Object parse(String text, String where) {
        JsonReader r = new JsonReader(text, where);
        r.skipSpace();
        Object v = r.value();
        r.skipSpace();
        if (r.i != text.length()) throw r.error("text after the JSON value");
        return v;
    }

    private Object value() {
        if (i >= text.length()) throw error("a value expected, found the end");
        char c = text.charAt(i);
        return switch (c) {
            case '{' -> object();
            case '[' -> array();
            case '"' -> string();
            case 't' -> literal("true", Boolean.TRUE);
            case 'f' -> literal("false", Boolean.FALSE);
            case 'n' -> literal("null", null);
            default -> {
                if (c == '-' || (c >= '0' && c <= '9')) yield number();
                throw error("unexpected character '" + c + "'");
            }
        };
    }

    private Map<String, Object> object() {
        Map<String, Object> m = new LinkedHashMap<>();
        i++; // {
        skipSpace();
        if (peek('}')) return m;
        while (true) {
            skipSpace();
            if (i >= text.length() || text.charAt(i) != '"') throw error("a string key expected");
            String key = string();
            skipSpace();
            expect(':');
            skipSpace();
            m.put(key, value()); // a repeated key keeps its last value, as Jackson does
            skipSpace();
            if (peek('}')) return m;
            expect(',');
        }
    }

    private List<Object> array() {
        List<Object> l = new ArrayList<>();
        i++; // [
        skipSpace();
        if (peek(']')) return l;
        while (true) {
            skipSpace();
            l.add(value());
            skipSpace();
            if (peek(']')) return l;
            expect(',');
        }
    }

    private String string() {
        i++; // opening quote
        StringBuilder b = new StringBuilder();
        while (true) {
            if (i >= text.length()) throw error("unterminated string");
            char c = text.charAt(i++);
            if (c == '"') return b.toString();
            if (c < 0x20) throw error("control character U+" + String.format("%04X", (int) c) + " inside a string");
            if (c != '\\') {
                b.append(c);
                continue;
            }
            if (i >= text.length()) throw error("unterminated escape");
            char e = text.charAt(i++);
            switch (e) {
                case '"' -> b.append('"');
                case '\\' -> b.append('\\');
                case '/' -> b.append('/');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'u' -> {
                    if (i + 4 > text.length()) throw error("short \\u escape");
                    try {
                        b.append((char) Integer.parseInt(text.substring(i, i + 4), 16)); // surrogates pair up as UTF-16
                    } catch (NumberFormatException x) {
                        throw error("bad \\u escape '" + text.substring(i, i + 4) + "'");
                    }
                    i += 4;
                }
                default -> throw error("unknown escape '\\" + e + "'");
            }
        }
    }

    private Object number() {
        int start = i;
        if (peek('-')) { /* sign consumed */ }
        if (peek('0')) {
            // no leading zeros
        } else if (digits() == 0) {
            throw error("a digit expected");
        }
        boolean integral = true;
        if (peek('.')) {
            integral = false;
            if (digits() == 0) throw error("a digit expected after '.'");
        }
        if (i < text.length() && (text.charAt(i) == 'e' || text.charAt(i) == 'E')) {
            integral = false;
            i++;
            if (!peek('+')) peek('-');
            if (digits() == 0) throw error("a digit expected in the exponent");
        }
        String s = text.substring(start, i);
        if (!integral) return Double.parseDouble(s);
        BigInteger n = new BigInteger(s);
        if (n.bitLength() < 32) return n.intValue();
        if (n.bitLength() < 64) return n.longValue();
        return n;
    }

    private int digits() {
        int from = i;
        while (i < text.length() && text.charAt(i) >= '0' && text.charAt(i) <= '9') i++;
        return i - from;
    }

    private Object literal(String word, Object v) {
        if (!text.startsWith(word, i)) throw error("unexpected word (true, false or null expected)");
        i += word.length();
        return v;
    }

    private boolean peek(char c) {
        if (i < text.length() && text.charAt(i) == c) {
            i++;
            return true;
        }
        return false;
    }

    private void expect(char c) {
        if (!peek(c)) throw error("'" + c + "' expected");
    }

    private void skipSpace() {
        while (i < text.length()) {
            char c = text.charAt(i);
            if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return;
            i++;
        }
    }

    private IllegalArgumentException error(String what) {
        int line = 1;
        int col = 1;
        for (int k = 0; k < Math.min(i, text.length()); k++) {
            if (text.charAt(k) == '\n') {
                line++;
                col = 1;
            } else {
                col++;
            }
        }
        return new IllegalArgumentException(where + ":" + line + ":" + col + ": bad JSON: " + what);
    }
}
