// Py.java — Python's value semantics as jinja2 (inside HF's ImmutableSandboxedEnvironment) sees
// them: truthiness, str()/repr() (so 4/2 prints 2.0 and True prints True), ==/< across types,
// int-vs-float arithmetic, `in`, len, iteration, and the sandbox's attribute/item lookup rules
// (attributes win on `.`, items win on `[]`, misses give Undefined rather than errors).
package dev.drmas.tokenizer.template;

import static dev.drmas.tokenizer.template.Values.MISSING;

import dev.drmas.tokenizer.template.Values.*;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.util.ArrayList;
import java.util.Collections;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

final class Py {
    private Py() {}

    // ---- types ------------------------------------------------------------------------------

    static boolean isInt(Object o) {
        return o instanceof Long || o instanceof Integer || o instanceof Short || o instanceof Byte;
    }

    /** int or bool: Python's bool is an int subclass, so True + 1 == 2. */
    static boolean isIntLike(Object o) {
        return isInt(o) || o instanceof Boolean;
    }

    static boolean isFloat(Object o) {
        return o instanceof Double || o instanceof Float;
    }

    /** Python's numbers.Number, which includes bool. */
    static boolean isNumber(Object o) {
        return isIntLike(o) || isFloat(o);
    }

    static long toLong(Object o) {
        return o instanceof Boolean b ? (b ? 1 : 0) : ((Number) o).longValue();
    }

    static double toDouble(Object o) {
        return o instanceof Boolean b ? (b ? 1 : 0) : ((Number) o).doubleValue();
    }

    static String typeName(Object o) {
        if (o == null) return "NoneType";
        if (o instanceof Boolean) return "bool";
        if (isInt(o)) return "int";
        if (isFloat(o)) return "float";
        if (o instanceof String) return "str";
        if (o instanceof List) return "list";
        if (o instanceof Tuple) return "tuple";
        if (o instanceof Map) return "dict";
        if (o instanceof Undefined) return "Undefined";
        if (o instanceof Namespace) return "Namespace";
        if (o instanceof Generator g) return g.typeName;
        if (o instanceof DictView v) return v.kind();
        if (o instanceof Interpreter.MacroValue) return "Macro";
        if (o instanceof Interpreter.LoopContext) return "LoopContext";
        if (o instanceof Callable) return "builtin_function_or_method";
        return o.getClass().getSimpleName();
    }

    static boolean truthy(Object o) {
        if (o == null || o instanceof Undefined) return false;
        if (o instanceof Boolean b) return b;
        if (isInt(o)) return toLong(o) != 0;
        if (isFloat(o)) return toDouble(o) != 0;
        if (o instanceof String s) return !s.isEmpty();
        if (o instanceof List<?> l) return !l.isEmpty();
        if (o instanceof Map<?, ?> m) return !m.isEmpty();
        if (o instanceof Tuple t) return !t.items().isEmpty();
        if (o instanceof DictView v) return !v.items().isEmpty();
        return true;
    }

    // ---- str / repr ---------------------------------------------------------------------------

    /** Python's str(), which is what {{ x }} and ~ print; Undefined prints as "". */
    static String str(Object o) {
        if (o instanceof String s) return s;
        if (o instanceof Undefined) return "";
        return repr(o);
    }

