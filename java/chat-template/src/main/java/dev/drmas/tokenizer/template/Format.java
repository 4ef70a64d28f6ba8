// Format.java — Python's two string formatting languages as templates reach them: printf-style
// `"%s: %.2f" % (a, b)` (also the `format` filter) and `"{}: {:.2f}".format(a, b)`. Fixed-point
// digits come from the exact binary value rounded half-even, which is what CPython prints.
package dev.drmas.tokenizer.template;

import static dev.drmas.tokenizer.template.Values.MISSING;

import dev.drmas.tokenizer.template.Values.*;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.RoundingMode;
import java.util.List;
import java.util.Map;

final class Format {
    private Format() {}

    /**
     * fmt % arg: a tuple supplies positional values, a dict supplies %(key)s values. Like CPython,
     * an argument with __getitem__ (dict, list, Undefined) switches off the "not all arguments
     * converted" check.
     */
    static String percent(String fmt, Object arg) {
        List<?> values = arg instanceof Tuple t ? t.items() : java.util.Collections.singletonList(arg);
        Map<?, ?> mapping = arg instanceof Map<?, ?> m ? m : null;
        boolean subscriptable = arg instanceof Map || arg instanceof List || arg instanceof Undefined;
        int next = 0;
        StringBuilder b = new StringBuilder();
        int i = 0;
        while (i < fmt.length()) {
            char c = fmt.charAt(i++);
            if (c != '%') {
                b.append(c);
                continue;
            }
            if (i >= fmt.length()) throw new PyError("incomplete format");
            String key = null;
            if (fmt.charAt(i) == '(') {
                int close = fmt.indexOf(')', i);
                if (close < 0) throw new PyError("incomplete format key");
                key = fmt.substring(i + 1, close);
                i = close + 1;
            }
            String flags = "";
            while (i < fmt.length() && "-+ #0".indexOf(fmt.charAt(i)) >= 0) flags += fmt.charAt(i++);
            int width = -1;
            int precision = -1;
            if (i < fmt.length() && fmt.charAt(i) == '*') {
                i++;
                width = (int) Py.toLong(values.get(next++));
            } else {
                int start = i;
                while (i < fmt.length() && Character.isDigit(fmt.charAt(i))) i++;
                if (i > start) width = Integer.parseInt(fmt.substring(start, i));
            }
            if (i < fmt.length() && fmt.charAt(i) == '.') {
                i++;
                int start = i;
                while (i < fmt.length() && Character.isDigit(fmt.charAt(i))) i++;
                precision = i > start ? Integer.parseInt(fmt.substring(start, i)) : 0;
            }
            while (i < fmt.length() && "hlL".indexOf(fmt.charAt(i)) >= 0) i++;
            if (i >= fmt.length()) throw new PyError("incomplete format");
            char conv = fmt.charAt(i++);
            if (conv == '%') {
                b.append('%');
                continue;
            }
            Object v;
            if (key != null) {
                if (mapping == null) throw new PyError("format requires a mapping");
                v = Py.dictGet(mapping, key);
                if (v == MISSING) throw new PyError("KeyError: " + Py.repr(key));
            } else {
                if (next >= values.size()) throw new PyError("not enough arguments for format string");
                v = values.get(next++);
            }
            String sign = "";
            String body;
            boolean numeric = true;
            switch (conv) {
                case 's', 'r', 'a' -> {
                    body = conv == 's' ? Py.str(v) : Py.repr(v);
                    if (precision >= 0 && precision < body.length()) body = body.substring(0, precision);
                    numeric = false;
                }
                case 'd', 'i', 'u', 'x', 'X', 'o' -> {
                    boolean needsInt = "xXo".indexOf(conv) >= 0;
                    if (!Py.isNumber(v) || (needsInt && Py.isFloat(v))) {
                        throw new PyError("%" + conv + " format: " + (needsInt ? "an integer" : "a real number")
                                + " is required, not " + Py.typeName(v));
                    }
                    BigInteger n = Py.isFloat(v) ? new BigDecimal(Py.toDouble(v)).toBigInteger() : BigInteger.valueOf(Py.toLong(v));
                    sign = n.signum() < 0 ? "-" : "";
                    body = n.abs().toString(conv == 'x' || conv == 'X' ? 16 : conv == 'o' ? 8 : 10);
                    if (conv == 'X') body = body.toUpperCase();
                }
                case 'f', 'F' -> {
                    if (!Py.isNumber(v)) throw new PyError("must be real number, not " + Py.typeName(v));
                    double d = Py.toDouble(v);
                    sign = d < 0 || (d == 0 && 1 / d < 0) ? "-" : "";
                    body = fixed(Math.abs(d), precision < 0 ? 6 : precision);
                }
                case 'c' -> {
                    body = v instanceof String s && Py.len(s) == 1 ? s : Character.toString((int) Py.toLong(v));
                    numeric = false;
                }
                default -> throw new PyError("unsupported format character '" + conv + "'");
            }
            if (numeric && sign.isEmpty()) sign = flags.contains("+") ? "+" : flags.contains(" ") ? " " : "";
            int padding = Math.max(0, width - sign.length() - body.length());
            if (flags.contains("-")) {
                b.append(sign).append(body).append(" ".repeat(padding));
            } else if (numeric && flags.contains("0")) {
                b.append(sign).append("0".repeat(padding)).append(body);
            } else {
                b.append(" ".repeat(padding)).append(sign).append(body);
            }
        }
        if (!subscriptable && next < values.size()) throw new PyError("not all arguments converted during string formatting");
        return b.toString();
    }

