// VerdictParser.java — turns a verifier reply into a Verdict. Injected into MathOrchestra so the
// environment's own parser can be used; the default reads the last <verify>…</verify> tag.
package dev.drmas.agent;

import java.util.regex.Matcher;
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
        return DefaultVerdict.INSTANCE;
    }

    /**
     * The search verifier's parser: the last {@code <verify>yes</verify>} (enough information:
     * APPROVE, answer now) or {@code <verify>no</verify>} (REJECT: search more); no such tag is
     * MALFORMED.
     */
    static VerdictParser yesNoTag() {
        return YesNoVerdict.INSTANCE;
    }
}

/** The search verifier's parser. */
enum YesNoVerdict implements VerdictParser {
    INSTANCE;

    private static final Pattern TAG = Pattern.compile("<verify>\\s*(yes|no)\\s*</verify>", Pattern.CASE_INSENSITIVE);

    @Override
    public Verdict parse(String response) {
        Matcher m = TAG.matcher(response);
        String last = null;
        while (m.find()) last = m.group(1);
        if (last == null) return Verdict.MALFORMED;
        return last.equalsIgnoreCase("yes") ? Verdict.APPROVE : Verdict.REJECT;
    }
}

/** The default parser's state: one compiled pattern. */
enum DefaultVerdict implements VerdictParser {
    INSTANCE;

    private static final Pattern TAG =
            Pattern.compile("<verify>\\s*(approve|reject)\\s*</verify>", Pattern.CASE_INSENSITIVE);

    @Override
    public Verdict parse(String response) {
        Matcher m = TAG.matcher(response);
        String last = null;
        while (m.find()) last = m.group(1);
        if (last == null) return Verdict.MALFORMED;
        return last.equalsIgnoreCase("approve") ? Verdict.APPROVE : Verdict.REJECT;
    }
}
