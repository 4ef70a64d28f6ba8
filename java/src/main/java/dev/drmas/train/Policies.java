// Policies.java — the models of a run and what each needs to act: its tokenizer and chat
// renderer, a rollout engine, its optimiser. Models come, in this order of preference, from the
// checkpoint being resumed, from the run's supervised warm start (which must fit the model its
// config describes), from the model's own path, or from a seeded random initialisation (of the
// path's shape, else the configured tiny one). The tokenizer is the path's, else the built-in one.
// With ppo.reference_model, each also gets the frozen KL reference: the weights RL starts from
// (only training uses it: a resumed run whose reference is lost still evaluates, train() refuses).
package dev.drmas.train;

import dev.drmas.config.ConfigException;
import dev.drmas.config.ModelSpec;
import dev.drmas.config.OptimConfig;
import dev.drmas.config.RunConfig;
import dev.drmas.model.CausalLm;
import dev.drmas.model.ModelConfig;
import dev.drmas.model.ModelFileException;
import dev.drmas.rollout.Generator;
import dev.drmas.tokenizer.BuiltinTokenizer;
import dev.drmas.tokenizer.ChatRenderer;
import dev.drmas.tokenizer.ChatRenderers;
import dev.drmas.tokenizer.HfTokenizer;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.bytedeco.javacpp.PointerScope;
import org.bytedeco.pytorch.Device;
import org.bytedeco.pytorch.DeviceOptional;
import org.bytedeco.pytorch.NoGradGuard;
import org.bytedeco.pytorch.Tensor;
import org.bytedeco.pytorch.TensorOptions;
import org.bytedeco.pytorch.TensorVector;
import org.bytedeco.pytorch.global.torch.ScalarType;
import org.bytedeco.pytorch.global.torch;

final class Policies implements AutoCloseable {
    /** One model of the run. {@code tokenizerDir} holds its tokenizer files (copied into checkpoints). */
    record Policy(String id, CausalLm model, HfTokenizer tokenizer, Path tokenizerDir, ChatRenderer chat, Generator generator,
                  ModelOptimizer optim, double gradClip, CausalLm reference) {
        /**
         * The ids the model generates and is scored over: the tokenizer's, where the embedding matrix
         * has more rows (padding, as Qwen's). The one source of both the rollout engine's limit and
         * the trainer's, so that PPO scores tokens with the distribution they were sampled from.
         */
        int vocabLimit() {
            return Math.min(tokenizer.vocabSize(), model.config().vocabSize());
        }

        Policy withOptim(ModelOptimizer o) {
            return new Policy(id, model, tokenizer, tokenizerDir, chat, generator, o, gradClip, reference);
        }
    }

    final Map<String, Policy> byId = new LinkedHashMap<>();
    final String origin;  // where the weights came from, for the log
    final Set<String> randomInit = new LinkedHashSet<>();  // models with no weights to start from
    final Set<String> warmStarted = new LinkedHashSet<>();  // models that start from the warm start (sftDir/id)
    // models that start from their path's weights, whose reference is reloaded from there (no copy in runDir/reference)
    final Set<String> pathStarted = new LinkedHashSet<>();
    final java.util.List<String> notes = new java.util.ArrayList<>();  // precision and chat-format warnings, for the run's log
    // references held in memory that runDir/reference/<id> does not have yet (saveReferences writes them)
    final Set<String> unsavedReferences = new LinkedHashSet<>();
    final Set<String> startReferences = new LinkedHashSet<>();  // references copied from this trainer's starting weights
    // per model whose reference a resume cannot find, why: evaluation does without it, training refuses (requireReferences)
    final Map<String, String> missingReferences = new LinkedHashMap<>();
    // how open() made each model's optimiser, so that one closed while the warm start trains is made again alike
    private final Map<String, java.util.function.Supplier<ModelOptimizer>> newOptimizer = new LinkedHashMap<>();
    // models loaded from weight files that hold more than the model's dtype keeps (fp32 files of a bfloat16
    // model), or from a warm start that saved its fp32 masters (sft/master/id), while the weights are still those
    // files' rounding: a mixed-precision optimiser's masters start from the files' exact values (startMasters); a
    // warm start that trains a model forgets its files (weightsChanged) and names its own masters (startMastersIn)
    private final Map<String, Path> finerWeights = new LinkedHashMap<>();

    private Policies(String origin) {
        this.origin = origin;
    }

    /**
     * Builds every model some agent uses. {@code checkpoint} (may be null) is resumed from;
     * {@code sftDir} (may be null) holds warm-start weights (sftDir/id), which a model starts from
     * whether or not it has a path; they must fit it (WarmStart.requireFits). When the warm start saved
     * its fp32 masters (WarmStart.masters(sftDir)/id), which must be those of its weights
     * (WarmStart.requireMastersFit), the model starts from them: its weights are their rounding to its
     * dtype (a float32 model has them exactly) and a mixed-precision model's masters are them.
     */
    static Policies open(RunConfig cfg, Path runDir, Path checkpoint, Path sftDir) {
        return open(cfg, runDir, checkpoint, sftDir, dev.drmas.dist.Collective.single());
    }

