// Tags.java — the last occurrence of a tag in a model's reply, the one rule that every parser of
// agent output here follows (verdicts, search queries, answers): a model that restates itself
// states its final choice last. A tag's span (Tag) is found without a regex's lazy scan to the
// closing tag from every opening one, which a reply of many unclosed opening tags made quadratic.
package dev.drmas.agent;

import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

public final class Tags {
    private Tags() {
    }

    /**
     * Group 1 of the last match of {@code tag} in {@code text}, or null when it does not occur. For
     * patterns whose every attempt stops early (a bounded tag); a span from an opening to a
     * closing tag is a {@link Tag}.
     */
    public static String last(Pattern tag, String text) {
        Matcher m = tag.matcher(text);
        String last = null;
        while (m.find()) last = m.group(1);
        return last;
    }

    /**
     * A tag written as an opening and a closing pattern, each matching in at most one way at any
     * index (literal text, optional spaces): {@link #last} gives what group 1 of the last match of
     * {@code open(.*?)close} (DOTALL, the same flags) gave in a find loop, in one pass over the text.
     */
    public record Tag(Pattern open, Pattern close) {
        /** The tag of the regexes {@code open} and {@code close}, compiled with {@code flags}. */
        public static Tag of(String open, String close, int flags) {
            return new Tag(Pattern.compile(open, flags), Pattern.compile(close, flags));
        }

        /**
         * The text between the last opening tag and the closing tag that ends it, or null. As the
         * regex's find loop: from where the previous match ended, the first opening tag with a
         * closing tag after it opens the next match, which the first such closing tag ends.
         * Where the first closing tag at or after an index lies is remembered: an opening tag
         * without one after it costs a lookup, not a scan to the end of the text.
         */
        public String last(String text) {
            return lastWhere(text, content -> true);
        }

        /**
         * As {@link #last}, of the matches whose content {@code accept} takes: a tag with other content
         * (an empty or stray one after the verdict) does not hide the one before it.
         */
        public String lastWhere(String text, java.util.function.Predicate<String> accept) {
            Matcher o = open.matcher(text), c = close.matcher(text);
            String last = null;
            // the first closing tag at or after `asked`: [start, end), or start -1 when there is none;
            // it is also the first at or after any index in [asked, start] (or any index, when none)
            int asked = Integer.MAX_VALUE, start = -1, end = -1;
            int from = 0;
            while (from <= text.length() && o.find(from)) {
                int at = o.end();
                if (at < asked || (start >= 0 && at > start)) {
                    asked = at;
                    if (c.find(at)) {
                        start = c.start();
                        end = c.end();
                    } else {
                        start = end = -1;
                    }
                }
                if (start < 0) {
                    from = o.start() + 1;  // no closing tag follows: the regex tried the next index
                    continue;
                }
                String content = text.substring(at, start);
                if (accept.test(content)) last = content;
                from = end;
            }
            return last;
        }

        /** {@link #last}, stripped; empty when the tag does not occur or its content is blank. */
        public Optional<String> lastStripped(String text) {
            String last = last(text);
            return last == null || last.isBlank() ? Optional.empty() : Optional.of(last.strip());
        }
    }
}
