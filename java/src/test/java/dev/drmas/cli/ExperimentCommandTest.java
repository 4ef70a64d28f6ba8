// ExperimentCommandTest.java — `drmas experiment` end to end with child JVMs, at tiny sizes: one warm
// start per seed, one run per mode from it (the same initial weights: their first evaluations are
// identical), per-agent gradient norms logged, finished jobs skipped when run again, the report
// written; with --shared-warm-start one warm start serves every seed; bad options are user errors, and
// so are a folder that holds a run (and the demo in an experiment's folder), a finished job that ran
// with other arguments, and metrics.jsonl=false. A job that ends with 75 (a tool stopped it after its
// save) ends the experiment with 75, the RL runs beside it stop after their save (SIGTERM), not killed,
// a warm start beside it (no graceful stop) is let finish, and no job starts after it; a stop of the
// experiment (its shutdown hook) signals each running job once, however they end, and a job whose stop
// failed gives the experiment its status; jobs that run at once
// are given GPUs of their own (--gpus, or the ones the experiment sees); scripts stand in for the jobs there.
// Runs are named as the report labels them, the pooling only where it is not trajectories. A finished
// job whose config file was edited since is refused naming the keys that differ (what only logging
// changes aside; a marker of an earlier drmas is checked by its arguments alone). A mode or pooling
// listed twice is a user error.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ExperimentCommandTest {
    @TempDir
    Path tmp;

    static final List<String> TINY = List.of("run.name=exp", "models.policy.size.hidden=32", "models.policy.size.layers=1",
            "models.policy.size.heads=2", "models.policy.size.kv_heads=1", "models.policy.size.intermediate=64",
            "sft.steps=20", "sft.batch_size=8", "trainer.steps=2", "trainer.eval_freq=2", "trainer.save_freq=2",
            "rollout.tasks_per_step=2", "rollout.max_new_tokens=8", "eval.tasks=3", "metrics.tensorboard=false");

    static JsonNode first(Path metrics) throws IOException {
        return new ObjectMapper().readTree(Files.readAllLines(metrics).getFirst());
    }

    @Test
    void modesShareTheirSeedsWarmStartAndFinishedJobsAreSkipped() throws IOException {
        List<String> args = new ArrayList<>(List.of("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo,drmas",
                "--seeds", "1", "run.output_dir=" + tmp, "run.threads=1"));
        args.addAll(TINY);
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(0, r.exit(), r.err());
        Path exp = tmp.resolve("exp");
        for (String run : List.of("sft-s1", "grpo-s1", "drmas-s1")) {
            assertTrue(Files.isRegularFile(exp.resolve(run).resolve(ExperimentCommand.DONE)), run);
            assertTrue(Files.isRegularFile(exp.resolve("logs").resolve(run + ".log")), run);
        }
        assertTrue(Files.isRegularFile(exp.resolve("sft-s1/sft/models/policy/config.json")));
        String grpoCfg = Files.readString(exp.resolve("grpo-s1/config.yaml"));
        assertTrue(grpoCfg.contains("warm_start: " + exp.resolve("sft-s1/sft/models")) && grpoCfg.contains("mode: grpo")
                && grpoCfg.contains("grad_norm_per_agent: true"), grpoCfg);
        // the same warm start and eval seeds: the evaluations before any update agree exactly
        JsonNode g = first(exp.resolve("grpo-s1/metrics.jsonl")), d = first(exp.resolve("drmas-s1/metrics.jsonl"));
        assertEquals(0, g.get("step").asInt());
        assertEquals(g.get("eval/avg@4"), d.get("eval/avg@4"));
        String step2 = Files.readAllLines(exp.resolve("drmas-s1/metrics.jsonl")).stream().filter(l -> l.contains("reward/mean"))
                .reduce((a, b) -> b).orElseThrow();
        assertTrue(step2.contains("agent/solver/grad_norm") && step2.contains("agent/verifier/grad_norm"), step2);
        assertTrue(Files.isRegularFile(exp.resolve("report.html")) && r.out().contains("report"), r.out());
        assertTrue(Files.isRegularFile(exp.resolve("plots/reward.json")));

        // again: nothing runs
        Cli.Run again = Cli.run(args.toArray(String[]::new));
        assertEquals(0, again.exit(), again.err());
        assertEquals(3, again.out().lines().filter(l -> l.contains("done before, skipped")).count(), again.out());
    }

    /**
     * `drmas experiment` (modes grpo and drmas) with each job run by the shell {@code script} (its arguments:
     * the job's `drmas` arguments) instead of a `drmas` JVM; out and err together.
     */
    private Cli.Run experimentOfScripts(String script, int seeds, int parallel) {
        return experimentOfScripts(script, seeds, parallel, c -> { });
    }

    /** As above, {@code seen} given the command first (a test that stops it as its shutdown hook would). */
    private Cli.Run experimentOfScripts(String script, int seeds, int parallel, java.util.function.Consumer<ExperimentCommand> seen) {
        return experimentOfScripts(script, seeds, parallel, seen, List.of());
    }

    /** As above, with {@code extra} arguments (options or overrides) last. */
    private Cli.Run experimentOfScripts(String script, int seeds, int parallel, java.util.function.Consumer<ExperimentCommand> seen,
                                        List<String> extra) {
        var cl = Main.commandLine();
        var out = new java.io.StringWriter();
        cl.setOut(new java.io.PrintWriter(out));
        cl.setErr(new java.io.PrintWriter(out));
        ExperimentCommand cmd = (ExperimentCommand) cl.getSubcommands().get("experiment").getCommand();
        cmd.jobCommand = () -> List.of("sh", "-c", script, "job");
        seen.accept(cmd);
        List<String> args = new ArrayList<>(List.of("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo,drmas",
                "--seeds", Integer.toString(seeds), "--parallel", Integer.toString(parallel), "run.output_dir=" + tmp, "run.threads=1"));
        args.addAll(TINY);
        args.addAll(extra);
        int code = cl.execute(args.toArray(String[]::new));
        return new Cli.Run(code, out.toString(), "");
    }

    @Test
    void aJobThatAToolStoppedEndsTheExperimentWith75AndStopsTheOthersGracefully() throws Exception {
        // sft: done at once; grpo: stopped by its tool (75) after a moment; drmas: "training" until SIGTERM, on which it
        // "saves" (a marker) and ends with 143
        // (grpo waits until drmas says its trap is set: a job still starting when grpo stops would die of the signal)
        Path mark = tmp.resolve("drmas-saved"), started = tmp.resolve("started");
        String script = "if [ \"$1\" = sft ]; then exit 0; fi\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) until [ -s " + started + " ]; do sleep 0.1; done; sleep 0.5; echo 'drmas: stopped after step 3: the retriever failed'; "
                + "exit 75 ;;\n"
                + "  *) trap 'touch " + mark + "; exit 143' TERM; echo drmas >> " + started + "; while true; do sleep 0.1; done ;;\n"
                + "esac";
        long t0 = System.nanoTime();
        Cli.Run r = experimentOfScripts(script, 1, 2);
        String said = r.out();
        assertEquals(75, r.exit(), said);
        assertTrue((System.nanoTime() - t0) / 1e9 < 30, "the running job was stopped, not waited for");
        assertTrue(said.contains("stopping the 1 RL run(s) running after their step's checkpoint"), said);
        assertTrue(said.contains("grpo-s1 stopped after saving its step (exit 75: a service it needs is gone); the same command resumes "
                + "the experiment once it is back") && said.contains("drmas: stopped after step 3: the retriever failed"), said);
        assertTrue(Files.exists(mark), "the drmas job got SIGTERM and saved, not a kill");
        Path exp = tmp.resolve("exp");
        assertTrue(Files.isRegularFile(exp.resolve("sft-s1").resolve(ExperimentCommand.DONE)));
        assertTrue(!Files.exists(exp.resolve("grpo-s1").resolve(ExperimentCommand.DONE)) && !Files.exists(exp.resolve("drmas-s1")
                .resolve(ExperimentCommand.DONE)), "neither finished: the same command runs them again");
    }

    @Test
    void aRunWhoseStopFailedBesideAToolsStopIsSaidAndFailsTheExperiment() throws Exception {
        // grpo stops with 75 after a moment (a service gone: "resume once it is back"); drmas, stopped then, fails its
        // save (1). Its failure was only a pid on stderr, and the experiment ended with 75
        Path started = tmp.resolve("started");
        String script = "if [ \"$1\" = sft ]; then exit 0; fi\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) until [ -s " + started + " ]; do sleep 0.1; done; sleep 0.5; exit 75 ;;\n"
                + "  *) trap 'echo save failed; exit 1' TERM; echo drmas >> " + started + "; while true; do sleep 0.1; done ;;\n"
                + "esac";
        Cli.Run r = experimentOfScripts(script, 1, 2);
        String said = r.out();
        assertEquals(1, r.exit(), said);
        assertTrue(said.contains("grpo-s1 stopped after saving its step (exit 75"), said);
        assertTrue(said.contains("drmas experiment: also drmas-s1 failed (exit 1); its log is ") && said.contains("save failed"), said);
        assertEquals(1, said.split("drmas experiment: also ", -1).length - 1, "one also line: " + said);
    }

    /** Waits (up to 60 s) until the two RL runs' scripts have each written a line to {@code started}. */
    private static void awaitBothStarted(Path started) throws Exception {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (!(Files.exists(started) && Files.readAllLines(started).size() == 2)) {
            assertTrue(System.nanoTime() < deadline, "the two RL runs did not start");
            Thread.sleep(50);
        }
    }

    @Test
    void aStopOfTheExperimentSignalsEachRunningJobOnce() throws Exception {
        // both RL runs at once; on SIGTERM grpo ends at once (143), drmas notes the signal and "saves" for 2 s first. The
        // experiment's shutdown hook signals both; grpo's end must not bring drmas a second SIGTERM (a train job halts on
        // it, without saving)
        Path terms = tmp.resolve("terms"), started = tmp.resolve("started");
        // (each says it started once its trap is set)
        String script = "if [ \"$1\" = sft ]; then exit 0; fi\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) trap 'exit 143' TERM; echo grpo >> " + started + "; while true; do sleep 0.1; done ;;\n"
                + "  *) touch " + terms + "; trap 'echo term >> " + terms + "' TERM; echo drmas >> " + started + "\n"
                + "     while [ ! -s " + terms + " ]; do sleep 0.1; done; sleep 2; exit 143 ;;\n"
                + "esac";
        ExperimentCommand[] cmd = new ExperimentCommand[1];
        var exec = java.util.concurrent.Executors.newSingleThreadExecutor();
        try {
            var run = exec.submit(() -> experimentOfScripts(script, 1, 2, c -> cmd[0] = c));
            awaitBothStarted(started);
            cmd[0].stopForShutdown();  // what the hook does on Ctrl-C or SIGTERM: returns once both have ended
            Cli.Run r = run.get(60, java.util.concurrent.TimeUnit.SECONDS);
            assertEquals(List.of("term"), Files.readAllLines(terms), "SIGTERMs drmas-s1 got: " + r.out());
        } finally {
            exec.shutdownNow();
        }
    }

    @Test
    void aJobWhoseStopFailedEndsTheExperimentWithItsStatus() throws Exception {
        // on SIGTERM grpo stops after its save (143), drmas's save fails (1): the experiment must not end with the
        // signal's 143, which reads as "every job saved its step"
        Path started = tmp.resolve("started");
        String script = "if [ \"$1\" = sft ]; then exit 0; fi\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) trap 'exit 143' TERM; echo grpo >> " + started + "; while true; do sleep 0.1; done ;;\n"
                + "  *) trap 'exit 1' TERM; echo drmas >> " + started + "; while true; do sleep 0.1; done ;;\n"
                + "esac";
        ExperimentCommand[] cmd = new ExperimentCommand[1];
        List<Integer> halted = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.function.IntConsumer before = LaunchCommand.halt;
        LaunchCommand.halt = halted::add;
        var exec = java.util.concurrent.Executors.newSingleThreadExecutor();
        try {
            var run = exec.submit(() -> experimentOfScripts(script, 1, 2, c -> cmd[0] = c));
            awaitBothStarted(started);
            cmd[0].stopForShutdown();
            assertEquals(List.of(1), halted);
            run.get(60, java.util.concurrent.TimeUnit.SECONDS);
        } finally {
            LaunchCommand.halt = before;
            exec.shutdownNow();
        }
    }

    @Test
    void aJobRunAgainKeepsItsEarlierLogAndBytesThatAreNotUtf8KeepItsStatus() throws Exception {
        // grpo: the first time, a tool's bytes that are not UTF-8 and a stop with 75; the second time it finishes
        Path once = tmp.resolve("once"), threads = tmp.resolve("threads");
        String script = "if [ \"$1\" = sft ]; then echo \"$OMP_NUM_THREADS $RAYON_NUM_THREADS\" > " + threads + "; exit 0; fi\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) if [ -e " + once + " ]; then echo 'second attempt'; exit 0; fi; touch " + once + "\n"
                + "     printf 'a grader said \\377\\376\\n'; echo 'first attempt: the retriever failed'; exit 75 ;;\n"
                + "  *) exit 0 ;;\n"
                + "esac";
        Cli.Run first = experimentOfScripts(script, 1, 1);
        assertEquals(75, first.exit(), first.out());
        assertTrue(first.out().contains("first attempt: the retriever failed"), first.out());
        Cli.Run second = experimentOfScripts(script, 1, 1);
        assertTrue(second.out().contains("grpo-s1: done in"), second.out());  // (its report then finds no metrics: scripts)
        String log = Files.readString(tmp.resolve("exp/logs/grpo-s1.log"), java.nio.charset.StandardCharsets.ISO_8859_1);
        assertTrue(log.contains("first attempt: the retriever failed") && log.contains("second attempt"), log);
        assertEquals(2, log.lines().filter(l -> l.startsWith("=== drmas experiment: grpo-s1 started ")).count(), log);
        assertTrue(log.indexOf("first attempt") < log.indexOf("second attempt"), log);
        assertEquals("[", Files.readString(tmp.resolve("exp/grpo-s1").resolve(ExperimentCommand.DONE)).substring(0, 1));
        // a job's threads (run.threads=1) for OpenMP and the tokenizer's pool alike
        String rayon = System.getenv("RAYON_NUM_THREADS");
        assertEquals("1 " + (rayon != null ? rayon : "1"), Files.readString(threads).strip());
    }

    @Test
    void aFinishedJobWhoseConfigFileChangedIsRefusedNamingTheKeys() throws Exception {
        // the same arguments, the YAML edited between two runs of the experiment: its finished jobs trained with the old
        // settings, and continuing would put seeds of two configs in one report
        Path yaml = tmp.resolve("c.yaml");
        Files.copy(Path.of("../configs/math-toy-drmas.yaml"), yaml);
        var cl = Main.commandLine();
        var out = new java.io.StringWriter();
        cl.setOut(new java.io.PrintWriter(out));
        cl.setErr(new java.io.PrintWriter(out));
        ((ExperimentCommand) cl.getSubcommands().get("experiment").getCommand()).jobCommand = () -> List.of("sh", "-c", "exit 0", "job");
        List<String> args = new ArrayList<>(List.of("experiment", yaml.toString(), "--modes", "grpo", "--seeds", "1",
                "run.output_dir=" + tmp, "run.threads=1"));
        args.addAll(TINY);
        cl.execute(args.toArray(String[]::new));  // (every job done; the report then finds no metrics: scripts)
        Path marker = tmp.resolve("exp/grpo-s1").resolve(ExperimentCommand.DONE);
        assertTrue(Files.readString(marker).contains("\n" + ExperimentCommand.CONFIG_LINE + "{"), Files.readString(marker));
        // what only logging changes is no other config
        Files.writeString(yaml, Files.readString(yaml).replace("save_freq: 30}", "save_freq: 30, log_freq: 5}"));
        Cli.Run same = Cli.run(args.toArray(String[]::new));
        assertTrue(same.out().contains("grpo-s1: done before, skipped"), same.out() + same.err());
        Files.writeString(yaml, Files.readString(yaml).replace("clip_high: 0.2,", "clip_high: 0.28,"));
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(1, r.exit(), r.out() + r.err());
        assertTrue(r.err().contains("sft-s1 finished with another config (" + tmp.resolve("exp/sft-s1").resolve(ExperimentCommand.DONE)
                + "): ppo.clip_high (then 0.2, now 0.28). "), r.err());
        // a marker of a drmas that kept the arguments alone (and did not force trainer.log_freq=1): those are compared, as then
        for (String job : List.of("sft-s1", "grpo-s1")) {
            Path m = tmp.resolve("exp").resolve(job).resolve(ExperimentCommand.DONE);
            Files.writeString(m, Files.readString(m).lines().findFirst().orElseThrow().replace(", trainer.log_freq=1", "") + "\n");
        }
        Cli.Run old = Cli.run(args.toArray(String[]::new));
        assertEquals(2, old.out().lines().filter(l -> l.contains("done before, skipped")).count(), old.out() + old.err());
    }

    @Test
    void aWarmStartRunningBesideAFailedJobIsLetFinish() throws Exception {
        // seed 1's warm start at once, seed 2's for 3 s; grpo-s1 stops with 75 after 1 s while seed 2's warm start
        // runs: it finishes (marked done), drmas-s1 is stopped gracefully, and none of seed 2's RL runs starts
        // (grpo waits until drmas's trap is set, as above)
        Path mark = tmp.resolve("drmas-saved"), started = tmp.resolve("started"), trapped = tmp.resolve("trapped");
        String script = "if [ \"$1\" = sft ]; then case \"$*\" in *run.seed=2*) sleep 3 ;; esac; exit 0; fi\n"
                + "echo \"$*\" >> " + started + "\n"
                + "case \"$*\" in\n"
                + "  *mode=grpo*) until [ -e " + trapped + " ]; do sleep 0.1; done; sleep 0.5; exit 75 ;;\n"
                + "  *) trap 'touch " + mark + "; exit 143' TERM; touch " + trapped + "; while true; do sleep 0.1; done ;;\n"
                + "esac";
        Cli.Run r = experimentOfScripts(script, 2, 3);
        String said = r.out();
        assertEquals(75, r.exit(), said);
        assertTrue(said.contains("stopping the 1 RL run(s) running after their step's checkpoint; waiting for the 1 warm start(s) "
                + "running to finish"), said);
        Path exp = tmp.resolve("exp");
        assertTrue(Files.isRegularFile(exp.resolve("sft-s2").resolve(ExperimentCommand.DONE)), "seed 2's warm start finished: " + said);
        assertTrue(Files.exists(mark), "drmas-s1 got SIGTERM");
        List<String> rl = Files.readAllLines(started);
        assertEquals(2, rl.size(), "only seed 1's RL runs started: " + rl);
        assertTrue(rl.stream().allMatch(l -> l.contains("run.seed=1")), rl.toString());
    }

    @Test
    void parallelJobsAreSpreadOverTheGpusOneAJob() throws Exception {
        // each job notes its start and end with the GPU it was given; while two run at once they must be on two GPUs (without
        // --gpus every job saw the experiment's own devices, and each single-process job ran on the first: all on GPU 0)
        Path events = tmp.resolve("events");
        String script = "echo \"start $CUDA_VISIBLE_DEVICES\" >> " + events + "; sleep 0.4; echo \"end $CUDA_VISIBLE_DEVICES\" >> "
                + events + "; exit 0";
        Cli.Run r = experimentOfScripts(script, 2, 2, c -> { }, List.of("--gpus", "3,GPU-5f1c", "run.device=auto"));
        // (every job done; the report then finds no metrics: scripts)
        assertEquals(6, r.out().lines().filter(l -> l.contains(": done in")).count(), r.out());
        assertTrue(r.out().contains("2 at a time, 1 threads each, on GPUs 3,GPU-5f1c"), r.out());
        java.util.Map<String, Integer> running = new java.util.HashMap<>();
        int most = 0;
        java.util.Set<String> used = new java.util.HashSet<>();
        List<String> lines = Files.readAllLines(events);
        assertEquals(12, lines.size(), lines.toString());  // 6 jobs: per seed a warm start and two RL runs
        for (String l : lines) {
            String[] e = l.split(" ", 2);
            assertTrue(e.length == 2 && !e[1].isEmpty(), "every job was given a GPU: " + lines);
            used.add(e[1]);
            int now = running.merge(e[1], e[0].equals("start") ? 1 : -1, Integer::sum);
            most = Math.max(most, now);
        }
        assertEquals(1, most, "two jobs at once on one GPU: " + lines);
        assertEquals(java.util.Set.of("3", "GPU-5f1c"), used, lines.toString());
        String log = Files.readString(tmp.resolve("exp/logs/drmas-s2.log"));
        assertTrue(log.matches("(?s)=== drmas experiment: drmas-s2 started \\S+ on GPU (3|GPU-5f1c) ===\n.*"), log);
    }

    @Test
    void theGpusOfAnExperiment() {
        var cpu = dev.drmas.config.RunSettings.Device.CPU;
        var cuda = dev.drmas.config.RunSettings.Device.CUDA;
        var auto = dev.drmas.config.RunSettings.Device.AUTO;
        java.util.function.IntSupplier four = () -> 4, none = () -> 0;
        java.util.function.IntSupplier unasked = () -> {
            throw new AssertionError("the runtime was asked for its devices");
        };
        // defaults: several jobs at once on a device that may be CUDA
        assertEquals(List.of("0", "1", "2", "3"), ExperimentCommand.devices(null, cuda, 2, null, four));
        assertEquals(List.of("0", "1", "2", "3"), ExperimentCommand.devices(null, auto, 3, null, four));
        assertEquals(List.of("2", "GPU-ab"), ExperimentCommand.devices(null, cuda, 2, "2, GPU-ab", unasked));
        assertEquals(List.of(), ExperimentCommand.devices(null, cuda, 2, "", unasked));  // no GPU visible: nothing to spread
        assertEquals(List.of(), ExperimentCommand.devices(null, auto, 2, null, none));
        assertEquals(List.of(), ExperimentCommand.devices(null, cpu, 4, null, unasked));
        assertEquals(List.of(), ExperimentCommand.devices(null, cuda, 1, "0,1", unasked));  // one job at a time: as before
        // given
        assertEquals(List.of("1", "0"), ExperimentCommand.devices(List.of("1", "0"), cuda, 1, "0,1,2", unasked));
        for (var bad : List.of(List.of("0", "0"), List.of("0", ""), List.of(" 1"), List.of("CUDA_VISIBLE_DEVICES=1"))) {
            UserError e = org.junit.jupiter.api.Assertions.assertThrows(UserError.class,
                    () -> ExperimentCommand.devices(bad, cuda, 2, null, unasked));
            assertTrue(e.getMessage().startsWith("--gpus"), e.getMessage());
        }
        UserError e = org.junit.jupiter.api.Assertions.assertThrows(UserError.class,
                () -> ExperimentCommand.devices(List.of("0", "1"), cpu, 2, null, unasked));
        assertEquals("--gpus 0,1: run.device is cpu; set run.device=cuda (or auto), or leave --gpus out", e.getMessage());
    }

    @Test
    void aSharedWarmStartIsOneSftForEverySeed() {
        ExperimentCommand c = new ExperimentCommand();
        c.config = Path.of("c.yaml");
        c.modes = List.of("grpo", "drmas");
        c.pooling = List.of("trajectories");
        c.seeds = 3;
        Path root = tmp.resolve("exp");
        List<ExperimentCommand.Job> own = c.jobs(root, 1);
        assertEquals(List.of("sft-s1", "grpo-s1", "drmas-s1", "sft-s2", "grpo-s2", "drmas-s2", "sft-s3", "grpo-s3", "drmas-s3"),
                own.stream().map(ExperimentCommand.Job::name).toList());
        // every step logged, whatever the config says: the report's spikes and max/median are over the steps logged
        assertTrue(own.get(1).args().contains("trainer.log_freq=1") && own.get(1).args().contains("trainer.grad_norm_per_agent=true"),
                own.get(1).args().toString());
        assertTrue(own.get(7).args().contains("run.warm_start=" + root.resolve("sft-s3/sft/models")), own.get(7).args().toString());
        c.sharedWarmStart = true;
        List<ExperimentCommand.Job> shared = c.jobs(root, 1);
        assertEquals(List.of("sft-s1", "grpo-s1", "drmas-s1", "grpo-s2", "drmas-s2", "grpo-s3", "drmas-s3"),
                shared.stream().map(ExperimentCommand.Job::name).toList());
        for (ExperimentCommand.Job j : shared.subList(1, shared.size())) {
            assertEquals(shared.getFirst(), j.after(), j.name());
            assertTrue(j.args().contains("run.warm_start=" + root.resolve("sft-s1/sft/models")), j.args().toString());
            assertTrue(j.args().contains("run.seed=" + j.name().substring(j.name().length() - 1)), j.args().toString());
        }
    }

    @Test
    void runsAreNamedAsTheReportLabelsThemWhateverOtherPoolingsAreListed() {
        // an experiment of trajectories first, then rows added: grpo-s1 is the same run both times (it was
        // grpo-trajectories-s1 the second time: trained again, and the report refused the two as one seed twice)
        ExperimentCommand c = new ExperimentCommand();
        c.config = Path.of("c.yaml");
        c.modes = List.of("grpo", "drmas");
        c.seeds = 1;
        c.pooling = List.of("trajectories");
        Path root = tmp.resolve("exp");
        assertEquals(List.of("sft-s1", "grpo-s1", "drmas-s1"), c.jobs(root, 1).stream().map(ExperimentCommand.Job::name).toList());
        c.modes = List.of("grpo");
        c.pooling = List.of("trajectories", "rows");
        assertEquals(List.of("sft-s1", "grpo-s1", "grpo-rows-s1"), c.jobs(root, 1).stream().map(ExperimentCommand.Job::name).toList());
    }

    @Test
    void pretrainedModelsStartTheirRunsFromTheirOwnWeights() throws IOException {
        // --warm-start auto: a model with a path (as the paper's) gets no supervised warm start on scripted demonstrations
        Path calls = tmp.resolve("calls.txt");
        Path model = Files.createDirectories(tmp.resolve("pretrained"));
        String script = "echo \"$*\" >> " + calls + "; exit 0";
        Cli.Run r = experimentOfScripts(script, 1, 1, c -> { }, List.of("models.policy.path=" + model));
        // (every job ran; the report at the end finds no metrics of the scripts: exit 1 for that alone)
        assertTrue(r.out().contains("[2/2] ") && r.out().contains("no metrics.jsonl"), r.out());
        List<String> ran = Files.readAllLines(calls);
        assertEquals(2, ran.size(), ran.toString());
        for (String call : ran) {
            assertTrue(call.startsWith("train "), call);
            assertFalse(call.contains("run.warm_start="), call);
        }
        assertTrue(r.out().contains("1 seeds x 2 runs from the models' own weights (no warm start)"), r.out());
        // never, for random models too; always, for pretrained ones too; anything else is an error
        Files.delete(calls);
        r = experimentOfScripts(script, 1, 1, c -> { }, List.of("--warm-start", "never", "run.name=never"));
        assertTrue(r.out().contains("[2/2] "), r.out());
        assertEquals(2, Files.readAllLines(calls).size());
        Files.delete(calls);
        r = experimentOfScripts(script, 1, 1, c -> { }, List.of("--warm-start", "always", "run.name=always", "models.policy.path=" + model));
        assertTrue(r.out().contains("[3/3] "), r.out());
        List<String> always = Files.readAllLines(calls);
        assertTrue(always.getFirst().startsWith("sft "), always.toString());
        assertTrue(always.get(1).contains("run.warm_start="), always.toString());
        // a warm start saved by a job stopped before its marker is kept, not trained again
        Files.delete(calls);
        Files.createDirectories(tmp.resolve("kept/sft-s1/sft/models"));
        r = experimentOfScripts(script, 1, 1, c -> { }, List.of("run.name=kept"));
        assertTrue(r.out().contains("[3/3] "), r.out());
        assertTrue(r.out().contains("sft-s1: its warm start was saved before (" + tmp.resolve("kept/sft-s1/sft/models") + "), kept"), r.out());
        assertTrue(Files.readAllLines(calls).stream().noneMatch(c -> c.startsWith("sft ")), Files.readAllLines(calls).toString());
        r = experimentOfScripts(script, 1, 1, c -> { }, List.of("--warm-start", "sometimes", "run.name=bad"));
        assertEquals(1, r.exit());
        assertTrue(r.out().contains("--warm-start must be auto, always or never, got 'sometimes'"), r.out());
    }

    @Test
    void badOptionsAreUserErrors() {
        Cli.Run r = Cli.run("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo,drmass", "run.output_dir=" + tmp);
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("--modes: 'drmass' is not one of grpo, drmas, agent-mean, agent-std"), r.err());
        r = Cli.run("experiment", "../configs/math-toy-drmas.yaml", "--seeds", "0");
        assertEquals(1, r.exit());
        assertTrue(r.err().contains("--seeds must be >= 1"), r.err());
        // a value twice would be one job twice under one name (scripts stand in for the jobs, should any start)
        r = experimentOfScripts("exit 0", 1, 2, c -> { }, List.of("--modes", "grpo,drmas,grpo"));
        assertEquals(1, r.exit());
        assertTrue(r.out().contains("--modes: 'grpo' is given twice"), r.out());
        r = experimentOfScripts("exit 0", 1, 2, c -> { }, List.of("--pooling", "rows,rows"));
        assertEquals(1, r.exit());
        assertTrue(r.out().contains("--pooling: 'rows' is given twice"), r.out());
        assertTrue(!Files.exists(tmp.resolve("exp")), "nothing ran");
    }

    @Test
    void aFolderThatHoldsARunOfItsOwnIsRefusedAndTheDemoRefusesAnExperiment() throws IOException {
        Path demo = Files.createDirectories(tmp.resolve("math-toy-drmas"));
        Files.writeString(demo.resolve("metrics.jsonl"), "{\"step\":0,\"eval/pass@1\":0.1}\n");  // `drmas demo` was here
        List<String> args = new ArrayList<>(List.of("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo", "--seeds", "1",
                "run.output_dir=" + tmp, "run.threads=1"));
        args.addAll(TINY.subList(1, TINY.size()));  // the config's own run.name, as in the README
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains(demo + " holds a run of its own (metrics.jsonl)") && r.err().contains("run.name=math-toy-drmas-experiment"),
                r.err());
        assertTrue(!Files.exists(demo.resolve("sft-s1")), "nothing ran");

        // the other way round: an experiment there first, then `demo --fresh`
        Path exp = Files.createDirectories(tmp.resolve("exp").resolve("grpo-s1"));
        Files.writeString(exp.resolve(ExperimentCommand.DONE), "[train]\n");
        List<String> demoArgs = new ArrayList<>(List.of("demo", "--config", "../configs/math-toy-drmas.yaml", "--fresh",
                "run.output_dir=" + tmp, "run.threads=1"));
        demoArgs.addAll(TINY);
        r = Cli.run(demoArgs.toArray(String[]::new));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("holds an experiment"), r.err());
        assertTrue(Files.isRegularFile(exp.resolve(ExperimentCommand.DONE)), "the experiment's run is kept");
    }

    @Test
    void aFinishedJobWithOtherArgumentsIsAnErrorAndMetricsAreRequired() throws IOException {
        ExperimentCommand c = new ExperimentCommand();
        c.config = Path.of("../configs/math-toy-drmas.yaml");
        c.modes = List.of("grpo");
        c.pooling = List.of("trajectories");
        c.seeds = 2;
        c.overrides = new ArrayList<>(List.of("run.output_dir=" + tmp, "run.threads=1"));
        c.overrides.addAll(TINY);
        Path root = tmp.resolve("exp");
        for (ExperimentCommand.Job j : c.jobs(root, 1)) {  // every job finished, one warm start per seed
            Files.createDirectories(root.resolve(j.name()));
            Files.writeString(root.resolve(j.name()).resolve(ExperimentCommand.DONE), j.args() + "\n");
        }
        List<String> args = new ArrayList<>(List.of("experiment", "../configs/math-toy-drmas.yaml", "--modes", "grpo", "--seeds", "2",
                "--shared-warm-start"));
        args.addAll(c.overrides);
        Cli.Run r = Cli.run(args.toArray(String[]::new));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("grpo-s2 finished with other arguments") && r.err().contains("sft-s2/sft/models]")
                && r.err().contains("sft-s1/sft/models]"), r.err());
        args.remove("--shared-warm-start");
        args.add("metrics.jsonl=false");
        r = Cli.run(args.toArray(String[]::new));
        assertEquals(1, r.exit(), r.err());
        assertTrue(r.err().contains("metrics.jsonl=false"), r.err());
    }
}
