// MathRewardTest.java — the episode reward on the last box, the verifier's verdict (case,
// blanks, last tag wins, malformed), solver validity, and row scores with the default and a
// configured invalid-action penalty, all against hand-written expectations; the math and proposer
// workloads' rewards accept any of a task's answers.
package dev.drmas.workflow.math;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.TagsTest;
import dev.drmas.agent.Verdict;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class MathRewardTest {
    @Test
    void theWorkloadsRewardAnyOfTheTasksAnswers() {
        // a JSONL list answer: the first is the answer, the rest aliases; each of them scores
        Task t = new Task("t", "q", "\\frac{\\pi}{2}", List.of("\\pi/2"));
        for (String config : List.of("math-toy-drmas.yaml", "math-toy-proposer-aggregator.yaml")) {
            RunConfig cfg = RunConfig.load(Path.of("..", "configs", config), List.of());
            try (Workload w = Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()))) {
                for (String action : List.of("\\boxed{\\pi/2}", "\\boxed{\\dfrac{\\pi}{2}}")) {
                    assertEquals(1.0, w.reward(t, new Episode(0, 0, "q", t.answer(), List.of(), action, true, Map.of())), config + ": " + action);
                }
                assertEquals(0.0, w.reward(t, new Episode(0, 0, "q", t.answer(), List.of(), "\\boxed{\\pi}", true, Map.of())), config);
            }
        }
        assertTrue(Demonstrations.verifierLabel(t, "so \\boxed{\\pi/2}"), "the demonstrations' verifier approves what the reward pays");
    }

    @Test
    void aWorkedSolutionAsTheTruthCountsByItsLastBox() {
        // MATH's "solution" field as the answer: the Dr. MAS reference reward reads the truth's box
        String solution = "Adding, $5 + 7 = \\boxed{12}$.";
        assertEquals(1.0, MathReward.episodeReward("so \\boxed{12}", solution));
        assertEquals(0.0, MathReward.episodeReward("so \\boxed{13}", solution));
        Task t = new Task("t", "q", "ignored \\boxed{0}", List.of("We get \\boxed{\\frac{1}{2}}."));
        assertEquals(1.0, MathReward.episodeReward("\\boxed{0.5}", t));
        assertEquals(1.0, MathReward.episodeReward("\\boxed{0}", t));
        Task worked = new Task("w", "q", solution);
        assertTrue(Demonstrations.verifierLabel(worked, Demonstrations.solverResponse(worked, true, new SplittableRandom(1))),
                "a right demonstration boxes the solution's answer");
        assertFalse(Demonstrations.verifierLabel(worked, Demonstrations.solverResponse(worked, false, new SplittableRandom(1))));
    }

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
        "<verify>reject</verify> then <verify>maybe</verify> | REJECT",
        "<verify>reject</verify> Step 3 is wrong. (Verdict inside <verify> </verify>.) | REJECT",
        "<verify>approve</verify> <verify></verify> <verify>maybe</verify> | APPROVE",
        "<verify>maybe</verify> <verify></verify>          | MALFORMED",
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

    @Test
    void theVerifyTagIsReadAsTheRegexLoopReadIt() {
        // the pattern MathReward used before its one-pass lookup, spelled as it was
        Pattern old = Pattern.compile("<\\s*verify\\s*>(.*?)<\\s*/\\s*verify\\s*>", Pattern.CASE_INSENSITIVE | Pattern.DOTALL);
        TagsTest.assertAsRegexLoop(MathReward.VERIFY_TAG, old, 20000, 11);
    }

    @Test
    @Timeout(value = 20, unit = TimeUnit.SECONDS, threadMode = Timeout.ThreadMode.SEPARATE_THREAD)  // a hang guard only: the regex loop took minutes here
    void aMegabyteOfUnclosedVerifyTagsIsMalformed() {
        String reply = TagsTest.repeated("<verify> approve ", 1 << 20);
        assertEquals(Verdict.MALFORMED, MathReward.parseVerdict(reply));
        assertEquals(Verdict.REJECT, MathReward.parseVerdict(reply + "</verify>\n<Verify> reject </ verify>"));
    }

    @Test
    void rejectCjkMakesAVerifierReplyWithChineseInvalidButNotASolverReply() {
        // the Dr. MAS reference checks its math verifier's reply (general_projection) for U+4E00–U+9FFF,
        // not its solver's (math_projection); off by default
        String verdict = "<verify>approve</verify>", chinese = "<verify>approve</verify> 正确", solved = "\\boxed{42}";
        RunConfig on = RunConfig.load(Path.of("..", "configs", "math-toy-drmas.yaml"), List.of("orchestra.options.reject_cjk=true"));
        try (Workload w = Workflows.open(on, new PrintStream(new ByteArrayOutputStream()))) {
            var verifier = w.team().agent("verifier");
            var solver = w.team().agent("solver");
            assertTrue(verifier.isValid(verdict));
            assertFalse(verifier.isValid(chinese), "a Chinese character");
            assertFalse(verifier.isValid("<verify>approve</verify> \u4e00"), "U+4E00, the range's first");
            assertFalse(verifier.isValid("<verify>reject</verify>\u9fff"), "U+9FFF, its last");
            assertTrue(verifier.isValid("<verify>approve</verify> \u4dff\ua000 ひらがな 한국어"), "outside the range: valid");
            assertFalse(verifier.isValid("正确"), "the verdict check still applies");
            assertTrue(solver.isValid(solved + " 答案"), "the solver is not checked for Chinese");
            assertFalse(solver.isValid("答案"), "its box check still applies");
        }
        RunConfig off = RunConfig.load(Path.of("..", "configs", "math-toy-drmas.yaml"), List.of());
        try (Workload w = Workflows.open(off, new PrintStream(new ByteArrayOutputStream()))) {
            assertTrue(w.team().agent("verifier").isValid(chinese), "off by default");
        }
        var e = assertThrows(dev.drmas.config.ConfigException.class, () -> RunConfig.load(Path.of("..", "configs", "math-toy-drmas.yaml"),
                List.of("orchestra.options.reject_cjk=sometimes")));
        assertTrue(e.getMessage().contains("orchestra.options.reject_cjk: expected true or false"), e.getMessage());
    }
}
