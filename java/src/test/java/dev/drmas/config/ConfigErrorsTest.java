// ConfigErrorsTest.java — every kind of configuration error, with its whole message: where
// (file:line), which key path, what was expected or allowed, what was found, and for a typo the
// nearest valid key.
package dev.drmas.config;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

class ConfigErrorsTest {
    @TempDir
    Path dir;

    Path file;

    /** The message of loading {@code yaml}, with the file's path replaced by "run.yaml". */
    String fails(String yaml) throws IOException {
        file = dir.resolve("run.yaml");
        Files.writeString(file, yaml);
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file));
        return e.getMessage().replace(file.toString(), "run.yaml");
    }

    @Test
    void unknownKeyWithTheNearestValidKey() throws IOException {
        assertEquals("run.yaml:3: ppo.clip_hgh: unknown key (did you mean ppo.clip_high?)",
                fails("ppo:\n  epochs: 2\n  clip_hgh: 0.3\n"));
        assertEquals("run.yaml:1: rollouts: unknown key (did you mean rollout?)", fails("rollouts: {top_p: 0.9}\n"));
        assertEquals("run.yaml:4: models.policy.optm: unknown key (did you mean models.policy.optim?)",
                fails("models:\n  policy:\n    family: qwen2\n    optm: {lr: 1e-5}\n"));
        assertEquals("run.yaml:2: agents[0].modle: unknown key (did you mean agents[0].model?)",
                fails("agents:\n  - modle: policy\n    id: solver\n"));
        // a key in the wrong section is found by its full path
        assertEquals("run.yaml:2: ppo.max_loops: unknown key (did you mean orchestra.options.max_loops?)",
                fails("ppo:\n  max_loops: 3\n"));
    }

    @Test
    void unknownKeyWithNothingCloseListsTheSection() throws IOException {
        assertEquals("run.yaml:2: trainer.zzz: unknown key; valid keys in trainer: steps, epochs, eval_freq, eval_before_train,"
                + " save_freq, keep_last, log_freq, grad_norm_per_agent", fails("trainer:\n  zzz: 1\n"));
        assertEquals("run.yaml:1: zzz: unknown key; valid keys at the top: run, data, models, agents, orchestra, rollout,"
                + " algorithm, ppo, trainer, eval, sft, metrics, distributed", fails("zzz: 1\n"));
    }

    @Test
    void wrongType() throws IOException {
        assertEquals("run.yaml:3: ppo.epochs: expected an integer, got 'two' (a string)", fails("ppo:\n  clip_low: 0.1\n  epochs: two\n"));
        assertEquals("run.yaml:1: trainer.steps: expected an integer, got 1.5 (a number)", fails("trainer: {steps: 1.5}\n"));
        assertEquals("run.yaml:1: metrics.jsonl: expected true or false, got 3 (a number)", fails("metrics: {jsonl: 3}\n"));
        assertEquals("run.yaml:1: ppo.clip_low: expected a number, got 'a lot' (a string)", fails("ppo: {clip_low: a lot}\n"));
        assertEquals("run.yaml:1: ppo.clip_low: expected a number, got a list", fails("ppo: {clip_low: [0.1]}\n"));
        assertEquals("run.yaml:1: run.seed: expected an integer, got null", fails("run: {seed: null}\n"));
        assertEquals("run.yaml:1: ppo: expected a section of keys (epochs, mini_batch_size, updates_per_step, micro_batch_size, max_tokens_per_micro_batch,"
                + " shuffle, clip_low, clip_high, dual_clip, loss_agg, kl_coef, kl_type, entropy_coef, reference_model, fused_lm_head), got 3 (a number)",
                fails("ppo: 3\n"));
        assertEquals("run.yaml:1: models.policy.optim.betas: expected a list, got 0.9 (a number)",
                fails("models: {policy: {optim: {betas: 0.9}}}\n"));
        assertEquals("run.yaml:1: agents: expected a list, got a mapping {solver}", fails("agents: {solver: {model: policy}}\n"));
        assertEquals("run.yaml:1: algorithm.mode: 'drmass' is not one of grpo, drmas, agent-mean, agent-std"
                + " (did you mean drmas?)", fails("algorithm: {mode: drmass}\n"));
        assertEquals("run.yaml:1: models.policy.family: 'qwen' is not one of qwen2, qwen3, llama (did you mean qwen2?)",
                fails("models: {policy: {family: qwen}}\n"));
        assertEquals("run.yaml:1: trainer.steps: is out of the integer range: 3000000000", fails("trainer: {steps: 3000000000}\n"));
    }

    @ParameterizedTest
    @CsvSource(delimiter = '|', textBlock = """
            models: {policy: {optim: {lr: -1e-5}}}          | models.policy.optim.lr: must be a finite number > 0, got -1.0E-5
            models: {policy: {optim: {betas: [0.9, 1.0]}}}  | models.policy.optim.betas[1]: must be in [0, 1), got 1
            models: {policy: {optim: {betas: [0.9]}}}       | models.policy.optim.betas: must be two numbers [beta1, beta2], got a list of 1
            models: {policy: {size: {heads: 4, kv_heads: 3}}} | models.policy.size.kv_heads: must divide heads (4), got 3
            models: {policy: {init: path}}                  | models.policy.path: is required when init is path
            ppo: {clip_low: 1.0}                            | ppo.clip_low: must be in [0, 1), got 1
            ppo: {clip_low: -0.1}                           | ppo.clip_low: must be in [0, 1), got -0.1
            ppo: {dual_clip: 1.0}                           | ppo.dual_clip: must be > 1, or null (or 0) to turn it off, got 1
            ppo: {clip_high: -0.1}                          | ppo.clip_high: must be a finite number >= 0, got -0.1
            ppo: {kl_coef: -0.1}                            | ppo.kl_coef: must be a finite number >= 0, got -0.1
            algorithm: {eps: -1, scale_by_std: false}       | algorithm.eps: must be a finite number >= 0, got -1
            ppo: {mini_batch_size: 8, micro_batch_size: 16} | ppo.micro_batch_size: must be <= mini_batch_size (8), got 16
            ppo: {updates_per_step: -1}                     | ppo.updates_per_step: must be >= 0 (0 = off: mini_batch_size rows per optimiser step), got -1
            ppo: {updates_per_step: 1.5}                    | ppo.updates_per_step: expected an integer, got 1.5 (a number)
            ppo: {kl_coef: 0.1}                             | ppo.kl_coef: > 0 needs ppo.reference_model: true (the KL is to the reference policy)
            rollout: {top_p: 0}                             | rollout.top_p: must be in (0, 1], got 0
            rollout: {top_p: 1.5}                           | rollout.top_p: must be in (0, 1], got 1.5
            rollout: {temperature: 0}                       | rollout.temperature: must be a finite number > 0 (training rollouts are sampled), got 0
            rollout: {temperature: 1.0e-6}                  | rollout.temperature: must be >= 1.0E-5 (below it sampling is greedy in all but name, and PPO's log-probs of logits / temperature overflow), got 1.0E-6
            eval: {temperature: 1.0e-40}                    | eval.temperature: must be 0 (greedy) or >= 1.0E-5 (below it sampling is greedy in all but name, and logits / temperature overflow), got 1.0E-40
            rollout: {tasks_per_step: 0}                    | rollout.tasks_per_step: must be > 0, got 0
            rollout: {max_batch_tokens: -1}                 | rollout.max_batch_tokens: must be >= 0, got -1
            rollout: {max_batch_tokens: 700}                | rollout.max_batch_tokens: must hold one row of max_prompt_tokens + max_new_tokens (768) or be 0 (no bound), got 700
            ppo: {max_tokens_per_micro_batch: -1}           | ppo.max_tokens_per_micro_batch: must be >= 0, got -1
            eval: {k: 8, samples: 4}                        | eval.samples: must be 0 (= k) or >= k (8), got 4
            eval: {top_p: 0}                                | eval.top_p: must be in (0, 1], got 0
            algorithm: {eps: 0}                             | algorithm.eps: must be a finite number > 0, got 0
            orchestra: {options: {max_loops: 0}}            | orchestra.options.max_loops: must be > 0, got 0
            orchestra: {options: {invalid_penalty: -0.1}}   | orchestra.options.invalid_penalty: must be a finite number >= 0, got -0.1
            orchestra: {name: search, options: {max_turns: 0}} | orchestra.options.max_turns: must be > 0, got 0
            sft: {correct_prob: 1.5}                        | sft.correct_prob: must be in [0, 1], got 1.5
            trainer: {eval_freq: -1}                        | trainer.eval_freq: must be >= 0, got -1
            run: {threads: -2}                              | run.threads: must be >= 0, got -2
            data: {synthetic: {operators: [+, '%']}}        | data.synthetic.operators[1]: '%' is not one of + - *
            data: {synthetic: {operators: [+, /]}}          | data.synthetic.operators[1]: '/' is not one of + - *
            data: {synthetic: {digits: 12}}                 | data.synthetic.digits: must be in [1, 9], got 12
            agents: [{id: solver, optim: {weight_decay: 1e39}}] | agents[0].optim.weight_decay: must be <= 3.4028235E38 (LibTorch takes it as a float32), got 1.0E39
            data: {source: jsonl, train_file: "", test_file: t.jsonl} | data.train_file: must not be empty
            models: {policy: {path: " "}}                   | models.policy.path: must not be empty
            run: {resume: false}                            | run.resume: 'false' is not auto, never or a checkpoint path: write never to start afresh (a folder named false is ./false)
            run: {resume: no}                               | run.resume: 'false' is not auto, never or a checkpoint path: write never to start afresh (a folder named false is ./false)
            run: {resume: yes}                              | run.resume: 'true' is not auto, never or a checkpoint path: write auto to continue from the latest checkpoint (a folder named true is ./true)
            run: {resume: "Off"}                            | run.resume: 'Off' is not auto, never or a checkpoint path: write never to start afresh (a folder named Off is ./Off)
            """)
    void outOfRange(String yaml, String message) throws IOException {
        assertEquals("run.yaml:1: " + message, fails(yaml + "\n"));
    }

    @Test
    void crossSectionChecks() throws IOException {
        assertEquals("run.yaml:1: data.train_file: is required when data.source is jsonl", fails("data: {source: jsonl}\n"));
        assertEquals("run.yaml:1: data.test_file: is required when data.source is jsonl and trainer.eval_freq > 0"
                + " (or set trainer.eval_freq: 0)", fails("data: {source: jsonl, train_file: t.jsonl}\n"));
        assertEquals("run.yaml:1: models.policy.size.max_positions: (256) is shorter than rollout.max_prompt_tokens"
                + " + rollout.max_new_tokens (768)", fails("models: {policy: {size: {max_positions: 256}}}\n"));
        // a model no agent uses is not loaded: its length and precision do not matter
        String unused = "models: {policy: {}, spare: {size: {max_positions: 256}, dtype: bfloat16, master_dtype: bfloat16}}\n"
                + "agents: [{id: solver, model: policy}, {id: verifier, model: policy}]\n";
        Files.writeString(file, unused);
        assertEquals(List.of("policy"), RunConfig.load(file, List.of("distributed.shard_optimizer=true")).usedModels());
        assertEquals("run.yaml:1: models.spare.size.max_positions: (256) is shorter than rollout.max_prompt_tokens"
                + " + rollout.max_new_tokens (768)", fails(unused.replace("model: policy}]", "model: spare}]")));
        assertEquals("run.yaml:1: ppo.max_tokens_per_micro_batch: must hold one row of rollout.max_prompt_tokens"
                + " + rollout.max_new_tokens (768) or be 0 (off), got 700", fails("ppo: {max_tokens_per_micro_batch: 700}\n"));
        assertEquals("run.yaml:3: agents[1].id: 'a' is also the id of agents[0]", fails("agents:\n  - {id: a}\n  - {id: a}\n"));
        assertEquals("run.yaml:2: agents[0].id: is required", fails("agents:\n  - {role: solver}\n"));
        assertEquals("run.yaml:2: agents[0].id: 'solver.v2' is not a valid id (letters, digits, _ and -, not starting with -)",
                fails("agents:\n  - {id: solver.v2}\n"));
        assertEquals("run.yaml:1: agents: must list at least one agent", fails("agents: []\n"));
    }

    @Test
    void agentRolesAreCheckedWhenTheConfigLoads() throws IOException {
        // at the line that has it, not minutes later when the workflow opens after loading the models
        assertEquals("run.yaml:4: agents[1].role: 'verifer' is not a role of the math workflow (solver, verifier)",
                fails("agents:\n  - {id: solver, role: solver}\n  - id: verifier\n    role: verifer\n"));
        assertEquals("run.yaml:3: agents[1].role: 'critic' is not a role of the math workflow (solver, verifier); agents[1]"
                + " has no role:, so its id stands for it", fails("agents:\n  - {id: solver}\n  - {id: critic}\n"));
        assertEquals("run.yaml:3: agents[1].role: 'solver' is also the role of agents[0]; the math workflow has at most 1 solver",
                fails("agents:\n  - {id: a, role: solver}\n  - {id: b, role: solver}\n"));
        assertEquals("run.yaml:2: agents: the math workflow needs an agent with role solver",
                fails("# no solver\nagents: [{id: verifier}]\n"));
        // a bound that the workflow's options set: one proposer agent per proposal at most
        String proposers = """
                orchestra: {name: proposer-aggregator, options: {proposers: 2}}
                agents:
                  - {id: p1, role: proposer}
                  - {id: p2, role: proposer}
                  - {id: p3, role: proposer}
                  - {id: aggregator}
                """;
        assertEquals("run.yaml:5: agents[2].role: 'proposer' is also the role of agents[0], agents[1]; the proposer-aggregator"
                + " workflow has at most 2 proposers", fails(proposers));
        Files.writeString(file, proposers.replace("proposers: 2", "proposers: 3"));
        assertEquals(List.of("proposer", "proposer", "proposer", "aggregator"),
                RunConfig.load(file).agents().stream().map(AgentSpec::role).toList());
    }

    @Test
    void agentRoleErrorsFromOverridesAndBaseFiles() throws IOException {
        Files.writeString(file = dir.resolve("run.yaml"), "agents:\n  - {id: solver, role: solver}\n  - {id: verifier, role: verifier}\n");
        for (String[] c : new String[][] {
                {"agents.verifier.role=verifer", "agents[1].role: 'verifer' is not a role of the math workflow (solver, verifier)"},
                {"+agents[2]={id: judge, role: verifier}", "agents[2].role: 'verifier' is also the role of agents[1]; the math"
                        + " workflow has at most 1 verifier"},
                {"~agents[0]", "agents: the math workflow needs an agent with role solver"}}) {
            ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of(c[0])));
            assertEquals("override '" + c[0] + "': " + c[1], e.getMessage());
        }
        // another workflow by override: the file's agents are checked against its roles, at their lines
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("orchestra.name=search")));
        assertEquals("run.yaml:2: agents[0].role: 'solver' is not a role of the search workflow (verifier, searcher, answerer)",
                e.getMessage().replace(file.toString(), "run.yaml"));
        // a variant names the base file's line of the role it inherits
        Files.writeString(dir.resolve("base.yaml"), "# the team\nagents:\n  - {id: solver}\n  - {id: checker, role: verifer}\n");
        Files.writeString(file, "extends: base.yaml\nppo: {epochs: 2}\n");
        e = assertThrows(ConfigException.class, () -> RunConfig.load(file));
        assertEquals(dir.resolve("base.yaml") + ":4: agents[1].role: 'verifer' is not a role of the math workflow (solver, verifier)",
                e.getMessage());
    }

    @Test
    void emptyPathsFromOverrides() throws IOException {
        Files.writeString(file = dir.resolve("run.yaml"), "run: {seed: 3}\n");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("run.output_dir=")));
        assertEquals("override 'run.output_dir=': run.output_dir: must not be empty", e.getMessage());
        e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("run.warm_start=''")));
        assertEquals("override 'run.warm_start=''': run.warm_start: must not be empty", e.getMessage());
        assertEquals(Path.of("./false"), RunConfig.load(file, List.of("run.resume=./false")).run().resumeFrom(),
                "a folder named false, written as a path");
    }

    @Test
    void chatTemplateKwargsErrors() throws IOException {
        String model = "models:\n  policy:\n    path: /models/Qwen3-4B\n    chat_template_kwargs:\n";
        assertEquals("run.yaml:6: models.policy.chat_template_kwargs.eos_token: 'eos_token' is set by drmas's chat renderer itself "
                + "(it sets messages, add_generation_prompt, tools, documents, bos_token, eos_token, pad_token, unk_token, sep_token, "
                + "cls_token, mask_token, additional_special_tokens, raise_exception, strftime_now, range, namespace, dict); it cannot be an extra template "
                + "variable", fails(model + "      enable_thinking: false\n      eos_token: '<|im_end|>'\n"));
        assertEquals("run.yaml:5: models.policy.chat_template_kwargs.enable-thinking: 'enable-thinking' is not a template variable "
                + "name (letters, digits and _, not starting with a digit)", fails(model + "      enable-thinking: false\n"));
        assertEquals("run.yaml:5: models.policy.chat_template_kwargs.big[1]: is out of the integer range of a template (64 bits): "
                + "123456789012345678901234567890", fails(model + "      big: [1, 123456789012345678901234567890]\n"));
        assertEquals("run.yaml:4: models.policy.chat_template_kwargs: expected a mapping, got false (a boolean)",
                fails(model.replace("chat_template_kwargs:\n", "chat_template_kwargs: false\n")));
        assertEquals("run.yaml:3: models.policy.chat_template_kwargs: is for a tokenizer's chat template, but this model has no path: "
                + "its built-in tokenizer has none (drmas renders ChatML, which reads no variables); remove chat_template_kwargs or set path",
                fails("models:\n  policy:\n    chat_template_kwargs: {enable_thinking: false}\n"));
        // an entry the file does not have is added with +, as Hydra adds a key to a dict
        Files.writeString(file, model.replace("chat_template_kwargs:\n", ""));
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of(
                "models.policy.chat_template_kwargs.enable_thinking=false")));
        assertEquals("override 'models.policy.chat_template_kwargs.enable_thinking=false': models.policy.chat_template_kwargs."
                + "enable_thinking: no such entry (there are none); add one with +models.policy.chat_template_kwargs.enable_thinking=...",
                e.getMessage());
        // a key that only the override's entries make names the override, not the enclosing key's line in the file
        Files.writeString(file, "models:\n  policy:\n    family: qwen3\n");
        e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("+models.policy.chat_template_kwargs.enable_thinking=false")));
        assertTrue(e.getMessage().startsWith("override '+models.policy.chat_template_kwargs.enable_thinking=false': "
                + "models.policy.chat_template_kwargs: is for a tokenizer's chat template, but this model has no path"), e.getMessage());
        Files.writeString(file, model.replace("chat_template_kwargs:\n", ""));
        e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("+models.policy.chat_template_kwargs.tools=[]")));
        assertTrue(e.getMessage().startsWith("override '+models.policy.chat_template_kwargs.tools=[]': "
                + "models.policy.chat_template_kwargs.tools: 'tools' is set by drmas's chat renderer itself"), e.getMessage());
    }

    @Test
    void agentOnAMissingModel() throws IOException {
        String yaml = """
                models:
                  solver_model: {}
                  verifier_model: {}
                agents:
                  - {id: solver, model: solver_model}
                  - id: verifier
                    model: verifer_model
                """;
        assertEquals("run.yaml:7: agents[1].model: 'verifer_model' is not a key of models (did you mean verifier_model?);"
                + " models: solver_model, verifier_model", fails(yaml));
        assertEquals("run.yaml:6: agents[1].model: is required when there is more than one model (models: solver_model,"
                + " verifier_model)", fails(yaml.replace("    model: verifer_model\n", "")));
    }

    @Test
    void agentsLeftOutWithSeveralModels() throws IOException {
        // the default agents cannot choose a model; the error says which agents to map (not "'policy' is not a key")
        assertEquals("run.yaml:2: agents: is required when there is more than one model (models: a, b): list the math"
                + " workflow's agents and the model each runs on, e.g. agents: [{id: solver, model: a}, {id: verifier, model: b}]",
                fails("# two models\nmodels: {a: {}, b: {}}\n"));
        // overrides can map the default agents one by one; one left unmapped is named
        RunConfig c = RunConfig.load(file, List.of("agents.solver.model=a", "agents.verifier.model=b"));
        assertEquals(List.of("a", "b"), c.agents().stream().map(AgentSpec::model).toList());
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("agents.solver.model=a")));
        assertEquals("agents[1].model: is required when there is more than one model (models: a, b)", e.getMessage());
        // with the default model among several, the default agents run on it: a model added by override takes the agents
        // mapped to it, in whichever order the overrides come
        Files.writeString(file, "models: {policy: {}}\n");
        for (List<String> o : List.of(List.of("+models.big={}", "agents.verifier.model=big"),
                List.of("agents.verifier.model=big", "+models.big={}"))) {
            assertEquals(List.of("policy", "big"), RunConfig.load(file, o).agents().stream().map(AgentSpec::model).toList(), o.toString());
        }
    }

    @Test
    void conflictingOverridesOnASharedModel() throws IOException {
        String yaml = """
                agents:
                  - id: solver
                    optim: {lr: 1e-5, grad_clip: 1.0}
                  - id: verifier
                    optim:
                      grad_clip: 1.0
                      lr: 2e-5
                """;
        assertEquals("run.yaml:7: agents[1].optim.lr: agents solver and verifier share model policy but set optim.lr to"
                + " 1.0E-5 and 2.0E-5; a shared model has one optimiser: set models.policy.optim.lr (or give the agents"
                + " their own models)", fails(yaml));

        // equal overrides agree; different models do not share an optimiser
        Files.writeString(file, yaml.replace("lr: 2e-5", "lr: 1e-5"));
        assertEquals(1e-5, RunConfig.load(file).optimFor("policy").lr());
        assertEquals(1.0, RunConfig.load(file).optimFor("policy").gradClip());
        Files.writeString(file, """
                models: {a: {}, b: {}}
                agents:
                  - {id: solver, model: a, optim: {lr: 1e-5}}
                  - {id: verifier, model: b, optim: {lr: 2e-5}}
                """);
        RunConfig ok = RunConfig.load(file);
        assertEquals(1e-5, ok.optimFor("a").lr());
        assertEquals(2e-5, ok.optimFor("b").lr());
    }

    @Test
    void yamlSyntaxErrorWithLine() throws IOException {
        String m = fails("ppo:\n  epochs: 1\n  clip_low: [0.1\nrollout: {}\n");
        assertTrue(m.startsWith("run.yaml:4:"), m);
        assertTrue(m.contains("YAML syntax error: "), m);
        m = fails("ppo:\n  epochs: 1\n clip_low: 0.1\n");
        assertTrue(m.startsWith("run.yaml:3:") && m.contains("YAML syntax error"), m);
        assertEquals("run.yaml:3: ppo.epochs: duplicate key (first at line 2)", fails("ppo:\n  epochs: 1\n  epochs: 2\n"));
        assertEquals("run.yaml:1: expected a mapping of sections (run:, ppo:, ...) at the top, got a list",
                fails("- ppo\n- run\n"));
        assertEquals("run.yaml:1: ppo.clip_high: not a number drmas can read: .inf", fails("ppo: {clip_high: .inf}\n"));
        assertEquals("run.yaml:3: ppo.clip_low: not a number drmas can read: .nan", fails("ppo:\n  epochs: 1\n  clip_low: .nan\n"));
    }

    @Test
    void aSecondYamlDocumentIsAnError() throws IOException {
        // its keys would be dropped without a word
        assertEquals("run.yaml:4: a config is one YAML document; a second one starts here (after a --- line): merge the two,"
                + " or make one a file of its own that extends the other", fails("ppo: {epochs: 2}\n---\n# more\nrun: {seed: 3}\n"));
        assertEquals("run.yaml:3: a config is one YAML document; a second one starts here (after a --- line): merge the two,"
                + " or make one a file of its own that extends the other", fails("---\n---\nrun: {seed: 3}\n"));
        // an empty document (a trailing ---) holds nothing to lose
        Files.writeString(file, "run: {seed: 3}\n---\n");
        assertEquals(3, RunConfig.load(file).run().seed());
    }

    @Test
    void yamlAliasesAreRefused() throws IOException {
        // Jackson reads *lr as the string "lr"; refused where it stands rather than taken for a value
        assertEquals("run.yaml:3: data.question_field: YAML aliases (*q) are not supported; write the value out",
                fails("data:\n  answer_field: &q problem\n  question_field: *q\n"));
        assertEquals("run.yaml:2: ppo.<<: YAML aliases (*base) are not supported; write the value out",
                fails("base: &base {epochs: 2}\nppo: {<<: *base}\n"));
    }

    @Test
    void missingFile() {
        Path missing = dir.resolve("nope.yaml");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(missing, List.of()));
        assertEquals(missing + ": no such file", e.getMessage());
    }

    @Test
    void theExceptionCarriesItsParts() throws IOException {
        file = dir.resolve("run.yaml");
        Files.writeString(file, "ppo:\n  clip_low: 2\n");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file));
        assertEquals(file + ":2", e.origin());
        assertEquals("ppo.clip_low", e.key());
        assertEquals("must be in [0, 1), got 2", e.problem());
    }

    // Checks that no other test meets (a mutation test removed each of them unnoticed): the message
    // names the key path and says what is allowed. (The workflow's generator against data.source and
    // rollout.rollouts_per_task: 1 are WorkflowsTest's and RunFolderTest's.)
    @ParameterizedTest
    @CsvSource(delimiter = '|', textBlock = """
            eval: {tasks: -1}                                 | eval.tasks                      | must be >= 0, got -1
            eval: {k: 0}                                      | eval.k                          | must be > 0, got 0
            eval: {temperature: -0.5}                         | eval.temperature                | must be a finite number >= 0, got -0.5
            eval: {top_k: -1}                                 | eval.top_k                      | must be >= 0, got -1
            trainer: {steps: 0}                               | trainer.steps                   | must be > 0, got 0
            trainer: {save_freq: -1}                          | trainer.save_freq               | must be >= 0, got -1
            trainer: {keep_last: -1}                          | trainer.keep_last               | must be >= 0, got -1
            trainer: {log_freq: 0}                            | trainer.log_freq                | must be > 0, got 0
            ppo: {epochs: 0}                                  | ppo.epochs                      | must be > 0, got 0
            ppo: {mini_batch_size: 0}                         | ppo.mini_batch_size             | must be > 0, got 0
            ppo: {micro_batch_size: 0}                        | ppo.micro_batch_size            | must be > 0, got 0
            ppo: {kl_coef: 0.1, reference_model: true, kl_type: none} | ppo.kl_type             | is none but ppo.kl_coef is > 0
            ppo: {entropy_coef: -0.01}                        | ppo.entropy_coef                | must be a finite number >= 0, got -0.01
            rollout: {rollouts_per_task: 0}                   | rollout.rollouts_per_task       | must be > 0, got 0
            rollout: {top_k: -1}                              | rollout.top_k                   | must be >= 0, got -1
            rollout: {max_new_tokens: 0}                      | rollout.max_new_tokens          | must be > 0, got 0
            rollout: {max_prompt_tokens: 0}                   | rollout.max_prompt_tokens       | must be > 0, got 0
            rollout: {engine: null}                           | rollout.engine                  | must be continuous or static
            rollout: {truncation: null}                       | rollout.truncation              | must be left, middle, right or error
            rollout: {prefix_cache_tokens: -1}                | rollout.prefix_cache_tokens     | must be >= 0 (0: as max_batch_tokens), got -1
            models: {policy: {size: {hidden: 0}}}             | models.policy.size.hidden       | must be > 0, got 0
            models: {policy: {size: {layers: 0}}}             | models.policy.size.layers       | must be > 0, got 0
            models: {policy: {size: {heads: 0}}}              | models.policy.size.heads        | must be > 0, got 0
            models: {policy: {size: {kv_heads: 0}}}           | models.policy.size.kv_heads     | must be > 0, got 0
            models: {policy: {size: {intermediate: 0}}}       | models.policy.size.intermediate | must be > 0, got 0
            models: {policy: {size: {head_dim: -2}}}          | models.policy.size.head_dim     | must be >= 0, got -2
            models: {policy: {size: {hidden: 64, heads: 3, kv_heads: 1}}} | models.policy.size.heads | must divide hidden (64) when head_dim is 0, got 3
            models: {policy: {size: {hidden: 60, heads: 4, kv_heads: 2}}} | models.policy.size.heads | the head size must be even (rotary embeddings rotate pairs), got 15
            models: {policy: {size: {head_dim: 7}}}           | models.policy.size.head_dim     | the head size must be even (rotary embeddings rotate pairs), got 7
            models: {policy: {family: qwen2, size: {hidden: 64, heads: 4, kv_heads: 2, head_dim: 32}}} | models.policy.size.head_dim | must be 0 or hidden / heads (64 / 4) for family qwen2, got 32
            models: {policy: {size: {max_positions: 0}}}      | models.policy.size.max_positions | must be > 0, got 0
            models: {policy: {size: {rope_theta: 0}}}         | models.policy.size.rope_theta   | must be a finite number > 0, got 0
            models: {policy: {optim: {eps: 0}}}               | models.policy.optim.eps         | must be a finite number > 0, got 0
            models: {policy: {optim: {weight_decay: -0.1}}}   | models.policy.optim.weight_decay | must be a finite number >= 0, got -0.1
            models: {policy: {optim: {warmup_steps: -1}}}     | models.policy.optim.warmup_steps | must be >= 0, got -1
            models: {policy: {optim: {grad_clip: -1}}}        | models.policy.optim.grad_clip   | must be a finite number >= 0, got -1
            data: {synthetic: {operands: 1}}                  | data.synthetic.operands         | must be in [2, 6], got 1
            data: {synthetic: {operands: 7}}                  | data.synthetic.operands         | must be in [2, 6], got 7
            data: {synthetic: {operators: null}}              | data.synthetic.operators        | is required
            data: {synthetic: {operators: []}}                | data.synthetic.operators        | must list at least one of + - *
            data: {synthetic: {operators: [+, '-', +]}}       | data.synthetic.operators[2]     | '+' is listed twice
            data: {synthetic: {train_size: 0}}                | data.synthetic.train_size       | must be > 0, got 0
            data: {synthetic: {test_size: 0}}                 | data.synthetic.test_size        | must be > 0, got 0
            {distributed: {shard_optimizer: true}, models: {policy: {dtype: bfloat16, master_dtype: bfloat16}}} | distributed.shard_optimizer | shards fp32 master weights, but models.policy.master_dtype is bfloat16 (pure reduced precision keeps no masters to shard)
            distributed: {timeout_s: 0}                       | distributed.timeout_s           | must be a finite number > 0, got 0
            distributed: {timeout_s: 1.0e10}                  | distributed.timeout_s           | must be at most 604800 s (a week), got 1.0E10
            distributed: {checksum_freq: -1}                  | distributed.checksum_freq       | must be >= 0, got -1
            distributed: {bucket_mb: 0}                       | distributed.bucket_mb           | must be a finite number > 0, got 0
            sft: {steps: 0}                                   | sft.steps                       | must be > 0, got 0
            trainer: {epochs: -1}                             | trainer.epochs                  | must be >= 0, got -1
            sft: {batch_size: 0}                              | sft.batch_size                  | must be > 0, got 0
            sft: {lr: 0}                                      | sft.lr                          | must be a finite number > 0, got 0
            run: {name: " "}                                  | run.name                        | must not be empty
            run: {name: ../elsewhere}                         | run.name                        | '../elsewhere' would put the run folder outside run.output_dir
            data: {question_field: " "}                       | data.question_field             | must not be empty
            data: {answer_field: ""}                          | data.answer_field               | must not be empty
            data: {data_source_field: " "}                    | data.data_source_field          | must not be empty
            agents: [{id: solver, role: " "}, {id: verifier}] | agents[0].role                  | must not be empty
            agents: [{id: solver, model: " "}, {id: verifier}] | agents[0].model                | must not be empty
            agents: [{id: solver, prompts: {user: " "}}, {id: verifier}] | agents[0].prompts.user | must not be empty
            agents: [{id: solver, prompts: {follow_up: ""}}, {id: verifier}] | agents[0].prompts.follow_up | must not be empty
            models: {policy: {optim: {lr: 1e39}}}             | models.policy.optim.lr          | must be <= 3.4028235E38 (LibTorch takes it as a float32), got 1.0E39
            agents: [{id: solver, optim: {lr: -1}}, {id: verifier}] | agents[0].optim.lr        | must be a finite number > 0, got -1
            agents: [{id: solver, optim: {eps: 0}}, {id: verifier}] | agents[0].optim.eps        | must be a finite number > 0, got 0
            agents: [{id: solver, optim: {warmup_steps: -1}}, {id: verifier}] | agents[0].optim.warmup_steps | must be >= 0, got -1
            agents: [{id: solver, optim: {grad_clip: -1}}, {id: verifier}] | agents[0].optim.grad_clip | must be a finite number >= 0, got -1
            models: {}                                        | models                          | must define at least one model
            models: {a.b: {}}                                 | models                          | 'a.b' is not a valid id
            trainer: {eval_freq: -2147483648}                 | trainer.eval_freq               | must be >= 0, got -2147483648
            models: {policy: {master_dtype: bfloat16}}        | models.policy.master_dtype      | must be float32 or the model's dtype (float32), got bfloat16
            """)
    void eachCheckNamesItsKeyPath(String yaml, String key, String problem) throws IOException {
        String message = fails(yaml + "\n");
        assertTrue(message.startsWith("run.yaml:1: " + key + ": "), message);
        assertTrue(message.contains(problem), message);
    }

    @Test
    void theEdgesThoseChecksLetThrough() throws IOException {
        file = dir.resolve("run.yaml");
        for (String yaml : List.of("eval: {k: 4, samples: 4}", "data: {source: jsonl, train_file: t.jsonl, test_file: e.jsonl}",
                "{data: {source: jsonl, train_file: t.jsonl}, trainer: {eval_freq: 0}}",
                "{distributed: {shard_optimizer: true}, models: {policy: {dtype: bfloat16, master_dtype: float32}}}",
                "models: {policy: {size: {hidden: 64, heads: 4, kv_heads: 2, head_dim: 8}}}",
                "models: {policy: {family: qwen2, size: {hidden: 64, heads: 4, kv_heads: 2, head_dim: 16}}}",
                "data: {synthetic: {operands: 2}}", "data: {synthetic: {operands: 6}}",
                // each bound itself is allowed: [0, 1) and [0, 1] ranges, float32's largest, one row exactly
                "models: {policy: {optim: {betas: [0, 0.5]}}}", "sft: {correct_prob: 0}", "sft: {correct_prob: 1}",
                "models: {policy: {optim: {lr: 3.4028234663852886E38, eps: 3.4028234663852886E38, weight_decay: 3.4028234663852886E38}}}",
                "ppo: {mini_batch_size: 8, micro_batch_size: 8}", "rollout: {temperature: 1.0e-5}", "eval: {temperature: 1.0e-5}",
                "rollout: {max_batch_tokens: 768}", "ppo: {max_tokens_per_micro_batch: 768}",
                "models: {policy: {size: {max_positions: 768}}}", "trainer: {steps: 2147483647}")) {
            Files.writeString(file, yaml + "\n");
            RunConfig.load(file);
        }
    }

    @Test
    void syntheticDataOfAnotherWorkflowIsRefused() throws IOException {
        // the loader binds data.synthetic to the workflow's own type; a config built in code is checked too
        file = dir.resolve("run.yaml");
        Files.writeString(file, "orchestra: {name: search}\n");
        RunConfig search = RunConfig.load(file);
        Files.writeString(file, "run: {seed: 1}\n");
        RunConfig math = RunConfig.load(file);
        ConfigException e = assertThrows(ConfigException.class, () -> new RunConfig(search.run(), math.data(), search.models(),
                search.agents(), search.orchestra(), search.rollout(), search.algorithm(), search.ppo(), search.trainer(),
                search.eval(), search.sft(), search.metrics(), search.distributed()));
        assertEquals("data.synthetic: is a ArithmeticData, but workflow 'search' takes KnowledgeBaseData", e.getMessage());
    }

    @Test
    void orchestraOptionsOfAnotherWorkflowAreRefused() {
        // the loader binds orchestra.options to the workflow's own type; a config built in code is checked too
        Record mathOptions = OrchestraConfig.of("math").options();
        ConfigException e = assertThrows(ConfigException.class, () -> new OrchestraConfig("search", mathOptions));
        assertEquals("options: is a " + mathOptions.getClass().getSimpleName() + ", but workflow 'search' takes "
                + OrchestraConfig.of("search").options().getClass().getSimpleName(), e.getMessage());
    }

    @Test
    void anOverrideThatReplacesASectionIsWhereItsKeysComeFrom() throws IOException {
        // the file's line for ppo.epochs no longer holds the value: the error names the override
        file = dir.resolve("run.yaml");
        Files.writeString(file, "ppo:\n  epochs: 2\n");
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file, List.of("ppo={epochs: 0}")));
        assertEquals("override 'ppo={epochs: 0}': ppo.epochs: must be > 0, got 0", e.getMessage());
    }

    @Test
    void extendsOfSomethingElseThanFileNames() throws IOException {
        assertEquals("run.yaml:2: extends: expected a file name or a list of file names, got a list",
                fails("run: {seed: 1}\nextends: [1, 2]\n"));
        assertEquals("run.yaml:1: extends: expected a file name or a list of file names, got a mapping {a}",
                fails("extends: {a: b.yaml}\n"));
    }

    @Test
    void bytesThatAreNotUtf8NameTheLineAndColumn() throws IOException {
        // the column counts characters: the two bytes of é are one column
        file = dir.resolve("run.yaml");
        byte[] head = "run:\n  name: caf\u00e9-".getBytes(StandardCharsets.UTF_8);
        byte[] bytes = Arrays.copyOf(head, head.length + 2);
        bytes[head.length] = (byte) 0xff;
        bytes[head.length + 1] = '\n';
        Files.write(file, bytes);
        ConfigException e = assertThrows(ConfigException.class, () -> RunConfig.load(file));
        assertEquals(file + ":2:14: not UTF-8 text (byte 0xff); save the file as UTF-8", e.getMessage());
    }

    @Test
    void tokenBudgetsWhoseSumOverflowsAnIntStillMeetTheModelsLength() throws IOException {
        // 2147483000 + 1000 wraps to a negative int, which any max_positions passed
        assertEquals("run.yaml:2: models.policy.size.max_positions: (1024) is shorter than rollout.max_prompt_tokens"
                + " + rollout.max_new_tokens (2147484000)",
                fails("rollout: {max_prompt_tokens: 2147483000, max_new_tokens: 1000}\nmodels: {policy: {size: {max_positions: 1024}}}\n"));
    }
}
