// MathRewardTest.java — the episode reward on the last box, the verifier's verdict (case,
// blanks, last tag wins, malformed), solver validity, and row scores with the default and a
// configured invalid-action penalty, all against hand-written expectations.
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Verdict;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class MathRewardTest {
    @Test
    void episodeRewardLooksAtTheLastBoxOnly() {
        assertEquals(1.0, MathReward.episodeReward("Answer: \\boxed{73}", "73"));
        assertEquals(1.0, MathReward.episodeReward("so \\boxed{\\frac{1}{2}}", "0.5"));
        assertEquals(0.0, MathReward.episodeReward("\\boxed{73} hmm, no: \\boxed{74}", "73"));
        assertEquals(1.0, MathReward.episodeReward("\\boxed{74} hmm, no: \\boxed{73}", "73"));
        assertEquals(0.0, MathReward.episodeReward("The answer is 73.", "73"));
        assertEquals(0.0, MathReward.episodeReward("\\boxed{7.3}", "73"));
        assertEquals(0.0, MathReward.episodeReward(null, "73"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', value = {
        "<verify>approve</verify>                          | APPROVE",
        "<verify>reject</verify>                           | REJECT",
        "The steps look right. <verify> Approve </verify>  | APPROVE",
        "<VERIFY>REJECT</VERIFY>                           | REJECT",
        "< verify >reject</ verify >                       | REJECT",
        "<verify>approve</verify> wait, <verify>reject</verify> | REJECT",
        "<verify>reject</verify> on reflection <verify>approve</verify> | APPROVE",
        "<verify>reject</verify> then <verify>maybe</verify> | MALFORMED",
        "<verify>approved</verify>                         | MALFORMED",
        "<verify></verify>                                 | MALFORMED",
        "<verify>approve                                   | MALFORMED",
        "approve                                           | MALFORMED",
        "''                                                | MALFORMED",
    })
    void verdictOfTheLastTag(String text, Verdict expected) {
        assertEquals(expected, MathReward.parseVerdict(text));
        assertEquals(expected != Verdict.MALFORMED, MathReward.verifierValid(text));
    }

    @Test
    void verdictSpansLinesAndNullIsMalformed() {
        assertEquals(Verdict.APPROVE, MathReward.parseVerdict("check:\n<verify>\n  approve\n</verify>\n"));
        assertEquals(Verdict.MALFORMED, MathReward.parseVerdict(null));
    }

    @Test
    void solverNeedsAClosedNonEmptyBox() {
        assertTrue(MathReward.solverValid("Answer: \\boxed{5}"));
        assertTrue(MathReward.solverValid("Answer: \\boxed{wrong but boxed}"));
        assertFalse(MathReward.solverValid("Answer: 5"));
        assertFalse(MathReward.solverValid("Answer: \\boxed{5"));
        assertFalse(MathReward.solverValid("Answer: \\boxed{ }"));
        assertFalse(MathReward.solverValid(""));
    }
}
