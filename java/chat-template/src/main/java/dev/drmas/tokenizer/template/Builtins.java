// Builtins.java — jinja2's filters and tests (filters.py, tests.py) that chat templates use, plus
// the globals HF's environment adds: range, namespace, dict, raise_exception, strftime_now. HF
// overrides `tojson` with json.dumps(ensure_ascii=False, ...), reproduced here. map/select/reject/
// unique/reverse return one-shot generators as in jinja2, so `if x|select(...)` is always true there
// and here alike.
package dev.drmas.tokenizer.template;

import static dev.drmas.tokenizer.template.Values.MISSING;

import dev.drmas.tokenizer.template.Values.*;
import java.math.BigDecimal;
import java.math.RoundingMode;
import java.time.Clock;
import java.time.ZonedDateTime;
import java.time.format.TextStyle;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

final class Builtins {
    private Builtins() {}

    interface Filter {
        Object apply(Object value, Args args);
    }

    interface Test {
        boolean test(Object value, Args args);
    }

    private static final Map<String, Filter> FILTERS = new HashMap<>();
    private static final Map<String, Test> TESTS = new HashMap<>();

    static boolean hasFilter(String name) {
        return FILTERS.containsKey(name);
    }

    static boolean hasTest(String name) {
        return TESTS.containsKey(name);
    }

    static Object filter(String name, Object value, Args args) {
        Filter f = FILTERS.get(name);
        if (f == null) throw new PyError("no filter named '" + name + "'");
        return f.apply(value, args);
    }

    static boolean test(String name, Object value, Args args) {
        Test t = TESTS.get(name);
        if (t == null) throw new PyError("no test named '" + name + "'");
        return t.test(value, args);
    }

    /** Filters that take no argument besides the value. */
    private static void simple(String name, Function<Object, Object> f) {
        FILTERS.put(name, (v, args) -> {
            args.bind(name, 0);
            return f.apply(v);
        });
    }

    private static void simpleTest(String name, Predicate<Object> p) {
        TESTS.put(name, (v, args) -> {
            args.bind(name, 0);
            return p.test(v);
        });
    }

    private static void binaryTest(String[] names, String op) {
        for (String name : names) {
            TESTS.put(name, (v, args) -> Py.compare(op, v, args.bind(name, 1, "other")[0]));
        }
    }

    // ---- attribute getters (jinja2's make_attrgetter) -----------------------------------------------

    /** "a.b.0" looks up a, then b, then item 0, the way environment.getitem does. */
    private static Function<Object, Object> attrGetter(Object attribute, boolean lowerStrings, Object dflt) {
        List<Object> parts = new ArrayList<>();
        if (attribute instanceof String s) {
            for (String p : s.split("\\.", -1)) parts.add(!p.isEmpty() && p.chars().allMatch(Character::isDigit) ? (Object) Long.parseLong(p) : p);
        } else if (attribute != null && attribute != MISSING) {
            parts.add(attribute);
        }
        return item -> {
            for (Object p : parts) {
                item = Py.getitem(item, p);
                if (dflt != null && item instanceof Undefined) item = dflt;
            }
            return lowerStrings && item instanceof String str ? str.toLowerCase(Locale.ROOT) : item;
        };
    }

    /** jinja2's make_multi_attrgetter: "age,name" gives a list of keys, compared in order. */
    private static Function<Object, Object> multiAttrGetter(Object attribute, boolean lowerStrings) {
        if (!(attribute instanceof String s) || !s.contains(",")) {
            Function<Object, Object> one = attrGetter(attribute, lowerStrings, null);
            return item -> java.util.Collections.singletonList(one.apply(item));
        }
        List<Function<Object, Object>> getters = new ArrayList<>();
        for (String part : s.split(",", -1)) getters.add(attrGetter(part, lowerStrings, null));
        return item -> {
            List<Object> keys = new ArrayList<>();
            for (Function<Object, Object> g : getters) keys.add(g.apply(item));
            return keys;
        };
    }

