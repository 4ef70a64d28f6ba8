// Expressions.java — whether two answers that are formulas (11 + 11\sqrt{5}, (x+1)^2, \frac{\pi}{2},
// \cot x, 1.2 \times 10^5) are the same by evaluation: both are read as expressions over variables
// (single letters, subscripted names x_1, \pi and Greek letters, all symbolic: e and i too), evaluated
// at the same fixed points, and called equal when every evaluation agrees. Values stay exact rationals
// through + - * /, integer powers and roots of perfect powers, so 0.33x never equals x/3; other values
// (roots, trigonometry, logarithms) are doubles compared to a relative 1e-9, and then a side written
// with a decimal point never equals one without (0.7071 is no \frac{\sqrt2}{2}). Whatever this reader
// does not understand (\pm, \infty, words, relations, base subscripts, a mixed number inside a
// formula) is "not equal here", and the caller's string comparison stands.
package dev.drmas.workflow.math;

import dev.drmas.workflow.math.MathAnswers.Rational;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

final class Expressions {
    private Expressions() {
    }

    // Several points so that a polynomial identity cannot hold by chance at all of them; the values are
    // at least 1/2 so that the roots and logarithms of the usual answers stay real.
    private static final int POINTS = 6;
    // Loose enough for the rounding of a cancellation ((2-\sqrt{3})^5 is 362 - 209\sqrt{3}, about 0.0014,
    // computed from terms of 362: ~1e-10 relative); so an answer off by less than 1e-9 of a large
    // irrational value passes (\sqrt{2}\cdot 10^{10} + 7): no answer is written so by mistake.
    private static final double RELATIVE = 1e-9;
    // A difference this small between an inexact value and zero is rounding, not a different answer.
    private static final double ABSOLUTE = 1e-12;

    /** True when both are formulas this reader understands, over the same variables, equal at every point. */
    static boolean equal(String a, String b) {
        Parsed pa = Parser.parse(a), pb = Parser.parse(b);
        if (pa == null || pb == null || !pa.vars.equals(pb.vars)) return false;
        List<String> vars = new ArrayList<>(pa.vars);
        // more points than variables: a linear relation among the variables' values cannot hold at all of them
        int points = vars.isEmpty() ? 1 : Math.max(POINTS, vars.size() + 3);
        int compared = 0;
        boolean inexact = false;
        for (int k = 0; k < points; k++) {
            Map<String, Val> env = new HashMap<>();
            for (int j = 0; j < vars.size(); j++) env.put(vars.get(j), Val.of(point(k, j, points)));
            Val x = pa.node.eval(env), y = pb.node.eval(env);
            if (x == null && y == null) continue;  // undefined on both sides there: no evidence
            if (x == null || y == null) return false;
            if (x.q != null && y.q != null) {
                if (!x.q.equals(y.q)) return false;
            } else {
                inexact = true;
                // an absolute slack only against an exact zero (\sqrt{2}^2 - 2 is 4e-16, not 0)
                double slack = x.q != null && x.q.num().signum() == 0 || y.q != null && y.q.num().signum() == 0 ? ABSOLUTE : 0;
                if (!(Math.abs(x.d - y.d) <= RELATIVE * Math.max(Math.abs(x.d), Math.abs(y.d)) + slack)) return false;
            }
            compared++;
        }
        if (compared < Math.min(points, 3)) return false;
        return !inexact || pa.decimal == pb.decimal;
    }

    // The value of variable j at point k: a rational in [1/2, 3). Each variable's values fill every one of
    // the points' equal slots of that range (a per-variable rotation of the slots), so about four in five
    // lie above 1 and forms defined only there (\sqrt{x-1}, \ln(x-1)) have points enough; the place
    // inside the slot comes from a 64-bit mixer of (k, j), so that no linear relation among the
    // variables' values holds at every point (values linear in j made v1 + v4 = v2 + v3 at all of
    // them: a - b + c + d - e passed for a + b - c - d + e).
    private static Rational point(int k, int j, int points) {
        int slot = (int) ((k + mix(0, j)) % points);
        long m = mix(k + 1, j + 1) % 1009;  // the place inside the slot, in 1009ths
        // 1/2 + 5/2 * (slot + m / 1009) / points
        long den = 2L * 1009 * points;
        return new Rational(BigInteger.valueOf(1009L * points + 5L * (slot * 1009L + m)), BigInteger.valueOf(den));
    }

