// CheckpointRetentionTest.java — what a long headless run does with its checkpoints folder: keeps the
// newest trainer.keep_last checkpoints and still resumes from the newest; removes the temporary
// folders of saves that a kill interrupted; saves a step's checkpoint before its evaluation, so an
// evaluation that fails costs no training, and one logged before the run ended unmarked is not run
// (nor logged) again, while another run resumed from the checkpoint leaves it unmarked; refuses
// run.resume naming one of the run's own older checkpoints while newer ones are there (the next auto
// resume would mix the two lines), or an unfinished (.tmp) one; says when a resumed run has nothing
// to train. Real training of a tiny model on real files.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class CheckpointRetentionTest {
    @TempDir
    Path tmp;

    /** TrainerEndToEndTest's run in {@code out} without evaluation, one epoch a step, with {@code overrides}. */
    static RunConfig config(Path out, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out, "trainer.eval_freq=0", "ppo.epochs=1"));
        o.addAll(List.of(overrides));
        return RunConfig.parse(TrainerEndToEndTest.YAML, o);
    }

    static List<String> folders(Path checkpoints) throws IOException {
        try (Stream<Path> s = Files.list(checkpoints)) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    @Test
    void keepsTheNewestCheckpointsAndResumesFromTheLast() throws Exception {
        Path out = tmp.resolve("keep");
        Path cps = out.resolve("e2e/checkpoints");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "trainer.save_freq=1", "trainer.keep_last=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        assertEquals(List.of("step_000003", "step_000004"), folders(cps));
        try (Trainer t = Trainer.open(config(out, "trainer.steps=5", "trainer.save_freq=1", "trainer.keep_last=2"), TrainerEndToEndTest.QUIET)) {
            assertEquals(4, t.step(), "resumes the newest kept checkpoint");
            t.train();
        }
        assertEquals(List.of("step_000004", "step_000005"), folders(cps));
        // 0 keeps every one
        Path all = tmp.resolve("all");
        try (Trainer t = Trainer.open(config(all, "trainer.steps=3", "trainer.save_freq=1"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        assertEquals(List.of("step_000001", "step_000002", "step_000003"), folders(all.resolve("e2e/checkpoints")));
    }

    @Test
    void aNegativeKeepLastIsRefusedByKey() {
        var e = assertThrows(ConfigException.class, () -> config(tmp, "trainer.keep_last=-1"));
        assertTrue(e.getMessage().contains("trainer.keep_last"), e.getMessage());
    }

    @Test
    void removesTheFoldersOfInterruptedSavesAndSaysSo() throws Exception {
        Path out = tmp.resolve("tmp");
        Path cps = out.resolve("e2e/checkpoints");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        // a save of step 3 killed midway: its folder, never renamed, with some of its files
        Path stale = cps.resolve("step_000003.tmp");
        Files.createDirectories(stale.resolve("optim"));
        Files.write(stale.resolve("optim/policy.safetensors"), new byte[4096]);
        // and a keep_last deletion that failed after the state file went: a folder no listing sees any more
        Path half = cps.resolve("step_000001");
        Files.createDirectories(half.resolve("models"));
        Files.write(half.resolve("models/model.safetensors"), new byte[4096]);
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "trainer.save_freq=4"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            assertEquals(2, t.step());
            t.train();
        }
        assertEquals(List.of("step_000002", "step_000004"), folders(cps));
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("removed " + half + " (a checkpoint whose save or deletion was interrupted)"), said);
        assertTrue(said.contains("removed " + stale + " (a checkpoint whose save or deletion was interrupted)"), said);
    }

    @Test
    void aStepsCheckpointIsSavedBeforeItsEvaluation() throws Exception {
        Path out = tmp.resolve("eval");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.evalHook = () -> {
                throw new IllegalStateException("test: the retriever went away");
            };
            var e = assertThrows(IllegalStateException.class, t::train);
            assertTrue(e.getMessage().contains("retriever"), e.getMessage());
            assertEquals(2, t.step());
        }
        // step 2 was due for both: its checkpoint is there, and a resume continues from it, evaluating step 2 first
        Path cp2 = out.resolve("e2e/checkpoints/step_000002");
        assertEquals(List.of("step_000002"), folders(out.resolve("e2e/checkpoints")));
        assertFalse(Files.exists(cp2.resolve(Trainer.EVALUATED_FILE)));
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            assertEquals(2, t.step());
            t.train();  // nothing to train, but the step's evaluation was never done
        }
        assertEquals(List.of(2L), evaluatedSteps(out.resolve("e2e/metrics.jsonl")));
        assertTrue(Files.isRegularFile(cp2.resolve(Trainer.EVALUATED_FILE)));
        // done once: a further resume does not evaluate it again
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        assertEquals(List.of(2L), evaluatedSteps(out.resolve("e2e/metrics.jsonl")));
    }

    @Test
    void aPendingEvaluationIsNotRunWithEvaluationOff() throws Exception {
        // the way past an evaluation that keeps failing (an out-of-memory in its batch): resume with trainer.eval_freq=0
        Path out = tmp.resolve("pending-off");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.evalHook = () -> {
                throw new IllegalStateException("test: out of memory in the evaluation");
            };
            assertThrows(IllegalStateException.class, t::train);
        }
        Path cp2 = out.resolve("e2e/checkpoints/step_000002");
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "trainer.save_freq=2"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.evalHook = () -> {
                throw new IllegalStateException("test: the evaluation ran although trainer.eval_freq is 0");
            };
            t.train();
            assertEquals(3, t.step());
        }
        assertEquals(List.of(), evaluatedSteps(out.resolve("e2e/metrics.jsonl")));
        assertFalse(Files.exists(cp2.resolve(Trainer.EVALUATED_FILE)), "not evaluated: not marked");
        assertTrue(log.toString(StandardCharsets.UTF_8).contains("drmas: the evaluation of step 2, due when its checkpoint was saved,"
                + " was never done; trainer.eval_freq is 0: not run"), log.toString());
    }

    @Test
    void anEvaluationLoggedBeforeTheRunEndedIsNotRunAgainOnResume() throws Exception {
        Path out = tmp.resolve("logged");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        Path cp2 = out.resolve("e2e/checkpoints/step_000002"), metrics = out.resolve("e2e/metrics.jsonl");
        assertEquals(List.of(2L), evaluatedSteps(metrics));
        // killed after the evaluation's line was appended, before the checkpoint was marked evaluated
        Files.delete(cp2.resolve(Trainer.EVALUATED_FILE));
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        int[] evaluations = {0};
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"),
                new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.evalHook = () -> evaluations[0]++;
            java.util.Map<String, Double> last = t.train();
            assertTrue(last.containsKey("eval/pass@1"), "the logged evaluation is the run's last: " + last);
        }
        assertEquals(0, evaluations[0], "the evaluation of step 2 ran again");
        assertEquals(List.of(2L), evaluatedSteps(metrics), "one line of step 2's evaluation");
        assertTrue(Files.isRegularFile(cp2.resolve(Trainer.EVALUATED_FILE)), "marked now");
        assertTrue(log.toString(StandardCharsets.UTF_8).contains("the evaluation of step 2 is in " + metrics + " already"), log.toString());
        // the same checkpoint unmarked and its line gone (the run ended before the line reached the disk): evaluated again
        Files.delete(cp2.resolve(Trainer.EVALUATED_FILE));
        List<String> kept = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) if (!line.contains("\"eval/")) kept.add(line);
        Files.write(metrics, kept);
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.evalHook = () -> evaluations[0]++;
            t.train();
        }
        assertEquals(1, evaluations[0]);
        assertEquals(List.of(2L), evaluatedSteps(metrics));
    }

    @Test
    void anotherRunsCheckpointIsNotMarkedByTheRunResumedFromIt() throws Exception {
        Path out = tmp.resolve("theirs");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2", "trainer.eval_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.evalHook = () -> {
                throw new IllegalStateException("test: the evaluation failed");
            };
            assertThrows(IllegalStateException.class, t::train);
        }
        Path cp2 = out.resolve("e2e/checkpoints/step_000002");
        assertFalse(Files.exists(cp2.resolve(Trainer.EVALUATED_FILE)));
        // another run starts from it: it evaluates step 2 into its own metrics, and leaves the other run's checkpoint as it was
        Path mine = tmp.resolve("mine");
        try (Trainer t = Trainer.open(config(mine, "trainer.steps=2", "trainer.eval_freq=2", "run.resume=" + cp2), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        assertEquals(List.of(2L), evaluatedSteps(mine.resolve("e2e/metrics.jsonl")));
        assertFalse(Files.exists(cp2.resolve(Trainer.EVALUATED_FILE)), "the other run's own resume still owes its metrics the evaluation");
    }

    @Test
    void anUnfinishedCheckpointIsRefusedAsAResumePoint() throws Exception {
        Path out = tmp.resolve("unfinished");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        // a save killed after its state file, before the rename
        Path cps = out.resolve("e2e/checkpoints"), tmpCp = cps.resolve("step_000004.tmp");
        copyTree(cps.resolve("step_000002"), tmpCp);
        var e = assertThrows(IllegalArgumentException.class, () -> Trainer.open(config(out, "trainer.steps=4", "run.resume=" + tmpCp),
                TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().startsWith("run.resume: " + tmpCp + " is an unfinished checkpoint"), e.getMessage());
        assertTrue(Files.isDirectory(tmpCp), "nothing removed by the refusal");
    }

    static void copyTree(Path from, Path to) throws IOException {
        try (Stream<Path> s = Files.walk(from)) {
            for (Path p : s.toList()) {
                Path q = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(q);
                else Files.copy(p, q);
            }
        }
    }

    static List<Long> evaluatedSteps(Path metrics) throws IOException {
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        List<Long> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            var n = json.readTree(line);
            if (n.has("eval/pass@1")) steps.add(n.path("step").asLong());
        }
        return steps;
    }

    @Test
    void resumingAnOlderCheckpointOfTheSameRunIsRefusedNamingTheNewerOnes() throws Exception {
        Path out = tmp.resolve("branch");
        Path cps = out.resolve("e2e/checkpoints");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(out, "trainer.steps=6",
                "run.resume=" + cps.resolve("step_000002")), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("run.resume") && e.getMessage().contains("step_000004"), e.getMessage());
        assertEquals(List.of("step_000002", "step_000004"), folders(cps), "nothing written");
        // the newest by path is fine, and so is an older one of another run (a start point for a new run)
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "run.resume=" + cps.resolve("step_000004")), TrainerEndToEndTest.QUIET)) {
            assertEquals(4, t.step());
        }
        try (Trainer t = Trainer.open(config(tmp.resolve("other"), "trainer.steps=3", "run.resume=" + cps.resolve("step_000002")),
                TrainerEndToEndTest.QUIET)) {
            assertEquals(2, t.step());
            t.train();
        }
        // once the newer ones are moved away, going back is allowed
        Files.move(cps.resolve("step_000004"), tmp.resolve("step_000004.abandoned"));
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "run.resume=" + cps.resolve("step_000002")), TrainerEndToEndTest.QUIET)) {
            assertEquals(2, t.step());
        }
    }

    @Test
    void aDamagedNewestCheckpointIsNamedWithTheWayBackToTheOneBefore() throws Exception {
        Path out = tmp.resolve("damaged");
        Path cps = out.resolve("e2e/checkpoints");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=4", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        Path optim = cps.resolve("step_000004/optim/policy.safetensors");
        byte[] whole = Files.readAllBytes(optim);
        Files.write(optim, java.util.Arrays.copyOf(whole, whole.length / 2));  // a copy cut short
        var log = new ByteArrayOutputStream();
        var e = assertThrows(RuntimeException.class, () -> Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=2"),
                new PrintStream(log, true, StandardCharsets.UTF_8)).close());
        assertTrue(e.getMessage().contains(optim.toString()), e.getMessage());
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("the checkpoint " + cps.resolve("step_000004") + " cannot be read; to resume the one before it "
                + "(step_000002), move step_000004 out of " + cps), said);
        // doing so resumes step 2
        Files.move(cps.resolve("step_000004"), tmp.resolve("step_000004.damaged"));
        try (Trainer t = Trainer.open(config(out, "trainer.steps=6", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            assertEquals(2, t.step());
        }
    }

    @Test
    void anotherRunsCheckpointIsRefusedIntoAFolderWithNewerOnes() throws Exception {
        Path a = tmp.resolve("a"), b = tmp.resolve("b");
        try (Trainer t = Trainer.open(config(a, "trainer.steps=2", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        try (Trainer t = Trainer.open(config(b, "trainer.steps=4", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        // b's folder holds step 4: a run started there from a's step 2 would save step 4 again, or (keep_last) lose its saves
        var e = assertThrows(ConfigException.class, () -> Trainer.open(config(b, "trainer.steps=4", "trainer.keep_last=2",
                "run.resume=" + a.resolve("e2e/checkpoints/step_000002")), TrainerEndToEndTest.QUIET).close());
        assertTrue(e.getMessage().contains("(step 2) would train into " + b.resolve("e2e/checkpoints") + ", which holds newer checkpoints "
                + "(step_000004) of another run"), e.getMessage());
    }

    @Test
    void pruningNeverDeletesTheSaveOrCountsHigherSteps() throws Exception {
        Checkpoints cps = new Checkpoints(tmp.resolve("cps"));
        for (long s : new long[] {2, 3, 4, 6, 8}) {
            Files.createDirectories(cps.dir(s));
            Files.writeString(cps.dir(s).resolve(Checkpoints.STATE_FILE), "{}");
        }
        // step 4 just saved while 6 and 8 (another line) are there: the newest two up to 4 stay
        assertEquals(List.of(cps.dir(2)), cps.prune(2, 4));
        assertEquals(List.of("step_000003", "step_000004", "step_000006", "step_000008"), folders(cps.root()));
        assertEquals(List.of(), cps.prune(0, 8), "0 keeps all");
        assertEquals(List.of(cps.dir(3), cps.dir(4), cps.dir(6)), cps.prune(1, 8));
    }

    @Test
    void aResumedRunWithNothingToTrainSaysSo() throws Exception {
        Path out = tmp.resolve("done");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.save_freq=2"), TrainerEndToEndTest.QUIET)) {
            t.train();
        }
        var log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=1"), new PrintStream(log, true, StandardCharsets.UTF_8))) {
            t.train();
            assertEquals(2, t.step());
        }
        String said = log.toString(StandardCharsets.UTF_8);
        assertTrue(said.contains("nothing to train: the checkpoint is at step 2 and trainer.steps is 1"), said);
        assertFalse(said.contains("step 1/1"), said);
    }
}