    private static Generator gen(List<Object> items, String typeName) {
        return Py.generator(items, typeName);
    }

    private static Args rest(Args args, int skip) {
        return new Args(args.positional().subList(Math.min(skip, args.positional().size()), args.positional().size()),
                args.keyword());
    }

    /** select/reject/selectattr/rejectattr: jinja2's select_or_reject (a falsy value yields nothing). */
    private static Object selectOrReject(Object value, Args args, boolean select, boolean lookupAttr) {
        List<Object> kept = new ArrayList<>();
        if (!Py.truthy(value)) return gen(kept, "generator");
        int off = 0;
        Function<Object, Object> trans = x -> x;
        if (lookupAttr) {
            if (args.positional().isEmpty()) throw new PyError("Missing parameter for attribute name");
            trans = attrGetter(args.positional().get(0), false, null);
            off = 1;
        }
        Predicate<Object> pred;
        if (args.positional().size() > off) {
            Object name = args.positional().get(off);
            Args testArgs = rest(args, off + 1);
            String testName = Py.str(name);
            if (!hasTest(testName)) throw new PyError("no test named " + Py.repr(name));
            pred = x -> test(testName, x, testArgs);
        } else {
            pred = Py::truthy;
        }
        for (Object item : Py.iterate(value)) {
            if (pred.test(trans.apply(item)) == select) kept.add(item);
        }
        return gen(kept, "generator");
    }

    private static Object map(Object value, Args args) {
        List<Object> out = new ArrayList<>();
        if (!Py.truthy(value)) return gen(out, "generator");
        Function<Object, Object> f;
        if (args.positional().isEmpty() && args.keyword().containsKey("attribute")) {
            Map<String, Object> kw = new LinkedHashMap<>(args.keyword());
            Object attribute = kw.remove("attribute");
            Object dflt = kw.remove("default");
            if (!kw.isEmpty()) throw new PyError("Unexpected keyword argument " + Py.repr(kw.keySet().iterator().next()));
            f = attrGetter(attribute, false, dflt);
        } else {
            if (args.positional().isEmpty()) throw new PyError("map requires a filter argument");
            String name = Py.str(args.positional().get(0));
            if (!hasFilter(name)) throw new PyError("no filter named " + Py.repr(name));
            Args filterArgs = rest(args, 1);
            f = x -> filter(name, x, filterArgs);
        }
        for (Object item : Py.iterate(value)) out.add(f.apply(item));
        return gen(out, "generator");
    }

    private static Object minMax(Object value, Args args, boolean min) {
        Object[] a = args.bind(min ? "min" : "max", 0, "case_sensitive", "attribute");
        List<Object> items = Py.toList(value);
        if (items.isEmpty()) return new Undefined("No aggregated item, sequence was empty.");
        Function<Object, Object> key = attrGetter(a[1], !Py.truthy(Values.or(a[0], false)), null);
        Object best = items.get(0);
        Object bestKey = key.apply(best);
        for (Object item : items.subList(1, items.size())) {
            Object k = key.apply(item);
            if (min ? Py.compare("<", k, bestKey) : Py.compare(">", k, bestKey)) {
                best = item;
                bestKey = k;
            }
        }
        return best;
    }

