// Demonstrations.java — the texts of the supervised warm start (`drmas sft`) for models trained from
// scratch: solver answers in the agreed format, right or deliberately wrong, and verifier verdicts
// that agree with them, so that RL starts from policies that follow the formats without yet being
// good at the task. The formats are exactly what MathReward parses back.
package dev.drmas.workflow.math;

import dev.drmas.env.Task;
import java.math.BigInteger;
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
     * (kept as an integer or a fraction p/q like the truth), anything else with "+k" appended.
     */
    static String wrongAnswer(String truth, SplittableRandom rng) {
        int offset = rng.nextInt(1, MAX_OFFSET + 1) * (rng.nextBoolean() ? 1 : -1);
        Optional<MathAnswers.Rational> v = MathAnswers.value(truth);
        String wrong = v.isPresent()
                ? v.get().add(MathAnswers.Rational.of(BigInteger.valueOf(offset))).toString()
                : truth + "+" + Math.abs(offset);
        // The constructions above change the value or the text, so this never fires; it guards the
        // contract against a future change of the normaliser rather than trusting it.
        if (MathAnswers.equivalent(wrong, truth)) throw new IllegalStateException("wrong answer '" + wrong + "' equals truth '" + truth + "'");
        return wrong;
    }
}
