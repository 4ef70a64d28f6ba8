// MathOptions.java — `orchestra.options` of the math workflow (solver ⇄ verifier, as the Dr. MAS
// reference code): rounds, what a verdict-less verifier reply counts as, the invalid-action
// penalty, and the reference's check against Chinese in the verifier's reply (off by default).
package dev.drmas.workflow.math;

import dev.drmas.config.Check;
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
 */
public record MathOptions(int maxLoops, MalformedVerdict malformedVerdict, double invalidPenalty, boolean rejectCjk) {
    public MathOptions {
        Check.positive(maxLoops, "max_loops");
        Check.given(malformedVerdict, "malformed_verdict");
        Check.nonNegative(invalidPenalty, "invalid_penalty");
    }

    public static MathOptions defaults() {
        return new MathOptions(2, MalformedVerdict.APPROVE, MathReward.DEFAULT_INVALID_PENALTY, false);
    }
}
