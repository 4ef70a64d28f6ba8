// MathOptions.java — `orchestra.options` of the math workflow (solver ⇄ verifier, as the Dr. MAS
// reference code): rounds, what a verdict-less verifier reply counts as, the invalid-action
// penalty, the reference's check against Chinese in the verifier's reply (off by default), and a
// grader command in place of the built-in answer check.
package dev.drmas.workflow.math;

import dev.drmas.config.Check;
import dev.drmas.workflow.GraderOptions;
import dev.drmas.workflow.MalformedVerdict;

/**
 * @param maxLoops         rounds of solver then verifier, &gt;= 1 (the verifier is skipped in the
 *                         last); default 2
 * @param malformedVerdict how a verifier output without a verify tag counts: {@code approve}
 *                         (default, as the reference code) or {@code reject}
 * @param invalidPenalty   subtracted from a row's score when its agent's output is malformed
 *                         (solver without \boxed{}, verifier without a verify tag), &gt;= 0; default 0.1
 * @param rejectCjk        a verifier reply with a character in U+4E00–U+9FFF is invalid, as the
 *                         reference checks its verifier (not its solver); default false
 * @param grader           a command that grades the solver's final reply instead of the built-in
 *                         check (AnswerGrader; ground_truth: the task's answer string); default none
 */
public record MathOptions(int maxLoops, MalformedVerdict malformedVerdict, double invalidPenalty, boolean rejectCjk,
                          GraderOptions grader) {
    public MathOptions {
        Check.positive(maxLoops, "max_loops");
        Check.given(malformedVerdict, "malformed_verdict");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
        Check.given(grader, "grader");
    }

    public static MathOptions defaults() {
        return new MathOptions(2, MalformedVerdict.APPROVE, MathReward.DEFAULT_INVALID_PENALTY, false, GraderOptions.defaults());
    }
}