    private static long mix(long k, long j) {
        long z = k * 0x9E3779B97F4A7C15L + j * 0xC2B2AE3D27D4EB4FL + 0x632BE59BD9B4E019L;
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return (z ^ (z >>> 31)) >>> 1;  // non-negative
    }

    /** A value: exact when {@code q} is set (then {@code d} is its double), else the double alone. */
    record Val(Rational q, double d) {
        // An exact value larger than this is kept as its double: a chain of powers must not grow
        // numbers of millions of bits.
        static Val of(Rational q) {
            double d = new BigDecimal(q.num()).divide(new BigDecimal(q.den()), MathContext.DECIMAL64).doubleValue();
            return q.num().bitLength() + q.den().bitLength() <= MAX_EXACT_BITS ? new Val(q, d) : approx(d);
        }

        // A double beyond these magnitudes has lost the value (x^{6000} and x^{6001} both read 0 or
        // infinity at every point): undefined there, no evidence either way. So is an inexact 0,
        // which is as likely an underflow; an exact 0 is exact.
        static Val approx(double d) {
            double m = Math.abs(d);
            return m >= 1e-100 && m <= 1e100 ? new Val(null, d) : null;
        }
    }

    interface Node {
        /** The value at the variables' values of {@code env}; null where it is undefined. */
        Val eval(Map<String, Val> env);
    }

    private record Parsed(Node node, Set<String> vars, boolean decimal) {}

    // Exact powers are computed while the result stays this small; beyond, doubles.
    private static final int MAX_EXACT_BITS = 4096;

    private static Val add(Val a, Val b) {
        if (a == null || b == null) return null;
        return a.q != null && b.q != null ? Val.of(a.q.add(b.q)) : Val.approx(a.d + b.d);
    }

    private static Val neg(Val a) {
        return a == null ? null : a.q != null ? Val.of(a.q.negate()) : Val.approx(-a.d);
    }

    private static Val mul(Val a, Val b) {
        if (a == null || b == null) return null;
        return a.q != null && b.q != null ? Val.of(a.q.multiply(b.q)) : Val.approx(a.d * b.d);
    }

    private static Val div(Val a, Val b) {
        if (a == null || b == null) return null;
        if (b.q != null && b.q.num().signum() == 0) return null;
        return a.q != null && b.q != null ? Val.of(a.q.divide(b.q)) : Val.approx(a.d / b.d);
    }

    private static Val pow(Val a, Val b) {
        if (a == null || b == null) return null;
        if (a.q != null && b.q != null) {
            BigInteger p = b.q.num(), r = b.q.den();
            if (p.bitLength() <= 16 && r.bitLength() <= 7) {
                Val root = root(a, r.intValue());
                if (root != null && root.q != null) {
                    int n = p.intValue();
                    Rational base = root.q;
                    if (n < 0) {
                        if (base.num().signum() == 0) return null;
                        base = new Rational(base.den(), base.num());
                        n = -n;
                    }
                    if ((long) (base.num().bitLength() + base.den().bitLength()) * n <= MAX_EXACT_BITS) {
                        return Val.of(new Rational(base.num().pow(n), base.den().pow(n)));
                    }
                }
            }
        }
        if (a.d < 0 && (b.q == null || !b.q.isInteger())) return null;  // no real value
        if (a.d == 0 && b.d < 0) return null;
        return Val.approx(Math.pow(a.d, b.d));
    }

