// AnswerGraderTest.java — a grader command (orchestra.options.grader) scores answers in place of a
// workflow's check, through configs/reward/verl_reward.py and a verl-style reward function written
// here (real python3 processes; skipped with a message where there is no python3): the scores are
// the function's, it gets verl's four arguments, its prints do not reach the protocol, and a grader
// that answers out of protocol, ends, hangs or is not there stops the run naming the command, the
// request and the task.
package dev.drmas.workflow;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.env.Task;
import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.function.Function;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

public class AnswerGraderTest {
    @TempDir
    static Path tmp;
    static Path rewardFile;
    static final Path BRIDGE = Path.of("..", "configs", "reward", "verl_reward.py");

    static final String REWARD = """
            import time
            print("a reward module that prints when imported")

            def compute_score(data_source, solution_str, ground_truth, extra_info=None):
                print("and when called")
                if solution_str == "hang":
                    time.sleep(60)
                if solution_str == "die":
                    raise SystemExit(3)
                if solution_str == "dict":
                    return {"score": 0.5, "acc": False}
                return 1.0 if str(ground_truth) in solution_str else 0.0

            def shape(data_source, solution_str, ground_truth, extra_info=None):
                s = 0
                s += 5000 if solution_str == "é \\"q\\"\\nx" else 0
                s += 1000 if extra_info["task_id"] == "nq/7" else 0
                s += 100 if isinstance(ground_truth, dict) and ground_truth["target"] == extra_info["answers"] else 0
                s += 10 if data_source == "nq" else 0
                s += len(extra_info["answers"])
                return s
            """;

    public static boolean hasPython() {
        String path = System.getenv("PATH");
        if (path == null) return false;
        for (String d : path.split(File.pathSeparator)) if (!d.isEmpty() && Files.isExecutable(Path.of(d, "python3"))) return true;
        return false;
    }

    @BeforeAll
    static void write() throws Exception {
        rewardFile = tmp.resolve("reward.py");
        Files.writeString(rewardFile, REWARD);
    }

    static final AnswerGrader.Check NEVER = (text, task) -> {
        throw new AssertionError("the built-in check ran where the command grades");
    };

    static AnswerGrader grader(double timeoutS, Function<Task, Object> truth, String... command) {
        assumeTrue(hasPython(), "no python3 on PATH: the grader command is not tested here");
        return AnswerGrader.of(new GraderOptions(List.of(command), timeoutS), NEVER, truth);
    }

    static AnswerGrader verl(String function) {
        return grader(30, Task::answer, "python3", BRIDGE.toString(), rewardFile.toString(), function);
    }

    static final Task T = new Task("t1", "What is 6 * 7?", "42");

    @Test
    void theScoresAreTheRewardFunctions() {
        try (AnswerGrader g = verl("compute_score")) {
            assertTrue(g.external());
            assertEquals(1.0, g.score("so \\boxed{42}", T));
            assertEquals(0.0, g.score("so \\boxed{41}", T));
            assertEquals(0.5, g.score("dict", T), "a dict's score");
            for (int i = 0; i < 200; i++) assertEquals(i % 2, g.score(i % 2 == 1 ? "42" : "none", T), "request " + i);
        }
    }

    @Test
    void itGetsVerlsFourArguments() {
        // search's truth as Search-R1's files give it to verl; a reply with a quote, a newline and a non-ASCII letter
        Task nq = new Task("nq/7", "who?", "Ada", List.of("Ada Lovelace"), "nq");
        try (AnswerGrader g = grader(30, t -> Map.of("target", t.golds()), "python3", BRIDGE.toString(), rewardFile.toString(), "shape")) {
            assertEquals(5000 + 1000 + 100 + 10 + 2, g.score("é \"q\"\nx", nq));
            assertEquals(1000 + 100 + 10 + 2, g.score("other", nq));
        }
    }

