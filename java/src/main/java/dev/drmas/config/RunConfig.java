// RunConfig.java — a whole training run's configuration: the sections of a run YAML file bound to
// immutable records, every key defaulted (a config file may hold only what differs), checked
// across sections (agents name existing models and roles of the workflow; agents sharing a model
// agree on its optimiser), loaded with `extends:` and Hydra-style overrides, and written back fully
// resolved as the run folder's config.yaml, which loads to an equal RunConfig.
package dev.drmas.config;

import dev.drmas.algo.GlobalPooling;
import dev.drmas.algo.LossConfig;
import dev.drmas.algo.NormConfig;
import dev.drmas.algo.NormMode;
import dev.drmas.algo.SingletonPolicy;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * The run configuration. Keys are the snake_case names of the components; each section's record
 * documents its keys and defaults.
 *
 * @param run       name, seed, output folder, resume, device, threads
 * @param data      where tasks come from
 * @param models    model id → model; default one model {@code policy}. Models no agent names are
 *                  not loaded
 * @param agents    the agents in order; default one agent per role of the workflow (math: {@code
 *                  solver} and {@code verifier}), all on the one model (shared); required when
 *                  there are several models
 * @param orchestra the multi-agent workflow
 * @param rollout   sampling of training rollouts
 * @param algorithm advantage normalisation
 * @param ppo       the PPO update and its loss
 * @param trainer   steps and the frequency of logs, evaluations and checkpoints
 * @param eval      held-out evaluation
 * @param sft       the supervised warm start
 * @param metrics   metric sinks
 * @param distributed data-parallel settings (used when WORLD_SIZE &gt; 1)
 */