    /**
     * As above as one rank of {@code dist} (distributed.shard_optimizer shards each optimiser over its
     * ranks). A collective: every rank calls it at the same point, after rank 0's {@link
     * #prepareRunFolder} (a sharded optimiser resumed with master weights spreads them over the ranks).
     */
    static Policies open(RunConfig cfg, Path runDir, Path checkpoint, Path sftDir, dev.drmas.dist.Collective dist) {
        Device device = device(cfg);
        String origin = checkpoint != null ? "checkpoint " + checkpoint : null;
        Policies ps = new Policies(origin == null ? "" : origin);
        StringBuilder from = new StringBuilder();
        try {
            for (String id : cfg.usedModels()) {
                ModelSpec spec = cfg.models().get(id);
                Path tokDir = spec.path() != null ? spec.path() : builtinTokenizer(runDir);
                HfTokenizer tok = HfTokenizer.load(tokDir);
                CausalLm model = null, ref = null;
                ModelOptimizer optim = null;
                try {
                    ScalarType dtype = dtype(spec, device);
                    Path warm = sftDir == null ? null : sftDir.resolve(id);
                    Path source;  // the folder whose config.json the model has, null for one of models.id.size
                    Path weights = null;  // the folder whose weight files the model was loaded from (and its masters start from)
                    Path warmMasters = null;  // the warm start's fp32 masters of the model (sft/master/id), when it saved them
                    if (checkpoint != null) {
                        model = Checkpoints.loadModel(checkpoint, id, dtype, device);
                        source = checkpoint.resolve("models").resolve(id);
                        // with master/id, loadOptimizer below restores the masters from there
                        if (!Files.isDirectory(checkpoint.resolve(Checkpoints.MASTER).resolve(id))) weights = source;
                    } else if (warm != null && Files.isRegularFile(warm.resolve("config.json"))) {
                        // before the path: `drmas sft` trains models with a path too, and RL starts from what it trained
                        WarmStart.requireFits(id, warm, expectedShape(id, spec, tok), tokDir, spec.path() != null);
                        Path m = WarmStart.masters(sftDir).resolve(id);
                        Path misfitAside = null;  // masters left aside that are not those of these weights
                        if (!Files.isDirectory(m)) {
                            // a `drmas sft` stopped while it swapped its weights and masters in (WarmStart.save) left the
                            // masters of the weights now in place aside: the new ones in master.tmp, the previous in
                            // master.old. The run's own sft/ was repaired before (WarmStart.weights); another run's folder
                            // (run.warm_start) is not changed: those that are the weights' are used where they are
                            for (String aside : List.of(Checkpoints.MASTER + ".tmp", Checkpoints.MASTER + ".old")) {
                                Path left = m.getParent().resolveSibling(aside).resolve(id);
                                if (!Files.isDirectory(left)) continue;
                                if (WarmStart.mastersMisfit(left, warm) == null) {
                                    ps.notes.add("note: models." + id + ": the warm start's fp32 master weights are not in " + m
                                            + " but in " + left + ", where an interrupted `drmas sft` left them; they are those of "
                                            + "its weights and the model starts from them there");
                                    m = left;
                                    break;
                                }
                                misfitAside = left;
                            }
                        }
                        if (Files.isDirectory(m)) {
                            // the warm start's trained fp32 values, of which its weights are the rounding: the model's weights are
                            // their rounding to its own dtype, once (a float32 model takes them exactly; a bfloat16 one from float16
                            // files would round twice), and its masters, if it keeps them, start from them (finerWeights below)
                            // (in the weight files' dtype the rounding is the files' values: read those, half the bytes)
                            WarmStart.requireMastersFit(id, m, warm);
                            warmMasters = m;
                            if (holdsOther(warm, dtype)) {
                                try (dev.drmas.model.SafeTensors st = dev.drmas.model.SafeTensors.open(m)) {
                                    model = CausalLm.fromCheckpoint(dev.drmas.model.ModelConfig.read(warm.resolve("config.json")), st, dtype, device);
                                }
                            } else {
                                model = CausalLm.load(warm, dtype, device);
                            }
                        } else {
                            model = CausalLm.load(warm, dtype, device);
                            // masters aside that do not fit (a write stopped midway, or another warm start's): they would have
                            // mattered to a model that keeps masters or whose dtype is not the weight files', unless those
                            // files are float32, as exact as masters
                            if (misfitAside != null && !holdsOnly(warm, ScalarType.Float) && (spec.mixedPrecision() || holdsMore(warm, model))) {
                                ps.notes.add("warning: models." + id + ": the warm start's fp32 master weights are not in " + m
                                        + "; " + misfitAside + ", where an interrupted `drmas sft` left masters, does not hold "
                                        + "those of its weights; the model starts from the weights' rounding (run `drmas sft` "
                                        + "again to have them)");
                            }
                        }
                        source = warm;
                        weights = warmMasters != null ? warmMasters : warm;
                        from.append(id).append(": warm start ").append(warm).append(warmMasters != null ? " (its fp32 masters)" : "").append("; ");
                        ps.warmStarted.add(id);
                    } else if (spec.loadsWeights()) {
                        model = CausalLm.load(spec.path(), dtype, device);
                        source = spec.path();
                        weights = spec.path();
                        from.append(id).append(": ").append(spec.path()).append("; ");
                        ps.pathStarted.add(id);
                    } else {  // (a run.warm_start named and not there stops train(), not sft, which writes it, nor eval)
                        ModelConfig mc = expectedShape(id, spec, tok);  // with a path (init: random), the folder's shape
                        model = CausalLm.random(mc, cfg.run().seed() * 1_000_003L + id.hashCode(), dtype, device);
                        source = spec.path();
                        from.append(id).append(": random init; ");
                        ps.randomInit.add(id);
                    }
                    checkVocabulary(id, model, tok, tokDir, source);
                    cfg.checkRowFits(id, model.config().maxPositionEmbeddings(), source);  // a prompt and its response fit the model
                    model.setActivationCheckpointing(spec.activationCheckpointing());
                    OptimConfig o = cfg.optimFor(id);
                    AdamW.Settings as = new AdamW.Settings(o.lr(), o.beta1(), o.beta2(), o.eps(), o.weightDecay(), o.warmupSteps());
                    // sharded: fp32 masters of every rank's chunk, whatever the dtype (the config refuses pure reduced precision)
                    CausalLm m = model;
                    // float16 with fp32 masters: the loss scale of models.id.loss_scale (a fresh one with each optimiser)
                    java.util.function.Supplier<ModelOptimizer> newOptim = () -> (cfg.distributed().shardOptimizer()
                            ? ModelOptimizer.sharded(m.parameters(), as, dist, (long) (cfg.distributed().bucketMb() * (1 << 20)))
                            : ModelOptimizer.create(m.parameters(), as, spec.mixedPrecision())).useLossScaler(LossScaler.of(spec));
                    optim = newOptim.get();
                    ps.newOptimizer.put(id, newOptim);
                    if (weights != null && holdsMore(weights, model)) ps.finerWeights.put(id, weights);
                    ps.startMasters(id, optim);
                    if (checkpoint != null) {
                        // sharded, a collective (its masters spread over every rank's weights): no rank enters the
                        // spreading while another failed to open or check its files, which loadOptimizer does first, then
                        // meets the others at a ready point (Trainer.open announces a failure to them)
                        Checkpoints.loadOptimizer(checkpoint, id, optim);
                    }
                    ps.notes.addAll(precisionNotes(id, spec, device));
                    ref = cfg.ppo().referenceModel()
                            ? ps.reference(runDir, checkpoint, id, spec, model, dtype, device, warm != null && Files.isRegularFile(warm.resolve("config.json")))
                            : null;
                    Generator gen = new Generator(model, cfg.rollout().maxBatchTokens(), cfg.rollout().engine());
                    long prefixBudget = cfg.rollout().prefixCacheBudget(cfg.turnRows(dist.worldSize()));
                    if (prefixBudget > 0) gen.keepPrefixes(prefixBudget);
                    ps.byId.put(id, new Policy(id, model, tok, tokDir, chatRenderer(id, spec, tok, tokDir, ps.notes), gen, optim, o.gradClip(), ref));
                } catch (RuntimeException e) {
                    // what this model holds is not in byId yet, which ps.close() frees
                    for (AutoCloseable c : new AutoCloseable[] {ref, optim, model, tok}) {
                        try {
                            if (c != null) c.close();
                        } catch (Exception cleanup) {
                            e.addSuppressed(cleanup);
                        }
                    }
                    throw e;
                }
            }
        } catch (RuntimeException e) {
            ps.close();
            throw e;
        }
        return from.isEmpty() ? ps : new Policies(ps, from.toString());
    }

