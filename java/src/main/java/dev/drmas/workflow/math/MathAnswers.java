// MathAnswers.java — reading a final answer out of a model's text (the last \boxed{...}) and deciding
// whether two answers are the same. Numbers compare by exact value (BigInteger fractions, decimals
// converted exactly), so "1/2", "0.5", "\frac{2}{4}" and "-\frac{-1}{2}" agree while "0.33" never
// equals "1/3"; anything that is not a number compares as a cleaned-up string. A comma is a
// thousands separator only where it cannot be a list's: "1,234" is 1234, "2, 500" and "(1,234)" are
// not numbers. Text answers get the clean-ups of verl's math reward (Hendrycks' strip_string) that
// a string comparison needs: a unit in \text{ ...} at the end goes, and \sqrt2, \frac1b gain
// their braces.
package dev.drmas.workflow.math;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class MathAnswers {
    private MathAnswers() {
    }

    private static final String BOX = "\\boxed";

    /**
     * The content of the last {@code \boxed{...}} in {@code text}, braces balanced (so
     * {@code \boxed{\frac{1}{2}}} gives {@code \frac{1}{2}}); {@code \boxed 5} (a space and one token)
     * gives {@code 5}. Empty when there is no box, or when the last one is never closed: a truncated
     * final answer is no answer, and an earlier box is an abandoned one.
     */
    public static Optional<String> lastBoxed(String text) {
        if (text == null) return Optional.empty();
        int at = text.lastIndexOf(BOX);
        while (at >= 0) {
            int after = at + BOX.length();
            // \boxedx is some other command: look further back
            if (after < text.length() && Character.isLetter(text.charAt(after))) {
                at = text.lastIndexOf(BOX, at - 1);
                continue;
            }
            return boxContent(text, after).map(s -> s.content);
        }
        return Optional.empty();
    }

    private record Span(String content, int end) {}

    // What follows "\boxed" at position `from`: "{...}" (optional blanks before the brace) or one token.
    private static Optional<Span> boxContent(String text, int from) {
        int i = from;
        while (i < text.length() && Character.isWhitespace(text.charAt(i))) i++;
        if (i < text.length() && text.charAt(i) == '{') {
            int close = matchingBrace(text, i);
            return close < 0 ? Optional.empty() : Optional.of(new Span(text.substring(i + 1, close), close + 1));
        }
        if (i == from) return Optional.empty(); // "\boxed" at the very end, or followed by a symbol
        int start = i;
        while (i < text.length() && !Character.isWhitespace(text.charAt(i)) && text.charAt(i) != '$') i++;
        return i == start ? Optional.empty() : Optional.of(new Span(text.substring(start, i), i));
    }

    // Index of the '}' closing the '{' at `open`, or -1. Escaped braces \{ and \} are literal text
    // in LaTeX (set notation), so they do not count.
    private static int matchingBrace(String s, int open) {
        int depth = 0;
        for (int i = open; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\') {
                i++; // skip the escaped character
            } else if (c == '{') {
                depth++;
            } else if (c == '}') {
                if (--depth == 0) return i;
            }
        }
        return -1;
    }

    /**
     * The answer that a ground truth states: the content of its last box when it has a closed one (a
     * dataset's worked solution, as MATH's "solution" field, which the Dr. MAS reference's reward
     * reads the same way), else the text itself.
     */
    public static String statedAnswer(String truth) {
        return lastBoxed(truth).orElse(truth);
    }

    /** True iff both answers are non-empty and equal after {@link #normalize}. */
    public static boolean equivalent(String predicted, String truth) {
        if (predicted == null || truth == null) return false;
        String p = normalize(predicted), t = normalize(truth);
        return !p.isEmpty() && p.equals(t);
    }

    /**
     * The canonical form of an answer. A number (integer, decimal, a/b, \frac, signs anywhere,
     * parentheses) becomes its reduced fraction: "-1/2", "3", "0". Anything else becomes the text
     * with delimiters ($, \(, \[), \text-like wrappers, \left/\right, spacing commands, degree and
     * percent signs, a short "x=" prefix, blanks and a trailing period removed.
     */
    public static String normalize(String answer) {
        String s = clean(answer);
        Optional<Rational> v = Numbers.parse(s);
        return v.isPresent() ? v.get().toString() : s.replace(" ", "");
    }

    /** The exact value of an answer, when it is a number. */
    static Optional<Rational> value(String answer) {
        return Numbers.parse(clean(answer));
    }

    private static final String[] WRAPPERS = {"\\text", "\\textbf", "\\textit", "\\textrm", "\\mathrm", "\\mathbf",
        "\\mathit", "\\mbox", "\\boxed"};
    private static final Pattern LEFT_RIGHT = Pattern.compile("\\\\(left|right)(?![A-Za-z])");
    // A double backslash (a matrix's row break) is matched first so that its second backslash is never
    // read as the start of a spacing command: "1 \\ 2" must not lose a backslash to "\ ".
    private static final Pattern SPACING = Pattern.compile("\\\\\\\\|\\\\[!,;: ]|\\\\displaystyle(?![A-Za-z])|\\\\[dt]frac(?![A-Za-z])");
    private static final Pattern DEGREES = Pattern.compile("\\^\\s*\\{?\\s*\\\\circ\\s*}?|\u00b0");
    private static final Pattern SHORT_LHS = Pattern.compile("^[A-Za-z](_\\{?[A-Za-z0-9]}?)?=(?!=)(.*)$");

    private static String clean(String answer) {
        String s = trimSentence(answer.replace('\u2212', '-').trim());
        s = dropUnit(s);
        s = unwrap(s);
        s = s.replace("{,}", ",");
        s = LEFT_RIGHT.matcher(s).replaceAll("");
        s = replaceFracs(s);
        s = braceArguments(s);
        s = DEGREES.matcher(s).replaceAll("");
        s = s.replace("\\%", "").replace("%", "").replace("\\$", "");
        // Blanks go, but a comma keeps one after it so that the number reader sees "2, 500" (two
        // roots) as a list, not as 2500; the text form drops that blank too (normalize).
        s = s.replaceAll("\\s+", " ").replaceAll("(?<!,) ", "");
        s = trimSentence(s);
        // "x=5", "y_1=5": the solver restated the variable; the value is what is asked for
        Matcher m = SHORT_LHS.matcher(s);
        if (m.matches() && !m.group(2).isEmpty() && m.group(2).indexOf('=') < 0) s = m.group(2);
        return s;
    }

    // A unit after the value, "5\text{ cm}", "12 \text{ apples}", "3\text{ m}^2": the value is the
    // answer (the Hendrycks/verl rule; a blank before the unit word, inside or before the braces,
    // marks it as a unit). Only at the very end and only words, so "5\text{ or }6" keeps its text.
    private static final Pattern RIGHT_UNIT = Pattern.compile(
            "^(.*?\\S)(?:\\s+\\\\(?:text|textrm|mbox)\\s*\\{\\s*|\\\\(?:text|textrm|mbox)\\s*\\{\\s+)"
            + "[A-Za-z][A-Za-z. ]*}(?:\\s*\\^\\s*(?:\\d|\\{\\s*\\d\\s*}))?\\s*$", Pattern.DOTALL);

    private static String dropUnit(String s) {
        Matcher m = RIGHT_UNIT.matcher(s);
        return m.matches() ? m.group(1) : s;
    }

    // \sqrt2 is \sqrt{2} and \frac1b is \frac{1}{b} in LaTeX (one character is an argument); the text
    // form needs one spelling. One pass over precomputed brace pairs, no recursion: a model can
    // nest \frac{ a hundred thousand deep.
    private static String braceArguments(String s) {
        if (!s.contains("\\sqrt") && !s.contains("\\frac")) return s;
        int n = s.length();
        int[] close = new int[n];
        Arrays.fill(close, -1);
        int[] open = new int[n];
        int depth = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '\\') i++;
            else if (c == '{') open[depth++] = i;
            else if (c == '}' && depth > 0) close[open[--depth]] = i;
        }
        boolean[] wrap = new boolean[n];
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c != '\\') continue;
            int args = s.startsWith("sqrt", i + 1) ? 1 : s.startsWith("frac", i + 1) ? 2 : 0;
            int j = i + 5;
            if (args == 0 || j < n && Character.isLetter(s.charAt(j))) {
                i++;  // another command, or an escaped character
                continue;
            }
            for (int a = 0; a < args; a++) {
                while (j < n && Character.isWhitespace(s.charAt(j))) j++;
                if (j >= n) break;
                char first = s.charAt(j);
                if (first == '{' && close[j] >= 0) {
                    j = close[j] + 1;
                } else if (first < 128 && Character.isLetterOrDigit(first)) {
                    wrap[j++] = true;
                } else {
                    break;  // \sqrt[3]{x}, \frac\pi2: left as written
                }
            }
        }
        StringBuilder out = new StringBuilder(n + 8);
        for (int i = 0; i < n; i++) {
            if (wrap[i]) out.append('{').append(s.charAt(i)).append('}');
            else out.append(s.charAt(i));
        }
        return out.toString();
    }

    // Delimiters and a sentence's period, which may follow the closing delimiter ("$5$.") or sit
    // inside it ("$5.$"), until neither is left.
    private static String trimSentence(String s) {
        for (String before = null; !s.equals(before); ) {
            before = s;
            s = stripDelimiters(s);
            while (s.length() > 1 && s.endsWith(".")) s = s.substring(0, s.length() - 1);
        }
        return s;
    }

    // \dfrac and \tfrac are \frac with another size; spacing commands and \displaystyle only typeset;
    // a row break \\ stays as written.
    private static String replaceFracs(String s) {
        Matcher m = SPACING.matcher(s);
        StringBuilder out = new StringBuilder();
        while (m.find()) {
            String g = m.group();
            m.appendReplacement(out, g.equals("\\\\") ? "\\\\\\\\" : g.endsWith("frac") ? "\\\\frac" : "");
        }
        m.appendTail(out);
        return out.toString();
    }

    // Surrounding $...$, $$...$$, \(...\) and \[...\], repeatedly.
    private static String stripDelimiters(String s) {
        while (true) {
            String t = s;
            if (t.length() >= 2 && t.startsWith("$") && t.endsWith("$")) {
                t = t.substring(1, t.length() - 1);
            } else if (t.length() >= 4 && (t.startsWith("\\(") && t.endsWith("\\)") || t.startsWith("\\[") && t.endsWith("\\]"))) {
                t = t.substring(2, t.length() - 2);
            }
            t = t.trim();
            if (t.equals(s)) return s;
            s = t;
        }
    }

    // \text{abc} -> abc (and the other wrappers of WRAPPERS), innermost-first is not needed: every
    // occurrence is replaced by its content until none is left.
    private static String unwrap(String s) {
        boolean changed = true;
        while (changed) {
            changed = false;
            for (String w : WRAPPERS) {
                int from = 0;
                int at;
                while ((at = s.indexOf(w, from)) >= 0) {
                    int after = at + w.length();
                    if (after < s.length() && Character.isLetter(s.charAt(after))) { // \textstyle, \boxedx
                        from = after;
                        continue;
                    }
                    int i = after;
                    while (i < s.length() && Character.isWhitespace(s.charAt(i))) i++;
                    int close = i < s.length() && s.charAt(i) == '{' ? matchingBrace(s, i) : -1;
                    if (close < 0) {
                        from = after;
                        continue;
                    }
                    s = s.substring(0, at) + s.substring(i + 1, close) + s.substring(close + 1);
                    changed = true;
                    from = at;
                }
            }
        }
        return s;
    }

    /** An exact rational number, reduced, with a positive denominator. */
    record Rational(BigInteger num, BigInteger den) {
        Rational {
            if (den.signum() == 0) throw new ArithmeticException("zero denominator");
            if (den.signum() < 0) {
                num = num.negate();
                den = den.negate();
            }
            BigInteger g = num.gcd(den);
            if (!g.equals(BigInteger.ONE) && g.signum() != 0) {
                num = num.divide(g);
                den = den.divide(g);
            }
        }

        static Rational of(BigInteger n) {
            return new Rational(n, BigInteger.ONE);
        }

        Rational negate() {
            return new Rational(num.negate(), den);
        }

        Rational add(Rational o) {
            return new Rational(num.multiply(o.den).add(o.num.multiply(den)), den.multiply(o.den));
        }

        Rational divide(Rational o) {
            return new Rational(num.multiply(o.den), den.multiply(o.num));
        }

        boolean isInteger() {
            return den.equals(BigInteger.ONE);
        }

        @Override
        public String toString() {
            return isInteger() ? num.toString() : num + "/" + den;
        }
    }

    // A recursive-descent reader of the numeric forms, over a string with no blanks but ", ":
    //   expr    := signed ('/' signed)?             at most one slash: "1/2/3" is not a number
    //   signed  := ('+' | '-')* primary
    //   primary := '\frac' arg arg | '(' expr ')' | '{' expr '}' | number
    //   arg     := '{' expr '}' | digit               (\frac12 is \frac{1}{2})
    //   number  := digits, thousands groups "1,234", decimals ".5" "2.0", exponent "1e3"
    // Inside '(' ')' there are no thousands groups: "(1,234)" is a pair, not 1234 in parentheses.
    // Nesting deeper than MAX_DEPTH is not a number.
    // No +, - between terms and no *: "2+3" is an expression, not the answer 5.
    private static final class Numbers {
        private static final Pattern NUMBER = Pattern.compile(
                "(?:\\d{1,3}(?:,\\d{3})+(?![\\d])|\\d+)(?:\\.\\d*)?(?:[eE][+-]?\\d{1,4})?|\\.\\d+(?:[eE][+-]?\\d{1,4})?");
        private static final int MAX_DEPTH = 100;
        private static final Pattern PLAIN_NUMBER = Pattern.compile(
                "\\d+(?:\\.\\d*)?(?:[eE][+-]?\\d{1,4})?|\\.\\d+(?:[eE][+-]?\\d{1,4})?");
        private final String s;
        private int pos;
        private int parens;  // '(' open around the current position
        private int depth;   // primaries open around the current position

        private Numbers(String s) {
            this.s = s;
        }

        static Optional<Rational> parse(String s) {
            if (s.isEmpty()) return Optional.empty();
            Numbers p = new Numbers(s);
            try {
                Rational v = p.expr();
                return v != null && p.pos == s.length() ? Optional.of(v) : Optional.empty();
            } catch (ArithmeticException e) { // a zero denominator: not a number
                return Optional.empty();
            }
        }

        private Rational expr() {
            Rational a = signed();
            if (a == null || !eat('/')) return a;
            Rational b = signed();
            return b == null ? null : a.divide(b);
        }

        private Rational signed() {
            boolean negative = false;
            while (pos < s.length() && (s.charAt(pos) == '-' || s.charAt(pos) == '+')) {
                if (s.charAt(pos) == '-') negative = !negative;
                pos++;
            }
            Rational v = primary();
            return v == null ? null : negative ? v.negate() : v;
        }

        private Rational primary() {
            // Deeper nesting than any answer has is not a number; reading it recursively could
            // overflow the stack and end the run from inside the reward.
            if (depth == MAX_DEPTH) return null;
            depth++;
            try {
                return nested();
            } finally {
                depth--;
            }
        }

        private Rational nested() {
            if (s.startsWith("\\frac", pos)) {
                pos += 5;
                Rational n = arg();
                if (n == null) return null;
                Rational d = arg();
                return d == null ? null : n.divide(d);
            }
            if (eat('(')) {
                parens++;
                Rational v = closed(')');
                parens--;
                return v;
            }
            if (eat('{')) return closed('}');
            return number();
        }

        private Rational closed(char close) {
            Rational v = expr();
            return v != null && eat(close) ? v : null;
        }

        private Rational arg() {
            if (eat('{')) return closed('}');
            if (pos < s.length() && Character.isDigit(s.charAt(pos))) {
                return Rational.of(BigInteger.valueOf(s.charAt(pos++) - '0'));
            }
            return null;
        }

        private Rational number() {
            Matcher m = (parens > 0 ? PLAIN_NUMBER : NUMBER).matcher(s).region(pos, s.length());
            if (!m.lookingAt()) return null;
            pos = m.end();
            BigDecimal d = new BigDecimal(m.group().replace(",", ""));
            BigInteger unscaled = d.unscaledValue();
            return d.scale() >= 0
                    ? new Rational(unscaled, BigInteger.TEN.pow(d.scale()))
                    : Rational.of(unscaled.multiply(BigInteger.TEN.pow(-d.scale())));
        }

        private boolean eat(char c) {
            if (pos < s.length() && s.charAt(pos) == c) {
                pos++;
                return true;
            }
            return false;
        }
    }
}
