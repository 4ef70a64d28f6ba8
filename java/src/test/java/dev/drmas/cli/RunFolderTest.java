// RunFolderTest.java — a run folder has one owner, and a run that cannot work says so before it
// starts (issue 20: case 4, case 7 and the "errors without their cause" and "silent configs"
// lists): a second process on a locked folder stops naming the holder's pid; a folder through a
// file or in /proc, a config that is a folder or not UTF-8, an override that adds half an agent,
// an lr float32 cannot hold, a malformed retriever URL, a run name that leaves output_dir, one
// rollout per task under GRPO, too many rounds, token budgets that cannot fit, a checkpoints
// folder that cannot be written, and eval of a run with nothing trained: each a one-line error
// with its key or path.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.train.RunLock;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class RunFolderTest {
    @TempDir
    Path dir;

    static final String YAML = """
            run: {name: lock, seed: 3, threads: 1, device: cpu}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
            models:
              policy:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
                optim: {lr: 1.0e-3, weight_decay: 0.0, grad_clip: 1.0}
            rollout: {tasks_per_step: 2, rollouts_per_task: 2, temperature: 1.0, max_new_tokens: 6, max_prompt_tokens: 300}
            ppo: {epochs: 1, mini_batch_size: 4, micro_batch_size: 4}
            trainer: {steps: 2, eval_freq: 0, eval_before_train: false, save_freq: 1}
            eval: {tasks: 2, k: 2, temperature: 1.0, top_p: 1.0}
            sft: {steps: 1, batch_size: 2}
            metrics: {progress_bar: false, tensorboard: false}
            """;

    Path config() throws Exception {
        Path p = dir.resolve("run.yaml");
        if (!Files.exists(p)) Files.writeString(p, YAML);
        return p;
    }

    Cli.Run cli(String command, String... overrides) throws Exception {
        List<String> args = new ArrayList<>(List.of(command, config().toString(), "run.output_dir=" + dir.resolve("runs")));
        args.addAll(List.of(overrides));
        return Cli.run(args.toArray(String[]::new));
    }

    static void fails(Cli.Run r, String... parts) {
        assertEquals(1, r.exit(), r.err());
        for (String p : parts) assertTrue(r.err().contains(p), "'" + p + "' in: " + r.err());
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aSecondProcessOnALockedRunFolderStopsNamingTheFirst() throws Exception {
        Path runDir = dir.resolve("runs/lock");
        Process first = new ProcessBuilder(Child.command("train", config().toString(), "run.output_dir=" + dir.resolve("runs"),
                "trainer.steps=100000")).redirectErrorStream(true).redirectOutput(dir.resolve("first.log").toFile()).start();
        try {
            Path lockFile = runDir.resolve(RunLock.FILE);
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            String owner = "pid " + first.pid() + ":";
            while (!(Files.isRegularFile(lockFile) && Files.readString(lockFile).startsWith(owner))) {
                assertTrue(first.isAlive(), () -> "the first run ended: " + read(dir.resolve("first.log")));
                assertTrue(System.nanoTime() < deadline, "the first run did not take the lock");
                Thread.sleep(100);
            }
            for (String command : List.of("train", "sft", "eval")) {
                fails(cli(command), "run folder " + runDir + " is in use by another drmas process (" + owner, "train");
            }
            // its checkpoints can be evaluated meanwhile, under another name: eval says how
            Path step1 = runDir.resolve("checkpoints/step_000001");
            while (!Files.isRegularFile(step1.resolve("trainer_state.json"))) {
                assertTrue(first.isAlive(), () -> "the first run ended: " + read(dir.resolve("first.log")));
                assertTrue(System.nanoTime() < deadline, "the first run saved no checkpoint");
                Thread.sleep(100);
            }
            fails(cli("eval"), "To evaluate one of its checkpoints while it trains: drmas eval with another run.name and run.resume="
                    + runDir.resolve("checkpoints/step_"));
            java.io.ByteArrayOutputStream printed = new java.io.ByteArrayOutputStream();
            java.io.PrintStream stdout = System.out;
            System.setOut(new java.io.PrintStream(printed, true, StandardCharsets.UTF_8));
            Cli.Run peek;
            try {
                peek = cli("eval", "run.name=peek", "run.resume=" + step1);
            } finally {
                System.setOut(stdout);
            }
            assertEquals(0, peek.exit(), peek.err());
            assertTrue(printed.toString(StandardCharsets.UTF_8).lines().anyMatch("step 1"::equals), printed.toString(StandardCharsets.UTF_8));
        } finally {
            first.destroyForcibly().waitFor();  // kill -9: the OS drops the lock with the process
        }
        Cli.Run after = cli("eval", "--allow-random");
        assertEquals(0, after.exit(), after.err());
    }

    @Test
    void aRunFolderThatCannotBeMadeIsNamedWithItsKey() throws Exception {
        fails(cli("train", "run.output_dir=/proc/drmas-no-such"), "run folder /proc/drmas-no-such/lock (run.output_dir/run.name)",
                "cannot create it");
        Path file = dir.resolve("a-file");
        Files.writeString(file, "x");
        fails(cli("train", "run.output_dir=" + file), "run folder " + file.resolve("lock") + " (run.output_dir/run.name)", "Not a directory");
    }

    @Test
    void anImmutableRunFolderIsNamedBeforeAnyWork() throws Exception {
        Path run = Files.createDirectories(dir.resolve("runs/lock"));
        Process p = new ProcessBuilder("chattr", "+i", run.toString()).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        assumeTrue(p.waitFor() == 0, "chattr +i needs root and ext2/3/4; skipped");
        try {
            fails(cli("train"), "run folder " + run + " (run.output_dir/run.name) is not writable", "drmas.lock: Operation not permitted");
        } finally {
            new ProcessBuilder("chattr", "-i", run.toString()).start().waitFor();
        }
    }

    @Test
    void aCheckpointsFolderThatCannotBeWrittenStopsTheRunAtStart() throws Exception {
        Path cps = dir.resolve("runs/lock/checkpoints");
        Files.createDirectories(cps);
        Process p = new ProcessBuilder("chattr", "+i", cps.toString()).redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        assumeTrue(p.waitFor() == 0, "chattr +i needs root and ext2/3/4; skipped");
        try {
            Cli.Run r = cli("train");
            assertEquals(3, r.exit(), r.err());
            assertTrue(r.err().contains("checkpoints folder " + cps + " is not writable"), r.err());
            assertTrue(!Files.exists(dir.resolve("runs/lock/metrics.jsonl")) || Files.size(dir.resolve("runs/lock/metrics.jsonl")) == 0,
                    "no step may run before the check");
        } finally {
            new ProcessBuilder("chattr", "-i", cps.toString()).start().waitFor();
        }
    }

    @Test
    void configFilesThatAreFoldersOrNotUtf8() throws Exception {
        fails(Cli.run("train", dir.toString()), dir + ": is a folder, not a config file");
        Path latin = dir.resolve("latin.yaml");
        Files.write(latin, "run:\n  name: caf\u00e9\n".getBytes(StandardCharsets.ISO_8859_1));
        fails(Cli.run("train", latin.toString()), "latin.yaml:2:12: not UTF-8 text (byte 0xe9)");
    }

    @Test
    void badValuesNameTheirKeyAndOverride() throws Exception {
        fails(cli("train", "+agents.2.model=policy"), "override '+agents.2.model=policy': agents[2].id: is required");
        fails(cli("train", "models.policy.optim.lr=1e300"), "models.policy.optim.lr: must be <= 3.4028235E38 (LibTorch takes it as a float32), got 1.0E300");
        String search = "orchestra.name=search";
        for (String url : List.of("http://", "http://[::1")) {
            fails(cli("train", search, "data.synthetic=null", "orchestra.options.retriever.type=http", "orchestra.options.retriever.url=" + url),
                    "orchestra.options.retriever.url: '" + url + "' is not a valid URL");
        }
        fails(cli("train", search, "data.synthetic=null", "orchestra.options.retriever.type=http",
                "orchestra.options.retriever.url=http://127.0.0.1:99999/retrieve"), "orchestra.options.retriever.url", "port 99999 is outside 1..65535");
        fails(cli("train", "run.name=../escaped"), "run.name: '../escaped' would put the run folder outside run.output_dir");
        fails(cli("train", "run.name=/tmp/abs"), "run.name: '/tmp/abs' would put the run folder outside run.output_dir");
        assertTrue(!Files.exists(dir.resolve("escaped")));
    }

    @Test
    void configsThatWouldTrainOnNothingOrNeverEnd() throws Exception {
        fails(cli("train", "rollout.rollouts_per_task=1", "algorithm.mode=grpo"), "rollout.rollouts_per_task: is 1",
                "algorithm.mode grpo gives every advantage 0");
        // Dr. MAS with one rollout still learns from agents acting several times a trajectory: a warning
        var saved = System.err;
        var captured = new java.io.ByteArrayOutputStream();
        System.setErr(new java.io.PrintStream(captured, true, StandardCharsets.UTF_8));
        Cli.Run one;
        try {
            one = cli("train", "rollout.rollouts_per_task=1", "trainer.steps=1", "run.name=one-rollout");
        } finally {
            System.setErr(saved);
        }
        assertEquals(0, one.exit(), one.err());
        assertTrue(captured.toString(StandardCharsets.UTF_8).contains("drmas: warning: rollout.rollouts_per_task is 1"), captured.toString());
        // issue 20 case 7: turns past 63 would reuse the next trajectory's random stream
        fails(cli("train", "orchestra.options.max_loops=33"), "orchestra.options: workflow 'math' can take up to 65 agent turns",
                "hold at most 64");
        fails(cli("train", "orchestra.options.max_loops=1000"), "orchestra.options:");
        fails(cli("train", "orchestra.name=search", "data.synthetic=null", "orchestra.options.max_turns=1000"), "orchestra.options:");
        fails(cli("train", "rollout.max_new_tokens=100000000", "models.policy.size.max_positions=100000400"),
                "rollout.max_new_tokens: a batch of", "rollout.max_prompt_tokens 300 + rollout.max_new_tokens 100000000");
        // bounded by rollout.max_batch_tokens, a batch holds that many slots whatever the request count, and the error names it
        fails(cli("train", "rollout.max_new_tokens=1000000000", "models.policy.size.max_positions=1000000400",
                "rollout.max_batch_tokens=2147483647"), "rollout.max_batch_tokens: a batch of at most 2147483647 token slots,"
                + " more than a Java array holds");
    }

    @Test
    void evaluationBatchesCountWhereTheyRun() throws Exception {
        // an evaluation batch too large to generate stops `drmas eval`, not a training run that never evaluates
        Cli.Run train = cli("train", "eval.samples=10000000", "eval.k=1", "trainer.steps=1");
        assertEquals(0, train.exit(), train.err());
        fails(cli("eval", "eval.samples=10000000", "eval.k=1"), "rollout.max_new_tokens: a batch of 10000000 requests (eval.chunk_tasks × eval.samples)",
                "more than a Java array holds");
        // nothing held out: an error, not an empty table and exit 0
        fails(cli("eval", "--allow-random", "run.name=no-test", "orchestra.name=search", "data.synthetic=null", "data.synthetic.test_size=0"),
                "workflow 'search' has no held-out tasks to evaluate here");
    }

    @Test
    void aSecondWarmStartInOneRunFolderIsRefused() throws Exception {
        // it would train the first one's weights again on the same demonstrations (same seed, same tasks)
        Cli.Run first = cli("sft", "run.name=twice");
        assertEquals(0, first.exit(), first.err());
        Path models = dir.resolve("runs/twice/sft/models");
        assertTrue(Files.isDirectory(models));
        fails(cli("sft", "run.name=twice"), "run folder " + dir.resolve("runs/twice") + " has a warm start already (" + models,
                "drmas sft would train it again on the same demonstrations. To start it over, delete " + dir.resolve("runs/twice/sft"));
        // deleted, it starts over
        dev.drmas.train.Checkpoints.deleteTree(dir.resolve("runs/twice/sft"));
        Cli.Run again = cli("sft", "run.name=twice");
        assertEquals(0, again.exit(), again.err());
    }

    @Test
    void evalOfARunWithNothingTrainedIsRefused() throws Exception {
        fails(cli("eval"), "has no checkpoint, and model(s) policy have no path and no warm start", "--allow-random");
        Cli.Run sft = cli("sft");
        assertEquals(0, sft.exit(), sft.err());
        java.io.ByteArrayOutputStream printed = new java.io.ByteArrayOutputStream();
        java.io.PrintStream stdout = System.out;
        System.setOut(new java.io.PrintStream(printed, true, StandardCharsets.UTF_8));
        Cli.Run eval;
        try {
            eval = cli("eval", "eval.chunk_tasks=1");  // the warm start is something trained
        } finally {
            System.setOut(stdout);
        }
        assertEquals(0, eval.exit(), eval.err());
        // the results outlive the terminal: every printed metric in eval/step_0.json, each task's counts beside it
        String out = printed.toString(StandardCharsets.UTF_8);
        assertTrue(out.contains("eval: chunk 1 of 2 done, 1 of 2 tasks, avg@2 so far "), out);
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        var written = json.readTree(dir.resolve("runs/lock/eval/step_0.json").toFile());
        assertEquals(0, written.get("step").asInt());
        assertTrue(written.get("checkpoint").isNull(), written.toString());
        assertEquals(2, written.get("eval").get("samples").asInt());
        List<String> printedMetrics = out.lines().filter(l -> l.startsWith("  eval/")).toList();
        assertEquals(written.get("metrics").size(), printedMetrics.size() + 1, out);  // + time/eval_s
        for (String l : printedMetrics) {
            String[] kv = l.strip().split("\\s+");
            assertEquals(Double.parseDouble(kv[1]), written.get("metrics").get(kv[0]).asDouble(), 5e-5, kv[0]);
        }
        try (var files = Files.list(dir.resolve("runs/lock/eval"))) {
            assertEquals(List.of("step_0.json", "step_0.tasks.jsonl"), files.map(f -> f.getFileName().toString()).sorted().toList(),
                    "the chunks kept on the way are gone");
        }
        List<String> tasks = Files.readAllLines(dir.resolve("runs/lock/eval/step_0.tasks.jsonl"));
        assertEquals(2, tasks.size(), tasks.toString());
        double right = 0;
        for (String t : tasks) {
            var o = json.readTree(t);
            assertEquals(2, o.get("n").asInt(), t);
            assertTrue(o.get("id").isTextual(), t);
            right += o.get("correct").asInt();
        }
        assertEquals(written.get("metrics").get("eval/avg@2").asDouble(), right / 4, 1e-12);
    }

    private static String read(Path p) {
        try {
            return Files.readString(p);
        } catch (Exception e) {
            return "(" + e + ")";
        }
    }
}