    /**
     * The model's chat renderer with its chat_template_kwargs; a tokenizer without a template refuses
     * them. The ChatML fallback's warning goes to {@code notes}, which the trainer logs on rank 0
     * only (on standard error, every rank of a distributed run printed it).
     */
    private static ChatRenderer chatRenderer(String id, ModelSpec spec, HfTokenizer tok, Path tokDir, List<String> notes) {
        try {
            return ChatRenderers.forTokenizer(tok, spec.chatTemplateKwargs(), "model " + id + "'s tokenizer folder " + tokDir,
                    w -> notes.add("warning: " + w));
        } catch (IllegalArgumentException e) {  // ModelSpec checked the names: the folder's tokenizer has no template
            throw ConfigException.at("models." + id + ".chat_template_kwargs", tokDir + ": " + e.getMessage());
        }
    }

    /**
     * The shape models.id describes: its folder's config.json (for its weights, a warm start of it,
     * or random weights of init: random), else family and size at the vocabulary of {@code tok}.
     */
    private static ModelConfig expectedShape(String id, ModelSpec spec, HfTokenizer tok) {
        if (spec.path() == null) return spec.toModelConfig(tok.vocabSize(), tok.stopTokenIds());
        try {
            return ModelConfig.read(spec.path().resolve("config.json"));
        } catch (ModelFileException e) {
            throw ConfigException.at("models." + id + ".path", e.getMessage() + " (the model's shape is its folder's config.json, "
                    + "with init: random too)");
        }
    }