    /** Digits of |d| to `precision` places, from the exact binary value, ties to even. */
    static String fixed(double abs, int precision) {
        if (Double.isNaN(abs)) return "nan";
        if (Double.isInfinite(abs)) return "inf";
        return new BigDecimal(abs).setScale(precision, RoundingMode.HALF_EVEN).toPlainString();
    }

    /** str.format: {} {0} {name} {name.attr} {name[key]} with !r/!s and a format spec. */
    static String strFormat(String fmt, Args args) {
        StringBuilder b = new StringBuilder();
        int auto = 0;
        boolean manual = false;
        int i = 0;
        while (i < fmt.length()) {
            char c = fmt.charAt(i);
            if (c == '}') {
                if (i + 1 < fmt.length() && fmt.charAt(i + 1) == '}') {
                    b.append('}');
                    i += 2;
                    continue;
                }
                throw new PyError("Single '}' encountered in format string");
            }
            if (c != '{') {
                b.append(c);
                i++;
                continue;
            }
            if (i + 1 < fmt.length() && fmt.charAt(i + 1) == '{') {
                b.append('{');
                i += 2;
                continue;
            }
            int close = fmt.indexOf('}', i);
            if (close < 0) throw new PyError("Single '{' encountered in format string");
            String field = fmt.substring(i + 1, close);
            i = close + 1;
            String spec = "";
            int colon = field.indexOf(':');
            if (colon >= 0) {
                spec = field.substring(colon + 1);
                field = field.substring(0, colon);
            }
            char conversion = 0;
            int bang = field.indexOf('!');
            if (bang >= 0) {
                if (bang + 2 != field.length()) throw new PyError("expected ':' after conversion specifier");
                conversion = field.charAt(bang + 1);
                field = field.substring(0, bang);
            }
            int end = 0;
            while (end < field.length() && field.charAt(end) != '.' && field.charAt(end) != '[') end++;
            String first = field.substring(0, end);
            Object v;
            if (first.isEmpty() || first.chars().allMatch(Character::isDigit)) {
                int index;
                if (first.isEmpty()) {
                    if (manual) throw new PyError("cannot switch from manual field specification to automatic field numbering");
                    index = auto++;
                } else {
                    if (auto > 0) throw new PyError("cannot switch from automatic field numbering to manual field specification");
                    manual = true;
                    index = Integer.parseInt(first);
                }
                if (index >= args.positional().size()) throw new PyError("Replacement index " + index + " out of range for positional args tuple");
                v = args.positional().get(index);
            } else {
                if (!args.keyword().containsKey(first)) throw new PyError("KeyError: " + Py.repr(first));
                v = args.keyword().get(first);
            }
            v = accessors(v, field.substring(end));
            if (conversion == 'r' || conversion == 'a') {
                v = Py.repr(v);
            } else if (conversion == 's') {
                v = Py.str(v);
            } else if (conversion != 0) {
                throw new PyError("Unknown conversion specifier " + conversion);
            }
            b.append(formatSpec(v, spec));
        }
        return b.toString();
    }

    private static Object accessors(Object v, String rest) {
        int i = 0;
        while (i < rest.length()) {
            if (rest.charAt(i) == '.') {
                int j = i + 1;
                while (j < rest.length() && rest.charAt(j) != '.' && rest.charAt(j) != '[') j++;
                v = Py.getattr(v, rest.substring(i + 1, j));
                i = j;
            } else {
                int j = rest.indexOf(']', i);
                if (j < 0) throw new PyError("Missing ']' in format string");
                String key = rest.substring(i + 1, j);
                v = Py.getitem(v, !key.isEmpty() && key.chars().allMatch(Character::isDigit) ? (Object) Long.parseLong(key) : key);
                i = j + 1;
            }
        }
        return v;
    }

