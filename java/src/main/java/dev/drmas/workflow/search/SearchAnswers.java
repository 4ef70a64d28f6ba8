// SearchAnswers.java — the answer checks of the search workload, as Search-R1 and SQuAD score open
// QA: the text of the last <answer>…</answer> tag, normalised (lower case, punctuation and the
// articles a/an/the removed, whitespace collapsed), then exact match against any gold answer, and
// token-level F1 (the best over the golds) logged beside it.
package dev.drmas.workflow.search;

import dev.drmas.agent.Tags;
import java.text.Normalizer;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Pattern;

public final class SearchAnswers {
    private SearchAnswers() {
    }

    /** {@code <answer>(.*?)</answer>}, across lines. */
    static final Tags.Tag ANSWER = Tags.Tag.of("<answer>", "</answer>", 0);
    // Python's re (SQuAD's and Search-R1's normalize_answer) reads \b with Unicode word characters;
    // Java's \b is ASCII-only without this flag, and "España" would lose its final "a" as an article.
    private static final Pattern ARTICLES = Pattern.compile("\\b(a|an|the)\\b", Pattern.UNICODE_CHARACTER_CLASS);

    /** The content of the last {@code <answer>} tag, stripped; empty when there is none or it is blank. */
    public static Optional<String> extractAnswer(String text) {
        return text == null ? Optional.empty() : ANSWER.lastStripped(text);
    }

    /**
     * SQuAD's normalize_answer: lower case, drop punctuation, drop the articles a, an, the (whole
     * words, Unicode letters counting as word characters as in Python), and collapse whitespace.
     * Deliberately wider than the reference, whose string.punctuation is ASCII only: the text is
     * NFKC-folded first (full-width forms, ligatures) and every Unicode punctuation character and
     * math, currency and modifier symbol goes, so a curly apostrophe or an en dash counts as its ASCII
     * twin does; other symbols (®, ©, °: Unicode's So) stay, as in the reference.
     */
    public static String normalize(String s) {
        String lower = Normalizer.normalize(s, Normalizer.Form.NFKC).toLowerCase(Locale.ROOT);
        StringBuilder noPunct = new StringBuilder(lower.length());
        for (int i = 0; i < lower.length(); ) {
            int cp = lower.codePointAt(i);
            if (!isPunctuation(cp)) noPunct.appendCodePoint(cp);
            i += Character.charCount(cp);
        }
        String noArticles = ARTICLES.matcher(noPunct).replaceAll(" ");
        return whitespaceFix(noArticles);
    }

    // " ".join(text.split()): runs of Python's whitespace (str.isspace, which includes U+0085, U+2028
    // and the no-break spaces that Java's \s and trim() leave) become one blank, none at the ends.
    private static String whitespaceFix(String s) {
        StringBuilder out = new StringBuilder(s.length());
        boolean gap = false;
        for (int i = 0; i < s.length(); ) {
            int cp = s.codePointAt(i);
            i += Character.charCount(cp);
            if (isPythonSpace(cp)) {
                gap = true;
            } else {
                if (gap && !out.isEmpty()) out.append(' ');
                gap = false;
                out.appendCodePoint(cp);
            }
        }
        return out.toString();
    }

    private static boolean isPythonSpace(int cp) {
        return Character.isWhitespace(cp) || Character.isSpaceChar(cp) || cp == 0x85;
    }

    private static boolean isPunctuation(int cp) {
        return switch (Character.getType(cp)) {
            case Character.CONNECTOR_PUNCTUATION, Character.DASH_PUNCTUATION, Character.START_PUNCTUATION,
                 Character.END_PUNCTUATION, Character.INITIAL_QUOTE_PUNCTUATION, Character.FINAL_QUOTE_PUNCTUATION,
                 Character.OTHER_PUNCTUATION, Character.MATH_SYMBOL, Character.CURRENCY_SYMBOL,
                 Character.MODIFIER_SYMBOL -> true;
            default -> false;
        };
    }

    /** Whether {@code prediction} equals any gold answer after normalisation. */
    public static boolean exactMatch(String prediction, List<String> golds) {
        String p = normalize(prediction);
        for (String g : golds) if (normalize(g).equals(p)) return true;
        return false;
    }

    /** The best token-level F1 of {@code prediction} against the golds (0 when either side has no token). */
    public static double f1(String prediction, List<String> golds) {
        double best = 0;
        for (String g : golds) best = Math.max(best, f1(prediction, g));
        return best;
    }

    static double f1(String prediction, String gold) {
        String p = normalize(prediction), g = normalize(gold);
        if (p.isEmpty() || g.isEmpty()) return 0;
        String[] pt = p.split(" "), gt = g.split(" ");
        Map<String, Integer> counts = new HashMap<>();
        for (String t : gt) counts.merge(t, 1, Integer::sum);
        int common = 0;
        for (String t : pt) {
            Integer c = counts.get(t);
            if (c != null && c > 0) {
                common++;
                counts.put(t, c - 1);
            }
        }
        if (common == 0) return 0;
        double precision = common / (double) pt.length, recall = common / (double) gt.length;
        return 2 * precision * recall / (precision + recall);
    }

    /** The episode reward: 1 when the answer text's last {@code <answer>} matches a gold answer, else 0 (no answer: 0). */
    public static double reward(String answerText, List<String> golds) {
        return extractAnswer(answerText).filter(a -> exactMatch(a, golds)).isPresent() ? 1.0 : 0.0;
    }
}
