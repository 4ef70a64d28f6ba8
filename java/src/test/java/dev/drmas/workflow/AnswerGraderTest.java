// AnswerGraderTest.java — a grader command (orchestra.options.grader) scores answers in place of a
// workflow's check, through configs/reward/verl_reward.py and a verl-style reward function written
// here (real python3 processes; skipped with a message where there is no python3): the scores are
// the function's, it gets verl's four arguments, nothing it or its subprocesses print reaches the
// protocol, --on-error scores a raising function; a grader that is not there or not ready is a config
// error when the workload opens; one that answers out of protocol, ends, stops reading or hangs stops
// the run naming the command, the request and the task, and is stopped with the processes it started.
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
            import os, subprocess, time
            print("a reward module that prints when imported")

            def compute_score(data_source, solution_str, ground_truth, extra_info=None):
                print("and when called")
                os.write(1, b"and on its descriptor 1\\n")
                subprocess.run(["echo", "and from a subprocess"])
                if solution_str == "raise":
                    raise ValueError("unbalanced box")
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
        return AnswerGrader.onPath("python3");
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

    /** A grader in Python's -c whose loop over the requests is {@code body} (after its ready line). */
    static AnswerGrader inline(double timeoutS, String body) {
        return grader(timeoutS, Task::answer, "python3", "-c", "import sys\nprint('{\"ready\": true}', flush=True)\n" + body);
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
        try (AnswerGrader g = inline(30, "for line in sys.stdin:\n    print('checking', flush=True)")) {
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("x", T));
            assertTrue(e.getMessage().startsWith("orchestra.options.grader: `python3 -c import sys"), e.getMessage());
            assertTrue(e.getMessage().contains("request 1 (task 't1'): it answered 'checking', where one line {\"score\": X}"), e.getMessage());
            // the grader is stopped; later calls fail with the same message, not a second grader
            assertEquals(e.getMessage(), assertThrows(AnswerGrader.GraderException.class, () -> g.score("y", T)).getMessage());
        }
        for (String bad : List.of("{\"score\": \"1\"}", "{\"score\": NaN}", "1.0", "{\"acc\": 1}")) {
            try (AnswerGrader g = inline(30, "for line in sys.stdin:\n    print('" + bad.replace("\"", "\\\"") + "', flush=True)")) {
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
        // an exception in the function ends the grader, as in verl
        try (AnswerGrader g = verl("compute_score")) {
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("raise", T));
            assertTrue(e.getMessage().contains("request 1 (task 't1'): the grader ended before answering (exited with status 1)"), e.getMessage());
        }
    }

    @Test
    void withOnErrorARaisingFunctionScoresThatScore() {
        try (AnswerGrader g = grader(30, Task::answer, "python3", BRIDGE.toString(), "--on-error", "0", rewardFile.toString(), "compute_score")) {
            assertEquals(0.0, g.score("raise", T));
            assertEquals(1.0, g.score("42", T), "and goes on");
        }
    }

    @Test
    void aGraderThatIsNotReadyIsAConfigErrorWhenItOpens() {
        assumeTrue(hasPython(), "no python3 on PATH");
        // a function that is not in the file, a file that is not there: the bridge says so on stderr and ends
        for (List<String> c : List.of(List.of(rewardFile.toString(), "no_such_function"), List.of(tmp.resolve("none.py").toString(), "f"))) {
            List<String> cmd = new ArrayList<>(List.of("python3", BRIDGE.toString()));
            cmd.addAll(c);
            var e = assertThrows(ConfigException.class, () -> AnswerGrader.of(new GraderOptions(cmd, 30), NEVER, Task::answer));
            assertTrue(e.getMessage().contains("orchestra.options.grader.command"), e.getMessage());
            assertTrue(e.getMessage().contains("ended before it was ready (exited with status 1)"), e.getMessage());
        }
        var f = assertThrows(ConfigException.class, () -> AnswerGrader.of(new GraderOptions(List.of("python3", "-c", "print('hello')"), 30),
                NEVER, Task::answer));
        assertTrue(f.getMessage().contains("said 'hello' where its first line must be {\"ready\": true}"), f.getMessage());
        var h = assertThrows(ConfigException.class, () -> AnswerGrader.of(new GraderOptions(List.of("python3", "-c",
                "import time\ntime.sleep(60)"), 1), NEVER, Task::answer));
        assertTrue(h.getMessage().contains("did not say it was ready within timeout_s (1 s)"), h.getMessage());
    }

    @Test
    void aGraderThatStopsReadingTimesOutOnALongRequest() {
        // the request (2 MB) fills the pipe while the grader sleeps: timeout_s holds for the write too
        try (AnswerGrader g = inline(2, "import time\ntime.sleep(60)")) {
            long t0 = System.nanoTime();
            var e = assertThrows(AnswerGrader.GraderException.class, () -> g.score("x".repeat(2 << 20), T));
            assertTrue((System.nanoTime() - t0) / 1e9 < 20, "bounded by timeout_s, not the sleep");
            assertTrue(e.getMessage().contains("no answer within timeout_s (2 s)"), e.getMessage());
        }
    }

    @Test
    void aFailedGraderIsStoppedWithTheProcessesItStarted() throws InterruptedException {
        // a shell that runs the bridge as its child: the child goes too, not only the shell
        try (AnswerGrader g = grader(1, Task::answer, "sh", "-c",
                "python3 " + BRIDGE + " " + rewardFile + " compute_score; true")) {
            assertEquals(1.0, g.score("42", T));
            assertEquals(2, graders(), "the shell and its python");
            assertThrows(AnswerGrader.GraderException.class, () -> g.score("hang", T));
            assertEquals(0, gradersAfterKill(), "the shell's python child was stopped with it");
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
    void theBridgeOutlivesTheSignalsThatStopARunGracefully() throws Exception {
        // Ctrl-C (SIGINT to the terminal's process group) or a scheduler's SIGTERM reaches the grader too, while
        // drmas finishes the step under way before saving: the bridge ignores both and ends with its stdin
        try (AnswerGrader g = verl("compute_score")) {
            assertEquals(1.0, g.score("42", T));
            ProcessHandle grader = ProcessHandle.current().descendants()
                    .filter(p -> p.info().commandLine().map(c -> c.contains(rewardFile.toString())).orElse(false)).findFirst().orElseThrow();
            for (String sig : List.of("-INT", "-TERM")) assertEquals(0, new ProcessBuilder("kill", sig, Long.toString(grader.pid())).start().waitFor());
            Thread.sleep(300);
            assertTrue(grader.isAlive(), "the signals did not end the grader");
            assertEquals(0.0, g.score("41", T));
        }
    }

    @Test
    void closeEndsTheGrader() throws Exception {
        AnswerGrader g = verl("compute_score");
        assertEquals(1.0, g.score("42", T));
        assertEquals(1, graders(), "one grader, started when it opened");
        g.close();
        assertEquals(0, graders(), "the grader ended with close");
    }

    /**
     * {@link #graders()} once none is left, or after five seconds: a SIGKILL is sent, not waited for,
     * so a killed process may still be seen alive for a moment.
     */
    static long gradersAfterKill() throws InterruptedException {
        long n = graders();
        for (int i = 0; i < 50 && n > 0; i++) {
            Thread.sleep(100);
            n = graders();
        }
        return n;
    }

    /** This JVM's live descendants whose command line names this test's reward file. */
    static long graders() {
        return ProcessHandle.current().descendants().filter(ProcessHandle::isAlive)
                .filter(p -> p.info().commandLine().map(c -> c.contains(rewardFile.toString())).orElse(false)).count();
    }
}
