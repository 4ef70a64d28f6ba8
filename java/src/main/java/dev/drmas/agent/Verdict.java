// Verdict.java — what a verifier's reply says about the latest answer. MALFORMED (no verdict
// tag) is kept apart from the two real verdicts: it is counted, penalised as an invalid action,
// and the workflow decides what it means (the reference code treats it as approve).
package dev.drmas.agent;

public enum Verdict {
    APPROVE,
    REJECT,
    MALFORMED;

    /** Lower-case spelling, as in configs and prompts ("approve"). */
    public String word() {
        return name().toLowerCase(java.util.Locale.ROOT);
    }
}
