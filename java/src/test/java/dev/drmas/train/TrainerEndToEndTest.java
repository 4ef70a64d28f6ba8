// TrainerEndToEndTest.java — a few real training steps of the solver–verifier team on a tiny model
// (real LibTorch, real rollout engine, native advantage and loss kernels, real files): metrics are
// present and finite, the checkpoint reloads to the trained weights, and a run stopped after its
// first checkpoint and resumed logs exactly what an uninterrupted run logs; with two ranks, weights
// that are not finite are named as such, not as ranks that diverged, and neither is checkpointed;
// without a progress bar each logged step prints a line; a refused resume never says "resumed";
// trainer.epochs counts the steps over the training tasks.
package dev.drmas.train;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import dev.drmas.config.ConfigException;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.Tensors;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class TrainerEndToEndTest {
    @TempDir
    Path tmp;

    static final String YAML = """
            run: {name: e2e, seed: 3, threads: 2, device: cpu}
            data:
              synthetic: {operands: 2, digits: 1, operators: ["+"], train_size: 40, test_size: 4}
            models:
              policy:
                family: qwen3
                size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
                optim: {lr: 1.0e-3, weight_decay: 0.0, grad_clip: 1.0}
            agents:
              - {id: solver, role: solver, model: policy}
              - {id: verifier, role: verifier, model: policy}
            rollout: {tasks_per_step: 2, rollouts_per_task: 3, temperature: 1.0, max_new_tokens: 6, max_prompt_tokens: 300}
            algorithm: {mode: drmas}
            ppo: {epochs: 2, mini_batch_size: 6, micro_batch_size: 3}
            trainer: {steps: 4, eval_freq: 2, eval_before_train: false, save_freq: 2}
            eval: {tasks: 2, k: 2, temperature: 1.0, top_p: 1.0}
            metrics: {progress_bar: false}
            """;

    RunConfig config(Path out, String... overrides) {
        List<String> o = new ArrayList<>(List.of("run.output_dir=" + out));
        o.addAll(List.of(overrides));
        return RunConfig.parse(YAML, o);
    }

    static final PrintStream QUIET = new PrintStream(new ByteArrayOutputStream());

    @Test
    void trainsChecksPointsAndResumesExactly() throws Exception {
        Path a = tmp.resolve("a"), b = tmp.resolve("b");
        Map<String, float[]> trained = new java.util.LinkedHashMap<>();
        try (Trainer t = Trainer.open(config(a), QUIET)) {
            t.train();
            assertEquals(4, t.step());
            try (PointerScope scope = new PointerScope()) {
                CausalLm m = t.policiesForTest().get("policy").model();
                m.parameters().forEach((k, v) -> trained.put(k, Tensors.toFloats(v)));
            }
        }
        // the run directory
        Path run = a.resolve("e2e");
        assertTrue(Files.isRegularFile(run.resolve("config.yaml")));
        assertTrue(Files.list(run.resolve("tensorboard")).anyMatch(p -> p.getFileName().toString().startsWith("events.out.tfevents")));
        List<JsonNode> lines = metrics(run);
        JsonNode step1 = lines.stream().filter(l -> l.get("step").asInt() == 1 && l.has("reward/mean")).findFirst().orElseThrow();
        for (String key : List.of("reward/mean", "agent/solver/adv_mean", "agent/solver/adv_std", "agent/solver/adv_sq_mean", "agent/solver/score_std", "agent/verifier/valid_ratio",
                "agent/solver/mu", "agent/solver/sigma", "model/policy/grad_norm", "model/policy/pg_loss", "model/policy/clipfrac",
                "time/rollout_s", "time/update_s")) {
            assertTrue(step1.has(key), "metric " + key + " in " + step1);
            assertTrue(step1.get(key).isNumber() && Double.isFinite(step1.get(key).asDouble()), key + " = " + step1.get(key));
        }
        // replies cut at max_new_tokens (6): a random model rarely ends a turn, and a cut reply has exactly 6 tokens
        for (String agent : List.of("solver", "verifier")) {
            double clipped = step1.get("agent/" + agent + "/response_clipped").asDouble(), len = step1.get("agent/" + agent + "/response_len").asDouble();
            assertTrue(clipped > 0 && clipped <= 1 && clipped * 6 <= len + 1e-9, agent + ": clipped " + clipped + ", mean length " + len);
        }
        assertTrue(lines.stream().anyMatch(l -> l.get("step").asInt() == 4 && l.has("eval/pass@1")), "eval at the last step");
        // the checkpoint reloads to the trained weights
        Path cp = new Checkpoints(run.resolve("checkpoints")).latest().orElseThrow();
        assertEquals(4, Checkpoints.state(cp).get("step").asInt());
        try (CausalLm m = Checkpoints.loadModel(cp, "policy", ScalarType.Float, new org.bytedeco.pytorch.Device("cpu"));
             PointerScope scope = new PointerScope()) {
            for (String k : trained.keySet()) assertArrayEquals(trained.get(k), Tensors.toFloats(m.parameters().get(k)), k);
        }
        assertTrue(Files.isRegularFile(cp.resolve("models/policy/tokenizer.json")), "checkpoint folders carry the tokenizer");

        // b: stop after the first checkpoint, then resume to the end
        try (Trainer t = Trainer.open(config(b, "trainer.steps=2"), QUIET)) {
            t.train();
        }
        try (Trainer t = Trainer.open(config(b), QUIET)) {
            assertEquals(2, t.step(), "resumed from the step-2 checkpoint");
            t.train();
        }
        List<JsonNode> resumed = metrics(b.resolve("e2e"));
        assertEquals(comparable(lines), comparable(resumed));
    }

    @Test
    void withoutAProgressBarEveryLoggedStepPrintsALine() throws Exception {
        // metrics.progress_bar: false promised a line per logged step and printed none
        var bytes = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(tmp.resolve("lines"), "trainer.steps=3", "trainer.save_freq=0"),
                new PrintStream(bytes, true, StandardCharsets.UTF_8))) {
            t.train();
        }
        String printed = bytes.toString(StandardCharsets.UTF_8);
        List<String> steps = printed.lines().filter(l -> l.startsWith("step ")).toList();
        // steps 1, 2 (then its evaluation), 3 (then its evaluation: the last step is always evaluated)
        assertEquals(5, steps.size(), printed);
        String number = "-?\\d[\\d.e+-]*";
        for (int i = 0; i < 5; i++) {
            int s = new int[] {1, 2, 2, 3, 3}[i];
            String line = steps.get(i);
            assertTrue(line.matches("step " + s + "/3 \\(\\d+%\\) elapsed \\d\\d:\\d\\d eta \\d\\d:\\d\\d reward/mean=" + number
                    + " model/policy/pg_loss=" + number + (i < 2 ? "" : " eval/pass@1=" + number)), line);
        }
    }

    @Test
    void epochsCountTheStepsOverTheTrainingTasksAndAResumeExtendsThem() throws Exception {
        // 9 training tasks, 2 a step: 4 steps a pass (verl drops the pass's last partial batch); trainer.steps is not used
        Path out = tmp.resolve("epochs");
        var bytes = new ByteArrayOutputStream();
        var log = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        String[] common = {"data.synthetic.train_size=9", "trainer.steps=99", "trainer.eval_freq=0", "trainer.save_freq=4"};
        List<String> one = new ArrayList<>(List.of(common));
        one.add("trainer.epochs=1");
        try (Trainer t = Trainer.open(config(out, one.toArray(String[]::new)), log)) {
            t.train();
        }
        assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("drmas: trainer.epochs 1: 4 steps (1 x floor(9 training tasks / 2 a "
                + "step)); trainer.steps is not used"), bytes.toString(StandardCharsets.UTF_8));
        Path metrics = out.resolve("e2e/metrics.jsonl");
        assertEquals(List.of(1L, 2L, 3L, 4L), steps(metrics));
        assertTrue(Files.isDirectory(out.resolve("e2e/checkpoints/step_000004")), "the last step is saved");
        // the plan the report reads: the task count is in no other file of the run folder
        var json = new ObjectMapper();
        assertEquals(json.readTree("{\"total_steps\":4,\"epochs\":1,\"train_tasks\":9,\"tasks_per_step\":2}"),
                json.readTree(out.resolve("e2e").resolve(Trainer.PLAN_FILE).toFile()));
        // a second epoch: the resume trains steps 5 to 8
        List<String> two = new ArrayList<>(List.of(common));
        two.add("trainer.epochs=2");
        try (Trainer t = Trainer.open(config(out, two.toArray(String[]::new)), log)) {
            t.train();
        }
        assertEquals(List.of(1L, 2L, 3L, 4L, 5L, 6L, 7L, 8L), steps(metrics));
        assertEquals(8, json.readTree(out.resolve("e2e").resolve(Trainer.PLAN_FILE).toFile()).get("total_steps").asLong(), "rewritten");
        // tasks that fill no step: an error naming the key, before anything runs
        List<String> few = new ArrayList<>(List.of(common));
        few.addAll(List.of("trainer.epochs=1", "data.synthetic.train_size=1"));
        try (Trainer t = Trainer.open(config(tmp.resolve("few"), few.toArray(String[]::new)), QUIET)) {
            var e = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class, t::train);
            assertTrue(e.getMessage().contains("trainer.epochs: is 1, but the 1 training task(s) fill no step of rollout.tasks_per_step 2"),
                    e.getMessage());
        }
    }

    /** The steps of metrics.jsonl's lines, in order. */
    private static List<Long> steps(Path metrics) throws IOException {
        var json = new ObjectMapper();
        List<Long> out = new ArrayList<>();
        for (String l : Files.readAllLines(metrics)) out.add(json.readTree(l).get("step").asLong());
        return out;
    }

    @Test
    void aRefusedResumeIsNotAnnouncedAsResumed() throws Exception {
        Path out = tmp.resolve("refused");
        try (Trainer t = Trainer.open(config(out, "trainer.steps=2", "trainer.eval_freq=0"), QUIET)) {
            t.train();
        }
        // the saved data position counts tasks in the order of seed 3's shuffle: training with seed 4 is refused
        var bytes = new ByteArrayOutputStream();
        var log = new PrintStream(bytes, true, StandardCharsets.UTF_8);
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "trainer.eval_freq=0", "run.seed=4"), log)) {
            var e = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class, t::train);
            assertTrue(e.getMessage().contains("run.seed: 3 at the checkpoint, 4 now"), e.getMessage());
        }
        assertFalse(bytes.toString(StandardCharsets.UTF_8).contains("resumed"), bytes.toString(StandardCharsets.UTF_8));
        // an evaluation may use another seed: it accepts the checkpoint, and says so
        try (Trainer t = Trainer.open(config(out, "run.seed=4"), log)) {
            t.evaluate();
        }
        assertTrue(bytes.toString(StandardCharsets.UTF_8).contains("drmas: resumed " + out.resolve("e2e/checkpoints/step_000002")
                + " at step 2"), bytes.toString(StandardCharsets.UTF_8));
        bytes.reset();
        try (Trainer t = Trainer.open(config(out, "trainer.steps=3", "trainer.eval_freq=0"), log)) {
            t.train();
        }
        assertEquals(1, bytes.toString(StandardCharsets.UTF_8).lines().filter(l -> l.startsWith("drmas: resumed ")).count(),
                bytes.toString(StandardCharsets.UTF_8));
    }

    @Test
    void nonSharedHeterogeneousTeamUpdatesEachModel() throws Exception {
        // one model per agent, of different sizes and families, each with its own optimiser
        String two = YAML.replace("""
                models:
                  policy:
                    family: qwen3
                    size: {hidden: 32, layers: 1, heads: 2, kv_heads: 1, intermediate: 64, max_positions: 512}
                    optim: {lr: 1.0e-3, weight_decay: 0.0, grad_clip: 1.0}
                agents:
                  - {id: solver, role: solver, model: policy}
                  - {id: verifier, role: verifier, model: policy}
                """, """
                models:
                  big:
                    family: qwen3
                    size: {hidden: 48, layers: 2, heads: 2, kv_heads: 1, intermediate: 96, max_positions: 512}
                    optim: {lr: 1.0e-3, grad_clip: 1.0}
                  small:
                    family: llama
                    size: {hidden: 32, layers: 1, heads: 2, kv_heads: 2, intermediate: 64, max_positions: 512}
                    optim: {lr: 5.0e-4, grad_clip: 0.5}
                agents:
                  - {id: solver, role: solver, model: big}
                  - {id: verifier, role: verifier, model: small}
                """);
        assertTrue(!two.equals(YAML), "the replacement applied");
        RunConfig cfg = RunConfig.parse(two, List.of("run.output_dir=" + tmp.resolve("c"), "trainer.steps=1",
                "trainer.eval_freq=0", "trainer.save_freq=0", "trainer.grad_norm_per_agent=true"));
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            Map<String, Double> m = t.trainStep();
            for (String k : List.of("model/big/grad_norm", "model/small/grad_norm", "model/big/lr", "model/small/lr",
                    "agent/solver/grad_norm", "agent/verifier/grad_norm", "model/big/entropy")) {
                assertTrue(m.containsKey(k) && Double.isFinite(m.get(k)), k + " in " + m.keySet());
            }
            assertEquals(1.0e-3, m.get("model/big/lr"), 1e-12);
            assertEquals(5.0e-4, m.get("model/small/lr"), 1e-12);
            assertEquals(2, t.policiesForTest().size());
            assertEquals(dev.drmas.model.Family.LLAMA, t.policiesForTest().get("small").model().config().family());
        }
    }

    @Test
    void warmStartLearnsTheFormatsAndTrainingStartsFromIt() throws Exception {
        // the config of the RL run below (a KL reference), as `drmas sft` then `drmas train` of one config file
        RunConfig cfg = config(tmp.resolve("s"), "sft.steps=12", "sft.batch_size=8", "sft.lr=3.0e-3", "run.resume=never",
                "ppo.reference_model=true");
        Map<String, Double> first, last;
        try (Trainer t = Trainer.open(cfg, QUIET)) {
            RunConfig one = config(tmp.resolve("s1"), "sft.steps=1", "sft.batch_size=8", "sft.lr=3.0e-3", "run.resume=never");
            try (Trainer t1 = Trainer.open(one, QUIET)) {
                first = t1.sft();
            }
            last = t.sft();
        }
        double l0 = first.get("sft/policy/loss"), l1 = last.get("sft/policy/loss");
        assertTrue(Double.isFinite(l0) && l1 < 0.8 * l0, "cross-entropy " + l0 + " -> " + l1);
        Path warm = tmp.resolve("s/e2e/sft/models/policy");
        assertTrue(Files.isRegularFile(warm.resolve("model.safetensors")) && Files.isRegularFile(warm.resolve("tokenizer.json")));
        Path reference = tmp.resolve("s/e2e/reference/policy");
        assertFalse(Files.exists(reference.getParent()), "the warm start's trainer wrote a KL reference (its random init)");
        // a training run in the same directory starts from the warm-start weights, and they are its KL reference
        ByteArrayOutputStream log = new ByteArrayOutputStream();
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "ppo.reference_model=true"), new PrintStream(log, true));
             CausalLm w = CausalLm.load(warm); PointerScope scope = new PointerScope()) {
            assertTrue(log.toString().contains("warm start"), log.toString());
            CausalLm m = t.policiesForTest().get("policy").model(), ref = t.policiesForTest().get("policy").reference();
            for (String k : w.parameters().keySet()) {
                assertArrayEquals(Tensors.toFloats(w.parameters().get(k)), Tensors.toFloats(m.parameters().get(k)), k);
                assertArrayEquals(Tensors.toFloats(w.parameters().get(k)), Tensors.toFloats(ref.parameters().get(k)), "reference " + k);
            }
            t.save();  // the first checkpoint writes the reference, which resuming needs
        }
        try (CausalLm w = CausalLm.load(warm); CausalLm r = CausalLm.load(reference); PointerScope scope = new PointerScope()) {
            for (String k : w.parameters().keySet()) {
                assertArrayEquals(Tensors.toFloats(w.parameters().get(k)), Tensors.toFloats(r.parameters().get(k)), "saved reference " + k);
            }
        }
        // a resume cannot recover a lost reference: the checkpoint's weights are not where the run started;
        // it opens (evaluation needs no reference) and refuses to train
        Checkpoints.deleteTree(reference);
        ConfigException lost;
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "ppo.reference_model=true"), QUIET)) {
            assertEquals(null, t.policiesForTest().get("policy").reference());
            lost = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class, t::train);
        }
        assertTrue(lost.getMessage().contains("ppo.reference_model: the KL reference of model 'policy' is missing (no " + reference),
                lost.getMessage());
        assertFalse(Files.exists(reference), "no reference made up");
        // nor one turned on at a resume of a run that had none
        String from = "+run.warm_start=" + warm.getParent();
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "run.name=noref", from), QUIET)) {
            t.save();
        }
        ConfigException on;
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "run.name=noref", from, "ppo.reference_model=true"), QUIET)) {
            on = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class, t::train);
        }
        assertTrue(on.getMessage().contains("ppo.reference_model: false at the checkpoint, true now"), on.getMessage());

        // run.resume: never does not start afresh over a run: its metrics and checkpoints would be mixed with the new ones
        Path off = tmp.resolve("s/noref");
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "run.name=noref", from, "run.resume=never", "trainer.steps=1"), QUIET)) {
            var e = org.junit.jupiter.api.Assertions.assertThrows(dev.drmas.config.ConfigException.class, t::train);
            assertTrue(e.getMessage().contains("run.resume: is never, but the run folder " + off + " already holds a run ("
                    + off.resolve("checkpoints/step_000000") + ")"), e.getMessage());
        }
        assertEquals(List.of("step_000000"), Files.list(off.resolve("checkpoints")).map(p -> p.getFileName().toString()).toList());
        assertFalse(Files.exists(off.resolve("metrics.jsonl")));

        // a warm start named in the config and not there is an error, not a random initialisation
        Path typo = tmp.resolve("s/e2e/sft/model");
        ConfigException missing;
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "run.name=typo", "+run.warm_start=" + typo), QUIET)) {
            missing = org.junit.jupiter.api.Assertions.assertThrows(ConfigException.class, t::train);
        }
        assertTrue(missing.getMessage().contains("run.warm_start: " + typo + " has no weights for model 'policy' (no "
                + typo.resolve("policy/config.json") + ")"), missing.getMessage());
        assertFalse(Files.exists(tmp.resolve("s/typo/metrics.jsonl")), "nothing trained");
        // a warm start that sft is about to write is no error for sft (nor for eval, which refuses random models itself)
        try (Trainer t = Trainer.open(config(tmp.resolve("s"), "run.name=typo", "+run.warm_start=" + typo), QUIET)) {
            assertEquals(java.util.Set.of("policy"), t.randomModels());
        }
    }

    @Test
    void ranksThatResumeDifferentCheckpointsStop() throws Exception {
        Path a = tmp.resolve("ra"), b = tmp.resolve("rb");
        try (Trainer t = Trainer.open(config(a, "trainer.steps=2", "trainer.save_freq=1", "trainer.eval_freq=0"), QUIET)) {
            t.train();
        }
        // rank 1 sees the run folder one checkpoint behind (a stale view of a file system that is not really shared)
        try (var files = Files.walk(a)) {
            for (Path p : files.toList()) Files.copy(p, b.resolve(a.relativize(p).toString()));
        }
        Checkpoints.deleteTree(b.resolve("e2e/checkpoints/step_000002"));
        String diverged = "the ranks diverged: the [step, data_position] the run starts from differs between ranks";
        List<String> got = startTwoRanks(a, b);
        assertTrue(got.get(0).contains(diverged) && got.get(0).contains("this rank resumed " + a.resolve("e2e/checkpoints/step_000002")),
                got.get(0));
        assertTrue(got.get(1).contains(diverged) && got.get(1).contains("this rank resumed " + b.resolve("e2e/checkpoints/step_000001")),
                got.get(1));
        // and one that sees no checkpoint at all: it would start afresh, its collectives out of step with rank 0's
        Checkpoints.deleteTree(b.resolve("e2e/checkpoints"));
        got = startTwoRanks(a, b);
        assertTrue(got.get(0).contains(diverged) && got.get(0).contains("rank 1: the [step, data_position] the run starts from[0] = 0.0"),
                got.get(0));
        assertTrue(got.get(1).contains("this rank found no checkpoint"), got.get(1));
        // sharded with bf16 weights, opening the models is a collective on resume only (the masters are spread over
        // the ranks' weights): the check comes before it, or rank 0 would spread them while rank 1 checked
        Path c = tmp.resolve("rc"), d = tmp.resolve("rd");
        String[] sharded = {"trainer.steps=1", "trainer.save_freq=1", "trainer.eval_freq=0", "distributed.shard_optimizer=true",
                "models.policy.dtype=bfloat16", "models.policy.master_dtype=float32"};
        try (Trainer t = Trainer.open(config(c, sharded), QUIET)) {
            t.train();
        }
        assertTrue(Files.isDirectory(c.resolve("e2e/checkpoints/step_000001/master/policy")), "no masters to spread");
        got = twoRanks(r -> config(r == 0 ? c : d, sharded), (t, rank) -> "started at step " + t.step(), RuntimeException::getMessage);
        assertTrue(got.get(0).contains(diverged) && got.get(0).contains("this rank resumed " + c.resolve("e2e/checkpoints/step_000001")),
                got.get(0));
        assertTrue(got.get(1).contains(diverged) && got.get(1).contains("this rank found no checkpoint"), got.get(1));
    }

    @Test
    void weightsThatAreNotFiniteAreNamedNotTakenForDivergedRanks() throws Exception {
        Path run = tmp.resolve("nan");
        java.util.function.BiFunction<Trainer, Integer, List<String>> steps = (t, rank) -> {
            List<String> got = new ArrayList<>();
            Runnable check = () -> {
                try {
                    t.checkSameWeights();
                    got.add("same");
                } catch (dev.drmas.dist.DistributedException e) {
                    got.add(e.getMessage());
                }
            };
            try (PointerScope scope = new PointerScope(); var ng = new org.bytedeco.pytorch.NoGradGuard()) {
                var norm = t.policiesForTest().get("policy").model().parameters().get("model.norm.weight");
                check.run();  // the same seeded initialisation on both
                if (rank == 1) norm.narrow(0, 0, 1).add_(new org.bytedeco.pytorch.Scalar(1.0));
                check.run();  // a real difference
                if (rank == 1) norm.narrow(0, 3, 2).fill_(new org.bytedeco.pytorch.Scalar(Double.NaN));
                check.run();  // rank 1's weights went NaN
                if (rank == 0) norm.narrow(0, 3, 1).fill_(new org.bytedeco.pytorch.Scalar(Double.POSITIVE_INFINITY));
                check.run();  // and rank 0's infinite
            }
            return got;
        };
        List<List<String>> got = twoRanks(r -> config(run), steps);
        assertEquals(got.get(0), got.get(1), "both ranks stop alike");
        List<String> g = got.get(0);
        assertEquals("same", g.get(0));
        assertTrue(g.get(1).contains("the ranks diverged: the parameter checksum of models [policy] at step 0 differs between ranks"),
                g.get(1));
        assertTrue(g.get(2).startsWith("the weights of model 'policy' on rank 1 (parameter sum NaN, sum of squares NaN) are not finite"
                + " (NaN or infinite) at step 0"), g.get(2));
        assertFalse(g.get(2).contains("diverged"), g.get(2));
        assertTrue(g.get(3).startsWith("the weights of model 'policy' on ranks 0, 1 (parameter sum Infinity, sum of squares Infinity)"),
                g.get(3));

        // the check comes before the step's checkpoint, which would keep weights no resume should start from (rank 1's
        // weights moved before training, as a rank that computed differently: they differ after the first update; a
        // config that differs, e.g. its weight decay, is stopped before, when the trainer opens: SameConfigTest)
        Path a = tmp.resolve("da"), b = tmp.resolve("db");
        List<String> diverged = twoRanks(r -> config(r == 0 ? a : b, "trainer.steps=1", "trainer.save_freq=1", "trainer.eval_freq=0"),
                (t, rank) -> {
            try {
                if (rank == 1) {
                    try (PointerScope scope = new PointerScope(); var ng = new org.bytedeco.pytorch.NoGradGuard()) {
                        t.policiesForTest().get("policy").model().parameters().get("model.norm.weight").add_(new org.bytedeco.pytorch.Scalar(0.5));
                    }
                }
                t.train();
                return "trained";
            } catch (IOException | dev.drmas.dist.DistributedException e) {
                return e.getMessage();
            }
        });
        for (String m : diverged) assertTrue(m.startsWith("the ranks diverged: the parameter checksum of models [policy] at step 1"), m);
        assertFalse(Files.exists(a.resolve("e2e/checkpoints/step_000001")), "a checkpoint of the diverged weights");
    }

    /** Opens a trainer on each of two ranks (gloo, threads), rank r's of config {@code cfgOf(r)}; what {@code body} returns on each. */
    private <T> List<T> twoRanks(java.util.function.IntFunction<RunConfig> cfgOf, java.util.function.BiFunction<Trainer, Integer, T> body)
            throws Exception {
        return twoRanks(cfgOf, body, null);
    }

    /** As above; a rank whose trainer does not open returns {@code onOpenFailure} of the error (null: the error is thrown). */
    private <T> List<T> twoRanks(java.util.function.IntFunction<RunConfig> cfgOf, java.util.function.BiFunction<Trainer, Integer, T> body,
                                 java.util.function.Function<RuntimeException, T> onOpenFailure) throws Exception {
        int port;
        try (java.net.ServerSocket s = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress())) {
            port = s.getLocalPort();
        }
        var dc = new dev.drmas.config.DistributedConfig(dev.drmas.config.DistributedConfig.Backend.GLOO, 30, 1, 1e-3, false);
        var ex = java.util.concurrent.Executors.newFixedThreadPool(2);
        try {
            List<java.util.concurrent.Future<T>> fs = new ArrayList<>();
            for (int r = 0; r < 2; r++) {
                var env = new dev.drmas.dist.DistEnv("127.0.0.1", port, r, 2, r);
                RunConfig cfg = cfgOf.apply(r);
                int rank = r;
                fs.add(ex.submit(() -> {
                    try (var pg = new dev.drmas.dist.ProcessGroup(env, dc, false)) {
                        Trainer opened;
                        try {
                            opened = Trainer.open(cfg, QUIET, pg);
                        } catch (RuntimeException e) {
                            if (onOpenFailure == null) throw e;
                            return onOpenFailure.apply(e);
                        }
                        try (Trainer t = opened) {
                            return body.apply(t, rank);
                        }
                    }
                }));
            }
            List<T> got = new ArrayList<>();
            for (var f : fs) got.add(f.get(120, java.util.concurrent.TimeUnit.SECONDS));
            return got;
        } finally {
            ex.shutdownNow();
        }
    }

    /** Opens a trainer as rank 0 on run folder {@code a} and as rank 1 on {@code b} (gloo, threads); what each got. */
    private List<String> startTwoRanks(Path a, Path b) throws Exception {
        return twoRanks(r -> config(r == 0 ? a : b), (t, rank) -> "started at step " + t.step(), RuntimeException::getMessage);
    }

    @Test
    void shippedConfigsLoad() {
        for (String name : List.of("math-toy-drmas.yaml", "math-toy-grpo.yaml", "math-toy-drmas-nonshared.yaml",
                "math-qwen3-4b.yaml")) {
            RunConfig c = RunConfig.load(Path.of("..", "configs", name), List.of());
            assertTrue(c.trainer().steps() > 0, name);
        }
        assertEquals(dev.drmas.algo.NormMode.GRPO, RunConfig.load(Path.of("..", "configs", "math-toy-grpo.yaml"), List.of())
                .algorithm().mode());
        assertEquals(List.of("solver_model", "verifier_model"),
                RunConfig.load(Path.of("..", "configs", "math-toy-drmas-nonshared.yaml"), List.of()).usedModels());
        // the Dr. MAS reference runs Qwen3 on math without thinking (examples/*/run_math.sh)
        assertEquals(Map.of("enable_thinking", false),
                RunConfig.load(Path.of("..", "configs", "math-qwen3-4b.yaml"), List.of()).models().get("policy").chatTemplateKwargs());
        // the update and the evaluation of the reference's examples/drmas_trainer/run_math.sh: one optimiser step a
        // training step (ppo_mini_update_num=1), clip_ratio_high's default 0.2, no entropy bonus; its validation
        // during training, one sample of 110 tasks at temperature 0.6, top_p 0.95 (val_kwargs, val_n=1 on test_sampled;
        // the paper's avg@16 is `drmas launch --eval ... eval.k=16 eval.tasks=0` at the end)
        RunConfig math = RunConfig.load(Path.of("..", "configs", "math-qwen3-4b.yaml"), List.of());
        assertEquals(List.of(1, 0.2, 0.2, 0.0), List.of(math.ppo().updatesPerStep(), math.ppo().clipLow(), math.ppo().clipHigh(),
                math.ppo().entropyCoef()));
        assertEquals(List.of(110, 1, 1, 0.6, 0.95), List.of(math.eval().tasks(), math.eval().k(), math.eval().samplesPerTask(),
                math.eval().temperature(), math.eval().topP()));
        // run_math.sh: data.max_prompt_length=8192, max_response_length=4096, truncation='middle' (a later turn's
        // prompt quotes up to two replies of 4096 tokens; the left cut lost the role and the question)
        assertEquals(List.of(8192, 4096), List.of(math.rollout().maxPromptTokens(), math.rollout().maxNewTokens()));
        assertEquals(dev.drmas.config.RolloutConfig.Truncation.MIDDLE, math.rollout().truncation());
        // compute_grpo_outcome_advantage's one-row groups: mean 0, std 1
        assertEquals(dev.drmas.algo.SingletonPolicy.RAW, math.algorithm().singleton());
        // the reference's math verifier (general_projection) takes a reply with a Chinese character as invalid; the toy keeps the default
        assertTrue(math.orchestra().options(dev.drmas.workflow.math.MathOptions.class).rejectCjk());
        assertFalse(RunConfig.load(Path.of("..", "configs", "math-toy-drmas.yaml"), List.of()).orchestra()
                .options(dev.drmas.workflow.math.MathOptions.class).rejectCjk());
        // the reference's run_math.sh as shipped (model_sharing=False, 2 epochs): the non-shared config is the shared one
        // with a model of the same settings per agent, but for what two resident models need (drmas plan's advice)
        assertEquals(2, math.trainer().epochs());
        RunConfig nonShared = RunConfig.load(Path.of("..", "configs", "math-qwen3-4b-nonshared.yaml"), List.of());
        assertEquals(List.of("solver", "verifier"), nonShared.usedModels());
        assertEquals(math.models().get("policy"), nonShared.models().get("solver"));
        assertEquals(math.models().get("policy"), nonShared.models().get("verifier"));
        Map<String, Object> shared = new java.util.TreeMap<>(math.flat()), own = new java.util.TreeMap<>(nonShared.flat());
        for (Map<String, Object> m : List.of(shared, own)) {
            m.keySet().removeIf(k -> k.startsWith("models.") || k.matches("agents\\[\\d+]\\.model") || k.equals("run.name"));
        }
        assertEquals("110592 false", shared.remove("rollout.max_batch_tokens") + " " + shared.remove("ppo.fused_lm_head"));
        assertEquals("49152 true", own.remove("rollout.max_batch_tokens") + " " + own.remove("ppo.fused_lm_head"));
        assertEquals(shared, own);
    }

    static List<JsonNode> metrics(Path run) throws Exception {
        List<JsonNode> out = new ArrayList<>();
        ObjectMapper m = new ObjectMapper();
        for (String line : Files.readAllLines(run.resolve("metrics.jsonl"))) out.add(m.readTree(line));
        return out;
    }

    /** Lines without timings (wall time, phase seconds, throughput), which differ between runs. */
    static List<String> comparable(List<JsonNode> lines) {
        List<String> out = new ArrayList<>();
        for (JsonNode l : lines) {
            var o = ((com.fasterxml.jackson.databind.node.ObjectNode) l).deepCopy();
            for (Iterator<String> it = l.fieldNames(); it.hasNext(); ) {
                String k = it.next();
                if (k.equals("wall_time") || k.startsWith("time/") || k.startsWith("perf/") || k.startsWith("memory/")) o.remove(k);
            }
            out.add(o.toString());
        }
        assertFalse(out.isEmpty());
        return out;
    }
}
