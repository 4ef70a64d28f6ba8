// WorkflowGraderTest.java — how each shipped workflow hands its final answers to a grader command
// (real python3 through configs/reward/verl_reward.py; skipped with a message without one): math and
// proposer-aggregator send the task's answer string as ground_truth and take the score as the reward
// (the proposer's correct_rate too); search sends {"target": [answers]} and scores an episode the
// verifier did not approve 0 without asking; a config with a bad grader is refused naming its key.
package dev.drmas.workflow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.agent.Episode;
import dev.drmas.agent.Message;
import dev.drmas.agent.Step;
import dev.drmas.agent.Turn;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class WorkflowGraderTest {
    @TempDir
    Path tmp;

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    /** A reward function that says what it was given: 1 for the expected truth's shape and the reply "right". */
    private RunConfig config(String configFile, String truthShape, String... more) throws Exception {
        assumeTrue(AnswerGraderTest.hasPython(), "no python3 on PATH: the grader command is not tested here");
        Path reward = tmp.resolve("reward.py");
        Files.writeString(reward, """
                def string_truth(data_source, solution_str, ground_truth, extra_info=None):
                    ok = isinstance(ground_truth, str) and ground_truth == extra_info["answers"][0]
                    return 1.0 if ok and solution_str == "right" else 0.25 if ok else -1.0

                def target_truth(data_source, solution_str, ground_truth, extra_info=None):
                    ok = isinstance(ground_truth, dict) and ground_truth["target"] == extra_info["answers"]
                    return 1.0 if ok and solution_str == "right" else 0.25 if ok else -1.0
                """);
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + tmp.resolve("out"),
                "orchestra.options.grader.command=[python3, " + AnswerGraderTest.BRIDGE + ", " + reward + ", " + truthShape + "]"));
        o.addAll(List.of(more));
        return RunConfig.load(Path.of("..", "configs", configFile), o);
    }

    static Episode episode(String action, boolean approved, int steps) {
        List<Step> s = new ArrayList<>();
        for (int i = 0; i < steps; i++) s.add(new Step(0, i, 0, List.of(new Message("user", "q")), new Turn(i == 0 ? "right" : "wrong", null), true));
        return new Episode(0, 0, "q", "a", s, action, approved, Map.of());
    }

    @Test
    void mathSendsTheAnswerStringAndTakesTheScore() throws Exception {
        try (Workload w = Workflows.open(config("math-toy-drmas.yaml", "string_truth"), QUIET)) {
            Task t = w.test().getFirst();
            assertEquals(1.0, w.reward(t, episode("right", true, 2)));
            assertEquals(0.25, w.reward(t, episode("\\boxed{" + t.answer() + "}", false, 2)), "the grader's score, not the built-in 1");
        }
    }

    @Test
    void proposerGradesTheFinalReplyAndEachProposal() throws Exception {
        try (Workload w = Workflows.open(config("math-toy-proposer-aggregator.yaml", "string_truth"), QUIET)) {
            Task t = w.test().getFirst();
            assertEquals(1.0, w.reward(t, episode("right", false, 4)));
            // three proposals: the first "right" (1.0), two "wrong" (0.25 each)
            Map<String, Double> sums = w.episodeSums(List.of(t), List.of(episode("right", false, 4)));
            assertEquals((1.0 + 0.25 + 0.25) / 3, sums.get("proposer/correct_rate"), 1e-12);
        }
    }

    @Test
    void searchSendsTheTargetsAndGradesOnlyApprovedEpisodes() throws Exception {
        try (Workload w = Workflows.open(config("search-toy-drmas.yaml", "target_truth"), QUIET)) {
            Task t = w.test().getFirst();
            assertEquals(1.0, w.reward(t, episode("right", true, 3)));
            assertEquals(0.25, w.reward(t, episode("<answer>" + t.answer() + "</answer>", true, 3)));
            assertEquals(0.0, w.reward(t, episode("right", false, 3)), "not approved: 0, as without a grader");
        }
    }

    @Test
    void aBadGraderIsRefusedNamingItsKey() throws Exception {
        var e = assertThrows(ConfigException.class, () -> Workflows.open(config("math-toy-drmas.yaml", "string_truth",
                "orchestra.options.grader.command=[no-such-program-here]"), QUIET).close());
        assertTrue(e.getMessage().contains("orchestra.options.grader.command"), e.getMessage());
        var f = assertThrows(ConfigException.class, () -> config("math-toy-drmas.yaml", "string_truth", "orchestra.options.grader.timeout_s=0"));
        assertTrue(f.getMessage().contains("orchestra.options.grader.timeout_s"), f.getMessage());
    }
}