    /** Python's int(str, base) then int(float(str)), as jinja2's int filter tries them. */
    private static Object toInt(Object v, Object dflt, int base) {
        if (v instanceof Undefined u) throw u.fail();
        if (v instanceof String s) {
            String t = s.strip().replace("_", "");
            try {
                if (base == 16 && t.toLowerCase(Locale.ROOT).matches("[+-]?0x.*")) t = t.replaceFirst("(?i)0x", "");
                if (base == 8 && t.toLowerCase(Locale.ROOT).matches("[+-]?0o.*")) t = t.replaceFirst("(?i)0o", "");
                if (base == 2 && t.toLowerCase(Locale.ROOT).matches("[+-]?0b.*")) t = t.replaceFirst("(?i)0b", "");
                return Long.parseLong(t, base);
            } catch (NumberFormatException e) {
                Double d = parseFloat(s);
                return d == null || d.isNaN() || d.isInfinite() ? dflt : toLongExact(d);
            }
        }
        if (Py.isIntLike(v)) return Py.toLong(v);
        if (Py.isFloat(v)) {
            double d = Py.toDouble(v);
            return Double.isNaN(d) || Double.isInfinite(d) ? dflt : toLongExact(d);
        }
        return dflt;
    }

    /** int(float) truncates; Python's result is exact at any size, ours must fit a long. */
    private static long toLongExact(double d) {
        if (Math.abs(d) >= 0x1p63) throw new PyError("int(" + Py.floatRepr(d) + ") does not fit in 64 bits");
        return (long) d;
    }

    private static final Pattern PY_FLOAT = Pattern.compile(
            "[+-]?((\\d+(\\.\\d*)?|\\.\\d+)([eE][+-]?\\d+)?|inf|infinity|nan)", Pattern.CASE_INSENSITIVE);

    /** Python's float(str): surrounding whitespace, underscores between digits, inf/nan; else null. */
    static Double parseFloat(String s) {
        String t = Methods.strip(s, null, true, true).replaceAll("(?<=\\d)_(?=\\d)", "");
        if (!PY_FLOAT.matcher(t).matches()) return null;
        String lower = t.toLowerCase(Locale.ROOT);
        if (lower.endsWith("inf") || lower.endsWith("infinity")) return lower.startsWith("-") ? Double.NEGATIVE_INFINITY
                : Double.POSITIVE_INFINITY;
        if (lower.endsWith("nan")) return Double.NaN;
        return Double.parseDouble(t);
    }

    /** round(x, p) for floats: the exact binary value rounded half-even, as CPython does. */
    private static Object round(Object v, long precision, String method) {
        if (!Py.isNumber(v)) throw new PyError("type " + Py.typeName(v) + " doesn't define __round__ method");
        if (method.equals("common")) {
            if (Py.isIntLike(v)) return Py.toLong(v);
            double d = Py.toDouble(v);
            if (Double.isNaN(d) || Double.isInfinite(d)) return d;
            double r = new BigDecimal(d).setScale((int) precision, RoundingMode.HALF_EVEN).doubleValue();
            return r == 0 ? Math.copySign(0.0, d) : r;
        }
        double scale = Math.pow(10, precision);
        double x = Py.toDouble(v) * scale;
        return (method.equals("ceil") ? Math.ceil(x) : Math.floor(x)) / scale;
    }

    /** jinja2's indent: the first line and blank lines stay unindented unless asked. */
    private static String indent(Object value, Object width, boolean first, boolean blank) {
        // jinja2 starts with `s += "\n"`, which only a str survives
        if (value instanceof Undefined u) throw u.fail();
        if (value instanceof List) throw new PyError("'list' object has no attribute 'splitlines'");
        if (!(value instanceof String s)) {
            throw new PyError("unsupported operand type(s) for +=: '" + Py.typeName(value) + "' and 'str'");
        }
        String ind = width instanceof String w ? w : " ".repeat((int) Py.toLong(width));
        List<Object> lines = Methods.splitlines(s + "\n", false);
        StringBuilder rv = new StringBuilder();
        if (blank) {
            for (int i = 0; i < lines.size(); i++) {
                if (i > 0) rv.append('\n').append(ind);
                rv.append(lines.get(i));
            }
        } else {
            rv.append(lines.get(0));
            for (Object line : lines.subList(1, lines.size())) {
                rv.append('\n');
                if (!((String) line).isEmpty()) rv.append(ind);
                rv.append(line);
            }
        }
        return first ? ind + rv : rv.toString();
    }

