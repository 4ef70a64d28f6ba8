// Demonstrations.java — the texts of the supervised warm start (`drmas sft`) for models trained from
// scratch: solver answers in the agreed format, right or deliberately wrong, and verifier verdicts
// that agree with them, so that RL starts from policies that follow the formats without yet being
// good at the task. The formats are exactly what MathReward parses back.
package dev.drmas.workflow.math;

import dev.drmas.env.Task;
import java.math.BigInteger;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;

public final class Demonstrations {
    private Demonstrations() {
    }

    /** Wrong answers are the truth moved by ±1..±MAX_OFFSET: near misses, as a model makes them. */
    static final int MAX_OFFSET = 10;

    /** {@code Answer: \boxed{<answer>}} with the task's answer, or with a wrong one that is never equivalent to it. */
    public static String solverResponse(Task t, boolean correct, SplittableRandom rng) {
        String truth = MathAnswers.statedAnswer(t.answer());  // a worked solution's boxed answer
        return "Answer: \\boxed{" + (correct ? truth : wrongAnswer(truth, rng)) + "}";
    }

    /** {@code <verify>approve</verify>} or {@code <verify>reject</verify>}. */
    public static String verifierResponse(boolean approve) {
        return approve ? "<verify>approve</verify>" : "<verify>reject</verify>";
    }

    /** Whether a good verifier approves {@code solverText}: its last box is equivalent to one of the task's answers. */
    public static boolean verifierLabel(Task t, String solverText) {
        return MathReward.episodeReward(solverText, t) == 1.0;
    }

    /**
     * An answer that is not equivalent to {@code truth}: a number moved by a non-zero integer offset
     * (kept as an integer or a fraction p/q like the truth), anything else with "+k" appended; where
     * the checker cannot tell that from the truth (a formula of a large irrational value, whose "+k"
     * is below the evaluation's tolerance), twice the truth plus k, then its negation minus k.
     */
    static String wrongAnswer(String truth, SplittableRandom rng) {
        int offset = rng.nextInt(1, MAX_OFFSET + 1) * (rng.nextBoolean() ? 1 : -1);
        Optional<MathAnswers.Rational> v = MathAnswers.value(truth);
        int k = Math.abs(offset);
        List<String> candidates = v.isPresent()
                ? List.of(v.get().add(MathAnswers.Rational.of(BigInteger.valueOf(offset))).toString())
                : List.of(truth + "+" + k, "2\\left(" + truth + "\\right)+" + k, "-\\left(" + truth + "\\right)-" + k);
        for (String wrong : candidates) if (!MathAnswers.equivalent(wrong, truth)) return wrong;
        // a truth none of these differs from is not an answer a demonstration can miss on purpose
        throw new IllegalStateException("no wrong answer found for truth '" + truth + "' (tried " + candidates + ")");
    }
}
