// VerdictParser.java — turns a verifier reply into a Verdict. Each workflow gives its orchestra the
// parser its verifier's format needs (math: <verify>approve|reject</verify>; search:
// <verify>yes|no</verify>), so that validity and the workflow read replies alike.
package dev.drmas.agent;

import java.util.regex.Pattern;

@FunctionalInterface
public interface VerdictParser {
    Verdict parse(String response);

    /**
     * The last {@code <verify>approve</verify>} or {@code <verify>reject</verify>} tag, for the words
     * given (case and surrounding spaces inside the tag ignored), decides; no such tag is MALFORMED.
     * The last tag, because a model that changes its mind states its final verdict last.
     */
    static VerdictParser lastTag(String approveWord, String rejectWord) {
        Pattern tag = Pattern.compile("<verify>\\s*(" + Pattern.quote(approveWord) + "|" + Pattern.quote(rejectWord)
                + ")\\s*</verify>", Pattern.CASE_INSENSITIVE);
        return response -> {
            String last = Tags.last(tag, response);
            if (last == null) return Verdict.MALFORMED;
            return last.equalsIgnoreCase(approveWord) ? Verdict.APPROVE : Verdict.REJECT;
        };
    }
}
