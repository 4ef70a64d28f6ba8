// DistributedTrainingTest.java — data-parallel training over the real Gloo process group on
// 127.0.0.1, with the ranks as child JVMs (`drmas launch`, as a user runs it): two ranks train to
// the same weights and log the same merged metrics as one process on the same global batch (and
// `drmas launch --eval` prints one process's `drmas eval` results of that checkpoint), a
// rank killed mid-run ends the other with an error naming it within distributed.timeout_s, and one
// whose setup of the run folder fails ends the other at once with its reason. The
// search workload (three models, BM25 on every rank) likewise. A sharded run resumes on two ranks to
// what it reaches uninterrupted, in fp32 and with bf16 weights and fp32 masters (whose resume is a
// collective: the ranks must open their models together). A port the launcher picked that another
// program takes before rank 0 binds it is picked again.
package dev.drmas.cli;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.model.SafeTensors;
import dev.drmas.model.Tensors;
import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

class DistributedTrainingTest {
    @TempDir
    Path dir;

    // 5 tasks × 2 rollouts: rank 0 gets uids 0-1, rank 1 uids 2-4 (uneven shares); mini-batches of
    // 7 rows cut across both ranks' rows; 3 eval tasks split 1/2. A random tiny model writes no valid
    // answer in 6 tokens, so every score is the invalid penalty and every advantage 0: the gradient
    // comes from the entropy bonus, which is normalised by the mini-batch's token count over all
    // ranks, and PPO's ratio terms (ppo_kl) still differ from 0 in the second epoch
    static final String YAML = """
            run: {name: dp, seed: 5, threads: 1, device: cpu}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 30, test_size: 3}
            models:
              policy:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
                optim: {lr: 1.0e-3, weight_decay: 0.0, grad_clip: 1.0}
            agents:
              - {id: solver, role: solver, model: policy}
              - {id: verifier, role: verifier, model: policy}
            rollout: {tasks_per_step: 5, rollouts_per_task: 2, temperature: 1.0, max_new_tokens: 6, max_prompt_tokens: 300}
            algorithm: {mode: drmas}
            ppo: {epochs: 2, mini_batch_size: 7, micro_batch_size: 3, entropy_coef: 0.01}
            trainer: {steps: 2, eval_freq: 2, eval_before_train: false, save_freq: 1}
            eval: {tasks: 3, k: 2, samples: 2, temperature: 1.0, top_p: 1.0}
            metrics: {progress_bar: false, tensorboard: false}
            distributed: {timeout_s: 60, checksum_freq: 1}
            """;

    @Test
    @Timeout(value = 360, unit = TimeUnit.SECONDS)
    void twoRanksTrainToTheSameWeightsAndMetricsAsOne() throws Exception {
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        Cli.Run one = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("one"));
        assertEquals(0, one.exit(), one.err());

        Cli.Run two = launch(config, dir.resolve("two"));
        assertEquals(0, two.exit(), two.out() + two.err());
        assertTrue(two.out().contains("[rank1] drmas: rank 1 of 2 joined"), two.out());

        Path a = dir.resolve("one/dp/checkpoints"), b = dir.resolve("two/dp/checkpoints");
        Map<String, float[]> w1 = weights(a.resolve("step_000001")), w2a = weights(a.resolve("step_000002")),
                w2b = weights(b.resolve("step_000002"));
        // the test can fail: the second step moved the weights well beyond the tolerance
        assertTrue(maxDiff(w1, w2a) > 1e-4, "step 2 changed the weights by only " + maxDiff(w1, w2a));
        double d = maxDiff(w2a, w2b);
        assertTrue(d <= 1e-5, "1 rank vs 2 ranks: max |Δw| = " + d);

