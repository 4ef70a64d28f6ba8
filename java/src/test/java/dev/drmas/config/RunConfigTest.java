// RunConfigTest.java — loading run configurations: an empty file is every default, a full file
// sets every section, `extends` merges a variant over its base, and toYaml writes a config that
// loads back equal (also for strings that YAML would read as something else if written plain).
package dev.drmas.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.KlEstimator;
import dev.drmas.algo.LossAggregation;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SingletonPolicy;
import dev.drmas.model.Family;
import dev.drmas.model.ModelConfig;
import dev.drmas.rollout.SamplingParams;
import dev.drmas.workflow.MalformedVerdict;
import dev.drmas.workflow.math.ArithmeticData;
import dev.drmas.workflow.math.MathOptions;
import dev.drmas.workflow.search.KnowledgeBaseData;
import dev.drmas.workflow.search.SearchOptions;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class RunConfigTest {
    @TempDir
    Path dir;

    Path write(String name, String text) throws IOException {
        Path p = dir.resolve(name);
        Files.createDirectories(p.getParent());
        Files.writeString(p, text);
        return p;
    }

    /** Sets every section away from its defaults. */
    static final String FULL = """
            run:
              name: ablation-1
              seed: 7
              output_dir: /tmp/drmas-runs
              resume: never
              device: cpu
              threads: 2
            data:
              source: jsonl
              train_file: data/train.jsonl
              test_file: data/test.jsonl
              question_field: problem
              answer_field: solution
              synthetic: {operands: 3, digits: 1, operators: [+, '*'], allow_negative: true, train_size: 100, test_size: 10, seed: 9}
            models:
              solver_model:
                family: llama
                size: {hidden: 64, layers: 3, heads: 8, kv_heads: 2, intermediate: 160, head_dim: 8, max_positions: 2048,
                       tie_embeddings: false, rope_theta: 500000}
                dtype: bfloat16
                optim: {lr: 3e-4, betas: [0.9, 0.95], eps: 1.0e-6, weight_decay: 0.0, warmup_steps: 5, grad_clip: 0.5}
              verifier_model:
                path: /models/Qwen3-4B
                chat_template_kwargs: {enable_thinking: false}
                optim:
                  lr: 1e-6
            agents:
              - id: solver
                model: solver_model
                optim: {lr: 1e-4}
              - id: checker
                role: verifier
                model: verifier_model
            orchestra: {name: math, options: {max_loops: 3, malformed_verdict: reject, invalid_penalty: 0.2}}
            rollout: {tasks_per_step: 8, rollouts_per_task: 6, temperature: 0.9, top_p: 0.95, top_k: 50,
                      max_new_tokens: 128, max_prompt_tokens: 384}
            algorithm: {mode: agent-mean, global_pooling: rows, eps: 1e-5, std: biased, scale_by_std: false,
                        singleton: raw}
            ppo:
              epochs: 2
              mini_batch_size: 32
              micro_batch_size: 8
              shuffle: false
              clip_low: 0.2
              clip_high: 0.28
              dual_clip: null
              loss_agg: seq-mean-token-sum-norm
              kl_coef: 0.001
              kl_type: low_var_kl
              entropy_coef: 0.01
              reference_model: true
            trainer: {steps: 40, eval_freq: 5, eval_before_train: false, save_freq: 20, keep_last: 3, log_freq: 2, grad_norm_per_agent: true}
            eval: {tasks: 50, k: 8, samples: 16, temperature: 0.0, top_p: 1.0, top_k: 0}
            sft: {steps: 10, batch_size: 4, lr: 2e-3, correct_prob: 0.5}
            metrics: {jsonl: false, tensorboard: false, progress_bar: false}
            """;

    @Test
    void emptyFileIsEveryDefault() throws IOException {
        RunConfig c = RunConfig.load(write("math-toy.yaml", "# nothing but a comment\n"));
        RunConfig d = RunConfig.defaults();
        assertEquals("math-toy", c.run().name(), "run.name defaults to the file's name");
        assertEquals(d.withOverrides(List.of("run.name=math-toy")), c);

        assertEquals(Path.of("runs"), c.run().outputDir());
        assertEquals(Path.of("runs", "math-toy"), c.run().runDir());
        assertTrue(c.run().resumeAuto());
        assertEquals(RunSettings.Device.AUTO, c.run().device());
        assertEquals(DataConfig.Source.SYNTHETIC, c.data().source());
        assertEquals(List.of("policy"), List.copyOf(c.models().keySet()));
        assertEquals(List.of(new AgentSpec("solver", "solver", "policy"), new AgentSpec("verifier", "verifier", "policy")),
                c.agents());
        assertEquals("math", c.orchestra().name());
        assertEquals(MathOptions.defaults(), c.orchestra().options());
        assertEquals(new MathOptions(2, MalformedVerdict.APPROVE, 0.1, false, dev.drmas.workflow.GraderOptions.defaults()), c.orchestra().options(), "math's defaults");
        RunConfig search = c.withOverrides(List.of("orchestra.name=search", "~orchestra.options", "~data.synthetic", "~agents"));
        assertEquals(0.01, search.orchestra().options(SearchOptions.class).invalidPenalty(), "search's default penalty");
        assertEquals(KnowledgeBaseData.defaults(), search.data().synthetic(), "search's own generator");
        assertEquals(NormConfig.of(NormMode.DRMAS), c.normConfig());
        assertEquals(LossConfig.defaults(), c.lossConfig(), "the loss defaults are the algo package's (verl's)");
        assertEquals(1e-6, c.optimFor("policy").lr());
        assertEquals(4, c.eval().samplesPerTask(), "samples 0 means k");
    }

    @Test
    void emptySectionsAndDocumentMarkerAreDefaults() throws IOException {
        RunConfig c = RunConfig.load(write("x.yaml", "---\nppo:\nalgorithm: {}\n"));
        assertEquals(PpoConfig.defaults(), c.ppo());
        assertEquals(AlgorithmConfig.defaults(), c.algorithm());
    }

    @Test
    void fullFileSetsEverySection() throws IOException {
        RunConfig c = RunConfig.load(write("full.yaml", FULL));
        assertEquals(new RunSettings("ablation-1", 7, Path.of("/tmp/drmas-runs"), "never", RunSettings.Device.CPU, 2, null), c.run());
        assertTrue(c.run().resumeNever());
        assertNull(c.run().resumeFrom());
        assertEquals(new DataConfig(DataConfig.Source.JSONL, Path.of("data/train.jsonl"), Path.of("data/test.jsonl"),
                "problem", "solution", "data_source", new ArithmeticData(3, 1, List.of("+", "*"), true, 100, 10, 9)), c.data());

        ModelSpec solver = c.models().get("solver_model");
        assertEquals(new ModelSpec(null, ModelSpec.Init.AUTO, Family.LLAMA,
                new ModelSize(64, 3, 8, 2, 160, 8, 2048, false, 500000), ModelSpec.Dtype.BFLOAT16, ModelSpec.Dtype.FLOAT32,
                ModelSpec.LOSS_SCALE_AUTO, ModelSpec.LOSS_SCALE_INIT, ModelSpec.LOSS_SCALE_GROWTH_INTERVAL, false, Map.of(),
                new OptimConfig(3e-4, List.of(0.9, 0.95), 1e-6, 0.0, 5, 0.5)), solver);
        assertFalse(solver.loadsWeights());
        ModelSpec verifier = c.models().get("verifier_model");
        assertEquals(Path.of("/models/Qwen3-4B"), verifier.path());
        assertTrue(verifier.loadsWeights(), "init auto with a path loads the folder's weights");
        assertEquals(OptimConfig.defaults(), verifier.optim(), "keys left out of a model entry take the defaults");
        assertEquals(Map.of("enable_thinking", false), verifier.chatTemplateKwargs());
        assertEquals(List.of("solver_model", "verifier_model"), List.copyOf(c.models().keySet()), "file order is kept");

        assertEquals(List.of(
                new AgentSpec("solver", "solver", "solver_model", new OptimOverrides(1e-4, null, null, null, null, null)),
                new AgentSpec("checker", "verifier", "verifier_model")), c.agents());
        assertEquals(new OptimConfig(1e-4, List.of(0.9, 0.95), 1e-6, 0.0, 5, 0.5), c.optimFor("solver_model"),
                "the agent's lr over its model's optimiser settings");
        assertEquals(List.of(c.agent("checker")), c.agentsOf("verifier_model"));
        assertEquals(List.of("solver_model", "verifier_model"), c.usedModels());

        assertEquals(new OrchestraConfig("math", new MathOptions(3, MalformedVerdict.REJECT, 0.2, false, dev.drmas.workflow.GraderOptions.defaults())), c.orchestra());
        assertEquals(new RolloutConfig(8, 6, 0.9, 0.95, 50, 128, 384, 0, dev.drmas.rollout.Generator.Engine.CONTINUOUS, true, 0, RolloutConfig.Truncation.LEFT), c.rollout());
        assertEquals(new SamplingParams(0.9, 50, 0.95), c.rollout().sampling());
        assertEquals(new NormConfig(NormMode.AGENT_MEAN, GlobalPooling.ROWS, SingletonPolicy.RAW, false, false, 1e-5),
                c.normConfig());
        assertEquals(new PpoConfig(2, 32, 0, 8, 0, false, 0.2, 0.28, null, LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM, 0.001,
                KlEstimator.K3, 0.01, true, true), c.ppo());
        assertEquals(new LossConfig(0.2, 0.28, 0, KlEstimator.K3, 0.001, LossAggregation.SEQ_MEAN_TOKEN_SUM_NORM),
                c.lossConfig(), "dual_clip null is the loss's 0 (off)");
        assertEquals(new TrainerConfig(40, 0, 5, false, 20, 3, 2, true), c.trainer());
        assertEquals(new EvalConfig(50, 8, 16, 0.0, 1.0, 0, 0), c.eval());
        assertEquals(SamplingParams.GREEDY, c.eval().sampling());
        assertEquals(new SftConfig(10, 4, 2e-3, 0.5), c.sft());
        assertEquals(new MetricsConfig(false, false, false), c.metrics());
    }

    @Test
    void tinyModelShapeBecomesAModelConfig() {
        ModelSpec m = RunConfig.defaults().models().get("policy");
        ModelConfig mc = m.toModelConfig(366, List.of(2));
        assertEquals(Family.QWEN3, mc.family());
        assertEquals(128, mc.hiddenSize());
        assertEquals(32, mc.headDim(), "head_dim 0 is hidden / heads");
        assertEquals(2, mc.numKvHeads());
        assertEquals(1024, mc.maxPositionEmbeddings());
        assertEquals("float32", mc.torchDtype());
        assertEquals(List.of(2), mc.eosTokenIds());
    }

    @Test
    void toYamlRoundTripsTheFullConfig() throws IOException {
        RunConfig c = RunConfig.load(write("full.yaml", FULL));
        String yaml = c.toYaml();
        assertEquals(c, RunConfig.parse(yaml, List.of()));
        Path saved = dir.resolve("run/config.yaml");
        c.save(saved);
        assertEquals(c, RunConfig.load(saved), "saved config.yaml loads back equal");
        assertTrue(yaml.contains("kl_type: k3"), "enums are written in their config spelling:\n" + yaml);
        assertTrue(yaml.contains("dual_clip: null"), yaml);
    }

    @Test
    void chatTemplateKwargsTakeAnyYamlValueAndRoundTrip() {
        RunConfig c = RunConfig.parse("""
                models:
                  policy:
                    path: /models/Qwen3-4B
                    chat_template_kwargs:
                      enable_thinking: false
                      budget: 3
                      temperature_hint: 0.5
                      persona: "yes"
                      empty: ''
                      nothing: null
                      tags: [a, 1, [2, {k: v, "odd key": "1e-6"}]]
                      options: {nested: {deep: [true, {}]}, list: []}
                """, List.of("+models.policy.chat_template_kwargs.date_string=26 Jul 2024"));
        Map<String, Object> kw = c.models().get("policy").chatTemplateKwargs();
        assertEquals(List.of("enable_thinking", "budget", "temperature_hint", "persona", "empty", "nothing", "tags", "options",
                "date_string"), List.copyOf(kw.keySet()), "file order, then the override");
        assertEquals(false, kw.get("enable_thinking"));
        assertEquals(3L, kw.get("budget"));
        assertEquals(0.5, kw.get("temperature_hint"));
        assertEquals("yes", kw.get("persona"));
        assertEquals("", kw.get("empty"));
        assertTrue(kw.containsKey("nothing") && kw.get("nothing") == null);
        assertEquals(List.of("a", 1L, List.of(2L, Map.of("k", "v", "odd key", "1e-6"))), kw.get("tags"));
        assertEquals(Map.of("nested", Map.of("deep", List.of(true, Map.of())), "list", List.of()), kw.get("options"));
        assertEquals("26 Jul 2024", kw.get("date_string"));
        assertThrows(UnsupportedOperationException.class, () -> kw.put("x", 1));

        String yaml = c.toYaml();
        assertEquals(c, RunConfig.parse(yaml, List.of()), yaml);
        assertTrue(yaml.contains("    chat_template_kwargs:\n      enable_thinking: false\n"), yaml);
        assertEquals(Map.of(), RunConfig.defaults().models().get("policy").chatTemplateKwargs(), "none by default");
        // a whole mapping from the command line, and one entry set and one deleted
        RunConfig o = c.withOverrides(List.of("models.policy.chat_template_kwargs.enable_thinking=true", "~models.policy.chat_template_kwargs.tags"));
        assertEquals(true, o.models().get("policy").chatTemplateKwargs().get("enable_thinking"));
        assertFalse(o.models().get("policy").chatTemplateKwargs().containsKey("tags"));
        RunConfig whole = RunConfig.parse("models: {policy: {path: /m}}\n", List.of("models.policy.chat_template_kwargs={enable_thinking: false}"));
        assertEquals(Map.of("enable_thinking", false), whole.models().get("policy").chatTemplateKwargs());
    }

    @Test
    void toYamlRoundTripsTheDefaults() {
        RunConfig d = RunConfig.defaults();
        assertEquals(d, RunConfig.parse(d.toYaml(), List.of()));
        // every key is written: the file is the complete record of the run's settings
        for (String key : List.of("run:", "  seed: 1", "  clip_low: 0.2", "  dual_clip: 3.0", "  lr: 1.0e-6",
                "  mode: drmas", "  - id: verifier", "  max_loops: 2", "  progress_bar: true")) {
            assertTrue(d.toYaml().contains(key + "\n"), key);
        }
    }

    @Test
    void toYamlQuotesStringsThatWouldReadBackAsSomethingElse() {
        RunConfig c = RunConfig.defaults().withOverrides(List.of("run.name='yes'", "run.resume='/tmp/a b/step_10'",
                "data.question_field='1e-6'", "data.answer_field='null'", "run.output_dir='0x10'",
                "data.synthetic.operators=[+, '*', '-']", "run.warm_start='#x: \"y\"'"));
        assertEquals("yes", c.run().name());
        assertEquals(Path.of("/tmp/a b/step_10"), c.run().resumeFrom());
        String yaml = c.toYaml();
        assertEquals(c, RunConfig.parse(yaml, List.of()), yaml);
        assertTrue(yaml.contains("name: \"yes\""), yaml);
        assertTrue(yaml.contains("question_field: \"1e-6\""), yaml);
        assertTrue(yaml.contains("operators: [\"+\", \"*\", \"-\"]"), yaml);
    }

    @Test
    void extendsMergesTheVariantOverItsBaseDeep() throws IOException {
        write("configs/base.yaml", """
                run: {seed: 3, name: base}
                models:
                  policy: {optim: {lr: 1e-5}}
                ppo: {epochs: 2, clip_high: 0.28}
                algorithm: {mode: drmas}
                """);
        Path child = write("configs/nonshared.yaml", """
                extends: base.yaml
                models:
                  solver_model: {optim: {lr: 2e-5}}
                agents:
                  - {id: solver, model: solver_model}
                  - {id: verifier, model: policy}
                ppo: {clip_high: 0.3}
                """);
        RunConfig c = RunConfig.load(child);
        assertEquals("nonshared", c.run().name(), "the name comes from the file given, not its base");
        assertEquals(3, c.run().seed());
        assertEquals(2, c.ppo().epochs(), "base keys the child does not set are kept");
        assertEquals(0.3, c.ppo().clipHigh(), "the child wins");
        assertEquals(List.of("policy", "solver_model"), List.copyOf(c.models().keySet()), "mappings merge");
        assertEquals(1e-5, c.optimFor("policy").lr());
        assertEquals(2e-5, c.optimFor("solver_model").lr());
        assertEquals(List.of("solver", "verifier"), c.agents().stream().map(AgentSpec::id).toList());

        // several bases merge in order; the child still wins over all of them
        write("configs/grpo.yaml", "algorithm: {mode: grpo}\nppo: {epochs: 4}\n");
        Path both = write("configs/both.yaml", "extends: [base.yaml, grpo.yaml]\nppo: {clip_low: 0.1}\n");
        RunConfig b = RunConfig.load(both);
        assertEquals(NormMode.GRPO, b.algorithm().mode());
        assertEquals(4, b.ppo().epochs());
        assertEquals(0.28, b.ppo().clipHigh());
        assertEquals(0.1, b.ppo().clipLow());
        assertEquals("both", b.run().name(), "no base's run.name is inherited");
        write("configs/named.yaml", "extends: base.yaml\nrun: {name: mine}\n");
        assertEquals("mine", RunConfig.load(dir.resolve("configs/named.yaml")).run().name(), "the file's own run.name");
        assertEquals("x", RunConfig.load(child, List.of("run.name=x")).run().name(), "an override's");
    }

    @Test
    void shippedConfigsAreNamedAfterTheirFiles() throws IOException {
        // the README's run folders (runs/math-toy-drmas-nonshared, ...) are the files' names, variants included
        try (var files = Files.list(Path.of("../configs"))) {
            for (Path f : files.filter(f -> f.toString().endsWith(".yaml")).toList()) {
                String name = f.getFileName().toString().replace(".yaml", "");
                assertEquals(name, RunConfig.load(f).run().name(), f.toString());
            }
        }
    }

    @Test
    void shippedGpuConfigsWaitLongEnoughForGpuRolloutsAndCheckpoints() throws IOException {
        // the 300 s default is below a GPU run's imbalance between ranks (long responses) and rank 0's
        // checkpoint of a 4-7B model; past it NCCL's watchdog ends the run
        int gpuConfigs = 0;
        try (var files = Files.list(Path.of("../configs"))) {
            for (Path f : files.filter(f -> f.toString().endsWith(".yaml")).sorted().toList()) {
                RunConfig c = RunConfig.load(f);
                if (c.run().device() != RunSettings.Device.CUDA) continue;
                gpuConfigs++;
                assertTrue(c.distributed().timeoutS() >= 1800, f + ": distributed.timeout_s is " + c.distributed().timeoutS());
            }
        }
        assertEquals(3, gpuConfigs, "math-qwen3-4b, math-qwen3-4b-nonshared and search-qwen2.5-7b run on cuda");
    }

    @Test
    void defaultAgentsRunOnTheOneModel() throws IOException {
        RunConfig c = RunConfig.load(write("actor.yaml", "models: {actor: {}}\n"));
        assertEquals(List.of(new AgentSpec("solver", "solver", "actor"), new AgentSpec("verifier", "verifier", "actor")), c.agents());
        assertEquals(List.of("actor"), c.usedModels());
    }

    @Test
    void extendsListsReplaceRatherThanMerge() throws IOException {
        write("base.yaml", "agents: [{id: a, role: verifier}, {id: b, role: solver}, {id: c}]\n");
        RunConfig c = RunConfig.load(write("child.yaml", "extends: base.yaml\nagents: [{id: only, role: solver}]\n"));
        assertEquals(List.of(new AgentSpec("only", "solver", "policy")), c.agents());
    }

    @Test
    void extendsErrorsPointAtTheFiles() throws IOException {
        Path child = write("child.yaml", "# variant\nextends: missing.yaml\n");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(child));
        assertEquals(child + ":2: extends: no such file " + dir.resolve("missing.yaml"), e.getMessage());

        write("a.yaml", "extends: b.yaml\n");
        write("b.yaml", "extends: a.yaml\n");
        e = assertThrows(ConfigException.class, () -> RunConfig.load(dir.resolve("a.yaml")));
        assertEquals(dir.resolve("b.yaml") + ":1: extends: cycle: a.yaml -> b.yaml -> a.yaml", e.getMessage());

        // a bad value in the base is reported at the base's line, through the child
        write("base.yaml", "ppo:\n  epochs: 1\n  clip_low: 1.0\n");
        Path c2 = write("c2.yaml", "extends: base.yaml\nppo: {epochs: 2}\n");
        e = assertThrows(ConfigException.class, () -> RunConfig.load(c2));
        assertEquals(dir.resolve("base.yaml") + ":3: ppo.clip_low: must be in [0, 1), got 1", e.getMessage());
    }

    @Test
    void parseRejectsExtendsWithoutAFile() {
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.parse("extends: base.yaml\n", List.of()));
        assertEquals("<config>:1: extends: needs a config file: use RunConfig.load", e.getMessage());
    }

    @Test
    void recordsBuiltInCodeAreCheckedToo() {
        ConfigException e = assertThrows(ConfigException.class, () -> new PpoConfig(1, 8, 0, 16, 0, true, 0.2, 0.2, 3.0,
                LossAggregation.TOKEN_MEAN, 0, KlEstimator.K3, 0, false, false));
        assertEquals("micro_batch_size: must be <= mini_batch_size (8), got 16", e.getMessage());
        // updates_per_step sizes the mini-batches per step: mini_batch_size is unused, and not checked against
        PpoConfig adaptive = new PpoConfig(1, 8, 5, 16, 0, true, 0.2, 0.2, 3.0, LossAggregation.TOKEN_MEAN, 0, KlEstimator.K3, 0,
                false, false);
        assertEquals(5, adaptive.updatesPerStep());
        assertEquals(0, PpoConfig.defaults().updatesPerStep(), "off by default");
        assertEquals(5, RunConfig.parse("ppo: {updates_per_step: 5, micro_batch_size: 128}\n", List.of()).ppo().updatesPerStep());
        assertNotEquals(RunConfig.defaults(), RunConfig.defaults().withOverrides(List.of("run.seed=2")));
    }

    @Test
    void aFileWithoutAFinalNewlineIsReadToItsLastCharacter() throws IOException {
        assertEquals(7, RunConfig.load(write("run.yaml", "run: {seed: 7}")).run().seed());
    }

    @Test
    void anAgentsOptimOverridesAreTheKeysItSets() {
        assertEquals(Map.of(), OptimOverrides.NONE.set());
        assertEquals(Map.of("lr", 1e-5), new OptimOverrides(1e-5, null, null, null, null, null).set());
        assertEquals(Map.of("betas", List.of(0.9, 0.95)), new OptimOverrides(null, List.of(0.9, 0.95), null, null, null, null).set());
        assertEquals(Map.of("eps", 1e-6), new OptimOverrides(null, null, 1e-6, null, null, null).set());
        assertEquals(Map.of("weight_decay", 0.1), new OptimOverrides(null, null, null, 0.1, null, null).set());
        assertEquals(Map.of("warmup_steps", 5), new OptimOverrides(null, null, null, null, 5, null).set());
        assertEquals(Map.of("grad_clip", 0.5), new OptimOverrides(null, null, null, null, null, 0.5).set());
    }

    @Test
    void distributedBackendsBindByTheirConfigNames() {
        for (DistributedConfig.Backend b : DistributedConfig.Backend.values()) {
            assertEquals(b, RunConfig.parse("distributed: {backend: " + b.configName() + "}\n", List.of()).distributed().backend());
        }
    }

    @Test
    void anAgentsPromptsAreKeptAndTheOthersHaveNone() {
        RunConfig c = RunConfig.parse("agents: [{id: solver, prompts: {user: 'Solve: {question}'}}, {id: verifier}]\n", List.of());
        assertEquals(new AgentPrompts(null, "Solve: {question}", null), c.agent("solver").prompts());
        assertEquals(AgentPrompts.NONE, c.agent("verifier").prompts());
    }
}