    // The real n-th root (n >= 1): exact when a is an exact perfect power.
    private static Val root(Val a, int n) {
        if (a == null || n < 1) return null;
        if (n == 1) return a;
        boolean negative = a.d < 0 || a.q != null && a.q.num().signum() < 0;
        if (negative && n % 2 == 0) return null;
        if (a.q != null) {
            BigInteger num = exactRoot(a.q.num().abs(), n), den = exactRoot(a.q.den(), n);
            if (num != null && den != null) return Val.of(new Rational(negative ? num.negate() : num, den));
        }
        double r = Math.pow(Math.abs(a.d), 1.0 / n);
        return Val.approx(negative ? -r : r);
    }

    private static BigInteger exactRoot(BigInteger v, int n) {
        if (v.signum() == 0 || v.equals(BigInteger.ONE)) return v;
        if (n == 2) {
            BigInteger r = v.sqrt();
            return r.multiply(r).equals(v) ? r : null;
        }
        if (v.bitLength() > 1000) return null;
        long guess = Math.round(Math.pow(v.doubleValue(), 1.0 / n));
        for (long c = Math.max(1, guess - 1); c <= guess + 1; c++) {
            if (BigInteger.valueOf(c).pow(n).equals(v)) return BigInteger.valueOf(c);
        }
        return null;
    }

    private static Val factorial(Val a) {
        if (a == null || a.q == null || !a.q.isInteger() || a.q.num().signum() < 0 || a.q.num().bitLength() > 8) return null;
        BigInteger f = BigInteger.ONE;
        for (int i = 2; i <= a.q.num().intValue(); i++) f = f.multiply(BigInteger.valueOf(i));
        return Val.of(Rational.of(f));
    }

    private static Val binom(Val n, Val k) {
        if (n == null || k == null || n.q == null || k.q == null || !n.q.isInteger() || !k.q.isInteger()) return null;
        if (n.q.num().signum() < 0 || n.q.num().bitLength() > 10) return null;
        int nn = n.q.num().intValue();
        int kk = k.q.num().signum() < 0 || k.q.num().compareTo(n.q.num()) > 0 ? -1 : k.q.num().intValue();
        if (kk < 0) return Val.of(Rational.of(BigInteger.ZERO));
        BigInteger c = BigInteger.ONE;
        for (int i = 0; i < kk; i++) c = c.multiply(BigInteger.valueOf(nn - i)).divide(BigInteger.valueOf(i + 1));
        return Val.of(Rational.of(c));
    }

    private static Val apply(String f, Val a) {
        if (a == null) return null;
        double x = a.d;
        double r = switch (f) {
            case "sin" -> Math.sin(x);
            case "cos" -> Math.cos(x);
            case "tan" -> Math.tan(x);
            case "cot" -> 1 / Math.tan(x);
            case "sec" -> 1 / Math.cos(x);
            case "csc" -> 1 / Math.sin(x);
            case "arcsin" -> Math.asin(x);
            case "arccos" -> Math.acos(x);
            case "arctan" -> Math.atan(x);
            case "sinh" -> Math.sinh(x);
            case "cosh" -> Math.cosh(x);
            case "tanh" -> Math.tanh(x);
            case "exp" -> Math.exp(x);
            case "ln" -> x > 0 ? Math.log(x) : Double.NaN;
            case "log" -> x > 0 ? Math.log10(x) : Double.NaN;  // \log 100 = 2, as competition answers read it
            default -> Double.NaN;
        };
        return Val.approx(r);
    }

    private static final Set<String> FUNCTIONS = Set.of("sin", "cos", "tan", "cot", "sec", "csc", "arcsin", "arccos",
            "arctan", "sinh", "cosh", "tanh", "exp", "ln", "log");
    private static final Set<String> SYMBOLS = Set.of("pi", "alpha", "beta", "gamma", "delta", "epsilon", "varepsilon",
            "theta", "vartheta", "lambda", "mu", "nu", "rho", "sigma", "tau", "phi", "varphi", "psi", "omega");
    // A word is text, not a product of variables: "even" must not equal "neve"; "and"/"or" join a list.
    private static final Pattern WORD = Pattern.compile("(?<![\\\\A-Za-z])(?:[A-Za-z]{4,}|and|or)(?![A-Za-z])");

