// VerdictParser.java — turns a verifier reply into a Verdict. Injected into MathOrchestra so the
// environment's own parser can be used; the default reads the last <verify>…</verify> tag.
package dev.drmas.agent;

import java.util.regex.Pattern;

@FunctionalInterface
public interface VerdictParser {
    Verdict parse(String response);

    /**
     * The default: the last {@code <verify>approve</verify>} or {@code <verify>reject</verify>}
     * (case and surrounding spaces inside the tag ignored) decides; no such tag is MALFORMED. The
     * last tag, because a model that changes its mind states its final verdict last.
     */
    static VerdictParser verifyTag() {
        return TagVerdict.APPROVE_REJECT;
    }

    /**
     * The search verifier's parser: the last {@code <verify>yes</verify>} (enough information:
     * APPROVE, answer now) or {@code <verify>no</verify>} (REJECT: search more); no such tag is
     * MALFORMED.
     */
    static VerdictParser yesNoTag() {
        return TagVerdict.YES_NO;
    }
}

/**
 * A parser that reads the last {@code <verify>…</verify>} tag whose content is one of two words:
 * {@code approve} gives APPROVE, the other word REJECT; no such tag is MALFORMED.
 */
record TagVerdict(Pattern tag, String approve) implements VerdictParser {
    static final TagVerdict APPROVE_REJECT = of("approve", "reject"), YES_NO = of("yes", "no");

    private static TagVerdict of(String approve, String reject) {
        return new TagVerdict(Pattern.compile("<verify>\\s*(" + approve + "|" + reject + ")\\s*</verify>",
                Pattern.CASE_INSENSITIVE), approve);
    }

    @Override
    public Verdict parse(String response) {
        String last = Tags.last(tag, response);
        if (last == null) return Verdict.MALFORMED;
        return last.equalsIgnoreCase(approve) ? Verdict.APPROVE : Verdict.REJECT;
    }
}