    private static final Pattern TITLE_SPLIT = Pattern.compile("([-\\s({\\[<]+)", Pattern.UNICODE_CHARACTER_CLASS);

    /** jinja2's title filter (not str.title): words start after '-', whitespace or an opening bracket. */
    private static String title(String s) {
        StringBuilder b = new StringBuilder();
        Matcher m = TITLE_SPLIT.matcher(s);
        int last = 0;
        while (m.find()) {
            b.append(titleWord(s.substring(last, m.start()))).append(m.group());
            last = m.end();
        }
        return b.append(titleWord(s.substring(last))).toString();
    }

    private static String titleWord(String w) {
        if (w.isEmpty()) return w;
        int n = Character.charCount(w.codePointAt(0));
        return w.substring(0, n).toUpperCase(Locale.ROOT) + w.substring(n).toLowerCase(Locale.ROOT);
    }

    private static String escape(Object v) {
        return Py.str(v).replace("&", "&amp;").replace(">", "&gt;").replace("<", "&lt;").replace("'", "&#39;")
                .replace("\"", "&#34;");
    }

    private static List<Object> dictItems(Object v) {
        if (v instanceof Undefined u) throw u.fail();
        if (!(v instanceof Map)) throw new PyError("'" + Py.typeName(v) + "' object has no attribute 'items'");
        List<Object> out = new ArrayList<>();
        ((Map<?, ?>) v).forEach((k, x) -> out.add(new Tuple(java.util.Arrays.asList(k, x))));
        return out;
    }

