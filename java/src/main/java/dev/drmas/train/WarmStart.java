// WarmStart.java — the supervised warm start (`drmas sft`) of models trained from scratch: every
// model learns from its agents' turns in demonstrations that the workload scripts (formats right,
// final answers right with probability sft.correct_prob), by token-mean cross-entropy on the
// responses (which end with the end-of-turn token, so that the models learn to stop); the weights
// go to runDir/sft/models, where training picks them up as its starting point, and a model trained
// with fp32 masters (a bfloat16 or float16 dtype) has them in runDir/sft/master/<id>, as checkpoints
// lay them out, so that RL starts from them and not from the weights' rounding (its masters are them,
// its weights their rounding to its own dtype: exact in float32, rounded once in another). They are
// written as checkpoints are (a temporary folder, synced, then renamed), so a warm start killed while
// saving keeps the previous weights whole, and never leaves them beside another warm start's
// masters. A demonstration's prompt is cut to rollout.max_prompt_tokens as rollout.truncation says,
// as the RL rollouts' prompts are (EnginePolicy), so that the warm start teaches on the prompts the
// policy will later see.
package dev.drmas.train;

import dev.drmas.agent.Agent;
import dev.drmas.agent.AgentPolicy;
import dev.drmas.agent.Episode;
import dev.drmas.agent.Message;
import dev.drmas.agent.Step;
import dev.drmas.config.RolloutConfig.Truncation;
import dev.drmas.config.RunConfig;
import dev.drmas.env.Task;
import dev.drmas.rollout.TeacherForcing;
import dev.drmas.workflow.Workload;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.MemoryFormatOptional;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.global.torch;
import org.bytedeco.pytorch.global.torch.ScalarType;

final class WarmStart {
    private final RunConfig cfg;
    private final Workload workload;
    private final Policies policies;
    private final TaskStream tasks;
    private final PrintStream log;
    /** Demonstration prompts cut to rollout.max_prompt_tokens so far. */
    private long truncated;

    WarmStart(RunConfig cfg, Workload workload, Policies policies, TaskStream tasks, PrintStream log) {
        this.cfg = cfg;
        this.workload = workload;
        this.policies = policies;
        this.tasks = tasks;
        this.log = log;
    }