        // merged batch metrics equal the single-process ones
        Map<Long, JsonNode> m1 = metrics(dir.resolve("one/dp")), m2 = metrics(dir.resolve("two/dp"));
        int compared = sameMetrics(m1, m2, 2);
        for (String k : List.of("reward/mean", "rows", "agent/solver/score_std", "agent/verifier/sigma", "model/policy/pg_loss",
                "model/policy/grad_norm", "eval/pass@1", "perf/prompt_tokens")) {
            assertTrue(m1.get(2L).has(k), k + " missing");
        }
        assertTrue(compared > 30, "compared only " + compared + " metrics");
        assertTrue(m1.get(2L).get("model/policy/grad_norm").asDouble() > 0, "no gradient: " + m1.get(2L));
        assertTrue(m2.get(2L).has("time/collective_s"));

        // `drmas eval` of the last checkpoint: as two ranks (launch --eval, each a share of the tasks) it prints
        // what one process prints, from rank 0 alone, and both what training's evaluation of that step logged
        Cli.Run e1 = withStdout(() -> Cli.run("eval", config.toString(), "run.output_dir=" + dir.resolve("one")));
        assertEquals(0, e1.exit(), e1.out() + e1.err());
        Cli.Run e2 = launch(config, dir.resolve("two"), "--eval");
        assertEquals(0, e2.exit(), e2.out() + e2.err());
        assertTrue(e2.out().contains("[rank1] drmas: rank 1 of 2 joined"), e2.out());
        List<String> one1 = evalLines(e1.out(), ""), two0 = evalLines(e2.out(), "[rank0] ");
        assertTrue(one1.size() >= 3 && one1.contains("step 2"), e1.out());
        // (a random model answers nothing right, so the rates are 0 here: the task count, 1 + 2 from the two ranks'
        // shares, is what shows that rank 0 prints the merged counts)
        assertTrue(one1.contains("eval/tasks 3.0000"), one1.toString());
        assertEquals(one1, two0, e2.out());
        assertEquals(List.of(), evalLines(e2.out(), "[rank1] "), "rank 1 printed results: " + e2.out());
        // rank 0 wrote the results once, and removed the chunks it kept on the way
        try (var files = Files.list(dir.resolve("two/dp/eval"))) {
            assertEquals(List.of("step_2.json", "step_2.tasks.jsonl"), files.map(f -> f.getFileName().toString()).sorted().toList());
        }
        assertEquals(3, Files.readAllLines(dir.resolve("two/dp/eval/step_2.tasks.jsonl")).size());
        // --allow-random reaches the ranks: a run folder with nothing trained is evaluated instead of refused
        Cli.Run fresh = launch(config, dir.resolve("fresh"), "--eval", "--allow-random");
        assertEquals(0, fresh.exit(), fresh.out() + fresh.err());
        assertTrue(evalLines(fresh.out(), "[rank0] ").contains("eval/tasks 3.0000"), fresh.out());
        String passAt1 = one1.stream().filter(l -> l.startsWith("eval/pass@1 ")).findFirst().orElseThrow();
        assertEquals(m1.get(2L).get("eval/pass@1").asDouble(), Double.parseDouble(passAt1.split("\\s+")[1]), 5e-5, passAt1);
    }

    /** {@code run}'s result with what the command printed to System.out (`drmas eval` prints its results there) as its out(). */
    private static Cli.Run withStdout(java.util.function.Supplier<Cli.Run> run) {
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream before = System.out;
        System.setOut(new PrintStream(captured, true, StandardCharsets.UTF_8));
        try {
            Cli.Run r = run.get();
            return new Cli.Run(r.exit(), captured.toString(StandardCharsets.UTF_8) + r.out(), r.err());
        } finally {
            System.setOut(before);
        }
    }

    /** The result lines of `drmas eval` in {@code out} ("step N", then "eval/... value"), of the lines that begin with {@code prefix}. */
    private static List<String> evalLines(String out, String prefix) {
        List<String> r = new ArrayList<>();
        for (String l : out.split("\n")) {
            if (!l.startsWith(prefix)) continue;
            String t = l.substring(prefix.length()).trim();
            if (t.startsWith("step ") || t.startsWith("eval/")) r.add(t.replaceAll("\\s+", " "));
        }
        return r;
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aRunResumesWithAnotherWorldSize() throws Exception {
        // step 1 on two ranks, step 2 resumed by one process (and the other way round) reach the
        // weights of two uninterrupted steps in one process: the saved state (step, data position,
        // optimiser moments) is global
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        Cli.Run one = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("one"), "trainer.eval_freq=0");
        assertEquals(0, one.exit(), one.err());
        Map<String, float[]> w1 = weights(dir.resolve("one/dp/checkpoints/step_000001")),
                w2 = weights(dir.resolve("one/dp/checkpoints/step_000002"));
        assertTrue(maxDiff(w1, w2) > 1e-4, "step 2 changed the weights by only " + maxDiff(w1, w2));

        Cli.Run first = launch(config, dir.resolve("twoThenOne"), "trainer.steps=1", "trainer.eval_freq=0");
        assertEquals(0, first.exit(), first.out() + first.err());
        Path state1 = dir.resolve("twoThenOne/dp/checkpoints/step_000001/trainer_state.json");
        var written = Files.getLastModifiedTime(state1);
        Thread.sleep(20);
        Cli.Run rest = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("twoThenOne"), "trainer.eval_freq=0");
        assertEquals(0, rest.exit(), rest.err());
        // (a fresh start would reach the same weights, but it would write step 1 again)
        assertEquals(written, Files.getLastModifiedTime(state1), "the 1-process run started afresh instead of resuming");
        double d = maxDiff(w2, weights(dir.resolve("twoThenOne/dp/checkpoints/step_000002")));
        assertTrue(d <= 1e-5, "2 ranks then 1: max |Δw| = " + d);

        Cli.Run head = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("oneThenTwo"), "trainer.steps=1",
                "trainer.eval_freq=0");
        assertEquals(0, head.exit(), head.err());
        Cli.Run tail = launch(config, dir.resolve("oneThenTwo"), "trainer.eval_freq=0");
        assertEquals(0, tail.exit(), tail.out() + tail.err());
        // (a fresh start would reach the same weights: the log tells that both ranks resumed)
        assertTrue(tail.out().contains("[rank0] drmas: resumed") && tail.out().contains("[rank1] drmas: resumed"), tail.out());
        d = maxDiff(w2, weights(dir.resolve("oneThenTwo/dp/checkpoints/step_000002")));
        assertTrue(d <= 1e-5, "1 rank then 2: max |Δw| = " + d);
    }

    @Test
    @Timeout(value = 360, unit = TimeUnit.SECONDS)
    void threeShardedRanksTrainAsOneProcess() throws Exception {
        // the GPU configs run 8 ranks: an odd count splits what 2 split evenly. 5 tasks a step over 3 ranks (1, 2, 2),
        // 3 eval tasks (1 each), mini-batches of 7 rows across the three, the optimiser state in 3 uneven shards
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        Cli.Run one = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("one"));
        assertEquals(0, one.exit(), one.err());
        Cli.Run three = launch(3, config, dir.resolve("three"), "distributed.shard_optimizer=true");
        assertEquals(0, three.exit(), three.out() + three.err());
        assertTrue(three.out().contains("[rank2] drmas: rank 2 of 3 joined"), three.out());
        Map<String, float[]> w1 = weights(dir.resolve("one/dp/checkpoints/step_000001")),
                w2 = weights(dir.resolve("one/dp/checkpoints/step_000002"));
        assertTrue(maxDiff(w1, w2) > 1e-4, "step 2 changed the weights by only " + maxDiff(w1, w2));
        double d = maxDiff(w2, weights(dir.resolve("three/dp/checkpoints/step_000002")));
        assertTrue(d <= 1e-5, "1 rank vs 3 sharded ranks: max |Δw| = " + d);
        int compared = sameMetrics(metrics(dir.resolve("one/dp")), metrics(dir.resolve("three/dp")), 2);
        assertTrue(compared > 30, "compared only " + compared + " metrics");
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aShardedOptimizerTrainsAndResumesLikeOneProcess() throws Exception {
        // distributed.shard_optimizer: step 1 on two ranks with the optimiser state sharded, step 2
        // resumed on two sharded ranks, and (from the same checkpoint) on one unsharded process: both
        // reach the weights of one process's two steps; each rank logs half of the optimiser state
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        Cli.Run one = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("one"), "trainer.eval_freq=0");
        assertEquals(0, one.exit(), one.err());
        Map<String, float[]> w1 = weights(dir.resolve("one/dp/checkpoints/step_000001")),
                w2 = weights(dir.resolve("one/dp/checkpoints/step_000002"));
        assertTrue(maxDiff(w1, w2) > 1e-4, "step 2 changed the weights by only " + maxDiff(w1, w2));

        Cli.Run first = launch(config, dir.resolve("sharded"), "trainer.steps=1", "trainer.eval_freq=0",
                "distributed.shard_optimizer=true");
        assertEquals(0, first.exit(), first.out() + first.err());
        // the checkpoint is whole: copy it for the unsharded resume
        copyTree(dir.resolve("sharded"), dir.resolve("shardedThenOne"));
        Cli.Run rest = launch(config, dir.resolve("sharded"), "trainer.eval_freq=0", "distributed.shard_optimizer=true");
        assertEquals(0, rest.exit(), rest.out() + rest.err());
        assertTrue(rest.out().contains("[rank1] drmas: resumed"), rest.out());
        double d = maxDiff(w2, weights(dir.resolve("sharded/dp/checkpoints/step_000002")));
        assertTrue(d <= 1e-5, "2 sharded ranks vs 1 process: max |Δw| = " + d);

        Cli.Run alone = Cli.run("train", config.toString(), "run.output_dir=" + dir.resolve("shardedThenOne"), "trainer.eval_freq=0");
        assertEquals(0, alone.exit(), alone.err());
        d = maxDiff(w2, weights(dir.resolve("shardedThenOne/dp/checkpoints/step_000002")));
        assertTrue(d <= 1e-5, "2 sharded ranks then 1 unsharded process: max |Δw| = " + d);

        long params = 0;
        for (float[] v : w2.values()) params += v.length;
        JsonNode shardedStep = metrics(dir.resolve("sharded/dp")).get(2L), oneStep = metrics(dir.resolve("one/dp")).get(2L);
        // fp32 masters and two moments of rank 0's half (rank 0 logs its own state)
        assertEquals(12.0 * ((params + 1) / 2), shardedStep.get("memory/policy/optimizer_bytes").asDouble(), shardedStep.toString());
        assertEquals(8.0 * params, oneStep.get("memory/policy/optimizer_bytes").asDouble(), "unsharded fp32: two moments");
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aShardedBf16RunResumesOnTwoRanksAsItRunsUninterrupted() throws Exception {
        // bf16 weights with fp32 masters (the shipped GPU configs' precision), the optimiser sharded
        // over two ranks, a KL reference: two steps uninterrupted, and the run folder as a crash after
        // step 1's checkpoint leaves it, resumed on two ranks, reach the same masters and weights. The
        // resume spreads each rank's part of the masters over every rank's weights, a collective: when
        // rank 0 opened the models alone, it paired with the other ranks' barrier and the resume hung
        // until distributed.timeout_s
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        String[] bf16 = {"trainer.eval_freq=0", "distributed.shard_optimizer=true", "distributed.timeout_s=30",
                "models.policy.dtype=bfloat16", "models.policy.master_dtype=float32", "ppo.reference_model=true", "ppo.kl_coef=0.1"};
        Cli.Run whole = launch(config, dir.resolve("whole"), bf16);
        assertEquals(0, whole.exit(), whole.out() + whole.err());
        copyTree(dir.resolve("whole"), dir.resolve("resumed"));
        dev.drmas.train.Checkpoints.deleteTree(dir.resolve("resumed/dp/checkpoints/step_000002"));
        Cli.Run rest = launch(config, dir.resolve("resumed"), bf16);
        assertEquals(0, rest.exit(), rest.out() + rest.err());
        assertTrue(rest.out().contains("[rank0] drmas: resumed") && rest.out().contains("[rank1] drmas: resumed"), rest.out());

        Path a = dir.resolve("whole/dp/checkpoints"), b = dir.resolve("resumed/dp/checkpoints");
        Map<String, float[]> m1 = masters(a.resolve("step_000001")), m2 = masters(a.resolve("step_000002"));
        // the test can fail: step 2 moved the masters well beyond the tolerance, and they are not the bf16 weights
        assertTrue(maxDiff(m1, m2) > 1e-4, "step 2 changed the masters by only " + maxDiff(m1, m2));
        assertTrue(maxDiff(m2, weights(a.resolve("step_000002"))) > 0, "the checkpoint's masters are its bf16 weights");
        double d = maxDiff(m2, masters(b.resolve("step_000002")));
        assertTrue(d <= 1e-6, "uninterrupted vs resumed on 2 sharded ranks: masters' max |Δ| = " + d);
        d = maxDiff(weights(a.resolve("step_000002")), weights(b.resolve("step_000002")));
        assertTrue(d <= 1e-6, "uninterrupted vs resumed on 2 sharded ranks: bf16 weights' max |Δ| = " + d);
    }

    /** The fp32 master weights of model "policy" in {@code checkpoint}. */
    static Map<String, float[]> masters(Path checkpoint) throws Exception {
        return tensors(checkpoint.resolve("master/policy"));
    }

    private static void copyTree(Path from, Path to) throws java.io.IOException {
        try (Stream<Path> s = Files.walk(from)) {
            for (Path p : s.toList()) {
                Path q = to.resolve(from.relativize(p).toString());
                if (Files.isDirectory(p)) Files.createDirectories(q);
                else if (!p.getFileName().toString().equals(dev.drmas.train.RunLock.FILE)) Files.copy(p, q);
            }
        }
    }

    /** `drmas launch --nproc 2` (one thread each) of {@code config} into {@code out}; the ranks' output is in out(). */
    static Cli.Run launch(Path config, Path out, String... overrides) {
        return launch(2, config, out, overrides);
    }

    /** As above with {@code ranks} ranks. */
    static Cli.Run launch(int ranks, Path config, Path out, String... overrides) {
        List<String> args = new ArrayList<>(List.of("launch", "--nproc", Integer.toString(ranks), "--threads-per-rank", "1", config.toString(),
                "run.output_dir=" + out));
        args.addAll(List.of(overrides));
        ByteArrayOutputStream captured = new ByteArrayOutputStream();
        PrintStream before = LaunchCommand.out;
        LaunchCommand.out = new PrintStream(captured, true, StandardCharsets.UTF_8);
        try {
            Cli.Run r = Cli.run(args.toArray(String[]::new));
            return new Cli.Run(r.exit(), captured.toString(StandardCharsets.UTF_8) + r.out(), r.err());
        } finally {
            LaunchCommand.out = before;
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void aPortTakenBeforeRank0BindsItIsPickedAgainUnlessTheUserGaveIt() throws Exception {
        // another program binds the port the launcher picked before rank 0 can (here: before the launcher picks it):
        // rank 0 stops at the store, and the launcher starts the ranks again on another port
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        java.util.function.IntSupplier before = LaunchCommand.portPicker;
        try (var taken = new java.net.ServerSocket()) {
            taken.bind(new java.net.InetSocketAddress(0));
            int[] picks = {0};
            LaunchCommand.portPicker = () -> picks[0]++ == 0 ? taken.getLocalPort() : before.getAsInt();
            Cli.Run r = launch(config, dir.resolve("picked"), "--eval", "--allow-random");
            assertEquals(0, r.exit(), r.out() + r.err());
            assertEquals(2, picks[0], r.out());
            assertTrue(r.out().contains("drmas launch: port " + taken.getLocalPort() + " was taken by another program before rank 0 "
                    + "could bind it; starting the 2 ranks again on port "), r.out());
            assertTrue(evalLines(r.out(), "[rank0] ").contains("eval/tasks 3.0000"), r.out());
            // a port the user gave is theirs to change: an error, no retry
            picks[0] = 0;
            Cli.Run given = launch(config, dir.resolve("given"), "--eval", "--allow-random", "--master-port",
                    Integer.toString(taken.getLocalPort()));
            assertEquals(1, given.exit(), given.out() + given.err());
            assertEquals(0, picks[0]);
            assertTrue(given.out().contains("[rank0] drmas eval: MASTER_PORT " + taken.getLocalPort() + " is not free"), given.out());
            assertTrue(!given.out().contains("again on port"), given.out());
        } finally {
            LaunchCommand.portPicker = before;
        }
    }

    @Test
    @Timeout(value = 180, unit = TimeUnit.SECONDS)
    void aKilledRankEndsTheOtherWithItsName() throws Exception {
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        int port;
        try (var s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        List<Process> ranks = new ArrayList<>();
        List<List<String>> out = new ArrayList<>();
        try {
            for (int r = 0; r < 2; r++) {
                List<String> cmd = LaunchCommand.javaCommand();
                cmd.addAll(List.of("train", config.toString(), "run.output_dir=" + dir.resolve("killed"), "trainer.steps=200",
                        "trainer.save_freq=0", "trainer.eval_freq=0", "distributed.timeout_s=10"));
                ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
                pb.environment().putAll(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                        "RANK", Integer.toString(r), "WORLD_SIZE", "2", "OMP_NUM_THREADS", "1"));
                Process p = pb.start();
                ranks.add(p);
                List<String> lines = new CopyOnWriteArrayList<>();
                out.add(lines);
                Thread t = new Thread(() -> {
                    try (BufferedReader in = new BufferedReader(new InputStreamReader(p.getInputStream(), StandardCharsets.UTF_8))) {
                        for (String l; (l = in.readLine()) != null; ) lines.add(l);
                    } catch (java.io.IOException e) {
                        // process gone
                    }
                });
                t.setDaemon(true);
                t.start();
            }
            // both joined and rank 0 has written a training step's metrics: kill rank 1 mid-run
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            Path metrics = dir.resolve("killed/dp/metrics.jsonl");
            while (!(out.get(1).stream().anyMatch(l -> l.contains("joined")) && Files.exists(metrics) && Files.size(metrics) > 0)) {
                assertTrue(System.nanoTime() < deadline, "ranks did not start training: " + out);
                assertTrue(ranks.get(0).isAlive() && ranks.get(1).isAlive(), "a rank ended early: " + out);
                Thread.sleep(100);
            }
            ranks.get(1).destroyForcibly();
            long killed = System.nanoTime();
            // rank 0 must end by itself, within the timeout plus the rest of a training step
            assertTrue(ranks.get(0).waitFor(60, TimeUnit.SECONDS), "rank 0 still runs 60 s after rank 1 was killed");
            double s = (System.nanoTime() - killed) / 1e9;
            String log0 = String.join("\n", out.get(0));
            assertNotEquals(0, ranks.get(0).exitValue(), log0);
            assertTrue(log0.contains("rank 1") && log0.contains("failed"), log0);
            System.out.printf("rank 0 stopped %.1f s after rank 1 was killed%n", s);
        } finally {
            ranks.forEach(Process::destroyForcibly);
        }
    }

    @Test
    @Timeout(value = 120, unit = TimeUnit.SECONDS)
    void rank0sFailedSetupStopsTheOtherRankWithItsReason() throws Exception {
        // rank 0 cannot write the built-in tokenizer (a file stands where its folder goes) and its process ends: rank
        // 1 must stop at once naming rank 0 and why, which only rank 0's store carries (rank 0 keeps it up until rank
        // 1 has read it); it used to say only that rank 0 died
        Path config = dir.resolve("dp.yaml");
        Files.writeString(config, YAML);
        Files.createDirectories(dir.resolve("setup/dp"));
        Files.writeString(dir.resolve("setup/dp/tokenizer"), "not a folder");
        int port;
        try (var s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        List<Process> ranks = new ArrayList<>();
        try {
            for (int r = 0; r < 2; r++) {
                List<String> cmd = LaunchCommand.javaCommand();
                cmd.addAll(List.of("train", config.toString(), "run.output_dir=" + dir.resolve("setup"), "distributed.timeout_s=20"));
                ProcessBuilder pb = new ProcessBuilder(cmd).redirectErrorStream(true);
                pb.environment().putAll(Map.of("MASTER_ADDR", "127.0.0.1", "MASTER_PORT", Integer.toString(port),
                        "RANK", Integer.toString(r), "WORLD_SIZE", "2", "OMP_NUM_THREADS", "1"));
                ranks.add(pb.start());
            }
            long[] ended = new long[2];
            String[] log = new String[2];
            for (int r = 0; r < 2; r++) {
                log[r] = new String(ranks.get(r).getInputStream().readAllBytes(), StandardCharsets.UTF_8);  // until it ends
                assertTrue(ranks.get(r).waitFor(60, TimeUnit.SECONDS), "rank " + r + " still runs: " + log[r]);
                ended[r] = System.nanoTime();  // rank 1's: when it ended, or when rank 0 did if it ended before
            }
            double after = (ended[1] - ended[0]) / 1e9;
            System.out.printf("rank 1 stopped %.2f s after rank 0 failed%n", after);
            assertTrue(after < 10, "rank 1 ended " + after + " s after rank 0 (distributed.timeout_s 20): " + log[1]);
            String setup = dir.resolve("setup/dp/tokenizer") + ": already exists";
            assertTrue(log[0].contains(setup), log[0]);
            assertNotEquals(0, ranks.get(0).exitValue(), log[0]);
            assertTrue(log[1].contains("rank 1: stopped at rank 0's setup of the run folder") && log[1].contains("rank 0 failed")
                    && log[1].contains(setup), log[1]);
            assertNotEquals(0, ranks.get(1).exitValue(), log[1]);
        } finally {
            ranks.forEach(Process::destroyForcibly);
        }
    }

    @Test
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void searchWorkloadOnTwoRanksMatchesOne() throws Exception {
        // three models, real BM25 on every rank; 3 tasks split 1/2; a random verifier's malformed
        // verdicts count as "no", so searchers act and episodes take two turns (the search metrics
        // are sums per episode merged across ranks); 3 eval tasks split 1/2. With random weights every
        // episode looks alike, so this checks the plumbing (both ranks run the workload, log the same
        // keys and values, and reach the same weights), not the arithmetic of the merge
        List<String> tiny = new ArrayList<>(List.of("run.name=dps", "run.threads=1", "data.synthetic.people=12",
                "data.synthetic.test_size=3", "rollout.tasks_per_step=3", "rollout.rollouts_per_task=2",
                "rollout.max_new_tokens=6", "orchestra.options.malformed_verdict=reject", "orchestra.options.max_turns=2",
                "ppo.mini_batch_size=5", "ppo.micro_batch_size=5", "trainer.steps=2", "trainer.eval_freq=2",
                "trainer.eval_before_train=false", "trainer.save_freq=2", "eval.tasks=3", "eval.k=2",
                "metrics.progress_bar=false", "metrics.tensorboard=false", "distributed.timeout_s=60"));
        for (String m : List.of("verifier_model", "searcher_model", "answerer_model")) {
            tiny.addAll(List.of("models." + m + ".size.hidden=32", "models." + m + ".size.intermediate=64",
                    "models." + m + ".size.layers=1", "models." + m + ".size.kv_heads=1", "models." + m + ".size.heads=2"));
        }
        String config = Path.of("..", "configs", "search-toy-drmas.yaml").toString();
        List<String> a1 = new ArrayList<>(List.of("train", config, "run.output_dir=" + dir.resolve("one")));
        a1.addAll(tiny);
        Cli.Run one = Cli.run(a1.toArray(String[]::new));
        assertEquals(0, one.exit(), one.err());
        Cli.Run two = launch(Path.of(config), dir.resolve("two"), tiny.toArray(String[]::new));
        assertEquals(0, two.exit(), two.out() + two.err());

        Map<Long, JsonNode> m1 = metrics(dir.resolve("one/dps")), m2 = metrics(dir.resolve("two/dps"));
        sameMetrics(m1, m2, 2);
        for (String k : List.of("search/tool_calls", "search/turns", "eval/search/tool_calls", "eval/pass@1")) {
            assertTrue(m1.get(2L).has(k), k + " missing: " + m1.get(2L));
        }
        // a random searcher writes no <search> tag (no tool call), but it takes turns
        assertTrue(m1.get(1L).get("search/turns").asDouble() > 1 && m1.get(1L).get("agent/searcher/rows").asDouble() > 0,
                "the searcher did not act: " + m1.get(1L));
        for (String m : List.of("verifier_model", "searcher_model", "answerer_model")) {
            double d = maxDiff(weights(dir.resolve("one/dps/checkpoints/step_000002"), m),
                    weights(dir.resolve("two/dps/checkpoints/step_000002"), m));
            assertTrue(d <= 1e-5, m + ": 1 rank vs 2 ranks: max |Δw| = " + d);
        }
    }

    /** Asserts that every numeric metric of steps 1..steps (times and rates aside) is the same in both runs; returns how many. */
    static int sameMetrics(Map<Long, JsonNode> m1, Map<Long, JsonNode> m2, int steps) {
        int compared = 0;
        for (long step = 1; step <= steps; step++) {
            JsonNode x = m1.get(step), y = m2.get(step);
            for (Iterator<String> it = x.fieldNames(); it.hasNext(); ) {
                String k = it.next();
                // perf/prompt_tokens is a count (summed over the ranks); the other perf/ keys are rates or depend on each rank's prefix cache
                boolean clock = k.startsWith("perf/") && !k.equals("perf/prompt_tokens");
                if (k.startsWith("time/") || clock || k.startsWith("memory/") || k.equals("step") || !x.get(k).isNumber()) continue;
                assertTrue(y.has(k), "2 ranks do not log " + k);
                double u = x.get(k).asDouble(), v = y.get(k).asDouble();
                assertTrue(Math.abs(u - v) <= 1e-5 + 1e-4 * Math.abs(u), "step " + step + " " + k + ": 1 rank " + u + ", 2 ranks " + v);
                compared++;
            }
        }
        return compared;
    }

    static Map<String, float[]> weights(Path checkpoint) throws Exception {
        return weights(checkpoint, "policy");
    }

    static Map<String, float[]> weights(Path checkpoint, String model) throws Exception {
        return tensors(checkpoint.resolve("models/" + model));
    }

    /** Every tensor of the .safetensors files of {@code folder}, as floats. */
    static Map<String, float[]> tensors(Path folder) throws Exception {
        Map<String, float[]> out = new LinkedHashMap<>();
        try (Stream<Path> files = Files.list(folder)) {
            for (Path f : files.filter(p -> p.toString().endsWith(".safetensors")).sorted().toList()) {
                try (SafeTensors st = SafeTensors.open(f); PointerScope scope = new PointerScope()) {
                    for (String name : st.tensors().keySet()) out.put(name, Tensors.toFloats(st.get(name, ScalarType.Float, new Device("cpu"))));
                }
            }
        }
        assertTrue(!out.isEmpty(), "no tensors in " + folder);
        return out;
    }

    static double maxDiff(Map<String, float[]> a, Map<String, float[]> b) {
        assertEquals(a.keySet(), b.keySet());
        double d = 0;
        for (String k : a.keySet()) {
            float[] x = a.get(k), y = b.get(k);
            assertEquals(x.length, y.length, k);
            for (int i = 0; i < x.length; i++) d = Math.max(d, Math.abs(x[i] - y[i]));
        }
        return d;
    }

    /** The training-step lines of metrics.jsonl by step (eval lines merged in). */
    static Map<Long, JsonNode> metrics(Path run) throws Exception {
        Map<Long, JsonNode> out = new LinkedHashMap<>();
        ObjectMapper json = new ObjectMapper();
        for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
            JsonNode n = json.readTree(line);
            long step = n.get("step").asLong();
            if (out.containsKey(step)) ((com.fasterxml.jackson.databind.node.ObjectNode) out.get(step)).setAll((com.fasterxml.jackson.databind.node.ObjectNode) n);
            else out.put(step, n);
        }
        return out;
    }
}
