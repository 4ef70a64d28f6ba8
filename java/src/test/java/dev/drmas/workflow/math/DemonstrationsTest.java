// DemonstrationsTest.java — warm-start texts parse back through the checkers: right answers score
// 1 and are approved, wrong ones are well-formed near misses that never score, for integer,
// fraction and non-numeric truths; verifier texts give back their verdicts.
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Verdict;
import dev.drmas.env.Task;
import java.math.BigInteger;
import java.util.HashSet;
import java.util.Optional;
import java.util.Set;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

class DemonstrationsTest {
    @Test
    void rightAnswerIsTheAgreedFormat() {
        Task t = new Task("t", "What is 37+48-12?", "73");
        String s = Demonstrations.solverResponse(t, true, new SplittableRandom(1));
        assertEquals("Answer: \\boxed{73}", s);
        assertTrue(MathReward.solverValid(s));
        assertEquals(1.0, MathReward.episodeReward(s, t.answer()));
        assertTrue(Demonstrations.verifierLabel(t, s));
    }

    @Test
    void wrongIntegerAnswersAreNearMissesThatNeverScore() {
        SplittableRandom rng = new SplittableRandom(3);
        Set<Integer> offsets = new HashSet<>();
        for (Task t : new SyntheticArithmetic(2, 3, 1, 3, "+-*", true).generate(300, 9)) {
            String s = Demonstrations.solverResponse(t, false, rng);
            assertTrue(s.startsWith("Answer: \\boxed{") && s.endsWith("}"), s);
            assertTrue(MathReward.solverValid(s), s);
            assertEquals(0.0, MathReward.episodeReward(s, t.answer()), t.question() + " -> " + s);
            assertFalse(Demonstrations.verifierLabel(t, s), s);
            Optional<String> box = MathAnswers.lastBoxed(s);
            int offset = new BigInteger(box.orElseThrow()).subtract(new BigInteger(t.answer())).intValueExact();
            assertTrue(offset != 0 && Math.abs(offset) <= 10, "offset " + offset);
            offsets.add(offset);
        }
        assertTrue(offsets.contains(-10) && offsets.contains(-1) && offsets.contains(1) && offsets.contains(10), offsets.toString());
    }

    @Test
    void wrongAnswersForOtherTruthsNeverMatchEither() {
        SplittableRandom rng = new SplittableRandom(5);
        for (String truth : new String[] {"\\frac{1}{2}", "0.25", "-7", "0", "1,000", "\\sqrt{2}", "\\text{Paris}", "(1,2)", "x=3",
                // large irrational values, whose "+k" is within the checker's tolerance: sft stopped on them
                "\\sqrt{2}\\cdot 10^{10}", "10^{10}\\sqrt{5}", "2^{40}\\sqrt{3}", "\\frac{10^{12}}{\\sqrt{3}}", "\\sqrt{2}\\cdot 10^{20}"}) {
            Task t = new Task("t", "?", truth);
            for (int i = 0; i < 20; i++) {
                String s = Demonstrations.solverResponse(t, false, rng);
                assertTrue(MathReward.solverValid(s), s);
                assertFalse(Demonstrations.verifierLabel(t, s), truth + " -> " + s);
            }
            assertTrue(Demonstrations.verifierLabel(t, Demonstrations.solverResponse(t, true, rng)), truth);
        }
        // a fraction stays a fraction: 1/2 moved by an integer is never an integer
        String s = Demonstrations.solverResponse(new Task("t", "?", "1/2"), false, new SplittableRandom(0));
        assertTrue(MathAnswers.lastBoxed(s).orElseThrow().matches("-?\\d+/2"), s);
    }

    @Test
    void sameGeneratorStateSameWrongAnswer() {
        Task t = new Task("t", "?", "50");
        assertEquals(Demonstrations.solverResponse(t, false, new SplittableRandom(8)),
                Demonstrations.solverResponse(t, false, new SplittableRandom(8)));
        assertNotEquals("Answer: \\boxed{50}", Demonstrations.solverResponse(t, false, new SplittableRandom(8)));
    }

    @Test
    void verifierTextsParseBack() {
        assertEquals("<verify>approve</verify>", Demonstrations.verifierResponse(true));
        assertEquals("<verify>reject</verify>", Demonstrations.verifierResponse(false));
        assertEquals(Verdict.APPROVE, MathReward.parseVerdict(Demonstrations.verifierResponse(true)));
        assertEquals(Verdict.REJECT, MathReward.parseVerdict(Demonstrations.verifierResponse(false)));
    }

    @Test
    void verifierLabelUsesTheLastBoxAndNeedsOne() {
        Task t = new Task("t", "?", "0.5");
        assertTrue(Demonstrations.verifierLabel(t, "\\boxed{3} no: \\boxed{\\frac{1}{2}}"));
        assertFalse(Demonstrations.verifierLabel(t, "\\boxed{\\frac{1}{2}} no: \\boxed{3}"));
        assertFalse(Demonstrations.verifierLabel(t, "Answer: 0.5"));
    }
}
