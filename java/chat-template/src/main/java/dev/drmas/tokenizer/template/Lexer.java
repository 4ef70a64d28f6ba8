// Lexer.java — splits a template into data and tag tokens the way jinja2's lexer does under HF's
// settings (trim_blocks, lstrip_blocks): `-`/`+` whitespace control, comments, raw blocks, and
// bracket balancing inside tags. Whitespace handling is where ports usually drift from jinja2, so
// each rule below cites the jinja2 regex it reproduces.
package dev.drmas.tokenizer.template;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.List;

final class Lexer {
    enum Kind { DATA, VAR_BEGIN, VAR_END, BLOCK_BEGIN, BLOCK_END, NAME, STRING, INT, FLOAT, OP, EOF }

    /** text: data, name, operator or decoded string; value: Long/Double for numbers; at: offset. */
    record Token(Kind kind, String text, Object value, int at) {
        boolean is(Kind k, String t) {
            return kind == k && text.equals(t);
        }

        boolean isName(String t) {
            return is(Kind.NAME, t);
        }

        boolean isOp(String t) {
            return is(Kind.OP, t);
        }
    }

    private static final String[] OPERATORS = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
        "[", "]", "(", ")", "{", "}", "=", ".", ":", "|", ",", ";", ">", "<"};

    private final SourceText src;
    private final String s;
    private final int n;
    private int pos;
    private final List<Token> out = new ArrayList<>();

    private Lexer(SourceText src) {
        this.src = src;
        this.s = src.text;
        this.n = s.length();
    }

    static List<Token> tokenize(SourceText src) {
        Lexer lx = new Lexer(src);
        lx.root();
        lx.out.add(new Token(Kind.EOF, "", null, lx.n));
        return lx.out;
    }

    /** Python's str.isspace(), which is what `\s` and str.strip() mean in jinja2's lexer. */
    static boolean isSpace(int c) {
        return Character.isWhitespace(c) || Character.isSpaceChar(c) || c == 0x85;
    }

    private void root() {
        while (pos < n) {
            int tag = nextTagStart(pos);
            if (tag < 0) {
                data(s.substring(pos), pos);
                return;
            }
            char kind = s.charAt(tag + 1);
            char sign = tag + 2 < n ? s.charAt(tag + 2) : 0;
            boolean signed = sign == '-' || sign == '+';
            data(stripBeforeTag(s.substring(pos, tag), pos, sign, kind == '{'), pos);
            pos = tag + 2 + (signed ? 1 : 0);
            switch (kind) {
                case '#' -> comment(tag);
                case '{' -> {
                    out.add(new Token(Kind.VAR_BEGIN, "{{", null, tag));
                    insideTag(false, tag);
                }
                default -> {
                    if (!raw(tag)) {
                        out.add(new Token(Kind.BLOCK_BEGIN, "{%", null, tag));
                        insideTag(true, tag);
                    }
                }
            }
        }
    }

    private int nextTagStart(int from) {
        for (int i = s.indexOf('{', from); i >= 0 && i + 1 < n; i = s.indexOf('{', i + 1)) {
            char c = s.charAt(i + 1);
            if (c == '%' || c == '{' || c == '#') return i;
        }
        return -1;
    }

    /**
     * The text before a tag: `{%-` strips all trailing whitespace (text.rstrip()); otherwise, with
     * lstrip_blocks, block and comment tags (not `{{`, not `{%+`) drop the spaces and tabs between
     * the line start and the tag, when nothing else precedes the tag on its line.
     */
    private String stripBeforeTag(String text, int textStart, char sign, boolean variable) {
        if (sign == '-') return rstrip(text);
        if (sign == '+' || variable) return text;
        int lineStart = text.lastIndexOf('\n') + 1;
        // jinja2's line_starting: the previous match (a tag end) ended with a newline
        boolean lineStarting = textStart == 0 || s.charAt(textStart - 1) == '\n';
        if (lineStart > 0 || lineStarting) {
            for (int i = lineStart; i < text.length(); i++) {
                char c = text.charAt(i);
                if (c != ' ' && c != '\t') return text;
            }
            return text.substring(0, lineStart);
        }
        return text;
    }

    static String rstrip(String t) {
        int end = t.length();
        while (end > 0 && isSpace(t.charAt(end - 1))) end--;
        return t.substring(0, end);
    }

    private void data(String text, int at) {
        if (!text.isEmpty()) out.add(new Token(Kind.DATA, text, null, at));
    }

    private void skipSpace() {
        while (pos < n && isSpace(s.charAt(pos))) pos++;
    }

    /** `(.*?)((?:\+#}|\-#}\s*|#}\n?))`: the first comment end, with trim_blocks' one newline. */
    private void comment(int tag) {
        for (int i = pos; i + 1 < n; i++) {
            if (s.startsWith("+#}", i)) {
                pos = i + 3;
                return;
            }
            if (s.startsWith("-#}", i)) {
                pos = i + 3;
                skipSpace();
                return;
            }
            if (s.startsWith("#}", i)) {
                pos = i + 2;
                if (pos < n && s.charAt(pos) == '\n') pos++;
                return;
            }
        }
        throw src.error(tag, "missing end of comment tag");
    }

    /**
     * `{% raw %}...{% endraw %}` becomes one data token. Like jinja2, the raw start tag gets no
     * trim_blocks newline removal (its regex has no `\n?`), the end tag does.
     */
    private boolean raw(int tag) {
        int p = pos;
        while (p < n && isSpace(s.charAt(p))) p++;
        if (!s.startsWith("raw", p)) return false;
        p += 3;
        while (p < n && isSpace(s.charAt(p))) p++;
        boolean strip = s.startsWith("-%}", p);
        if (!strip && !s.startsWith("%}", p)) return false;
        pos = p + (strip ? 3 : 2);
        if (strip) skipSpace();
        for (int i = s.indexOf("{%", pos); i >= 0; i = s.indexOf("{%", i + 1)) {
            char sign = i + 2 < n ? s.charAt(i + 2) : 0;
            int q = i + 2 + (sign == '-' || sign == '+' ? 1 : 0);
            while (q < n && isSpace(s.charAt(q))) q++;
            if (!s.startsWith("endraw", q)) continue;
            q += 6;
            while (q < n && isSpace(s.charAt(q))) q++;
            int end;
            if (s.startsWith("+%}", q)) {
                end = q + 3;
            } else if (s.startsWith("-%}", q)) {
                end = q + 3;
                while (end < n && isSpace(s.charAt(end))) end++;
            } else if (s.startsWith("%}", q)) {
                end = q + 2 + (q + 2 < n && s.charAt(q + 2) == '\n' ? 1 : 0);
            } else {
                continue;
            }
            data(stripBeforeTag(s.substring(pos, i), pos, sign, false), pos);
            pos = end;
            return true;
        }
        throw src.error(tag, "missing end of raw directive");
    }

    /** Tokens inside `{{ }}` or `{% %}` up to the end tag; an end tag inside open brackets is an operator. */
    private void insideTag(boolean block, int tag) {
        Deque<Character> brackets = new ArrayDeque<>();
        while (true) {
            if (pos >= n) {
                throw src.error(tag, "unexpected end of template, expected " + (block ? "'%}'" : "'}}'"));
            }
            int at = pos;
            if (brackets.isEmpty() && endTag(block, at)) return;
            char c = s.charAt(pos);
            if (isSpace(c)) {
                pos++;
            } else if (c >= '0' && c <= '9') {
                number();
            } else if (c == '_' || Character.isLetter(c)) {
                int e = pos + 1;
                while (e < n && (s.charAt(e) == '_' || Character.isLetterOrDigit(s.charAt(e)))) e++;
                out.add(new Token(Kind.NAME, s.substring(pos, e), null, at));
                pos = e;
            } else if (c == '\'' || c == '"') {
                string(c);
            } else {
                String op = operator();
                if (op == null) throw src.error(at, "unexpected char '" + c + "'");
                switch (op) {
                    case "(" -> brackets.push(')');
                    case "[" -> brackets.push(']');
                    case "{" -> brackets.push('}');
                    case ")", "]", "}" -> {
                        if (brackets.isEmpty()) throw src.error(at, "unexpected '" + op + "'");
                        char expected = brackets.pop();
                        if (expected != op.charAt(0)) {
                            throw src.error(at, "unexpected '" + op + "', expected '" + expected + "'");
                        }
                    }
                    default -> { }
                }
                out.add(new Token(Kind.OP, op, null, at));
                pos += op.length();
            }
        }
    }

    /** Block end `(?:\+%}|\-%}\s*|%}\n?)`, variable end `\-}}\s*|}}`. */
    private boolean endTag(boolean block, int at) {
        String close = block ? "%}" : "}}";
        Kind kind = block ? Kind.BLOCK_END : Kind.VAR_END;
        if (block && s.startsWith("+%}", at)) {
            pos = at + 3;
        } else if (s.startsWith("-" + close, at)) {
            pos = at + 3;
            skipSpace();
        } else if (s.startsWith(close, at)) {
            pos = at + 2;
            if (block && pos < n && s.charAt(pos) == '\n') pos++;
        } else {
            return false;
        }
        out.add(new Token(kind, close, null, at));
        return true;
    }

    private String operator() {
        for (String op : OPERATORS) {
            if (s.startsWith(op, pos)) return op;
        }
        return null;
    }

    private int digits(int p) {
        // (\d+_)*\d+ : digits with single underscores between them
        int start = p;
        while (p < n && Character.isDigit(s.charAt(p))) {
            p++;
            if (p + 1 < n && s.charAt(p) == '_' && Character.isDigit(s.charAt(p + 1))) p++;
        }
        return p == start ? -1 : p;
    }

    private void number() {
        int at = pos;
        if (s.charAt(pos) == '0' && pos + 1 < n && "xXoObB".indexOf(s.charAt(pos + 1)) >= 0) {
            int radix = switch (Character.toLowerCase(s.charAt(pos + 1))) {
                case 'x' -> 16;
                case 'o' -> 8;
                default -> 2;
            };
            int e = pos + 2;
            while (e < n && (s.charAt(e) == '_' || Character.digit(s.charAt(e), radix) >= 0)) e++;
            intToken(s.substring(pos + 2, e).replace("_", ""), radix, at);
            pos = e;
            return;
        }
        int e = digits(pos);
        boolean isFloat = false;
        int frac = e < n && s.charAt(e) == '.' ? digits(e + 1) : -1;
        if (frac > 0) {
            e = frac;
            isFloat = true;
        }
        if (e < n && (s.charAt(e) == 'e' || s.charAt(e) == 'E')) {
            int p = e + 1;
            if (p < n && (s.charAt(p) == '+' || s.charAt(p) == '-')) p++;
            int exp = digits(p);
            if (exp > 0) {
                e = exp;
                isFloat = true;
            }
        }
        String text = s.substring(pos, e).replace("_", "");
        if (isFloat) {
            out.add(new Token(Kind.FLOAT, text, Double.parseDouble(text), at));
        } else {
            intToken(text, 10, at);
        }
        pos = e;
    }

    private void intToken(String digits, int radix, int at) {
        try {
            out.add(new Token(Kind.INT, digits, Long.parseLong(digits, radix), at));
        } catch (NumberFormatException e) {
            throw src.error(at, "integer literal '" + digits + "' does not fit in 64 bits");
        }
    }

    /** A quoted string, decoded as Python's unicode-escape codec does (jinja2 uses it). */
    private void string(char quote) {
        int at = pos;
        StringBuilder b = new StringBuilder();
        int p = pos + 1;
        while (true) {
            if (p >= n) throw src.error(at, "unterminated string literal");
            char c = s.charAt(p);
            if (c == quote) break;
            if (c != '\\' || p + 1 >= n) {
                b.append(c);
                p++;
                continue;
            }
            char e = s.charAt(p + 1);
            p += 2;
            switch (e) {
                case '\n' -> { }
                case '\\', '\'', '"' -> b.append(e);
                case 'a' -> b.append('\u0007');
                case 'b' -> b.append('\b');
                case 'f' -> b.append('\f');
                case 'n' -> b.append('\n');
                case 'r' -> b.append('\r');
                case 't' -> b.append('\t');
                case 'v' -> b.append('\u000b');
                case 'x', 'u', 'U' -> {
                    int len = e == 'x' ? 2 : e == 'u' ? 4 : 8;
                    int cp = hex(p, len);
                    if (cp < 0) throw src.error(p - 2, "truncated \\" + e + " escape in string literal");
                    b.appendCodePoint(cp);
                    p += len;
                }
                default -> {
                    if (e >= '0' && e <= '7') {
                        int v = e - '0';
                        for (int k = 0; k < 2 && p < n && s.charAt(p) >= '0' && s.charAt(p) <= '7'; k++) {
                            v = v * 8 + s.charAt(p++) - '0';
                        }
                        b.append((char) v);
                    } else {
                        b.append('\\').append(e); // Python keeps unknown escapes verbatim
                    }
                }
            }
        }
        out.add(new Token(Kind.STRING, b.toString(), null, at));
        pos = p + 1;
    }

    private int hex(int p, int len) {
        if (p + len > n) return -1;
        int v = 0;
        for (int i = 0; i < len; i++) {
            int d = Character.digit(s.charAt(p + i), 16);
            if (d < 0) return -1;
            v = v * 16 + d;
        }
        return Character.isValidCodePoint(v) ? v : -1;
    }
}