    /**
     * Every id of the model's tokenizer must have a row in its embedding matrix: a tokenizer of
     * another model would otherwise stop the first rollout, after every model loaded, without
     * naming the model ({@code from}: the folder of the model's config.json, null for models.id.size).
     */
    private static void checkVocabulary(String id, CausalLm model, HfTokenizer tok, Path tokDir, Path from) {
        int rows = model.config().vocabSize();
        if (tok.vocabSize() <= rows) return;
        throw ConfigException.at("models." + id, "its tokenizer (" + tokDir.resolve("tokenizer.json") + ") has " + tok.vocabSize()
                + " ids, but the model has " + rows + " (vocab_size in " + (from != null ? from.resolve("config.json")
                        : "models." + id + ".size") + "): ids from " + rows + " up have no embedding, so the tokenizer is not "
                + "this model's; give the model the folder its tokenizer came with");
    }

    private Policies(Policies p, String origin) {
        this.byId.putAll(p.byId);
        this.randomInit.addAll(p.randomInit);
        this.warmStarted.addAll(p.warmStarted);
        this.pathStarted.addAll(p.pathStarted);
        this.notes.addAll(p.notes);
        this.unsavedReferences.addAll(p.unsavedReferences);
        this.startReferences.addAll(p.startReferences);
        this.missingReferences.putAll(p.missingReferences);
        this.newOptimizer.putAll(p.newOptimizer);
        this.finerWeights.putAll(p.finerWeights);
        this.origin = origin;
    }

    Policy get(String id) {
        Policy p = byId.get(id);
        if (p == null) throw new IllegalArgumentException("no model '" + id + "' in this run (models: " + byId.keySet() + ")");
        return p;
    }

    Map<String, CausalLm> models() {
        Map<String, CausalLm> m = new LinkedHashMap<>();
        byId.forEach((k, p) -> m.put(k, p.model()));
        return m;
    }

    /**
     * Closes the optimisers that have not stepped yet (AdamW's moments zero, the masters the
     * weights: a fresh one made later from the weights of then is the same), so that the warm
     * start's own optimisers do not sit beside them; their Policy holds none until {@link
     * #reopenOptimizers}. Returns the models whose optimiser was closed.
     */
    List<String> closeUnsteppedOptimizers() {
        List<String> closed = new ArrayList<>();
        for (Policy p : List.copyOf(byId.values())) {
            if (p.optim() == null || p.optim().steps() != 0) continue;
            byId.put(p.id(), p.withOptim(null));
            p.optim().close();
            closed.add(p.id());
        }
        return closed;
    }

    /**
     * Makes the optimisers of {@code ids} again, as open() made them, from the present weights (the
     * masters from the files the weights were loaded from, as open() started them, unless the weights
     * have changed since: {@link #weightsChanged}).
     */
    void reopenOptimizers(List<String> ids) {
        for (String id : ids) {
            ModelOptimizer o = newOptimizer.get(id).get();
            try {
                startMasters(id, o);
            } catch (RuntimeException e) {
                o.close();
                throw e;
            }
            byId.put(id, byId.get(id).withOptim(o));
        }
    }

    /**
     * Starts the fp32 masters of {@code optim}, a new optimiser of model {@code id}'s present weights,
     * from the weight files the model was loaded from where they hold more than its dtype keeps (an
     * fp32 checkpoint, warm start or HF folder of a bfloat16 model): the masters take the files' exact
     * values, the weights stay their rounding; made from the weights alone, the masters lost the low
     * bits for good. Nothing for an optimiser without masters or a model whose files are in its dtype.
     */
    void startMasters(String id, ModelOptimizer optim) {
        Path dir = finerWeights.get(id);
        if (dir == null || !optim.keepsMasterWeights()) return;
        try (dev.drmas.model.SafeTensors st = dev.drmas.model.SafeTensors.open(dir)) {
            optim.startMastersFrom(Checkpoints.source(st));
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException(dir + ": cannot start the fp32 master weights of model '" + id + "' from its weight files ("
                    + e.getMessage() + ")", e);
        }
    }