    /** Not a formula this reader understands. */
    private static final class Refuse extends RuntimeException {
        Refuse() {
            super(null, null, false, false);
        }
    }

    // A recursive-descent reader over the answer with its blanks:
    //   expr    := term (('+' | '-') term)*
    //   term    := factor (('*' | \cdot | \times | '/' | \div) factor | implicit power)*
    //   factor  := ('+' | '-') factor | power
    //   power   := primary ('^' exponent | '!')*
    //   primary := number | letter ('_' sub)? | '(' expr ')' | '{' expr '}' | \frac arg arg
    //            | \sqrt ('[' expr ']')? arg | \binom arg arg | \pi, \theta, ... | function
    //   function:= \sin ... ('^' exponent)? ('(' expr ')' | '{' expr '}' | power power* up to the next function)
    // A number next to a number ("2 3"), a number before \frac of two numbers (2\frac{1}{4}: a mixed
    // number or a product?) and a number with a subscript (a base) are refused.
    private static final class Parser {
        private static final Pattern NUMBER = Pattern.compile("\\d+(?:\\.\\d*)?|\\.\\d+");
        private static final int MAX_DEPTH = 100;
        // Longer than any formula answer: text, left to the string comparison.
        private static final int MAX_LENGTH = 1000;
        private enum Kind { NUMBER, NUMERIC_FRAC, OTHER }

        private final String s;
        private int pos;
        private int depth;
        private Kind kind = Kind.OTHER;  // of the last primary read
        private final Set<String> vars = new TreeSet<>();
        private boolean decimal;

        private Parser(String s) {
            this.s = s;
        }

        static Parsed parse(String s) {
            if (s == null || s.isBlank() || s.length() > MAX_LENGTH || WORD.matcher(s).find()) return null;
            Parser p = new Parser(s);
            try {
                Node n = p.expr();
                p.skip();
                return p.pos == s.length() ? new Parsed(n, p.vars, p.decimal) : null;
            } catch (Refuse e) {
                return null;
            }
        }

        private void skip() {
            while (pos < s.length() && Character.isWhitespace(s.charAt(pos))) pos++;
        }

        private boolean eat(char c) {
            skip();
            if (pos < s.length() && s.charAt(pos) == c) {
                pos++;
                return true;
            }
            return false;
        }

        private void expect(char c) {
            if (!eat(c)) throw new Refuse();
        }

        private char peek() {
            skip();
            return pos < s.length() ? s.charAt(pos) : '\0';
        }

        // The command at pos ("\frac" gives "frac"), without consuming it; "" when none.
        private String command() {
            skip();
            if (pos >= s.length() || s.charAt(pos) != '\\') return "";
            int e = pos + 1;
            while (e < s.length() && Character.isLetter(s.charAt(e))) e++;
            return s.substring(pos + 1, e);
        }

        private boolean eatCommand(String name) {
            if (!command().equals(name)) return false;
            pos += name.length() + 1;
            return true;
        }

        private Node expr() {
            if (++depth > MAX_DEPTH) throw new Refuse();
            try {
                Node acc = term();
                while (true) {
                    if (eat('+')) {
                        Node a = acc, b = term();
                        acc = env -> add(a.eval(env), b.eval(env));
                    } else if (eat('-')) {
                        Node a = acc, b = term();
                        acc = env -> add(a.eval(env), neg(b.eval(env)));
                    } else {
                        return acc;
                    }
                }
            } finally {
                depth--;
            }
        }

