// StopSignalTest.java — SIGTERM (a scheduler's preemption, scancel, kill) to a real `drmas train` child
// JVM mid-run: it finishes the step under way, saves its checkpoint off the save schedule, says so and
// exits 143 (as a process SIGTERM killed, which schedulers expect); a second SIGTERM stops at once without
// saving, except in a rank of a launcher, where a second one within moments is the launcher's echo of a
// signal to the whole group; to `drmas launch --nproc 2`: the launcher passes
// the stop to its ranks and waits, the two ranks stop after the same step with one checkpoint of it,
// and the launcher does not report them as failed. Before, both lost every step since the last
// checkpoint (the launcher even SIGKILLed its ranks at once).
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class StopSignalTest {
    @TempDir
    Path dir;

    static final Pattern STOPPED = Pattern.compile("drmas: stopped after step (\\d+) as requested; checkpoint (\\S+): the same command resumes it");

    Path config() throws Exception {
        Path p = dir.resolve("run.yaml");
        if (!Files.exists(p)) Files.writeString(p, RunFolderTest.YAML.replace("name: lock", "name: stop"));
        return p;
    }

    Path run() {
        return dir.resolve("runs/stop");
    }

    static List<Long> loggedSteps(Path metrics) throws Exception {
        if (!Files.isRegularFile(metrics)) return List.of();
        var json = new ObjectMapper();
        List<Long> steps = new ArrayList<>();
        for (String line : Files.readAllLines(metrics)) {
            if (!line.isBlank() && line.endsWith("}")) steps.add(json.readTree(line).path("step").asLong());
        }
        return steps;
    }

    List<String> checkpoints() throws Exception {
        try (Stream<Path> s = Files.list(run().resolve("checkpoints"))) {
            return s.map(p -> p.getFileName().toString()).sorted().toList();
        }
    }

    /** Whether the child runs as a rank of `drmas launch` would (LaunchCommand.WATCH_ENV set). */
    boolean underLauncher;

    /** Starts drmas with {@code args}, sends SIGTERM once metrics.jsonl has two steps, and returns its exit and output. */
    Child.Result terminateAfterTwoSteps(String... args) throws Exception {
        return terminateAfterTwoSteps(1, args);
    }

    /** As above with {@code signals} SIGTERMs, each after the run has said that it stops (the first: "stop requested"). */
    Child.Result terminateAfterTwoSteps(int signals, String... args) throws Exception {
        ProcessBuilder pb = new ProcessBuilder(Child.command(args)).directory(dir.toFile()).redirectErrorStream(true);
        if (underLauncher) pb.environment().put(LaunchCommand.WATCH_ENV, "1");  // as a rank of drmas launch (its stdin our pipe)
        Path out = dir.resolve("out.txt");
        pb.redirectOutput(out.toFile());
        Process p = pb.start();
        try {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(90);
            while (loggedSteps(run().resolve("metrics.jsonl")).size() < 2) {
                assertTrue(p.isAlive(), "drmas ended before the signal: " + Files.readString(out));
                assertTrue(System.nanoTime() < deadline, "no two steps within 90 s: " + Files.readString(out));
                Thread.sleep(50);
            }
            for (int i = 0; i < signals; i++) {
                while (i > 0 && !Files.readString(out).contains("stop requested") && p.isAlive()) Thread.sleep(10);
                p.toHandle().destroy();  // SIGTERM (Process.destroy would also close the pipes)
            }
            assertTrue(p.waitFor(120, TimeUnit.SECONDS), "drmas did not end within 120 s of SIGTERM: " + Files.readString(out));
            return new Child.Result(p.exitValue(), Files.readString(out, StandardCharsets.UTF_8), "");
        } finally {
            p.destroyForcibly();
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void sigtermSavesTheStepUnderWayAndExits143() throws Exception {
        Child.Result r = terminateAfterTwoSteps("train", config().toString(), "run.output_dir=" + dir.resolve("runs"),
                "trainer.steps=500", "trainer.save_freq=400");
        assertEquals(143, r.exit(), r.out());
        assertTrue(r.out().contains("drmas: stop requested (SIGTERM): finishing step"), r.out());
        Matcher m = STOPPED.matcher(r.out());
        assertTrue(m.find(), r.out());
        long n = Long.parseLong(m.group(1));
        assertTrue(n >= 2, r.out());
        assertEquals(List.of(String.format("step_%06d", n)), checkpoints(), r.out());
        List<Long> want = new ArrayList<>();
        for (long s = 1; s <= n; s++) want.add(s);
        assertEquals(want, loggedSteps(run().resolve("metrics.jsonl")), "every step up to the checkpoint, once");
    }

    /** Two SIGTERMs to `drmas train` with steps of a second or so (a larger model, longer answers): the second comes while the first's step runs. */
    Child.Result terminateTwiceDuringALongStep() throws Exception {
        return terminateAfterTwoSteps(2, "train", config().toString(), "run.output_dir=" + dir.resolve("runs"),
                "trainer.steps=500", "trainer.save_freq=400", "models.policy.size.hidden=256", "models.policy.size.layers=4",
                "models.policy.size.intermediate=512", "rollout.tasks_per_step=8", "rollout.rollouts_per_task=4",
                "rollout.max_new_tokens=48", "ppo.mini_batch_size=16", "ppo.micro_batch_size=16");
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aSecondSigtermStopsAtOnceWithoutSaving() throws Exception {
        Child.Result r = terminateTwiceDuringALongStep();
        assertEquals(143, r.exit(), r.out());
        assertTrue(r.out().contains("drmas: SIGTERM again: stopping at once, without saving"), r.out());
        assertFalse(STOPPED.matcher(r.out()).find(), r.out());
        assertFalse(Files.exists(run().resolve("checkpoints")) && !checkpoints().isEmpty(), "no checkpoint: " + r.out());
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aRankOfALauncherTakesTheLaunchersEchoOfTheSchedulersSigtermAsOneStop() throws Exception {
        // a scheduler (or `timeout`, `kill -- -PGID`) signals the whole process group, and drmas launch passes the
        // signal on: the rank gets SIGTERM twice within moments, and saves its step once (before: it halted unsaved)
        underLauncher = true;
        Child.Result r = terminateTwiceDuringALongStep();
        assertEquals(143, r.exit(), r.out());
        assertFalse(r.out().contains("again: stopping at once"), r.out());
        Matcher m = STOPPED.matcher(r.out());
        assertTrue(m.find(), r.out());
        assertEquals(List.of(String.format("step_%06d", Long.parseLong(m.group(1)))), checkpoints(), r.out());
    }

    @Test
    @Timeout(value = 300, unit = TimeUnit.SECONDS)
    void sigtermToTheLauncherStopsBothRanksAfterTheSameStep() throws Exception {
        Child.Result r = terminateAfterTwoSteps("launch", "--nproc", "2", "--threads-per-rank", "1", config().toString(),
                "run.output_dir=" + dir.resolve("runs"), "trainer.steps=500", "trainer.save_freq=400", "distributed.timeout_s=60");
        Matcher m = STOPPED.matcher(r.out());
        assertTrue(m.find(), r.out());
        long n = Long.parseLong(m.group(1));
        assertEquals(List.of(String.format("step_%06d", n)), checkpoints(), r.out());
        assertFalse(r.out().contains("stopping the other ranks"), r.out());
        assertFalse(r.out().contains("Exception"), r.out());
        assertEquals(143, r.exit(), r.out());
    }
}
