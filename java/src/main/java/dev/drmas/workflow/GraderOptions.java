// GraderOptions.java — `orchestra.options.grader:` of the math, proposer-aggregator and search
// workflows: a command that grades final answers instead of the workflow's built-in check (the
// Python reward function of a verl user, or a paper's own grader, run as it is), and how long one
// answer may take.
package dev.drmas.workflow;

import dev.drmas.config.Check;
import java.util.List;

/**
 * @param command  the grader's command line, program first (e.g. {@code [python3,
 *                 configs/reward/verl_reward.py, my_reward.py, compute_score]}); empty (default) =
 *                 the workflow's built-in check. Started once per process when the run opens, it
 *                 says {@code {"ready": true}}, then reads one JSON request a line on stdin and
 *                 answers each with one line {@code {"score": S}} on stdout (AnswerGrader has the
 *                 protocol)
 * @param timeoutS seconds the grader may take to be ready, and to answer one request, before the run
 *                 stops naming it, &gt; 0; default 60
 */
public record GraderOptions(List<String> command, double timeoutS) {
    public GraderOptions {
        if (command == null) command = List.of();
        for (int i = 0; i < command.size(); i++) {
            Check.that(command.get(i) != null && !command.get(i).isBlank(), "command", "its part " + i + " is empty");
        }
        command = List.copyOf(command);
        Check.positive(timeoutS, "timeout_s");
    }

    public static GraderOptions defaults() {
        return new GraderOptions(List.of(), 60);
    }

    /** Whether a command is given (else the workflow's own check grades). */
    public boolean external() {
        return !command.isEmpty();
    }
}
