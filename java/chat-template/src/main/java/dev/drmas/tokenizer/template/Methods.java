// Methods.java — the Python methods templates call on values: str (split, strip, startswith, ...),
// dict (items, get, ...) and list. Mutating methods exist but fail, as in HF's
// ImmutableSandboxedEnvironment. Indices count code points, as Python's do.
package dev.drmas.tokenizer.template;

import static dev.drmas.tokenizer.template.Values.MISSING;

import dev.drmas.tokenizer.template.Values.*;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;

final class Methods {
    private Methods() {}

    private static final Set<String> STR = Set.of("capitalize", "center", "count", "endswith", "find", "format", "index",
            "isalnum", "isalpha", "isdigit", "islower", "isspace", "isupper", "join", "ljust", "lower", "lstrip",
            "partition", "removeprefix", "removesuffix", "replace", "rfind", "rindex", "rjust", "rpartition", "rsplit",
            "rstrip", "split", "splitlines", "startswith", "strip", "swapcase", "title", "upper", "zfill");
    private static final Set<String> DICT_UNSAFE = Set.of("clear", "pop", "popitem", "setdefault", "update");
    private static final Set<String> LIST_UNSAFE = Set.of("append", "clear", "extend", "insert", "pop", "remove",
            "reverse", "sort");

    /** The bound method obj.name, or null when obj has no such method. */
    static Callable bind(Object obj, String name) {
        if (obj instanceof String s) return STR.contains(name) ? args -> str(s, name, args) : null;
        if (obj instanceof Map<?, ?> m) {
            if (DICT_UNSAFE.contains(name)) return unsafe(obj, name);
            return switch (name) {
                case "items", "keys", "values", "get", "copy" -> args -> dict(m, name, args);
                default -> null;
            };
        }
        if (obj instanceof List<?> || obj instanceof Tuple) {
            List<?> items = obj instanceof Tuple t ? t.items() : (List<?>) obj;
            if (obj instanceof List && LIST_UNSAFE.contains(name)) return unsafe(obj, name);
            return switch (name) {
                case "count" -> args -> (long) items.stream().filter(x -> Py.eq(x, args.bind(name, 1, "x")[0])).count();
                case "index" -> args -> {
                    Object x = args.bind(name, 1, "x")[0];
                    for (int i = 0; i < items.size(); i++) {
                        if (Py.eq(items.get(i), x)) return (long) i;
                    }
                    throw new PyError(Py.repr(x) + " is not in " + Py.typeName(obj));
                };
                case "copy" -> obj instanceof List ? args -> new ArrayList<Object>(items) : null;
                default -> null;
            };
        }
        return null;
    }

    private static Callable unsafe(Object obj, String name) {
        return args -> {
            throw new PyError("access to attribute '" + name + "' of '" + Py.typeName(obj) + "' object is unsafe.");
        };
    }

    private static Object dict(Map<?, ?> m, String name, Args args) {
        switch (name) {
            case "items" -> {
                args.bind(name, 0);
                List<Object> out = new ArrayList<>();
                m.forEach((k, v) -> out.add(new Tuple(java.util.Arrays.asList(k, v))));
                return new DictView("dict_items", out);
            }
            case "keys" -> {
                args.bind(name, 0);
                return new DictView("dict_keys", new ArrayList<Object>(m.keySet()));
            }
            case "values" -> {
                args.bind(name, 0);
                return new DictView("dict_values", new ArrayList<Object>(m.values()));
            }
            case "copy" -> {
                args.bind(name, 0);
                return new LinkedHashMap<Object, Object>(m);
            }
            default -> {
                Object[] a = args.bind(name, 1, "key", "default");
                Object v = Py.dictGet(m, a[0]);
                return v != MISSING ? v : Values.or(a[1], null);
            }
        }
    }

    // ---- str ------------------------------------------------------------------------------------

    private static String strArg(String fn, Object v) {
        if (v instanceof String s) return s;
        throw new PyError(fn + "() argument must be str, not " + Py.typeName(v));
    }

    /** A str or None argument (chars of strip, sep of split). */
    private static String optStr(String fn, Object v) {
        return v == MISSING || v == null ? null : strArg(fn, v);
    }