        private Node term() {
            Node acc = factor();
            Kind last = kind;
            while (true) {
                Node a = acc;
                if (eat('*') || eatCommand("cdot") || eatCommand("times")) {
                    Node b = factor();
                    acc = env -> mul(a.eval(env), b.eval(env));
                } else if (eat('/') || eatCommand("div")) {
                    Node b = factor();
                    acc = env -> div(a.eval(env), b.eval(env));
                } else if (startsPrimary()) {
                    Node b = power();
                    if (last == Kind.NUMBER && (kind == Kind.NUMBER || kind == Kind.NUMERIC_FRAC)) throw new Refuse();
                    acc = env -> mul(a.eval(env), b.eval(env));
                } else {
                    return acc;
                }
                last = kind;
            }
        }

        private Node factor() {
            if (++depth > MAX_DEPTH) throw new Refuse();  // "------1": a sign is a level too
            try {
                if (eat('-')) {
                    Node a = factor();
                    kind = Kind.OTHER;
                    return env -> neg(a.eval(env));
                }
                if (eat('+')) return factor();
                return power();
            } finally {
                depth--;
            }
        }

        private boolean startsPrimary() {
            char c = peek();
            if (c == '\\') {
                String cmd = command();
                return cmd.equals("frac") || cmd.equals("sqrt") || cmd.equals("binom") || SYMBOLS.contains(cmd) || FUNCTIONS.contains(cmd);
            }
            return c < 128 && Character.isLetterOrDigit(c) || c == '.' || c == '(' || c == '{';
        }

        private Node power() {
            Node acc = primary();
            while (true) {
                Node a = acc;
                if (eat('^')) {
                    Node e = exponent();
                    acc = env -> pow(a.eval(env), e.eval(env));
                } else if (peek() == '!' && !s.startsWith("!=", pos)) {
                    pos++;
                    acc = env -> factorial(a.eval(env));
                } else {
                    return acc;
                }
                kind = Kind.OTHER;
            }
        }

        // After '^': a braced group, a run of digits (2^10 is 2^{10}: LaTeX would typeset 2^1 then 0, but
        // an answer written so means 1024, and reading it as 0 rewarded 0), one other token (x^ab is x^a
        // times b), or a signed one.
        private Node exponent() {
            char c = peek();
            if (c == '{') return primary();
            if (c >= '0' && c <= '9') {
                int start = pos;
                while (pos < s.length() && pos - start < 6 && s.charAt(pos) >= '0' && s.charAt(pos) <= '9') pos++;
                Val v = Val.of(Rational.of(new BigInteger(s.substring(start, pos))));
                kind = Kind.NUMBER;
                return env -> v;
            }
            if (c == '-' || c == '+') {
                pos++;
                if (++depth > MAX_DEPTH) throw new Refuse();
                Node e = exponent();
                depth--;
                return c == '-' ? env -> neg(e.eval(env)) : e;
            }
            return single();
        }

        // One token: a digit, a letter, or a command's primary (\frac\pi2 has \pi as its first argument).
        private Node single() {
            char c = peek();
            if (c >= '0' && c <= '9') {
                pos++;
                Val v = Val.of(Rational.of(BigInteger.valueOf(c - '0')));
                kind = Kind.NUMBER;
                return env -> v;
            }
            if (c < 128 && Character.isLetter(c) || c == '\\') return primary();
            throw new Refuse();
        }

        private Node arg() {
            return peek() == '{' ? primary() : single();
        }

        private Node primary() {
            if (++depth > MAX_DEPTH) throw new Refuse();
            try {
                return nested();
            } finally {
                depth--;
            }
        }