    static String repr(Object o) {
        if (o == null) return "None";
        if (o instanceof Boolean b) return b ? "True" : "False";
        if (isInt(o)) return o.toString();
        if (isFloat(o)) return floatRepr(toDouble(o));
        if (o instanceof String s) return strRepr(s);
        if (o instanceof Undefined) return "Undefined";
        if (o instanceof List<?> l) return join(l, "[", "]");
        if (o instanceof Tuple t) return t.items().size() == 1 ? "(" + repr(t.items().get(0)) + ",)" : join(t.items(), "(", ")");
        if (o instanceof Map<?, ?> m) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (b.length() > 1) b.append(", ");
                b.append(repr(e.getKey())).append(": ").append(repr(e.getValue()));
            }
            return b.append('}').toString();
        }
        if (o instanceof Namespace ns) return "<Namespace " + repr(ns.attrs) + ">";
        if (o instanceof DictView v) return v.kind() + "(" + repr(v.items()) + ")";
        if (o instanceof Interpreter.MacroValue m) return "<Macro '" + m.name() + "'>";
        if (o instanceof Generator || o instanceof Callable) return "<" + typeName(o) + " object>";
        return o.toString();
    }

    private static String join(List<?> items, String open, String close) {
        StringBuilder b = new StringBuilder(open);
        for (int i = 0; i < items.size(); i++) {
            if (i > 0) b.append(", ");
            b.append(repr(items.get(i)));
        }
        return b.append(close).toString();
    }

    /**
     * Python's float repr: the shortest digits that round-trip (Java's Double.toString gives the
     * same digits since JDK 19, except that it never writes fewer than two, e.g. 4.9E-324 where
     * Python writes 5e-324), laid out positionally when the exponent is in [-4, 16), else as
     * 1e+16 / 1.5e-05.
     */
    static String floatRepr(double d) {
        if (Double.isNaN(d)) return "nan";
        if (Double.isInfinite(d)) return d > 0 ? "inf" : "-inf";
        if (d == 0) return 1 / d < 0 ? "-0.0" : "0.0";
        BigDecimal bd = new BigDecimal(Double.toString(Math.abs(d))).stripTrailingZeros();
        if (bd.precision() == 2) {
            BigDecimal one = new BigDecimal(Math.abs(d)).round(new MathContext(1, RoundingMode.HALF_EVEN));
            if (one.doubleValue() == Math.abs(d)) bd = one.stripTrailingZeros();
        }
        String digits = bd.unscaledValue().toString();
        int decpt = digits.length() - bd.scale(); // value = 0.digits * 10^decpt
        String sign = d < 0 ? "-" : "";
        if (decpt > 16 || decpt < -3) {
            int exp = decpt - 1;
            String mant = digits.length() == 1 ? digits : digits.charAt(0) + "." + digits.substring(1);
            return sign + mant + "e" + (exp < 0 ? "-" : "+") + (Math.abs(exp) < 10 ? "0" : "") + Math.abs(exp);
        }
        if (decpt <= 0) return sign + "0." + "0".repeat(-decpt) + digits;
        if (decpt >= digits.length()) return sign + digits + "0".repeat(decpt - digits.length()) + ".0";
        return sign + digits.substring(0, decpt) + "." + digits.substring(decpt);
    }

    /** Python's str repr: single quotes unless the text has ' and no ", escapes as Python does. */
    static String strRepr(String s) {
        char q = s.indexOf('\'') >= 0 && s.indexOf('"') < 0 ? '"' : '\'';
        StringBuilder b = new StringBuilder().append(q);
        s.codePoints().forEach(c -> {
            if (c == q || c == '\\') {
                b.append('\\').appendCodePoint(c);
            } else if (c == '\n') {
                b.append("\\n");
            } else if (c == '\r') {
                b.append("\\r");
            } else if (c == '\t') {
                b.append("\\t");
            } else if (c < 0x20 || c == 0x7f || (c >= 0x80 && !printable(c))) {
                b.append(c <= 0xff ? String.format("\\x%02x", c) : c <= 0xffff ? String.format("\\u%04x", c)
                        : String.format("\\U%08x", c));
            } else {
                b.appendCodePoint(c);
            }
        });
        return b.append(q).toString();
    }

    private static boolean printable(int c) {
        return switch (Character.getType(c)) {
            case Character.CONTROL, Character.FORMAT, Character.SURROGATE, Character.PRIVATE_USE, Character.UNASSIGNED,
                 Character.LINE_SEPARATOR, Character.PARAGRAPH_SEPARATOR, Character.SPACE_SEPARATOR -> false;
            default -> true;
        };
    }

    // ---- equality and ordering ------------------------------------------------------------------

    static boolean eq(Object a, Object b) {
        if (a == b) return true;
        if (a == null || b == null) return false;
        if (a instanceof Undefined || b instanceof Undefined) return a instanceof Undefined && b instanceof Undefined;
        if (isNumber(a) && isNumber(b)) {
            return isIntLike(a) && isIntLike(b) ? toLong(a) == toLong(b) : toDouble(a) == toDouble(b);
        }
        if (a instanceof List<?> la && b instanceof List<?> lb) return listEq(la, lb);
        if (a instanceof Tuple ta && b instanceof Tuple tb) return listEq(ta.items(), tb.items());
        if (a instanceof Map<?, ?> ma && b instanceof Map<?, ?> mb) {
            if (ma.size() != mb.size()) return false;
            for (Map.Entry<?, ?> e : ma.entrySet()) {
                Object v = dictGet(mb, e.getKey());
                if (v == MISSING || !eq(e.getValue(), v)) return false;
            }
            return true;
        }
        return a.equals(b);
    }

    private static boolean listEq(List<?> a, List<?> b) {
        if (a.size() != b.size()) return false;
        for (int i = 0; i < a.size(); i++) {
            if (!eq(a.get(i), b.get(i))) return false;
        }
        return true;
    }

    /** One comparison operator: == != < <= > >= in notin. */
    static boolean compare(String op, Object a, Object b) {
        return switch (op) {
            case "==" -> eq(a, b);
            case "!=" -> !eq(a, b);
            case "in" -> contains(b, a);
            case "notin" -> !contains(b, a);
            default -> order(op, a, b);
        };
    }

    private static boolean order(String op, Object a, Object b) {
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
        int c;
        if (isNumber(a) && isNumber(b)) {
            if (!(isIntLike(a) && isIntLike(b))) {
                double x = toDouble(a);
                double y = toDouble(b);
                return switch (op) { // NaN compares false, as in Python
                    case "<" -> x < y;
                    case "<=" -> x <= y;
                    case ">" -> x > y;
                    default -> x >= y;
                };
            }
            c = Long.compare(toLong(a), toLong(b));
        } else if (a instanceof String x && b instanceof String y) {
            c = compareCodePoints(x, y);
        } else if ((a instanceof List && b instanceof List) || (a instanceof Tuple && b instanceof Tuple)) {
            List<?> x = a instanceof Tuple t ? t.items() : (List<?>) a;
            List<?> y = b instanceof Tuple t ? t.items() : (List<?>) b;
            for (int i = 0; i < Math.min(x.size(), y.size()); i++) {
                if (!eq(x.get(i), y.get(i))) return order(op, x.get(i), y.get(i));
            }
            c = Integer.compare(x.size(), y.size());
        } else {
            throw new PyError("'" + op + "' not supported between instances of '" + typeName(a) + "' and '"
                    + typeName(b) + "'");
        }
        return switch (op) {
            case "<" -> c < 0;
            case "<=" -> c <= 0;
            case ">" -> c > 0;
            default -> c >= 0;
        };
    }

    /** A comparator from Python's `<`, as sorted() uses it (stable, errors on mixed types). */
    static int sortOrder(Object a, Object b) {
        return order("<", a, b) ? -1 : order("<", b, a) ? 1 : 0;
    }

    static int compareCodePoints(String a, String b) {
        int i = 0;
        int j = 0;
        while (i < a.length() && j < b.length()) {
            int x = a.codePointAt(i);
            int y = b.codePointAt(j);
            if (x != y) return Integer.compare(x, y);
            i += Character.charCount(x);
            j += Character.charCount(y);
        }
        return Integer.compare(a.length() - i, b.length() - j);
    }

    // ---- arithmetic -----------------------------------------------------------------------------

    static Object binary(String op, Object a, Object b) {
        // str % x is str.__mod__, which takes Undefined as an (empty) mapping instead of failing
        if (op.equals("%") && a instanceof String fmt) return Format.percent(fmt, b);
        if (a instanceof Undefined u) throw u.fail();
        if (b instanceof Undefined u) throw u.fail();
        boolean ints = isIntLike(a) && isIntLike(b);
        boolean nums = isNumber(a) && isNumber(b);
        try {
            switch (op) {
                case "+" -> {
                    if (ints) return Math.addExact(toLong(a), toLong(b));
                    if (nums) return toDouble(a) + toDouble(b);
                    if (a instanceof String x && b instanceof String y) return x + y;
                    if (a instanceof List<?> x && b instanceof List<?> y) return concat(x, y);
                    if (a instanceof Tuple x && b instanceof Tuple y) return new Tuple(concat(x.items(), y.items()));
                    if (a instanceof String || a instanceof List || a instanceof Tuple) {
                        throw new PyError("can only concatenate " + typeName(a) + " (not \"" + typeName(b) + "\") to "
                                + typeName(a));
                    }
                }
                case "-" -> {
                    if (ints) return Math.subtractExact(toLong(a), toLong(b));
                    if (nums) return toDouble(a) - toDouble(b);
                }
                case "*" -> {
                    if (ints) return Math.multiplyExact(toLong(a), toLong(b));
                    if (nums) return toDouble(a) * toDouble(b);
                    if (isIntLike(a) && isSequence(b)) return repeat(b, toLong(a));
                    if (isIntLike(b) && isSequence(a)) return repeat(a, toLong(b));
                }
                case "/" -> {
                    if (nums) {
                        if (toDouble(b) == 0) throw new PyError(ints ? "division by zero" : "float division by zero");
                        return toDouble(a) / toDouble(b);
                    }
                }
                case "//", "%" -> {
                    if (ints) {
                        if (toLong(b) == 0) throw new PyError("integer division or modulo by zero");
                        return op.equals("//") ? Math.floorDiv(toLong(a), toLong(b)) : Math.floorMod(toLong(a), toLong(b));
                    }
                    if (nums) return floatDivMod(op, toDouble(a), toDouble(b));
                }
                case "**" -> {
                    if (ints && toLong(b) >= 0) return intPow(toLong(a), toLong(b));
                    if (nums) {
                        double x = toDouble(a);
                        double y = toDouble(b);
                        if (x == 0 && y < 0) throw new PyError("0.0 cannot be raised to a negative power");
                        if (x < 0 && y != Math.rint(y)) throw new PyError("complex results are not supported");
                        double r = Math.pow(x, y);
                        if (Double.isInfinite(r) && !Double.isInfinite(x) && !Double.isInfinite(y)) {
                            throw new PyError("(34, 'Numerical result out of range')"); // CPython's OverflowError
                        }
                        return r;
                    }
                }
                default -> throw new IllegalStateException(op);
            }
        } catch (ArithmeticException overflow) {
            throw new PyError("integer overflow in '" + op + "' (template ints are 64-bit)");
        }
        throw new PyError("unsupported operand type(s) for " + op + ": '" + typeName(a) + "' and '" + typeName(b) + "'");
    }

    private static List<Object> concat(List<?> a, List<?> b) {
        List<Object> out = new ArrayList<>(a);
        out.addAll(b);
        return out;
    }

    private static boolean isSequence(Object o) {
        return o instanceof String || o instanceof List || o instanceof Tuple;
    }

    private static Object repeat(Object seq, long n) {
        if (seq instanceof String s) return n <= 0 ? "" : s.repeat(Math.toIntExact(n));
        List<?> items = seq instanceof Tuple t ? t.items() : (List<?>) seq;
        List<Object> out = new ArrayList<>();
        for (long k = 0; k < n; k++) out.addAll(items);
        return seq instanceof Tuple ? new Tuple(out) : out;
    }

    private static long intPow(long base, long exp) {
        long result = 1;
        while (exp > 0) {
            if ((exp & 1) == 1) result = Math.multiplyExact(result, base);
            exp >>= 1;
            if (exp > 0) base = Math.multiplyExact(base, base);
        }
        return result;
    }

    /** CPython's float floor division and modulo (float_divmod), signs included. */
    private static double floatDivMod(String op, double vx, double wx) {
        if (wx == 0) throw new PyError(op.equals("//") ? "float floor division by zero" : "float modulo");
        double mod = vx % wx;
        double div = (vx - mod) / wx;
        if (mod != 0) {
            if ((wx < 0) != (mod < 0)) {
                mod += wx;
                div -= 1.0;
            }
        } else {
            mod = Math.copySign(0.0, wx);
        }
        if (op.equals("%")) return mod;
        if (div == 0) return Math.copySign(0.0, vx / wx);
        double floor = Math.floor(div);
        return div - floor > 0.5 ? floor + 1.0 : floor;
    }

    static Object negate(Object o, boolean minus) {
        if (o instanceof Undefined u) throw u.fail();
        if (isIntLike(o)) return minus ? Math.negateExact(toLong(o)) : toLong(o);
        if (isFloat(o)) return minus ? -toDouble(o) : toDouble(o);
        throw new PyError("bad operand type for unary " + (minus ? "-" : "+") + ": '" + typeName(o) + "'");
    }

    static boolean contains(Object container, Object item) {
        if (container instanceof String s) {
            if (item instanceof String sub) return s.contains(sub);
            throw new PyError("'in <string>' requires string as left operand, not " + typeName(item));
        }
        if (container instanceof Map<?, ?> m) {
            if (item instanceof List || item instanceof Map) throw new PyError("unhashable type: '" + typeName(item) + "'");
            return dictGet(m, item) != MISSING;
        }
        if (container instanceof List || container instanceof Tuple || container instanceof Undefined
                || container instanceof Generator || container instanceof DictView) {
            for (Object x : iterate(container)) {
                if (eq(x, item)) return true;
            }
            return false;
        }
        throw new PyError("argument of type '" + typeName(container) + "' is not iterable");
    }

    // ---- containers -----------------------------------------------------------------------------

    /** Python's iter(): strings by code point, dicts by key, Undefined as empty, generators once. */
    static Iterable<Object> iterate(Object o) {
        if (o instanceof List<?> l) return Collections.unmodifiableList(l);
        if (o instanceof Tuple t) return t.items();
        if (o instanceof DictView v) return v.items();
        if (o instanceof Map<?, ?> m) return new ArrayList<>(m.keySet());
        if (o instanceof String s) return s.codePoints().mapToObj(Character::toString).map(x -> (Object) x).toList();
        if (o instanceof Undefined) return List.of();
        if (o instanceof Generator g) return () -> g.it;
        throw new PyError("'" + typeName(o) + "' object is not iterable");
    }

    static List<Object> toList(Object o) {
        List<Object> out = new ArrayList<>();
        for (Object x : iterate(o)) out.add(x);
        return out;
    }

    static Generator generator(Iterable<Object> items, String typeName) {
        Iterator<Object> it = items.iterator();
        return new Generator(it, typeName);
    }

    static int len(Object o) {
        if (o instanceof String s) return s.codePointCount(0, s.length());
        if (o instanceof List<?> l) return l.size();
        if (o instanceof Tuple t) return t.items().size();
        if (o instanceof DictView v) return v.items().size();
        if (o instanceof Map<?, ?> m) return m.size();
        if (o instanceof Undefined) return 0;
        throw new PyError("object of type '" + typeName(o) + "' has no len()");
    }

    /** d[key] with Python's hashing equality (1, 1.0 and True are one key); MISSING if absent. */
    static Object dictGet(Map<?, ?> m, Object key) {
        if (key != null && !isNumber(key)) {
            try {
                if (m.containsKey(key)) return m.get(key);
                return MISSING;
            } catch (ClassCastException | NullPointerException e) {
                return MISSING;
            }
        }
        for (Map.Entry<?, ?> e : m.entrySet()) {
            if (eq(e.getKey(), key)) return e.getValue();
        }
        return MISSING;
    }

    /** An attribute proper (no fallback to items): namespace and loop members, methods. */
    static Object attribute(Object obj, String name) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Namespace ns) return ns.attrs.containsKey(name) ? ns.attrs.get(name) : MISSING;
        if (obj instanceof Interpreter.LoopContext loop) return loop.attribute(name);
        Callable m = Methods.bind(obj, name);
        return m != null ? m : MISSING;
    }

    /** obj.name in the sandbox: the attribute if there is one, else the item, else Undefined. */
    static Object getattr(Object obj, String name) {
        Object v = attribute(obj, name);
        if (v != MISSING) return v;
        if (obj instanceof Map<?, ?> m) {
            v = dictGet(m, name);
            if (v != MISSING) return v;
        }
        return Undefined.member(obj, name);
    }

    /** obj[key] in the sandbox: the item if there is one, else (string keys) the attribute, else Undefined. */
    static Object getitem(Object obj, Object key) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Map<?, ?> m) {
            Object v = dictGet(m, key);
            if (v != MISSING) return v;
        } else if (isIntLike(key) && (obj instanceof List || obj instanceof Tuple || obj instanceof String)) {
            int n = len(obj);
            long i = toLong(key);
            if (i < 0) i += n;
            if (i >= 0 && i < n) {
                if (obj instanceof String s) return Character.toString(s.codePointAt(s.offsetByCodePoints(0, (int) i)));
                return (obj instanceof Tuple t ? t.items() : (List<?>) obj).get((int) i);
            }
        }
        if (key instanceof String name) {
            Object v = attribute(obj, name);
            if (v != MISSING) return v;
        }
        return Undefined.member(obj, key);
    }

    /**
     * obj[start:stop:step] for lists, tuples and strings, with Python's index clamping. jinja2
     * compiles slices to plain Python (no sandbox getitem), so misuse is an error, not Undefined.
     */
    static Object slice(Object obj, Object start, Object stop, Object step) {
        if (obj instanceof Undefined u) throw u.fail();
        if (obj instanceof Map) throw new PyError("unhashable type: 'slice'");
        if (!(obj instanceof List || obj instanceof Tuple || obj instanceof String)) {
            throw new PyError("'" + typeName(obj) + "' object is not subscriptable");
        }
        for (Object x : new Object[] {start, stop, step}) {
            if (x != null && !isIntLike(x)) {
                throw new PyError("slice indices must be integers or None or have an __index__ method");
            }
        }
        long st = step == null ? 1 : toLong(step);
        if (st == 0) throw new PyError("slice step cannot be zero");
        int n = len(obj);
        long lower = st < 0 ? -1 : 0;
        long upper = st < 0 ? n - 1 : n;
        long from = clamp(start, st < 0 ? upper : lower, n, lower, upper);
        long to = clamp(stop, st < 0 ? lower : upper, n, lower, upper);
        List<Integer> idx = new ArrayList<>();
        for (long i = from; st > 0 ? i < to : i > to; i += st) idx.add((int) i);
        if (obj instanceof String s) {
            int[] cps = s.codePoints().toArray();
            StringBuilder b = new StringBuilder();
            for (int i : idx) b.appendCodePoint(cps[i]);
            return b.toString();
        }
        List<?> items = obj instanceof Tuple t ? t.items() : (List<?>) obj;
        List<Object> out = new ArrayList<>(idx.size());
        for (int i : idx) out.add(items.get(i));
        return obj instanceof Tuple ? new Tuple(out) : out;
    }

    private static long clamp(Object v, long dflt, int n, long lower, long upper) {
        if (v == null) return dflt;
        long i = toLong(v);
        if (i < 0) {
            i += n;
            return Math.max(i, lower);
        }
        return Math.min(i, upper);
    }
}