public record RunConfig(RunSettings run, DataConfig data, Map<String, ModelSpec> models,
                        @WorkflowSchema.Typed(WorkflowSchema.Part.AGENTS) List<AgentSpec> agents,
                        OrchestraConfig orchestra, RolloutConfig rollout, AlgorithmConfig algorithm, PpoConfig ppo,
                        TrainerConfig trainer, EvalConfig eval, SftConfig sft, MetricsConfig metrics,
                        DistributedConfig distributed) {

    /** The one model of a config that lists none. */
    public static final String DEFAULT_MODEL = "policy";

    public RunConfig {
        Check.given(run, "run");
        Check.given(data, "data");
        Check.given(orchestra, "orchestra");
        Check.given(rollout, "rollout");
        Check.given(algorithm, "algorithm");
        Check.given(ppo, "ppo");
        Check.given(trainer, "trainer");
        Check.given(eval, "eval");
        Check.given(sft, "sft");
        Check.given(metrics, "metrics");
        Check.given(distributed, "distributed");
        models = checkModels(models);
        List<AgentSpec> given = agents;
        agents = resolveAgents(agents, models);
        WorkflowSchema workflow = WorkflowSchema.named(orchestra.name());
        List<RoleSpec> roles = workflow.roles(orchestra.options());
        // at load, with the file:line: the workflow opens only after the models have loaded
        if (!roles.isEmpty()) RoleSpec.check(workflow.name(), roles, agents, i -> given.get(i).role() == null);
        checkSharedOptimisers(agents);
        Class<? extends Record> generator = workflow.syntheticDataType();
        Check.that(data.source() != DataConfig.Source.SYNTHETIC || generator != null, "data.source", "is synthetic, but workflow '"
                + orchestra.name() + "' has no built-in task generator: set data.source: jsonl and data.train_file");
        Check.that(data.synthetic() == null || generator != null && generator.isInstance(data.synthetic()), "data.synthetic",
                "is a " + (data.synthetic() == null ? "" : data.synthetic().getClass().getSimpleName()) + ", but workflow '"
                        + orchestra.name() + "' takes " + (generator == null ? "none" : generator.getSimpleName()));
        Check.that(data.source() != DataConfig.Source.JSONL || data.testFile() != null || trainer.evalFreq() == 0,
                "data.test_file", "is required when data.source is jsonl and trainer.eval_freq > 0 "
                        + "(or set trainer.eval_freq: 0)");
        checkOneRollout(rollout, algorithm);
        // a bound that the longest possible row (a whole prompt and response) breaks bounds nothing; a long,
        // since two int budgets can sum past Integer.MAX_VALUE, and a wrapped (negative) sum passes every bound
        long row = (long) rollout.maxPromptTokens() + rollout.maxNewTokens();
        Check.that(ppo.maxTokensPerMicroBatch() == 0 || ppo.maxTokensPerMicroBatch() >= row, "ppo.max_tokens_per_micro_batch",
                "must hold one row of rollout.max_prompt_tokens + rollout.max_new_tokens (" + row + ") or be 0 (off), got "
                        + ppo.maxTokensPerMicroBatch());
        // only the models some agent runs on: the others are not loaded, and a variant (extends
        // merges models key by key) cannot remove the ones its base defines
        Set<String> used = new HashSet<>();
        for (AgentSpec a : agents) used.add(a.model());
        for (Map.Entry<String, ModelSpec> e : models.entrySet()) {
            if (!used.contains(e.getKey())) continue;
            ModelSpec m = e.getValue();
            Check.that(m.path() != null || m.size().maxPositions() >= row, "models." + e.getKey() + ".size.max_positions",
                    "(" + m.size().maxPositions() + ") is shorter than rollout.max_prompt_tokens + rollout.max_new_tokens ("
                            + row + ")");
            Check.that(!distributed.shardOptimizer() || m.masterDtype() == ModelSpec.Dtype.FLOAT32, "distributed.shard_optimizer",
                    "shards fp32 master weights, but models." + e.getKey() + ".master_dtype is " + m.masterDtype().configName()
                            + " (pure reduced precision keeps no masters to shard)");
        }
    }

    /**
     * One rollout per task under trajectory pooling makes every group a single trajectory; a mode
     * that takes its mean or std from the group then gives every row advantage 0 (singleton
     * fallback and zero), so the run would train on nothing. Refused, saying what does work.
     */
    private static void checkOneRollout(RolloutConfig rollout, AlgorithmConfig a) {
        if (rollout.rolloutsPerTask() != 1 || a.globalPooling() != GlobalPooling.TRAJECTORIES || a.singleton() == SingletonPolicy.RAW
                || a.mode() == NormMode.DRMAS) {
            return;
        }
        throw ConfigException.at("rollout.rollouts_per_task", "is 1, so each group (task) has one trajectory and algorithm.mode "
                + a.mode().configName() + " gives every advantage 0 (the group's statistics are undefined; algorithm.singleton "
                + a.singleton().configName() + "); use 2 or more rollouts per task, or algorithm.global_pooling: rows, "
                + "or algorithm.singleton: raw");
    }

    /** What is allowed but probably not meant, one line each (the CLI prints them at start). */
    public List<String> warnings() {
        List<String> w = new ArrayList<>();
        if (rollout.rolloutsPerTask() == 1 && algorithm.mode() == NormMode.DRMAS && algorithm.singleton() != SingletonPolicy.RAW) {
            w.add("rollout.rollouts_per_task is 1: an agent that acts once per trajectory is alone in its (task, agent) segment and"
                    + " its group has one trajectory, so its advantages are 0 (algorithm.singleton " + algorithm.singleton().configName()
                    + "); only agents acting several times per trajectory learn. Use 2 or more rollouts per task");
        }
        return w;
    }

    private static Map<String, ModelSpec> checkModels(Map<String, ModelSpec> models) {
        Check.given(models, "models");
        Check.that(!models.isEmpty(), "models", "must define at least one model");
        for (Map.Entry<String, ModelSpec> e : models.entrySet()) {
            Check.id(e.getKey(), "models");
            Check.given(e.getValue(), "models." + e.getKey());
        }
        return Collections.unmodifiableMap(new LinkedHashMap<>(models));
    }

    /** Fills each agent's role (its id) and model (the only model), and checks ids and model names. */
    private static List<AgentSpec> resolveAgents(List<AgentSpec> agents, Map<String, ModelSpec> models) {
        Check.given(agents, "agents");
        Check.that(!agents.isEmpty(), "agents", "must list at least one agent");
        List<AgentSpec> out = new ArrayList<>();
        Map<String, Integer> seen = new HashMap<>();
        for (int i = 0; i < agents.size(); i++) {
            String at = "agents[" + i + "]";
            AgentSpec a = Check.given(agents.get(i), at);
            Check.given(a.id(), at + ".id");
            Integer before = seen.putIfAbsent(a.id(), i);
            Check.that(before == null, at + ".id", "'" + a.id() + "' is also the id of agents[" + before + "]");
            String model = a.model();
            if (model == null) {
                Check.that(models.size() == 1, at + ".model", "is required when there is more than one model (models: "
                        + String.join(", ", models.keySet()) + ")");
                model = models.keySet().iterator().next();
            }
            Check.that(models.containsKey(model), at + ".model", "'" + model + "' is not a key of models"
                    + KeyPaths.didYouMean(model, models.keySet()) + "; models: " + String.join(", ", models.keySet()));
            out.add(new AgentSpec(a.id(), a.role() != null ? a.role() : a.id(), model, a.optim(), a.prompts()));
        }
        return List.copyOf(out);
    }

    /** Agents sharing a model share one optimiser: their overrides of one key must agree. */
    private static void checkSharedOptimisers(List<AgentSpec> agents) {
        for (int i = 0; i < agents.size(); i++) {
            for (int j = 0; j < i; j++) {
                AgentSpec a = agents.get(j);
                AgentSpec b = agents.get(i);
                if (!a.model().equals(b.model())) continue;
                Map<String, Object> setB = b.optim().set();
                for (Map.Entry<String, Object> e : a.optim().set().entrySet()) {
                    Object other = setB.get(e.getKey());
                    if (other == null || other.equals(e.getValue())) continue;
                    throw ConfigException.at("agents[" + i + "].optim." + e.getKey(), "agents " + a.id() + " and " + b.id()
                            + " share model " + a.model() + " but set optim." + e.getKey() + " to " + show(e.getValue())
                            + " and " + show(other) + "; a shared model has one optimiser: set models." + a.model()
                            + ".optim." + e.getKey() + " (or give the agents their own models)");
                }
            }
        }
    }

    private static String show(Object v) {
        return v instanceof Double d ? Check.num(d) : String.valueOf(v);
    }

    /**
     * The requests of one agent turn on one of {@code world} data-parallel ranks: its share of the
     * step's tasks × rollouts, or of an evaluation chunk's tasks × samples when that has more.
     */
    public long turnRows(int world) {
        long w = Math.max(1, world);
        long rows = (rollout.tasksPerStep() + w - 1) / w * rollout.rolloutsPerTask();
        if (trainer.evalFreq() > 0 && eval.tasks() > 0) {
            rows = Math.max(rows, Math.min((eval.tasks() + w - 1) / w, eval.tasksPerChunk()) * eval.samplesPerTask());
        }
        return rows;
    }

    /** One agent per default role of {@code workflow} (its id the role), all on model {@code model} (null: none chosen). */
    static List<AgentSpec> defaultAgents(String workflow, String model) {
        return WorkflowSchema.named(workflow).defaultRoles().stream().map(r -> new AgentSpec(r, r, model)).toList();
    }

    /** Every default: the math workflow's two agents (solver, verifier) sharing one tiny model, Dr. MAS, synthetic tasks. */
    public static RunConfig defaults() {
        return new RunConfig(RunSettings.defaults(), DataConfig.defaults(), Map.of(DEFAULT_MODEL, ModelSpec.defaults()),
                defaultAgents(OrchestraConfig.DEFAULT_WORKFLOW, DEFAULT_MODEL),
                OrchestraConfig.defaults(), RolloutConfig.defaults(), AlgorithmConfig.defaults(), PpoConfig.defaults(),
                TrainerConfig.defaults(), EvalConfig.defaults(), SftConfig.defaults(), MetricsConfig.defaults(),
                DistributedConfig.defaults());
    }

    // ------------------------------------------------------------------ loading

    public static RunConfig load(Path yaml) {
        return load(yaml, List.of());
    }

    /**
     * Reads {@code yaml} (and the files it extends), applies {@code overrides} in order, and binds.
     * run.name defaults to the file's name without its extension: a run.name in a file it extends
     * is not inherited (a variant of math-toy-drmas.yaml must not write into and resume the base's
     * run folder).
     *
     * @throws ConfigException naming the file and line or the override, and the key path
     */
    public static RunConfig load(Path yaml, List<String> overrides) {
        ConfigTree tree = ConfigTree.read(yaml, "run.name");
        String file = yaml.getFileName().toString();
        int dot = file.lastIndexOf('.');
        return resolve(tree, overrides, dot > 0 ? file.substring(0, dot) : file);
    }

    /**
     * As {@link #load(Path)} for a config written by another version of drmas (a checkpoint's
     * config.yaml after an upgrade): keys this version does not know are left out, each passed to
     * {@code ignored}, instead of failing the whole file; any other problem still throws.
     */
    public static RunConfig loadIgnoringUnknownKeys(Path yaml, java.util.function.Consumer<String> ignored) {
        ConfigTree tree = ConfigTree.read(yaml, "run.name");
        String file = yaml.getFileName().toString();
        int dot = file.lastIndexOf('.');
        String name = dot > 0 ? file.substring(0, dot) : file;
        for (int tries = 0; ; tries++) {
            try {
                return resolve(tree, List.of(), name);
            } catch (ConfigException e) {
                if (tries >= 1000 || e.key() == null || e.problem() == null || !e.problem().startsWith("unknown key")
                        || !removeKey(tree.root, e.key())) {
                    throw e;
                }
                ignored.accept(e.key());
            }
        }
    }

    /** Removes the entry at a key path (a.b, a[2].b) from a parsed tree; false when it is not there. */
    @SuppressWarnings("unchecked")
    private static boolean removeKey(Map<String, Object> root, String key) {
        Object at = root;
        String[] parts = key.split("\\.");
        for (int i = 0; i < parts.length; i++) {
            String part = parts[i];
            int bracket = part.indexOf('[');
            String name = bracket < 0 ? part : part.substring(0, bracket);
            boolean last = i == parts.length - 1 && bracket < 0;
            if (!(at instanceof Map<?, ?> m) || !m.containsKey(name)) return false;
            if (last) {
                ((Map<String, Object>) m).remove(name);
                return true;
            }
            at = m.get(name);
            for (int b = bracket; b >= 0; b = part.indexOf('[', b + 1)) {
                int close = part.indexOf(']', b);
                if (close < 0 || !(at instanceof List<?> l)) return false;
                int index;
                try {
                    index = Integer.parseInt(part.substring(b + 1, close));
                } catch (NumberFormatException e) {
                    return false;
                }
                if (index < 0 || index >= l.size()) return false;
                at = l.get(index);
            }
        }
        return false;
    }

    /** Parses YAML text (without {@code extends}, which needs a file) and applies {@code overrides}. */
    public static RunConfig parse(String yaml, List<String> overrides) {
        ConfigTree tree = ConfigTree.parse(yaml, "<config>");
        if (tree.root.containsKey("extends")) {
            throw new ConfigException(tree.origin("extends"), "extends", "needs a config file: use RunConfig.load");
        }
        return resolve(tree, overrides, null);
    }

    /** This configuration with {@code overrides} applied (as on the command line). */
    public RunConfig withOverrides(List<String> overrides) {
        @SuppressWarnings("unchecked") Map<String, Object> root = (Map<String, Object>) Binder.toTree(this);
        return resolve(new ConfigTree(root, new HashMap<>()), overrides, null);
    }

    @SuppressWarnings("unchecked")
    private static RunConfig resolve(ConfigTree tree, List<String> overrides, String defaultName) {
        for (String o : overrides) Overrides.apply(tree, Overrides.parse(o));
        if (defaultName != null) {
            Object run = tree.root.get("run");
            if (run == null) tree.root.put("run", run = new LinkedHashMap<String, Object>());
            if (run instanceof Map<?, ?> m && !m.containsKey("name")) ((Map<String, Object>) m).put("name", defaultName);
        }
        return new Binder(tree).bindRoot();
    }

    // ------------------------------------------------------------------ writing

    /** The fully resolved configuration (every default written out) as YAML; {@link #parse} reads it back equal. */
    public String toYaml() {
        @SuppressWarnings("unchecked") Map<String, Object> root = (Map<String, Object>) Binder.toTree(this);
        return "# drmas run configuration, fully resolved: every key with the value the run used\n"
                + YamlWriter.write(root);
    }

    /** Writes {@link #toYaml()} to {@code file} through a temporary file and a rename, so no half file is left. */
    public void save(Path file) {
        Path tmp = file.resolveSibling(file.getFileName() + ".tmp");
        try {
            if (file.getParent() != null) Files.createDirectories(file.getParent());
            Files.writeString(tmp, toYaml());
            try {
                Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, file, StandardCopyOption.REPLACE_EXISTING);
            }
        } catch (IOException e) {
            throw new UncheckedIOException("writing " + file, e);
        }
    }

    /**
     * Every setting by its full key path ({@code models.policy.size.hidden}, {@code agents[0].model})
     * with its value as config.yaml writes it (numbers, strings, booleans, null), in config order:
     * what a resumed run compares with the run it continues.
     */
    public Map<String, Object> flat() {
        Map<String, Object> out = new LinkedHashMap<>();
        flatten("", Binder.toTree(this), out);
        return out;
    }

    private static void flatten(String path, Object v, Map<String, Object> out) {
        if (v instanceof Map<?, ?> m && !m.isEmpty()) {
            m.forEach((k, e) -> flatten(KeyPaths.child(path, (String) k), e, out));
        } else if (v instanceof List<?> l && !l.isEmpty() && l.stream().anyMatch(e -> e instanceof Map<?, ?>)) {
            for (int i = 0; i < l.size(); i++) flatten(KeyPaths.element(path, i), l.get(i), out);
        } else {
            out.put(path, v);
        }
    }

    // ------------------------------------------------------------------ views for the trainer

    public NormConfig normConfig() {
        return algorithm.toNormConfig();
    }

    public LossConfig lossConfig() {
        return ppo.toLossConfig();
    }

    /** The agent with this id; null when there is none. */
    public AgentSpec agent(String id) {
        for (AgentSpec a : agents) if (a.id().equals(id)) return a;
        return null;
    }

    /** The agents on model {@code modelId}, in agent order (more than one: a shared model). */
    public List<AgentSpec> agentsOf(String modelId) {
        return agents.stream().filter(a -> a.model().equals(modelId)).toList();
    }

    /**
     * Refuses rows of max_prompt_tokens + max_new_tokens longer than model {@code id}'s
     * {@code positions}. The loader checks a model built from models.id.size; a folder's or a
     * checkpoint's length is known only from its config.json ({@code from}; null for a model of
     * models.id.size), which the trainer reads when it loads the model and `drmas plan` without
     * loading it: both refuse the same rows with the same message.
     */
    public void checkRowFits(String id, int positions, Path from) {
        long longest = (long) rollout.maxPromptTokens() + rollout.maxNewTokens();
        if (longest > positions) {
            throw ConfigException.at("rollout.max_new_tokens", "with rollout.max_prompt_tokens (" + rollout.maxPromptTokens()
                    + "), " + rollout.maxPromptTokens() + " + " + rollout.maxNewTokens() + " = " + longest
                    + " positions, more than model '" + id + "' takes: "
                    + positions + " (" + (from != null ? "max_position_embeddings in " + from.resolve("config.json")
                            : "models." + id + ".size.max_positions") + ")");
        }
    }

    /** The model ids some agent uses, in the order of {@code models}: the models the trainer builds. */
    public List<String> usedModels() {
        Set<String> used = new HashSet<>();
        for (AgentSpec a : agents) used.add(a.model());
        return models.keySet().stream().filter(used::contains).toList();
    }

    /** Model {@code modelId}'s optimiser settings with the overrides of its agents applied. */
    public OptimConfig optimFor(String modelId) {
        ModelSpec m = models.get(modelId);
        if (m == null) throw new IllegalArgumentException("no model " + modelId + " (models: " + models.keySet() + ")");
        OptimConfig o = m.optim();
        for (AgentSpec a : agentsOf(modelId)) o = o.with(a.optim());
        return o;
    }
}