    /**
     * The fp32 masters of model {@code id}'s present weights are in {@code dir} (the warm start that trained
     * them in this trainer has just saved them): its optimisers made from now on start their masters there.
     */
    void startMastersIn(String id, Path dir) {
        finerWeights.put(id, dir);
    }

    /** The models in {@code ids} were trained (by the warm start): their weights are no longer their files' rounding. */
    void weightsChanged(java.util.Collection<String> ids) {
        finerWeights.keySet().removeAll(ids);
    }

    /** Whether some weight file in {@code dir} holds a tensor of another dtype than {@code dtype}. */
    private static boolean holdsOther(Path dir, ScalarType dtype) {
        try (dev.drmas.model.SafeTensors st = dev.drmas.model.SafeTensors.open(dir)) {
            for (dev.drmas.model.SafeTensors.Info i : st.tensors().values()) if (i.dtype().scalarType() != dtype) return true;
        }
        return false;
    }

    /** Whether every tensor of the weight files in {@code dir} is of {@code dtype}. */
    private static boolean holdsOnly(Path dir, ScalarType dtype) {
        return !holdsOther(dir, dtype);
    }

    /** Whether the weight files in {@code dir} hold a parameter of {@code model} in another dtype than the model's. */
    private static boolean holdsMore(Path dir, CausalLm model) {
        // every dtype a file may hold (F32, BF16, F16) converts to fp32 exactly: the files' values are the masters' best start
        // whenever the model's dtype differs, which rounds them (or loses range: bfloat16 files of a float16 model)
        try (dev.drmas.model.SafeTensors st = dev.drmas.model.SafeTensors.open(dir)) {
            for (String name : model.parameters().keySet()) {
                dev.drmas.model.SafeTensors.Info i = st.tensors().get(name);
                if (i != null && i.dtype().scalarType() != model.dtype()) return true;
            }
        }
        return false;
    }

    Map<String, ModelOptimizer> optimizers() {
        Map<String, ModelOptimizer> m = new LinkedHashMap<>();
        byId.forEach((k, p) -> m.put(k, p.optim()));
        return m;
    }

    /** Per model, in order, the sum and the sum of squares of its parameters (fp64): what ranks compare. */
    double[] checksums() {
        double[] v = new double[2 * byId.size()];
        int i = 0;
        for (Policy p : byId.values()) {
            double[] c = checksum(p.model().parameters().values());
            v[i++] = c[0];
            v[i++] = c[1];
        }
        return v;
    }

    /** The sum and the sum of squares (fp64) of the values of {@code params}. */
    static double[] checksum(Iterable<Tensor> params) {
        try (PointerScope outer = new PointerScope()) {
            // both sums stay on the weights' device, read once at the end (an item() per tensor was two
            // host synchronisations per parameter on a GPU); the same fp64 additions in the same order
            Tensor acc = null;
            for (Tensor t : params) {
                if (acc == null) acc = torch.zeros(new long[] {2}, new TensorOptions(ScalarType.Double).device(new DeviceOptional(t.device())));
                // a scope per tensor: one around the loop held every weight's fp64 copy and its square
                // (16 bytes a parameter of the whole model) until the last
                try (PointerScope scope = new PointerScope()) {
                    Tensor d = t.detach().to(ScalarType.Double);
                    acc.add_(torch.stack(new TensorVector(d.sum(), d.mul(d).sum())));
                }
            }
            if (acc == null) return new double[2];
            Tensor host = acc.cpu();
            return new double[] {host.data_ptr_double().get(0), host.data_ptr_double().get(1)};
        }
    }

    /** Copies each model's tokenizer files next to its weights in {@code modelsDir}/id, so the folder is self-contained. */
    /** The files of a model folder that its tokenizer and generation settings come from: what a checkpoint or warm start copies. */
    // (vocab.json and merges.txt, tokenizer.model and added_tokens.json too: HF's slow tokenizers and the
    // conversions that start from them, use_fast=False or llama.cpp's, need them; copied where the source has them)
    static final List<String> TOKENIZER_FILES = List.of("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
            "generation_config.json", "chat_template.jinja", "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json");

    void copyTokenizers(Path modelsDir) {
        for (Policy p : byId.values()) {
            for (String f : TOKENIZER_FILES) {
                Path src = p.tokenizerDir().resolve(f);
                if (!Files.isRegularFile(src)) continue;
                try {
                    Files.copy(src, modelsDir.resolve(p.id()).resolve(f), StandardCopyOption.REPLACE_EXISTING);
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                }
            }
        }
    }