    /** Python's format(value, spec) for str, int and float: [[fill]align][sign][0][width][,][.prec][type]. */
    static String formatSpec(Object v, String spec) {
        if (spec.isEmpty()) return Py.str(v);
        int i = 0;
        char fill = ' ';
        char align = 0;
        if (spec.length() >= 2 && "<>^=".indexOf(spec.charAt(1)) >= 0) {
            fill = spec.charAt(0);
            align = spec.charAt(1);
            i = 2;
        } else if ("<>^=".indexOf(spec.charAt(0)) >= 0) {
            align = spec.charAt(0);
            i = 1;
        }
        char signFlag = '-';
        if (i < spec.length() && "+- ".indexOf(spec.charAt(i)) >= 0) signFlag = spec.charAt(i++);
        if (i < spec.length() && spec.charAt(i) == '0') {
            if (align == 0) {
                fill = '0';
                align = '=';
            }
            i++;
        }
        int start = i;
        while (i < spec.length() && Character.isDigit(spec.charAt(i))) i++;
        int width = i > start ? Integer.parseInt(spec.substring(start, i)) : 0;
        boolean comma = i < spec.length() && spec.charAt(i) == ',';
        if (comma) i++;
        int precision = -1;
        if (i < spec.length() && spec.charAt(i) == '.') {
            start = ++i;
            while (i < spec.length() && Character.isDigit(spec.charAt(i))) i++;
            precision = Integer.parseInt(spec.substring(start, i));
        }
        String type = spec.substring(i);
        if (type.length() > 1) throw new PyError("Invalid format specifier '" + spec + "'");
        String sign = "";
        String body;
        if (v instanceof String s && (type.isEmpty() || type.equals("s"))) {
            body = precision >= 0 && precision < s.length() ? s.substring(0, precision) : s;
            if (align == 0) align = '<';
        } else if (Py.isNumber(v) && !type.equals("s")) {
            boolean asInt = Py.isIntLike(v) && (type.isEmpty() || "dxXob".contains(type));
            if (asInt) {
                long n = Py.toLong(v);
                sign = n < 0 ? "-" : "";
                int radix = switch (type) {
                    case "x", "X" -> 16;
                    case "o" -> 8;
                    case "b" -> 2;
                    default -> 10;
                };
                body = Long.toString(Math.abs(n), radix);
                if (type.equals("X")) body = body.toUpperCase();
            } else if ("fF%".contains(type) && !type.isEmpty()) {
                double d = Py.toDouble(v) * (type.equals("%") ? 100 : 1);
                sign = d < 0 || (d == 0 && 1 / d < 0) ? "-" : "";
                body = fixed(Math.abs(d), precision < 0 ? 6 : precision) + (type.equals("%") ? "%" : "");
            } else if (type.isEmpty() && precision < 0 && Py.isFloat(v)) {
                double d = Py.toDouble(v);
                sign = d < 0 || (d == 0 && 1 / d < 0) ? "-" : "";
                body = Py.floatRepr(Math.abs(d));
            } else {
                throw new PyError("format spec '" + spec + "' is not supported for " + Py.typeName(v));
            }
            if (comma) {
                int dot = body.indexOf('.');
                String intPart = dot < 0 ? body : body.substring(0, dot);
                StringBuilder g = new StringBuilder(intPart);
                for (int k = intPart.length() - 3; k > 0; k -= 3) g.insert(k, ',');
                body = g + (dot < 0 ? "" : body.substring(dot));
            }
            if (sign.isEmpty() && signFlag != '-') sign = String.valueOf(signFlag);
            if (align == 0) align = '>';
        } else {
            throw new PyError("Unknown format code '" + type + "' for object of type '" + Py.typeName(v) + "'");
        }
        int padding = Math.max(0, width - sign.length() - Py.len(body));
        String f = String.valueOf(fill);
        return switch (align) {
            case '<' -> sign + body + f.repeat(padding);
            case '^' -> f.repeat(padding / 2) + sign + body + f.repeat(padding - padding / 2);
            case '=' -> sign + f.repeat(padding) + body;
            default -> f.repeat(padding) + sign + body;
        };
    }
}