    private static int intArg(Object v, int dflt) {
        if (v == MISSING || v == null) return dflt;
        if (!Py.isIntLike(v)) throw new PyError("'" + Py.typeName(v) + "' object cannot be interpreted as an integer");
        return Math.toIntExact(Py.toLong(v));
    }

    private static Object str(String s, String name, Args args) {
        switch (name) {
            case "upper", "lower", "title", "capitalize", "swapcase", "isalnum", "isalpha", "isdigit", "islower",
                 "isspace", "isupper", "splitlines" -> {
                if (name.equals("splitlines")) {
                    return splitlines(s, Py.truthy(Values.or(args.bind(name, 0, "keepends")[0], false)));
                }
                args.bind(name, 0);
                return noArgs(s, name);
            }
            case "strip", "lstrip", "rstrip" -> {
                String chars = optStr(name, args.bind(name, 0, "chars")[0]);
                return strip(s, chars, !name.equals("rstrip"), !name.equals("lstrip"));
            }
            case "split", "rsplit" -> {
                Object[] a = args.bind(name, 0, "sep", "maxsplit");
                String sep = optStr(name, a[0]);
                int max = intArg(a[1], -1);
                return name.equals("split") ? split(s, sep, max) : rsplit(s, sep, max);
            }
            case "startswith", "endswith" -> {
                Object[] a = args.bind(name, 1, "prefix", "start", "end");
                String part = (String) Py.slice(s, a[1] == MISSING ? null : a[1], a[2] == MISSING ? null : a[2], null);
                List<?> options = a[0] instanceof Tuple t ? t.items() : List.of(a[0]);
                for (Object o : options) {
                    String p = strArg(name, o);
                    if (name.equals("startswith") ? part.startsWith(p) : part.endsWith(p)) return true;
                }
                return false;
            }
            case "find", "rfind", "index", "rindex", "count" -> {
                Object[] a = args.bind(name, 1, "sub", "start", "end");
                String sub = strArg(name, a[0]);
                int n = Py.len(s);
                int start = a[1] == MISSING || a[1] == null ? 0 : clampIndex(intArg(a[1], 0), n);
                int end = a[2] == MISSING || a[2] == null ? n : clampIndex(intArg(a[2], n), n);
                String part = start >= end ? "" : (String) Py.slice(s, (long) start, (long) end, null);
                if (start > end) return name.equals("count") ? 0L : notFound(name);
                if (name.equals("count")) return count(part, sub);
                int at = name.startsWith("r") ? part.lastIndexOf(sub) : part.indexOf(sub);
                if (at < 0) return notFound(name);
                return (long) (start + part.codePointCount(0, at));
            }
            case "replace" -> {
                Object[] a = args.bind(name, 2, "old", "new", "count");
                return replace(s, strArg(name, a[0]), strArg(name, a[1]), intArg(a[2], -1));
            }
            case "join" -> {
                Object[] a = args.bind(name, 1, "iterable");
                StringBuilder b = new StringBuilder();
                int i = 0;
                for (Object x : Py.iterate(a[0])) {
                    if (!(x instanceof String xs)) {
                        throw new PyError("sequence item " + i + ": expected str instance, " + Py.typeName(x) + " found");
                    }
                    if (i++ > 0) b.append(s);
                    b.append(xs);
                }
                return b.toString();
            }
            case "center", "ljust", "rjust" -> {
                Object[] a = args.bind(name, 1, "width", "fillchar");
                String fill = a[1] == MISSING ? " " : strArg(name, a[1]);
                return pad(s, intArg(a[0], 0), fill, name);
            }
            case "zfill" -> {
                int width = intArg(args.bind(name, 1, "width")[0], 0);
                int n = Py.len(s);
                if (n >= width) return s;
                boolean signed = !s.isEmpty() && (s.charAt(0) == '+' || s.charAt(0) == '-');
                String zeros = "0".repeat(width - n);
                return signed ? s.charAt(0) + zeros + s.substring(1) : zeros + s;
            }
            case "partition", "rpartition" -> {
                String sep = strArg(name, args.bind(name, 1, "sep")[0]);
                if (sep.isEmpty()) throw new PyError("empty separator");
                int at = name.equals("partition") ? s.indexOf(sep) : s.lastIndexOf(sep);
                if (at < 0) return name.equals("partition") ? tuple(s, "", "") : tuple("", "", s);
                return tuple(s.substring(0, at), sep, s.substring(at + sep.length()));
            }
            case "removeprefix", "removesuffix" -> {
                String x = strArg(name, args.bind(name, 1, "x")[0]);
                if (name.equals("removeprefix")) return s.startsWith(x) ? s.substring(x.length()) : s;
                return s.endsWith(x) ? s.substring(0, s.length() - x.length()) : s;
            }
            case "format" -> {
                return Format.strFormat(s, args);
            }
            default -> throw new IllegalStateException(name);
        }
    }

