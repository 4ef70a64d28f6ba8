// Json.java — Python's json.dumps, byte for byte, because HF's `tojson` filter is
// json.dumps(x, ensure_ascii=False, indent=..., separators=..., sort_keys=...) and tool schemas
// rendered with it go straight into the prompt: ", " and ": " separators, floats as repr(),
// NaN/Infinity, non-ASCII kept unless ensure_ascii.
package dev.drmas.tokenizer.template;

import dev.drmas.tokenizer.template.Values.*;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

final class Json {
    private final boolean ensureAscii;
    private final String indent; // null: one line
    private final String itemSep;
    private final String keySep;
    private final boolean sortKeys;

    private Json(boolean ensureAscii, String indent, String itemSep, String keySep, boolean sortKeys) {
        this.ensureAscii = ensureAscii;
        this.indent = indent;
        this.itemSep = itemSep;
        this.keySep = keySep;
        this.sortKeys = sortKeys;
    }

    /**
     * indent: null, an int (spaces) or a string; separators: null or a 2-item tuple/list
     * (default ", "/": ", or ","/": " when indenting, as json.dumps does).
     */
    static String dumps(Object value, boolean ensureAscii, Object indent, Object separators, boolean sortKeys) {
        String ind = indent == null ? null : indent instanceof String s ? s : " ".repeat((int) Math.max(0, Py.toLong(indent)));
        String item = ind == null ? ", " : ",";
        String key = ": ";
        if (separators != null) {
            List<Object> seps = Py.toList(separators);
            if (seps.size() != 2 || !(seps.get(0) instanceof String a) || !(seps.get(1) instanceof String b)) {
                throw new PyError("separators must be a pair of strings, got " + Py.repr(separators));
            }
            item = a;
            key = b;
        }
        StringBuilder out = new StringBuilder();
        new Json(ensureAscii, ind, item, key, sortKeys).write(value, 0, out);
        return out.toString();
    }

    private void newline(int level, StringBuilder out) {
        out.append('\n').append(indent.repeat(level));
    }

    private void write(Object v, int level, StringBuilder out) {
        if (v == null) {
            out.append("null");
        } else if (v instanceof Boolean b) {
            out.append(b ? "true" : "false");
        } else if (Py.isInt(v)) {
            out.append(v);
        } else if (Py.isFloat(v)) {
            out.append(floatText(Py.toDouble(v)));
        } else if (v instanceof String s) {
            string(s, out);
        } else if (v instanceof List<?> || v instanceof Tuple) {
            List<?> items = v instanceof Tuple t ? t.items() : (List<?>) v;
            if (items.isEmpty()) {
                out.append("[]");
                return;
            }
            out.append('[');
            for (int i = 0; i < items.size(); i++) {
                if (i > 0) out.append(itemSep);
                if (indent != null) newline(level + 1, out);
                write(items.get(i), level + 1, out);
            }
            if (indent != null) newline(level, out);
            out.append(']');
        } else if (v instanceof Map<?, ?> m) {
            if (m.isEmpty()) {
                out.append("{}");
                return;
            }
            List<Map.Entry<String, Object>> entries = new ArrayList<>();
            for (Map.Entry<?, ?> e : m.entrySet()) entries.add(Map.entry(key(e.getKey()), nullSafe(e.getValue())));
            if (sortKeys) entries.sort((a, b) -> Py.compareCodePoints(a.getKey(), b.getKey()));
            out.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : entries) {
                if (!first) out.append(itemSep);
                first = false;
                if (indent != null) newline(level + 1, out);
                string(e.getKey(), out);
                out.append(keySep);
                write(e.getValue() == NULL ? null : e.getValue(), level + 1, out);
            }
            if (indent != null) newline(level, out);
            out.append('}');
        } else {
            throw new PyError("Object of type " + Py.typeName(v) + " is not JSON serializable");
        }
    }

    private static final Object NULL = new Object(); // Map.entry refuses null values

    private static Object nullSafe(Object v) {
        return v == null ? NULL : v;
    }

    /** json.dumps turns str, int, float, bool and None keys into strings; others are errors. */
    private static String key(Object k) {
        if (k instanceof String s) return s;
        if (k == null) return "null";
        if (k instanceof Boolean b) return b ? "true" : "false";
        if (Py.isInt(k)) return k.toString();
        if (Py.isFloat(k)) return floatText(Py.toDouble(k));
        throw new PyError("keys must be str, int, float, bool or None, not " + Py.typeName(k));
    }

    private static String floatText(double d) {
        if (Double.isNaN(d)) return "NaN";
        if (Double.isInfinite(d)) return d > 0 ? "Infinity" : "-Infinity";
        return Py.floatRepr(d);
    }

    private void string(String s, StringBuilder out) {
        out.append('"');
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"' -> out.append("\\\"");
                case '\\' -> out.append("\\\\");
                case '\n' -> out.append("\\n");
                case '\r' -> out.append("\\r");
                case '\t' -> out.append("\\t");
                case '\b' -> out.append("\\b");
                case '\f' -> out.append("\\f");
                default -> {
                    // UTF-16 units are exactly what ensure_ascii writes (surrogate pairs for astral chars)
                    if (c < 0x20 || (ensureAscii && c > 0x7e)) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
            }
        }
        out.append('"');
    }
}
