// YamlWriter.java — writes a config tree as block YAML that ConfigTree reads back to the same
// tree: keys in record order, lists of numbers or words in flow style ([0.9, 0.999]), strings
// quoted whenever a plain scalar could be read back as something else ("yes", "1e-6", "*").
// Hand-written rather than Jackson's generator, whose minimal quoting leaves "1e-6" and "0x10"
// plain and so turns those strings into numbers on the way back. Inside quotes the characters a
// YAML reader would not give back as themselves (controls, and the line breaks U+0085, U+2028 and
// U+2029, which it folds) are written as escapes.
package dev.drmas.config;

import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

final class YamlWriter {
    private YamlWriter() {
    }

    private static final Pattern PLAIN_KEY = Pattern.compile("[A-Za-z0-9_][A-Za-z0-9_-]*");
    // words, identifiers and paths; anything else is quoted
    private static final Pattern PLAIN = Pattern.compile("[A-Za-z_/][A-Za-z0-9_./-]*");

    static String write(Map<String, Object> root) {
        StringBuilder b = new StringBuilder();
        mapping(b, root, 0);
        return b.toString();
    }

    private static void mapping(StringBuilder b, Map<?, ?> m, int indent) {
        for (Map.Entry<?, ?> e : m.entrySet()) {
            b.append(" ".repeat(indent)).append(key((String) e.getKey())).append(':');
            value(b, e.getValue(), indent);
        }
    }

    /** Writes what follows "key:" (a space and a scalar, or a newline and a block). */
    private static void value(StringBuilder b, Object v, int indent) {
        if (v instanceof Map<?, ?> m && !m.isEmpty()) {
            b.append('\n');
            mapping(b, m, indent + 2);
        } else if (v instanceof List<?> l && !l.isEmpty() && !flat(l)) {
            b.append('\n');
            for (Object e : l) {
                String pad = " ".repeat(indent + 2);
                if (e instanceof Map<?, ?> em && !em.isEmpty()) {
                    // the entry's keys at indent + 4, the first one on the dash line
                    StringBuilder sub = new StringBuilder();
                    mapping(sub, em, indent + 4);
                    b.append(pad).append("- ").append(sub, indent + 4, sub.length());
                } else {
                    b.append(pad).append("- ").append(inline(e)).append('\n');
                }
            }
        } else {
            b.append(' ').append(inline(v)).append('\n');
        }
    }

    private static boolean flat(List<?> l) {
        for (Object e : l) if (e instanceof Map<?, ?> || e instanceof List<?> sub && !flat(sub)) return false;
        return true;
    }

    private static String inline(Object v) {
        if (v instanceof Map<?, ?> m) {
            // empty ones, and mappings inside a list inside a list (a chat template's variables may nest so)
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : m.entrySet()) {
                b.append(b.length() > 1 ? ", " : "").append(key((String) e.getKey())).append(": ").append(inline(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (v instanceof List<?> l) {
            StringBuilder b = new StringBuilder("[");
            for (Object e : l) b.append(b.length() > 1 ? ", " : "").append(inline(e));
            return b.append(']').toString();
        }
        return scalar(v);
    }

    static String scalar(Object v) {
        if (v == null) return "null";
        if (v instanceof Double d) return Double.toString(d).replace('E', 'e');
        if (v instanceof Number || v instanceof Boolean) return v.toString();
        String s = (String) v;
        return plainIsSafe(s) ? s : quote(s);
    }

    private static String key(String k) {
        return PLAIN_KEY.matcher(k).matches() ? k : quote(k);
    }

    /** A plain scalar only when it reads back as this very string (not true, null, yes, ~ or a number). */
    private static boolean plainIsSafe(String s) {
        if (!PLAIN.matcher(s).matches()) return false;
        Object back = ConfigTree.parseValue(s, "writer");
        return s.equals(back);
    }

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            switch (c) {
                case '"' -> b.append("\\\"");
                case '\\' -> b.append("\\\\");
                case '\n' -> b.append("\\n");
                case '\t' -> b.append("\\t");
                case '\r' -> b.append("\\r");
                default -> {
                    if (escaped(c)) b.append(String.format("\\u%04x", (int) c));
                    else b.append(c);
                }
            }
        }
        return b.append('"').toString();
    }

    /**
     * Characters written as \\u escapes: the controls, and what a YAML reader would not give back
     * as itself inside quotes: its line breaks U+0085, U+2028 and U+2029 (a line break in a quoted
     * scalar is folded into a space), the C1 controls and the other non-printables YAML 1.1 refuses
     * in a stream (a byte-order mark, U+FFFE, U+FFFF).
     */
    private static boolean escaped(char c) {
        return c < 0x20 || c >= 0x7f && c <= 0x9f || c == 0x2028 || c == 0x2029 || c == 0xfeff || c == 0xfffe || c == 0xffff;
    }
}