    /** Trains every model on demonstrations and saves the weights; returns the last loss per model. */
    Map<String, Double> run(Path runDir) throws IOException {
        var sc = cfg.sft();
        Map<String, Boolean> mixed = new LinkedHashMap<>();
        for (Policies.Policy p : policies.byId.values()) mixed.put(p.id(), p.optim().mixedPrecision());
        // the run's optimisers that have not stepped go while this one trains, and come back made from its
        // weights: beside them, each model's optimiser state was held twice
        List<String> closed = policies.closeUnsteppedOptimizers();
        Map<String, ModelOptimizer> optims = new LinkedHashMap<>();
        try {
            for (Policies.Policy p : policies.byId.values()) {
                optims.put(p.id(), optimizer(policies, p.id(), sc, mixed.get(p.id()), LossScaler.of(cfg.models().get(p.id()))));
            }
        } catch (RuntimeException e) {
            optims.values().forEach(ModelOptimizer::close);
            policies.reopenOptimizers(closed);
            throw e;
        }
        SplittableRandom rng = new SplittableRandom(cfg.run().seed() ^ 0x5F7L);
        Map<String, Double> last = new LinkedHashMap<>();
        java.util.Set<String> trained = new java.util.HashSet<>();
        Map<String, int[]> steps = new LinkedHashMap<>();  // per model: steps taken, steps skipped (a gradient not finite)
        int every = Math.max(1, sc.steps() / 10);
        long t0 = System.nanoTime();
        Throwable failed = null;
        List<String> mastersWritten = List.of();
        try {
            for (int s = 0; s < sc.steps(); s++) {
                Map<String, List<PpoUpdater.Row>> byModel = demonstrations(sc.batchSize(), sc.correctProb(), rng);
                for (Policies.Policy p : policies.byId.values()) {
                    List<PpoUpdater.Row> rows = byModel.getOrDefault(p.id(), List.of());
                    if (rows.isEmpty()) continue;
                    trained.add(p.id());
                    last.put("sft/" + p.id() + "/loss", crossEntropyStep(p, optims.get(p.id()), rows,
                            steps.computeIfAbsent(p.id(), k -> new int[2])));
                }
                if ((s + 1) % every == 0 || s + 1 == sc.steps()) {
                    StringBuilder sb = new StringBuilder(String.format("sft %d/%d", s + 1, sc.steps()));
                    last.forEach((key, v) -> sb.append(String.format("  %s=%.4f", key, v)));
                    sb.append(String.format("  (%.0f s)", (System.nanoTime() - t0) / 1e9));
                    log.println(sb);
                }
            }
            warnSkipped(steps, optims);
            // the fp32 masters, while the optimisers that hold them are open (sft/master.tmp; save() puts it in place)
            mastersWritten = writeMasters(runDir, optims);
        } catch (Throwable e) {
            failed = e;
            throw e;
        } finally {
            optims.values().forEach(ModelOptimizer::close);
            if (failed != null) restartRunOptimizers(runDir, trained, closed, List.of(), failed);
        }
        List<String> withMasters = List.of();
        try {
            warnUntrained(trained);
            if (truncated > 0) {
                log.println("drmas: " + truncated + " demonstration prompts were over rollout.max_prompt_tokens " + cfg.rollout().maxPromptTokens()
                        + " and cut (rollout.truncation: " + cfg.rollout().truncation().name().toLowerCase(java.util.Locale.ROOT) + ")");
            }
            Path dir = save(runDir, !mastersWritten.isEmpty());
            withMasters = mastersWritten;
            log.println("drmas: warm-start weights written to " + dir + (withMasters.isEmpty() ? ""
                    : ", the fp32 master weights of " + String.join(", ", withMasters) + " to " + masters(dir)));
        } catch (Throwable e) {
            failed = e;
            throw e;
        } finally {
            restartRunOptimizers(runDir, trained, closed, withMasters, failed);
        }
        return last;
    }

    /**
     * Makes the run's optimisers again after the warm start, should this trainer go on to train: from the
     * warm-started weights, and for the models in {@code withMasters} from the fp32 masters just saved in
     * sft/master (the trained masters, not their rounding). A failure is added to {@code failed} when there
     * is one (the warm start's own failure is the one to report).
     */
    private void restartRunOptimizers(Path runDir, java.util.Set<String> trained, List<String> closed, List<String> withMasters, Throwable failed) {
        try {
            policies.weightsChanged(trained);
            Path masters = masters(weights(runDir));
            for (String id : withMasters) policies.startMastersIn(id, masters.resolve(id));
            policies.reopenOptimizers(closed);
            for (Policies.Policy p : policies.byId.values()) {
                if (closed.contains(p.id())) continue;
                p.optim().reloadFromWeights();
                if (withMasters.contains(p.id())) policies.startMasters(p.id(), p.optim());
            }
        } catch (RuntimeException e) {
            if (failed == null) throw e;
            failed.addSuppressed(e);
        }
    }

    /**
     * The warm start's optimiser of model {@code id}, in the model's precision: mixed (fp32 masters,
     * which start from the model's weight files where those hold more than its dtype: Policies.startMasters)
     * unless master_dtype says otherwise, with the model's loss scaler ({@code scaler}, null: none).
     * AdamW as TRL's SFTTrainer (HF TrainingArguments) has it, as SftConfig documents: the model's
     * optim settings are the RL update's (verl's actor defaults), and verl's SFT trainer has its own too.
     */
    static ModelOptimizer optimizer(Policies policies, String id, dev.drmas.config.SftConfig sc, boolean mixed, LossScaler scaler) {
        ModelOptimizer o = ModelOptimizer.create(policies.get(id).model().parameters(), new AdamW.Settings(sc.lr(), 0.9, 0.999, 1e-8,
                0.0, 0), mixed);
        try {
            o.useLossScaler(scaler);
            policies.startMasters(id, o);
        } catch (RuntimeException e) {
            o.close();
            throw e;
        }
        return o;
    }

