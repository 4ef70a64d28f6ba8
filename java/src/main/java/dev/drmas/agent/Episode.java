// Episode.java — a finished episode: its ids and task, every agent call in order, the action the
// environment scores (math: the solver's latest answer; search: the answerer's reply), whether it
// ended by an approval, and the workflow's counters by name (verdicts, rounds, tool calls, ...).
package dev.drmas.agent;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * @param steps    the agent calls in the order they happened
 * @param action   the text the environment scores
 * @param approved whether the episode ended by a verifier's approval (math: approve; search: yes,
 *                 then the answer), else by its turn limit; false in workflows without a verifier
 * @param counters what the workflow counted, by name; the names every workflow with a verifier
 *                 uses are {@link #APPROVALS}, {@link #REJECTIONS} and {@link #MALFORMED_VERDICTS}
 */
public record Episode(int uid, int traj, String question, String answer, List<Step> steps, String action,
                      boolean approved, Map<String, Integer> counters) {
    /** Verifier replies that approved (math: approve; search: yes). */
    public static final String APPROVALS = "approvals";
    /** Verifier replies that rejected (math: reject; search: no). */
    public static final String REJECTIONS = "rejections";
    /** Verifier replies with no verdict, counted here whatever the workflow took them as. */
    public static final String MALFORMED_VERDICTS = "malformed_verdicts";
    /** Rounds of the workflow in which the episode was active (math: loops; search: turns). */
    public static final String ROUNDS = "rounds";

    public Episode {
        steps = List.copyOf(steps);
        counters = java.util.Collections.unmodifiableMap(new LinkedHashMap<>(counters));
    }

    /** The counter {@code name}; 0 when the workflow never counted it. */
    public int count(String name) {
        return counters.getOrDefault(name, 0);
    }

    /** The steps of one agent, in order. */
    public List<Step> stepsOf(int agent) {
        return steps.stream().filter(s -> s.agent() == agent).toList();
    }
}
