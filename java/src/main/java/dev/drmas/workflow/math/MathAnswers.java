// MathAnswers.java — reading a final answer out of a model's text (the last \boxed{...}) and deciding
// whether two answers are the same. Numbers compare by exact value (BigInteger fractions, decimals
// converted exactly), so "1/2", "0.5", "\frac{2}{4}", "-\frac{-1}{2}", the mixed number "1\frac{1}{4}"
// vs "1.25" and the repeating decimal "0.\overline{3}" vs "1/3" agree while "0.33" never equals "1/3";
// anything that is not a number compares as a cleaned-up string first. A comma is a thousands
// separator only where it cannot be a list's: "1,234" and "1,\!234" are 1234, "2, 500" and "(1,234)"
// are not numbers; a blank or thin space only between groups of three: "1 000" and "1\,000" are
// 1000, "2 3" is no number. Text answers get the clean-ups of
// verl's math reward (Hendrycks' strip_string) that a string comparison needs: a unit at the end goes
// ("5\text{ cm}", also "5\,\mathrm{cm}", "5 cm" and "5 in." after a number), \sqrt2, \frac1b gain their
// braces, x_{1} loses them. Where the strings differ, the forms are compared: tuples, intervals,
// unions and matrices element by element in order, bare lists ("1, -2", "1 and 2") and sets \{\} in
// any order with "a \pm b", \{\pm 2\} and \frac{1 \pm \sqrt5}{2} as two elements (a bare list against
// a set as that set), words without case when \text-wrapped or spelled as prose (Yes, yes; not AB),
// and formulas by evaluation (Expressions: 11 + 11\sqrt{5} is 11\sqrt{5} + 11, (x+1)^2 is x^2+2x+1);
// a formula answers a number truth only in scientific notation (1.2 \times 10^5), not as undone
// arithmetic (2^{10} for 1024).
package dev.drmas.workflow.math;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.Set;
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

    /**
     * True iff both answers are non-empty and equal after {@link #normalize}, or, where they differ
     * there, equal as forms: element by element for tuples, intervals, unions and matrices; in any
     * order for bare lists ("1 and 2" is "2, 1") and sets, where "a \pm b" is two elements; a
     * formula by evaluation ({@link Expressions}); words without regard to case when one side wraps
     * them in \text or both spell them as prose ("Yes", "yes"). One-sided: a number predicted for a formula truth
     * (1024 for 2^{10}) is right, a formula predicted for a number truth only in scientific notation.
     */
    public static boolean equivalent(String predicted, String truth) {
        return predicted != null && truth != null && sameForm(predicted, truth, 0);
    }

    // Deeper structure than answers have (a list of tuples of matrices ...) is compared as text only;
    // so are two answers longer together than this.
    private static final int MAX_FORM_DEPTH = 8, MAX_FORM_CHARS = 4000;

    // 1.2 \times 10^5, 6.72 \cdot 10^{-5}, 10^6: a number in scientific notation
    private static final Pattern SCIENTIFIC = Pattern.compile(
            "-? ?(?:(?:\\d+(?:\\.\\d*)?|\\.\\d+) ?(?:\\\\times|\\\\cdot|\\*) ?)?10 ?\\^ ?(?:\\{ ?[-+]?\\d+ ?}|\\d+)");

    // a is the answer under test, b the truth: the rule for a formula against a number is one-sided.
    private static boolean sameForm(String a, String b, int depth) {
        // normalize's forms, from one cleaning per side
        String fa = clean(a, false), fb = clean(b, false);
        Optional<Rational> va = Numbers.parse(fa), vb = Numbers.parse(fb);
        String na = normalForm(fa, va), nb = normalForm(fb, vb);
        if (na.isEmpty() || nb.isEmpty()) return false;
        if (na.equals(nb)) return true;
        // Forms are compared for answers of an answer's size: a degenerate reply is its text alone.
        if (depth > MAX_FORM_DEPTH || a.length() + b.length() > MAX_FORM_CHARS) return false;
        String ca = clean(a, true), cb = clean(b, true);
        // A number on either side is not split as a list (1,000 is a thousand); two numbers have
        // compared exactly already. A number answer to a formula truth (1024 for 2^{10}) is evaluated;
        // a formula answer to a number truth counts only in scientific notation: 2^{10}, 17 \times 23
        // or \binom{5}{2} for 1024, 391 or 10 leaves the computation undone, and a reward for it would
        // teach the solver to stop before the arithmetic.
        boolean numA = va.isPresent(), numB = vb.isPresent();
        if (numA && numB) return false;
        if (numB && !SCIENTIFIC.matcher(ca).matches()) return false;
        if (numA || numB) {
            return Expressions.equal(numA ? numberText(fa, va.get()) : ca, numB ? numberText(fb, vb.get()) : cb);
        }
        Matrix ma = Matrix.of(ca), mb = Matrix.of(cb);
        if (ma != null || mb != null) {
            if (ma == null || mb == null || !ma.sameBrackets(mb) || ma.rows.size() != mb.rows.size()) return false;
            for (int r = 0; r < ma.rows.size(); r++) {
                if (!sameForms(ma.rows.get(r), mb.rows.get(r), depth)) return false;
            }
            return true;
        }
        List<String> ua = splitTop(ca, UNION), ub = splitTop(cb, UNION);
        if (ua.size() > 1 || ub.size() > 1) return sameForms(ua, ub, depth);
        // A bare list is a set of answers ("1, -2" for the roots -2 and 1), and "\pm" stands for two;
        // against a set \{...\} it is that set's elements
        List<String> la = plusMinus(splitTop(ca, LIST)), lb = plusMinus(splitTop(cb, LIST));
        if (la.size() > 1 || lb.size() > 1) return sameSets(setElements(la), setElements(lb), depth);
        Bracketed ba = Bracketed.of(ca), bb = Bracketed.of(cb);
        if (ba != null || bb != null) {
            if (ba == null || bb == null || !ba.open.equals(bb.open) || !ba.close.equals(bb.close)) return false;
            // a set \{...\} has no order; a tuple or an interval has
            return ba.open.equals("\\{") ? sameSets(plusMinus(ba.items), plusMinus(bb.items), depth) : sameForms(ba.items, bb.items, depth);
        }
        if (words(ca) && words(cb)) {
            boolean sameWords = ca.replace(" ", "").equalsIgnoreCase(cb.replace(" ", ""));
            if (wrapsText(a) || wrapsText(b)) return sameWords;
            // bare, they are words where both are spelled as prose (Yes = yes); else letters of a formula
            if (sameWords && prose(ca) && prose(cb)) return true;
        }
        return Expressions.equal(ca, cb);
    }

    private static final Pattern EXPONENT_NUMBER = Pattern.compile("[-+]?(?:\\d+\\.?\\d*|\\.\\d+)[eE][-+]?\\d+");

    // A number's text for the formula reader: as written (its decimal point tells an approximation),
    // but an exponent form spelled out ("1e1" is 10, which the reader would take for 1 times e times 1)
    // and a repeating decimal as its exact value (0.\overline{3} is 1/3, a bar the reader does not know).
    private static String numberText(String f, Rational value) {
        if (f.contains("\\overline") || f.contains("\\bar")) return value.toString();
        String t = f.replace(",", "");
        return EXPONENT_NUMBER.matcher(t).matches() ? new BigDecimal(t).toPlainString() : t;
    }

    // Sets are matched element to element in any order up to this size (and length: the matching
    // compares every pair, at every level of nesting); larger ones in order.
    private static final int MAX_UNORDERED = 12;
    private static final int MAX_UNORDERED_LENGTH = 2000;

    private static int length(List<String> items) {
        int n = 0;
        for (String s : items) n += s.length();
        return n;
    }

    // The elements of a lone set \{...\} of two or more ("a \pm b" as two, so \{\pm 2\} is \{2, -2\}),
    // else the list as it is.
    private static List<String> setElements(List<String> list) {
        Bracketed b = list.size() == 1 ? Bracketed.of(list.getFirst()) : null;
        return b != null && b.open.equals("\\{") ? plusMinus(b.items) : list;
    }

    // "1 \pm \sqrt{2}" is the two elements "1 + \sqrt{2}" and "1 - \sqrt{2}": one \pm (or \mp) at the top
    // level, or the only one of an item without a comma wherever it sits outside \{ \}, as in
    // \frac{1 \pm \sqrt{5}}{2} or (1 \pm \sqrt{5})/2. Two signs ("\pm 1 \pm i": two values or four?) stay
    // as written; a sign inside a tuple's or a set's brackets is that element's, read where the element is.
    private static List<String> plusMinus(List<String> items) {
        List<String> out = new ArrayList<>();
        for (String item : items) {
            int at = onlySign(item);
            String before = at >= 0 ? item.substring(0, at) : "", after = at >= 0 ? item.substring(at + 3) : "";
            if (!after.isBlank()) {  // a sign with nothing to sign is no two values
                boolean mp = item.startsWith("mp", at + 1);
                out.add(before + (mp ? " - " : " + ") + after);
                out.add(before + (mp ? " + " : " - ") + after);
            } else {
                out.add(item);
            }
        }
        return out;
    }

    // Where the \pm or \mp that plusMinus expands starts, or -1.
    private static int onlySign(String item) {
        int depth = 0, setDepth = 0, top = -1, tops = 0, any = -1, all = 0;
        boolean setSign = false;
        for (int i = 0; i < item.length(); i++) {
            char c = item.charAt(i);
            if (c == '\\' && i + 1 < item.length()) {
                char d = item.charAt(i + 1);
                if (d == '{' || d == '}') {
                    depth += d == '{' ? 1 : -1;
                    setDepth += d == '{' ? 1 : -1;
                    i++;
                } else if ((item.startsWith("pm", i + 1) || item.startsWith("mp", i + 1))
                        && !(i + 3 < item.length() && Character.isLetter(item.charAt(i + 3)))) {
                    if (depth == 0) {
                        top = i;
                        tops++;
                    }
                    any = i;
                    all++;
                    setSign = setDepth > 0;
                }
            } else if (c == '(' || c == '[' || c == '{') {
                depth++;
            } else if (c == ')' || c == ']' || c == '}') {
                depth--;
            }
        }
        if (tops == 1) return top;
        return tops == 0 && all == 1 && !setSign && item.indexOf(',') < 0 ? any : -1;
    }

    // A perfect matching of a's elements to b's (augmenting paths): a greedy first match could take the
    // partner another element needed ("1024, 2^{10}" against "2^{10}, 1024", where the rule for a
    // formula against a number is one-sided), and its result depended on the order. Pairs are compared
    // when the search asks for them, element i first against element i: lists in the same order cost
    // n comparisons, not n^2.
    private static boolean sameSets(List<String> a, List<String> b, int depth) {
        if (a.size() != b.size()) return false;
        if (a.size() > MAX_UNORDERED || length(a) > MAX_UNORDERED_LENGTH || length(b) > MAX_UNORDERED_LENGTH) return sameForms(a, b, depth);
        int n = a.size();
        Boolean[][] same = new Boolean[n][n];
        int[] partner = new int[n];  // b's element j is matched to a's partner[j], -1: free
        java.util.Arrays.fill(partner, -1);
        for (int i = 0; i < n; i++) {
            if (!augment(i, a, b, depth, same, partner, new boolean[n])) return false;
        }
        return true;
    }

    private static boolean augment(int i, List<String> a, List<String> b, int depth, Boolean[][] same, int[] partner, boolean[] seen) {
        int n = partner.length;
        for (int t = 0; t < n; t++) {
            int j = (i + t) % n;
            if (seen[j]) continue;
            if (same[i][j] == null) same[i][j] = sameForm(a.get(i), b.get(j), depth + 1);
            if (!same[i][j]) continue;
            seen[j] = true;
            if (partner[j] < 0 || augment(partner[j], a, b, depth, same, partner, seen)) {
                partner[j] = i;
                return true;
            }
        }
        return false;
    }

    private static boolean sameForms(List<String> a, List<String> b, int depth) {
        if (a.size() != b.size()) return false;
        for (int i = 0; i < a.size(); i++) {
            if (!sameForm(a.get(i), b.get(i), depth + 1)) return false;
        }
        return true;
    }

    // Text of two letters or more ("East", "even", "New York"); one letter stays case-sensitive: e is
    // a constant or a variable, E a choice or another variable.
    private static final Pattern TEXT_WRAPPER = Pattern.compile("\\\\(?:text|textbf|textit|textrm|mathrm|mbox)(?![A-Za-z])");

    // A loop, not a regex: a repeated group in java.util.regex recurses once per word, and a model's
    // box can hold tens of thousands of them.
    private static boolean words(String s) {
        int letters = 0;
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c < 128 && Character.isLetter(c)) letters++;
            else if (c != ' ' || i == 0 || i == s.length() - 1 || s.charAt(i - 1) == ' ') return false;
        }
        return letters >= 2;
    }

    // Words as prose spells them: upper-case at most the first letter of each, and each word either one
    // of the words below or of three letters or more with a vowel after its first letter ("yes",
    // "Even", "New York"). "AB" (a segment, or A times B), "Xy", "Abc" and "x y" stay letters of a
    // formula, whose case counts; so does "YES" unless \text says it is a word.
    private static boolean prose(String s) {
        for (String word : s.split(" ", -1)) {
            if (word.isEmpty()) return false;
            for (int i = 1; i < word.length(); i++) if (Character.isUpperCase(word.charAt(i))) return false;
            String lower = word.toLowerCase(java.util.Locale.ROOT);
            boolean vowel = false;
            for (int i = 1; i < lower.length(); i++) vowel |= "aeiou".indexOf(lower.charAt(i)) >= 0;
            if (!(SHORT_WORDS.contains(lower) || lower.length() >= 3 && vowel)) return false;
        }
        return true;
    }

    // answer words that the vowel rule misses
    private static final Set<String> SHORT_WORDS = Set.of("no", "an", "at", "by", "if", "in", "is", "it", "of", "on", "or", "to", "up",
            "odd");

    private static boolean wrapsText(String raw) {
        return TEXT_WRAPPER.matcher(raw).find();
    }

    // Separators at the top level (outside (), [], {} and \{ \}): a union's \cup; a list's commas
    // and its words "and", "or" (after \text{ and } lost its wrapper).
    private static final Pattern UNION = Pattern.compile("\\\\cup(?![A-Za-z])");
    private static final Pattern LIST = Pattern.compile(",\\s*(?:and|or)\\s+|,|\\s+(?:and|or)\\s+");

    private static List<String> splitTop(String s, Pattern separator) {
        List<String> parts = new ArrayList<>();
        int depth = 0, start = 0;
        Matcher m = separator.matcher(s);
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == '\\' && i + 1 < s.length() && (s.charAt(i + 1) == '{' || s.charAt(i + 1) == '}')) {
                depth += s.charAt(i + 1) == '{' ? 1 : -1;
                i++;
            } else if (c == '(' || c == '[' || c == '{') {
                depth++;
            } else if (c == ')' || c == ']' || c == '}') {
                depth--;
            } else if (depth == 0 && (c == ',' || c == ' ' || c == '\\') && m.region(i, s.length()).lookingAt()) {
                parts.add(s.substring(start, i).trim());
                start = m.end();
                i = m.end() - 1;
            }
        }
        parts.add(s.substring(start).trim());
        return parts;
    }

    // A tuple, an interval or a set of two elements or more (\{\pm 2\} has two): its brackets and its elements.
    // "(x+1)" alone is grouping, and "(a+5)(b+2)" is a product: neither is bracketed.
    private record Bracketed(String open, String close, List<String> items) {
        static Bracketed of(String s) {
            String open = s.startsWith("\\{") ? "\\{" : s.startsWith("(") ? "(" : s.startsWith("[") ? "[" : null;
            if (open == null) return null;
            int depth = 0;
            for (int i = 0; i < s.length(); i++) {
                char c = s.charAt(i);
                boolean escaped = c == '\\' && i + 1 < s.length() && (s.charAt(i + 1) == '{' || s.charAt(i + 1) == '}');
                if (escaped) c = s.charAt(++i);
                if (c == '(' || c == '[' || c == '{') depth++;
                else if (c == ')' || c == ']' || c == '}') depth--;
                if (depth == 0) {
                    if (i != s.length() - 1) return null;
                    String close = escaped ? "\\}" : String.valueOf(c);
                    String inner = s.substring(open.length(), s.length() - close.length());
                    List<String> items = splitTop(inner, LIST);
                    // \{\pm 2\}: one element that is two
                    boolean two = items.size() > 1 || open.equals("\\{") && plusMinus(items).size() > 1;
                    return two ? new Bracketed(open, close, items) : null;
                }
            }
            return null;
        }
    }

    // \begin{pmatrix} a & b \\ c & d \end{pmatrix}: rows of entries. pmatrix and bmatrix only typeset
    // brackets differently; other environments must be the same.
    private record Matrix(String env, List<List<String>> rows) {
        private static final Pattern ENV = Pattern.compile(
                "\\\\begin\\{([a-zA-Z]*matrix)}(.*)\\\\end\\{\\1}", Pattern.DOTALL);

        static Matrix of(String s) {
            Matcher m = ENV.matcher(s.strip());
            if (!m.matches()) return null;
            List<List<String>> rows = new ArrayList<>();
            for (String row : m.group(2).split("\\\\\\\\", -1)) {
                if (row.isBlank()) continue;  // a trailing \\ before \end
                List<String> entries = new ArrayList<>();
                for (String e : row.split("&", -1)) entries.add(e.trim());
                rows.add(entries);
            }
            return rows.isEmpty() ? null : new Matrix(m.group(1), rows);
        }

        boolean sameBrackets(Matrix o) {
            return env.equals(o.env) || Set.of("pmatrix", "bmatrix").containsAll(List.of(env, o.env));
        }
    }

    /**
     * The canonical form of an answer. A number (integer, decimal, a/b, \frac, a mixed number, signs anywhere,
     * parentheses) becomes its reduced fraction: "-1/2", "3", "0". Anything else becomes the text
     * with delimiters ($, \(, \[), \text-like wrappers, \left/\right, spacing commands, degree and
     * percent signs, a short "x=" prefix, blanks and a trailing period removed.
     */
    public static String normalize(String answer) {
        String s = clean(answer);
        return normalForm(s, Numbers.parse(s));
    }

    // a cleaned answer's normal form: its exact value when it is a number, else its text without blanks
    // but one between two digits ("2 3" is not the number 23)
    private static String normalForm(String cleaned, Optional<Rational> value) {
        return value.map(Rational::toString).orElse(withoutBlanks(cleaned, false));
    }

    /** The exact value of an answer, when it is a number. */
    static Optional<Rational> value(String answer) {
        return Numbers.parse(clean(answer));
    }

    // the commands whose argument is the text itself (\text{abc} is abc), by name
    private static final Set<String> WRAPPERS = Set.of("text", "textbf", "textit", "textrm", "mathrm", "mathbf",
        "mathit", "mbox", "boxed");
    private static final Pattern LEFT_RIGHT = Pattern.compile("\\\\(left|right)(?![A-Za-z])");
    // A double backslash (a matrix's row break) is matched first so that its second backslash is never
    // read as the start of a spacing command: "1 \\ 2" must not lose a backslash to "\ ".
    private static final Pattern SPACING = Pattern.compile(
            "\\\\\\\\|\\\\[!,;: ]|\\\\q?quad(?![A-Za-z])|\\\\displaystyle(?![A-Za-z])|\\\\[dt]frac(?![A-Za-z])");
    private static final Pattern DEGREES = Pattern.compile("\\^\\s*\\{?\\s*\\\\circ\\s*}?|\u00b0");
    // "x = 5", "y_1=5", "x \in [-2, 7]": the variable restated before the value (the set for \in)
    private static final Pattern SHORT_LHS = Pattern.compile("^[A-Za-z](_\\{?[A-Za-z0-9]{1,3}}?)? ?(?:=(?!=)|\\\\in(?![A-Za-z])) ?(.*)$");
    // one spelling of each relation: \leq, \leqslant and U+2264 are \le (likewise \ge), \neq and U+2260 are \ne
    private static final Pattern RELATION = Pattern.compile("\\\\([lg]e)(?:q|qslant|slant)(?![A-Za-z])");
    // "11,\! 111,\! 100": a comma with a negative space between digit groups is a thousands separator
    private static final Pattern THIN_THOUSANDS = Pattern.compile("(?<=\\d),\\s*\\\\!\\s*(?=\\d{3}(?!\\d))");
    // x_{1} is x_1 and 52_{8} is 52_8: one character needs no braces
    private static final Pattern BRACED_SUBSCRIPT = Pattern.compile("_\\{\\s*([A-Za-z0-9])\\s*}");
    // Mixed numbers, the whole answer: "1\frac{4}{5}", "137 \frac{1}{2}", "2 1/4" (a proper fraction
    // after an integer; 2\frac{x}{3} inside a formula stays a product)
    private static final Pattern MIXED = Pattern.compile(
            "^(-?) ?(\\d+) ?(?:\\\\frac\\{(\\d+)}\\{(\\d+)}|\\\\frac(\\d)(\\d)| (\\d+) ?/ ?(\\d+))$");

    private static String clean(String answer) {
        return clean(answer, false);
    }

    // The cleaned answer: without blanks for the text and number forms (a comma keeps the blank after
    // it); with single blanks for the form comparison, where "\cot x" must not become "\cotx".
    private static String clean(String answer, boolean keepBlanks) {
        // U+2212 is a minus, U+00B1 and U+2213 are \pm and \mp
        String s = trimSentence(answer.replace('\u2212', '-').replace("\u00b1", "\\pm ").replace("\u2213", "\\mp ").trim());
        s = dropUnit(s);
        s = unwrap(s);
        s = s.replace("{,}", ",");
        s = THIN_THOUSANDS.matcher(s).replaceAll(",");
        s = digitGroups(s);
        s = LEFT_RIGHT.matcher(s).replaceAll("");
        s = replaceFracs(s);
        s = braceArguments(s);
        s = BRACED_SUBSCRIPT.matcher(s).replaceAll("_$1");
        s = DEGREES.matcher(s).replaceAll("");
        s = s.replace("\\%", "").replace("%", "").replace("\\$", "");
        s = RELATION.matcher(s.replace("\u2264", "\\le ").replace("\u2265", "\\ge ").replace("\u2260", "\\ne "))
                .replaceAll("\\\\$1").replaceAll("\\\\neq(?![A-Za-z])", "\\\\ne");
        s = trimSentence(s.replaceAll("\\s+", " ").trim());
        // "x=5", "y_1=5", "x \in (0, 1)": the solver restated the variable; the value is what is asked for
        Matcher m = SHORT_LHS.matcher(s);
        if (m.matches() && !m.group(2).isBlank() && m.group(2).indexOf('=') < 0) s = m.group(2).trim();
        s = mixedNumber(s);
        // Blanks go, but a comma keeps one after it so that the number reader sees "2, 500" (two
        // roots) as a list, not as 2500 (the text form drops that blank too: normalize), and two
        // digits that digitGroups kept apart keep theirs.
        return keepBlanks ? s : withoutBlanks(s, true);
    }

    // s without its blanks but one between two digits (digitGroups left it: "2 3" is no 23) and, with
    // afterComma, one after a comma.
    private static String withoutBlanks(String s, boolean afterComma) {
        if (s.indexOf(' ') < 0) return s;
        StringBuilder out = new StringBuilder(s.length());
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            if (c == ' ' && i > 0 && i + 1 < s.length()) {
                char before = s.charAt(i - 1);
                if (!(afterComma && before == ',' || isDigit(before) && isDigit(s.charAt(i + 1)))) continue;
            } else if (c == ' ') {
                continue;
            }
            out.append(c);
        }
        return out.toString();
    }

    // "1 000 000", "12\,345", "0.123 45": digit groups set apart by blanks or thin spaces (\, \; \: \ ~)
    // are one number where they are thousands groups: before a point one to three digits, then groups
    // of three; after it groups of three, the last of one to three. Next to a slash, ^ or _ they are
    // not ("2 100/400" is a mixed number). Other groups ("2 3", "12 34") are no number: one blank
    // stays between them, which no later step removes, and both number readers refuse a number
    // next to a number. One pass.
    private static String digitGroups(String s) {
        int n = s.length();
        StringBuilder out = null;
        int copied = 0;
        for (int i = 0; i < n; ) {
            if (!isDigit(s.charAt(i))) {
                i++;
                continue;
            }
            int start = i, end = digitsEnd(s, i), groups = 1;
            char before = start > 0 ? s.charAt(start - 1) : ' ';
            boolean fraction = before == '.';
            int first = end - start, last = first;
            boolean threes = true;  // every group but the first (integer part) or the last (fraction) has three
            while (true) {
                int j = separatorsEnd(s, end);
                if (j == end || j >= n || !isDigit(s.charAt(j))) break;
                if (fraction ? last != 3 : groups > 1 && last != 3) threes = false;
                int k = digitsEnd(s, j);
                last = k - j;
                groups++;
                end = k;
            }
            if (groups == 1) {
                i = end;
                continue;
            }
            boolean thousands = threes && "/^_".indexOf(before) < 0 && (end == n || s.charAt(end) != '/')
                    && (fraction ? last <= 3 : first <= 3 && last == 3);
            if (out == null) out = new StringBuilder(n);
            out.append(s, copied, start);
            for (int g = start; g < end; ) {
                int k = digitsEnd(s, g);
                out.append(s, g, k);
                if (k == end) break;
                if (!thousands) out.append(' ');
                g = separatorsEnd(s, k);
            }
            copied = end;
            i = end;
        }
        return out == null ? s : out.append(s, copied, n).toString();
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    private static int digitsEnd(String s, int i) {
        while (i < s.length() && isDigit(s.charAt(i))) i++;
        return i;
    }

    // past the blanks and thin spaces at i
    private static int separatorsEnd(String s, int i) {
        while (i < s.length()) {
            char c = s.charAt(i);
            if (Character.isWhitespace(c) || c == '~') i++;
            else if (c == '\\' && i + 1 < s.length() && ",;: ".indexOf(s.charAt(i + 1)) >= 0) i += 2;
            else break;
        }
        return i;
    }

    // 1\frac{4}{5} -> 9/5; anything else as it is.
    private static String mixedNumber(String s) {
        Matcher m = MIXED.matcher(s);
        if (!m.matches()) return s;
        int g = m.group(3) != null ? 3 : m.group(5) != null ? 5 : 7;
        BigInteger whole = new BigInteger(m.group(2)), num = new BigInteger(m.group(g)), den = new BigInteger(m.group(g + 1));
        if (den.signum() == 0 || num.compareTo(den) >= 0) return s;
        return m.group(1) + whole.multiply(den).add(num) + "/" + den;
    }

    // A unit after the value, "5\text{ cm}", "12 \text{ apples}", "3\text{ m}^2": the value is the
    // answer (the Hendrycks/verl rule; a blank before the unit word, inside or before the braces,
    // marks it as a unit). Only at the very end and only words, so "5\text{ or }6" keeps its text.
    private static final Pattern RIGHT_UNIT = Pattern.compile(
            "^(.*?\\S)(?:\\s+\\\\(?:text|textrm|mbox)\\s*\\{\\s*|\\\\(?:text|textrm|mbox)\\s*\\{\\s+)"
            + "[A-Za-z][A-Za-z. ]*}(?:\\s*\\^\\s*(?:\\d|\\{\\s*\\d\\s*}))?\\s*$", Pattern.DOTALL);
    private static final String POWER = "(?:\\s*\\^\\s*(?:\\d|\\{\\s*\\d\\s*}))?\\s*$";
    // Without a blank ("5\text{cm}", "5\,\mathrm{cm}") a wrapped word is a unit after a number only
    // (x\text{cm} is no number with a unit), and not e or i (2\mathrm{e} is 2e).
    private static final Pattern WRAPPED_UNIT = Pattern.compile(
            "^(.*?)(?:\\s|~|\\\\[,;: ]|\\\\q?quad(?![A-Za-z]))*\\\\(?:text|textrm|mbox|mathrm)\\s*\\{\\s*([A-Za-z][A-Za-z. ]*?)\\s*}"
            + POWER, Pattern.DOTALL);
    // A bare unit word after a number and a blank: "5 cm", "25 dollars" (words only: "2 m" may be 2m).
    // "5 in." is inches (the sentence's period is gone by now): only after a number and a blank, so
    // "5in" stays a product and \in, a backslash's, is never the word.
    private static final Pattern BARE_UNIT = Pattern.compile(
            "^(.*?)(?:\\s|~|\\\\[,;: ]|\\\\q?quad(?![A-Za-z]))+(?:km|cm|mm|(?:centi|milli|kilo)?met(?:er|re)s?|inch(?:es)?|in\\.?|feet|foot|ft"
            + "|yards?|miles?|seconds?|minutes?|hours?|days?|weeks?|months?|years?|degrees?|dollars?|cents?|units?"
            + "|square (?:units|feet|inches|meters|centimeters)|sq units|cubic (?:units|feet|inches|meters|centimeters)"
            + "|pounds?|ounces?|grams?|kilograms?|kg|liters?|litres?|mph|people|students|ways)" + POWER, Pattern.DOTALL);

    // The unit rules without a blank before \text read the value as a number (recursively, for
    // "5 cm^2 ..."): only on answers of this length at most, so that the recursion stays shallow.
    private static final int MAX_UNIT_ANSWER = 200;

    private static String dropUnit(String s) {
        Matcher m = RIGHT_UNIT.matcher(s);
        if (m.matches()) {
            // "5\ \text{cm}": the blank was a spacing command's, whose backslash is no part of the value
            String v = m.group(1);
            if (v.endsWith(",")) return s;  // "\text{A}, \text{C}": a list of words, not A with unit C
            return v.endsWith("\\") && !v.endsWith("\\\\") ? v.substring(0, v.length() - 1) : v;
        }
        if (s.length() > MAX_UNIT_ANSWER) return s;
        m = WRAPPED_UNIT.matcher(s);
        if (m.matches() && !m.group(2).equals("e") && !m.group(2).equals("i") && value(m.group(1)).isPresent()) return m.group(1);
        m = BARE_UNIT.matcher(s);
        if (m.matches() && value(m.group(1)).isPresent()) return m.group(1);
        return s;
    }

    // \sqrt2 is \sqrt{2} and \frac1b is \frac{1}{b} in LaTeX (one character is an argument); the text
    // form needs one spelling. One pass over precomputed brace pairs, no recursion: a model can
    // nest \frac{ a hundred thousand deep.
    private static String braceArguments(String s) {
        if (!s.contains("\\sqrt") && !s.contains("\\frac")) return s;
        int n = s.length();
        int[] close = closingBraces(s);
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

    // Delimiters ($...$, $$...$$, \(...\), \[...\]) and a sentence's period, which may follow the closing
    // delimiter ("$5$.") or sit inside it ("$5.$"), and blanks, until none is left. Ends move by index
    // and the text is copied once: "$" fifty thousand deep took a copy per layer.
    private static String trimSentence(String s) {
        int lo = 0, hi = s.length();
        while (true) {
            while (lo < hi && s.charAt(lo) <= ' ') lo++;
            while (hi > lo && s.charAt(hi - 1) <= ' ') hi--;
            if (hi - lo >= 2 && s.charAt(lo) == '$' && s.charAt(hi - 1) == '$') {
                lo++;
                hi--;
            } else if (hi - lo >= 4 && s.charAt(lo) == '\\' && s.charAt(hi - 2) == '\\'
                    && (s.charAt(lo + 1) == '(' && s.charAt(hi - 1) == ')' || s.charAt(lo + 1) == '[' && s.charAt(hi - 1) == ']')) {
                lo += 2;
                hi -= 2;
            } else if (hi - lo > 1 && s.charAt(hi - 1) == '.') {
                hi--;
            } else {
                return s.substring(lo, hi);
            }
        }
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

    // \text{abc} -> abc (and the other wrappers of WRAPPERS), nested ones too: every wrapper whose brace
    // closes loses its name and its braces, in one pass over brace pairs found once (a pass per level
    // of nesting, and a search for the closing brace from every unclosed "\text{", were quadratic in a
    // reply of ten thousand of them). A wrapper's name that only forms once another wrapper is gone
    // ("\te\text{}xt{5}") stays text.
    private static String unwrap(String s) {
        int n = s.length();
        int[] close = null;
        boolean[] drop = null;
        for (int at = s.indexOf('\\'); at >= 0; at = s.indexOf('\\', at + 1)) {
            int after = at + 1;
            while (after < n && Character.isLetter(s.charAt(after))) after++;  // \textstyle is no \text
            if (after == at + 1 || !WRAPPERS.contains(s.substring(at + 1, after))) continue;
            int i = after;
            while (i < n && Character.isWhitespace(s.charAt(i))) i++;
            if (i >= n || s.charAt(i) != '{') continue;
            if (close == null) close = closingBraces(s);
            if (close[i] < 0) continue;
            if (drop == null) drop = new boolean[n];
            Arrays.fill(drop, at, i + 1, true);
            drop[close[i]] = true;
            at = after - 1;
        }
        if (drop == null) return s;
        StringBuilder out = new StringBuilder(n);
        for (int i = 0; i < n; i++) {
            if (!drop[i]) out.append(s.charAt(i));
        }
        return out.toString();
    }

    // For each '{', the index of the '}' that matchingBrace would find for it (-1: none); one pass with
    // a stack, escaped characters skipped as there.
    private static int[] closingBraces(String s) {
        int n = s.length();
        int[] close = new int[n], open = new int[n];
        Arrays.fill(close, -1);
        int depth = 0;
        for (int i = 0; i < n; i++) {
            char c = s.charAt(i);
            if (c == '\\') i++;
            else if (c == '{') open[depth++] = i;
            else if (c == '}' && depth > 0) close[open[--depth]] = i;
        }
        return close;
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

        Rational multiply(Rational o) {
            return new Rational(num.multiply(o.num), den.multiply(o.den));
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
    //   number  := digits, thousands groups "1,234", decimals ".5" "2.0", exponent "1e3",
    //              repeating decimals "0.\overline{3}" "0.1\overline{6}"
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
            return b == null ? null : bounded(a.divide(b));
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
                return d == null ? null : bounded(n.divide(d));
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
            Matcher r = REPEATING.matcher(s).region(pos, s.length());
            if (r.lookingAt()) return repeating(r);
            Matcher m = (parens > 0 ? PLAIN_NUMBER : NUMBER).matcher(s).region(pos, s.length());
            if (!m.lookingAt()) return null;
            pos = m.end();
            // more significant digits than MAX_BITS hold is no number here: BigDecimal would read all of
            // a reply's hundred thousand digits first, in time quadratic in their count
            if (significantDigits(m.group()) > MAX_SIGNIFICANT) return null;
            BigDecimal d = new BigDecimal(m.group().replace(",", ""));
            BigInteger unscaled = d.unscaledValue();
            if (Math.abs(d.scale()) > MAX_DIGITS || unscaled.bitLength() > MAX_BITS) return null;
            return d.scale() >= 0
                    ? new Rational(unscaled, BigInteger.TEN.pow(d.scale()))
                    : Rational.of(unscaled.multiply(BigInteger.TEN.pow(-d.scale())));
        }

        // Larger than any answer: not a number here (the text comparison stands). Unbounded, nested
        // \frac of 1e9999 built numbers of millions of digits, seconds of work for one reply.
        private static final int MAX_DIGITS = 1000, MAX_BITS = 4 * MAX_DIGITS;
        // 10^1300 has more than MAX_BITS bits: a number with more significant digits is over the bound
        private static final int MAX_SIGNIFICANT = 1300;

        // The digits of a number's unscaled value: without its leading zeros (also those after the
        // point), its separators and its exponent.
        private static int significantDigits(String number) {
            int count = 0;
            for (int i = 0; i < number.length(); i++) {
                char c = number.charAt(i);
                if (c == 'e' || c == 'E') break;
                if (c >= '1' && c <= '9' || c == '0' && count > 0) count++;
            }
            return count;
        }

        // 0.\overline{3} is 1/3 and 0.1\overline{6} is 1/6: the digits before the bar, then the bar's
        // digits repeated for ever (MATH's notation for a repeating decimal; \bar too). A decimal
        // without a bar is what it says: 0.333 is 333/1000, not 1/3.
        private static final Pattern REPEATING = Pattern.compile(
                "(\\d*)\\.(\\d*)\\\\(?:overline|bar)(?:\\{(\\d+)}|(\\d))");

        // i.f\overline{r} with k digits in f and m in r: (if * (10^m - 1) + r) / (10^k * (10^m - 1))
        private Rational repeating(Matcher r) {
            String whole = r.group(1), fixed = r.group(2), period = r.group(3) != null ? r.group(3) : r.group(4);
            if (whole.length() + fixed.length() + period.length() > MAX_DIGITS) return null;
            pos = r.end();
            BigInteger nines = BigInteger.TEN.pow(period.length()).subtract(BigInteger.ONE);
            BigInteger head = new BigInteger(whole.isEmpty() && fixed.isEmpty() ? "0" : whole + fixed);
            return new Rational(head.multiply(nines).add(new BigInteger(period)), BigInteger.TEN.pow(fixed.length()).multiply(nines));
        }

        private static Rational bounded(Rational r) {
            return r == null || r.num.bitLength() + r.den.bitLength() > 2 * MAX_BITS ? null : r;
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
