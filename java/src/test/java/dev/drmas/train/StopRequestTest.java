// StopRequestTest.java — a stop requested while training (what SIGTERM or SIGINT asks for through the
// JVM's shutdown hook: StopRequest) ends the run after the step under way with a checkpoint of that
// step, off the save schedule, and a resume then logs every step exactly once; without checkpoints
// (save_freq 0) it just stops; with two ranks (threads, the real Gloo group) a request on one rank
// stops both after the same step, both ending normally with one checkpoint, and a tool's request on one
// rank ends both with its status (75); the other signal soon after the first (a launcher passing on a
// terminal's Ctrl-C) is the same stop. The real signal, in a child JVM, is cli/StopSignalTest's.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.DistributedConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.dist.DistEnv;
import dev.drmas.dist.ProcessGroup;
import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class StopRequestTest {
    @TempDir
    Path tmp;

    static RunConfig config(Path out, String... overrides) {
        return CheckpointRetentionTest.config(out, overrides);
    }

    static List<Long> loggedSteps(Path metrics) throws Exception {
        var json = new ObjectMapper();
        List<Long> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) if (!line.isBlank()) steps.add(json.readTree(line).path("step").asLong());
        return steps;
    }

    @Test
    void aStopSavesTheStepUnderWayAndTheResumeGoesOnFromIt() throws Exception {
        Path out = tmp.resolve("one");
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=4"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.stepHook = () -> {
                if (t.step() == 2) t.requestStop();  // during step 3
            };
            t.train();
            assertEquals(3, t.step());
        }
        Path cps = out.resolve("e2e/checkpoints");
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("drmas: stopped after step 3 as requested; checkpoint " + cps.resolve("step_000003")), said);
        assertTrue(Files.isRegularFile(cps.resolve("step_000003").resolve(Checkpoints.STATE_FILE)), "the step's checkpoint, off the schedule");
        assertEquals(List.of(1L, 2L, 3L), loggedSteps(out.resolve("e2e/metrics.jsonl")));
        try (Trainer t = Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=4"), TrainerEndToEndTest.QUIET)) {
            assertEquals(3, t.step());
            t.train();
            assertEquals(6, t.step());
        }
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L, 6L), loggedSteps(out.resolve("e2e/metrics.jsonl")));
    }

    @Test
    void aToolThatCannotGoOnStopsTheRunAfterTheStepWithItsReasonAndStatus75() throws Exception {
        // what the search workflow's retriever guard does when the server stays away (RunStop): the step under way
        // finishes and is saved, and the command ends with EX_TEMPFAIL, its last word the tool's reason
        Path out = tmp.resolve("tool");
        var log = new ByteArrayOutputStream();
        List<Boolean> inStep = new ArrayList<>();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=4"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.stepHook = () -> {
                inStep.add(dev.drmas.workflow.RunStop.canStopAfterStep());
                if (t.step() == 1) dev.drmas.workflow.RunStop.requestStopAfterStep("the retriever at X failed every search");  // step 2
            };
            t.train();
            assertEquals(2, t.step());
            assertEquals(75, t.stopStatus());
        }
        assertEquals(List.of(true, true), inStep);
        assertFalse(dev.drmas.workflow.RunStop.canStopAfterStep(), "no training loop now");
        dev.drmas.workflow.RunStop.requestStopAfterStep("outside a loop: ignored");  // no loop to ask
        Path cps = out.resolve("e2e/checkpoints");
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("drmas: stopped after step 2: the retriever at X failed every search; checkpoint " + cps.resolve("step_000002")
                + ": the same command resumes it"), said);
        assertTrue(Files.isRegularFile(cps.resolve("step_000002").resolve(Checkpoints.STATE_FILE)));
    }

    @Test
    void aStopAtTheLastStepStillRunsItsEvaluation() throws Exception {
        Path out = tmp.resolve("last");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=0", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.stepHook = () -> {
                if (t.step() == 1) t.requestStop();  // during the last step, due for evaluation
            };
            t.train();
        }
        var json = new ObjectMapper();
        boolean evaluated = false;
        for (String line : Files.readAllLines(out.resolve("e2e/metrics.jsonl"))) {
            var n = json.readTree(line);
            if (n.path("step").asLong() == 2 && n.has("eval/pass@1")) evaluated = true;
        }
        assertTrue(evaluated, "the last step's evaluation, which no resume would redo");
    }

    @Test
    void aStopDuringAnEvaluationEndsAfterItWithoutAnotherStep() throws Exception {
        Path out = tmp.resolve("during-eval");
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=4", "trainer.eval_freq=2"),
                new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.evalHook = t::requestStop;  // during step 2's evaluation
            t.train();
            assertEquals(2, t.step());
        }
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("drmas: stopped after step 2 as requested"), said);
        assertEquals(List.of("step_000002"), CheckpointRetentionTest.folders(out.resolve("e2e/checkpoints")));
        // the step's evaluation ran before the stop's save: the resume does not run it again
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "trainer.save_freq=4", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        assertEquals(List.of(2L, 3L), CheckpointRetentionTest.evaluatedSteps(out.resolve("e2e/metrics.jsonl")));
    }

    @Test
    void withoutCheckpointsAStopJustEnds() throws Exception {
        Path out = tmp.resolve("none");
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=5", "trainer.save_freq=0"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.stepHook = () -> {
                if (t.step() == 1) t.requestStop();
            };
            t.train();
            assertEquals(2, t.step());
        }
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("drmas: stopped after step 2 as requested; no checkpoint (trainer.save_freq is 0)"), said);
        assertFalse(Files.exists(out.resolve("e2e/checkpoints/step_000002")));
    }

    /** Two ranks (threads, the real Gloo group) train cfg; {@code onRank1} is rank 1's step hook. Each rank's [step, status]. */
    private List<long[]> twoRanks(Path out, java.util.function.Consumer<Trainer> onRank1, List<String> logs, String... overrides) throws Exception {
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        var dc = new DistributedConfig(DistributedConfig.Backend.GLOO, 60, 1, 1, false);
        ExecutorService ex = Executors.newFixedThreadPool(2);
        List<String> errors = new ArrayList<>();
        List<long[]> results = new ArrayList<>();
        try {
            List<Future<Object>> fs = new ArrayList<>();
            List<ByteArrayOutputStream> said = List.of(new ByteArrayOutputStream(), new ByteArrayOutputStream());
            for (int r = 0; r < 2; r++) {
                var env = new DistEnv("127.0.0.1", port, r, 2, r);
                RunConfig cfg = config(out, overrides);
                int rank = r;
                fs.add(ex.submit(() -> {
                    var log = new PrintStream(said.get(rank), true, StandardCharsets.UTF_8);
                    try (var pg = new ProcessGroup(env, dc, false); Trainer t = Trainer.open(cfg, log, pg)) {
                        if (rank == 1) t.stepHook = () -> onRank1.accept(t);
                        t.train();
                        return new long[] {t.step(), t.stopStatus()};
                    } catch (Exception e) {
                        return e.toString();
                    }
                }));
            }
            for (var f : fs) {
                Object o = f.get(140, TimeUnit.SECONDS);
                if (o instanceof long[] l) results.add(l);
                else errors.add((String) o);
            }
            for (var b : said) logs.add(b.toString(StandardCharsets.UTF_8));
        } finally {
            ex.shutdownNow();
        }
        assertEquals(List.of(), errors);
        return results;
    }

    @Test
    void theOtherSignalSoonAfterTheFirstIsTheSameStop() {
        // Ctrl-C on `drmas launch` or `drmas experiment`: the terminal's SIGINT reaches the child, and the parent,
        // stopping too, sends it SIGTERM: one stop (saved), not a second request to stop at once
        long ms = 1_000_000L;
        assertTrue(StopRequest.echo(2, 15, 100 * ms, false));
        assertTrue(StopRequest.echo(15, 2, 0, false));
        assertFalse(StopRequest.echo(15, 15, 100 * ms, false), "the same signal again: at once (StopSignalTest)");
        assertFalse(StopRequest.echo(2, 2, 100 * ms, false), "Ctrl-C twice: at once");
        assertFalse(StopRequest.echo(2, 15, StopRequest.ECHO_NANOS, false), "the other one later: a second request");
        // a rank of drmas launch: a scheduler's (or timeout's) SIGTERM to the whole group, then the launcher's
        assertTrue(StopRequest.echo(15, 15, 100 * ms, true));
        assertFalse(StopRequest.echo(15, 15, StopRequest.ECHO_NANOS, true));
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void aStopOnOneRankStopsBothAfterTheSameStep() throws Exception {
        Path out = tmp.resolve("shared");
        List<long[]> ranks = twoRanks(out, t -> {
            if (t.step() == 1) t.requestStop();  // rank 1 alone, during step 2
        }, new ArrayList<>(), "run.threads=1", "trainer.steps=5", "trainer.save_freq=4");
        assertEquals(List.of(2L, 2L), ranks.stream().map(r -> r[0]).toList(), "both ranks stop after step 2");
        assertEquals(List.of(0L, 0L), ranks.stream().map(r -> r[1]).toList(), "no signal, no tool: status 0");
        Path cps = out.resolve("e2e/checkpoints");
        assertTrue(Files.isRegularFile(cps.resolve("step_000002").resolve(Checkpoints.STATE_FILE)));
        assertEquals(List.of("step_000002"), CheckpointRetentionTest.folders(cps));
    }

    @Test
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void aToolStopOnOneRankEndsEveryRankWithStatus75() throws Exception {
        // rank 1's retriever gone: rank 0, whose own tools were fine, ends with 75 too (a scheduler or launcher that
        // reads any rank's status sees "try again"), and its log, the one users read, says which rank asked
        Path out = tmp.resolve("tool2");
        List<String> logs = new ArrayList<>();
        List<long[]> ranks = twoRanks(out, t -> {
            if (t.step() == 1) t.requestToolStop("the retriever at X failed every search");  // during step 2
        }, logs, "run.threads=1", "trainer.steps=5", "trainer.save_freq=4");
        assertEquals(List.of(2L, 2L), ranks.stream().map(r -> r[0]).toList());
        assertEquals(List.of(75L, 75L), ranks.stream().map(r -> r[1]).toList(), "every rank ends with the tool's status");
        Path cp = out.resolve("e2e/checkpoints/step_000002");
        assertTrue(logs.get(0).contains("drmas: stopped after step 2: a tool of rank 1 could not go on (rank 1's output says why); checkpoint "
                + cp + ": the same command resumes it"), logs.get(0));
        assertTrue(logs.get(1).contains("drmas: stopped after step 2: the retriever at X failed every search"), logs.get(1));
        assertTrue(Files.isRegularFile(cp.resolve(Checkpoints.STATE_FILE)));
    }
}
