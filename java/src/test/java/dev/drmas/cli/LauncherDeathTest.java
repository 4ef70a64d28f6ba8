// LauncherDeathTest.java — `drmas launch` killed with kill -9 (no shutdown hook runs) used to leave
// its ranks training unattended to the end; now each rank watches the pipe from its launcher and
// stops when it closes (issue 20, processes); so does a job of `drmas experiment` killed the same way.
// Real processes: the launcher and two Gloo ranks; an experiment and its warm-start job.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class LauncherDeathTest {
    @TempDir
    Path dir;

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void ranksStopWhenTheirLauncherIsKilled() throws Exception {
        Path config = dir.resolve("run.yaml");
        Files.writeString(config, RunFolderTest.YAML.replace("name: lock", "name: orphan"));
        Process launcher = new ProcessBuilder(Child.command("launch", "--nproc", "2", "--threads-per-rank", "1", config.toString(),
                "run.output_dir=" + dir.resolve("runs"), "trainer.steps=100000", "trainer.save_freq=0"))
                .redirectErrorStream(true).start();
        List<ProcessHandle> ranks = List.of();
        try {
            BufferedReader out = new BufferedReader(new InputStreamReader(launcher.getInputStream(), StandardCharsets.UTF_8));
            StringBuilder seen = new StringBuilder();
            boolean joined0 = false, joined1 = false;
            for (String line; !(joined0 && joined1) && (line = out.readLine()) != null; ) {
                seen.append(line).append('\n');
                joined0 |= line.startsWith("[rank0] drmas: rank 0 of 2 joined");
                joined1 |= line.startsWith("[rank1] drmas: rank 1 of 2 joined");
            }
            assertTrue(joined0 && joined1, "the ranks did not start: " + seen);
            ranks = launcher.toHandle().children().toList();
            assertTrue(ranks.size() == 2, "two rank processes, got " + ranks);
            launcher.destroyForcibly();  // SIGKILL
            launcher.waitFor();
            for (ProcessHandle r : ranks) {
                boolean ended = r.onExit().completeOnTimeout(null, 60, TimeUnit.SECONDS).get() != null && !r.isAlive();
                assertTrue(ended, "rank process " + r.pid() + " still runs 60 s after its launcher was killed");
            }
        } finally {
            launcher.destroyForcibly();
            for (ProcessHandle r : ranks) r.destroyForcibly();
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void anExperimentsJobStopsWhenTheExperimentIsKilled() throws Exception {
        List<String> args = new java.util.ArrayList<>(List.of("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo", "--seeds", "1",
                "run.output_dir=" + dir.resolve("runs"), "run.threads=1"));
        args.addAll(ExperimentCommandTest.TINY);
        args.add("sft.steps=100000");  // the warm start runs until the test ends it
        Process experiment = new ProcessBuilder(Child.command(args.toArray(String[]::new))).redirectErrorStream(true)
                .redirectOutput(dir.resolve("experiment.out").toFile()).start();
        List<ProcessHandle> jobs = List.of();
        try {
            for (int i = 0; i < 600 && jobs.isEmpty() && experiment.isAlive(); i++) {
                Thread.sleep(100);
                jobs = experiment.toHandle().children().toList();
            }
            assertTrue(jobs.size() == 1, "one job (sft-s1) running, got " + jobs + ": " + Files.readString(dir.resolve("experiment.out")));
            Thread.sleep(2000);  // the job's JVM is up and watching
            experiment.destroyForcibly();  // SIGKILL: no shutdown hook runs
            experiment.waitFor();
            ProcessHandle job = jobs.getFirst();
            boolean ended = job.onExit().completeOnTimeout(null, 60, TimeUnit.SECONDS).get() != null && !job.isAlive();
            assertTrue(ended, "job process " + job.pid() + " still runs 60 s after its experiment was killed");
        } finally {
            experiment.destroyForcibly();
            for (ProcessHandle j : jobs) j.destroyForcibly();
        }
    }
}