    /**
     * A warning for each model that no demonstration turn trained (none of its agents acted in the
     * workflow's scripted episodes, e.g. a verifier under max_loops 1): its weights are saved with the
     * rest, but they are its initialisation, not warm-started ones, and nothing else would say so.
     */
    private void warnUntrained(java.util.Set<String> trained) {
        for (Policies.Policy p : policies.byId.values()) {
            if (trained.contains(p.id())) continue;
            List<String> agents = workload.team().agents().stream().filter(a -> a.modelId().equals(p.id())).map(Agent::id).toList();
            log.println("drmas: warning: model '" + p.id() + "' (agents " + (agents.isEmpty() ? "none" : String.join(", ", agents))
                    + ") got no demonstration rows in " + cfg.sft().steps() + " sft steps: none of its agents acted in the "
                    + "demonstrations, so its weights in sft/models are its starting weights, untrained");
        }
    }

    /**
     * runDir/sft/models, where the warm start's weights are. A save stopped between its two renames
     * (models moved to models.old, models.tmp not yet renamed) is repaired first: models.old is the
     * previous complete set. So are the masters of a save stopped between putting the previous ones aside
     * and the new ones in place (repairMasters).
     */
    static Path weights(Path runDir) {
        Path sft = runDir.resolve("sft"), dir = sft.resolve("models"), old = sft.resolve("models.old");
        if (!Files.exists(dir) && Files.isDirectory(old)) {
            try {
                Files.move(old, dir, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                return Files.isDirectory(dir) ? dir : old;  // another rank repaired it first, or use it where it is
            }
        }
        repairMasters(sft, dir);
        return dir;
    }

    /**
     * A save stopped after it put the previous masters aside (sft/master.old) and before the new ones were in
     * place (sft/master.tmp) left no sft/master, and the masters of the weights now in sft/models aside: the
     * new ones once the new weights are in, else the previous ones. The aside folder whose masters are every
     * one those of the weights beside it (mastersMisfit) is moved to sft/master, so that runs find it there;
     * one that does not fit stays (Policies.open warns of it). The run folder's lock keeps `drmas sft` out
     * while this runs; ranks that all try it are fine (the move is one rename, a later one fails and finds it done).
     */
    private static void repairMasters(Path sft, Path dir) {
        Path master = sft.resolve(Checkpoints.MASTER);
        if (Files.exists(master) || !Files.isDirectory(dir)) return;
        for (String aside : List.of(Checkpoints.MASTER + ".tmp", Checkpoints.MASTER + ".old")) {
            Path left = sft.resolve(aside);
            if (!Files.isDirectory(left) || !allFit(left, dir)) continue;
            try {
                Files.move(left, master, StandardCopyOption.ATOMIC_MOVE);
            } catch (IOException e) {
                // another rank moved it first; else Policies.open finds it where it is
            }
            return;
        }
    }

    /** Whether {@code masters} holds masters of at least one model, and each is those of that model's weights in {@code dir}. */
    private static boolean allFit(Path masters, Path dir) {
        try (java.util.stream.Stream<Path> s = Files.list(masters)) {
            List<Path> ids = s.filter(Files::isDirectory).toList();
            for (Path m : ids) {
                Path w = dir.resolve(m.getFileName().toString());
                if (!Files.isDirectory(w) || mastersMisfit(m, w) != null) return false;
            }
            return !ids.isEmpty();
        } catch (IOException e) {
            return false;
        }
    }

    /**
     * The tokenizer files a warm start carries beside its weights (Policies.copyTokenizers) and that must be the model's:
     * all but generation_config.json, whose sampling defaults a warm start does not depend on.
     */
    static final List<String> TOKENIZER_FILES = Policies.TOKENIZER_FILES.stream().filter(f -> !f.equals("generation_config.json")).toList();

    /**
     * Refuses the warm start {@code warm} (sft/models/id, or run.warm_start's) of model {@code id}
     * when it was trained for another model than the one the config now describes: a shape other
     * than {@code expected} (the path's config.json, or family and size at the built-in vocabulary),
     * or tokenizer files other than those of {@code tokDir} (the path's, or the built-in
     * tokenizer's). Loading it anyway trained a model of another shape than config.yaml and `drmas
     * plan` say, or fed it ids of a tokenizer it never learnt.
     */
    static void requireFits(String id, Path warm, dev.drmas.model.ModelConfig expected, Path tokDir, boolean hasPath) {
        List<String> diffs = new ArrayList<>();
        dev.drmas.model.ModelConfig got = dev.drmas.model.ModelConfig.read(warm.resolve("config.json"));
        String[] names = {"family", "hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads",
                "intermediate_size", "head_dim", "vocab_size", "tie_word_embeddings", "rms_norm_eps", "rope_theta", "rope_scaling",
                "attention_bias", "mlp_bias", "max_position_embeddings"};
        Object[] want = {expected.family().name().toLowerCase(java.util.Locale.ROOT), expected.hiddenSize(), expected.numLayers(),
                expected.numHeads(), expected.numKvHeads(), expected.intermediateSize(), expected.headDim(), expected.vocabSize(),
                expected.tieWordEmbeddings(), expected.rmsNormEps(), expected.ropeTheta(), String.valueOf(expected.ropeScaling()),
                expected.attentionBias(), expected.mlpBias(), expected.maxPositionEmbeddings()};
        Object[] have = {got.family().name().toLowerCase(java.util.Locale.ROOT), got.hiddenSize(), got.numLayers(), got.numHeads(),
                got.numKvHeads(), got.intermediateSize(), got.headDim(), got.vocabSize(), got.tieWordEmbeddings(), got.rmsNormEps(),
                got.ropeTheta(), String.valueOf(got.ropeScaling()), got.attentionBias(), got.mlpBias(), got.maxPositionEmbeddings()};
        for (int i = 0; i < names.length; i++) {
            if (!want[i].equals(have[i])) diffs.add(names[i] + " " + have[i] + " where the model has " + want[i]);
        }
        for (String f : TOKENIZER_FILES) {
            Path mine = tokDir.resolve(f), theirs = warm.resolve(f);
            boolean a = Files.isRegularFile(mine), b = Files.isRegularFile(theirs);
            try {
                if (a != b || (a && !sameFile(mine, theirs))) {
                    diffs.add(f + (b ? (a ? " differs from " + mine : " is there, and " + tokDir + " has none") : " is missing (" + mine
                            + " has one)"));
                }
            } catch (IOException e) {
                throw new java.io.UncheckedIOException("cannot compare " + theirs + " with " + mine, e);
            }
        }
        if (diffs.isEmpty()) return;
        String model = hasPath ? "models." + id + ".path (" + tokDir + ")" : "models." + id + ".family/size with the built-in tokenizer";
        throw dev.drmas.config.ConfigException.at("models." + id, "its warm start " + warm + " was trained for another model than "
                + model + ": " + String.join("; ", diffs) + ". It was made before models." + id + " changed, or for another "
                + "run's model: delete " + warm + " and run `drmas sft` again, or point run.warm_start at a warm start of this model");
    }

    /**
     * Refuses the fp32 masters {@code masters} (sft/master/id beside the warm start's weights) of model
     * {@code id} when they are not the masters of the warm start's weights {@code warm}: a tensor missing,
     * extra or of another shape or dtype, or one whose values do not round to the weights' (in the weight
     * files' dtype): masters of another warm start, or weights replaced since. The model would start from
     * those masters (its weights their rounding), another model than the warm start's.
     */
    static void requireMastersFit(String id, Path masters, Path warm) {
        String problem = mastersMisfit(masters, warm);
        if (problem == null) return;
        throw dev.drmas.config.ConfigException.at("models." + id, "the fp32 master weights of its warm start, " + masters
                + ", are not those of its weights " + warm + ": " + problem + ". Delete " + masters + " to start the masters "
                + "from the weights' rounding, or run `drmas sft` again");
    }

    /** Why the fp32 masters {@code masters} are not those of the warm start's weights {@code warm} (requireMastersFit), or null when they are. */
    static String mastersMisfit(Path masters, Path warm) {
        // (the values are compared at windows of each tensor, not whole: every rank runs this at start-up, and a whole
        // comparison read the model's weights and masters once more, ~24 GB for a 4B model; masters of other weights
        // differ almost everywhere)
        String problem = null;
        try (dev.drmas.model.SafeTensors ms = dev.drmas.model.SafeTensors.open(masters);
             dev.drmas.model.SafeTensors ws = dev.drmas.model.SafeTensors.open(warm)) {
            for (dev.drmas.model.SafeTensors.Info w : ws.tensors().values()) {
                dev.drmas.model.SafeTensors.Info m = ms.tensors().get(w.name());
                if (m == null) {
                    problem = "no tensor " + w.name() + ", which " + warm + " has";
                } else if (!Arrays.equals(m.shape(), w.shape())) {
                    problem = "tensor " + w.name() + " has shape " + Arrays.toString(m.shape()) + ", " + warm + " has "
                            + Arrays.toString(w.shape());
                } else if (m.dtype() != dev.drmas.model.SafeTensors.Dtype.F32) {
                    problem = "tensor " + w.name() + " is " + m.dtype() + ", not F32";
                } else if (!roundsToAtWindows(ms, ws, w)) {
                    problem = "tensor " + w.name() + " does not round to the weights' values in " + warm
                            + ": these are the masters of other weights";
                }
                if (problem != null) break;
            }
            if (problem == null) {
                for (String name : ms.tensors().keySet()) {
                    if (!ws.tensors().containsKey(name)) {
                        problem = "tensor " + name + " is not a weight of " + warm;
                        break;
                    }
                }
            }
        } catch (dev.drmas.model.ModelFileException | IllegalArgumentException e) {
            problem = e.getMessage();
        }
        return problem;
    }

    /** The windows compared of each tensor, and their size in elements, as ResumeCheck compares files. */
    static final int FIT_WINDOWS = 16, FIT_WINDOW = 4096;

    /**
     * Whether the masters {@code ms} of weight {@code w} round to the weights' values in {@code ws} (in the
     * weight files' dtype) at {@link #FIT_WINDOWS} windows of {@link #FIT_WINDOW} elements spread from its
     * first element to its last (all of it when it is smaller).
     */
    private static boolean roundsToAtWindows(dev.drmas.model.SafeTensors ms, dev.drmas.model.SafeTensors ws,
                                             dev.drmas.model.SafeTensors.Info w) {
        long n = w.numel();
        if (n == 0) return true;
        int win = (int) Math.min(n, FIT_WINDOW);
        ScalarType dt = w.dtype().scalarType();
        try (PointerScope scope = new PointerScope()) {
            TensorOptions o = new TensorOptions(dt);
            Tensor a = torch.empty(new long[] {win}, o, new MemoryFormatOptional());
            Tensor b = torch.empty(new long[] {win}, o, new MemoryFormatOptional());
            for (int k = 0; k < FIT_WINDOWS; k++) {
                long at = n <= win ? 0 : (n - win) * k / (FIT_WINDOWS - 1);
                ms.read(w.name(), at, a);
                ws.read(w.name(), at, b);
                if (!a.equal(b)) return false;
                if (n <= win) break;
            }
        }
        return true;
    }

    /**
     * Whether two tokenizer files say the same: JSON ones as JSON trees (the built-in tokenizer's
     * tokenizer.json is written with its keys in an order that differs between JVMs), others byte for byte.
     */
    private static boolean sameFile(Path a, Path b) throws IOException {
        if (Files.mismatch(a, b) == -1) return true;
        if (!a.getFileName().toString().endsWith(".json")) return false;
        var json = new com.fasterxml.jackson.databind.ObjectMapper();
        try {
            return json.readTree(a.toFile()).equals(json.readTree(b.toFile()));
        } catch (com.fasterxml.jackson.core.JacksonException e) {
            return false;  // one is not JSON: they differ
        }
    }

    /**
     * The folder of the fp32 master weights (one sub-folder per model, as a checkpoint's master/) beside
     * the warm start's weights {@code weights} (sft/models, or the folder run.warm_start names): sft/master.
     */
    static Path masters(Path weights) {
        return weights.resolveSibling(Checkpoints.MASTER);
    }

    /**
     * Writes the fp32 masters of the optimisers that keep them apart from the weights (a bfloat16 or
     * float16 model with master_dtype float32) into sft/master.tmp/<id> with the checkpoints' writer, and
     * syncs them; returns the models written (none: no folder). {@link #save} puts the folder in place.
     */
    private List<String> writeMasters(Path runDir, Map<String, ModelOptimizer> optims) throws IOException {
        Path tmp = masters(weights(runDir)).resolveSibling(Checkpoints.MASTER + ".tmp");
        List<String> ids = new ArrayList<>();
        try {
            Checkpoints.deleteTree(tmp);
            for (Map.Entry<String, ModelOptimizer> e : optims.entrySet()) {
                if (!e.getValue().keepsMasterWeights()) continue;
                dev.drmas.model.SafeTensorsWriter.writeCheckpoint(tmp.resolve(e.getKey()), e.getValue().masterWeights(),
                        dev.drmas.model.CausalLm.DEFAULT_SHARD_BYTES);
                ids.add(e.getKey());
            }
            if (!ids.isEmpty()) Durable.syncTree(tmp);
        } catch (IOException | RuntimeException e) {
            try {
                Checkpoints.deleteTree(tmp);
            } catch (IOException | RuntimeException cleanup) {
                e.addSuppressed(cleanup);
            }
            throw new IOException("cannot write the warm start's fp32 master weights (in " + tmp + ", removed): "
                    + (e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName()), e);
        }
        return ids;
    }

    /**
     * Writes every model and its tokenizer into sft/models.tmp, syncs it, and swaps it in for sft/models;
     * with {@code withMasters}, then sft/master.tmp (writeMasters) in for sft/master. The previous masters
     * are moved aside before the weights are swapped, so that a stop at any point leaves sft/models whole
     * beside its own masters, in sft/master or aside in master.tmp or master.old (where weights() puts them
     * back, or Policies.open reads them, for another run's folder), never beside those of the previous warm
     * start in sft/master.
     */
    private Path save(Path runDir, boolean withMasters) throws IOException {
        Path dir = weights(runDir);
        Path sft = dir.getParent(), tmp = sft.resolve("models.tmp"), old = sft.resolve("models.old");
        Path master = masters(dir), masterTmp = sft.resolve(Checkpoints.MASTER + ".tmp"), masterOld = sft.resolve(Checkpoints.MASTER + ".old");
        try {
            Durable.createFolders(sft);  // sft/ itself outlasts a power loss, as its models will
            Checkpoints.deleteTree(tmp);
            for (Policies.Policy p : policies.byId.values()) p.model().save(tmp.resolve(p.id()));
            policies.copyTokenizers(tmp);
            Durable.syncTree(tmp);
        } catch (IOException | RuntimeException e) {
            try {
                Checkpoints.deleteTree(tmp);
                Checkpoints.deleteTree(masterTmp);
            } catch (IOException | RuntimeException cleanup) {
                e.addSuppressed(cleanup);
            }
            throw new IOException("cannot write the warm-start weights (in " + tmp + ", removed; " + dir
                    + " is unchanged): " + (e.getMessage() != null ? e.getMessage() : e.getClass().getSimpleName()), e);
        }
        // the old masters aside first (one rename: a deletion stopped midway left a part of them in place)
        Checkpoints.deleteTree(masterOld);
        if (Files.exists(master)) {
            Files.move(master, masterOld, StandardCopyOption.ATOMIC_MOVE);
            Durable.syncFolder(sft);  // on the disk before the weights they belong to are replaced
        }
        // two renames (a folder cannot be renamed over a full one); weights() repairs a stop in between
        Checkpoints.deleteTree(old);
        if (Files.exists(dir)) Files.move(dir, old, StandardCopyOption.ATOMIC_MOVE);
        Files.move(tmp, dir, StandardCopyOption.ATOMIC_MOVE);
        if (withMasters) Files.move(masterTmp, master, StandardCopyOption.ATOMIC_MOVE);
        Durable.syncFolder(sft);
        Checkpoints.deleteTree(old);
        Checkpoints.deleteTree(masterOld);
        return dir;
    }

    /**
     * Demonstration turns (prompt and response tokens) per model for {@code episodes} workflow runs,
     * each prompt cut as rollout.truncation says when it is over rollout.max_prompt_tokens.
     */
    Map<String, List<PpoUpdater.Row>> demonstrations(int episodes, double pCorrect, SplittableRandom rng) {
        List<Task> batch = tasks.next(episodes);
        AgentPolicy scripted = workload.demonstrator(batch, pCorrect, rng);
        Map<String, List<PpoUpdater.Row>> byModel = new LinkedHashMap<>();
        int max = cfg.rollout().maxPromptTokens();
        Truncation truncation = cfg.rollout().truncation();
        List<Episode> episodesRun = RolloutBatch.run(workload.orchestra(), batch, 1, scripted);
        for (int ei = 0; ei < episodesRun.size(); ei++) {
            Episode e = episodesRun.get(ei);
            for (Step s : e.steps()) {
                Agent a = workload.team().agent(s.agent());
                Policies.Policy p = policies.get(a.modelId());
                int[] prompt = p.tokenizer().encode(p.chat().render(Message.toMaps(s.prompt()), true));
                if (prompt.length > max) {
                    if (truncation == Truncation.ERROR) {
                        throw new IllegalStateException("drmas sft: agent '" + a.id() + "' (demonstration episode " + ei + ", turn " + s.turn()
                                + "): its prompt is " + prompt.length + " tokens, over rollout.max_prompt_tokens " + max
                                + ", and rollout.truncation is error (left, middle or right cut it instead)");
                    }
                    prompt = truncation.cut(prompt, max);
                    truncated++;
                }
                int[] body = p.tokenizer().encode(s.text());
                int[] resp = Arrays.copyOf(body, body.length + 1);
                resp[body.length] = p.tokenizer().eosTokenId();  // learn to stop
                byModel.computeIfAbsent(p.id(), x -> new ArrayList<>()).add(new PpoUpdater.Row(prompt, resp, 0f));
            }
        }
        return byModel;
    }

    /**
     * A warning for each model some of whose warm-start steps were skipped, their gradient not finite
     * (float16: the scaled backward overflowed, and the loss scale halved), with the scale it ended at:
     * the progress lines show only the loss, and a warm start all of whose steps were skipped saves
     * its weights unchanged.
     */
    private void warnSkipped(Map<String, int[]> steps, Map<String, ModelOptimizer> optims) {
        steps.forEach((id, n) -> {
            if (n[1] == 0) return;
            LossScaler ls = optims.get(id).lossScaler();
            log.println("drmas: warning: the warm start skipped " + n[1] + " of " + (n[0] + n[1]) + " optimiser steps of model '" + id
                    + "', whose gradient was not finite" + (ls == null ? "" : " (its loss scale is now " + ls.scale() + ")")
                    + (n[0] == 0 ? "; its weights are saved as they started" : ""));
        });
    }

    /** One step of token-mean cross-entropy on the responses; returns the loss. {@code steps}: [taken, skipped], counted. */
    private static double crossEntropyStep(Policies.Policy p, ModelOptimizer optim, List<PpoUpdater.Row> rows, int[] steps) {
        List<int[]> prompts = new ArrayList<>(), responses = new ArrayList<>();
        for (PpoUpdater.Row r : rows) {
            prompts.add(r.promptIds());
            responses.add(r.responseIds());
        }
        p.model().setRequiresGrad(true);
        double loss;
        try (PointerScope scope = new PointerScope()) {
            TeacherForcing.Result tf = TeacherForcing.logProbs(p.model(), prompts, responses, 1.0, false);
            Tensor l = tf.logprobs().mean().neg();
            loss = l.item_double();
            // float16: the backward of loss × S, which afterBackward divides by S in fp32
            (optim.lossScale() == 1 ? l : l.mul(new org.bytedeco.pytorch.Scalar(optim.lossScale()))).backward();
            tf.finishBackward();
        }
        optim.afterBackward();
        double norm = optim.clipGradNorm(p.gradClip());
        if (Double.isFinite(norm)) {
            optim.step();
            steps[0]++;
        } else {
            optim.skipStep();
            steps[1]++;
        }
        optim.zeroGrad();
        p.model().setRequiresGrad(false);
        return loss;
    }
}