    /**
     * The frozen reference policy of the KL term: the weights RL starts from. A model that starts
     * from its path's weights reloads them from there. Any other (a warm start, with or without a
     * path, or random weights), at a fresh start, copies the model as it is now, and the first
     * checkpoint writes the copy to runDir/reference/id (saveReferences), so that a resumed run
     * keeps it; a resume loads it from there, or from the checkpoint's own run folder, and a model
     * with a path that has neither started from the path: its weights again. Without any the model
     * has none (null) and missingReferences says why: a reference made from the checkpoint's weights
     * would pull toward step N instead of the start, so training refuses to go on, but evaluation
     * never needs one.
     */
    private CausalLm reference(Path runDir, Path checkpoint, String id, ModelSpec spec, CausalLm model, ScalarType dtype,
                               Device device, boolean hadWarmStart) {
        Path dir = referenceDir(runDir, id);
        if (checkpoint == null && pathStarted.contains(id)) return CausalLm.load(spec.path(), dtype, device);
        if (checkpoint == null) {
            CausalLm ref = CausalLm.uninitialised(model.config(), dtype, device);  // every weight copied below
            try {
                copyWeights(model, ref);
            } catch (RuntimeException e) {
                ref.close();
                throw e;
            }
            unsavedReferences.add(id);
            startReferences.add(id);
            return ref;
        }
        Path kept = keptReference(runDir, checkpoint, id);
        if (kept != null) {
            if (!kept.equals(dir)) unsavedReferences.add(id);  // another run's: the next checkpoint has it in this run's folder too
            return CausalLm.load(kept, dtype, device);
        }
        Path other = otherRunReference(runDir, checkpoint, id);
        // a run that started from the path's weights keeps no copy of them (saveReferences removes a stale one); one
        // that had a warm start for this model started from it (Policies.open prefers it), not from the path
        if (spec.loadsWeights() && !hadWarmStart) return CausalLm.load(spec.path(), dtype, device);
        missingReferences.put(id, "the KL reference of model '" + id + "' is missing (no " + dir
                + (other == null ? "" : " nor " + other) + (hadWarmStart && spec.loadsWeights() ? "; it started from its warm start, "
                + "not from models." + id + ".path, whose weights cannot stand in" : "") + "); the checkpoint " + checkpoint + " cannot stand in for it (its "
                + "weights are not the ones the run started from). Restore the folder, turn ppo.reference_model off, or start "
                + "a new run (another run.name)");
        return null;
    }

    /** Stops training when a model's KL reference is missing (missingReferences): its KL term has nothing to pull toward. */
    void requireReferences() {
        if (missingReferences.isEmpty()) return;
        throw ConfigException.at("ppo.reference_model", String.join("; ", missingReferences.values()));
    }

    /**
     * The KL reference copy a resume from {@code checkpoint} loads for model {@code id}: this run's
     * reference/id, else that of the run folder the checkpoint belongs to (run.resume: another run's
     * step_N); null when neither has one (a path model that started from its path reloads the path).
     */
    static Path keptReference(Path runDir, Path checkpoint, String id) {
        Path dir = referenceDir(runDir, id);
        if (Files.isRegularFile(dir.resolve("config.json"))) return dir;
        Path other = otherRunReference(runDir, checkpoint, id);
        return other != null && Files.isRegularFile(other.resolve("config.json")) ? other : null;
    }

    /** The reference folder of the run that {@code checkpoint} belongs to, when that is another run than runDir's; else null. */
    private static Path otherRunReference(Path runDir, Path checkpoint, String id) {
        Path cpRun = checkpoint.toAbsolutePath().normalize().getParent();
        Path other = cpRun == null || cpRun.getParent() == null ? null : referenceDir(cpRun.getParent(), id);
        return other != null && other.equals(referenceDir(runDir, id).toAbsolutePath().normalize()) ? null : other;
    }

    static Path referenceDir(Path runDir, String id) {
        return runDir.resolve("reference").resolve(id);
    }

    private static void copyWeights(CausalLm from, CausalLm to) {
        try (PointerScope scope = new PointerScope(); NoGradGuard ng = new NoGradGuard()) {
            Map<String, Tensor> dst = to.parameters();
            from.parameters().forEach((k, t) -> dst.get(k).copy_(t.detach()));
        }
    }

    /** Makes every reference the models' present weights again: after a warm start in this trainer, RL starts from those. */
    void restartReferences() {
        for (Policy p : byId.values()) {
            if (p.reference() == null) continue;
            // the path's weights are no longer the start either: the copy goes to runDir/reference as the others'
            if (pathStarted.remove(p.id())) startReferences.add(p.id());
            if (!startReferences.contains(p.id())) continue;  // a resumed run's
            copyWeights(p.model(), p.reference());
            unsavedReferences.add(p.id());
        }
    }

    /**
     * Writes the references not yet in runDir/reference (before the checkpoint that relies on them),
     * as checkpoints are written: a temporary folder, synced, then renamed.
     */
    void saveReferences(Path runDir) throws IOException {
        // a model that starts from its path has no copy there; one left by an earlier start from a warm start
        // would be taken for this run's on a resume (reference())
        for (String id : pathStarted) {
            if (byId.get(id).reference() != null) Checkpoints.deleteTree(referenceDir(runDir, id));
        }
        for (String id : unsavedReferences) {
            Path dir = referenceDir(runDir, id);
            CausalLm ref = byId.get(id).reference();
            Checkpoints.replaceFolder(dir.resolveSibling(id + ".tmp"), dir, "the KL reference of model '" + id + "'", ref::save);
        }
        unsavedReferences.clear();
    }

