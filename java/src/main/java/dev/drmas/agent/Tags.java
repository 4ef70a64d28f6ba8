// Tags.java — the last occurrence of a tag in a model's reply, the one rule that every parser of
// agent output here follows (verdicts, search queries, answers): a model that restates itself
// states its final choice last.
package dev.drmas.agent;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class Tags {
    private Tags() {
    }

    /** Group 1 of the last match of {@code tag} in {@code text}, or null when it does not occur. */
    public static String last(Pattern tag, String text) {
        Matcher m = tag.matcher(text);
        String last = null;
        while (m.find()) last = m.group(1);
        return last;
    }

    /** {@link #last}, stripped; empty when the tag does not occur or its content is blank. */
    public static Optional<String> lastStripped(Pattern tag, String text) {
        String last = last(tag, text);
        return last == null || last.isBlank() ? Optional.empty() : Optional.of(last.strip());
    }
}