    @Test
    void withoutACommandTheWorkflowsCheckGrades() {
        List<String> seen = new ArrayList<>();
        try (AnswerGrader g = AnswerGrader.of(GraderOptions.defaults(), (text, t) -> {
            seen.add(text);
            return 0.25;
        }, Task::answer)) {
            assertFalse(g.external());
            assertEquals(0.25, g.score("x", T));
        }
        assertEquals(List.of("x"), seen);
    }

    @Test
    void anAnswerOutOfProtocolNamesTheLine() {
        // a grader that prints to stdout: its line is not taken for a score
        try (AnswerGrader g = grader(30, Task::answer, "python3", "-c",
                "import sys\nfor line in sys.stdin:\n    print('checking', flush=True)")) {
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("x", T));
            assertTrue(e.getMessage().startsWith("orchestra.options.grader: `python3 -c import sys"), e.getMessage());
            assertTrue(e.getMessage().contains("request 1 (task 't1'): it answered 'checking', where one line {\"score\": X}"), e.getMessage());
            // the grader is stopped; later calls fail with the same message, not a second grader
            assertEquals(e.getMessage(), assertThrows(AnswerGrader.GraderException.class, () -> g.score("y", T)).getMessage());
        }
        for (String bad : List.of("{\"score\": \"1\"}", "{\"score\": NaN}", "1.0", "{\"acc\": 1}")) {
            try (AnswerGrader g = grader(30, Task::answer, "python3", "-c",
                    "import sys\nfor line in sys.stdin:\n    print('" + bad.replace("\"", "\\\"") + "', flush=True)")) {
                var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("x", T), bad);
                assertTrue(e.getMessage().contains("it answered '" + bad + "'"), e.getMessage());
            }
        }
    }

    @Test
    void aGraderThatEndsOrHangsStopsTheRun() {
        try (AnswerGrader g = verl("compute_score")) {
            assertEquals(1.0, g.score("42", T));
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("die", T));
            assertTrue(e.getMessage().contains("request 2 (task 't1'): the grader ended before answering (exited with status 3)"), e.getMessage());
        }
        try (AnswerGrader g = grader(1, Task::answer, "python3", BRIDGE.toString(), rewardFile.toString(), "compute_score")) {
            long t0 = System.nanoTime();
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("hang", T));
            assertTrue((System.nanoTime() - t0) / 1e9 < 30, "not the 60 s sleep");
            assertTrue(e.getMessage().contains("request 1 (task 't1'): no answer within timeout_s (1 s); the grader was stopped"), e.getMessage());
        }
        // a function that is not in the file: the bridge says so on stderr and ends
        try (AnswerGrader g = verl("no_such_function")) {
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("42", T));
            assertTrue(e.getMessage().contains("the grader ended before answering (exited with status 1)"), e.getMessage());
        }
    }

    @Test
    void aProgramThatIsNotThereIsAConfigError() {
        var e = assertThrows(ConfigException.class,
                () -> AnswerGrader.of(new GraderOptions(List.of("no-such-grader-program", "x"), 5), NEVER, Task::answer));
        assertTrue(e.getMessage().contains("orchestra.options.grader.command"), e.getMessage());
        assertTrue(e.getMessage().contains("its program 'no-such-grader-program' is not on PATH"), e.getMessage());
        var f = assertThrows(ConfigException.class,
                () -> AnswerGrader.of(new GraderOptions(List.of(tmp.resolve("none.sh").toString()), 5), NEVER, Task::answer));
        assertTrue(f.getMessage().contains("is not there"), f.getMessage());
    }

    @Test
    void closeEndsTheGrader() throws Exception {
        AnswerGrader g = verl("compute_score");
        assertEquals(1.0, g.score("42", T));
        assertEquals(1, graders(), "one grader, started on first use");
        g.close();
        assertEquals(0, graders(), "the grader ended with close");
    }

    /** This JVM's live child processes running the bridge on this test's reward file. */
    static long graders() {
        return ProcessHandle.current().children().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().map(c -> c.contains(rewardFile.toString())).orElse(false)).count();
    }
}