    private static Tuple tuple(Object... items) {
        return new Tuple(List.of(items));
    }

    private static int clampIndex(int i, int n) {
        return i < 0 ? Math.max(0, i + n) : Math.min(i, n);
    }

    private static Object notFound(String name) {
        if (name.endsWith("find")) return -1L;
        throw new PyError("substring not found");
    }

    private static long count(String s, String sub) {
        if (sub.isEmpty()) return Py.len(s) + 1;
        long c = 0;
        for (int i = s.indexOf(sub); i >= 0; i = s.indexOf(sub, i + sub.length())) c++;
        return c;
    }

    static boolean isCased(int c) {
        return Character.isUpperCase(c) || Character.isLowerCase(c) || Character.isTitleCase(c);
    }

    private static Object noArgs(String s, String name) {
        return switch (name) {
            case "upper" -> s.toUpperCase(Locale.ROOT);
            case "lower" -> s.toLowerCase(Locale.ROOT);
            case "title" -> title(s);
            case "capitalize" -> capitalize(s);
            case "swapcase" -> {
                StringBuilder b = new StringBuilder();
                s.codePoints().forEach(c -> b.append(Character.isUpperCase(c) ? Character.toString(c).toLowerCase(Locale.ROOT)
                        : Character.isLowerCase(c) ? Character.toString(c).toUpperCase(Locale.ROOT) : Character.toString(c)));
                yield b.toString();
            }
            case "isalnum" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetterOrDigit);
            case "isalpha" -> !s.isEmpty() && s.codePoints().allMatch(Character::isLetter);
            case "isdigit" -> !s.isEmpty() && s.codePoints().allMatch(Character::isDigit);
            case "isspace" -> !s.isEmpty() && s.codePoints().allMatch(Lexer::isSpace);
            case "islower" -> s.codePoints().anyMatch(Methods::isCased)
                    && s.codePoints().noneMatch(c -> Character.isUpperCase(c) || Character.isTitleCase(c));
            default -> s.codePoints().anyMatch(Methods::isCased) // isupper
                    && s.codePoints().noneMatch(c -> Character.isLowerCase(c) || Character.isTitleCase(c));
        };
    }

    /** str.title(): a cased char after an uncased one starts a word (so "they're" gives "They'Re"). */
    static String title(String s) {
        StringBuilder b = new StringBuilder();
        boolean prevCased = false;
        for (int c : s.codePoints().toArray()) {
            String ch = Character.toString(c);
            b.append(prevCased ? ch.toLowerCase(Locale.ROOT) : titleCase(c));
            prevCased = isCased(c);
        }
        return b.toString();
    }

    private static String titleCase(int c) {
        return Character.isLowerCase(c) || Character.isUpperCase(c) ? Character.toString(Character.toTitleCase(c))
                : Character.toString(c);
    }

    /** str.capitalize() (Python 3.8+): first char title-cased, the rest lower-cased. */
    static String capitalize(String s) {
        if (s.isEmpty()) return s;
        int first = s.codePointAt(0);
        return titleCase(first) + s.substring(Character.charCount(first)).toLowerCase(Locale.ROOT);
    }

    /** str.strip(chars): chars null means Python whitespace. */
    static String strip(String s, String chars, boolean left, boolean right) {
        int start = 0;
        int end = s.length();
        while (left && start < end && stripped(s.codePointAt(start), chars)) start += Character.charCount(s.codePointAt(start));
        while (right && end > start && stripped(s.codePointBefore(end), chars)) end -= Character.charCount(s.codePointBefore(end));
        return s.substring(start, end);
    }

    private static boolean stripped(int c, String chars) {
        return chars == null ? Lexer.isSpace(c) : chars.indexOf(c) >= 0;
    }

    static List<Object> split(String s, String sep, int max) {
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int i = 0;
            int n = s.length();
            while (true) {
                while (i < n && Lexer.isSpace(s.charAt(i))) i++;
                if (i >= n) return out;
                if (max >= 0 && out.size() == max) {
                    out.add(s.substring(i)); // the rest keeps its trailing whitespace, as in CPython
                    return out;
                }
                int j = i;
                while (j < n && !Lexer.isSpace(s.charAt(j))) j++;
                out.add(s.substring(i, j));
                i = j;
            }
        }
        if (sep.isEmpty()) throw new PyError("empty separator");
        int from = 0;
        for (int at = s.indexOf(sep); at >= 0 && (max < 0 || out.size() < max); at = s.indexOf(sep, from)) {
            out.add(s.substring(from, at));
            from = at + sep.length();
        }
        out.add(s.substring(from));
        return out;
    }

    static List<Object> rsplit(String s, String sep, int max) {
        List<Object> out = new ArrayList<>();
        if (sep == null) {
            int j = s.length();
            while (true) {
                while (j > 0 && Lexer.isSpace(s.charAt(j - 1))) j--;
                if (j <= 0) break;
                if (max >= 0 && out.size() == max) {
                    out.add(s.substring(0, j));
                    break;
                }
                int i = j;
                while (i > 0 && !Lexer.isSpace(s.charAt(i - 1))) i--;
                out.add(s.substring(i, j));
                j = i;
            }
        } else {
            if (sep.isEmpty()) throw new PyError("empty separator");
            int end = s.length();
            for (int at = s.lastIndexOf(sep, end - sep.length()); at >= 0 && (max < 0 || out.size() < max);
                    at = s.lastIndexOf(sep, end - sep.length())) {
                out.add(s.substring(at + sep.length(), end));
                end = at;
            }
            out.add(s.substring(0, end));
        }
        java.util.Collections.reverse(out);
        return out;
    }

    /** str.splitlines(): every line boundary Python knows, \r\n counting as one. */
    static List<Object> splitlines(String s, boolean keepEnds) {
        List<Object> out = new ArrayList<>();
        int start = 0;
        int i = 0;
        while (i < s.length()) {
            char c = s.charAt(i);
            int eol = "\n\r\u000b\f\u001c\u001d\u001e\u0085\u2028\u2029".indexOf(c) >= 0 ? 1 : 0;
            if (eol == 0) {
                i++;
                continue;
            }
            if (c == '\r' && i + 1 < s.length() && s.charAt(i + 1) == '\n') eol = 2;
            out.add(s.substring(start, keepEnds ? i + eol : i));
            i += eol;
            start = i;
        }
        if (start < s.length()) out.add(s.substring(start));
        return out;
    }

    static String replace(String s, String old, String neu, int count) {
        if (count < 0) return s.replace(old, neu);
        StringBuilder b = new StringBuilder();
        int from = 0;
        int done = 0;
        if (old.isEmpty()) {
            int[] cps = s.codePoints().toArray();
            for (int k = 0; k < cps.length; k++) {
                if (done++ < count) b.append(neu);
                b.appendCodePoint(cps[k]);
            }
            if (done < count) b.append(neu);
            return b.toString();
        }
        for (int at = s.indexOf(old); at >= 0 && done < count; at = s.indexOf(old, from), done++) {
            b.append(s, from, at).append(neu);
            from = at + old.length();
        }
        return b.append(s.substring(from)).toString();
    }

    /** center/ljust/rjust with CPython's split of an odd margin for center. */
    static String pad(String s, int width, String fill, String how) {
        if (Py.len(fill) != 1) throw new PyError("The fill character must be exactly one character long");
        int marg = width - Py.len(s);
        if (marg <= 0) return s;
        int left = switch (how) {
            case "ljust" -> 0;
            case "rjust" -> marg;
            default -> marg / 2 + (marg & width & 1);
        };
        return fill.repeat(left) + s + fill.repeat(marg - left);
    }
}
