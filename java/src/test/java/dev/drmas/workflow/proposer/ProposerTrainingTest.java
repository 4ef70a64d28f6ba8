// ProposerTrainingTest.java — the proposer-aggregator workflow from the command line, as a user runs
// it: `drmas sft` then `drmas train` on its shipped config (tiny sizes), with learning to see:
// non-zero advantages for both agents, the shared model's weights moved by RL, and the workflow's
// metrics logged. And its single-member segments: with one rollout per task, each aggregator row
// is alone in its (group, agent) segment, which the advantage kernel's singleton policy handles.
package dev.drmas.workflow.proposer;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.agent.Episode;
import dev.drmas.agent.EpisodeInit;
import dev.drmas.agent.Step;
import dev.drmas.algo.Advantages;
import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SingletonPolicy;
import dev.drmas.cli.Main;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.testing.ScriptedPolicy;
import dev.drmas.workflow.Workflows;
import dev.drmas.workflow.Workload;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ProposerTrainingTest {
    @TempDir
    Path tmp;

    static final String CONFIG = Path.of("..", "configs", "math-toy-proposer-aggregator.yaml").toString();

    private int cli(String command, List<String> overrides) {
        List<String> args = new ArrayList<>(List.of(command, CONFIG));
        args.addAll(overrides);
        StringWriter err = new StringWriter();
        var cl = Main.commandLine();
        cl.setOut(new PrintWriter(new StringWriter()));
        cl.setErr(new PrintWriter(err));
        int code = cl.execute(args.toArray(String[]::new));
        assertEquals(0, code, command + ": " + err);
        return code;
    }

    @Test
    void warmStartThenTrainFromTheCommandLineLearns() throws IOException {
        List<String> o = List.of("run.output_dir=" + tmp, "run.threads=2", "sft.steps=80", "sft.batch_size=8",
                "trainer.steps=3", "trainer.eval_freq=3", "trainer.eval_before_train=false", "trainer.save_freq=3",
                "rollout.tasks_per_step=4", "eval.tasks=4", "metrics.tensorboard=false", "metrics.progress_bar=false");
        cli("sft", o);
        cli("train", o);
        Path run = tmp.resolve("math-toy-proposer-aggregator");
        ObjectMapper m = new ObjectMapper();
        List<JsonNode> steps = new ArrayList<>();
        for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) {
            JsonNode n = m.readTree(line);
            if (n.has("reward/mean")) steps.add(n);
        }
        assertEquals(3, steps.size());
        JsonNode s1 = steps.getFirst();
        assertEquals(4.0 * 4 * (3 + 1), s1.get("rows").asDouble(), "4 tasks × 4 rollouts × (3 proposals + 1 answer)");
        assertEquals(3.0 * s1.get("agent/aggregator/rows").asDouble(), s1.get("agent/proposer/rows").asDouble());
        boolean moved = steps.stream().anyMatch(s -> s.get("agent/proposer/adv_std").asDouble() > 0)
                && steps.stream().anyMatch(s -> s.get("agent/aggregator/adv_std").asDouble() > 0);
        assertTrue(moved, "both agents get non-zero advantages in some step: " + steps);
        for (String k : List.of("proposer/correct_rate", "proposer/agreement", "aggregator/follows_majority", "model/policy/grad_norm")) {
            assertTrue(s1.has(k), k + " in " + s1);
        }
        assertTrue(steps.stream().anyMatch(s -> s.get("model/policy/grad_norm").asDouble() > 0));
        // RL moved the warm-start weights
        byte[] before = Files.readAllBytes(run.resolve("sft/models/policy/model.safetensors"));
        byte[] after = Files.readAllBytes(run.resolve("checkpoints/step_000003/models/policy/model.safetensors"));
        assertEquals(before.length, after.length);
        assertNotEquals(java.util.Arrays.hashCode(before), java.util.Arrays.hashCode(after), "the weights moved");
    }

    @Test
    void singleMemberAggregatorSegmentsFollowTheSingletonPolicy() {
        RunConfig cfg = RunConfig.load(Path.of(CONFIG), List.of());
        try (Workload w = Workflows.open(cfg, new PrintStream(new ByteArrayOutputStream()))) {
            // two tasks, one rollout each: every (group, aggregator) segment has one row
            List<Task> tasks = List.of(new Task("a", "1+1=?", "2"), new Task("b", "2+2=?", "4"));
            List<EpisodeInit> init = List.of(new EpisodeInit(0, 0, "1+1=?", "2"), new EpisodeInit(1, 1, "2+2=?", "4"));
            // proposals: right, wrong, no box; the aggregator answers right in task a, wrongly in task b
            ScriptedPolicy policy = new ScriptedPolicy((agent, r) -> switch (r.turn()) {
                case 0 -> ScriptedPolicy.boxed(r.uid() == 0 ? 2 : 4);
                case 1 -> ScriptedPolicy.boxed(9);
                case 2 -> "none";
                default -> ScriptedPolicy.boxed(r.uid() == 0 ? 2 : 5);
            });
            List<Episode> eps = w.orchestra().run(init, policy);
            List<Float> scores = new ArrayList<>();
            List<Integer> uid = new ArrayList<>(), traj = new ArrayList<>(), agent = new ArrayList<>();
            for (Episode e : eps) {
                double r = w.reward(tasks.get(e.uid()), e);
                for (Step s : e.steps()) {
                    scores.add((float) w.rowScore(r, s));
                    uid.add(e.uid());
                    traj.add(e.traj());
                    agent.add(s.agent());
                }
            }
            float[] sc = new float[scores.size()];
            for (int i = 0; i < sc.length; i++) sc[i] = scores.get(i);
            int[] u = uid.stream().mapToInt(Integer::intValue).toArray(), t = traj.stream().mapToInt(Integer::intValue).toArray();
            int[] a = agent.stream().mapToInt(Integer::intValue).toArray();
            // row pooling, fallback: the aggregator's single segment takes its group's statistics
            NormConfig rows = new NormConfig(NormMode.DRMAS, GlobalPooling.ROWS, SingletonPolicy.FALLBACK, true, true, 1e-6);
            float[] adv = Advantages.compute(rows, sc, u, t, a, 2, 2, 2);
            // task a: scores 1, 1, 0.9 (proposals) and 1 (aggregator); task b: 0, 0, -0.1 and 0
            double mu = (1 + 1 + 0.9 + 1) / 4.0, sd = Math.sqrt(((3 * Math.pow(1 - mu, 2)) + Math.pow(0.9 - mu, 2)) / 3);
            assertEquals((1 - mu) / (sd + 1e-6), adv[3], 1e-5, "the aggregator's row against its group (row pooling)");
            double pmu = (1 + 1 + 0.9) / 3.0, psd = Math.sqrt((2 * Math.pow(1 - pmu, 2) + Math.pow(0.9 - pmu, 2)) / 2);
            assertEquals((0.9 - pmu) / (psd + 1e-6), adv[2], 1e-5, "a proposer row against its own three-row segment");
            // trajectory pooling: the group has one trajectory, so the fallback's group is single too: A = 0
            float[] trajAdv = Advantages.compute(NormConfig.of(NormMode.DRMAS), sc, u, t, a, 2, 2, 2);
            assertEquals(0f, trajAdv[3]);
            assertEquals(0f, trajAdv[7]);
            assertNotEquals(0f, trajAdv[2], "the proposer's segment has three rows: it keeps its own statistics");
        }
    }
}
