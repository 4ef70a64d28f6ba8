// PromptTemplate.java — a user-message template such as "Q: {question}\nA: {answer}", parsed
// once. Placeholders are {identifier}; "{{" and "}}" are literal braces, and any other brace is
// kept as written, so LaTeX such as \boxed{} or \frac{1}{2} needs no escaping.
package dev.drmas.agent;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;

public final class PromptTemplate {
    private final String source;
    private final String origin;  // where it was written (a config key path), or null for a workflow's own
    // alternating pieces: literal text, or a placeholder name (marked by the flag)
    private final List<String> pieces = new ArrayList<>();
    private final List<Boolean> isPlaceholder = new ArrayList<>();
    private final Set<String> placeholders = new LinkedHashSet<>();

    private PromptTemplate(String source, String origin) {
        this.source = source;
        this.origin = origin;
        StringBuilder literal = new StringBuilder();
        int i = 0;
        while (i < source.length()) {
            char c = source.charAt(i);
            if ((c == '{' || c == '}') && i + 1 < source.length() && source.charAt(i + 1) == c) {
                literal.append(c);
                i += 2;
                continue;
            }
            if (c == '{') {
                int close = source.indexOf('}', i + 1);
                if (close > i + 1 && isIdentifier(source, i + 1, close)) {
                    flush(literal);
                    String name = source.substring(i + 1, close);
                    pieces.add(name);
                    isPlaceholder.add(true);
                    placeholders.add(name);
                    i = close + 1;
                    continue;
                }
            }
            literal.append(c);
            i++;
        }
        flush(literal);
    }

    public static PromptTemplate of(String source) {
        return new PromptTemplate(Objects.requireNonNull(source, "template"), null);
    }

    /** A template written at {@code origin} (a config key path such as agents[0].prompts.user), which errors name. */
    public static PromptTemplate of(String source, String origin) {
        return new PromptTemplate(Objects.requireNonNull(source, "template"), origin);
    }

    /** Where the template was written (a config key path), or null for a workflow's built-in one. */
    public String origin() {
        return origin;
    }

    private void flush(StringBuilder literal) {
        if (literal.isEmpty()) return;
        pieces.add(literal.toString());
        isPlaceholder.add(false);
        literal.setLength(0);
    }

    private static boolean isIdentifier(String s, int from, int to) {
        if (!(Character.isLetter(s.charAt(from)) || s.charAt(from) == '_')) return false;
        for (int j = from + 1; j < to; j++) {
            char c = s.charAt(j);
            if (!(Character.isLetterOrDigit(c) || c == '_')) return false;
        }
        return true;
    }

    /** The template as written. */
    public String source() {
        return source;
    }

    /** Placeholder names in order of first use. */
    public Set<String> placeholders() {
        return Collections.unmodifiableSet(placeholders);
    }

    /**
     * The text with every placeholder replaced. A placeholder without a value is a bug in the
     * caller (orchestras check templates against the values they provide when they are built).
     */
    public String render(Map<String, String> values) {
        StringBuilder out = new StringBuilder(source.length() + 64);
        for (int p = 0; p < pieces.size(); p++) {
            if (!isPlaceholder.get(p)) {
                out.append(pieces.get(p));
                continue;
            }
            String value = values.get(pieces.get(p));
            if (value == null) {
                throw new IllegalStateException("template \"" + source + "\": no value for {" + pieces.get(p)
                        + "} (have " + values.keySet() + ")");
            }
            out.append(value);
        }
        return out.toString();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof PromptTemplate t && t.source.equals(source);
    }

    @Override
    public int hashCode() {
        return source.hashCode();
    }

    @Override
    public String toString() {
        return source;
    }
}
