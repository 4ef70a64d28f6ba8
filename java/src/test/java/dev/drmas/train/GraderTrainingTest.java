// GraderTrainingTest.java — a grader command (orchestra.options.grader, through
// configs/reward/verl_reward.py; real python3, skipped with a message without one) is the reward of
// training and of evaluation: on the math toy, a reward function that scores a reply by the parity of
// its length gives every row its episode's parity (non-zero advantages, weights that move), and one
// that scores every reply 1 makes a random model's avg@k and pass@k 1, which the built-in check of its
// random replies does not; with a grader's mixed hits, two ranks evaluate what one process does.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assumptions.assumeTrue;

import dev.drmas.agent.Episode;
import dev.drmas.config.RunConfig;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class GraderTrainingTest {
    @TempDir
    Path tmp;

    private RunConfig config(String function, String... more) throws Exception {
        assumeTrue(dev.drmas.workflow.AnswerGraderTest.hasPython(), "no python3 on PATH: the grader command is not tested here");
        Path reward = tmp.resolve("reward.py");
        Files.writeString(reward, """
                def parity(data_source, solution_str, ground_truth, extra_info=None):
                    return 1.0 if len(solution_str) % 2 == 0 else 0.0

                def mixed(data_source, solution_str, ground_truth, extra_info=None):
                    return 1.0 if sum(map(ord, solution_str)) % 2 == 0 else 0.0

                def always(data_source, solution_str, ground_truth, extra_info=None):
                    return {"score": 1.0}
                """);
        String[] o = new String[more.length + 2];
        o[0] = "orchestra.options.grader.command=[python3, " + Path.of("..", "configs", "reward", "verl_reward.py") + ", " + reward + ", "
                + function + "]";
        o[1] = "orchestra.options.invalid_penalty=0";
        System.arraycopy(more, 0, o, 2, more.length);
        return CheckpointRetentionTest.config(tmp.resolve("out"), o);
    }

    @Test
    void theGradersScoresAreTheRewardsOfTraining() throws Exception {
        try (Trainer t = Trainer.open(config("parity", "trainer.steps=1", "trainer.save_freq=0", "rollout.rollouts_per_task=4"),
                TrainerEndToEndTest.QUIET)) {
            Map<String, float[]> before = LearningTest.weights(t);
            t.train();
            RolloutBatch b = t.lastStep.batch();
            int zero = 0, one = 0, row = 0;
            for (Episode e : b.episodes) {
                double parity = e.action().length() % 2 == 0 ? 1.0 : 0.0;
                if (parity == 1.0) one++;
                else zero++;
                for (int s = 0; s < e.steps().size(); s++) assertEquals(parity, b.scores[row++], "a row of trajectory " + e.traj());
            }
            assertEquals(b.scores.length, row);
            assertTrue(zero > 0 && one > 0, "both rewards among the episodes: " + zero + " / " + one);
            float maxAdv = 0;
            for (float a : t.lastStep.adv().advantages()) maxAdv = Math.max(maxAdv, Math.abs(a));
            assertTrue(maxAdv > 0.1, "non-zero advantages: " + maxAdv);
            assertTrue(PpoUpdaterTest.maxMove(before, LearningTest.weights(t)) > 1e-5, "the update moved the weights");
        }
    }

    @Test
    void theGraderDecidesWhatEvaluationCountsAsSolved() throws Exception {
        try (Trainer builtIn = Trainer.open(CheckpointRetentionTest.config(tmp.resolve("builtin"), "eval.tasks=3"), TrainerEndToEndTest.QUIET)) {
            assertTrue(builtIn.evaluate().get("eval/pass@2") < 1.0, "the random model's replies are not all right");
        }
        try (Trainer t = Trainer.open(config("always", "eval.tasks=3"), TrainerEndToEndTest.QUIET)) {
            Map<String, Double> m = t.evaluate();
            assertEquals(1.0, m.get("eval/avg@2"), m.toString());
            assertEquals(1.0, m.get("eval/pass@2"), m.toString());
        }
    }

    /**
     * Two ranks (threads, the real Gloo group) evaluate what one process does, with hits that are
     * neither all 0 nor all 1 (a grader of the parity of the reply's code points' sum: each sample's own draw): three tasks of four samples, shared 1 and 2, so a
     * sample's hit must land in its global slot and its draws be keyed by its global index. (A random
     * model's built-in score is 0 everywhere, which cannot tell.)
     */
    @Test
    @org.junit.jupiter.api.Timeout(value = 200, unit = java.util.concurrent.TimeUnit.SECONDS)
    void twoRanksEvaluateWhatOneProcessDoesWithMixedHits() throws Exception {
        RunConfig cfg = config("mixed", "run.threads=1", "rollout.tasks_per_step=2", "eval.tasks=3", "eval.k=2", "eval.samples=4",
                "eval.temperature=1.0");
        Map<String, Double> alone;
        try (Trainer t = Trainer.open(cfg, TrainerEndToEndTest.QUIET)) {
            alone = t.evaluate();
        }
        double avg = alone.get("eval/avg@4");
        assertTrue(avg > 0 && avg < 1, "mixed hits: " + alone);
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        // the ranks a task at a time: rank 0 tasks 0 and 2, rank 1 task 1 and then an empty chunk
        RunConfig oneAtATime = config("mixed", "run.threads=1", "rollout.tasks_per_step=2", "eval.tasks=3", "eval.k=2", "eval.samples=4",
                "eval.temperature=1.0", "eval.chunk_tasks=1");
        var dc = new dev.drmas.config.DistributedConfig(dev.drmas.config.DistributedConfig.Backend.GLOO, 60, 1, 1, false);
        var ex = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            java.util.List<java.util.concurrent.Future<Object>> fs = new java.util.ArrayList<>();
            for (int r = 0; r < 2; r++) {
                var env = new dev.drmas.dist.DistEnv("127.0.0.1", port, r, 2, r);
                fs.add(ex.submit(() -> {
                    try (var pg = new dev.drmas.dist.ProcessGroup(env, dc, false); Trainer t = Trainer.open(oneAtATime, TrainerEndToEndTest.QUIET, pg)) {
                        return t.evaluate();
                    } catch (Exception e) {
                        return e.toString();
                    }
                }));
            }
            for (var f : fs) {
                Object got = f.get(180, java.util.concurrent.TimeUnit.SECONDS);
                assertTrue(got instanceof Map<?, ?>, String.valueOf(got));
                assertEquals(TasksPerRankTest.withoutTimes(alone), TasksPerRankTest.withoutTimes((Map<?, ?>) got),
                        "two ranks, a task at a time, evaluate what one process does");
            }
        } finally {
            ex.shutdownNow();
        }
    }
    /**
     * `drmas eval` stopped after two of its three chunks continues from there when run again: only the
     * last chunk runs, and the results are those of an evaluation that was not stopped (mixed hits, so a
     * chunk lost or counted twice shows); a line cut short by the stop is dropped, a file whose first
     * line is not the evaluation's is started over, and another evaluation's file is left as it is.
     */
    @Test
    void aStoppedEvaluationContinuesFromItsLastWholeChunk() throws Exception {
        String[] eval = {"run.threads=1", "eval.tasks=3", "eval.k=2", "eval.samples=4", "eval.temperature=1.0"};
        Map<String, Double> whole;
        try (Trainer t = Trainer.open(config("mixed", eval), TrainerEndToEndTest.QUIET)) {
            whole = t.evaluate();
        }
        assertTrue(whole.get("eval/avg@4") > 0 && whole.get("eval/avg@4") < 1, "mixed hits: " + whole);
        String[] chunked = java.util.Arrays.copyOf(eval, eval.length + 1);
        chunked[eval.length] = "eval.chunk_tasks=1";
        Path dir = tmp.resolve("evals");
        Path other = Files.createDirectories(dir).resolve("step_0.0123456789abcdef.partial.jsonl");  // another evaluation's
        Files.writeString(other, "{\"fingerprint\": \"0123456789abcdef\"}\n");
        java.io.ByteArrayOutputStream log = new java.io.ByteArrayOutputStream();
        java.util.function.Supplier<String> printed = () -> log.toString(java.nio.charset.StandardCharsets.UTF_8);
        try (Trainer t = Trainer.open(config("mixed", chunked), new java.io.PrintStream(log, true, java.nio.charset.StandardCharsets.UTF_8))) {
            int[] ran = {0};
            t.evalChunkHook = () -> {
                if (++ran[0] == 2) throw new IllegalStateException("stopped after chunk 2");
            };
            var stopped = org.junit.jupiter.api.Assertions.assertThrows(IllegalStateException.class, () -> t.evaluateTasks(dir));
            assertEquals("stopped after chunk 2", stopped.getMessage());
            List<Path> files;
            try (var l = Files.list(dir)) {
                files = l.filter(p -> !p.equals(other)).toList();
            }
            assertEquals(1, files.size(), files.toString());
            Path partial = files.getFirst();
            assertTrue(partial.getFileName().toString().matches("step_0\\.[0-9a-f]{16}\\.partial\\.jsonl"), partial.toString());
            assertEquals(3, Files.readAllLines(partial).size(), "the fingerprint and two chunks");
            Files.writeString(partial, "{\"chunk\": 2, \"fir", java.nio.file.StandardOpenOption.APPEND);  // the stop cut a line short
            ran[0] = 0;
            t.evalChunkHook = () -> ran[0]++;
            Evaluation resumed = t.evaluateTasks(dir);
            assertEquals(1, ran[0], "only the last chunk ran");
            assertTrue(printed.get().contains("eval: continuing from " + partial + ": 2 of 3 chunks done"), printed.get());
            assertTrue(printed.get().contains("eval: left as they are, of other evaluations of this step (other settings, weights, ranks,"
                    + " chunk size or tasks): [" + other.getFileName() + "]"), printed.get());
            assertEquals(TasksPerRankTest.withoutTimes(whole), TasksPerRankTest.withoutTimes(resumed.metrics()));
            assertEquals(whole.get("eval/avg@4") * 12, resumed.tasks().stream().mapToInt(Evaluation.TaskResult::correct).sum(), 1e-9);
            assertEquals(partial, resumed.kept());
            // a file whose first line is not the evaluation's is not continued
            List<String> lines = new java.util.ArrayList<>(Files.readAllLines(partial));
            lines.set(0, "{\"fingerprint\": \"another\"}");
            Files.write(partial, lines);
            ran[0] = 0;
            Evaluation afresh = t.evaluateTasks(dir);
            assertEquals(3, ran[0], "every chunk ran again");
            assertTrue(printed.get().contains(partial + ": its first line is not this evaluation's fingerprint: starting over"), printed.get());
            assertEquals(TasksPerRankTest.withoutTimes(whole), TasksPerRankTest.withoutTimes(afresh.metrics()));
            assertTrue(Files.exists(other), "another evaluation's file stays");
            // other weights at the same step (a warm start done since, a checkpoint written again) are another evaluation
            try (var scope = new org.bytedeco.javacpp.PointerScope(); var ng = new org.bytedeco.pytorch.NoGradGuard()) {
                t.policiesForTest().get("policy").model().parameters().get("model.norm.weight").narrow(0, 0, 1)
                        .add_(new org.bytedeco.pytorch.Scalar(1e-3));
            }
            ran[0] = 0;
            Evaluation moved = t.evaluateTasks(dir);
            assertEquals(3, ran[0], "every chunk ran for the other weights");
            assertTrue(!moved.kept().equals(partial) && Files.exists(partial), moved.kept() + " beside " + partial);
        }
    }
}