        private Node nested() {
            char c = peek();
            if (c >= '0' && c <= '9' || c == '.') {
                Matcher m = NUMBER.matcher(s).region(pos, s.length());
                if (!m.lookingAt()) throw new Refuse();
                pos = m.end();
                if (m.group().contains(".")) decimal = true;
                if (pos < s.length() && s.charAt(pos) == '_') throw new Refuse();  // 52_8: a base
                BigDecimal d = new BigDecimal(m.group().endsWith(".") ? m.group() + "0" : m.group());
                Val v = Val.of(new Rational(d.unscaledValue(), BigInteger.TEN.pow(d.scale())));
                kind = Kind.NUMBER;
                return env -> v;
            }
            if (c < 128 && Character.isLetter(c)) {
                pos++;
                String name = String.valueOf(c) + subscript();
                vars.add(name);
                kind = Kind.OTHER;
                return env -> env.get(name);
            }
            if (c == '(' || c == '{') {
                pos++;
                Node e = expr();
                expect(c == '(' ? ')' : '}');
                kind = Kind.OTHER;
                return e;
            }
            String cmd = command();
            if (cmd.isEmpty()) throw new Refuse();
            pos += cmd.length() + 1;
            if (cmd.equals("frac")) {
                Node n = arg();
                Kind kn = kind;
                Node d = arg();
                kind = kn == Kind.NUMBER && kind == Kind.NUMBER ? Kind.NUMERIC_FRAC : Kind.OTHER;
                return env -> div(n.eval(env), d.eval(env));
            }
            if (cmd.equals("sqrt")) {
                Node index = null;
                if (eat('[')) {
                    index = expr();
                    expect(']');
                }
                Node radicand = arg();
                kind = Kind.OTHER;
                if (index == null) return env -> root(radicand.eval(env), 2);
                Node idx = index;
                return env -> {
                    Val n = idx.eval(env);
                    if (n == null || n.q == null || !n.q.isInteger() || n.q.num().signum() <= 0 || n.q.num().bitLength() > 7) return null;
                    return root(radicand.eval(env), n.q.num().intValue());
                };
            }
            if (cmd.equals("binom")) {
                Node n = arg(), k = arg();
                kind = Kind.OTHER;
                return env -> binom(n.eval(env), k.eval(env));
            }
            if (SYMBOLS.contains(cmd)) {
                String name = "\\" + cmd + subscript();
                vars.add(name);
                kind = Kind.OTHER;
                return env -> env.get(name);
            }
            if (FUNCTIONS.contains(cmd)) return function(cmd);
            throw new Refuse();
        }

        // "_1", "_{12}", "_n" after a variable: part of its name.
        private String subscript() {
            if (pos >= s.length() || s.charAt(pos) != '_') return "";
            pos++;
            if (pos < s.length() && s.charAt(pos) == '{') {
                int close = s.indexOf('}', pos);
                if (close < 0) throw new Refuse();
                String sub = s.substring(pos + 1, close).strip();
                if (!sub.matches("[A-Za-z0-9]+")) throw new Refuse();
                pos = close + 1;
                return "_" + sub;
            }
            if (pos < s.length() && s.charAt(pos) < 128 && Character.isLetterOrDigit(s.charAt(pos))) return "_" + s.charAt(pos++);
            throw new Refuse();
        }

        private Node function(String f) {
            Node power = null;
            if (eat('^')) {
                // \sin^{-1}: an inverse or a reciprocal? Not guessed.
                if (peek() == '-' || s.startsWith("{-", pos)) throw new Refuse();
                power = exponent();
            }
            Node base = null;
            if (f.equals("log") && eat('_')) base = arg();
            Node argument;
            char c = peek();
            if (c == '(' || c == '{') {
                pos++;
                argument = expr();
                expect(c == '(' ? ')' : '}');
            } else {
                // \cot x, \sin 2x: the product up to an operator or the next function (\sin x \cos x)
                argument = power();
                while (startsPrimary() && !FUNCTIONS.contains(command())) {
                    Node a = argument, b = power();
                    argument = env -> mul(a.eval(env), b.eval(env));
                }
            }
            Node arg = argument, p = power, b = base;
            kind = Kind.OTHER;
            return env -> {
                Val v = apply(f, arg.eval(env));
                if (b != null) v = div(apply("ln", arg.eval(env)), apply("ln", b.eval(env)));
                return p == null ? v : pow(v, p.eval(env));
            };
        }
    }
}