    static {
        simple("abs", v -> {
            if (Py.isIntLike(v)) return Math.abs(Py.toLong(v));
            if (Py.isFloat(v)) return Math.abs(Py.toDouble(v));
            throw new PyError("bad operand type for abs(): '" + Py.typeName(v) + "'");
        });
        FILTERS.put("attr", (v, args) -> {
            Object r = Py.attribute(v, Py.str(args.bind("attr", 1, "name")[0]));
            return r == MISSING ? Undefined.member(v, args.positional().isEmpty() ? args.keyword().get("name") : args.positional().get(0)) : r;
        });
        simple("capitalize", v -> Methods.capitalize(Py.str(v)));
        FILTERS.put("center", (v, args) -> Methods.pad(Py.str(v), (int) Py.toLong(Values.or(args.bind("center", 0, "width")[0], 80L)), " ", "center"));
        simple("length", v -> (long) Py.len(v));
        simple("count", v -> (long) Py.len(v));
        Filter dflt = (v, args) -> {
            Object[] a = args.bind("default", 0, "default_value", "boolean");
            boolean useDefault = v instanceof Undefined || (Py.truthy(Values.or(a[1], false)) && !Py.truthy(v));
            return useDefault ? Values.or(a[0], "") : v;
        };
        FILTERS.put("default", dflt);
        FILTERS.put("d", dflt);
        FILTERS.put("dictsort", (v, args) -> {
            Object[] a = args.bind("dictsort", 0, "case_sensitive", "by", "reverse");
            Object by = Values.or(a[1], "key");
            if (!by.equals("key") && !by.equals("value")) throw new PyError("You can only sort by either \"key\" or \"value\"");
            int pos = by.equals("key") ? 0 : 1;
            boolean lower = !Py.truthy(Values.or(a[0], false));
            List<Object> items = dictItems(v);
            java.util.Comparator<Object> cmp = (x, y) -> Py.sortOrder(lowered(((Tuple) x).items().get(pos), lower),
                    lowered(((Tuple) y).items().get(pos), lower));
            items.sort(Py.truthy(Values.or(a[2], false)) ? cmp.reversed() : cmp);
            return items;
        });
        simple("e", Builtins::escape);
        simple("escape", Builtins::escape);
        simple("forceescape", Builtins::escape);
        simple("first", v -> {
            Iterator<Object> it = Py.iterate(v).iterator();
            return it.hasNext() ? it.next() : new Undefined("No first item, sequence was empty.");
        });
        simple("last", v -> {
            if (v instanceof Generator g) throw new PyError("'" + g.typeName + "' object is not reversible");
            List<Object> items = Py.toList(v);
            return items.isEmpty() ? new Undefined("No last item, sequence was empty.") : items.get(items.size() - 1);
        });
        FILTERS.put("float", (v, args) -> {
            Object d = Values.or(args.bind("float", 0, "default")[0], 0.0);
            if (v instanceof Undefined u) throw u.fail();
            if (v instanceof String s) {
                Double x = parseFloat(s);
                return x == null ? d : x;
            }
            return Py.isNumber(v) ? (Object) Py.toDouble(v) : d;
        });
        FILTERS.put("format", (v, args) -> {
            if (!args.positional().isEmpty() && !args.keyword().isEmpty()) {
                throw new PyError("can't handle positional and keyword arguments at the same time");
            }
            Object operand = !args.keyword().isEmpty() ? new LinkedHashMap<>(args.keyword()) : new Tuple(args.positional());
            return Format.percent(Py.str(v), operand);
        });
        FILTERS.put("indent", (v, args) -> {
            Object[] a = args.bind("indent", 0, "width", "first", "blank");
            return indent(v, Values.or(a[0], 4L), Py.truthy(Values.or(a[1], false)), Py.truthy(Values.or(a[2], false)));
        });
        FILTERS.put("int", (v, args) -> {
            Object[] a = args.bind("int", 0, "default", "base");
            return toInt(v, Values.or(a[0], 0L), (int) Py.toLong(Values.or(a[1], 10L)));
        });
        FILTERS.put("items", (v, args) -> {
            args.bind("items", 0);
            if (v instanceof Undefined) return gen(new ArrayList<>(), "generator");
            if (!(v instanceof Map)) throw new PyError("Can only get item pairs from a mapping.");
            return gen(dictItems(v), "generator");
        });
        FILTERS.put("join", (v, args) -> {
            Object[] a = args.bind("join", 0, "d", "attribute");
            Function<Object, Object> get = a[1] == MISSING || a[1] == null ? x -> x : attrGetter(a[1], false, null);
            StringBuilder b = new StringBuilder();
            String sep = Py.str(Values.or(a[0], ""));
            boolean first = true;
            for (Object item : Py.iterate(v)) {
                if (!first) b.append(sep);
                first = false;
                b.append(Py.str(get.apply(item)));
            }
            return b.toString();
        });
        simple("list", Py::toList);
        simple("lower", v -> Py.str(v).toLowerCase(Locale.ROOT));
        simple("upper", v -> Py.str(v).toUpperCase(Locale.ROOT));
        FILTERS.put("map", Builtins::map);
        FILTERS.put("min", (v, args) -> minMax(v, args, true));
        FILTERS.put("max", (v, args) -> minMax(v, args, false));
        FILTERS.put("select", (v, args) -> selectOrReject(v, args, true, false));
        FILTERS.put("reject", (v, args) -> selectOrReject(v, args, false, false));
        FILTERS.put("selectattr", (v, args) -> selectOrReject(v, args, true, true));
        FILTERS.put("rejectattr", (v, args) -> selectOrReject(v, args, false, true));
        FILTERS.put("replace", (v, args) -> {
            Object[] a = args.bind("replace", 2, "old", "new", "count");
            Object count = Values.or(a[2], null);
            return Methods.replace(Py.str(v), Py.str(a[0]), Py.str(a[1]), count == null ? -1 : (int) Py.toLong(count));
        });
        simple("reverse", v -> {
            if (v instanceof String s) return new StringBuilder(s).reverse().toString();
            List<Object> items = Py.toList(v);
            java.util.Collections.reverse(items);
            boolean reversible = v instanceof List || v instanceof Tuple || v instanceof Map || v instanceof Undefined
                    || v instanceof DictView;
            return reversible ? gen(items, v instanceof List ? "list_reverseiterator" : "reversed") : items;
        });
        FILTERS.put("round", (v, args) -> {
            Object[] a = args.bind("round", 0, "precision", "method");
            String method = Py.str(Values.or(a[1], "common"));
            if (!List.of("common", "ceil", "floor").contains(method)) throw new PyError("method must be common, ceil or floor");
            return round(v, Py.toLong(Values.or(a[0], 0L)), method);
        });
        simple("safe", Py::str);
        FILTERS.put("sort", (v, args) -> {
            Object[] a = args.bind("sort", 0, "reverse", "case_sensitive", "attribute");
            Function<Object, Object> key = multiAttrGetter(Values.or(a[2], null), !Py.truthy(Values.or(a[1], false)));
            List<Object> items = Py.toList(v);
            List<Object[]> keyed = new ArrayList<>();
            for (Object item : items) keyed.add(new Object[] {key.apply(item), item});
            java.util.Comparator<Object[]> cmp = (x, y) -> Py.sortOrder(x[0], y[0]);
            keyed.sort(Py.truthy(Values.or(a[0], false)) ? cmp.reversed() : cmp);
            List<Object> out = new ArrayList<>();
            for (Object[] k : keyed) out.add(k[1]);
            return out;
        });
        simple("string", Py::str);
        FILTERS.put("sum", (v, args) -> {
            Object[] a = args.bind("sum", 0, "attribute", "start");
            Function<Object, Object> get = a[0] == MISSING || a[0] == null ? x -> x : attrGetter(a[0], false, null);
            Object total = Values.or(a[1], 0L);
            for (Object item : Py.iterate(v)) total = Py.binary("+", total, get.apply(item));
            return total;
        });
        simple("title", v -> title(Py.str(v)));
        FILTERS.put("tojson", (v, args) -> {
            Object[] a = args.bind("tojson", 0, "ensure_ascii", "indent", "separators", "sort_keys");
            return Json.dumps(v, Py.truthy(Values.or(a[0], false)), Values.or(a[1], null), Values.or(a[2], null),
                    Py.truthy(Values.or(a[3], false)));
        });
        FILTERS.put("trim", (v, args) -> {
            Object chars = Values.or(args.bind("trim", 0, "chars")[0], null);
            return Methods.strip(Py.str(v), chars == null ? null : Py.str(chars), true, true);
        });
        FILTERS.put("truncate", (v, args) -> {
            Object[] a = args.bind("truncate", 0, "length", "killwords", "end", "leeway");
            String s = Py.str(v);
            int length = (int) Py.toLong(Values.or(a[0], 255L));
            String end = Py.str(Values.or(a[2], "..."));
            Object lw = Values.or(a[3], null); // None means the environment's policy, 5
            int leeway = lw == null ? 5 : (int) Py.toLong(lw);
            if (Py.len(s) <= length + leeway) return s;
            String head = (String) Py.slice(s, null, (long) (length - Py.len(end)), null);
            if (Py.truthy(Values.or(a[1], false))) return head + end;
            int space = head.lastIndexOf(' ');
            return (space < 0 ? head : head.substring(0, space)) + end;
        });
        FILTERS.put("unique", (v, args) -> {
            Object[] a = args.bind("unique", 0, "case_sensitive", "attribute");
            Function<Object, Object> key = attrGetter(Values.or(a[1], null), !Py.truthy(Values.or(a[0], false)), null);
            List<Object> seen = new ArrayList<>();
            List<Object> out = new ArrayList<>();
            for (Object item : Py.iterate(v)) {
                Object k = key.apply(item);
                if (k instanceof List || k instanceof Map) throw new PyError("unhashable type: '" + Py.typeName(k) + "'");
                if (seen.stream().noneMatch(s -> Py.eq(s, k))) {
                    seen.add(k);
                    out.add(item);
                }
            }
            return gen(out, "generator");
        });
        Pattern word = Pattern.compile("[\\p{L}\\p{N}_]+");
        simple("wordcount", v -> word.matcher(Py.str(v)).results().count());

        simpleTest("defined", v -> !(v instanceof Undefined));
        simpleTest("undefined", v -> v instanceof Undefined);
        simpleTest("none", v -> v == null);
        simpleTest("boolean", v -> v instanceof Boolean);
        simpleTest("true", v -> Boolean.TRUE.equals(v));
        simpleTest("false", v -> Boolean.FALSE.equals(v));
        simpleTest("integer", Py::isInt);
        simpleTest("float", Py::isFloat);
        simpleTest("number", Py::isNumber);
        simpleTest("string", v -> v instanceof String);
        simpleTest("mapping", v -> v instanceof Map);
        simpleTest("sequence", v -> v instanceof String || v instanceof List || v instanceof Tuple || v instanceof Map
                || v instanceof Undefined);
        simpleTest("iterable", v -> v instanceof String || v instanceof List || v instanceof Tuple || v instanceof Map
                || v instanceof Undefined || v instanceof Generator || v instanceof DictView);
        simpleTest("callable", v -> v instanceof Callable);
        simpleTest("escaped", v -> false);
        simpleTest("lower", v -> (Boolean) Methods.bind(Py.str(v), "islower").call(Args.NONE));
        simpleTest("upper", v -> (Boolean) Methods.bind(Py.str(v), "isupper").call(Args.NONE));
        simpleTest("odd", v -> Py.eq(Py.binary("%", v, 2L), 1L));
        simpleTest("even", v -> Py.eq(Py.binary("%", v, 2L), 0L));
        TESTS.put("divisibleby", (v, args) -> Py.eq(Py.binary("%", v, args.bind("divisibleby", 1, "num")[0]), 0L));
        TESTS.put("sameas", (v, args) -> {
            Object other = args.bind("sameas", 1, "other")[0];
            // Python's `is`: singletons and small ints are shared objects there
            if (v == null || other == null || v instanceof Boolean || other instanceof Boolean) return Objects.equals(v, other);
            if (Py.isInt(v) && Py.isInt(other)) return Py.toLong(v) == Py.toLong(other) && Math.abs(Py.toLong(v) - 128) <= 133;
            return v == other;
        });
        TESTS.put("in", (v, args) -> Py.contains(args.bind("in", 1, "seq")[0], v));
        TESTS.put("filter", (v, args) -> hasFilter(Py.str(v)));
        TESTS.put("test", (v, args) -> hasTest(Py.str(v)));
        binaryTest(new String[] {"==", "eq", "equalto"}, "==");
        binaryTest(new String[] {"!=", "ne"}, "!=");
        binaryTest(new String[] {">", "gt", "greaterthan"}, ">");
        binaryTest(new String[] {">=", "ge"}, ">=");
        binaryTest(new String[] {"<", "lt", "lessthan"}, "<");
        binaryTest(new String[] {"<=", "le"}, "<=");
    }

