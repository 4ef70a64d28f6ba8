// Episode.java — a finished episode: its ids and task, every agent call in order, the action
// the environment scores (for math, the solver's latest answer; for search, the answerer's reply)
// and the workflow's counters.
package dev.drmas.agent;

import java.util.List;

/**
 * @param steps      the agent calls in the order they happened
 * @param action     the text the environment scores
 * @param approved   whether the episode ended by the verifier's approval (else by the loop limit)
 * @param approvals  verifier replies that said approve
 * @param rejections verifier replies that said reject
 * @param malformed  verifier replies with no verdict (counted here whatever they were taken as)
 * @param loops      rounds in which the episode was active
 * @param toolCalls  tool calls made (search: queries sent to the retriever)
 * @param toolFailures tool calls that failed (search: timeout or error of the retriever)
 */
public record Episode(int uid, int traj, String question, String answer, List<Step> steps, String action,
                     boolean approved, int approvals, int rejections, int malformed, int loops, int toolCalls,
                     int toolFailures) {
    public Episode {
        steps = List.copyOf(steps);
    }

    /** An episode of a workflow without tools. */
    public Episode(int uid, int traj, String question, String answer, List<Step> steps, String action,
                   boolean approved, int approvals, int rejections, int malformed, int loops) {
        this(uid, traj, question, answer, steps, action, approved, approvals, rejections, malformed, loops, 0, 0);
    }

    /** The steps of one agent, in order. */
    public List<Step> stepsOf(int agent) {
        return steps.stream().filter(s -> s.agent() == agent).toList();
    }
}