    /**
     * What rank 0 writes into the run folder before any rank opens the models (the others read it
     * then): the built-in tokenizer, when a model has no path. Nothing else of {@link #open} writes
     * there, so every rank can open the models together (as they must: opening takes part in
     * collectives).
     */
    static void prepareRunFolder(RunConfig cfg, Path runDir) {
        for (String id : cfg.usedModels()) {
            if (cfg.models().get(id).path() == null) {
                builtinTokenizer(runDir);
                return;
            }
        }
    }

    /**
     * The built-in tokenizer of a run, written once into runDir/tokenizer, when its tokenizer.json is
     * not there: into tokenizer.tmp first, synced, then renamed, so that a run killed while writing
     * it leaves no half-written file that every later start would read. A file in the folder's place
     * is an error, as is a folder whose files are there but damaged (when it loads, naming the file).
     */
    static Path builtinTokenizer(Path runDir) {
        Path dir = runDir.resolve("tokenizer");
        if (!Files.isRegularFile(dir.resolve("tokenizer.json"))) {
            Path tmp = runDir.resolve("tokenizer.tmp");
            try {
                Durable.createFolders(runDir);
                Files.createDirectories(dir);  // (a file in its place: FileAlreadyExistsException, naming it)
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            try {
                Checkpoints.deleteTree(tmp);
                BuiltinTokenizer.writeTo(tmp);
                Durable.syncTree(tmp);
                Checkpoints.deleteTree(dir);  // a folder without its tokenizer.json (an earlier version killed while writing it)
                Files.move(tmp, dir, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
                Durable.syncFolder(runDir);
            } catch (IOException e) {
                throw new UncheckedIOException(runDir + ": cannot write the built-in tokenizer: " + e.getMessage(), e);
            }
        }
        return dir;
    }

    static Device device(RunConfig cfg) {
        boolean cuda = switch (cfg.run().device()) {
            case CPU -> false;
            case CUDA -> {
                if (!torch.cuda_is_available()) throw new IllegalArgumentException("run.device is cuda but LibTorch sees no CUDA device");
                yield true;
            }
            case AUTO -> torch.cuda_is_available();
        };
        if (!cuda) return new Device("cpu");
        // One GPU per rank (0 when not distributed): DistEnv.cudaDevice's rule, as ProcessGroup's.
        int index = dev.drmas.dist.DistEnv.fromEnvironment().cudaDevice((int) torch.cuda_device_count(),
                System.getenv("CUDA_VISIBLE_DEVICES"));
        // It becomes this thread's current device first, once, for LibTorch and for libdrmas (whose kernels
        // run on their tensors' device anyway), so that nothing of rank r lands on GPU 0: a device made
        // current creates its CUDA context, and any CUDA call before this one on a thread of the default
        // device 0 would put one of rank r's there.
        torch.setDeviceIndex((byte) index);
        if (dev.drmas.bindings.LibDrmas.cudaAvailable()) dev.drmas.bindings.LibDrmas.cudaSetDevice(index);
        // Training on it needs libdrmas's CUDA kernels (the PPO loss, the fused LM head): without them
        // the run would get through the warm start and a whole rollout and stop at its first update.
        // (without a usable device the check fails too, with CUDA's reason: a driver older than libdrmas's toolkit)
        String problem = null;
        if (dev.drmas.bindings.LibDrmas.cudaCompiled()) {
            try {
                dev.drmas.bindings.LibDrmas.cudaCheckDevice(index);
            } catch (dev.drmas.bindings.DrmasException e) {
                problem = dev.drmas.bindings.LibDrmas.lastError();  // the library's words, without the status
            }
        }
        requireKernels(cfg.run().device(), index, dev.drmas.bindings.LibDrmas.cudaCompiled(),
                dev.drmas.bindings.LibDrmas.cudaAvailable(), problem);
        // libdrmas's scratch (cudaMallocAsync) and LibTorch's cached free blocks share the GPU: a kernel call
        // that finds no room has LibTorch give its cache back and is made again, once (LibDrmas.setCudaReclaimer).
        // torch_cuda is reached in the lambda alone, on a CUDA run.
        dev.drmas.bindings.LibDrmas.setCudaReclaimer(() -> org.bytedeco.pytorch.global.torch_cuda.getAllocator().emptyCache());
        return new Device("cuda:" + index);
    }

    /**
     * Refuses a run that picked CUDA device {@code index} ({@code setting}: run.device, cuda or auto)
     * when libdrmas cannot run its kernels there: it was built without them ({@code drmasCompiled}
     * false: no nvcc at build time), its CUDA runtime sees no device although LibTorch does
     * ({@code drmasAvailable} false), or {@code deviceProblem} (drmas_cuda_check_device's message,
     * null when the check passed: e.g. no kernel image for the GPU's compute capability).
     */
    static void requireKernels(dev.drmas.config.RunSettings.Device setting, int index, boolean drmasCompiled, boolean drmasAvailable,
                               String deviceProblem) {
        String why;
        if (!drmasCompiled) {
            why = "libdrmas was built without its CUDA kernels (nvcc was not found when it was built), and training on a GPU "
                    + "needs them (the PPO loss and the fused LM head run in libdrmas): install the CUDA toolkit's nvcc and "
                    + "rebuild (./drmas --cuda build; README, \"Installing on a GPU server\")";
        } else if (!drmasAvailable) {
            why = "libdrmas's CUDA runtime sees no usable device although LibTorch does (an NVIDIA driver older than the CUDA "
                    + "toolkit libdrmas was compiled with?" + (deviceProblem != null ? " " + deviceProblem : "") + "): update the "
                    + "driver, or rebuild libdrmas with the machine's toolkit";
        } else if (deviceProblem != null) {
            why = deviceProblem;
        } else {
            return;
        }
        String which = setting == dev.drmas.config.RunSettings.Device.AUTO
                ? "is auto and LibTorch sees a GPU (cuda:" + index + ")" : "is cuda (cuda:" + index + ")";
        throw ConfigException.at("run.device", which + ", but " + why + "; or train on the CPU with run.device=cpu");
    }

    /** The dtype of a model's weights: models.<id>.dtype, on every device (the CPU runs bf16 too, slower, but the same path as a GPU). */
    static ScalarType dtype(ModelSpec spec, Device device) {
        return switch (spec.dtype()) {
            case FLOAT32 -> ScalarType.Float;
            case BFLOAT16 -> ScalarType.BFloat16;
            case FLOAT16 -> ScalarType.Half;
        };
    }

    /** What the run's log says about a model's precision: the CPU's reduced precision is slow, pure bf16 does not learn at small lr. */
    static java.util.List<String> precisionNotes(String id, ModelSpec spec, Device device) {
        java.util.List<String> n = new java.util.ArrayList<>();
        if (spec.dtype() == ModelSpec.Dtype.FLOAT32) return n;
        String dt = spec.dtype().configName();
        if (!device.is_cuda()) {
            n.add("models." + id + ".dtype is " + dt + " on the CPU: it runs (the same path as on a GPU), but several times "
                    + "slower than float32 there");
        }
        boolean fp16 = spec.dtype() == ModelSpec.Dtype.FLOAT16;
        ModelSpec.LossScaling scaling = spec.lossScaling();
        if (!spec.mixedPrecision()) {
            n.add("warning: models." + id + " trains in pure " + dt + " (master_dtype " + dt + "): weights, gradients and AdamW "
                    + "moments keep 8 (bfloat16) or 11 (float16) significant bits, so updates smaller than ~1/256 of a weight "
                    + "round to nothing" + (fp16 ? ", and without loss scaling small gradients may underflow to 0" : "")
                    + "; master_dtype: float32 (the default) keeps fp32 master weights" + (fp16 ? " and scales the loss" : ""));
        } else if (fp16 && scaling.mode() == ModelSpec.LossScaling.Mode.NONE) {
            n.add("warning: models." + id + " trains in float16 without loss scaling (loss_scale: none): gradients below "
                    + "float16's smallest value (6e-8) underflow to 0; loss_scale: dynamic (what auto, the default, means for "
                    + "float16) scales them");
        } else if (fp16 && scaling.mode() == ModelSpec.LossScaling.Mode.DYNAMIC) {
            n.add("models." + id + " trains in float16 with dynamic loss scaling: from " + dev.drmas.config.Check.num(spec.lossScaleInit())
                    + ", halved at each step skipped for an inf/NaN gradient, doubled after " + spec.lossScaleGrowthInterval()
                    + " steps taken in a row (model/" + id + "/loss_scale, model/" + id + "/skipped_steps)");
        } else if (fp16) {
            n.add("models." + id + " trains in float16 with a fixed loss scale of " + dev.drmas.config.Check.num(scaling.fixedScale())
                    + " (a step whose gradient is inf/NaN is skipped: model/" + id + "/skipped_steps)");
        }
        return n;
    }

    /** Frees the prompts each model's rollout engine kept through a rollout phase (rollout.prefix_cache). */
    void clearPrefixes() {
        for (Policy p : byId.values()) p.generator().clearPrefixes();
    }

    @Override
    public void close() {
        for (Policy p : byId.values()) {
            p.generator().clearPrefixes();
            if (p.optim() != null) p.optim().close();  // (none while the warm start trains)
            p.model().close();
            if (p.reference() != null) p.reference().close();
            p.tokenizer().close();
        }
        byId.clear();
    }
}