    private static Object lowered(Object v, boolean lower) {
        return lower && v instanceof String s ? s.toLowerCase(Locale.ROOT) : v;
    }

    // ---- globals ------------------------------------------------------------------------------------

    /** jinja2's globals plus HF's raise_exception and strftime_now (local time of the clock). */
    static Map<String, Object> globals(Clock clock) {
        Map<String, Object> g = new HashMap<>();
        g.put("range", (Callable) args -> {
            Object[] a = args.bind("range", 1, "start", "stop", "step");
            long start = a[1] == MISSING ? 0 : Py.toLong(a[0]);
            long stop = a[1] == MISSING ? Py.toLong(a[0]) : Py.toLong(a[1]);
            long step = a[2] == MISSING ? 1 : Py.toLong(a[2]);
            if (step == 0) throw new PyError("range() arg 3 must not be zero");
            List<Object> out = new ArrayList<>();
            for (long i = start; step > 0 ? i < stop : i > stop; i += step) {
                if (out.size() >= 100_000) {
                    throw new PyError("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
                }
                out.add(i);
            }
            return out;
        });
        g.put("namespace", (Callable) args -> {
            Namespace ns = new Namespace();
            for (Object p : args.positional()) {
                if (!(p instanceof Map<?, ?> m)) throw new PyError("namespace() positional argument must be a mapping");
                m.forEach((k, v) -> ns.attrs.put(Py.str(k), v));
            }
            ns.attrs.putAll(args.keyword());
            return ns;
        });
        g.put("dict", (Callable) args -> {
            Map<Object, Object> d = new LinkedHashMap<>();
            for (Object p : args.positional()) {
                if (!(p instanceof Map<?, ?> m)) throw new PyError("dict() positional argument must be a mapping");
                d.putAll(m);
            }
            d.putAll(args.keyword());
            return d;
        });
        g.put("raise_exception", (Callable) args -> {
            throw new RaisedByTemplate(Py.str(args.bind("raise_exception", 1, "message")[0]));
        });
        g.put("strftime_now", (Callable) args -> {
            String fmt = Py.str(args.bind("strftime_now", 1, "format")[0]);
            return strftime(fmt, ZonedDateTime.now(clock));
        });
        return g;
    }

    /** C strftime in the C locale, for the directives date lines in templates use. */
    static String strftime(String fmt, ZonedDateTime t) {
        StringBuilder b = new StringBuilder();
        for (int i = 0; i < fmt.length(); i++) {
            char c = fmt.charAt(i);
            if (c != '%' || i + 1 >= fmt.length()) {
                b.append(c);
                continue;
            }
            char d = fmt.charAt(++i);
            boolean noPad = d == '-' && i + 1 < fmt.length(); // glibc's %-d
            if (noPad) d = fmt.charAt(++i);
            String v = switch (d) {
                case 'a' -> t.getDayOfWeek().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'A' -> t.getDayOfWeek().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
                case 'b', 'h' -> t.getMonth().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'B' -> t.getMonth().getDisplayName(TextStyle.FULL, Locale.ENGLISH);
                case 'd' -> two(t.getDayOfMonth());
                case 'e' -> String.format(Locale.ROOT, "%2d", t.getDayOfMonth());  // ASCII digits whatever the default locale
                case 'H' -> two(t.getHour());
                case 'I' -> two(t.getHour() % 12 == 0 ? 12 : t.getHour() % 12);
                case 'j' -> String.format(Locale.ROOT, "%03d", t.getDayOfYear());
                case 'm' -> two(t.getMonthValue());
                case 'M' -> two(t.getMinute());
                case 'p' -> t.getHour() < 12 ? "AM" : "PM";
                case 'S' -> two(t.getSecond());
                case 'y' -> two(t.getYear() % 100);
                case 'Y' -> Integer.toString(t.getYear());
                case 'F' -> t.getYear() + "-" + two(t.getMonthValue()) + "-" + two(t.getDayOfMonth());
                case 'T' -> two(t.getHour()) + ":" + two(t.getMinute()) + ":" + two(t.getSecond());
                case 'Z' -> t.getZone().getDisplayName(TextStyle.SHORT, Locale.ENGLISH);
                case 'z' -> t.getOffset().getId().equals("Z") ? "+0000" : t.getOffset().getId().replace(":", "");
                case '%' -> "%";
                default -> "%" + (noPad ? "-" : "") + d;
            };
            if (noPad && !v.isEmpty()) v = v.replaceFirst("^[0 ]+(?=.)", "");
            b.append(v);
        }
        return b.toString();
    }

    private static String two(int n) {
        return n < 10 ? "0" + n : Integer.toString(n);
    }
}
